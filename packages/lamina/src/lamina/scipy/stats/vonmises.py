"""The von Mises distribution on [-pi, pi] (``scipy.stats.vonmises``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina_tracing_core import lax

from lamina.scipy.stats._common import k, promote

__all__ = ["logpdf", "pdf"]

ArrayLike = Any


def logpdf(x: ArrayLike, kappa: ArrayLike) -> Any:
    x, kappa = promote("vonmises.logpdf", x, kappa)
    # log(exp(kappa cos x) / (2 pi I0(kappa))), with I0 scaled: finite for large kappa
    value = jnp.subtract(jnp.multiply(kappa, jnp.subtract(jnp.cos(x), 1)),
                         jnp.log(jnp.multiply(k(x, 2 * math.pi), lax.bessel_i0e(kappa))))
    return jnp.where(jnp.greater(kappa, 0), value, k(value, math.nan))


def pdf(x: ArrayLike, kappa: ArrayLike) -> Any:
    return jnp.exp(logpdf(x, kappa))
