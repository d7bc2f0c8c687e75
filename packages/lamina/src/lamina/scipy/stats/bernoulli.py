"""The Bernoulli distribution with success probability ``p`` (``scipy.stats.bernoulli``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["cdf", "logpmf", "pmf", "ppf"]

ArrayLike = Any


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    kk, p, loc = promote("bernoulli.logpmf", k, p, loc)
    x = jnp.subtract(kk, loc)
    value = jnp.add(special.xlogy(x, p), special.xlog1py(jnp.subtract(1, x), jnp.negative(p)))
    return jnp.where(jnp.logical_or(jnp.less(x, 0), jnp.greater(x, 1)), const(x, -math.inf),
                     value)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, p, loc))


def _bad_p(p: Any) -> Any:
    return jnp.logical_or(jnp.isnan(p), jnp.logical_or(jnp.less(p, 0), jnp.greater(p, 1)))


def cdf(k: ArrayLike, p: ArrayLike) -> Any:
    kk, p = promote("bernoulli.cdf", k, p)
    value = jnp.where(jnp.less(kk, 0), const(kk, 0),
                      jnp.where(jnp.less(kk, 1), jnp.subtract(const(kk, 1), p), const(kk, 1)))
    return jnp.where(jnp.logical_or(_bad_p(p), jnp.isnan(kk)), const(kk, math.nan), value)


def ppf(q: ArrayLike, p: ArrayLike) -> Any:
    q, p = promote("bernoulli.ppf", q, p)
    bad = jnp.logical_or(jnp.logical_or(_bad_p(p), jnp.isnan(q)),
                         jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)))
    value = jnp.where(jnp.less_equal(q, jnp.subtract(const(q, 1), p)), const(q, 0), const(q, 1))
    return jnp.where(bad, const(q, math.nan), value)
