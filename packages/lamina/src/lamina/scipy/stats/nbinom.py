"""The negative binomial distribution: failures before the ``n``-th success
with success probability ``p`` (``scipy.stats.nbinom``)."""

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
    kk, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    y = jnp.subtract(kk, loc)
    log_comb = jnp.subtract(jnp.subtract(special.gammaln(jnp.add(y, n)), special.gammaln(n)),
                            special.gammaln(jnp.add(y, 1)))
    value = jnp.add(log_comb, jnp.add(special.xlogy(n, p),
                                      special.xlogy(y, jnp.subtract(const(p, 1), p))))
    return jnp.where(jnp.less(kk, loc), const(value, -math.inf), value)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, n, p, loc))
