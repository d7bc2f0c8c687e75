"""The Poisson distribution with mean ``mu`` (``scipy.stats.poisson``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["cdf", "entropy", "logpmf", "pmf"]

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


#: Means up to this get the entropy as a sum over the support; above it, the
#: asymptotic series (error below 1e-9 there).
_ENTROPY_SUM_LIMIT = 100.0
_ENTROPY_TERMS = 256  # covers mu + 15 sqrt(mu) for every mu summed


def entropy(mu: ArrayLike, loc: ArrayLike = 0) -> Any:
    """The entropy ``-sum_k p(k) log p(k)`` (nats); ``loc`` does not change it.
    NaN for ``mu < 0``."""
    mu, loc = promote("poisson.entropy", mu, loc)
    mu = jnp.broadcast_arrays(mu, loc)[0]
    small = mu <= _ENTROPY_SUM_LIMIT
    mu_sum = jnp.where(small & (mu > 0), mu, const(mu, 1.0))
    ks = jnp.arange(_ENTROPY_TERMS, dtype=mu.dtype)
    log_p = logpmf(ks, mu_sum[..., None])
    summed = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
    big = jnp.where(small, const(mu, 2 * _ENTROPY_SUM_LIMIT), mu)
    asymptotic = (0.5 * jnp.log(2 * math.pi * math.e * big) - 1 / (12 * big)
                  - 1 / (24 * jnp.square(big)) - 19 / (360 * big ** 3))
    out = jnp.where(small, summed, asymptotic)
    out = jnp.where(mu == 0, const(mu, 0.0), out)
    return jnp.where(mu < 0, const(mu, math.nan), out)
