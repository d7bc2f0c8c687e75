"""The multinomial distribution of ``n`` draws over the categories on the last
axis of ``p`` (``scipy.stats.multinomial``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote_dtypes

__all__ = ["logpmf", "pmf"]

ArrayLike = Any


def logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    x, n, p = promote_dtypes("multinomial.logpmf", x, n, p)
    terms = jnp.sum(jnp.subtract(special.xlogy(x, p), special.gammaln(jnp.add(x, 1))), axis=-1)
    value = jnp.add(special.gammaln(jnp.add(n, 1)), terms)
    return jnp.where(jnp.equal(jnp.sum(x, axis=-1), n), value, k(value, -math.inf))


def pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    return jnp.exp(logpmf(x, n, p))
