"""The logistic distribution (``scipy.stats.logistic``)."""

from __future__ import annotations

from typing import Any

import lamina.numpy as jnp
from lamina_tracing_core import lax

from lamina.scipy import special
from lamina.scipy.stats._common import promote

__all__ = ["cdf", "isf", "logpdf", "pdf", "ppf", "sf"]

ArrayLike = Any


def _z(fun: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Any, Any]:
    x, loc, scale = promote(f"logistic.{fun}", x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, scale = _z("logpdf", x, loc, scale)
    # -|z| - 2 log1p(exp(-|z|)): the density is symmetric, and this never overflows
    a = jnp.abs(z)
    return jnp.subtract(jnp.subtract(jnp.negative(a), jnp.multiply(2, jnp.log1p(jnp.exp(
        jnp.negative(a))))), jnp.log(scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("cdf", x, loc, scale)
    return lax.logistic(z)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    z, _ = _z("sf", x, loc, scale)
    return lax.logistic(jnp.negative(z))


def ppf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("logistic.ppf", x, loc, scale)
    return jnp.add(jnp.multiply(special.logit(q), scale), loc)


def isf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    q, loc, scale = promote("logistic.isf", x, loc, scale)
    return jnp.subtract(loc, jnp.multiply(special.logit(q), scale))
