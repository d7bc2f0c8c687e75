"""Shape-changing primitives: iota, broadcasts, reshapes, transposes, pads,
concatenation, slicing and dynamic (update) slicing, split."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import lax

from lamina_mlir_lowering.hlo_helpers import broadcast_in_dim, convert_hlo, make_op
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, i64_attr

__all__ = ["common_index_type", "split_lowering"]


def _iota(ctx: LoweringRuleContext, *, dimension: int, **params: Any) -> Sequence[Value]:
    return [hlo.iota(ctx.out_type(), i64_attr(dimension))]


def _broadcast_in_dim(ctx: LoweringRuleContext, x: Value, *dyn: Value,
                      broadcast_dimensions: Sequence[int], **params: Any) -> Sequence[Value]:
    if dyn:
        raise ctx.error("broadcast_in_dim with dynamic shapes is not supported")
    return [broadcast_in_dim(ctx.out_type(), x, broadcast_dimensions)]


def _reshape(ctx: LoweringRuleContext, x: Value, *dyn: Value,
             dimensions: Sequence[int] | None = None, **params: Any) -> Sequence[Value]:
    if dyn:
        raise ctx.error("reshape with dynamic shapes is not supported")
    if dimensions is not None and tuple(dimensions) != tuple(range(len(dimensions))):
        aval = ctx.avals_in[0]
        permuted = ctx.module_context.types.shaped(
            [aval.shape[d] for d in dimensions], aval.dtype)
        x = _transpose_op(ctx, x, permuted, dimensions)
    return [make_op("stablehlo.reshape", [ctx.out_type()], [x]).result]


def _transpose_op(ctx: LoweringRuleContext, x: Value, result_type: Any,
                  permutation: Sequence[int]) -> Value:
    attrs: dict[str, Any] = {"permutation": ctx.module_context.types.i64_array(permutation)}
    return make_op("stablehlo.transpose", [result_type], [x], attrs).result


def _squeeze(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    return [hlo.reshape(ctx.out_type(), x)]


def _transpose(ctx: LoweringRuleContext, x: Value, *, permutation: Sequence[int],
               **params: Any) -> Sequence[Value]:
    return [_transpose_op(ctx, x, ctx.out_type(), permutation)]


def _rev(ctx: LoweringRuleContext, x: Value, *, dimensions: Sequence[int],
         **params: Any) -> Sequence[Value]:
    return [hlo.reverse(x, dense_i64_array(dimensions))]


def _pad(ctx: LoweringRuleContext, x: Value, padding_value: Value, *,
         padding_config: Sequence[tuple[int, int, int]], **params: Any) -> Sequence[Value]:
    # StableHLO's pad takes negative edge padding (it crops), like lax.pad.
    low, high, interior = zip(*padding_config) if padding_config else ((), (), ())
    return [hlo.pad(x, padding_value, dense_i64_array(low), dense_i64_array(high),
                    dense_i64_array(interior))]


def _concatenate(ctx: LoweringRuleContext, *xs: Value, dimension: int,
                 **params: Any) -> Sequence[Value]:
    return [hlo.concatenate(list(xs), i64_attr(dimension))]


def _slice(ctx: LoweringRuleContext, x: Value, *, start_indices: Sequence[int],
           limit_indices: Sequence[int], strides: Sequence[int] | None = None,
           **params: Any) -> Sequence[Value]:
    steps = strides if strides is not None else (1,) * len(start_indices)
    return [hlo.slice(x, dense_i64_array(start_indices), dense_i64_array(limit_indices),
                      dense_i64_array(steps))]


def common_index_type(ctx: LoweringRuleContext, indices: Sequence[Value],
                      avals: Sequence[Any]) -> Sequence[Value]:
    """Scalar start indices converted to one integer type (StableHLO wants
    them alike); the widest of the given ones, signed if any is signed."""
    if not indices:
        return []
    dts = {a.dtype for a in avals}
    if len(dts) == 1:
        return list(indices)
    target = max(dts, key=lambda d: (d.itemsize, d.kind == "i"))
    return [convert_hlo(x, a, a.update(dtype=target)) for x, a in zip(indices, avals)]


def _dynamic_slice(ctx: LoweringRuleContext, x: Value, *starts: Value,
                   slice_sizes: Sequence[int], **params: Any) -> Sequence[Value]:
    # XLA clamps the start indices so the slice stays in bounds, as lax specifies.
    idx = common_index_type(ctx, starts, ctx.avals_in[1:])
    return [hlo.dynamic_slice(x, idx, dense_i64_array(slice_sizes))]


def _dynamic_update_slice(ctx: LoweringRuleContext, x: Value, update: Value,
                          *starts: Value, **params: Any) -> Sequence[Value]:
    idx = common_index_type(ctx, starts, ctx.avals_in[2:])
    return [hlo.dynamic_update_slice(x, update, idx)]


def split_lowering(ctx: LoweringRuleContext, x: Value, *, sizes: Sequence[int], axis: int,
                   **params: Any) -> Sequence[Value]:
    """JAX's ``split`` (pieces of ``sizes`` along ``axis``); tracing-core has no
    ``split`` primitive yet, so the layer that defines one registers this."""
    aval = ctx.avals_in[0]
    outs = []
    start = 0
    for size in sizes:
        limits = list(aval.shape)
        starts = [0] * aval.ndim
        starts[axis] = start
        limits[axis] = start + int(size)
        outs.append(hlo.slice(x, dense_i64_array(starts), dense_i64_array(limits),
                              dense_i64_array([1] * aval.ndim)))
        start += int(size)
    return outs


register_lowering(lax.iota_p, _iota)
register_lowering(lax.broadcast_in_dim_p, _broadcast_in_dim)
register_lowering(lax.reshape_p, _reshape)
register_lowering(lax.squeeze_p, _squeeze)
register_lowering(lax.transpose_p, _transpose)
register_lowering(lax.rev_p, _rev)
register_lowering(lax.pad_p, _pad)
register_lowering(lax.concatenate_p, _concatenate)
register_lowering(lax.slice_p, _slice)
register_lowering(lax.dynamic_slice_p, _dynamic_slice)
register_lowering(lax.dynamic_update_slice_p, _dynamic_update_slice)


def _optimization_barrier(ctx: LoweringRuleContext, *xs: Value) -> Sequence[Value]:
    return list(hlo.OptimizationBarrierOp(list(xs)).results)


register_lowering(lax.optimization_barrier_p, _optimization_barrier)
