"""Owen's T function ``T(h, a) = 1/(2 pi) integral_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx``
by one Gauss-Legendre rule (Patefield and Tandy's method T5), for every
argument at once: XLA evaluates both sides of a select, so a dispatch over the
eighteen regions of their full algorithm would cost more than it saves.

For ``|a| > 1`` the rule is applied to ``T(|a| h, 1 / |a|)`` and the identity
``T(h, a) = (Phi(h) + Phi(a h)) / 2 - Phi(h) Phi(a h) - T(a h, 1 / a)`` (``h, a >= 0``)
gives the rest; ``T`` is even in ``h`` and odd in ``a``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any


def _half_interval_rule(points: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Nodes squared and weights over ``2 pi`` for ``integral_0^1 g(x) dx`` with
    ``g`` even, from the ``points``-point Gauss-Legendre rule on ``[-1, 1]``."""
    nodes, weights = np.polynomial.legendre.leggauss(points)
    positive = nodes > 0
    return nodes[positive] ** 2, weights[positive] / (2 * math.pi)


_NODES_SQUARED, _WEIGHTS = _half_interval_rule(26)
_SQRT2 = math.sqrt(2.0)


def _quadrature(h: Array, a: Array) -> Array:
    """``T(h, a)`` for ``0 <= a <= 1`` by the rule (``a`` times the weighted sum)."""
    dtype = get_aval(h).dtype
    r = jnp.square(a)[..., None] * _NODES_SQUARED.astype(dtype)
    integrand = jnp.exp(-0.5 * jnp.square(h)[..., None] * (1.0 + r)) / (1.0 + r)
    return a * jnp.sum(integrand * _WEIGHTS.astype(dtype), axis=-1)


def _owens_t_impl(h: Array, a: Array) -> Array:
    h_abs, a_abs = jnp.abs(h), jnp.abs(a)
    reciprocal = a_abs > 1
    a_rule = jnp.where(reciprocal, 1.0 / a_abs, a_abs)
    h_rule = jnp.where(reciprocal, a_abs * h_abs, h_abs)
    # At h * |a| = inf * 0 (h = 0, a = inf) the rule's argument is 0, as the limit is.
    h_rule = jnp.where(h_abs == 0, 0.0, h_rule)
    t = _quadrature(h_rule, a_rule)
    # Closed forms where the rule is not needed: h = 0 and a = 1.
    t = jnp.where(h_rule == 0, jnp.arctan(a_rule) / (2 * math.pi), t)
    t = jnp.where(a_rule == 1, 0.125 * lax.erfc(-h_rule / _SQRT2) * lax.erfc(h_rule / _SQRT2), t)
    # The reflection for |a| > 1, in the form without cancellation on each side.
    scaled = a_abs * h_abs
    erf_h, erf_ah = lax.erf(h_abs / _SQRT2), lax.erf(scaled / _SQRT2)
    erfc_h, erfc_ah = lax.erfc(h_abs / _SQRT2), lax.erfc(scaled / _SQRT2)
    near = 0.25 - 0.25 * erf_h * erf_ah - t
    far = 0.25 * (erfc_h + erfc_ah - erfc_h * erfc_ah) - t
    t = jnp.where(reciprocal, jnp.where(scaled <= 0.67, near, far), t)
    t = jnp.where(h_abs == 0, jnp.arctan(a_abs) / (2 * math.pi), t)
    t = jnp.sign(a) * t
    return jnp.where(jnp.isnan(h) | jnp.isnan(a), np.nan, t)


_owens_t = custom_jvp(jit(_owens_t_impl))


@_owens_t.defjvp
def _owens_t_jvp(primals: Any, tangents: Any) -> tuple[Any, Any]:
    (h, a), (dh, da) = primals, tangents
    # dT/dh = -exp(-h^2 / 2) erf(a h / sqrt 2) / (2 sqrt(2 pi)),
    # dT/da = exp(-(1 + a^2) h^2 / 2) / (2 pi (1 + a^2)).
    d_h = -jnp.exp(-0.5 * jnp.square(h)) * lax.erf(a * h / _SQRT2) / (2 * math.sqrt(2 * math.pi))
    one_a2 = 1.0 + jnp.square(a)
    d_a = jnp.exp(-0.5 * one_a2 * jnp.square(h)) / (2 * math.pi * one_a2)
    return _owens_t(h, a), d_h * dh + d_a * da


def owens_t(h: ArrayLike, a: ArrayLike) -> Array:
    """Owen's T function of real ``h`` and ``a`` (broadcast together); its
    derivatives in both arguments are the closed forms."""
    p, q = _util.promote_args_inexact("lamina.scipy.special.owens_t", h, a)
    if dtypes.is_complex(get_aval(p).dtype):
        raise ValueError("lamina.scipy.special.owens_t: the arguments h and a must be "
                         f"real-valued, got dtype {get_aval(p).dtype}")
    p, q = jnp.broadcast_arrays(p, q)
    return _owens_t(p, q)
