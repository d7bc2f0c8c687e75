"""The gamma distribution with shape ``a`` (``scipy.stats.gamma``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

ArrayLike = Any


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    value = jnp.subtract(jnp.subtract(special.xlogy(jnp.subtract(a, 1), y), y),
                         jnp.add(special.gammaln(a), jnp.log(scale)))
    return jnp.where(jnp.less(x, loc), k(x, -math.inf), value)


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, a, loc, scale))


def _y(fun: str, x: ArrayLike, a: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, a, loc, scale = promote(f"gamma.{fun}", x, a, loc, scale)
    return jnp.maximum(jnp.divide(jnp.subtract(x, loc), scale), k(x, 0)), a


def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    y, a = _y("cdf", x, a, loc, scale)
    return special.gammainc(a, y)


def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    y, a = _y("logcdf", x, a, loc, scale)
    return jnp.log(special.gammainc(a, y))


def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    y, a = _y("sf", x, a, loc, scale)
    return special.gammaincc(a, y)


def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    y, a = _y("logsf", x, a, loc, scale)
    return jnp.log(special.gammaincc(a, y))
