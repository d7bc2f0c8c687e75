"""Lowering of ``shard_map_p``: a manual computation over the module's mesh.

The body is lowered per device (block types) inside ``sdy.manual_computation``
(or GSPMD's full-to-shard / shard-to-full custom calls), with a
``ShardingAxisContext`` that makes the shard_map's manual axes (and those of
enclosing shard_maps) available to collectives. Its ops are named
``jit(f)/shard_map(g)/psum`` and keep their source lines.

The module's mesh (``@mesh``, chosen by the program from the shardings it
meets, the shard_map's mesh first) must be the shard_map's: same axis names
and sizes. In a module of one partition the body is inlined (every manual
axis has size 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.shard_map import shard_map_p

from lamina_mlir_lowering.axis_context import ShardingAxisContext
from lamina_mlir_lowering.lowering import lower_sub_jaxpr, manual_computation
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.sharding import MeshShape, ShardingSpec
from lamina_mlir_lowering.types import Value

__all__: list[str] = []


def _program_mesh(ctx: LoweringRuleContext, mesh: Any, name: str) -> MeshShape:
    want = MeshShape(tuple(mesh.axis_names), tuple(mesh.axis_sizes))
    module_mesh = ctx.module_context.mesh
    if module_mesh is None:
        if want.size == 1:
            return want
        raise ctx.error(f"shard_map({name}) over the mesh {want.shape} is lowered into a "
                        f"module without a mesh (one partition); lower it through jit")
    if (module_mesh.axis_names, module_mesh.axis_sizes) != (want.axis_names, want.axis_sizes):
        raise ctx.error(f"shard_map({name}) runs over the mesh {want.shape}, but the program's "
                        f"mesh is {module_mesh.shape}; one program uses one mesh")
    return module_mesh


def _lower_shard_map(ctx: LoweringRuleContext, *args: Value, jaxpr: ClosedJaxpr, mesh: Any,
                     in_specs: Sequence[tuple[tuple[str, ...], ...]],
                     out_specs: Sequence[tuple[tuple[str, ...], ...]],
                     manual_axes: tuple[str, ...], name: str, **_: Any) -> Sequence[Value]:
    module_mesh = _program_mesh(ctx, mesh, name)
    outer = ctx.axis_context
    if outer is not None and not isinstance(outer, ShardingAxisContext):
        raise ctx.error(f"shard_map({name}) cannot run inside pmap's replicas; use jit")
    already = tuple(outer.manual_axes or ()) if isinstance(outer, ShardingAxisContext) else ()
    if clash := [a for a in manual_axes if a in already]:
        raise ctx.error(f"shard_map({name}) is manual over {tuple(clash)}, which an enclosing "
                        f"shard_map already made manual")
    all_manual = tuple(a for a in module_mesh.axis_names if a in already or a in manual_axes)
    axis_ctx = ShardingAxisContext(module_mesh, all_manual)
    label = f"shard_map({name})"

    def body(blocks: Sequence[Value]) -> list[Value]:
        return lower_sub_jaxpr(ctx, jaxpr, blocks, axis_context=axis_ctx, label=label)

    if ctx.module_context.mesh is None:
        return body(args)
    types = ctx.module_context.types
    return manual_computation(
        ctx.module_context, body, args, mesh=module_mesh,
        in_specs=[ShardingSpec(module_mesh, s) for s in in_specs],
        out_specs=[ShardingSpec(module_mesh, s) for s in out_specs],
        local_in_types=[types.tensor(a) for a in jaxpr.in_avals],
        local_out_types=[types.tensor(a) for a in jaxpr.out_avals],
        out_types=ctx.out_types(), manual_axes=manual_axes, loc=ctx.loc)


register_lowering(shard_map_p, _lower_shard_map)
