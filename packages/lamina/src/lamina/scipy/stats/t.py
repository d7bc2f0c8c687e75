"""Student's t distribution with ``df`` degrees of freedom (``scipy.stats.t``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote

__all__ = ["logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    z = jnp.divide(jnp.subtract(x, loc), scale)
    half_df_plus = jnp.divide(jnp.add(df, 1), 2)
    normalizer = jnp.subtract(special.gammaln(half_df_plus), special.gammaln(jnp.divide(df, 2)))
    normalizer = jnp.subtract(normalizer, jnp.add(
        jnp.multiply(k(x, 0.5), jnp.log(jnp.multiply(df, k(x, math.pi)))), jnp.log(scale)))
    return jnp.subtract(normalizer,
                        jnp.multiply(half_df_plus, jnp.log1p(jnp.divide(jnp.square(z), df))))


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, df, loc, scale))
