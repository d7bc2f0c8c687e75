"""The truncated normal distribution (``scipy.stats.truncnorm``): the normal
restricted to ``[a, b]`` (standardized bounds), with ``loc`` and ``scale``.

The normalizing mass ``Phi(b) - Phi(a)`` is taken in log space from the tail
the interval lies in, so bounds far out (``a = 30``) keep full precision."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k, promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]

ArrayLike = Any


def _log_diff(log_x: Any, log_y: Any) -> Any:
    """``log(exp(log_x) - exp(log_y))`` for ``log_x >= log_y``."""
    return log_x + jnp.log1p(-jnp.exp(log_y - log_x))


def _log_mass(a: Any, b: Any) -> Any:
    """``log(Phi(b) - Phi(a))`` for ``a <= b``."""
    left = _log_diff(special.log_ndtr(b), special.log_ndtr(a))  # both under 0
    right = _log_diff(special.log_ndtr(-a), special.log_ndtr(-b))  # both above 0
    central = jnp.log1p(-special.ndtr(a) - special.ndtr(-b))
    return jnp.where(b <= 0, left, jnp.where(a > 0, right, central))


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Any:
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    out = (-0.5 * jnp.square(z) - k(z, 0.5 * math.log(2 * math.pi)) - _log_mass(a, b)
           - jnp.log(scale))
    return jnp.where((z < a) | (z > b), k(z, -math.inf), out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Any:
    return jnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Any:
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, a, b)
    out = _log_mass(a, z) - _log_mass(a, b)
    out = jnp.where(z <= a, k(z, -math.inf), out)
    return jnp.where(z >= b, k(z, 0.0), out)


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Any:
    return jnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Any:
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, a, b)
    out = _log_mass(z, b) - _log_mass(a, b)
    out = jnp.where(z >= b, k(z, -math.inf), out)
    return jnp.where(z <= a, k(z, 0.0), out)


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Any:
    return jnp.exp(logsf(x, a, b, loc, scale))
