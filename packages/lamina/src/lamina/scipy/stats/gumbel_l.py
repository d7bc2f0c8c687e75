"""The left-skewed Gumbel distribution (``scipy.stats.gumbel_l``): the
mirror image of ``gumbel_r``."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _z(fun: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = promote(f"gumbel_l.{fun}", x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, scale = _z("logpdf", x, loc, scale)
    return jnp.subtract(jnp.subtract(z, jnp.exp(z)), jnp.log(scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("logsf", x, loc, scale)
    return jnp.negative(jnp.exp(z))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logsf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("cdf", x, loc, scale)
    return jnp.negative(jnp.expm1(jnp.negative(jnp.exp(z))))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.log(cdf(x, loc, scale))


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    p, loc, scale = promote("gumbel_l.ppf", p, loc, scale)
    out = jnp.add(loc, jnp.multiply(scale, jnp.log(jnp.negative(jnp.log1p(jnp.negative(p))))))
    return jnp.where(jnp.logical_or(jnp.less(p, 0), jnp.greater(p, 1)), k(p, math.nan), out)
