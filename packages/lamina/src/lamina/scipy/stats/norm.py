"""The normal distribution (``scipy.stats.norm``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    z = jnp.divide(jnp.subtract(x, loc), scale)
    return jnp.subtract(jnp.multiply(k(z, -0.5), jnp.square(z)),
                        jnp.add(jnp.log(scale), k(z, 0.5 * math.log(2 * math.pi))))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("norm.cdf", x, loc, scale)
    return special.ndtr(jnp.divide(jnp.subtract(x, loc), scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("norm.logcdf", x, loc, scale)
    return special.log_ndtr(jnp.divide(jnp.subtract(x, loc), scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("norm.sf", x, loc, scale)
    return special.ndtr(jnp.divide(jnp.subtract(loc, x), scale))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("norm.logsf", x, loc, scale)
    return special.log_ndtr(jnp.divide(jnp.subtract(loc, x), scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("norm.ppf", q, loc, scale)
    return jnp.add(jnp.multiply(special.ndtri(q), scale), loc)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("norm.isf", q, loc, scale)
    return jnp.subtract(loc, jnp.multiply(special.ndtri(q), scale))
