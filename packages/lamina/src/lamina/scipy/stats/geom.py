"""The geometric distribution (trials to the first success, ``scipy.stats.geom``)."""

from __future__ import annotations

import math
from typing import Any

import lamina.numpy as jnp
from lamina.scipy import special
from lamina.scipy.stats._common import k as const
from lamina.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]

ArrayLike = Any


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    kk, p, loc = promote("geom.logpmf", k, p, loc)
    x = jnp.subtract(kk, loc)
    value = jnp.add(special.xlog1py(jnp.subtract(x, 1), jnp.negative(p)), jnp.log(p))
    return jnp.where(jnp.less_equal(x, 0), const(x, -math.inf), value)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Any:
    return jnp.exp(logpmf(k, p, loc))
