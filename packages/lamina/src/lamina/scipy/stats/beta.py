"""The beta distribution (``scipy.stats.beta``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

ArrayLike = Any


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Any:
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    shape_terms = jnp.add(special.xlogy(jnp.subtract(a, 1), y),
                          special.xlog1py(jnp.subtract(b, 1), jnp.negative(y)))
    value = jnp.subtract(shape_terms, jnp.add(special.betaln(a, b), jnp.log(scale)))
    outside = jnp.logical_or(jnp.less(x, loc), jnp.greater(x, jnp.add(loc, scale)))
    return jnp.where(outside, k(x, -math.inf), value)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _y(fun: str, x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike,
       scale: ArrayLike) -> tuple[Any, Any, Any]:
    x, a, b, loc, scale = promote(f"beta.{fun}", x, a, b, loc, scale)
    return jnp.clip(jnp.divide(jnp.subtract(x, loc), scale), 0, 1), a, b


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Any:
    y, a, b = _y("cdf", x, a, b, loc, scale)
    return special.betainc(a, b, y)


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Any:
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Any:
    y, a, b = _y("sf", x, a, b, loc, scale)
    return special.betainc(b, a, jnp.subtract(k(y, 1), y))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Any:
    return jnp.log(sf(x, a, b, loc, scale))
