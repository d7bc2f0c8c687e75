"""The Dirichlet distribution (``scipy.stats.dirichlet``): ``x`` has the
categories on its first axis (K, or K - 1 with the last one implied)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina_tracing_core.avals import get_aval

from lamina.scipy import special
from lamina.scipy.stats._common import k, promote_dtypes

__all__ = ["logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, alpha: ArrayLike) -> Any:
    x, alpha = promote_dtypes("dirichlet.logpdf", x, alpha)
    a_shape, x_shape = get_aval(alpha).shape, get_aval(x).shape
    if len(a_shape) != 1:
        raise ValueError(f"lamina.scipy.stats.dirichlet.logpdf: alpha must be one-dimensional, "
                         f"got shape {a_shape}")
    n = a_shape[0]
    if not x_shape or x_shape[0] not in (n, n - 1):
        raise ValueError(f"lamina.scipy.stats.dirichlet.logpdf: x must have {n} or {n - 1} "
                         f"entries on its first axis (alpha has {n}), got shape {x_shape}")
    if x_shape[0] == n - 1:
        x = jnp.concatenate([x, jnp.subtract(1, jnp.sum(x, axis=0, keepdims=True))], axis=0)
    log_norm = jnp.subtract(jnp.sum(special.gammaln(alpha)), special.gammaln(jnp.sum(alpha)))
    a = jnp.reshape(alpha, (n,) + (1,) * (len(x_shape) - 1))
    value = jnp.subtract(jnp.sum(special.xlogy(jnp.subtract(a, 1), x), axis=0), log_norm)
    simplex = jnp.logical_and(jnp.all(jnp.greater(x, 0), axis=0),
                              jnp.less(jnp.abs(jnp.subtract(jnp.sum(x, axis=0), 1)), 1e-6))
    return jnp.where(simplex, value, k(value, -math.inf))


def pdf(x: ArrayLike, alpha: ArrayLike) -> Any:
    return jnp.exp(logpdf(x, alpha))
