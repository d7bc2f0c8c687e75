"""The uniform distribution on [loc, loc + scale] (``scipy.stats.uniform``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]

ArrayLike = Any


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    inside = jnp.logical_and(jnp.greater_equal(x, loc), jnp.less_equal(x, jnp.add(loc, scale)))
    return jnp.where(inside, jnp.negative(jnp.log(scale)), k(x, -math.inf))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    return jnp.clip(jnp.divide(jnp.subtract(x, loc), scale), 0, 1)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    out = jnp.add(loc, jnp.multiply(q, scale))
    return jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), k(q, math.nan), out)
