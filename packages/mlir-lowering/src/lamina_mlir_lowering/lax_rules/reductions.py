"""Reductions: the monoid reductions, generic ``reduce`` (a body region from
a jaxpr), argmax/argmin (a variadic reduce over values and indices),
cumulative reductions and windowed reductions (``reduce_window``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr

from lamina_mlir_lowering.hlo_helpers import is_inexact, compare, make_op, max_hlo, min_hlo
from lamina_mlir_lowering.lowering import lower_sub_jaxpr
from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, dense_int_elements, ir_constant

__all__ = [
    "identity_value", "Combiner", "monoid_reduce", "reduce_window", "reduce_lowering",
    "reduce_window_lowering", "reduce_window_monoid_lowering",
]

#: Builds ``combine(a, b)`` for scalars of one dtype inside a reducer region.
Combiner = Callable[[Value, Value, np.dtype[Any], ir.Type], Value]


def _op_combiner(name: str) -> Combiner:
    return lambda a, b, dtype, t: make_op(name, [t], [a, b]).result


def _logaddexp(a: Value, b: Value, dtype: np.dtype[Any], t: ir.Type) -> Value:
    # max(a, b) + log1p(exp(-|a - b|)), with -inf + -inf staying -inf.
    hi = max_hlo(a, b, dtype, t)
    lo = min_hlo(a, b, dtype, t)
    out = hlo.add(hi, hlo.log_plus_one(hlo.exponential(hlo.subtract(lo, hi))))
    neg_inf = ir_constant(np.array(-np.inf, dtype))
    return hlo.select(compare(hi, neg_inf, "EQ", dtype), hi, out)


_COMBINERS: dict[str, Combiner] = {
    "add": _op_combiner("stablehlo.add"), "mul": _op_combiner("stablehlo.multiply"),
    "max": max_hlo, "min": min_hlo, "and": _op_combiner("stablehlo.and"),
    "or": _op_combiner("stablehlo.or"), "xor": _op_combiner("stablehlo.xor"),
    "logaddexp": _logaddexp,
}


def identity_value(monoid: str, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The identity of ``monoid`` on ``dtype`` (e.g. -inf for max on floats)."""
    is_bool = dtype == dtypes.bool_
    if monoid in ("add", "or", "xor"):
        value: Any = 0
    elif monoid == "mul":
        value = 1
    elif monoid in ("max", "logaddexp"):
        value = dtypes.lowest(dtype)
    elif monoid == "min":
        value = dtypes.highest(dtype)
    elif monoid == "and":
        value = True if is_bool else -1 if dtype in dtypes.SIGNED else dtypes.highest(dtype)
    else:
        raise ValueError(f"no identity for monoid {monoid!r}")
    return np.array(value, dtype)


_identities: dict[tuple[str, np.dtype[Any]], np.ndarray[Any, Any]] = {}


def _identity(monoid: str, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """``identity_value``, memoized (the arrays are read-only)."""
    value = _identities.get((monoid, dtype))
    if value is None:
        value = identity_value(monoid, dtype)
        value.flags.writeable = False
        _identities[(monoid, dtype)] = value
    return value


def monoid_reduce(monoid: str) -> LoweringRule:
    """The rule of a reduction over ``axes`` with ``monoid`` (``add``, ``mul``,
    ``max``, ``min``, ``and``, ``or``, ``xor``); collectives reuse it for their
    positional axes."""
    combine = _COMBINERS[monoid]

    def rule(ctx: LoweringRuleContext, x: Value, *, axes: Sequence[int],
             **params: Any) -> Sequence[Value]:
        dtype = ctx.avals_in[0].dtype
        types = ctx.module_context.types
        scalar = types.shaped((), dtype)
        init = types.scalar_constant(_identity(monoid, dtype))
        op = ir.Operation.create("stablehlo.reduce", results=[ctx.out_type()],
                                 operands=[x, init],
                                 attributes={"dimensions": types.i64_array(axes)}, regions=1)
        block = op.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(block):
            result = combine(block.arguments[0], block.arguments[1], dtype, scalar)
            ir.Operation.create("stablehlo.return", operands=[result])
        return [op.result]

    rule.__name__ = f"lower[reduce_{monoid}]"
    return rule


def reduce_lowering(ctx: LoweringRuleContext, *values: Value, jaxpr: ClosedJaxpr | Jaxpr,
                    dimensions: Sequence[int], **params: Any) -> Sequence[Value]:
    """JAX's variadic ``reduce`` (tracing-core has no such primitive yet: the
    layer that defines one registers this rule): ``values`` are the operands then their init values;
    the body is ``jaxpr`` applied to (accumulators..., elements...)."""
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    init_avals = ctx.avals_in[n:]
    types = ctx.module_context.types
    op = hlo.ReduceOp(ctx.out_types(), list(operands), list(inits), dense_i64_array(dimensions))
    scalar_types = [types.tensor(a) for a in init_avals]
    block = op.regions[0].blocks.append(*scalar_types, *scalar_types)
    with ir.InsertionPoint(block):
        scalars = [ShapedArray((), a.dtype) for a in init_avals]
        sub = ctx.replace(avals_in=scalars * 2, avals_out=scalars)
        hlo.return_(lower_sub_jaxpr(sub, jaxpr, list(block.arguments), name="reducer"))
    return list(op.results)


def _argminmax(direction: str) -> LoweringRule:
    """argmax/argmin: reduce (value, index) pairs. NaN beats every number (it
    is the max and the min, as in numpy) and ties, NaN ties included, go to
    the lower index; the combiner is commutative and associative, so XLA may
    reduce in any order."""
    monoid = "max" if direction == "GT" else "min"

    def rule(ctx: LoweringRuleContext, x: Value, *, axes: Sequence[int],
             index_dtype: Any, **params: Any) -> Sequence[Value]:
        aval = ctx.avals_in[0]
        (axis,) = axes
        idx_dtype = np.dtype(index_dtype)
        types = ctx.module_context.types
        indices = hlo.iota(types.shaped(aval.shape, idx_dtype), ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), axis))
        value_type = types.shaped((), aval.dtype)
        index_type = types.shaped((), idx_dtype)
        val_init = ir_constant(identity_value(monoid, aval.dtype))
        idx_init = ir_constant(np.array(0, idx_dtype))
        out_vals = types.shaped(ctx.avals_out[0].shape, aval.dtype)
        op = hlo.ReduceOp([out_vals, ctx.out_type()], [x, indices], [val_init, idx_init],
                          dense_i64_array([axis]))
        block = op.regions[0].blocks.append(value_type, index_type, value_type, index_type)
        with ir.InsertionPoint(block):
            acc_val, acc_idx, val, idx = block.arguments
            dt = aval.dtype
            better = compare(val, acc_val, direction, dt)
            same = compare(val, acc_val, "EQ", dt)
            if is_inexact(dt):
                val_nan = compare(val, val, "NE", dt)
                acc_nan = compare(acc_val, acc_val, "NE", dt)
                better = hlo.or_(better, hlo.and_(val_nan, hlo.not_(acc_nan)))
                same = hlo.or_(same, hlo.and_(val_nan, acc_nan))
            earlier = compare(idx, acc_idx, "LT", idx_dtype)
            pick = hlo.or_(better, hlo.and_(same, earlier))
            hlo.return_([hlo.select(pick, val, acc_val), hlo.select(pick, idx, acc_idx)])
        return [op.results[1]]

    rule.__name__ = f"lower[arg{monoid}]"
    return rule


def reduce_window(ctx: LoweringRuleContext, x: Value, init: Value, combine: Combiner,
                  dtype: np.dtype[Any], window_dimensions: Sequence[int],
                  window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                  base_dilation: Sequence[int], window_dilation: Sequence[int],
                  result_type: ir.Type) -> Value:
    """A single-operand ``stablehlo.reduce_window`` combining with ``combine``."""
    types = ctx.module_context.types
    scalar = types.shaped((), dtype)
    pad = dense_int_elements(np.asarray(padding, np.int64).reshape(len(padding), 2))
    op = hlo.ReduceWindowOp([result_type], [x], [init], dense_i64_array(window_dimensions),
                            window_strides=dense_i64_array(window_strides),
                            base_dilations=dense_i64_array(base_dilation),
                            window_dilations=dense_i64_array(window_dilation), padding=pad)
    block = op.regions[0].blocks.append(scalar, scalar)
    with ir.InsertionPoint(block):
        hlo.return_([combine(block.arguments[0], block.arguments[1], dtype, scalar)])
    result: Value = op.results[0]
    return result


def _cumulative(monoid: str) -> LoweringRule:
    """cumsum & co. as a reduce_window whose window spans the whole axis,
    padded on the leading side (trailing side when ``reverse``)."""
    combine = _COMBINERS[monoid]

    def rule(ctx: LoweringRuleContext, x: Value, *, axis: int, reverse: bool = False,
             **params: Any) -> Sequence[Value]:
        aval = ctx.avals_in[0]
        n = aval.shape[axis]
        window = [1] * aval.ndim
        window[axis] = n
        padding = [(0, 0)] * aval.ndim
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        ones = [1] * aval.ndim
        init = ir_constant(identity_value(monoid, aval.dtype))
        return [reduce_window(ctx, x, init, combine, aval.dtype, window, ones, padding,
                              ones, ones, ctx.out_type())]

    rule.__name__ = f"lower[cum{monoid}]"
    return rule


def reduce_window_monoid_lowering(monoid: str) -> LoweringRule:
    """The rule of JAX's ``reduce_window_sum`` (``'add'``), ``_max`` and
    ``_min``, for the layer that defines those primitives."""
    combine = _COMBINERS[monoid]

    def rule(ctx: LoweringRuleContext, x: Value, *, window_dimensions: Sequence[int],
             window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
             base_dilation: Sequence[int], window_dilation: Sequence[int],
             **params: Any) -> Sequence[Value]:
        dtype = ctx.avals_in[0].dtype
        init = ir_constant(identity_value(monoid, dtype))
        return [reduce_window(ctx, x, init, combine, dtype, window_dimensions, window_strides,
                              padding, base_dilation, window_dilation, ctx.out_type())]

    return rule


def reduce_window_lowering(ctx: LoweringRuleContext, *values: Value,
                           jaxpr: ClosedJaxpr | Jaxpr, window_dimensions: Sequence[int],
                           window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                           base_dilation: Sequence[int], window_dilation: Sequence[int],
                           consts: Sequence[Any] = (), **params: Any) -> Sequence[Value]:
    """JAX's variadic ``reduce_window`` with a ``jaxpr`` body, for the layer
    that defines that primitive."""
    n = len(values) // 2
    operands, inits = values[:n], values[n:]
    init_avals = ctx.avals_in[n:]
    types = ctx.module_context.types
    pad = dense_int_elements(np.asarray(padding, np.int64).reshape(len(padding), 2))
    op = hlo.ReduceWindowOp(ctx.out_types(), list(operands), list(inits),
                            dense_i64_array(window_dimensions),
                            window_strides=dense_i64_array(window_strides),
                            base_dilations=dense_i64_array(base_dilation),
                            window_dilations=dense_i64_array(window_dilation), padding=pad)
    scalar_types = [types.tensor(a) for a in init_avals]
    block = op.regions[0].blocks.append(*scalar_types, *scalar_types)
    body: ClosedJaxpr | Jaxpr = jaxpr
    if isinstance(jaxpr, Jaxpr) and jaxpr.constvars:
        body = ClosedJaxpr(jaxpr, list(consts))
    with ir.InsertionPoint(block):
        scalars = [ShapedArray((), a.dtype) for a in init_avals]
        sub = ctx.replace(avals_in=scalars * 2, avals_out=scalars)
        hlo.return_(lower_sub_jaxpr(sub, body, list(block.arguments), name="reducer"))
    return list(op.results)


register_lowering(lax.reduce_sum_p, monoid_reduce("add"))
register_lowering(lax.reduce_prod_p, monoid_reduce("mul"))
register_lowering(lax.reduce_max_p, monoid_reduce("max"))
register_lowering(lax.reduce_min_p, monoid_reduce("min"))
register_lowering(lax.reduce_and_p, monoid_reduce("and"))
register_lowering(lax.reduce_or_p, monoid_reduce("or"))
register_lowering(lax.reduce_xor_p, monoid_reduce("xor"))
register_lowering(lax.argmax_p, _argminmax("GT"))
register_lowering(lax.argmin_p, _argminmax("LT"))
register_lowering(lax.cumsum_p, _cumulative("add"))
register_lowering(lax.cumprod_p, _cumulative("mul"))
register_lowering(lax.cummax_p, _cumulative("max"))
register_lowering(lax.cummin_p, _cumulative("min"))
register_lowering(lax.cumlogsumexp_p, _cumulative("logaddexp"))
