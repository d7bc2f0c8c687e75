"""Lowering rules of ``pjit_p`` and ``sharding_constraint_p``.

A nested ``jit`` becomes a ``func.call`` to a private function named after
the inner function (``@inner``; ``<lambda>`` gives ``@_lambda``), emitted
once per distinct callee and called again for every later use (the jaxpr
from the tracing cache is the same object); ``inline=True`` lowers the body
in place. Explicit shardings of a nested jit become sharding constraints on
the call's operands and results. A sharding constraint becomes Shardy's
``sdy.sharding_constraint`` (or a ``Sharding`` custom call in GSPMD modules)
over the module's mesh; in a module of one partition (a single device, or
the replicas of a ``pmap``) it is the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_mlir_lowering import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.lowering import call_jaxpr, lower_sub_jaxpr
from lamina_tracing_core.avals import ShapedArray

from lamina_sharded_jit.primitive import pjit_p
from lamina_sharded_jit.sharding_constraint import sharding_constraint_p
from lamina_sharded_jit.shardings import nested_spec

__all__ = ["constrain"]

#: The module-level Shardy mesh symbol lower_jaxpr_to_module emits.
MESH_SYMBOL = "mesh"


def constrain(ctx: LoweringRuleContext, x: Any, sharding: Any, aval: ShapedArray,
              where: str) -> Any:
    """``x`` with a sharding constraint; unchanged in modules of one partition
    (single-device ones, and replica-mode ones such as a ``pmap``'s: each
    replica runs the whole inner function on its one device, so there is
    nothing to partition and the module has no mesh to name)."""
    mctx = ctx.module_context
    if mctx.num_partitions == 1:
        return x
    spec = nested_spec(sharding, aval, where)
    if spec is None:
        return x
    if mctx.sharding_format == "shardy":
        return sdy.ShardingConstraintOp(x, spec.to_sdy_attr(MESH_SYMBOL)).result
    op = hlo.CustomCallOp([x.type], [x], "Sharding")
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(spec.to_hlo_sharding_str())
    return op.result


def _pjit_lowering(ctx: LoweringRuleContext, *args: Any, jaxpr: Any, in_shardings: Any,
                   out_shardings: Any, name: str, inline: bool, **_: Any) -> Sequence[Any]:
    operands = [constrain(ctx, a, s, aval, f"argument #{i} of jit({name})")
                for i, (a, s, aval) in enumerate(zip(args, in_shardings, ctx.avals_in))]
    if inline:
        outs = lower_sub_jaxpr(ctx, jaxpr, operands, name=name)
    else:
        outs = call_jaxpr(ctx, jaxpr, operands, name=name)
    return [constrain(ctx, o, s, aval, f"result #{i} of jit({name})")
            for i, (o, s, aval) in enumerate(zip(outs, out_shardings, ctx.avals_out))]


def _sharding_constraint_lowering(ctx: LoweringRuleContext, x: Any, *, sharding: Any,
                                  unconstrained_dims: frozenset[int]) -> Sequence[Any]:
    return [constrain(ctx, x, sharding, ctx.avals_in[0],
                      f"with_sharding_constraint at {ctx.source_info}")]


register_lowering(pjit_p, _pjit_lowering)
register_lowering(sharding_constraint_p, _sharding_constraint_lowering)
