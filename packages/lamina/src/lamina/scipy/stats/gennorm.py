"""The generalized normal distribution with shape ``beta`` (``scipy.stats.gennorm``)."""

from __future__ import annotations

from typing import Any

import lamina.numpy as jnp
from lamina_tracing_core import lax

from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, beta: ArrayLike) -> Any:
    x, beta = promote("gennorm.logpdf", x, beta)
    return jnp.subtract(jnp.subtract(jnp.log(jnp.multiply(k(x, 0.5), beta)),
                                     lax.lgamma(jnp.divide(k(x, 1), beta))),
                        jnp.power(jnp.abs(x), beta))


def pdf(x: ArrayLike, beta: ArrayLike) -> Any:
    return jnp.exp(logpdf(x, beta))


def cdf(x: ArrayLike, beta: ArrayLike) -> Any:
    x, beta = promote("gennorm.cdf", x, beta)
    mass = lax.igamma(jnp.divide(k(x, 1), beta), jnp.power(jnp.abs(x), beta))
    return jnp.multiply(k(x, 0.5), jnp.add(k(x, 1), jnp.multiply(jnp.sign(x), mass)))
