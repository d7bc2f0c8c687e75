"""``lamina.scipy.cluster.vq``: vector quantization (``vq``)."""

from __future__ import annotations

from typing import Any

from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp

__all__ = ["vq"]

Array = Any


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Array, Array]:
    """For each observation (row of ``obs``, ``(M, N)`` or ``(M,)``), the index
    of the nearest code (row of ``code_book``) and the Euclidean distance to it."""
    del check_finite  # no host round trip to check; NaN propagates instead
    x, codes = _util.promote_dtypes_inexact("lamina.scipy.cluster.vq.vq", obs, code_book)
    if x.ndim != codes.ndim or x.ndim not in (1, 2):
        raise ValueError(f"lamina.scipy.cluster.vq.vq: obs and code_book must both be 1-D or "
                         f"both 2-D, got shapes {x.shape} and {codes.shape}")
    if x.ndim == 2 and x.shape[1] != codes.shape[1]:
        raise ValueError(f"lamina.scipy.cluster.vq.vq: obs has {x.shape[1]} features and "
                         f"code_book {codes.shape[1]}; they must match")
    if x.ndim == 1:
        x, codes = x[:, None], codes[:, None]
    distances = jnp.sqrt(jnp.sum(jnp.square(x[:, None, :] - codes[None, :, :]), axis=-1))
    index = jnp.argmin(distances, axis=1)
    return index, jnp.min(distances, axis=1)
