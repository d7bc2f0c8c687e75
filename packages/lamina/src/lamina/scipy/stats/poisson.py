"""The Poisson distribution with mean ``mu`` (``scipy.stats.poisson``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["cdf", "logpmf", "pmf"]

ArrayLike = Any


def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
    kk, mu, loc = promote("poisson.logpmf", k, mu, loc)
    x = jnp.subtract(kk, loc)
    value = jnp.subtract(jnp.subtract(special.xlogy(x, mu), special.gammaln(jnp.add(x, 1))), mu)
    invalid = jnp.logical_or(jnp.less(x, 0), jnp.not_equal(jnp.round(kk), kk))
    return jnp.where(invalid, const(x, -math.inf), value)


def pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Any:
    kk, mu, loc = promote("poisson.cdf", k, mu, loc)
    x = jnp.subtract(kk, loc)
    value = special.gammaincc(jnp.floor(jnp.add(jnp.maximum(x, const(x, 0)), 1)), mu)
    return jnp.where(jnp.less(x, 0), const(x, 0), value)
