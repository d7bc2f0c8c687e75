"""Elementwise primitives: arithmetic, math functions, comparisons, bitwise ops,
``select_n`` and ``clamp``.

Binary primitives follow JAX 0.10: operands have equal dtypes (no promotion;
weakly typed Python scalars take the other operand's dtype only in the
``lamina.numpy`` layer), and either equal shapes, or a rank-0 operand, or the
same rank with size-1 dimensions (the lowering broadcasts those).
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import broadcast_in_dim, convert_element_type, full_like
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax.common import (
    ANY, BOOL_OR_INT, COMPLEX, COMPLEX_ELEMENT, FLOAT, INEXACT, INT, NUM, ORDERED, SIGNED,
    ArrayLike, DType, const)
from lamina_tracing_core.lax.helpers import (
    defbroadcasting, defjvp, defjvp2, defjvp_zero, deflinear, defvectorized, unbroadcast)
from lamina_tracing_core.jaxpr import hide_default_params, param_printers
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core import sharding_in_types as sit

Array = Any


class RoundingMethod(enum.IntEnum):
    """How ``round`` treats halfway values."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


class AccuracyMode(enum.Enum):
    """Which implementation of a transcendental function to lower to."""

    HIGHEST = 1
    DEFAULT = 2


class Tolerance:
    """Tolerances a transcendental function's implementation must meet
    (``atol`` and ``rtol``, or ``atol`` and ``ulps``)."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def _key(self) -> tuple[float, float, int]:
        return (self.atol, self.rtol, self.ulps)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tolerance) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Tolerance(atol={self.atol}, rtol={self.rtol}, ulps={self.ulps})"


# --- primitive constructors -------------------------------------------------------
DtypeFn = Callable[..., DType]

#: The primitives ``unop`` made.
UNARY_PRIMITIVES: set[Primitive] = set()


def unop(name: str, accepted: frozenset[DType], result_dtype: DtypeFn | None = None,
         *, vectorized: bool = True) -> Primitive:
    """A unary elementwise primitive: same shape, dtype from ``result_dtype``."""
    prim = Primitive(name)
    UNARY_PRIMITIVES.add(prim)

    if result_dtype is None:
        def abstract_eval(x: ShapedArray, **params: Any) -> ShapedArray:
            if x.dtype not in accepted:
                common.check_dtype(name, x, accepted)
            return x
    else:
        out_dtype = result_dtype

        def abstract_eval(x: ShapedArray, **params: Any) -> ShapedArray:
            if x.dtype not in accepted:
                common.check_dtype(name, x, accepted)
            return ShapedArray(x.shape, out_dtype(x.dtype), x.weak_type)

    prim.def_abstract_eval(abstract_eval)
    sit.register(prim, sit.same_as_first)
    if vectorized:
        defvectorized(prim)
    return prim


def naryop(name: str, accepted: list[frozenset[DType]], result_dtype: DtypeFn | None = None,
           *, require_same: bool = True) -> Primitive:
    """An n-ary elementwise primitive with JAX's implicit broadcasting."""
    prim = Primitive(name)
    arity = len(accepted)
    sit.register(prim, sit.elementwise(name))

    def general_rule(avals: tuple[ShapedArray, ...], out_dtype: Any) -> ShapedArray:
        if len(avals) != arity:
            raise TypeError(f"{name} takes {arity} arguments, got {len(avals)}")
        for i, (a, acc) in enumerate(zip(avals, accepted)):
            if a.dtype not in acc:
                common.check_dtype(name, a, acc, i)
        if require_same and out_dtype is None:
            common.check_same_dtypes(name, *avals)
        first = avals[0]
        if result_dtype is not None:
            dtype = result_dtype(*[a.dtype for a in avals])
        elif out_dtype is not None:
            dtype = np.dtype(out_dtype)
        else:
            dtype = first.dtype
        shape = common.broadcasting_shape(name, *[a.shape for a in avals])
        weak = all(a.weak_type for a in avals)
        if shape == first.shape and dtype == first.dtype and weak == first.weak_type:
            return first
        return ShapedArray(shape, dtype, weak)

    # The general rule, memoized (broadcasting operands of other ranks or
    # size-1 dims; other dtypes rules): a pure function of its arguments.
    memo: dict[tuple[Any, ...], ShapedArray] = {}

    def slow_path(avals: tuple[ShapedArray, ...], out_dtype: Any) -> ShapedArray:
        key = (avals, out_dtype, dtypes.x64_state.enabled)
        try:
            known = memo.get(key)
        except TypeError:
            return general_rule(avals, out_dtype)
        if known is None:
            known = general_rule(avals, out_dtype)
            if len(memo) >= 1024:
                memo.clear()
            memo[key] = known
        return known

    if arity == 2 and result_dtype is None and require_same:
        acc0, acc1 = accepted

        def abstract_eval(*avals: ShapedArray, **params: Any) -> ShapedArray:
            # Fast path: two operands of one dtype whose shapes are equal, or
            # one of them rank 0 (the common cases: ``x * y``, ``x * 2.0``).
            if len(avals) == 2:
                x, y = avals
                if (x.dtype is y.dtype or x.dtype == y.dtype) and x.dtype in acc0 \
                        and x.dtype in acc1 and params.get("out_dtype") is None:
                    # the result is weakly typed only if both operands are
                    xs, ys = x.shape, y.shape
                    if xs == ys or not ys:
                        if y.weak_type or not x.weak_type:
                            return x
                        return y if xs == ys else ShapedArray(xs, x.dtype, False)
                    if not xs:
                        if x.weak_type or not y.weak_type:
                            return y
                        return ShapedArray(ys, y.dtype, False)
            return slow_path(avals, params.get("out_dtype"))
    else:
        def abstract_eval(*avals: ShapedArray, **params: Any) -> ShapedArray:
            return slow_path(avals, params.get("out_dtype"))

    prim.def_abstract_eval(abstract_eval)
    defbroadcasting(prim)
    return prim


def _bool_result(*dtypes_: DType) -> DType:
    return dtypes.bool_


def _real_result(dtype: DType) -> DType:
    return common.real_dtype(dtype)


def _complex_result(*dtypes_: DType) -> DType:
    return common.complex_dtype(dtypes_[0])


def _zeros(x: Any) -> Any:
    return full_like(x, 0)


def _ones(x: Any) -> Any:
    return full_like(x, 1)


def _is_complex(x: Any) -> bool:
    return get_aval(x).dtype in COMPLEX


# --- unary math ----------------------------------------------------------------
neg_p = unop("neg", NUM)
sign_p = unop("sign", NUM)
floor_p = unop("floor", FLOAT)
ceil_p = unop("ceil", FLOAT)
round_p = unop("round", FLOAT)
is_finite_p = unop("is_finite", FLOAT, _bool_result)
exp_p = unop("exp", INEXACT)
exp2_p = unop("exp2", INEXACT)
log_p = unop("log", INEXACT)
log1p_p = unop("log1p", INEXACT)
expm1_p = unop("expm1", INEXACT)
tanh_p = unop("tanh", INEXACT)
logistic_p = unop("logistic", INEXACT)
sin_p = unop("sin", INEXACT)
cos_p = unop("cos", INEXACT)
tan_p = unop("tan", INEXACT)
asin_p = unop("asin", INEXACT)
acos_p = unop("acos", INEXACT)
atan_p = unop("atan", INEXACT)
sinh_p = unop("sinh", INEXACT)
cosh_p = unop("cosh", INEXACT)
asinh_p = unop("asinh", INEXACT)
acosh_p = unop("acosh", INEXACT)
atanh_p = unop("atanh", INEXACT)
sqrt_p = unop("sqrt", INEXACT)
rsqrt_p = unop("rsqrt", INEXACT)
cbrt_p = unop("cbrt", FLOAT)
erf_p = unop("erf", FLOAT)
erfc_p = unop("erfc", FLOAT)
erf_inv_p = unop("erf_inv", FLOAT)
lgamma_p = unop("lgamma", FLOAT)
digamma_p = unop("digamma", FLOAT)
square_p = unop("square", NUM)
real_p = unop("real", COMPLEX, _real_result)
imag_p = unop("imag", COMPLEX, _real_result)
conj_p = unop("conj", COMPLEX_ELEMENT | COMPLEX, lambda d: common.complex_dtype(d))
abs_p = unop("abs", SIGNED | INEXACT, _real_result)
not_p = unop("not", BOOL_OR_INT)
population_count_p = unop("population_count", INT)
clz_p = unop("clz", INT)

# --- binary --------------------------------------------------------------------
add_p = naryop("add", [NUM, NUM])
sub_p = naryop("sub", [NUM, NUM])
mul_p = naryop("mul", [NUM, NUM])
div_p = naryop("div", [NUM, NUM])
rem_p = naryop("rem", [INT | FLOAT, INT | FLOAT])
max_p = naryop("max", [ANY, ANY])
min_p = naryop("min", [ANY, ANY])
atan2_p = naryop("atan2", [INEXACT, INEXACT])
nextafter_p = naryop("nextafter", [FLOAT, FLOAT])
polygamma_p = naryop("polygamma", [FLOAT, FLOAT])
complex_p = naryop("complex", [COMPLEX_ELEMENT, COMPLEX_ELEMENT], _complex_result)
and_p = naryop("and", [BOOL_OR_INT, BOOL_OR_INT])
or_p = naryop("or", [BOOL_OR_INT, BOOL_OR_INT])
xor_p = naryop("xor", [BOOL_OR_INT, BOOL_OR_INT])
shift_left_p = naryop("shift_left", [INT, INT])
shift_right_logical_p = naryop("shift_right_logical", [INT, INT])
shift_right_arithmetic_p = naryop("shift_right_arithmetic", [INT, INT])
eq_p = naryop("eq", [ANY, ANY], _bool_result)
ne_p = naryop("ne", [ANY, ANY], _bool_result)
lt_p = naryop("lt", [ORDERED, ORDERED], _bool_result)
le_p = naryop("le", [ORDERED, ORDERED], _bool_result)
gt_p = naryop("gt", [ORDERED, ORDERED], _bool_result)
ge_p = naryop("ge", [ORDERED, ORDERED], _bool_result)


def _pow_dtype(x: DType, y: DType) -> DType:
    if x in INEXACT and y in INT:
        return x
    if x == y:
        return x
    raise TypeError("the first argument to pow must have an inexact dtype (float or "
                    "complex), and the second argument must have an inexact or integer "
                    "dtype, and two inexact dtypes must match, but got "
                    f"{x.name} and {y.name} respectively.")


pow_p = naryop("pow", [INEXACT, INT | INEXACT], _pow_dtype, require_same=False)

# integer_pow: unary with a static exponent ``y``.
integer_pow_p = Primitive("integer_pow")
sit.register(integer_pow_p, sit.same_as_first)


def _integer_pow_abstract_eval(x: ShapedArray, *, y: int) -> ShapedArray:
    if x.dtype not in NUM:
        common.check_dtype("integer_pow", x, NUM)
    if not isinstance(y, (int, np.integer)) or isinstance(y, bool):
        raise TypeError(f"integer_pow: the exponent y must be a Python int, got {y!r}")
    if y < 0 and x.dtype in INT:
        raise TypeError(f"Integers cannot be raised to negative powers, got "
                        f"integer_pow({x.str_long()}, {y})")
    return x


integer_pow_p.def_abstract_eval(_integer_pow_abstract_eval)
defvectorized(integer_pow_p)

# reduce_precision: unary with static exponent/mantissa bit counts.
reduce_precision_p = Primitive("reduce_precision")
sit.register(reduce_precision_p, sit.same_as_first)


def _reduce_precision_abstract_eval(x: ShapedArray, *, exponent_bits: int,
                                    mantissa_bits: int) -> ShapedArray:
    if x.dtype not in FLOAT:
        common.check_dtype("reduce_precision", x, FLOAT)
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1, got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be >= 0, got {mantissa_bits}")
    return x


reduce_precision_p.def_abstract_eval(_reduce_precision_abstract_eval)
defvectorized(reduce_precision_p)


# --- user functions -------------------------------------------------------------
def neg(x: ArrayLike) -> Array:
    """Elementwise negation: ``-x``."""
    return neg_p.bind(x)


def sign(x: ArrayLike) -> Array:
    """Elementwise sign (-1, 0 or 1)."""
    return sign_p.bind(x)


def floor(x: ArrayLike) -> Array:
    return floor_p.bind(x)


def ceil(x: ArrayLike) -> Array:
    return ceil_p.bind(x)


def round(x: ArrayLike, rounding_method: RoundingMethod | int = RoundingMethod.AWAY_FROM_ZERO
          ) -> Array:
    """Elementwise rounding to the nearest integer, halfway cases per ``rounding_method``."""
    return round_p.bind(x, rounding_method=RoundingMethod(rounding_method))


def is_finite(x: ArrayLike) -> Array:
    return is_finite_p.bind(x)


def _accuracy_unary(prim: Primitive, doc: str) -> Callable[..., Array]:
    def fun(x: ArrayLike, *, accuracy: Tolerance | AccuracyMode | None = None) -> Array:
        return prim.bind(x, accuracy=accuracy)
    fun.__name__ = fun.__qualname__ = prim.name
    fun.__doc__ = doc
    return fun


exp = _accuracy_unary(exp_p, "Elementwise exponential: e**x.")
exp2 = _accuracy_unary(exp2_p, "Elementwise base-2 exponential: 2**x.")
log = _accuracy_unary(log_p, "Elementwise natural logarithm.")
log1p = _accuracy_unary(log1p_p, "Elementwise log(1 + x).")
expm1 = _accuracy_unary(expm1_p, "Elementwise exp(x) - 1.")
tanh = _accuracy_unary(tanh_p, "Elementwise hyperbolic tangent.")
logistic = _accuracy_unary(logistic_p, "Elementwise logistic sigmoid: 1 / (1 + exp(-x)).")
sin = _accuracy_unary(sin_p, "Elementwise sine.")
cos = _accuracy_unary(cos_p, "Elementwise cosine.")
tan = _accuracy_unary(tan_p, "Elementwise tangent.")
sqrt = _accuracy_unary(sqrt_p, "Elementwise square root.")
rsqrt = _accuracy_unary(rsqrt_p, "Elementwise reciprocal square root: 1 / sqrt(x).")
cbrt = _accuracy_unary(cbrt_p, "Elementwise cube root.")


def asin(x: ArrayLike) -> Array:
    return asin_p.bind(x)


def acos(x: ArrayLike) -> Array:
    return acos_p.bind(x)


def atan(x: ArrayLike) -> Array:
    return atan_p.bind(x)


def sinh(x: ArrayLike) -> Array:
    return sinh_p.bind(x)


def cosh(x: ArrayLike) -> Array:
    return cosh_p.bind(x)


def asinh(x: ArrayLike) -> Array:
    return asinh_p.bind(x)


def acosh(x: ArrayLike) -> Array:
    return acosh_p.bind(x)


def atanh(x: ArrayLike) -> Array:
    return atanh_p.bind(x)


def erf(x: ArrayLike) -> Array:
    return erf_p.bind(x)


def erfc(x: ArrayLike) -> Array:
    return erfc_p.bind(x)


def erf_inv(x: ArrayLike) -> Array:
    return erf_inv_p.bind(x)


def lgamma(x: ArrayLike) -> Array:
    return lgamma_p.bind(x)


def digamma(x: ArrayLike) -> Array:
    return digamma_p.bind(x)


def polygamma(m: ArrayLike, x: ArrayLike) -> Array:
    """The m-th derivative of digamma at ``x``."""
    return polygamma_p.bind(m, x)


def square(x: ArrayLike) -> Array:
    return square_p.bind(x)


def reciprocal(x: ArrayLike) -> Array:
    """Elementwise ``1 / x`` (as JAX, an ``integer_pow`` with ``y=-1``)."""
    return integer_pow(x, -1)


def integer_pow(x: ArrayLike, y: int) -> Array:
    """Elementwise ``x ** y`` for a static Python int ``y``."""
    return integer_pow_p.bind(x, y=y)


def real(x: ArrayLike) -> Array:
    return real_p.bind(x)


def imag(x: ArrayLike) -> Array:
    return imag_p.bind(x)


def complex(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise ``x + 1j * y``."""
    return complex_p.bind(x, y)


def conj(x: ArrayLike) -> Array:
    """Elementwise complex conjugate (a real input becomes complex)."""
    return conj_p.bind(x, input_dtype=get_aval(x).dtype)


def abs(x: ArrayLike) -> Array:
    return abs_p.bind(x)


def bitwise_not(x: ArrayLike) -> Array:
    return not_p.bind(x)


def population_count(x: ArrayLike) -> Array:
    return population_count_p.bind(x)


def clz(x: ArrayLike) -> Array:
    """Elementwise count of leading zero bits."""
    return clz_p.bind(x)


def add(x: ArrayLike, y: ArrayLike) -> Array:
    return add_p.bind(x, y)


def sub(x: ArrayLike, y: ArrayLike) -> Array:
    return sub_p.bind(x, y)


def mul(x: ArrayLike, y: ArrayLike, *, out_dtype: Any = None) -> Array:
    """Elementwise product; ``out_dtype`` (optional) is the accumulation/result type."""
    return mul_p.bind(x, y, out_dtype=None if out_dtype is None else np.dtype(out_dtype))


def div(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise division (integer division rounds towards zero)."""
    return div_p.bind(x, y)


def rem(x: ArrayLike, y: ArrayLike) -> Array:
    """Elementwise remainder with the sign of the dividend (C's ``fmod``)."""
    return rem_p.bind(x, y)


def pow(x: ArrayLike, y: ArrayLike) -> Array:
    return pow_p.bind(x, y)


def max(x: ArrayLike, y: ArrayLike) -> Array:
    return max_p.bind(x, y)


def min(x: ArrayLike, y: ArrayLike) -> Array:
    return min_p.bind(x, y)


def atan2(x: ArrayLike, y: ArrayLike) -> Array:
    return atan2_p.bind(x, y)


def nextafter(x1: ArrayLike, x2: ArrayLike) -> Array:
    return nextafter_p.bind(x1, x2)


def bitwise_and(x: ArrayLike, y: ArrayLike) -> Array:
    return and_p.bind(x, y)


def bitwise_or(x: ArrayLike, y: ArrayLike) -> Array:
    return or_p.bind(x, y)


def bitwise_xor(x: ArrayLike, y: ArrayLike) -> Array:
    return xor_p.bind(x, y)


def shift_left(x: ArrayLike, y: ArrayLike) -> Array:
    return shift_left_p.bind(x, y)


def shift_right_logical(x: ArrayLike, y: ArrayLike) -> Array:
    return shift_right_logical_p.bind(x, y)


def shift_right_arithmetic(x: ArrayLike, y: ArrayLike) -> Array:
    return shift_right_arithmetic_p.bind(x, y)


def eq(x: ArrayLike, y: ArrayLike) -> Array:
    return eq_p.bind(x, y)


def ne(x: ArrayLike, y: ArrayLike) -> Array:
    return ne_p.bind(x, y)


def lt(x: ArrayLike, y: ArrayLike) -> Array:
    return lt_p.bind(x, y)


def le(x: ArrayLike, y: ArrayLike) -> Array:
    return le_p.bind(x, y)


def gt(x: ArrayLike, y: ArrayLike) -> Array:
    return gt_p.bind(x, y)


def ge(x: ArrayLike, y: ArrayLike) -> Array:
    return ge_p.bind(x, y)


def reduce_precision(operand: ArrayLike, exponent_bits: int, mantissa_bits: int) -> Array:
    """Rounds ``operand`` as if it had the given exponent and mantissa widths."""
    return reduce_precision_p.bind(operand, exponent_bits=operator_index(exponent_bits),
                                   mantissa_bits=operator_index(mantissa_bits))


def operator_index(v: Any) -> int:
    return operator.index(v)


# --- select_n and clamp ------------------------------------------------------------
select_n_p = Primitive("select_n")


def _select_n_sharding(which: ShapedArray, *cases: ShapedArray
                       ) -> list[sit.TypeSharding | None]:
    """The sharded cases' common sharding; a non-scalar sharded ``which``
    must be split as they are (unsharded operands are let through, as in
    ``sit.concatenate``)."""
    sharded = [c.sharding for c in cases if c.sharding is not None]
    if not sharded:
        return [None]
    mesh = sharded[0].mesh
    if any(s != sharded[0] for s in sharded):
        shown = ", ".join(sit.sharding_repr(c, mesh) for c in cases)
        raise sit.ShardingTypeError(f"select cases must have the same shardings, got [{shown}].")
    if which.ndim and which.sharding is not None and which.sharding != sharded[0]:
        raise sit.ShardingTypeError(
            "select `which` must be scalar or have the same sharding as cases, got `which` "
            f"sharding {which.sharding!r} but case sharding {sit.sharding_repr(cases[0], mesh)}.")
    return [sharded[0]]


sit.register(select_n_p, _select_n_sharding)


def _select_n_abstract_eval(which: ShapedArray, *cases: ShapedArray) -> ShapedArray:
    if not cases:
        raise TypeError("select_n must have at least one case")
    first = cases[0]
    for c in cases[1:]:
        if c.shape != first.shape:
            raise TypeError("select_n cases must have the same shapes, got "
                            f"[{', '.join(str(c.shape) for c in cases)}].")
    if which.shape and which.shape != first.shape:
        raise TypeError("select_n `which` must be scalar or have the same shape as cases, "
                        f"got `which` shape {which.shape} but case shape {first.shape}.")
    common.check_same_dtypes("select_n", *cases)
    if which.dtype not in BOOL_OR_INT:
        raise TypeError(f"select_n `which` must be boolean or integer type, got "
                        f"{which.dtype.name}.")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError("select_n with boolean `which` cannot have > 2 cases.")
    weak = all(c.weak_type for c in cases)
    return first if weak == first.weak_type else first.update(weak_type=weak)


select_n_p.def_abstract_eval(_select_n_abstract_eval)


def select_n(which: ArrayLike, *cases: ArrayLike) -> Array:
    """``cases[which]`` elementwise: a bool ``which`` picks between two cases, an
    integer one among several (out-of-range indices are undefined)."""
    if len(cases) == 0:
        raise ValueError("select_n() must have at least one case")
    if len(cases) == 1:
        return cases[0]
    return select_n_p.bind(which, *cases)


def select(pred: ArrayLike, on_true: ArrayLike, on_false: ArrayLike) -> Array:
    """``on_true`` where ``pred`` else ``on_false`` (note: ``select_n``'s order is reversed)."""
    return select_n_p.bind(pred, on_false, on_true)


def _select_n_jvp(primals: Any, tangents: Any) -> Any:
    which, *cases = primals
    out = select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    nonzero = [t for t in case_tangents if not helpers.is_zero(t)]
    if not nonzero:
        return out, helpers.zero_from_primal(out)
    zeros = _zeros(nonzero[0])
    return out, select_n_p.bind(which, *[zeros if helpers.is_zero(t) else t
                                         for t in case_tangents])


def _select_n_transpose(ct: Any, which: Any, *cases: Any) -> list[Any]:
    if helpers.is_undefined_primal(which):
        raise ValueError("select_n is not linear in its `which` argument")
    if helpers.is_zero(ct):
        return [None] + helpers.zero_cts(cases)
    zeros = _zeros(ct)
    which_aval = get_aval(which)
    outs: list[Any] = [None]
    for i, case in enumerate(cases):
        if not helpers.is_undefined_primal(case):
            outs.append(None)
        elif which_aval.dtype == dtypes.bool_:
            outs.append(select_n_p.bind(which, ct, zeros) if i == 0
                        else select_n_p.bind(which, zeros, ct))
        else:
            outs.append(select_n_p.bind(eq(which, const(which_aval.dtype, i)), zeros, ct))
    return outs


def _select_n_batch(args: Any, dims: Any) -> Any:
    which, *cases = args
    which_dim, *case_dims = dims
    size = helpers.batch_size(args, dims)
    which_shape = get_aval(which).shape
    case_shape = get_aval(cases[0]).shape
    if all(d == which_dim for d in case_dims) and which_shape == case_shape:
        return select_n_p.bind(which, *cases), which_dim
    if which_dim is None and not which_shape and all(d is not None for d in case_dims):
        d0 = case_dims[0]
        moved = [helpers.moveaxis(c, d, d0) for c, d in zip(cases, case_dims)]
        return select_n_p.bind(which, *moved), d0
    # General case: everything batched at the front, at full case rank.
    cases = [helpers.bdim_at_front(c, d, size) for c, d in zip(cases, case_dims)]
    full = get_aval(cases[0]).shape
    if which_dim is None:
        if which_shape:
            which = helpers.broadcast_batch(which, size, 0)
    else:
        which = helpers.moveaxis(which, which_dim, 0)
        if not which_shape[:which_dim] + which_shape[which_dim + 1:]:  # batched scalar
            which = broadcast_in_dim(which, full, (0,))
    return select_n_p.bind(which, *cases), 0


jvp_rules[select_n_p] = _select_n_jvp
transpose_rules[select_n_p] = _select_n_transpose
batching_rules[select_n_p] = _select_n_batch

clamp_p = Primitive("clamp")


def _clamp_sharding(lo: ShapedArray, x: ShapedArray, hi: ShapedArray
                    ) -> list[sit.TypeSharding | None]:
    """The operand's sharding, whatever the bounds' (JAX's rule)."""
    return [x.sharding]


sit.register(clamp_p, _clamp_sharding)


def _clamp_abstract_eval(min: ShapedArray, operand: ShapedArray,
                         max: ShapedArray) -> ShapedArray:
    for i, a in enumerate((min, operand, max)):
        if a.dtype not in ORDERED:
            common.check_dtype("clamp", a, ORDERED, i)
    common.check_same_dtypes("clamp", min, operand, max)
    if min.shape and min.shape != operand.shape:
        raise TypeError("clamp requires min.shape == operand.shape or min.shape == (), got "
                        f"min.shape={min.shape}, operand.shape={operand.shape}.")
    if max.shape and max.shape != operand.shape:
        raise TypeError("clamp requires max.shape == operand.shape or max.shape == (), got "
                        f"max.shape={max.shape}, operand.shape={operand.shape}.")
    weak = min.weak_type and operand.weak_type and max.weak_type
    return operand if weak == operand.weak_type else operand.update(weak_type=weak)


clamp_p.def_abstract_eval(_clamp_abstract_eval)


def clamp(min: ArrayLike, x: ArrayLike, max: ArrayLike) -> Array:
    """Elementwise ``min(max(x, min), max)``; ``min``/``max`` may be scalars."""
    return clamp_p.bind(min, x, max)


def _clamp_jvp_min(g: Any, min: Any, operand: Any, max: Any) -> Any:
    g = helpers.maybe_broadcast(get_aval(operand).shape, g)
    return select(bitwise_and(gt(min, operand), lt(min, max)), g, _zeros(operand))


def _clamp_jvp_operand(g: Any, min: Any, operand: Any, max: Any) -> Any:
    return select(bitwise_and(gt(operand, min), lt(operand, max)), g, _zeros(operand))


def _clamp_jvp_max(g: Any, min: Any, operand: Any, max: Any) -> Any:
    g = helpers.maybe_broadcast(get_aval(operand).shape, g)
    return select(lt(max, operand), g, _zeros(operand))


defjvp(clamp_p, _clamp_jvp_min, _clamp_jvp_operand, _clamp_jvp_max)


def _clamp_batch(args: Any, dims: Any) -> Any:
    min, x, max = args
    min_d, x_d, max_d = dims
    size = helpers.batch_size(args, dims)
    if x_d is not None and min_d is None and max_d is None and not get_aval(min).shape \
            and not get_aval(max).shape:
        return clamp_p.bind(min, x, max), x_d
    if min_d == x_d == max_d and get_aval(min).shape == get_aval(x).shape == get_aval(max).shape:
        return clamp_p.bind(min, x, max), x_d
    x_unbatched_shape = list(get_aval(x).shape)
    if x_d is not None:
        del x_unbatched_shape[x_d]
    x = helpers.bdim_at_front(x, x_d, size)
    full = get_aval(x).shape

    def fix(bound: Any, d: int | None) -> Any:
        if d is None:
            if not get_aval(bound).shape:
                return bound
            return helpers.broadcast_batch(bound, size, 0)
        bound = helpers.moveaxis(bound, d, 0)
        if get_aval(bound).shape != full:  # a batched scalar
            bound = broadcast_in_dim(bound, full, (0,))
        return bound

    return clamp_p.bind(fix(min, min_d), x, fix(max, max_d)), 0


batching_rules[clamp_p] = _clamp_batch


# --- JVP rules --------------------------------------------------------------------
def _neg_transpose(ct: Any, x: Any) -> list[Any]:
    return [neg(ct)]


deflinear(neg_p, _neg_transpose)
for _p in (sign_p, floor_p, ceil_p, round_p, is_finite_p, not_p, population_count_p, clz_p,
           and_p, or_p, xor_p, shift_left_p, shift_right_logical_p, shift_right_arithmetic_p,
           eq_p, ne_p, lt_p, le_p, gt_p, ge_p):
    defjvp_zero(_p)


def _two_over_sqrt_pi(x: Any) -> Any:
    return const(x, 2.0 / math.sqrt(math.pi))


defjvp2(exp_p, lambda g, ans, x, **kw: mul(g, ans))
defjvp2(exp2_p, lambda g, ans, x, **kw: mul(g, mul(const(x, math.log(2.0)), ans)))
defjvp(log_p, lambda g, x, **kw: div(g, x))
defjvp(log1p_p, lambda g, x, **kw: div(g, add(x, const(x, 1))))
defjvp2(expm1_p, lambda g, ans, x, **kw: mul(g, add(ans, const(ans, 1))))
# d tanh = (1 - ans**2) g, written as (g + g*ans)(1 - ans) to keep precision near |ans|=1.
defjvp2(tanh_p, lambda g, ans, x, **kw: mul(add(g, mul(g, ans)), sub(const(x, 1), ans)))
defjvp2(logistic_p, lambda g, ans, x, **kw: mul(g, mul(ans, sub(const(ans, 1), ans))))
defjvp(sin_p, lambda g, x, accuracy: mul(g, cos(x, accuracy=accuracy)))
defjvp(cos_p, lambda g, x, accuracy: neg(mul(g, sin(x, accuracy=accuracy))))
defjvp2(tan_p, lambda g, ans, x, **kw: mul(g, add(const(x, 1), square(ans))))
defjvp(asin_p, lambda g, x: mul(g, rsqrt(sub(const(x, 1), square(x)))))
defjvp(acos_p, lambda g, x: mul(g, neg(rsqrt(sub(const(x, 1), square(x))))))
defjvp(atan_p, lambda g, x: div(g, add(const(x, 1), square(x))))
defjvp(atan2_p,
       lambda g, x, y: mul(g, div(y, add(square(x), square(y)))),
       lambda g, x, y: mul(g, div(neg(x), add(square(x), square(y)))))
defjvp(sinh_p, lambda g, x: mul(g, cosh(x)))
defjvp(cosh_p, lambda g, x: mul(g, sinh(x)))
defjvp(asinh_p, lambda g, x: mul(g, rsqrt(add(square(x), const(x, 1)))))
defjvp(acosh_p, lambda g, x: mul(g, rsqrt(sub(square(x), const(x, 1)))))
defjvp(atanh_p, lambda g, x: div(g, mul(add(const(x, 1), x), sub(const(x, 1), x))))
defjvp2(sqrt_p, lambda g, ans, x, **kw: mul(g, div(const(x, 0.5), ans)))
defjvp2(rsqrt_p, lambda g, ans, x, **kw: mul(g, mul(const(x, -0.5), div(ans, x))))
defjvp2(cbrt_p, lambda g, ans, x, **kw: mul(g, mul(const(x, 1 / 3), integer_pow(ans, -2))))
defjvp(erf_p, lambda g, x: mul(g, mul(_two_over_sqrt_pi(x), exp(neg(square(x))))))
defjvp(erfc_p, lambda g, x: mul(g, mul(neg(_two_over_sqrt_pi(x)), exp(neg(square(x))))))
defjvp2(erf_inv_p, lambda g, ans, x: mul(g, mul(const(x, math.sqrt(math.pi) / 2),
                                               exp(square(ans)))))
defjvp(lgamma_p, lambda g, x: mul(g, digamma(x)))
defjvp(digamma_p, lambda g, x: mul(g, polygamma(const(x, 1), x)))


def _polygamma_jvp_m(g: Any, m: Any, x: Any) -> Any:
    raise ValueError("polygamma is not differentiable with respect to its order m")


defjvp(polygamma_p, _polygamma_jvp_m,
       lambda g, m, x: mul(g, polygamma(add(m, const(m, 1)), x)))
defjvp(square_p, lambda g, x: mul(g, mul(const(x, 2), x)))


def _integer_pow_jvp(g: Any, x: Any, *, y: int) -> Any:
    if y == 0:
        return _zeros(g)
    if y == 1:
        return g
    if y == 2:
        return mul(g, mul(const(x, 2), x))
    return mul(g, mul(const(x, y), integer_pow(x, y - 1)))


defjvp(integer_pow_p, _integer_pow_jvp)


def _replace_zero(x: Any) -> Any:
    """``x`` with zeros replaced by ones (keeps 0 * inf out of derivatives)."""
    return select(eq(x, const(x, 0)), _ones(x), x)


def _abs_jvp(g: Any, ans: Any, x: Any) -> Any:
    if _is_complex(x):
        ratio = div(conj(x), _replace_zero(convert_element_type(ans, get_aval(x).dtype)))
        return real(mul(g, ratio))
    return select(ge(x, const(x, 0)), g, neg(g))


defjvp2(abs_p, _abs_jvp)


def _add_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    xdot, ydot = tangents
    out = add_p.bind(x, y)
    terms = [t for t in (xdot, ydot) if not helpers.is_zero(t)]
    return out, helpers._sum_contributions(out, terms)


def _sub_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    xdot, ydot = tangents
    out = sub_p.bind(x, y)
    terms = []
    if not helpers.is_zero(xdot):
        terms.append(xdot)
    if not helpers.is_zero(ydot):
        terms.append(neg(ydot))
    return out, helpers._sum_contributions(out, terms)


def _add_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    if helpers.is_zero(ct):
        return [helpers.Zero(helpers.ct_aval(x)), helpers.Zero(helpers.ct_aval(y))]
    return [unbroadcast(helpers.ct_aval(x), ct) if helpers.is_undefined_primal(x) else None,
            unbroadcast(helpers.ct_aval(y), ct) if helpers.is_undefined_primal(y) else None]


def _sub_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    if helpers.is_zero(ct):
        return [helpers.Zero(helpers.ct_aval(x)), helpers.Zero(helpers.ct_aval(y))]
    return [unbroadcast(helpers.ct_aval(x), ct) if helpers.is_undefined_primal(x) else None,
            unbroadcast(helpers.ct_aval(y), neg(ct)) if helpers.is_undefined_primal(y)
            else None]


jvp_rules[add_p] = _add_jvp
transpose_rules[add_p] = _add_transpose
jvp_rules[sub_p] = _sub_jvp
transpose_rules[sub_p] = _sub_transpose


def _mul_transpose_lhs(ct: Any, x: Any, y: Any, *, out_dtype: Any) -> Any:
    g = mul(ct, y, out_dtype=None if out_dtype is None else x.aval.dtype)
    return unbroadcast(x.aval, g)


def _mul_transpose_rhs(ct: Any, x: Any, y: Any, *, out_dtype: Any) -> Any:
    g = mul(x, ct, out_dtype=None if out_dtype is None else y.aval.dtype)
    return unbroadcast(y.aval, g)


helpers.defbilinear(mul_p, _mul_transpose_lhs, _mul_transpose_rhs)

# As JAX prints them: defaults of optional params are not shown.
for _prim in UNARY_PRIMITIVES:
    param_printers[_prim] = hide_default_params(accuracy=None)
param_printers[mul_p] = hide_default_params(out_dtype=None)

defjvp(div_p,
       lambda g, x, y: div(g, y),
       lambda g, x, y: mul(mul(neg(g), x), integer_pow(y, -2)))


def _div_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    if helpers.is_undefined_primal(y):
        raise ValueError("div is not linear in its divisor and cannot be transposed "
                         "with respect to it")
    if helpers.is_zero(ct):
        return [helpers.Zero(x.aval), None]
    return [unbroadcast(x.aval, div(ct, y)), None]


transpose_rules[div_p] = _div_transpose

defjvp(rem_p,
       lambda g, x, y: g,
       lambda g, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))


def _pow_jvp_lhs(g: Any, ans: Any, x: Any, y: Any) -> Any:
    x_dtype = get_aval(x).dtype
    if get_aval(y).dtype in INT:
        shape = common.broadcasting_shape("pow", get_aval(x).shape, get_aval(y).shape)
        yf = convert_element_type(helpers.maybe_broadcast(shape, y), x_dtype)
        xb = helpers.maybe_broadcast(shape, x)
        jac = select(eq(yf, const(yf, 0)), _zeros(yf),
                     mul(_replace_zero(yf), pow(xb, sub(yf, const(yf, 1)))))
    else:
        # as JAX: both in their common dtype, strongly typed (so the
        # derivative of x ** 0.5 is strong even for a weak x)
        y = convert_element_type(y, get_aval(y).dtype)
        jac = mul(y, pow(convert_element_type(x, x_dtype), sub(y, const(y, 1))))
    return mul(g, jac)


def _pow_jvp_rhs(g: Any, ans: Any, x: Any, y: Any) -> Any:
    return mul(g, mul(log(_replace_zero(x)), ans))


defjvp2(pow_p, _pow_jvp_lhs, _pow_jvp_rhs)


def _balanced_eq(x: Any, z: Any, y: Any) -> Any:
    """1 where x == z and y != z, 1/2 where both equal z, else 0: ties between
    max/min arguments share the derivative."""
    return div(select(eq(x, z), _ones(z), _zeros(z)),
               select(eq(y, z), full_like(z, 2), _ones(z)))


defjvp2(max_p,
        lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
        lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))
defjvp2(min_p,
        lambda g, ans, x, y: mul(g, _balanced_eq(x, ans, y)),
        lambda g, ans, x, y: mul(g, _balanced_eq(y, ans, x)))


# Complex parts: all linear.
def _real_transpose(ct: Any, x: Any) -> list[Any]:
    return [complex(ct, np.zeros((), get_aval(ct).dtype))]


def _imag_transpose(ct: Any, x: Any) -> list[Any]:
    return [complex(np.zeros((), get_aval(ct).dtype), neg(ct))]


def _complex_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    return [unbroadcast(x.aval, real(ct)) if helpers.is_undefined_primal(x) else None,
            unbroadcast(y.aval, imag(neg(ct))) if helpers.is_undefined_primal(y) else None]


def _conj_transpose(ct: Any, x: Any, *, input_dtype: Any) -> list[Any]:
    if np.dtype(input_dtype) in COMPLEX:
        return [conj(ct)]
    return [real(ct)]


deflinear(real_p, _real_transpose)
deflinear(imag_p, _imag_transpose)
deflinear(complex_p, _complex_transpose)
deflinear(conj_p, _conj_transpose)


def _reduce_precision_transpose(ct: Any, x: Any, **params: Any) -> list[Any]:
    return [reduce_precision_p.bind(ct, **params)]


deflinear(reduce_precision_p, _reduce_precision_transpose)

__all__ = ["abs_p", "acos_p", "acosh_p", "add_p", "and_p", "asin_p", "asinh_p", "atan2_p",
    "atan_p", "atanh_p", "cbrt_p", "ceil_p", "clamp_p", "clz_p", "complex_p", "conj_p",
    "cos_p", "cosh_p", "digamma_p", "div_p", "eq_p", "erf_inv_p", "erf_p", "erfc_p", "exp2_p",
    "exp_p", "expm1_p", "floor_p", "ge_p", "gt_p", "imag_p", "integer_pow_p", "is_finite_p",
    "le_p", "lgamma_p", "log1p_p", "log_p", "logistic_p", "lt_p", "max_p", "min_p", "mul_p",
    "ne_p", "neg_p", "nextafter_p", "not_p", "or_p", "polygamma_p", "population_count_p",
    "pow_p", "real_p", "reduce_precision_p", "rem_p", "round_p", "rsqrt_p", "select_n_p",
    "shift_left_p", "shift_right_arithmetic_p", "shift_right_logical_p", "sign_p", "sin_p",
    "sinh_p", "sqrt_p", "square_p", "sub_p", "tan_p", "tanh_p", "xor_p", "RoundingMethod",
    "AccuracyMode", "Tolerance", "neg", "sign", "floor", "ceil", "round", "is_finite", "exp",
    "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf", "erfc",
    "erf_inv", "lgamma", "digamma", "polygamma", "square", "reciprocal", "integer_pow", "real",
    "imag", "complex", "conj", "abs", "bitwise_not", "population_count", "clz", "add", "sub",
    "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "bitwise_and",
    "bitwise_or", "bitwise_xor", "shift_left", "shift_right_logical", "shift_right_arithmetic",
    "eq", "ne", "lt", "le", "gt", "ge", "reduce_precision", "select_n", "select", "clamp"]
