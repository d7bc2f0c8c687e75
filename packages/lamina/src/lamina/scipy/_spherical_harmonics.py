"""Spherical harmonics ``Y_n^m(theta, phi)`` (``sph_harm_y``) from the
orthonormalised associated Legendre functions ``Pbar_l^m(cos theta)``, computed
for every ``l, m <= n_max`` by the three standard recurrences (the diagonal
``m = l``, the first off-diagonal ``l = m + 1``, then upwards in ``l``), with the
Condon-Shortley phase, so that ``Y_n^m = Pbar_n^m(cos theta) exp(i m phi)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from lamina_tracing_core import lax
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any


def _upward_coefficients(n_max: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``c0[l, m], c1[l, m]`` of ``Pbar_l^m = c0 x Pbar_(l-1)^m - c1 Pbar_(l-2)^m``
    (zero where ``m >= l - 1``, the entries the other recurrences fill)."""
    degree = np.arange(n_max + 1, dtype=np.float64)[:, None]
    order = np.arange(n_max + 1, dtype=np.float64)[None, :]
    valid = order < degree - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        l2, m2 = degree * degree, order * order
        c0 = np.sqrt((4 * l2 - 1) / (l2 - m2))
        c1 = np.sqrt((2 * degree + 1) * ((degree - 1) ** 2 - m2)
                     / ((2 * degree - 3) * (l2 - m2)))
    return np.where(valid, c0, 0.0), np.where(valid, c1, 0.0)


def _normalized_legendre(n_max: int, x: Array) -> Array:
    """``Pbar_l^m(x)`` stacked as ``[l, m, ...x.shape]``."""
    dtype = x.dtype
    c0, c1 = _upward_coefficients(n_max)
    sine = jnp.sqrt(jnp.maximum(1.0 - x * x, 0.0))
    diagonal = [jnp.full_like(x, 0.5 / math.sqrt(math.pi))]
    for m in range(1, n_max + 1):
        diagonal.append(-math.sqrt(1.0 + 0.5 / m) * sine * diagonal[-1])
    columns = jnp.arange(n_max + 1)[:, None]
    expand = (slice(None),) + (None,) * x.ndim
    rows: list[Array] = []
    for degree in range(n_max + 1):
        if degree == 0:
            row = jnp.zeros((n_max + 1,) + x.shape, dtype)
        else:
            below2 = rows[-2] if degree >= 2 else jnp.zeros_like(rows[-1])
            row = (c0[degree].astype(dtype)[expand] * x * rows[-1]
                   - c1[degree].astype(dtype)[expand] * below2)
            row = jnp.where(columns.reshape((-1,) + (1,) * x.ndim) == degree - 1,
                            math.sqrt(2 * degree + 1) * x * diagonal[degree - 1], row)
        row = jnp.where(columns.reshape((-1,) + (1,) * x.ndim) == degree, diagonal[degree], row)
        rows.append(row)
    return jnp.stack(rows)


def _sph_harm_impl(n: Array, m: Array, theta: Array, phi: Array, n_max: int) -> Array:
    legendre = _normalized_legendre(n_max, jnp.cos(theta))
    points = jnp.arange(theta.shape[0])
    m_abs = jnp.abs(m)
    # Degrees and orders past n_max are clipped to it (n_max is the table's size).
    value = legendre[jnp.clip(n, 0, n_max), jnp.clip(m_abs, 0, n_max), points]
    angle = m_abs * phi
    harmonic = lax.complex(value * jnp.cos(angle), value * jnp.sin(angle))
    # Y_n^(-m) = (-1)^m conj(Y_n^m).
    parity = jnp.where(jnp.remainder(m_abs, 2) == 1, -1.0, 1.0).astype(value.dtype)
    return jnp.where(m < 0, parity * jnp.conj(harmonic), harmonic)


_sph_harm_jit = jit(_sph_harm_impl, static_argnames=("n_max",))


def sph_harm_y(n: ArrayLike, m: ArrayLike, theta: ArrayLike, phi: ArrayLike,
               diff_n: int | None = None, n_max: int | None = None) -> Array:
    """The spherical harmonic of degree ``n`` and order ``m`` (``|m| <= n``) at
    colatitude ``theta`` and longitude ``phi``; the four arguments broadcast
    together and the result is complex, of their shape flattened to 1-D.
    ``n_max`` (the largest degree, needed under ``jit``) defaults to ``max(n)``;
    degrees above it are clipped to it. ``diff_n`` (derivatives) is not offered."""
    fun = "lamina.scipy.special.sph_harm_y"
    if diff_n is not None:
        raise ValueError(f"{fun}: the argument diff_n (derivatives of the harmonics) is not "
                         "supported; pass diff_n=None")
    degree, order = (jnp.asarray(_util.operand(fun, v, name))
                     for v, name in ((n, "n"), (m, "m")))
    for value, name in ((degree, "n"), (order, "m")):
        if not jnp.issubdtype(value.dtype, jnp.integer):
            raise TypeError(f"{fun}: the argument {name} must have an integer dtype, "
                            f"got {value.dtype}")
    colatitude, longitude = _util.promote_args_inexact(fun, theta, phi)
    if n_max is None:
        top = int(np.max(_util.concrete(fun, degree, "the argument n (when n_max is None)")))
    else:
        top = _util.concrete_int(fun, n_max, "the argument n_max")
    if top < 0:
        raise ValueError(f"{fun}: the degrees must be non-negative, got n_max={top}")
    args = jnp.broadcast_arrays(degree, order, colatitude, longitude)
    flat = [jnp.ravel(a) for a in args]
    return _sph_harm_jit(*flat, n_max=top)
