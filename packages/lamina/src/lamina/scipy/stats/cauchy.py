"""The Cauchy distribution (``scipy.stats.cauchy``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _z(fun: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = promote(f"cauchy.{fun}", x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, scale = _z("logpdf", x, loc, scale)
    return jnp.negative(jnp.add(jnp.add(jnp.log1p(jnp.square(z)), jnp.log(scale)),
                                k(z, math.log(math.pi))))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("cdf", x, loc, scale)
    return jnp.add(k(z, 0.5), jnp.divide(jnp.arctan(z), k(z, math.pi)))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("sf", x, loc, scale)
    return jnp.subtract(k(z, 0.5), jnp.divide(jnp.arctan(z), k(z, math.pi)))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.log(sf(x, loc, scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    # tan(pi (q - 1/2)) = -1 / tan(pi q): taken from the nearer end, so small
    # tail probabilities keep their precision (q - 1/2 would round them away)
    lower = jnp.less(q, k(q, 0.5))
    tail = jnp.where(lower, q, jnp.subtract(k(q, 1), q))
    z = jnp.divide(k(q, 1), jnp.tan(jnp.multiply(k(q, math.pi), tail)))
    z = jnp.where(lower, jnp.negative(z), z)
    out = jnp.add(jnp.multiply(z, scale), loc)
    out = jnp.where(jnp.equal(q, 0), k(q, -math.inf), jnp.where(jnp.equal(q, 1), k(q, math.inf),
                                                                out))
    return jnp.where(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), k(q, math.nan), out)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return ppf(jnp.subtract(k(q, 1), q), loc, scale)
