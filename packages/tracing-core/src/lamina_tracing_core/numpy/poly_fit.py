"""Least-squares polynomial fitting, ``polyfit``, on ``linalg.lstsq``."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util, linalg
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.indexing import take
from lamina_tracing_core.numpy.polynomial import vander
from lamina_tracing_core.numpy.sorting import argsort


def polyfit(x: ArrayLike, y: ArrayLike, deg: int, rcond: float | None = None,
            full: bool = False, w: ArrayLike | None = None, cov: bool | str = False) -> Any:
    """The least-squares fit of a degree-``deg`` polynomial to the points
    ``(x, y)`` (``y`` may hold several data sets as columns); ``full`` adds
    the residuals, rank, singular values and ``rcond``; ``cov`` the
    covariance matrix of the coefficients. Eagerly, one compiled program,
    as JAX's."""
    xs, ys = _util.promote_dtypes_inexact("polyfit", x, y)
    degree = _util.concrete_int("polyfit", deg, "deg")
    if degree < 0:
        raise ValueError("lamina.numpy.polyfit: expected deg >= 0")
    if _util.ndim_of(xs) != 1:
        raise TypeError("lamina.numpy.polyfit: expected a 1-D vector for x")
    if _util.shape_of(xs)[0] == 0:
        raise TypeError("lamina.numpy.polyfit: expected a non-empty vector for x")
    if _util.ndim_of(ys) not in (1, 2):
        raise TypeError("lamina.numpy.polyfit: expected a 1-D or 2-D array for y")
    n = _util.shape_of(xs)[0]
    if _util.shape_of(ys)[0] != n:
        raise TypeError("lamina.numpy.polyfit: expected x and y to have the same length")
    order = degree + 1
    dt = get_aval(xs).dtype
    if rcond is None:
        rcond = n * float(np.finfo(dt).eps)
    weights = None
    if w is not None:
        (weights,) = _util.operands("polyfit", w, names=("w",))
        if _util.shape_of(weights) != (n,):
            raise TypeError("lamina.numpy.polyfit: expected a 1-D w of the length of x")
    if cov and cov != "unscaled" and n <= order:
        raise ValueError("lamina.numpy.polyfit: the number of data points must exceed "
                         "order to scale the covariance matrix")
    return _polyfit_compiled(xs, ys, order, float(rcond), bool(full), weights,
                             cov if cov == "unscaled" else bool(cov))


def _polyfit(xs: Any, ys: Any, order: int, rcond: float, full: bool, weights: Any,
             cov: bool | str) -> Any:
    n = _util.shape_of(xs)[0]
    dt = get_aval(xs).dtype
    lhs = vander(xs, order)
    rhs = ys
    if weights is not None:
        weights = _util.convert(weights, dt)
        lhs = lax.mul(lhs, lax.broadcast_in_dim(weights, (n, order), (0,)))
        rhs = lax.mul(rhs, weights if _util.ndim_of(rhs) == 1 else
                      lax.broadcast_in_dim(weights, _util.shape_of(rhs), (0,)))
    # Scale the columns to unit norm for a better-conditioned problem.
    scale = lax.sqrt(lax.reduce_sum(lax.mul(lhs, lhs), (0,)))
    # Broadcast through a (1, order) row as JAX does: XLA then rewrites the
    # division as a product by reciprocals, and so must we for JAX's bits.
    scale_row = lax.broadcast_in_dim(scale, (1, order), (1,))
    lhs = lax.div(lhs, lax.broadcast_in_dim(scale_row, (n, order), (0, 1)))
    c, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    c = lax.div(c, scale if _util.ndim_of(c) == 1 else
                lax.broadcast_in_dim(scale, _util.shape_of(c), (0,)))
    if full:
        return c, resids, rank, s, _util.convert(lax.full((), rcond, dt), dt, weak_type=True)
    if cov:
        gram = lax.dot_general(lhs, lhs, (((0,), (0,)), ((), ())))
        base = linalg.inv(gram)
        outer = lax.mul(lax.broadcast_in_dim(scale, (order, order), (0,)),
                        lax.broadcast_in_dim(scale, (order, order), (1,)))
        base = lax.div(base, outer)
        if cov == "unscaled":
            return c, base
        fac = lax.div(resids, lax.full_like(resids, n - order))
        if _util.ndim_of(ys) == 1:
            return c, lax.mul(base, lax.broadcast_in_dim(lax.reshape(fac, ()),
                                                         (order, order), ()))
        return c, lax.mul(lax.broadcast_in_dim(base, (order, order, _util.shape_of(fac)[0]),
                                               (0, 1)),
                          lax.broadcast_in_dim(fac, (order, order, _util.shape_of(fac)[0]),
                                               (2,)))
    return c


_polyfit_compiled = tc_api.compiled_when_eager(_polyfit, static_argnums=(2, 3, 4, 6))


def _companion_roots(p: Any) -> Any:
    """The eigenvalues of ``p``'s companion matrix (``p[0]`` non-zero)."""
    n = _util.shape_of(p)[0]
    dt = get_aval(p).dtype
    complex_dt = dt if dtypes.is_complex(dt) else np.dtype(
        np.complex128 if dt == np.float64 else np.complex64)
    if n < 2:
        return lax.full((0,), 0, complex_dt)
    size = n - 1
    rows = lax.broadcasted_iota(np.int32, (size, size), 0)
    cols = lax.broadcasted_iota(np.int32, (size, size), 1)
    sub = lax.convert_element_type(lax.eq(rows, lax.add(cols, np.int32(1))), dt)
    lead = lax.broadcast_in_dim(lax.index_in_dim(p, 0, keepdims=False), (size,), ())
    top = lax.div(lax.neg(lax.slice_in_dim(p, 1, n, 1, 0)), lead)
    first_row = lax.broadcast_in_dim(top, (size, size), (1,))
    companion = lax.select(lax.eq(rows, lax.full_like(rows, 0)), first_row, sub)
    return _util.convert(linalg.eigvals(companion), complex_dt)


def roots(p: ArrayLike, *, strip_zeros: bool = True) -> Array:
    """The roots of the polynomial with coefficients ``p`` (highest degree
    first), as the eigenvalues of its companion matrix. Leading zeros are
    removed (which needs concrete input) unless ``strip_zeros=False``; then
    that many trailing roots are NaN."""
    (c,) = _util.promote_dtypes_inexact("roots", p)
    if _util.ndim_of(c) == 0:
        c = lax.reshape(c, (1,))
    if _util.ndim_of(c) != 1:
        raise ValueError("lamina.numpy.roots: input must be a rank-1 array, got shape "
                         f"{_util.shape_of(c)}")
    n = _util.shape_of(c)[0]
    is_zero = lax.eq(c, lax.full_like(c, 0))
    if strip_zeros:
        values = _util.concrete("roots", is_zero, "the coefficients (or pass strip_zeros=False)")
        leading = int(np.argmin(values)) if not values.all() else n
        return _companion_roots(lax.slice_in_dim(c, leading, n, 1, 0))
    if n < 2:
        return _companion_roots(c)
    ints = np.dtype(np.int32)
    first_nonzero = lax.argmin(lax.convert_element_type(is_zero, ints), 0, ints)
    all_zero = lax.reduce_and(is_zero, (0,))
    leading_t = lax.select(all_zero, np.asarray(n, ints), first_nonzero)
    safe = lax.select(lax.broadcast_in_dim(all_zero, (n,), ()), lax.full_like(c, 1), c)
    # Rotate the leading zeros to the end, so the first coefficient is non-zero.
    positions = lax.rem(lax.add(lax.iota(ints, n), lax.broadcast_in_dim(leading_t, (n,), ())),
                        lax.full((n,), n, ints))
    rotated = lax.take_along_axis(safe, positions, 0)
    found = _companion_roots(rotated)
    # The rotated zeros add zero roots: move the zero roots last (stably), then
    # blank as many as there were leading zeros.
    zero_key = lax.convert_element_type(lax.eq(found, lax.full_like(found, 0)), ints)
    found = take(found, argsort(zero_key), mode="clip")
    keep = lax.lt(lax.iota(ints, n - 1), lax.sub(np.asarray(n - 1, ints), leading_t))
    nan = lax.full_like(found, complex(np.nan, np.nan))
    return lax.select(keep, found, nan)

