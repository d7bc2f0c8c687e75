"""Collectives over named axes, given the module's axis context.

Groups of devices come from the axis context (``ReplicaAxisContext``:
replica ids; ``ShardingAxisContext``: partition ids, plus a channel handle
and ``use_global_device_ids`` on every collective, as JAX emits in SPMD
mode). ``axis_index_groups`` subdivide each group by axis index. Integer
entries in ``psum``'s ``axes`` are positional axes, reduced locally first.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import lax

from lamina_mlir_lowering.axis_context import (
    AxisContext,
    ShardingAxisContext,
    UnboundAxisError,
)
from lamina_mlir_lowering.hlo_helpers import make_op, max_hlo, min_hlo
from lamina_mlir_lowering.lowering import manual_computation
from lamina_mlir_lowering.sharding import ShardingSpec
from lamina_mlir_lowering.lax_rules.reductions import monoid_reduce
from lamina_mlir_lowering.rules import (
    LoweringError,
    LoweringRule,
    LoweringRuleContext,
    register_lowering,
)
from lamina_mlir_lowering.types import (
    Value,
    dense_i64_array,
    dense_int_elements,
    i64_attr,
    ir_constant,
)

__all__ = ["replica_groups", "replica_groups_attr"]

#: The channel id and type (1 = device to device) JAX gives SPMD collectives.
COLLECTIVE_CHANNEL_ID = 1
DEVICE_TO_DEVICE_TYPE = 1


def _axis_context(ctx: LoweringRuleContext, names: Sequence[Hashable]) -> AxisContext:
    axis_ctx = ctx.axis_context
    if axis_ctx is None:
        raise LoweringError(
            f"{ctx.where()} uses the named axes {tuple(names)}, but the module has no axis "
            f"context (collectives need pmap's ReplicaAxisContext or an SPMD "
            f"ShardingAxisContext)")
    return axis_ctx


def _names(axis_name: Any) -> tuple[Hashable, ...]:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def replica_groups(ctx: LoweringRuleContext, names: Sequence[Hashable],
                   axis_index_groups: Sequence[Sequence[int]] | None) -> list[list[int]]:
    """Device groups of a collective over ``names`` (subdivided by
    ``axis_index_groups``: positions along the axes)."""
    axis_ctx = _axis_context(ctx, names)
    try:
        groups = [list(g) for g in axis_ctx.groups(names)]
    except UnboundAxisError as e:
        raise LoweringError(f"{e} (while lowering {ctx.where()})") from None
    if axis_index_groups is not None:
        groups = [[g[i] for i in index_group] for g in groups
                  for index_group in axis_index_groups]
    return groups


def replica_groups_attr(groups: Sequence[Sequence[int]]) -> ir.DenseIntElementsAttr:
    """``dense<[[...], ...]> : tensor<GxNxi64>``; ragged groups are padded with -1."""
    padded = np.array(list(itertools.zip_longest(*groups, fillvalue=-1)), np.int64).T
    return dense_int_elements(np.ascontiguousarray(padded))


def _spmd_kwargs(ctx: LoweringRuleContext, global_ids: bool = True) -> dict[str, Any]:
    if not isinstance(ctx.axis_context, ShardingAxisContext):
        return {}
    kwargs: dict[str, Any] = {
        "channel_handle": hlo.ChannelHandle.get(COLLECTIVE_CHANNEL_ID, DEVICE_TO_DEVICE_TYPE)}
    if global_ids:
        kwargs["use_global_device_ids"] = True
    return kwargs


def _combiner(monoid: str, a: Value, b: Value, dtype: np.dtype[Any],
              t: ir.Type) -> Value:
    if monoid == "max":
        return max_hlo(a, b, dtype, t)
    if monoid == "min":
        return min_hlo(a, b, dtype, t)
    return make_op("stablehlo.add", [t], [a, b]).result


def _allreduce(monoid: str) -> LoweringRule:
    local_reduce = monoid_reduce(monoid)

    def rule(ctx: LoweringRuleContext, *args: Value, axes: Sequence[Any],
             axis_index_groups: Sequence[Sequence[int]] | None = None,
             **params: Any) -> Sequence[Value]:
        positional = tuple(a for a in axes if isinstance(a, int))
        named = tuple(a for a in axes if not isinstance(a, int))
        outs = []
        for x, aval_in, aval_out in zip(args, ctx.avals_in, ctx.avals_out):
            if positional:
                sub = ctx.replace(avals_in=[aval_in], avals_out=[aval_out])
                x, = local_reduce(sub, x, axes=positional)
            if named:
                x = _all_reduce(ctx, x, aval_out.dtype, monoid,
                                replica_groups(ctx, named, axis_index_groups))
            outs.append(x)
        return outs

    rule.__name__ = f"lower[all_reduce {monoid}]"
    return rule


def _all_reduce(ctx: LoweringRuleContext, x: Value, dtype: np.dtype[Any], monoid: str,
                groups: list[list[int]]) -> Value:
    op = hlo.AllReduceOp([x.type], [x], replica_groups_attr(groups), **_spmd_kwargs(ctx))
    scalar = ctx.module_context.types.shaped((), dtype)
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([_combiner(monoid, block.arguments[0], block.arguments[1], dtype, scalar)])
    result: Value = op.results[0]
    return result


def _all_gather(ctx: LoweringRuleContext, x: Value, *, all_gather_dimension: int,
                axis_name: Any, axis_index_groups: Sequence[Sequence[int]] | None = None,
                tiled: bool = False, **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    types = ctx.module_context.types
    groups = replica_groups(ctx, _names(axis_name), axis_index_groups)
    if not tiled:
        shape = list(aval.shape)
        shape.insert(all_gather_dimension, 1)
        x = hlo.reshape(types.shaped(shape, aval.dtype), x)
    op = hlo.AllGatherOp([ctx.out_type()], [x], i64_attr(all_gather_dimension),
                         replica_groups_attr(groups), **_spmd_kwargs(ctx))
    return [op.results[0]]


def _ppermute(ctx: LoweringRuleContext, x: Value, *, axis_name: Any,
              perm: Sequence[tuple[int, int]], **params: Any) -> Sequence[Value]:
    groups = replica_groups(ctx, _names(axis_name), None)
    pairs = [(g[src], g[dst]) for g in groups for src, dst in perm]
    attr = dense_int_elements(np.asarray(pairs, np.int64).reshape(len(pairs), 2))
    op = hlo.CollectivePermuteOp(x, attr, results=[x.type], **_spmd_kwargs(ctx, False))
    return [op.result]


def _all_to_all(ctx: LoweringRuleContext, x: Value, *, split_axis: int, concat_axis: int,
                axis_name: Any, axis_index_groups: Sequence[Sequence[int]] | None = None,
                **params: Any) -> Sequence[Value]:
    groups = replica_groups(ctx, _names(axis_name), axis_index_groups)
    count = len(groups[0])
    if any(len(g) != count for g in groups):
        raise ctx.error("all_to_all needs axis_index_groups of equal sizes")
    if count == 1:
        return [x]
    op = hlo.AllToAllOp([x], i64_attr(split_axis), i64_attr(concat_axis), i64_attr(count),
                        replica_groups_attr(groups), results=[ctx.out_type()],
                        **_spmd_kwargs(ctx, False))
    return [op.results[0]]


def _reduce_scatter(ctx: LoweringRuleContext, x: Value, *, scatter_dimension: int,
                    axis_name: Any, axis_index_groups: Sequence[Sequence[int]] | None = None,
                    **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    types = ctx.module_context.types
    groups = replica_groups(ctx, _names(axis_name), axis_index_groups)
    count = len(groups[0])
    shape = list(aval.shape)
    shape[scatter_dimension] //= count
    op = hlo.ReduceScatterOp(types.shaped(shape, aval.dtype), x, i64_attr(scatter_dimension),
                             replica_groups_attr(groups), **_spmd_kwargs(ctx))
    scalar = types.shaped((), aval.dtype)
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([_combiner("add", block.arguments[0], block.arguments[1], aval.dtype,
                               scalar)])
    out = op.result
    if tuple(shape) != ctx.avals_out[0].shape:
        out = hlo.reshape(ctx.out_type(), out)
    return [out]


def _axis_index(ctx: LoweringRuleContext, *, axis_name: Any, **params: Any) -> Sequence[Value]:
    """The device's position along ``axis_name`` (several names: the
    row-major position over them), from the replica or partition id."""
    names = _names(axis_name)
    axis_ctx = _axis_context(ctx, names)
    mctx = ctx.module_context
    mesh = mctx.mesh
    if (isinstance(axis_ctx, ShardingAxisContext) and mesh is not None
            and mctx.sharding_format == "shardy"
            and len(axis_ctx.axis_names) < len(mesh.axis_names)):
        # The partition id means nothing to the partitioner while some mesh
        # axes are automatic: read it where the rest are manual too.
        rest = tuple(a for a in mesh.axis_names if a not in axis_ctx.axis_names)
        scalar = mctx.types.shaped((), np.dtype(np.int32))
        index = manual_computation(
            mctx, lambda _: [_device_index(ctx, axis_ctx, names, scalar)], [], mesh=mesh,
            in_specs=[], out_specs=[ShardingSpec.replicate(mesh, 0)], local_in_types=[],
            local_out_types=[scalar], out_types=[scalar], manual_axes=rest, loc=ctx.loc)[0]
    else:
        index = _device_index(ctx, axis_ctx, names,
                              mctx.types.shaped((), np.dtype(np.int32)))
    return [hlo.convert(mctx.types.tensor(ctx.avals_out[0]), index)]


def _device_index(ctx: LoweringRuleContext, axis_ctx: Any, names: Sequence[Any],
                  result: ir.Type) -> Value:
    """The row-major position along ``names`` of this device, as an int32."""
    types = ctx.module_context.types
    u32 = np.dtype(np.uint32)
    if isinstance(axis_ctx, ShardingAxisContext):
        device = hlo.partition_id()
        positions = axis_ctx.mesh_positions()
        if positions is not None:
            # The mesh is not in device-assignment order: look the partition's
            # mesh position up.
            table = ir_constant(np.asarray(positions, u32))
            picked = hlo.dynamic_slice(table, [device], dense_i64_array([1]))
            device = hlo.reshape(types.shaped((), u32), picked)
    else:
        device = hlo.replica_id()
    index: Value | None = None
    try:
        for name in names:
            div = ir_constant(np.array(axis_ctx.axis_index_divisor(name), u32))
            size = axis_ctx.axis_size(name)
            along = hlo.remainder(hlo.divide(device, div), ir_constant(np.array(size, u32)))
            if index is None:
                index = along
            else:
                index = hlo.add(hlo.multiply(index, ir_constant(np.array(size, u32))), along)
    except UnboundAxisError as e:
        raise LoweringError(f"{e} (while lowering {ctx.where()})") from None
    assert index is not None
    return hlo.convert(result, index)


register_lowering(lax.psum_p, _allreduce("add"))
register_lowering(lax.psum_invariant_p, _allreduce("add"))
register_lowering(lax.pmax_p, _allreduce("max"))
register_lowering(lax.pmin_p, _allreduce("min"))
register_lowering(lax.all_gather_p, _all_gather)
register_lowering(lax.all_gather_invariant_p, _all_gather)  # the same gather; another type
register_lowering(lax.ppermute_p, _ppermute)
register_lowering(lax.all_to_all_p, _all_to_all)
register_lowering(lax.reduce_scatter_p, _reduce_scatter)
register_lowering(lax.axis_index_p, _axis_index)
register_lowering(lax.pvary_p, lambda ctx, x, **params: [x])
# unreduced/reduced values: the casts move no data; the sum of summands is an all-reduce
register_lowering(lax.manual_types.unreduced_psum_p, _allreduce("add"))
for _cast in (lax.manual_types.vary_unreduced_cast_p, lax.manual_types.preduced_p,
              lax.manual_types.reduced_vary_cast_p):
    register_lowering(_cast, lambda ctx, x, **params: [x])
