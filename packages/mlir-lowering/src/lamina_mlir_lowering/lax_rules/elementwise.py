"""Elementwise primitives: math, comparisons, conversions, select, clamp.

Operands may differ in shape from the result only by being scalars (or of
lower rank), which jaxprs allow; they are broadcast to the result's shape
first. Ops XLA has directly become one StableHLO (or chlo) op; the rest are
short expansions with XLA's semantics (e.g. ``integer_pow`` by repeated
squaring, conversion to bool as ``x != 0``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import ad_util, dtypes, lax
from lamina_tracing_core.primitives import Primitive

from lamina_mlir_lowering.hlo_helpers import (
    is_complex,
    broadcast_operands,
    broadcast_to_shape,
    compare,
    convert_hlo,
    full_like,
    make_op,
    max_hlo,
    min_hlo,
    real_dtype,
    zeros_like,
)
from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value

__all__: list[str] = []

# Ops that accept a `result_accuracy` attribute (lax's `accuracy` param).
_ACCURACY_OPS = frozenset({
    "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log",
    "stablehlo.log_plus_one", "stablehlo.logistic", "stablehlo.sine", "stablehlo.cosine",
    "stablehlo.tan", "stablehlo.tanh", "stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.cbrt"})


def _accuracy_attr(accuracy: Any) -> ir.Attribute:
    """A ``#stablehlo.result_accuracy`` from a Tolerance (atol/rtol/ulps) or
    an accuracy mode (an enum whose name is DEFAULT or HIGHEST)."""
    if all(hasattr(accuracy, a) for a in ("atol", "rtol", "ulps")):
        return hlo.ResultAccuracyAttr.get(float(accuracy.atol), float(accuracy.rtol),
                                          int(accuracy.ulps), "TOLERANCE")
    mode = getattr(accuracy, "name", str(accuracy)).upper()
    return hlo.ResultAccuracyAttr.get(0.0, 0.0, 0, mode)


def _unary(op_name: str) -> LoweringRule:
    takes_accuracy = op_name in _ACCURACY_OPS

    def rule(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
        accuracy = params.get("accuracy")
        attrs = None
        if accuracy is not None and takes_accuracy:
            attrs = {"result_accuracy": _accuracy_attr(accuracy)}
        return [make_op(op_name, [ctx.out_type()], [x], attrs).result]

    rule.__name__ = f"lower[{op_name}]"
    return rule


def _nary(op_name: str) -> LoweringRule:
    def rule(ctx: LoweringRuleContext, *args: Value, **params: Any) -> Sequence[Value]:
        return [make_op(op_name, [ctx.out_type()], broadcast_operands(ctx, args)).result]

    rule.__name__ = f"lower[{op_name}]"
    return rule


def _compare(direction: str) -> LoweringRule:
    def rule(ctx: LoweringRuleContext, x: Value, y: Value, **params: Any) -> Sequence[Value]:
        x, y = _broadcast_inputs(ctx, (x, y))
        return [compare(x, y, direction, ctx.avals_in[0].dtype)]

    rule.__name__ = f"lower[compare {direction}]"
    return rule


def _broadcast_inputs(ctx: LoweringRuleContext, args: Sequence[Value]) -> Sequence[Value]:
    # Comparisons produce bool: broadcast to the output's shape, keep dtypes.
    return broadcast_operands(ctx, args)


def _minmax(pick: Callable[..., Value]) -> LoweringRule:
    def rule(ctx: LoweringRuleContext, x: Value, y: Value, **params: Any) -> Sequence[Value]:
        x, y = broadcast_operands(ctx, (x, y))
        return [pick(x, y, ctx.avals_out[0].dtype, ctx.out_type())]

    return rule


def _sign(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    if aval.dtype.kind == "u":
        # stablehlo.sign has no unsigned form: 0 stays 0, everything else is 1.
        is_zero = compare(x, zeros_like(aval), "EQ", aval.dtype)
        return [hlo.select(is_zero, x, full_like(1, aval))]
    return [hlo.sign(x)]


def _round(ctx: LoweringRuleContext, x: Value, *, rounding_method: Any = 0,
           **params: Any) -> Sequence[Value]:
    # lax.RoundingMethod: AWAY_FROM_ZERO = 0, TO_NEAREST_EVEN = 1.
    if int(rounding_method) == 0:
        return [hlo.round_nearest_afz(x)]
    return [hlo.round_nearest_even(x)]


def _exp2(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    log2 = full_like(np.log(2), aval)
    return _unary("stablehlo.exponential")(ctx, hlo.multiply(log2, x), **params)


def _square(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    return [hlo.multiply(x, x)]


def _conj(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    if is_complex(aval.dtype):
        return [hlo.complex(hlo.real(x), hlo.negate(hlo.imag(x)))]
    # The conjugate of a real array is itself, as a complex array.
    return [hlo.complex(x, zeros_like(aval))]


def _integer_pow(ctx: LoweringRuleContext, x: Value, *, y: int, **params: Any) -> Sequence[Value]:
    """``x ** y`` by repeated squaring (and a reciprocal for negative ``y``)."""
    aval = ctx.avals_in[0]
    exponent = abs(int(y))
    acc: Value | None = None
    base = x
    while exponent > 0:
        if exponent & 1:
            acc = base if acc is None else hlo.multiply(acc, base)
        exponent >>= 1
        if exponent > 0:
            base = hlo.multiply(base, base)
    if acc is None:
        return [full_like(1, aval)]
    if y < 0:
        acc = hlo.divide(full_like(1, aval), acc)
    return [acc]


def _pow(ctx: LoweringRuleContext, x: Value, y: Value, **params: Any) -> Sequence[Value]:
    x_aval, y_aval = ctx.avals_in
    out = ctx.avals_out[0]
    if y_aval.dtype != out.dtype:
        # An integer exponent is converted to the base's type (XLA's power
        # needs equal element types).
        y_aval_new = y_aval.update(dtype=out.dtype)
        y = convert_hlo(y, y_aval, y_aval_new)
        ctx = ctx.replace(avals_in=[x_aval, y_aval_new])
    return [hlo.power(*broadcast_operands(ctx, (x, y)))]


def _select_n(ctx: LoweringRuleContext, which: Value, *cases: Value,
              **params: Any) -> Sequence[Value]:
    """``cases[which]``: a ``select`` for a bool predicate, a balanced tree
    of selects on ``which < mid`` for an integer index."""
    which_aval = ctx.avals_in[0]
    case_avals = ctx.avals_in[1:]
    out = ctx.avals_out[0]
    cases = tuple(broadcast_to_shape(c, a, out.shape) for c, a in zip(cases, case_avals))
    if len(cases) == 1:
        return [cases[0]]

    def pick(lo: int, hi: int) -> Value:
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        if which_aval.dtype == dtypes.bool_:
            return hlo.select(which, cases[1], cases[0])
        threshold = full_like(mid, which_aval)
        below = compare(which, threshold, "LT", which_aval.dtype)
        return hlo.select(below, pick(lo, mid), pick(mid, hi))

    return [pick(0, len(cases))]


def _clamp(ctx: LoweringRuleContext, lo: Value, x: Value, hi: Value,
           **params: Any) -> Sequence[Value]:
    return [hlo.clamp(lo, x, hi)]


def _convert_element_type(ctx: LoweringRuleContext, x: Value, *, new_dtype: Any = None,
                          **params: Any) -> Sequence[Value]:
    aval_in = ctx.avals_in[0]
    aval_out = ctx.avals_out[0]
    if aval_out.dtype == dtypes.float0:
        return [full_like(False, aval_out.update(dtype=dtypes.bool_))]
    if aval_in.dtype == aval_out.dtype:
        return [x]
    if is_complex(aval_in.dtype) and not is_complex(aval_out.dtype):
        # Complex to real keeps the real part, as numpy and JAX do.
        x = hlo.real(x)
        aval_in = aval_in.update(dtype=real_dtype(aval_in.dtype))
    return [convert_hlo(x, aval_in, aval_out)]


def _bitcast_convert_type(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    return [hlo.bitcast_convert(ctx.out_type(), x)]


def _reduce_precision(ctx: LoweringRuleContext, x: Value, *, exponent_bits: int,
                      mantissa_bits: int, **params: Any) -> Sequence[Value]:
    i32 = ir.IntegerType.get_signless(32)
    return [hlo.reduce_precision(x, ir.IntegerAttr.get(i32, exponent_bits),
                                 ir.IntegerAttr.get(i32, mantissa_bits))]


def _identity(ctx: LoweringRuleContext, *args: Value, **params: Any) -> Sequence[Value]:
    return list(args)


def _is_finite(ctx: LoweringRuleContext, x: Value, **params: Any) -> Sequence[Value]:
    return [hlo.is_finite(x)]


_UNARY_OPS: tuple[tuple[Primitive, str], ...] = (
    (lax.neg_p, "stablehlo.negate"), (lax.floor_p, "stablehlo.floor"),
    (lax.ceil_p, "stablehlo.ceil"), (lax.exp_p, "stablehlo.exponential"),
    (lax.log_p, "stablehlo.log"), (lax.log1p_p, "stablehlo.log_plus_one"),
    (lax.expm1_p, "stablehlo.exponential_minus_one"), (lax.tanh_p, "stablehlo.tanh"),
    (lax.logistic_p, "stablehlo.logistic"), (lax.sin_p, "stablehlo.sine"),
    (lax.cos_p, "stablehlo.cosine"), (lax.tan_p, "stablehlo.tan"),
    (lax.sqrt_p, "stablehlo.sqrt"), (lax.rsqrt_p, "stablehlo.rsqrt"),
    (lax.cbrt_p, "stablehlo.cbrt"), (lax.real_p, "stablehlo.real"),
    (lax.imag_p, "stablehlo.imag"), (lax.abs_p, "stablehlo.abs"), (lax.not_p, "stablehlo.not"),
    (lax.population_count_p, "stablehlo.popcnt"), (lax.clz_p, "stablehlo.count_leading_zeros"),
    (lax.asin_p, "chlo.asin"), (lax.acos_p, "chlo.acos"), (lax.atan_p, "chlo.atan"),
    (lax.sinh_p, "chlo.sinh"), (lax.cosh_p, "chlo.cosh"), (lax.asinh_p, "chlo.asinh"),
    (lax.acosh_p, "chlo.acosh"), (lax.atanh_p, "chlo.atanh"), (lax.erf_p, "chlo.erf"),
    (lax.erfc_p, "chlo.erfc"), (lax.erf_inv_p, "chlo.erf_inv"),
    (lax.lgamma_p, "chlo.lgamma"), (lax.digamma_p, "chlo.digamma"),
)

_BINARY_OPS: tuple[tuple[Primitive, str], ...] = (
    (lax.add_p, "stablehlo.add"), (lax.sub_p, "stablehlo.subtract"),
    (lax.mul_p, "stablehlo.multiply"), (lax.div_p, "stablehlo.divide"),
    (lax.rem_p, "stablehlo.remainder"), (lax.atan2_p, "stablehlo.atan2"),
    (lax.and_p, "stablehlo.and"), (lax.or_p, "stablehlo.or"), (lax.xor_p, "stablehlo.xor"),
    (lax.shift_left_p, "stablehlo.shift_left"),
    (lax.shift_right_logical_p, "stablehlo.shift_right_logical"),
    (lax.shift_right_arithmetic_p, "stablehlo.shift_right_arithmetic"),
    (lax.complex_p, "stablehlo.complex"), (lax.nextafter_p, "chlo.next_after"),
    (lax.polygamma_p, "chlo.polygamma"),
    # Autodiff's sum of tangents and cotangents (JAX's add_jaxvals_p).
    (ad_util.add_jaxvals_p, "stablehlo.add"),
)

_COMPARISONS: tuple[tuple[Primitive, str], ...] = (
    (lax.eq_p, "EQ"), (lax.ne_p, "NE"), (lax.lt_p, "LT"), (lax.le_p, "LE"),
    (lax.gt_p, "GT"), (lax.ge_p, "GE"),
)

for _prim, _op in _UNARY_OPS:
    register_lowering(_prim, _unary(_op))
for _prim, _op in _BINARY_OPS:
    register_lowering(_prim, _nary(_op))
for _prim, _direction in _COMPARISONS:
    register_lowering(_prim, _compare(_direction))
register_lowering(lax.max_p, _minmax(max_hlo))
register_lowering(lax.min_p, _minmax(min_hlo))
register_lowering(lax.sign_p, _sign)
register_lowering(lax.round_p, _round)
register_lowering(lax.exp2_p, _exp2)
register_lowering(lax.square_p, _square)
register_lowering(lax.conj_p, _conj)
register_lowering(lax.integer_pow_p, _integer_pow)
register_lowering(lax.pow_p, _pow)
register_lowering(lax.select_n_p, _select_n)
register_lowering(lax.clamp_p, _clamp)
register_lowering(lax.convert_element_type_p, _convert_element_type)
register_lowering(lax.bitcast_convert_type_p, _bitcast_convert_type)
register_lowering(lax.reduce_precision_p, _reduce_precision)
register_lowering(lax.is_finite_p, _is_finite)
register_lowering(lax.copy_p, _identity)
register_lowering(lax.stop_gradient_p, _identity)
