"""The Pareto distribution with shape ``b`` (``scipy.stats.pareto``), supported
on ``x >= loc + scale``."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _log_y(fun: str, x: ArrayLike, b: ArrayLike, loc: ArrayLike,
           scale: ArrayLike) -> tuple[Any, Any, Any, Any]:
    """log((x - loc) / scale) (0 below the support), b, scale, and the mask of
    points below the support."""
    x, b, loc, scale = promote(f"pareto.{fun}", x, b, loc, scale)
    below = jnp.less(x, jnp.add(loc, scale))
    y = jnp.where(below, k(x, 1), jnp.divide(jnp.subtract(x, loc), scale))
    return jnp.log(y), b, scale, below


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    log_y, b, scale, below = _log_y("logpdf", x, b, loc, scale)
    value = jnp.subtract(jnp.subtract(jnp.log(b), jnp.log(scale)),
                         jnp.multiply(jnp.add(b, 1), log_y))
    return jnp.where(below, k(value, -math.inf), value)


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, b, loc, scale))


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    log_y, b, _, below = _log_y("logsf", x, b, loc, scale)
    return jnp.where(below, k(log_y, 0), jnp.negative(jnp.multiply(b, log_y)))


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logsf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    log_y, b, _, below = _log_y("cdf", x, b, loc, scale)
    return jnp.where(below, k(log_y, 0), jnp.negative(jnp.expm1(jnp.negative(
        jnp.multiply(b, log_y)))))


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.log(cdf(x, b, loc, scale))


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    y = jnp.exp(jnp.divide(jnp.negative(jnp.log1p(jnp.negative(q))), b))
    out = jnp.add(jnp.multiply(scale, y), loc)
    return jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), k(q, math.nan), out)
