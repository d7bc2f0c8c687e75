"""gather and the scatter family, with JAX's out-of-bounds modes.

``mode`` (lax's GatherScatterMode, by name):

- ``PROMISE_IN_BOUNDS``: XLA's native behaviour (gather clamps, scatter drops);
- ``CLIP``: indices are clamped so the whole window is in bounds (native for
  gather; scatter clamps the indices first);
- ``FILL_OR_DROP``: a gather whose window would leave the operand returns
  ``fill_value`` there (NaN / the extreme integer / True by default); scatter
  drops such updates (native);
- ``ONE_HOT`` (a gather strategy, for in-bounds indices the same result):
  out-of-bounds windows read zeros, as a one-hot product would give.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr

from lamina_mlir_lowering.hlo_helpers import is_inexact, compare, full_like, make_op, max_hlo, min_hlo
from lamina_mlir_lowering.lowering import lower_sub_jaxpr
from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, ir_constant

__all__ = ["mode_name", "default_fill_value"]

_MODE_BY_VALUE = {1: "CLIP", 2: "FILL_OR_DROP", 3: "PROMISE_IN_BOUNDS", 4: "ONE_HOT"}


def mode_name(mode: Any) -> str:
    """The GatherScatterMode's name for an enum member, a string or an int
    (None means FILL_OR_DROP, JAX's default for gathers)."""
    if mode is None:
        return "FILL_OR_DROP"
    name = getattr(mode, "name", None)
    if isinstance(name, str):
        return name.upper()
    if isinstance(mode, str):
        return mode.upper()
    return _MODE_BY_VALUE[int(mode)]


def default_fill_value(dtype: np.dtype[Any]) -> Any:
    """JAX's gather fill: NaN for inexact types, the most negative value of
    signed types, the largest of unsigned ones, True for bool."""
    if dtype == dtypes.bool_:
        return True
    if is_inexact(dtype):
        return np.nan
    return dtypes.lowest(dtype) if dtype in dtypes.SIGNED else dtypes.highest(dtype)


def _gather_dnums(dnums: Any, index_vector_dim: int) -> ir.Attribute:
    return hlo.GatherDimensionNumbers.get(
        offset_dims=list(dnums.offset_dims),
        collapsed_slice_dims=list(dnums.collapsed_slice_dims),
        operand_batching_dims=list(getattr(dnums, "operand_batching_dims", ())),
        start_indices_batching_dims=list(getattr(dnums, "start_indices_batching_dims", ())),
        start_index_map=list(dnums.start_index_map),
        index_vector_dim=index_vector_dim)


def _gather(ctx: LoweringRuleContext, operand: Value, indices: Value, *,
            dimension_numbers: Any, slice_sizes: Sequence[int], mode: Any = None,
            fill_value: Any = None, indices_are_sorted: bool = False,
            **params: Any) -> Sequence[Value]:
    operand_aval, indices_aval = ctx.avals_in
    out_aval = ctx.avals_out[0]
    dnums = _gather_dnums(dimension_numbers, indices_aval.ndim - 1)
    gathered = hlo.GatherOp(operand, indices, dnums, dense_i64_array(slice_sizes),
                            indices_are_sorted=ir.BoolAttr.get(bool(indices_are_sorted))).result
    mode_str = mode_name(mode)
    if mode_str not in ("FILL_OR_DROP", "ONE_HOT"):
        return [gathered]
    if mode_str == "ONE_HOT":
        fill_value = 0
    # Mask the batch positions whose window would not lie in bounds.
    batch_rank = indices_aval.ndim - 1
    idx_dtype = indices_aval.dtype
    starts_map = list(dimension_numbers.start_index_map)
    upper = np.array([operand_aval.shape[d] - slice_sizes[d] for d in starts_map], idx_dtype)
    types = ctx.module_context.types
    upper_b = hlo.broadcast_in_dim(types.tensor(indices_aval), ir_constant(upper),
                                   dense_i64_array([batch_rank]))
    in_bounds = hlo.and_(
        compare(indices, full_like(0, indices_aval), "GE", idx_dtype),
        compare(indices, upper_b, "LE", idx_dtype))
    mask_aval = ShapedArray(indices_aval.shape[:-1], dtypes.bool_)
    all_in = _reduce_and_last(ctx, in_bounds, indices_aval.update(dtype=dtypes.bool_), mask_aval)
    out_rank = out_aval.ndim
    batch_dims_in_out = [d for d in range(out_rank) if d not in set(dimension_numbers.offset_dims)]
    mask = hlo.broadcast_in_dim(types.shaped(out_aval.shape, dtypes.bool_), all_in,
                                dense_i64_array(batch_dims_in_out))
    fill = fill_value if fill_value is not None else default_fill_value(out_aval.dtype)
    return [hlo.select(mask, gathered, full_like(fill, out_aval))]


def _reduce_and_last(ctx: LoweringRuleContext, x: Value, aval: ShapedArray,
                     out: ShapedArray) -> Value:
    types = ctx.module_context.types
    scalar = types.shaped((), dtypes.bool_)
    op = hlo.ReduceOp([types.tensor(out)], [x], [ir_constant(np.array(True))],
                      dense_i64_array([aval.ndim - 1]))
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([hlo.and_(block.arguments[0], block.arguments[1])])
    return op.result


def _scatter_dnums(dnums: Any, index_vector_dim: int) -> ir.Attribute:
    return hlo.ScatterDimensionNumbers.get(
        update_window_dims=list(dnums.update_window_dims),
        inserted_window_dims=list(dnums.inserted_window_dims),
        input_batching_dims=list(getattr(dnums, "operand_batching_dims", ())),
        scatter_indices_batching_dims=list(getattr(dnums, "scatter_indices_batching_dims", ())),
        scattered_dims_to_operand_dims=list(dnums.scatter_dims_to_operand_dims),
        index_vector_dim=index_vector_dim)


def _clamp_scatter_indices(ctx: LoweringRuleContext, indices: Value, dnums: Any,
                           operand_aval: ShapedArray, indices_aval: ShapedArray,
                           updates_aval: ShapedArray) -> Value:
    """Indices clamped so each update window lies inside the operand (CLIP)."""
    window: list[int] = []
    pos = 0
    skipped = set(dnums.inserted_window_dims) | set(getattr(dnums, "operand_batching_dims", ()))
    for d in range(operand_aval.ndim):
        if d in skipped:
            window.append(1)
        else:
            window.append(updates_aval.shape[dnums.update_window_dims[pos]])
            pos += 1
    upper = np.array([operand_aval.shape[d] - window[d]
                      for d in dnums.scatter_dims_to_operand_dims], indices_aval.dtype)
    types = ctx.module_context.types
    upper_b = hlo.broadcast_in_dim(types.tensor(indices_aval), ir_constant(upper),
                                   dense_i64_array([indices_aval.ndim - 1]))
    return hlo.clamp(full_like(0, indices_aval), indices, upper_b)


def _scatter_rule(combine: str | None) -> LoweringRule:
    """A scatter whose update region ``combine``s old and new values
    (``None``: the ``update_jaxpr`` param decides, or the new value wins)."""

    def rule(ctx: LoweringRuleContext, operand: Value, indices: Value,
             updates: Value, *, dimension_numbers: Any, mode: Any = None,
             indices_are_sorted: bool = False, unique_indices: bool = False,
             update_jaxpr: Any = None, update_consts: Sequence[Any] = (),
             **params: Any) -> Sequence[Value]:
        operand_aval, indices_aval, updates_aval = ctx.avals_in[:3]
        if mode_name(mode) == "CLIP":
            indices = _clamp_scatter_indices(ctx, indices, dimension_numbers, operand_aval,
                                             indices_aval, updates_aval)
        types = ctx.module_context.types
        dnums = _scatter_dnums(dimension_numbers, indices_aval.ndim - 1)
        op = hlo.ScatterOp([ctx.out_type()], [operand], indices, [updates], dnums,
                           indices_are_sorted=ir.BoolAttr.get(bool(indices_are_sorted)),
                           unique_indices=ir.BoolAttr.get(bool(unique_indices)))
        dtype = operand_aval.dtype
        scalar = types.shaped((), dtype)
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            old, new = block.arguments
            hlo.return_([_combine(ctx, combine, old, new, dtype, scalar, update_jaxpr,
                                  update_consts)])
        return [op.result]

    rule.__name__ = f"lower[scatter {combine}]"
    return rule


def _combine(ctx: LoweringRuleContext, combine: str | None, old: Value, new: Value,
             dtype: np.dtype[Any], scalar: ir.Type, update_jaxpr: Any,
             update_consts: Sequence[Any]) -> Value:
    if combine == "max":
        return max_hlo(old, new, dtype, scalar)
    if combine == "min":
        return min_hlo(old, new, dtype, scalar)
    if combine is not None:
        return make_op(combine, [scalar], [old, new]).result
    if update_jaxpr is None:
        return new
    body = update_jaxpr
    if isinstance(body, Jaxpr) and body.constvars:
        body = ClosedJaxpr(body, list(update_consts))
    scalar_aval = ShapedArray((), dtype)
    sub = ctx.replace(avals_in=[scalar_aval, scalar_aval], avals_out=[scalar_aval])
    out, = lower_sub_jaxpr(sub, body, [old, new], name="update")
    return out


register_lowering(lax.gather_p, _gather)
register_lowering(lax.scatter_p, _scatter_rule(None))
register_lowering(lax.scatter_add_p, _scatter_rule("stablehlo.add"))
register_lowering(lax.scatter_sub_p, _scatter_rule("stablehlo.subtract"))
register_lowering(lax.scatter_mul_p, _scatter_rule("stablehlo.multiply"))
register_lowering(lax.scatter_min_p, _scatter_rule("min"))
register_lowering(lax.scatter_max_p, _scatter_rule("max"))
