"""Polynomials as coefficient arrays (highest degree first): ``polyval``,
``vander``."""

from __future__ import annotations

from typing import Any

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike


def polyval(p: ArrayLike, x: ArrayLike, *, unroll: int = 16) -> Array:
    """The polynomial with coefficients ``p`` (highest degree first) at ``x``,
    by Horner's rule."""
    coeffs, xs = _util.promote_dtypes("polyval", p, x)
    if _util.ndim_of(coeffs) != 1:
        raise ValueError("lamina.numpy.polyval: p must be 1-D")
    n = _util.shape_of(coeffs)[0]
    out = lax.full_like(xs, 0)
    for i in range(n):
        c = lax.index_in_dim(coeffs, i, keepdims=False)
        out = lax.add(lax.mul(out, xs), c)
    return out


def vander(x: ArrayLike, N: int | None = None, increasing: bool = False) -> Array:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x**(N-1), ..., x, 1``
    (or increasing powers)."""
    (v,) = _util.operands("vander", x)
    if _util.ndim_of(v) != 1:
        raise ValueError("lamina.numpy.vander: x must be 1-D")
    m = _util.shape_of(v)[0]
    n = m if N is None else _util.concrete_int("vander", N, "N")
    if n < 0:
        raise ValueError("lamina.numpy.vander: N must be non-negative")
    columns: list[Any] = []
    power = lax.full_like(v, 1)
    for _ in range(n):
        columns.append(lax.reshape(power, (m, 1)))
        power = lax.mul(power, v)
    if not increasing:
        columns.reverse()
    if not columns:
        return lax.full((m, 0), 0, get_aval(v).dtype)
    return lax.concatenate(columns, 1)
