"""The binomial distribution of ``n`` trials with success probability ``p``
(``scipy.stats.binom``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]

ArrayLike = Any


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    kk, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = jnp.subtract(kk, loc)
    log_comb = jnp.subtract(special.gammaln(jnp.add(n, 1)),
                            jnp.add(special.gammaln(jnp.add(y, 1)),
                                    special.gammaln(jnp.add(jnp.subtract(n, y), 1))))
    log_linear = jnp.add(special.xlogy(y, p), special.xlog1py(jnp.subtract(n, y), jnp.negative(p)))
    value = jnp.add(log_comb, log_linear)
    certain = jnp.logical_or(jnp.logical_and(jnp.equal(y, 0), jnp.equal(n, 0)),
                             jnp.equal(log_linear, 0))
    value = jnp.where(certain, const(value, 0), value)
    inside = jnp.logical_and(jnp.greater_equal(kk, loc), jnp.less(kk, jnp.add(jnp.add(loc, n), 1)))
    return jnp.where(inside, value, const(value, -math.inf))


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, n, p, loc))
