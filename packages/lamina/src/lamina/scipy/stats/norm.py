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
    # -(log(2 pi scale^2) + (x - loc)^2 / scale^2) / 2, in JAX's order of
    # operations so that the rounding, and what is fitted with it, are JAX's
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    scale_squared = jnp.square(scale)
    log_normalizer = jnp.log(jnp.multiply(k(x, 2 * math.pi), scale_squared))
    quadratic = jnp.divide(jnp.square(jnp.subtract(x, loc)), scale_squared)
    return jnp.divide(jnp.add(log_normalizer, quadratic), k(x, -2.0))


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
