"""The chi-squared distribution with ``df`` degrees of freedom (``scipy.stats.chi2``):
a gamma distribution of shape ``df / 2`` and scale ``2 * scale``."""

from __future__ import annotations

from typing import Any

import lamina.numpy as jnp
from lamina.scipy.stats import gamma
from lamina.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

ArrayLike = Any


def _as_gamma(fun: str, x: ArrayLike, df: ArrayLike, loc: ArrayLike,
              scale: ArrayLike) -> tuple[Any, Any, Any, Any]:
    x, df, loc, scale = promote(f"chi2.{fun}", x, df, loc, scale)
    return x, jnp.divide(df, 2), loc, jnp.multiply(scale, 2)


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.logpdf(*_as_gamma("logpdf", x, df, loc, scale))


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.pdf(*_as_gamma("pdf", x, df, loc, scale))


def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.cdf(*_as_gamma("cdf", x, df, loc, scale))


def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.logcdf(*_as_gamma("logcdf", x, df, loc, scale))


def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.sf(*_as_gamma("sf", x, df, loc, scale))


def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Any:
    return gamma.logsf(*_as_gamma("logsf", x, df, loc, scale))
