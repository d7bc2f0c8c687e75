"""The right-skewed Gumbel distribution (``scipy.stats.gumbel_r``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _z(fun: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = promote(f"gumbel_r.{fun}", x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, scale = _z("logpdf", x, loc, scale)
    return jnp.subtract(jnp.negative(jnp.add(z, jnp.exp(jnp.negative(z)))), jnp.log(scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("logcdf", x, loc, scale)
    return jnp.negative(jnp.exp(jnp.negative(z)))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logcdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("sf", x, loc, scale)
    return jnp.negative(jnp.expm1(jnp.negative(jnp.exp(jnp.negative(z)))))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.log(sf(x, loc, scale))


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    p, loc, scale = promote("gumbel_r.ppf", p, loc, scale)
    out = jnp.subtract(loc, jnp.multiply(scale, jnp.log(jnp.negative(jnp.log(p)))))
    return jnp.where(jnp.logical_or(jnp.less(p, 0), jnp.greater(p, 1)), k(p, math.nan), out)
