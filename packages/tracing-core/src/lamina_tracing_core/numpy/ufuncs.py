"""Elementwise functions (NumPy's ufuncs) with NumPy broadcasting and JAX's
dtype promotion.

Most functions are one lax primitive after promotion; they are made by the
table-driven factories ``_unary`` and ``_binary`` with the promotion rule
each needs:

- ``inexact``: integers and bools compute in the default float (``sqrt(2)``);
- ``numeric``: bools compute as the default int (``square(True)``);
- ``same``: any dtype the primitive accepts, after plain promotion.

Functions with more logic (``floor_divide``, ``remainder``, ``power``,
``hypot``, ``isclose``...) are written out below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.lax import common as lax_common
from lamina_tracing_core.lax import helpers as lax_helpers

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.key_arrays import is_key_array, key_arrays_of, keys_equal

Unary = Callable[[ArrayLike], Array]
Binary = Callable[[ArrayLike, ArrayLike], Array]

_PROMOTERS: dict[str, Callable[..., list[Any]]] = {
    "inexact": _util.promote_args_inexact,
    "numeric": _util.promote_args_numeric,
    "same": _util.promote_args,
}


def _named(fn: Callable[..., Any], name: str, doc: str) -> None:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    fn.__module__ = "lamina.numpy"


def _unary(name: str, op: Callable[[Any], Any], promote: str, doc: str) -> Unary:
    promoter = _PROMOTERS[promote]

    def ufunc(x: ArrayLike, /) -> Array:
        (a,) = promoter(name, x)
        return _util.as_array(op(a))

    _named(ufunc, name, doc)
    return ufunc


def _binary(name: str, op: Callable[[Any, Any], Any], promote: str, doc: str) -> Binary:
    promoter = _PROMOTERS[promote]

    def ufunc(x1: ArrayLike, x2: ArrayLike, /) -> Array:
        a, b = promoter(name, x1, x2)
        return _util.as_array(op(a, b))

    _named(ufunc, name, doc)
    return ufunc


# --- small helpers over lax ------------------------------------------------------------------
def _dt(x: Any) -> np.dtype[Any]:
    return get_aval(x).dtype


def _const(x: Any, value: Any) -> Any:
    """``value`` as a constant of ``x``'s dtype: weak when ``x`` is a weakly
    typed scalar, else strongly typed (JAX's rule, so that ``logical_and(i32[2],
    0.5)`` is strong while ``logical_and(i32[], 0.5)`` is weak)."""
    aval = get_aval(x)
    if aval.weak_type and not aval.shape:
        return _util.convert(value, aval.dtype, True)
    return np.asarray(value, aval.dtype)


def _zeros(x: Any) -> Any:
    return lax.full_like(x, 0)


# dtype checks by set membership: these run for every operator applied
def _is_int(x: Any) -> bool:
    return _dt(x) in lax_common.INT


def _is_bool(x: Any) -> bool:
    return _dt(x) == dtypes.bool_


def _is_unsigned(x: Any) -> bool:
    return _dt(x) in lax_common.UNSIGNED


def _is_complex(x: Any) -> bool:
    return _dt(x) in lax_common.COMPLEX


def _is_inexact(x: Any) -> bool:
    return _dt(x) in lax_common.INEXACT


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``lax.select`` with rank-0 operands broadcast to the others' shape."""
    shape = _util.broadcast_shapes("where", *(_util.shape_of(v) for v in (pred, on_true, on_false)))
    pred, on_true, on_false = (_util.broadcast_to("where", v, shape)
                               for v in (pred, on_true, on_false))
    return lax.select(pred, on_true, on_false)


# --- arithmetic ---------------------------------------------------------------------------
def _add(a: Any, b: Any) -> Any:
    return lax.bitwise_or(a, b) if _is_bool(a) else lax.add(a, b)


def _multiply(a: Any, b: Any) -> Any:
    return lax.bitwise_and(a, b) if _is_bool(a) else lax.mul(a, b)


def _subtract(a: Any, b: Any) -> Any:
    if _is_bool(a):
        raise TypeError("lamina.numpy.subtract: boolean subtract is not supported; use "
                        "bitwise_xor or logical_xor instead")
    return lax.sub(a, b)


add = _binary("add", _add, "same", "``x1 + x2`` elementwise (logical or for bools).")
subtract = _binary("subtract", _subtract, "same", "``x1 - x2`` elementwise.")
multiply = _binary("multiply", _multiply, "same", "``x1 * x2`` elementwise (and for bools).")
divide = _binary("divide", lax.div, "inexact", "``x1 / x2`` in floating point.")
true_divide = _binary("true_divide", lax.div, "inexact", "``x1 / x2`` in floating point.")
arctan2 = _binary("arctan2", lax.atan2, "inexact", "The angle of the point ``(x2, x1)``.")
atan2 = _binary("atan2", lax.atan2, "inexact", "The angle of the point ``(x2, x1)``.")
nextafter = _binary("nextafter", lax.nextafter, "inexact",
                    "The next float after ``x1`` towards ``x2``.")


def _complex_order(a: Any, b: Any, compare: Callable[[Any, Any], Any]) -> Any:
    """Lexicographic (real, then imaginary) comparison of complex values."""
    ra, rb, ia, ib = lax.real(a), lax.real(b), lax.imag(a), lax.imag(b)
    return lax.bitwise_or(compare(ra, rb), lax.bitwise_and(lax.eq(ra, rb), compare(ia, ib)))


def _maximum(a: Any, b: Any) -> Any:
    if _is_complex(a):
        return _select(_complex_order(a, b, lax.gt), a, b)
    return lax.max(a, b)


def _minimum(a: Any, b: Any) -> Any:
    if _is_complex(a):
        return _select(_complex_order(a, b, lax.lt), a, b)
    return lax.min(a, b)


maximum = _binary("maximum", _maximum, "same",
                  "The elementwise maximum; NaN if either argument is NaN.")
minimum = _binary("minimum", _minimum, "same",
                  "The elementwise minimum; NaN if either argument is NaN.")


def fmax(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The elementwise maximum, ignoring NaNs (NaN only where both are NaN)."""
    a, b = _util.promote_args("fmax", x1, x2)
    return _select(lax.bitwise_or(_gt(a, b), isnan(b)), a, b)


def fmin(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The elementwise minimum, ignoring NaNs."""
    a, b = _util.promote_args("fmin", x1, x2)
    return _select(lax.bitwise_or(_lt(a, b), isnan(b)), a, b)


def _gt(a: Any, b: Any) -> Any:
    return _complex_order(a, b, lax.gt) if _is_complex(a) else lax.gt(a, b)


def _lt(a: Any, b: Any) -> Any:
    return _complex_order(a, b, lax.lt) if _is_complex(a) else lax.lt(a, b)


def _int_floor_divide(a: Any, b: Any) -> Any:
    quotient = lax.div(a, b)
    if _is_unsigned(a):
        return quotient
    # Truncation rounds towards zero; floor needs one less when the signs differ
    # and the division is not exact.
    signs_differ = lax.ne(lax.sign(a), lax.sign(b))
    inexact = lax.ne(lax.rem(a, b), _zeros(a))
    return _select(lax.bitwise_and(signs_differ, inexact),
                   lax.sub(quotient, _const(quotient, 1)), quotient)


def floor_divide(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 // x2``: division rounded towards minus infinity."""
    a, b = _util.promote_args_numeric("floor_divide", x1, x2)
    if _is_int(a):
        return _int_floor_divide(a, b)
    if _is_complex(a):
        raise TypeError("lamina.numpy.floor_divide does not support complex inputs")
    return float_divmod(a, b)[0]


def float_divmod(a: Any, b: Any) -> tuple[Any, Any]:
    """Floor division and modulus of promoted floats, NumPy-exact (the
    modulus has the sign of the divisor)."""
    mod = lax.rem(a, b)
    # as CPython's float_divmod (and JAX): x // 0 is x / 0 (inf, or nan for 0)
    shape = lax_common.broadcasting_shape("floor_divide", get_aval(a).shape, get_aval(b).shape)
    a_full = lax_helpers.maybe_broadcast(shape, a)
    zero_divisor = lax_helpers.maybe_broadcast(shape, lax.eq(b, lax.full_like(b, 0)))
    corrected = lax.select(zero_divisor, a_full, lax.sub(a, mod))
    div = lax.div(corrected, b)
    fix = lax.bitwise_and(lax.ne(mod, lax_common.const(mod, 0)),
                          lax.ne(lax.sign(b), lax.sign(mod)))
    mod = lax.select(fix, lax.add(mod, b), mod)
    # full_like keeps div's weak type (a numpy 1 would make the result strong)
    div = lax.select(fix, lax.sub(div, lax.full_like(div, 1)), div)
    return lax.round(div), mod


def _nonzero_divisor(b: Any) -> Any:
    """Integer divisors of 0 replaced by 1, so ``x % 0`` is 0 (as JAX) rather than
    whatever the hardware's integer remainder gives."""
    if not _is_int(b):
        return b
    return _select(lax.eq(b, _zeros(b)), lax.full_like(b, 1), b)


def _remainder(a: Any, b: Any) -> Any:
    b = _nonzero_divisor(b)
    trunc = lax.rem(a, b)
    if _is_unsigned(a):
        return trunc
    zero = _zeros(trunc)
    # NumPy's remainder has the sign of the divisor.
    fix = lax.bitwise_and(lax.ne(trunc, zero), lax.ne(lax.lt(trunc, zero), lax.lt(b, _zeros(b))))
    return _select(fix, lax.add(trunc, b), trunc)


def remainder(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 % x2`` with the sign of the divisor (as Python's ``%``)."""
    a, b = _util.promote_args_numeric("remainder", x1, x2)
    _util.check_no_complex("remainder", a)
    return _remainder(a, b)


def mod(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Alias of ``remainder``."""
    return remainder(x1, x2)


def fmod(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The C remainder: the result has the sign of the dividend."""
    a, b = _util.promote_args_numeric("fmod", x1, x2)
    _util.check_no_complex("fmod", a)
    return lax.rem(a, _nonzero_divisor(b))


def divmod(x1: ArrayLike, x2: ArrayLike, /) -> tuple[Array, Array]:  # noqa: A001 - NumPy's name
    """``(floor_divide(x1, x2), remainder(x1, x2))``."""
    a, b = _util.promote_args_numeric("divmod", x1, x2)
    if _is_int(a):
        return _int_floor_divide(a, b), _remainder(a, b)
    _util.check_no_complex("divmod", a)
    return float_divmod(a, b)


def _int_power(base: Any, exponent: Any) -> Any:
    """Integer ``base ** exponent`` by binary exponentiation over the low 6
    bits of the exponent: any base other than 0, 1 and -1 overflows beyond
    them (JAX's choice, so results agree). ``0 ** n`` is 0 for ``n != 0``."""
    zero, one = _zeros(exponent), _const(exponent, 1)
    base_is_zero = lax.eq(base, _zeros(base))
    acc = _select(lax.bitwise_and(base_is_zero, lax.ne(exponent, zero)),
                  lax.full_like(base, 0), lax.full_like(base, 1))
    for _ in range(6):
        odd = lax.ne(lax.bitwise_and(exponent, one), zero)
        acc = _select(odd, lax.mul(acc, base), acc)
        exponent = lax.shift_right_logical(exponent, one)
        base = lax.mul(base, base)
    return acc


def _static_int(x: Any) -> int | None:
    """``x`` as a Python int when it is a concrete integer scalar, else None."""
    if isinstance(x, (bool, float, complex)) or not _util.is_concrete(x):
        return None
    if isinstance(x, int):
        return x
    value = np.asarray(_util.concrete("power", x, "the exponent"))
    if value.shape != () or not (dtypes.is_integer(value.dtype) or value.dtype == np.bool_):
        return None
    return int(value)


def power(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 ** x2``. A concrete integer exponent uses exact repeated
    multiplication (``integer_pow``); a float base with an integer array
    exponent keeps the base's dtype (and is differentiable at 0)."""
    exponent = _static_int(x2)
    if exponent is not None and -2 ** 31 <= exponent < 2 ** 31:
        (a,) = _util.promote_dtypes_numeric("power", x1)
        return lax.integer_pow(a, exponent)
    base, power_ = _util.promote_shapes("power", *_util.operands("power", x1, x2))
    a, b = _util.promote_dtypes_numeric("power", base, power_)
    if _is_int(a):
        shape = _util.broadcast_shapes("power", _util.shape_of(a), _util.shape_of(b))
        a, b = _util.broadcast_to("power", a, shape), _util.broadcast_to("power", b, shape)
        return _int_power(a, b)
    if _is_inexact(base) and _is_int(power_):
        return lax.pow(base, power_)
    return lax.pow(a, b)


def pow(x1: ArrayLike, x2: ArrayLike, /) -> Array:  # noqa: A001 - the array-API name
    """Alias of ``power``."""
    return power(x1, x2)


def float_power(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 ** x2`` computed in floating point."""
    a, b = _util.promote_args_inexact("float_power", x1, x2)
    return lax.pow(a, b)


def hypot(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``sqrt(x1**2 + x2**2)`` without overflow or underflow; eagerly one
    compiled program, as JAX's (its last bits are XLA's fused arithmetic)."""
    return _hypot_compiled(x1, x2)


def _hypot(x1: ArrayLike, x2: ArrayLike) -> Array:
    a, b = _util.promote_args_inexact("hypot", x1, x2)
    _util.check_no_complex("hypot", a)
    a, b = lax.abs(a), lax.abs(b)
    has_inf = lax.bitwise_or(isinf(a), isinf(b))
    big, small = lax.max(a, b), lax.min(a, b)
    zero = lax.eq(big, _zeros(big))
    safe_big = _select(zero, lax.full_like(big, 1), big)
    ratio = lax.div(small, safe_big)
    out = _select(zero, big, lax.mul(big, lax.sqrt(lax.add(_const(ratio, 1), lax.square(ratio)))))
    return _select(has_inf, lax.full_like(out, np.inf), out)


_hypot_compiled = tc_api.compiled_when_eager(_hypot)


def _wrap_angle(x: Any, half_period: float) -> Any:
    """``x`` moved by whole periods into ``[-half_period, half_period)``."""
    period = _const(x, 2 * half_period)
    shifted = lax.rem(lax.add(x, _const(x, half_period)), period)
    shifted = _select(lax.lt(shifted, _zeros(shifted)), lax.add(shifted, period), shifted)
    return lax.sub(shifted, _const(x, half_period))


def _complex_log_sum(a: Any, b: Any, exp: Callable[[Any], Any], scale: float | None,
                     half_period: float) -> Any:
    """``log(exp(a) + exp(b))`` (``exp`` of base e or 2) of complex values,
    the imaginary part (the angle) wrapped into one period, as JAX's."""
    amax = lax.max(a, b)
    tail = lax.log1p(exp(lax.sub(lax.add(a, b), lax.mul(amax, _const(amax, 2)))))
    out = lax.add(amax, tail if scale is None else lax.mul(_const(amax, scale), tail))
    return lax.complex(lax.real(out), _wrap_angle(lax.imag(out), half_period))


def _logaddexp_value(a: Any, b: Any) -> Any:
    if _is_complex(a):
        return _complex_log_sum(a, b, lax.exp, None, math.pi)
    amax = lax.max(a, b)
    delta = lax.sub(a, b)
    out = lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    # delta is NaN when both are the same infinity (or either is NaN).
    return _select(isnan(delta), lax.add(a, b), out)


def _logaddexp2_value(a: Any, b: Any) -> Any:
    if _is_complex(a):
        return _complex_log_sum(a, b, _exp2, 1 / math.log(2), math.pi / math.log(2))
    amax = lax.max(a, b)
    delta = lax.sub(a, b)
    # A product by log2(e), as JAX's (a division by ln 2 rounds differently).
    log2_e = _const(a, 1 / math.log(2))
    tail = lax.mul(log2_e, lax.log1p(_exp2(lax.neg(lax.abs(delta)))))
    return _select(isnan(delta), lax.add(a, b), lax.add(amax, tail))


def _finite_or_zero(x: Any) -> Any:
    """+inf (a complex value's real part +inf) replaced by 0 (so that
    ``inf - inf`` never reaches a derivative)."""
    real = lax.real(x) if _is_complex(x) else x
    return _select(lax.eq(real, _const(real, np.inf)), _zeros(x), x)


def _log_sum_jvp(value: Callable[[Any, Any], Any], weight: Callable[[Any], Any]) -> Any:
    """A custom-JVP ``log(exp(a) + exp(b))``-like function whose derivative
    ``weight(a - out)`` is well defined at ties and infinities (as JAX's)."""
    fun = custom_jvp(value)

    def jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
        (a, b), (ta, tb) = primals, tangents
        out = fun(a, b)
        safe_out = _finite_or_zero(out)
        da = weight(lax.sub(_finite_or_zero(a), safe_out))
        db = weight(lax.sub(_finite_or_zero(b), safe_out))
        return out, lax.add(lax.mul(ta, da), lax.mul(tb, db))

    fun.defjvp(jvp)
    return fun


# JAX's logaddexp and logaddexp2 are jitted ufuncs: eagerly, one compiled program each.
_logaddexp_fn = tc_api.compiled_when_eager(_log_sum_jvp(_logaddexp_value, lax.exp))
_logaddexp2_fn = tc_api.compiled_when_eager(_log_sum_jvp(_logaddexp2_value, lambda d: _exp2(d)))


def logaddexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``log(exp(x1) + exp(x2))`` without overflow."""
    a, b = _util.promote_args_inexact("logaddexp", x1, x2)
    a, b = _same_shape("logaddexp", a, b)
    return _logaddexp_fn(a, b)


def logaddexp2(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``log2(2**x1 + 2**x2)`` without overflow."""
    a, b = _util.promote_args_inexact("logaddexp2", x1, x2)
    a, b = _same_shape("logaddexp2", a, b)
    return _logaddexp2_fn(a, b)


def _same_shape(fun: str, a: Any, b: Any) -> tuple[Any, Any]:
    """Both operands broadcast to their common shape (so tangents match it)."""
    shape = _util.broadcast_shapes(fun, _util.shape_of(a), _util.shape_of(b))
    return _util.broadcast_to(fun, a, shape), _util.broadcast_to(fun, b, shape)


def copysign(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The magnitude of ``x1`` with the sign of ``x2``."""
    a, b = _util.promote_args_inexact("copysign", x1, x2)
    _util.check_no_complex("copysign", a)
    magnitude = lax.abs(a)
    return _select(signbit(b), lax.neg(magnitude), magnitude)


def heaviside(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0``."""
    a, b = _util.promote_args_inexact("heaviside", x1, x2)
    zero = _zeros(a)
    one = _const(a, 1)
    at_zero = _select(isnan(a), a, b)
    out = _select(lax.lt(a, zero), zero, _select(lax.gt(a, zero), one, at_zero))
    # JAX 0.10.2's result is as weak as the promoted arguments when x1 is a
    # scalar, and strongly typed when x1 has axes.
    return _util.as_array(out) if _util.ndim_of(a) == 0 else _util.strip_weak(out)


def ldexp(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 * 2**x2`` (``x2`` an integer array)."""
    m, i = _util.operands("ldexp", x1, x2)
    if _is_complex(m) or not (_is_int(i) or _is_bool(i)):
        # JAX's ValueError for these input types
        raise ValueError(f"lamina.numpy.ldexp is not supported for input types "
                         f"({_dt(m)}, {_dt(i)}): x1 must be real and x2 an integer array")
    # As JAX: the result has x1's inexact dtype (strongly typed); x2 does not
    # take part in the promotion.
    (a,) = _util.promote_dtypes_inexact("ldexp", x1)
    a = _util.strip_weak(a)
    a, e = _util.promote_shapes("ldexp", a, _util.convert(i, _dt(a)))
    return lax.mul(a, _exp2(e))


# --- bitwise and logical -----------------------------------------------------------------
def _check_bitwise(name: str, *xs: Any) -> None:
    for x in xs:
        if not (_is_int(x) or _is_bool(x)):
            raise TypeError(f"lamina.numpy.{name} is only defined for integer and boolean "
                            f"arrays, got {_dt(x)}")


def _bitwise(name: str, op: Callable[[Any, Any], Any], doc: str,
             promote: str = "same") -> Binary:
    promoter = _PROMOTERS[promote]

    def ufunc(x1: ArrayLike, x2: ArrayLike, /) -> Array:
        a, b = promoter(name, x1, x2)
        _check_bitwise(name, a)
        return op(a, b)

    _named(ufunc, name, doc)
    return ufunc


bitwise_and = _bitwise("bitwise_and", lax.bitwise_and, "Elementwise bitwise and.")
bitwise_or = _bitwise("bitwise_or", lax.bitwise_or, "Elementwise bitwise or.")
bitwise_xor = _bitwise("bitwise_xor", lax.bitwise_xor, "Elementwise bitwise xor.")
left_shift = _bitwise("left_shift", lax.shift_left, "``x1 << x2`` elementwise.", "numeric")
bitwise_left_shift = _bitwise("bitwise_left_shift", lax.shift_left, "``x1 << x2`` elementwise.",
                              "numeric")


def _right_shift(a: Any, b: Any) -> Any:
    if _is_unsigned(a):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


right_shift = _bitwise("right_shift", _right_shift,
                       "``x1 >> x2`` (arithmetic for signed, logical for unsigned ints).",
                       "numeric")
bitwise_right_shift = _bitwise("bitwise_right_shift", _right_shift, "``x1 >> x2`` elementwise.",
                               "numeric")


def invert(x: ArrayLike, /) -> Array:
    """Bitwise not (logical not for bools)."""
    (a,) = _util.operands("invert", x)
    _check_bitwise("invert", a)
    return lax.bitwise_not(a)


bitwise_not = invert
bitwise_invert = invert


def _truthy(x: Any) -> Any:
    return x if _is_bool(x) else lax.ne(x, _const(x, 0))


def _logical(name: str, op: Callable[[Any, Any], Any], doc: str) -> Binary:
    def ufunc(x1: ArrayLike, x2: ArrayLike, /) -> Array:
        # Promoted first, as JAX: the truth values are as weak as the promoted arguments.
        a, b = (_truthy(v) for v in _util.promote_args(name, x1, x2))
        return op(a, b)

    _named(ufunc, name, doc)
    return ufunc


logical_and = _logical("logical_and", lax.bitwise_and, "Elementwise ``x1 and x2`` (bool).")
logical_or = _logical("logical_or", lax.bitwise_or, "Elementwise ``x1 or x2`` (bool).")
logical_xor = _logical("logical_xor", lax.bitwise_xor, "Elementwise ``x1 xor x2`` (bool).")


def logical_not(x: ArrayLike, /) -> Array:
    """Elementwise ``not x`` (bool)."""
    (a,) = _util.operands("logical_not", x)
    return lax.bitwise_not(_truthy(a))


# --- comparisons ---------------------------------------------------------------------------
_array_equal = _binary("equal", lax.eq, "same", "``x1 == x2`` elementwise.")
_array_not_equal = _binary("not_equal", lax.ne, "same", "``x1 != x2`` elementwise.")


def equal(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 == x2`` elementwise (typed keys compare by their key data)."""
    if is_key_array(x1) or is_key_array(x2):
        return keys_equal("lamina.numpy.equal", x1, x2)
    return _array_equal(x1, x2)


def not_equal(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """``x1 != x2`` elementwise (typed keys compare by their key data)."""
    if is_key_array(x1) or is_key_array(x2):
        return lax.bitwise_not(keys_equal("lamina.numpy.not_equal", x1, x2))
    return _array_not_equal(x1, x2)


def _ordering(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``compare`` (lax.lt, ...) as NumPy orders complex values: by the real
    parts, and by the imaginary parts where the real parts are equal."""
    def ordered(a: Any, b: Any) -> Any:
        if not _is_complex(a):
            return compare(a, b)
        ra, rb = lax.real(a), lax.real(b)
        return _select(lax.eq(ra, rb), compare(lax.imag(a), lax.imag(b)), compare(ra, rb))
    return ordered


less = _binary("less", _ordering(lax.lt), "same", "``x1 < x2`` elementwise.")
less_equal = _binary("less_equal", _ordering(lax.le), "same", "``x1 <= x2`` elementwise.")
greater = _binary("greater", _ordering(lax.gt), "same", "``x1 > x2`` elementwise.")
greater_equal = _binary("greater_equal", _ordering(lax.ge), "same",
                        "``x1 >= x2`` elementwise.")


# --- unary math ---------------------------------------------------------------------------
def _exp2(x: Any) -> Any:
    return lax.exp2(x)


def _log2(x: Any) -> Any:
    """``log(x) / log(2)`` (complex: its parts divided), as JAX computes it."""
    # The constant is strongly typed, so the result is too (as JAX's).
    r = lax.log(x)
    if not _is_complex(x):
        return lax.div(r, lax.log(np.asarray(2.0, _dt(x))))
    re, im = lax.real(r), lax.imag(r)
    ln2 = lax.log(np.asarray(2.0, _dt(re)))
    return lax.complex(lax.div(re, ln2), lax.div(im, ln2))


#: 1 / log(10), by which JAX multiplies (a division by log(10) rounds differently)
_ONE_OVER_LN10 = 0.4342944819032518


def _log10(x: Any) -> Any:
    """``log(x) * (1 / log(10))`` (complex: its parts), as JAX computes it."""
    # The constant is strongly typed, so the result is too (as JAX's).
    r = lax.log(x)
    if not _is_complex(x):
        return lax.mul(r, np.asarray(_ONE_OVER_LN10, _dt(x)))
    re, im = lax.real(r), lax.imag(r)
    scale = np.asarray(_ONE_OVER_LN10, _dt(re))
    return lax.complex(lax.mul(re, scale), lax.mul(im, scale))


def _identity_for_ints(op: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Rounding ops leave integers and bools unchanged (as JAX)."""
    def rounding(x: Any) -> Any:
        return x if not _is_inexact(x) else op(x)
    return rounding


def _rint(x: Any) -> Any:
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


def rint(x: ArrayLike, /) -> Array:
    """Rounds to the nearest integer, ties to even; integers and bools become
    the default float (strongly typed, as JAX: not their ``to_inexact_dtype``);
    complex values round their real and imaginary parts."""
    (a,) = _util.operands("rint", x)
    if not _is_inexact(a):
        return lax.convert_element_type(a, dtypes.default_float_dtype())
    if _is_complex(a):
        return lax.complex(_rint(lax.real(a)), _rint(lax.imag(a)))
    return _rint(a)


def _trunc(x: Any) -> Any:
    return _select(lax.lt(x, _zeros(x)), lax.ceil(x), lax.floor(x))


def _abs(x: Any) -> Any:
    if _is_unsigned(x) or _is_bool(x):
        return x
    return lax.abs(x)


def _sign(x: Any) -> Any:
    if _is_bool(x):
        # As JAX's lax.sign: bools are not a numeric kind it signs.
        raise TypeError("lamina.numpy.sign does not accept dtype bool; accepted dtypes are "
                        "subtypes of integer, floating and complexfloating")
    if _is_unsigned(x):
        return lax.convert_element_type(lax.ne(x, _zeros(x)), _dt(x))
    if _is_complex(x):
        magnitude = lax.abs(x)
        zero = lax.eq(magnitude, _zeros(magnitude))
        safe = _select(zero, lax.full_like(magnitude, 1), magnitude)
        return _select(zero, _zeros(x), lax.div(x, lax.complex(safe, _zeros(safe))))
    return lax.sign(x)


def _fabs(x: Any) -> Any:
    if _is_complex(x):
        raise TypeError("lamina.numpy.fabs does not support complex dtypes")
    return lax.abs(x)


def _negative(x: Any) -> Any:
    if _is_bool(x):
        raise TypeError("lamina.numpy.negative: the - operator is not supported for booleans; "
                        "use logical_not or invert instead")
    return lax.neg(x)


def _real(x: Any) -> Any:
    return lax.real(x) if _is_complex(x) else x


def _imag(x: Any) -> Any:
    return lax.imag(x) if _is_complex(x) else lax.full_like(x, 0)


def _conj(x: Any) -> Any:
    return lax.conj(x) if _is_complex(x) else x


def _sinc(x: Any) -> Any:
    # A safe denominator keeps the gradient at 0 finite (it is 0 there).
    zero = lax.eq(x, _zeros(x))
    pi_x = lax.mul(_const(x, np.pi), _select(zero, lax.full_like(x, 1), x))
    return _select(zero, lax.full_like(x, 1), lax.div(lax.sin(pi_x), pi_x))


def _cbrt(x: Any) -> Any:
    return lax.cbrt(x)


def _isnan(x: Any) -> Any:
    # x != x for every dtype: weakly typed for weak x, as JAX's.
    return lax.ne(x, x)


def _isfinite(x: Any) -> Any:
    if _is_complex(x):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x) if _is_inexact(x) else lax.full_like(x, True, dtypes.bool_)


def _isinf(x: Any) -> Any:
    if _is_complex(x):
        return lax.bitwise_or(_isinf(lax.real(x)), _isinf(lax.imag(x)))
    if not _is_inexact(x):
        return lax.full_like(x, False, dtypes.bool_)
    return lax.eq(lax.abs(x), np.asarray(np.inf, _dt(lax.abs(x))))


_SIGN_BIT_INT = {2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}


def _signbit(x: Any) -> Any:
    # Comparisons with a strongly typed zero: the result is never weak (as JAX's).
    if _is_int(x):
        return lax.lt(x, np.asarray(0, _dt(x)))
    if _is_bool(x):
        return lax.full_like(x, False, dtypes.bool_)
    if _is_complex(x):
        raise ValueError("lamina.numpy.signbit is not defined for complex-valued inputs")
    # The sign bit is not differentiable: keep autodiff out of the bitcast.
    as_int = lax.bitcast_convert_type(lax.stop_gradient(x), _SIGN_BIT_INT[_dt(x).itemsize])
    return lax.lt(as_int, _zeros(as_int))


def _angle(x: Any) -> Any:
    if _is_complex(x):
        return lax.atan2(lax.imag(x), lax.real(x))
    return lax.atan2(_zeros(x), x)


_UNARY_TABLE: list[tuple[str, Callable[[Any], Any], str, str]] = [
    ("exp", lax.exp, "inexact", "``e ** x`` elementwise."),
    ("exp2", _exp2, "inexact", "``2 ** x`` elementwise."),
    ("expm1", lax.expm1, "inexact", "``exp(x) - 1``, accurate near 0."),
    ("log", lax.log, "inexact", "The natural logarithm."),
    ("log1p", lax.log1p, "inexact", "``log(1 + x)``, accurate near 0."),
    ("log2", _log2, "inexact", "The base-2 logarithm."),
    ("log10", _log10, "inexact", "The base-10 logarithm."),
    ("sqrt", lax.sqrt, "inexact", "The non-negative square root."),
    ("cbrt", _cbrt, "inexact", "The cube root."),
    ("sin", lax.sin, "inexact", "Sine."),
    ("cos", lax.cos, "inexact", "Cosine."),
    ("tan", lax.tan, "inexact", "Tangent."),
    ("arcsin", lax.asin, "inexact", "Inverse sine."),
    ("arccos", lax.acos, "inexact", "Inverse cosine."),
    ("arctan", lax.atan, "inexact", "Inverse tangent."),
    ("sinh", lax.sinh, "inexact", "Hyperbolic sine."),
    ("cosh", lax.cosh, "inexact", "Hyperbolic cosine."),
    ("tanh", lax.tanh, "inexact", "Hyperbolic tangent."),
    ("arcsinh", lax.asinh, "inexact", "Inverse hyperbolic sine."),
    ("arccosh", lax.acosh, "inexact", "Inverse hyperbolic cosine."),
    ("arctanh", lax.atanh, "inexact", "Inverse hyperbolic tangent."),
    ("reciprocal", lax.reciprocal, "inexact", "``1 / x`` in floating point."),
    ("sinc", _sinc, "inexact", "The normalised sinc, ``sin(pi x) / (pi x)`` (1 at 0)."),
    ("square", lax.square, "numeric", "``x * x`` elementwise."),
    ("negative", _negative, "same", "``-x`` elementwise."),
    ("positive", lambda x: x, "same", "``+x`` elementwise (a copy)."),
    ("absolute", _abs, "same", "The absolute value (the modulus for complex)."),
    ("abs", _abs, "same", "The absolute value (the modulus for complex)."),
    ("fabs", _fabs, "inexact", "The absolute value, as a float."),
    ("sign", _sign, "same", "-1, 0 or 1 by the sign (``x / |x|`` for complex)."),
    ("floor", _identity_for_ints(lax.floor), "same", "Rounds towards minus infinity."),
    ("ceil", _identity_for_ints(lax.ceil), "same", "Rounds towards plus infinity."),
    ("trunc", _identity_for_ints(_trunc), "same", "Rounds towards zero."),
    ("isnan", _isnan, "same", "True where ``x`` is NaN."),
    ("isinf", _isinf, "same", "True where ``x`` is plus or minus infinity."),
    ("isfinite", _isfinite, "same", "True where ``x`` is neither infinite nor NaN."),
    ("signbit", _signbit, "same", "True where the sign bit is set (also for -0.0)."),
    ("real", _real, "same", "The real part."),
    ("imag", _imag, "same", "The imaginary part (zeros for real input)."),
    ("conj", _conj, "same", "The complex conjugate."),
    ("conjugate", _conj, "same", "The complex conjugate."),
]

_UNARY: dict[str, Unary] = {name: _unary(name, op, promote, doc)
                            for name, op, promote, doc in _UNARY_TABLE}
exp, exp2, expm1, log, log1p = (_UNARY[n] for n in ("exp", "exp2", "expm1", "log", "log1p"))
log2, log10, sqrt, cbrt = (_UNARY[n] for n in ("log2", "log10", "sqrt", "cbrt"))
sin, cos, tan, arcsin, arccos, arctan = (
    _UNARY[n] for n in ("sin", "cos", "tan", "arcsin", "arccos", "arctan"))
sinh, cosh, tanh, arcsinh, arccosh, arctanh = (
    _UNARY[n] for n in ("sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh"))
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh
reciprocal, sinc, square, negative, positive = (
    _UNARY[n] for n in ("reciprocal", "sinc", "square", "negative", "positive"))
absolute, abs, fabs, sign = (_UNARY[n] for n in ("absolute", "abs", "fabs", "sign"))
floor, ceil, trunc = (_UNARY[n] for n in ("floor", "ceil", "trunc"))
isnan, isinf, isfinite, signbit = (_UNARY[n] for n in ("isnan", "isinf", "isfinite", "signbit"))
conj, conjugate = (_UNARY[n] for n in ("conj", "conjugate"))


def real(val: ArrayLike, /) -> Array:
    """The real part of ``val`` (``val`` itself when it is real); JAX's parameter name."""
    return _UNARY["real"](val)


def imag(val: ArrayLike, /) -> Array:
    """The imaginary part of ``val`` (zeros when it is real); JAX's parameter name."""
    return _UNARY["imag"](val)


def isposinf(x: ArrayLike, /, out: None = None) -> Array:
    """True where ``x`` is plus infinity (``out`` only None, as JAX's)."""
    _util.check_out("isposinf", out)
    (a,) = _util.operands("isposinf", x)
    if _is_complex(a):
        raise ValueError("lamina.numpy.isposinf is not defined for complex input")
    return lax.eq(a, np.asarray(np.inf, _dt(a))) if _is_inexact(a) \
        else lax.full_like(a, False, dtypes.bool_)


def isneginf(x: ArrayLike, /, out: None = None) -> Array:
    """True where ``x`` is minus infinity (``out`` only None, as JAX's)."""
    _util.check_out("isneginf", out)
    (a,) = _util.operands("isneginf", x)
    if _is_complex(a):
        raise ValueError("lamina.numpy.isneginf is not defined for complex input")
    return lax.eq(a, np.asarray(-np.inf, _dt(a))) if _is_inexact(a) \
        else lax.full_like(a, False, dtypes.bool_)


def isreal(x: ArrayLike, /) -> Array:
    """True where the imaginary part is zero (everywhere for real input)."""
    (a,) = _util.operands("isreal", x)
    # Compared with a zero like the imaginary part: weak for weak x, as JAX's.
    im = _imag(a)
    return lax.eq(im, _zeros(im))


def iscomplex(x: ArrayLike, /) -> Array:
    """True where the imaginary part is non-zero."""
    (a,) = _util.operands("iscomplex", x)
    im = _imag(a)
    return lax.ne(im, _zeros(im))


def iscomplexobj(x: Any) -> bool:
    """True if ``x`` has a complex dtype. As JAX: anything with a ``dtype``
    (an array, a ``ShapeDtypeStruct``, a scalar type such as
    ``lamina.numpy.complex64``) is judged by it, ``None`` and strings are not
    complex, and other values are converted to arrays first."""
    if x is None or isinstance(x, str):
        return False
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt.kind == "c"
    return _is_complex(_util.operand("iscomplexobj", x))


def deg2rad(x: ArrayLike, /) -> Array:
    """Degrees to radians."""
    (a,) = _util.promote_args_inexact("deg2rad", x)
    return lax.mul(a, _const(a, np.pi / 180))


def rad2deg(x: ArrayLike, /) -> Array:
    """Radians to degrees."""
    (a,) = _util.promote_args_inexact("rad2deg", x)
    return lax.mul(a, _const(a, 180 / np.pi))


radians = deg2rad
degrees = rad2deg


def angle(z: ArrayLike, deg: bool = False) -> Array:
    """The argument (phase) of complex ``z`` in radians (degrees if ``deg``)."""
    (a,) = _util.operands("angle", z)
    # As JAX: real input that is not a floating array (integers, bools, every
    # 0-d real value) is measured in the default float, strongly typed.
    if not _is_complex(a) and (not dtypes.is_floating(_dt(a)) or _util.ndim_of(a) == 0):
        a = _util.convert(a, dtypes.default_float_dtype())
    out = _angle(a)
    return rad2deg(out) if deg else out


def round(a: ArrayLike, decimals: int = 0, out: None = None) -> Array:  # noqa: A001
    """Rounds to ``decimals`` decimals, ties to even (as NumPy)."""
    _util.check_out("round", out)
    (x,) = _util.operands("round", a)
    if _is_bool(x):  # as JAX
        raise ValueError("lamina.numpy.round: data type bool is not inexact; convert the "
                         "array to a number type first")
    (x,) = _util.promote_dtypes_numeric("round", x)
    decimals = _util.concrete_int("round", decimals, "decimals")
    if not _is_inexact(x):
        if decimals >= 0:
            return _util.as_array(x)
        raise TypeError("lamina.numpy.round: integer input with negative decimals is not "
                        "supported")
    if _is_complex(x):
        return lax.complex(round(lax.real(x), decimals), round(lax.imag(x), decimals))
    if decimals == 0:
        return _rint(x)
    # float16/bfloat16 would lose the scaled value: compute in float32.
    low = _dt(x).itemsize < 4
    y = lax.convert_element_type(x, np.float32) if low else x
    factor = _const(y, 10.0 ** decimals)
    y = lax.div(_rint(lax.mul(y, factor)), factor)
    return _util.convert(y, _dt(x), get_aval(x).weak_type) if low else y


around = round


def clip(arr: ArrayLike | None = None, /, min: ArrayLike | None = None,  # noqa: A002
         max: ArrayLike | None = None, *, a: ArrayLike | None = None,  # noqa: A002
         a_min: ArrayLike | None = None, a_max: ArrayLike | None = None) -> Array:
    """``arr`` limited to ``[min, max]`` (either bound may be None)."""
    if a is not None:
        arr = a
    if arr is None:
        raise TypeError("lamina.numpy.clip: missing the array argument")
    lo = min if a_min is None else a_min
    hi = max if a_max is None else a_max
    out = _util.operand("clip", arr, "arr")
    bounds = [_util.operand("clip", v, n) for v, n in ((lo, "min"), (hi, "max")) if v is not None]
    if any(_is_complex(v) for v in (out, *bounds)):
        raise ValueError("lamina.numpy.clip: complex values have no ordering and cannot be "
                         "clipped; clip their real or imaginary parts (lamina.numpy.real/imag)")
    if lo is not None:
        out = maximum(lo, out)
    if hi is not None:
        out = minimum(hi, out)
    return _util.as_array(out)


def nan_to_num(x: ArrayLike, copy: bool = True, nan: ArrayLike = 0.0,
               posinf: ArrayLike | None = None, neginf: ArrayLike | None = None) -> Array:
    """NaN -> ``nan``, +inf -> ``posinf`` (default the largest float),
    -inf -> ``neginf`` (default the most negative float)."""
    (a,) = _util.operands("nan_to_num", x)
    if not _is_inexact(a):
        return _util.as_array(a)
    if _is_complex(a):
        return lax.complex(nan_to_num(lax.real(a), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(lax.imag(a), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(_dt(a))
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = _select(isnan(a), _util.convert(_util.operand("nan_to_num", nan), _dt(a)), a)
    out = _select(isposinf(out), _util.convert(_util.operand("nan_to_num", hi), _dt(a)), out)
    return _select(isneginf(out), _util.convert(_util.operand("nan_to_num", lo), _dt(a)), out)


def modf(x: ArrayLike, /, out: None = None) -> tuple[Array, Array]:
    """The fractional and integral parts of ``x`` (``out`` only None, as JAX's)."""
    _util.check_out("modf", out)
    (a,) = _util.promote_args_inexact("modf", x)
    whole = _trunc(a)
    return lax.sub(a, whole), whole


# --- closeness ----------------------------------------------------------------------------
def isclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
            equal_nan: bool = False) -> Array:
    """``|a - b| <= atol + rtol * |b|`` elementwise; infinities equal only themselves.
    Typed keys are close when equal."""
    if is_key_array(a) or is_key_array(b):
        return keys_equal("lamina.numpy.isclose", a, b)
    x, y = _util.promote_args("isclose", a, b)
    if not _is_inexact(x):
        x, y = _util.promote_args_inexact("isclose", x, y)
    part = get_aval(lax.real(x)).dtype if _is_complex(x) else _dt(x)
    tol = lax.add(_util.convert(_util.operand("isclose", atol), part),
                  lax.mul(_util.convert(_util.operand("isclose", rtol), part), lax.abs(y)))
    out = lax.le(lax.abs(lax.sub(x, y)), tol)
    x_inf, y_inf = isinf(x), isinf(y)
    out = lax.bitwise_and(out, lax.bitwise_not(lax.bitwise_or(x_inf, y_inf)))
    out = lax.bitwise_or(out, lax.bitwise_and(lax.bitwise_and(x_inf, y_inf), lax.eq(x, y)))
    x_nan, y_nan = isnan(x), isnan(y)
    out = lax.bitwise_and(out, lax.bitwise_not(lax.bitwise_or(x_nan, y_nan)))
    if equal_nan:
        out = lax.bitwise_or(out, lax.bitwise_and(x_nan, y_nan))
    return _util.strip_weak(out)


def _all(x: Any) -> Any:
    return lax.reduce_and(x, tuple(range(_util.ndim_of(x))))


def allclose(a: ArrayLike, b: ArrayLike, rtol: ArrayLike = 1e-05, atol: ArrayLike = 1e-08,
             equal_nan: bool = False) -> Array:
    """True if ``isclose`` holds everywhere."""
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1: ArrayLike, a2: ArrayLike, equal_nan: bool = False) -> Array:
    """True if the arrays have the same shape and elements."""
    if is_key_array(a1) or is_key_array(a2):
        keys = key_arrays_of("lamina.numpy.array_equal", (a1, a2), ("a1", "a2"))
        if keys[0].shape != keys[1].shape:
            return lax.full((), False, dtypes.bool_)
        return _all(keys_equal("lamina.numpy.array_equal", *keys))
    x, y = _util.operands("array_equal", a1, a2)
    if _util.shape_of(x) != _util.shape_of(y):
        return lax.full((), False, dtypes.bool_)
    x, y = _util.promote_dtypes("array_equal", x, y)
    same = lax.eq(x, y)
    if equal_nan:
        same = lax.bitwise_or(same, lax.bitwise_and(isnan(x), isnan(y)))
    return _all(same)


def array_equiv(a1: ArrayLike, a2: ArrayLike) -> Array:
    """True if the arrays broadcast to each other with equal elements; arrays that do
    not broadcast are an error."""
    if is_key_array(a1) or is_key_array(a2):
        return _all(keys_equal("lamina.numpy.array_equiv", a1, a2))
    # Shapes that do not broadcast are promote_args' error, as in JAX (NumPy says False).
    x, y = _util.promote_args("array_equiv", a1, a2)
    return _all(lax.eq(x, y))
