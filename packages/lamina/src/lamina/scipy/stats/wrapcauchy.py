"""The wrapped Cauchy distribution on [0, 2 pi] (``scipy.stats.wrapcauchy``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, c: ArrayLike) -> Any:
    x, c = promote("wrapcauchy.logpdf", x, c)
    c2 = jnp.square(c)
    denom = jnp.subtract(jnp.add(k(x, 1), c2), jnp.multiply(jnp.multiply(k(x, 2), c), jnp.cos(x)))
    value = jnp.subtract(jnp.log(jnp.subtract(k(x, 1), c2)),
                         jnp.add(k(x, math.log(2 * math.pi)), jnp.log(denom)))
    inside = jnp.logical_and(jnp.greater_equal(x, 0), jnp.less_equal(x, k(x, 2 * math.pi)))
    value = jnp.where(inside, value, k(value, -math.inf))
    valid = jnp.logical_and(jnp.greater(c, 0), jnp.less(c, 1))
    return jnp.where(valid, value, k(value, math.nan))


def pdf(x: ArrayLike, c: ArrayLike) -> Any:
    return jnp.exp(logpdf(x, c))
