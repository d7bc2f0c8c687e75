"""The Laplace distribution (``scipy.stats.laplace``)."""

from __future__ import annotations

from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    z = jnp.abs(jnp.divide(jnp.subtract(x, loc), scale))
    return jnp.negative(jnp.add(jnp.add(z, jnp.log(scale)), k(z, 0.6931471805599453)))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, loc, scale = promote("laplace.cdf", x, loc, scale)
    z = jnp.divide(jnp.subtract(x, loc), scale)
    half_tail = jnp.multiply(k(z, 0.5), jnp.exp(jnp.negative(jnp.abs(z))))
    return jnp.where(jnp.less(z, 0), half_tail, jnp.subtract(k(z, 1), half_tail))
