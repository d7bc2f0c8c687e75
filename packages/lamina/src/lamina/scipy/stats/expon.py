"""The exponential distribution (``scipy.stats.expon``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _z(fun: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = promote(f"expon.{fun}", x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, scale = _z("logpdf", x, loc, scale)
    return jnp.where(jnp.less(z, 0), k(z, -math.inf), jnp.negative(jnp.add(z, jnp.log(scale))))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("cdf", x, loc, scale)
    return jnp.where(jnp.less(z, 0), k(z, 0), jnp.negative(jnp.expm1(jnp.negative(z))))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("logcdf", x, loc, scale)
    safe = jnp.maximum(z, k(z, 0))
    return jnp.where(jnp.less(z, 0), k(z, -math.inf),
                     jnp.log(jnp.negative(jnp.expm1(jnp.negative(safe)))))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("sf", x, loc, scale)
    return jnp.where(jnp.less(z, 0), k(z, 1), jnp.exp(jnp.negative(z)))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("logsf", x, loc, scale)
    return jnp.where(jnp.less(z, 0), k(z, 0), jnp.negative(z))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    out = jnp.add(jnp.multiply(jnp.negative(jnp.log1p(jnp.negative(q))), scale), loc)
    return jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), k(q, math.nan), out)
