"""The beta-binomial distribution (``scipy.stats.betabinom``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]

ArrayLike = Any


def logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Any:
    """``log C(n, k) + log B(k + a, n - k + b) - log B(a, b)`` on the integers ``0 <= k <= n``
    (``-inf`` off it, NaN for ``a <= 0`` or ``b <= 0``)."""
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = k - loc
    log_comb = -jnp.log1p(n) - special.betaln(n - y + 1, y + 1)
    out = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    out = jnp.where((y < 0) | (y > n) | (y != jnp.round(y)), const(y, -math.inf), out)
    return jnp.where((a <= 0) | (b <= 0), const(y, math.nan), out)


def pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, n, a, b, loc))
