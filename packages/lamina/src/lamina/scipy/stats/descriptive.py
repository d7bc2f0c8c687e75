"""Summaries of samples: ``mode``, ``rankdata`` and ``sem`` (SciPy's)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from lamina_tracing_core import lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina_tracing_core.api import vmap

__all__ = ["ModeResult", "mode", "rankdata", "sem"]

ArrayLike = Any
_RANK_METHODS = ("average", "min", "max", "dense", "ordinal")


class ModeResult(NamedTuple):
    """``mode``'s result: the most frequent values and how often each occurs."""

    mode: Any
    count: Any


def _along_last(fun: str, a: Any, axis: int | None) -> tuple[Any, tuple[int, ...], int | None]:
    """``a`` with ``axis`` moved last and the other axes flattened (``(rows, n)``),
    the other axes' shape and the canonical axis (None: ``a`` flattened)."""
    x = jnp.asarray(_util.operand(f"lamina.scipy.stats.{fun}", a, "a"))
    if axis is None:
        return jnp.reshape(x, (1, -1)), (), None
    ax = _util.canonicalize_axis(f"lamina.scipy.stats.{fun}", axis, x.ndim)
    moved = jnp.moveaxis(x, ax, -1)
    return jnp.reshape(moved, (-1, x.shape[ax])), moved.shape[:-1], ax


def _group_bounds(sorted_x: Any) -> tuple[Any, Any, Any]:
    """For each position of a sorted 1-D array: the first and last position
    of its run of equal values, and whether it starts a run."""
    n = sorted_x.shape[0]
    pos = jnp.arange(n)
    different = sorted_x[1:] != sorted_x[:-1]
    starts = jnp.concatenate([jnp.array([True]), different])
    ends = jnp.concatenate([different, jnp.array([True])])
    first = lax.cummax(jnp.where(starts, pos, 0), 0)
    last = lax.cummin(jnp.where(ends, pos, n), 0, reverse=True)
    return first, last, starts


def _mode_1d(x: Any) -> tuple[Any, Any]:
    sorted_x = jnp.sort(x)
    first, last, _ = _group_bounds(sorted_x)
    counts = last - first + 1
    best = jnp.argmax(counts)  # the first maximum: the smallest most frequent value
    return sorted_x[best], counts[best]


def mode(a: ArrayLike, axis: int | None = 0, nan_policy: str = "propagate",
         keepdims: bool = False) -> ModeResult:
    """The most frequent value along ``axis`` (the smallest of ties) and its count."""
    if nan_policy != "propagate":
        raise NotImplementedError("lamina.scipy.stats.mode: only nan_policy='propagate' is "
                                  "supported, as in JAX")
    rows, batch, ax = _along_last("mode", a, axis)
    if rows.shape[-1] == 0:
        raise ValueError("lamina.scipy.stats.mode: argument a has no elements along axis")
    values, counts = vmap(_mode_1d)(rows)
    values, counts = jnp.reshape(values, batch), jnp.reshape(counts, batch)
    if keepdims:
        if ax is None:
            kept = (1,) * jnp.ndim(_util.operand("lamina.scipy.stats.mode", a, "a"))
            values, counts = jnp.reshape(values, kept), jnp.reshape(counts, kept)
        else:
            values, counts = jnp.expand_dims(values, ax), jnp.expand_dims(counts, ax)
    return ModeResult(values, counts)


def _rank_1d(x: Any, method: str) -> Any:
    n = x.shape[0]
    order = jnp.argsort(x, stable=True)
    first, last, starts = _group_bounds(x[order])
    if method == "ordinal":
        ranks = jnp.arange(1, n + 1)
    elif method == "min":
        ranks = first + 1
    elif method == "max":
        ranks = last + 1
    elif method == "dense":
        ranks = jnp.cumsum(starts)
    else:
        ranks = (first + last) / 2 + 1
    placed = jnp.zeros_like(ranks).at[order].set(ranks)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        placed = jnp.where(jnp.any(jnp.isnan(x)), np.nan, placed)
    return placed


def rankdata(a: ArrayLike, method: str = "average", *, axis: int | None = None,
             nan_policy: str = "propagate") -> Any:
    """Ranks (from 1) of the data along ``axis`` (of the flattened data if
    None); ``method`` decides ties: ``average``, ``min``, ``max``, ``dense``
    or ``ordinal``. A slice holding NaN ranks as all NaN."""
    if method not in _RANK_METHODS:
        raise ValueError(f"lamina.scipy.stats.rankdata: unknown method {method!r}; expected "
                         f"one of {_RANK_METHODS}")
    if nan_policy != "propagate":
        raise NotImplementedError("lamina.scipy.stats.rankdata: only nan_policy='propagate' "
                                  "is supported, as in JAX")
    rows, batch, ax = _along_last("rankdata", a, axis)
    ranked = vmap(lambda r: _rank_1d(r, method))(rows)
    if ax is None:
        return jnp.reshape(ranked, (-1,))
    return jnp.moveaxis(jnp.reshape(ranked, batch + (rows.shape[-1],)), -1, ax)


def sem(a: ArrayLike, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *,
        keepdims: bool = False) -> Any:
    """The standard error of the mean, ``std(a, ddof) / sqrt(n)``, along ``axis``;
    ``nan_policy='omit'`` leaves NaN out of both."""
    x = jnp.asarray(_util.operand("lamina.scipy.stats.sem", a, "a"))
    (x,) = _util.promote_dtypes_inexact("lamina.scipy.stats.sem", x)
    if nan_policy == "propagate":
        n = x.size if axis is None else x.shape[_util.canonicalize_axis(
            "lamina.scipy.stats.sem", axis, x.ndim)]
        return jnp.std(x, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(n)
    if nan_policy == "omit":
        count = jnp.sum(~jnp.isnan(x), axis=axis, keepdims=keepdims)
        return jnp.nanstd(x, axis=axis, ddof=ddof, keepdims=keepdims) / jnp.sqrt(
            count.astype(get_aval(x).dtype))
    raise ValueError(f"lamina.scipy.stats.sem: nan_policy must be 'propagate' or 'omit', got "
                     f"{nan_policy!r}")
