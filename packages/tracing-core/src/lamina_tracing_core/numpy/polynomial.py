"""Polynomials as coefficient arrays (highest degree first): ``polyval``,
``vander``."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.ufuncs import power


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Array:
    """The polynomial with coefficients ``p`` (highest degree first) at ``x``,
    by Horner's rule; eagerly one compiled program, as JAX's."""
    return _polyval_compiled(p, x, int(unroll))


def _polyval(p: ArrayLike, x: ArrayLike, unroll: int) -> Array:
    del unroll  # the loop is unrolled fully while tracing
    coeffs, xs = _util.promote_dtypes("polyval", p, x)
    if _util.ndim_of(coeffs) != 1:
        raise ValueError("lamina.numpy.polyval: p must be 1-D")
    n = _util.shape_of(coeffs)[0]
    # A strongly typed start (JAX's full_like with an explicit dtype): the
    # result is never weak.
    out = _util.strip_weak(lax.full_like(xs, 0))
    for i in range(n):
        c = lax.index_in_dim(coeffs, i, keepdims=False)
        out = lax.add(lax.mul(out, xs), c)
    return out


_polyval_compiled = tc_api.compiled_when_eager(_polyval, static_argnums=(2,))


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1``
    (or increasing powers), each ``power(x, k)`` as JAX computes it; eagerly,
    one compiled program, as JAX's."""
    (v,) = _util.operands("vander", x)
    if _util.ndim_of(v) != 1:
        raise ValueError("lamina.numpy.vander: x must be 1-D")
    m = _util.shape_of(v)[0]
    n = m if N is None else _util.concrete_int("vander", N, "N")
    if n < 0:
        raise ValueError("lamina.numpy.vander: N must be non-negative")
    return _vander_compiled(v, n, bool(increasing))


def _vander(v: Any, n: int, increasing: bool) -> Array:
    m = _util.shape_of(v)[0]
    exponents = lax.iota(get_aval(v).dtype, n)
    if not increasing:
        exponents = lax.sub(lax.full_like(exponents, n - 1), exponents)
    return power(lax.reshape(v, (m, 1)), lax.reshape(exponents, (1, n)))


_vander_compiled = tc_api.compiled_when_eager(_vander, static_argnums=(1, 2))


# --- coefficient arithmetic --------------------------------------------------------------------
def _coeffs(fun: str, *ps: ArrayLike, inexact: bool = False) -> list[Any]:
    promote = _util.promote_dtypes_inexact if inexact else _util.promote_dtypes
    out = promote(fun, *ps)
    for i, c in enumerate(out):
        if _util.ndim_of(c) != 1:
            raise ValueError(f"lamina.numpy.{fun}: argument {i} must be a 1-D coefficient "
                             f"array, got shape {_util.shape_of(c)}")
    return out


def _pad_front(c: Any, n: int) -> Any:
    m = _util.shape_of(c)[0]
    if m == n:
        return c
    return lax.pad(c, lax.full((), 0, get_aval(c).dtype), [(n - m, 0, 0)])


def polyadd(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The sum of two polynomials (coefficients highest degree first)."""
    p, q = _coeffs("polyadd", a1, a2)
    n = max(_util.shape_of(p)[0], _util.shape_of(q)[0])
    return lax.add(_pad_front(p, n), _pad_front(q, n))


def polysub(a1: ArrayLike, a2: ArrayLike) -> Array:
    """The difference of two polynomials."""
    p, q = _coeffs("polysub", a1, a2)
    n = max(_util.shape_of(p)[0], _util.shape_of(q)[0])
    return lax.sub(_pad_front(p, n), _pad_front(q, n))


def _trim_leading(fun: str, c: Any, tol: float = 0.0) -> Any:
    values = _util.concrete(fun, c, "the coefficients (with trim_leading_zeros=True)")
    nonzero = np.flatnonzero(np.abs(values) > tol)
    start = int(nonzero[0]) if nonzero.size else values.shape[0]
    return lax.slice_in_dim(c, start, _util.shape_of(c)[0], 1, 0)


def polymul(a1: ArrayLike, a2: ArrayLike, *, trim_leading_zeros: bool = False) -> Array:
    """The product of two polynomials (their full convolution, in an inexact
    dtype); ``trim_leading_zeros`` (concrete input only) drops leading zeros first."""
    p, q = _coeffs("polymul", a1, a2, inexact=True)
    if trim_leading_zeros:
        p, q = _trim_leading("polymul", p), _trim_leading("polymul", q)
    n, m = _util.shape_of(p)[0], _util.shape_of(q)[0]
    if n == 0 or m == 0:
        return lax.full((max(n + m - 1, 0),), 0, get_aval(p).dtype)
    # out[k] = sum_i p[i] q[k - i]: an outer product summed along anti-diagonals.
    terms = lax.mul(lax.broadcast_in_dim(p, (n, m), (0,)), lax.broadcast_in_dim(q, (n, m), (1,)))
    rows = [lax.pad(lax.index_in_dim(terms, i, keepdims=False),
                    lax.full((), 0, get_aval(p).dtype), [(i, n - 1 - i, 0)]) for i in range(n)]
    stacked = lax.concatenate([lax.expand_dims(r, (0,)) for r in rows], 0)
    return lax.reduce_sum(stacked, (0,))


def polyder(p: ArrayLike, m: int = 1) -> Array:
    """The ``m``-th derivative of the polynomial ``p`` (an inexact dtype)."""
    (c,) = _coeffs("polyder", p, inexact=True)
    order = _util.concrete_int("polyder", m, "m")
    if order < 0:
        raise ValueError("lamina.numpy.polyder: the order of the derivative must be positive")
    dt = get_aval(c).dtype
    for _ in range(order):
        n = _util.shape_of(c)[0]
        if n <= 1:
            return lax.full((0,), 0, dt)
        powers = np.arange(n - 1, 0, -1).astype(dt)
        c = lax.mul(lax.slice_in_dim(c, 0, n - 1, 1, 0), powers)
    return c


def polyint(p: ArrayLike, m: int = 1, k: ArrayLike | None = None) -> Array:
    """The ``m``-th antiderivative of ``p``; ``k`` holds the integration
    constants (a scalar or ``m`` values, default zeros)."""
    (c,) = _coeffs("polyint", p, inexact=True)
    order = _util.concrete_int("polyint", m, "m")
    if order < 0:
        raise ValueError("lamina.numpy.polyint: the order of the integral must be positive")
    dt = get_aval(c).dtype
    if k is None:
        ks = lax.full((order,), 0, dt)
    else:
        ks = _util.convert(_util.operand("polyint", k, "k"), dt)
        if _util.ndim_of(ks) == 0:
            ks = lax.broadcast_in_dim(ks, (order,), ())
        if _util.shape_of(ks) != (order,):
            raise ValueError("lamina.numpy.polyint: k must be a scalar or have length m "
                             f"({order}), got shape {_util.shape_of(ks)}")
    for i in range(order):
        n = _util.shape_of(c)[0]
        divisors = np.arange(n, 0, -1).astype(dt)
        const = lax.reshape(lax.index_in_dim(ks, i, keepdims=True), (1,))
        c = lax.concatenate([lax.div(c, divisors), const], 0)
    return c


def polydiv(u: ArrayLike, v: ArrayLike, *,
            trim_leading_zeros: bool = False) -> tuple[Array, Array]:
    """The quotient and remainder of polynomial long division ``u / v`` (the
    remainder keeps ``u``'s length unless ``trim_leading_zeros``, which needs
    concrete input)."""
    num, den = _coeffs("polydiv", u, v, inexact=True)
    m, n = _util.shape_of(num)[0] - 1, _util.shape_of(den)[0] - 1
    if n < 0:
        raise ValueError("lamina.numpy.polydiv: the divisor must not be empty")
    dt = get_aval(num).dtype
    lead = lax.index_in_dim(den, 0, keepdims=False)
    scale = lax.div(lax.full((), 1, dt), lead)
    quotient = []
    for k in range(m - n + 1):
        d = lax.mul(scale, lax.index_in_dim(num, k, keepdims=False))
        quotient.append(lax.reshape(d, (1,)))
        sub = lax.mul(lax.broadcast_in_dim(d, (n + 1,), ()), den)
        sub = lax.pad(sub, lax.full((), 0, dt), [(k, m - n - k, 0)])
        num = lax.sub(num, sub)
    q = lax.concatenate(quotient, 0) if quotient else lax.full((1,), 0, dt)
    if trim_leading_zeros:
        num = _trim_leading("polydiv", num, float(np.sqrt(np.finfo(dt).eps)))
    return q, num


def poly(seq_of_zeros: ArrayLike) -> Array:
    """The coefficients of the monic polynomial with the given roots (1-D),
    or the characteristic polynomial of a square matrix (2-D)."""
    (z,) = _util.promote_dtypes_inexact("poly", seq_of_zeros)
    nd = _util.ndim_of(z)
    dt = get_aval(z).dtype
    shape = _util.shape_of(z)
    if nd == 0:
        z = lax.reshape(z, (1,))
    elif nd == 2:
        if shape[0] != shape[1] or shape[0] == 0:
            raise ValueError("lamina.numpy.poly: input must be a 1-D array of roots or a "
                             f"non-empty square 2-D array, got shape {shape}")
        # jax.numpy gives the complex coefficients of its eigenvalue route.
        complex_dt = dt if dtypes.is_complex(dt) else np.dtype(
            np.complex128 if dt == np.float64 else np.complex64)
        return _util.convert(_characteristic(z), complex_dt)
    elif nd != 1:
        raise ValueError("lamina.numpy.poly: input must be a 1-D array of roots or a "
                         f"non-empty square 2-D array, got shape {shape}")
    coeffs = lax.full((1,), 1, dt)
    for i in range(_util.shape_of(z)[0]):
        root = lax.index_in_dim(z, i, keepdims=True)
        coeffs = polymul(coeffs, lax.concatenate([lax.full((1,), 1, dt), lax.neg(root)], 0))
    return _util.convert(coeffs, dt)


def _characteristic(a: Any) -> Any:
    """det(x I - a) by the Faddeev-LeVerrier recurrence:
    ``M_k = a M_{k-1} + c_{k-1} I``, ``c_k = -tr(a M_k) / k``."""
    n = _util.shape_of(a)[0]
    dt = get_aval(a).dtype
    eye = lax.convert_element_type(lax.eq(lax.broadcasted_iota(np.int32, (n, n), 0),
                                          lax.broadcasted_iota(np.int32, (n, n), 1)), dt)
    dims = (((1,), (0,)), ((), ()))
    coeffs = [lax.full((1,), 1, dt)]
    m = lax.full((n, n), 0, dt)
    c = lax.full((), 1, dt)
    for k in range(1, n + 1):
        m = lax.add(lax.dot_general(a, m, dims), lax.mul(eye, c))
        am = lax.dot_general(a, m, dims)
        trace = lax.reduce_sum(lax.mul(am, eye), (0, 1))
        c = lax.div(lax.neg(trace), lax.full((), k, dt))
        coeffs.append(lax.reshape(c, (1,)))
    return lax.concatenate(coeffs, 0)
