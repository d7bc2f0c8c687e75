"""Window functions (``bartlett``, ``blackman``, ``hamming``, ``hanning``,
``kaiser``), ``geomspace``, ``fromfunction`` and the integer and float
helpers ``gcd``, ``lcm``, ``frexp`` and ``i0``.

The windows are computed in the default float type with JAX's formulas, so
their last bits match ``jax.numpy``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.control_flow import while_loop
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util, ufuncs
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import indices, logspace
from lamina_tracing_core.numpy.shape_ops import moveaxis


# --- window functions --------------------------------------------------------------------------
def _window_points(fun: str, M: Any) -> tuple[int, Any, np.dtype[Any]] | Array:  # noqa: N803
    m = _util.concrete_int(fun, M, "M")
    dt = dtypes.default_float_dtype()
    if m <= 1:
        return lax.full((max(m, 0),), 1, dt)
    return m, lax.iota(dt, m), dt


def bartlett(M: int) -> Array:  # noqa: N803 - NumPy's name
    """The Bartlett (triangular) window of ``M`` points."""
    pts = _window_points("bartlett", M)
    if not isinstance(pts, tuple):
        return pts
    m, n, _ = pts
    return ufuncs.subtract(1, ufuncs.divide(ufuncs.abs(ufuncs.subtract(
        ufuncs.add(ufuncs.multiply(2, n), 1), m)), m - 1))


def _cos_term(n: Any, m: int, k: float) -> Any:
    return ufuncs.cos(ufuncs.divide(ufuncs.multiply(k * np.pi, n), m - 1))


def blackman(M: int) -> Array:  # noqa: N803 - NumPy's name
    """The Blackman window of ``M`` points."""
    pts = _window_points("blackman", M)
    if not isinstance(pts, tuple):
        return pts
    m, n, _ = pts
    return ufuncs.add(ufuncs.subtract(0.42, ufuncs.multiply(0.5, _cos_term(n, m, 2))),
                      ufuncs.multiply(0.08, _cos_term(n, m, 4)))


def hamming(M: int) -> Array:  # noqa: N803 - NumPy's name
    """The Hamming window of ``M`` points."""
    pts = _window_points("hamming", M)
    if not isinstance(pts, tuple):
        return pts
    m, n, _ = pts
    return ufuncs.subtract(0.54, ufuncs.multiply(0.46, _cos_term(n, m, 2)))


def hanning(M: int) -> Array:  # noqa: N803 - NumPy's name
    """The Hann window of ``M`` points."""
    pts = _window_points("hanning", M)
    if not isinstance(pts, tuple):
        return pts
    m, n, _ = pts
    return ufuncs.multiply(0.5, ufuncs.subtract(1, _cos_term(n, m, 2)))


def kaiser(M: int, beta: ArrayLike) -> Array:  # noqa: N803 - NumPy's name
    """The Kaiser window of ``M`` points with shape parameter ``beta``."""
    pts = _window_points("kaiser", M)
    if not isinstance(pts, tuple):
        return pts
    m, n, _ = pts
    alpha = 0.5 * (m - 1)
    ratio = ufuncs.divide(ufuncs.subtract(n, alpha), alpha)
    arg = ufuncs.multiply(beta, ufuncs.sqrt(ufuncs.subtract(1, ufuncs.square(ratio))))
    return ufuncs.divide(i0(arg), i0(beta))


# --- i0 ----------------------------------------------------------------------------------------
@custom_jvp
def _i0(x: Any) -> Any:
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


def _i0_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = _i0(x)
    # d/dx I0(x) = I1(x) = sign(x) exp(|x|) i1e(x)
    slope = lax.mul(lax.exp(lax.abs(x)), lax.bessel_i1e(x))
    return out, lax.mul(slope, t)


_i0.defjvp(_i0_jvp)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of the first kind, order 0."""
    (v,) = _util.promote_args_inexact("i0", x)
    if dtypes.is_complex(get_aval(v).dtype):
        raise ValueError("lamina.numpy.i0: complex input is not supported")
    return _i0(v)


# --- geomspace and fromfunction ----------------------------------------------------------------
def geomspace(start: ArrayLike, stop: ArrayLike, num: int = 50, endpoint: bool = True,
              dtype: Any = None, axis: int = 0) -> Array:
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop``
    (negative bounds keep their sign; array bounds broadcast, the samples go
    along ``axis``); called eagerly, one compiled program, as JAX's."""
    num = _util.concrete_int("geomspace", num, "the num argument")
    if num < 0:
        raise ValueError(f"lamina.numpy.geomspace: number of samples, {num}, must be "
                         f"non-negative")
    lo, hi = _util.promote_dtypes("geomspace", start, stop)
    out_dt = _util.user_dtype("geomspace", dtype)
    if out_dt is None:
        out_dt = dtypes.to_inexact_dtype(dtypes.result_type(lo, hi))
    return _geomspace_compiled(lo, hi, num, bool(endpoint), out_dt, int(axis))


def _geomspace(lo: Any, hi: Any, num: int, endpoint: bool, out_dt: np.dtype[Any],
               axis: int) -> Array:
    comp = dtypes.to_inexact_dtype(out_dt)
    lo, hi = _util.convert(lo, comp), _util.convert(hi, comp)
    sign = lax.sign(lo)
    lo_abs, hi_abs = lax.div(lo, sign), lax.div(hi, sign)
    res = logspace(ufuncs.log10(lo_abs), ufuncs.log10(hi_abs), num, endpoint=endpoint,
                   base=10.0, dtype=comp, axis=0)
    res = ufuncs.multiply(sign, res)
    nd = _util.ndim_of(res)
    ax = _util.canonicalize_axis("geomspace", axis, nd)
    if ax != 0:
        res = moveaxis(res, 0, ax)
    return _util.convert(res, out_dt)


_geomspace_compiled = tc_api.compiled_when_eager(_geomspace, static_argnums=(2, 3, 4, 5))


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float,
                 **kwargs: Any) -> Any:
    """``function(*indices(shape))``: ``function`` called once with one index
    array per axis (of ``dtype``, default float)."""
    if not callable(function):
        raise TypeError(f"lamina.numpy.fromfunction: function must be callable, got "
                        f"{function!r}")
    grids = indices(tuple(shape), dtype=dtype)
    return function(*[lax.index_in_dim(grids, i, keepdims=False)
                      for i in range(len(tuple(shape)))], **kwargs)


# --- gcd and lcm -------------------------------------------------------------------------------
def _integer_pair(fun: str, x1: ArrayLike, x2: ArrayLike) -> tuple[Any, Any]:
    a, b = _util.promote_args(fun, x1, x2)
    dt = get_aval(a).dtype
    if not dtypes.is_integer(dt):  # bool too, as JAX
        raise ValueError(f"lamina.numpy.{fun}: arguments must be integers, got {dt}")
    shape = _util.broadcast_shapes(fun, _util.shape_of(a), _util.shape_of(b))
    return _util.broadcast_to(fun, a, shape), _util.broadcast_to(fun, b, shape)


def _gcd(a: Any, b: Any) -> Any:
    zero = lax.full_like(a, 0)

    def cond(carry: tuple[Any, Any]) -> Any:
        _, y = carry
        return lax.reduce_or(lax.ne(y, zero), tuple(range(_util.ndim_of(y))))

    def body(carry: tuple[Any, Any]) -> tuple[Any, Any]:
        x, y = carry
        nonzero = lax.ne(y, zero)
        safe = lax.select(nonzero, y, lax.full_like(y, 1))
        return lax.select(nonzero, y, x), lax.select(nonzero, lax.rem(x, safe), zero)

    x, _ = while_loop(cond, body, (ufuncs.abs(a), ufuncs.abs(b)))
    return x


def gcd(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The greatest common divisor of ``|x1|`` and ``|x2|``, elementwise."""
    a, b = _integer_pair("gcd", x1, x2)
    return _gcd(a, b)


def lcm(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The least common multiple of ``|x1|`` and ``|x2|``, elementwise (0 if
    either is 0)."""
    a, b = _integer_pair("lcm", x1, x2)
    d = _gcd(a, b)
    zero = lax.full_like(d, 0)
    is_zero = lax.eq(d, zero)
    safe = lax.select(is_zero, lax.full_like(d, 1), d)
    return lax.select(is_zero, zero, ufuncs.abs(lax.mul(a, lax.div(b, safe))))


# --- frexp -------------------------------------------------------------------------------------
def frexp(x: ArrayLike, /) -> tuple[Array, Array]:
    """The mantissa (in ``[0.5, 1)`` in magnitude) and the integer exponent of
    ``x``: ``x == mantissa * 2**exponent``. Zeros, infinities and NaNs give
    themselves and exponent 0."""
    (v,) = _util.promote_args_inexact("frexp", x)
    dt = get_aval(v).dtype
    if dtypes.is_complex(dt):
        raise TypeError("lamina.numpy.frexp: complex input is not supported")
    info = dtypes.finfo(dt)
    nmant, bits = int(info.nmant), dt.itemsize * 8
    bias = (1 << (int(info.nexp) - 1)) - 1
    uint = np.dtype(f"uint{bits}")
    ints = dtypes.int32  # JAX's exponent dtype, also with x64 on
    # Subnormals are scaled into the normal range first.
    tiny = lax.lt(lax.abs(v), lax.full_like(v, float(info.smallest_normal)))
    scale = nmant + 1
    scaled = lax.select(tiny, lax.mul(v, lax.full_like(v, float(2.0 ** scale))), v)
    raw = lax.bitcast_convert_type(scaled, uint)
    exp_mask = np.asarray(((1 << int(info.nexp)) - 1) << nmant, uint)
    exp_field = lax.shift_right_logical(lax.bitwise_and(raw, exp_mask), np.asarray(nmant, uint))
    exponent = lax.sub(lax.convert_element_type(exp_field, ints), np.asarray(bias - 1, ints))
    exponent = lax.select(tiny, lax.sub(exponent, np.asarray(scale, ints)), exponent)
    half_bits = np.asarray((bias - 1) << nmant, uint)
    mant_raw = lax.bitwise_or(lax.bitwise_and(raw, lax.bitwise_not(exp_mask)), half_bits)
    mantissa = lax.bitcast_convert_type(mant_raw, dt)
    special = lax.bitwise_or(lax.eq(v, lax.full_like(v, 0)),
                             lax.bitwise_not(lax.is_finite(v)))
    mantissa = lax.select(special, v, mantissa)
    exponent = lax.select(special, lax.full_like(exponent, 0), exponent)
    return mantissa, exponent


