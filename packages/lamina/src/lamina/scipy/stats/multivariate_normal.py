"""The multivariate normal distribution (``scipy.stats.multivariate_normal``):
``x`` has the event on its last axis; ``cov`` is a scalar (``cov * I``) or an
``(n, n)`` matrix (or a batch of them), factored by Cholesky."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina_tracing_core import lax
from lamina_tracing_core.avals import get_aval

from lamina.scipy.stats._common import k, promote_dtypes

__all__ = ["logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: None = None) -> Any:
    if allow_singular is not None:
        raise ValueError("lamina.scipy.stats.multivariate_normal.logpdf: allow_singular is not "
                         "supported (leave it None)")
    x, mean, cov = promote_dtypes("multivariate_normal.logpdf", x, mean, cov)
    m_shape, c_shape = get_aval(mean).shape, get_aval(cov).shape
    log_2pi = k(x, math.log(2 * math.pi))
    if not m_shape:
        return jnp.subtract(jnp.divide(jnp.multiply(k(x, -0.5), jnp.square(jnp.subtract(x, mean))),
                                       cov),
                            jnp.multiply(k(x, 0.5), jnp.add(log_2pi, jnp.log(cov))))
    n = m_shape[-1]
    y = jnp.subtract(x, mean)
    if not c_shape:
        quad = jnp.divide(jnp.sum(jnp.square(y), axis=-1), cov)
        return jnp.subtract(jnp.multiply(k(x, -0.5), quad),
                            jnp.multiply(k(x, n / 2), jnp.add(log_2pi, jnp.log(cov))))
    if len(c_shape) < 2 or c_shape[-2:] != (n, n):
        raise ValueError(f"lamina.scipy.stats.multivariate_normal.logpdf: cov must be a scalar "
                         f"or have trailing shape ({n}, {n}) to match mean, got {c_shape}")
    chol = lax.linalg.cholesky(cov)
    batch = jnp.broadcast_shapes(get_aval(y).shape[:-1], c_shape[:-2])
    chol_b = jnp.broadcast_to(chol, (*batch, n, n))
    rhs = jnp.expand_dims(jnp.broadcast_to(y, (*batch, n)), -1)
    z = lax.linalg.triangular_solve(chol_b, rhs, left_side=True, lower=True)[..., 0]
    log_det_half = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return jnp.subtract(
        jnp.subtract(jnp.multiply(k(x, -0.5), jnp.sum(jnp.square(z), axis=-1)),
                     jnp.multiply(k(x, n / 2), log_2pi)),
        log_det_half)


def pdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> Any:
    return jnp.exp(logpdf(x, mean, cov))
