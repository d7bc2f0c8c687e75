"""Histograms: ``histogram_bin_edges``, ``histogram``, ``histogram2d`` and
``histogramdd``, as ``jax.numpy`` computes them (a value equal to the last
edge falls in the last bin; values outside the edges are not counted).

The number of bins must be concrete; the data, the weights and the range may
be traced, so histograms work under ``jit``, ``vmap`` and (for the weights)
``grad``."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util, reductions
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.calculus import diff
from lamina_tracing_core.numpy.creation import asarray, linspace
from lamina_tracing_core.numpy.indexing import getitem, index_update, ix_, ravel_multi_index
from lamina_tracing_core.numpy.sorting import bincount, searchsorted


def _inexact_dtype(x: Any) -> np.dtype[Any]:
    dt = get_aval(x).dtype
    return dtypes.to_inexact_dtype(dt)


def histogram_bin_edges(a: ArrayLike, bins: ArrayLike = 10,
                        range: Sequence[ArrayLike] | None = None,  # noqa: A002 - NumPy's name
                        weights: ArrayLike | None = None) -> Array:
    """The edges of the bins ``histogram`` would use: ``bins`` itself when it
    is 1-D, else ``bins + 1`` evenly spaced edges over ``range`` (default
    the data's min and max, widened by 0.5 when they are equal)."""
    if isinstance(bins, str):
        raise _util.UnsupportedArgumentError(
            "lamina.numpy.histogram_bin_edges: string values for bins are not supported; "
            "give the number of bins or the edges")
    (x,) = _util.operands("histogram_bin_edges", a, names=("a",))
    dt = _inexact_dtype(x)
    if np.ndim(bins) == 1:
        return _util.convert(asarray(bins), dt)
    n = _util.concrete_int("histogram_bin_edges", bins, "bins")
    if n < 1:
        raise ValueError(f"lamina.numpy.histogram_bin_edges: bins must be positive, got {n}")
    if range is None:
        lo, hi = reductions.min(x), reductions.max(x)
    else:
        bounds = _util.convert(asarray(range), dt)
        if _util.shape_of(bounds) != (2,):
            raise ValueError("lamina.numpy.histogram_bin_edges: range must be None or a pair "
                             f"of scalars, got shape {_util.shape_of(bounds)}")
        lo = lax.index_in_dim(bounds, 0, keepdims=False)
        hi = lax.index_in_dim(bounds, 1, keepdims=False)
    lo, hi = _util.convert(lo, dt), _util.convert(hi, dt)
    same = lax.eq(lo, hi)
    half = lax.full((), 0.5, dt)
    lo = lax.select(same, lax.sub(lo, half), lo)
    hi = lax.select(same, lax.add(hi, half), hi)
    return linspace(lo, hi, n + 1, dtype=dt)


def _data_and_weights(fun: str, a: ArrayLike, weights: ArrayLike | None,
                      weight_shape: Any) -> tuple[Any, Any]:
    if weights is None:
        (x,) = _util.promote_dtypes_inexact(fun, a)
        return x, lax.full_like(x, 1)
    x, w = _util.promote_dtypes_inexact(fun, a, weights)
    if _util.shape_of(w) != weight_shape(_util.shape_of(x)):
        raise ValueError(f"lamina.numpy.{fun}: weights should have the same shape as the "
                         f"data's {weight_shape(_util.shape_of(x))}, got {_util.shape_of(w)}")
    return x, w


def histogram(a: ArrayLike, bins: ArrayLike = 10,
              range: Sequence[ArrayLike] | None = None,  # noqa: A002 - NumPy's name
              weights: ArrayLike | None = None,
              density: bool | None = None) -> tuple[Array, Array]:
    """The counts (or summed ``weights``; with ``density`` a probability
    density) of ``a`` in each bin, and the bin edges."""
    x, w = _data_and_weights("histogram", a, weights, lambda s: s)
    edges = histogram_bin_edges(x, bins, range, w)
    m = _util.shape_of(edges)[0]
    idx = searchsorted(edges, x, side="right")
    last = lax.index_in_dim(edges, m - 1, keepdims=False)
    idx = lax.select(lax.eq(x, lax.broadcast_in_dim(last, _util.shape_of(x), ())),
                     lax.full_like(idx, m - 1), idx)
    counts = index_update(lax.full((m,), 0, get_aval(w).dtype), idx, w, "add")
    counts = lax.slice_in_dim(counts, 1, m, 1, 0)
    if density:
        counts = lax.div(lax.div(counts, diff(edges)),
                         lax.broadcast_in_dim(reductions.sum(counts), (m - 1,), ()))
    return counts, edges


def histogramdd(sample: ArrayLike, bins: Any = 10,
                range: Sequence[Any] | None = None,  # noqa: A002 - NumPy's name
                weights: ArrayLike | None = None,
                density: bool | None = None) -> tuple[Array, list[Array]]:
    """The ``D``-dimensional histogram of ``N`` points ``sample`` (shape
    ``(N, D)``), and the list of the edges along each dimension."""
    x, w = _data_and_weights("histogramdd", sample, weights, lambda s: s[:1])
    if _util.ndim_of(x) != 2:
        raise ValueError("lamina.numpy.histogramdd: sample must have shape (N, D), got "
                         f"{_util.shape_of(x)}")
    n, d = _util.shape_of(x)
    if range is not None and (len(range) != d or builtins.any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ValueError(f"lamina.numpy.histogramdd: for a sample of shape {(n, d)}, range "
                         f"must be a sequence of {d} pairs or Nones; got {range!r}")
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = [bins] * d
    else:
        if len(per_dim) != d:
            raise ValueError("lamina.numpy.histogramdd: there should be bins for each "
                             f"dimension ({d}), got {len(per_dim)}")
    indices, all_edges = [], []
    for i in builtins.range(d):
        column = getitem(x, (slice(None), i))
        edges = histogram_bin_edges(column, per_dim[i], None if range is None else range[i])
        m = _util.shape_of(edges)[0]
        idx = searchsorted(edges, column, side="right")
        last = lax.index_in_dim(edges, m - 1, keepdims=False)
        idx = lax.select(lax.eq(column, lax.broadcast_in_dim(last, (n,), ())),
                         lax.sub(idx, lax.full_like(idx, 1)), idx)
        indices.append(idx)
        all_edges.append(edges)
    nbins = tuple(_util.shape_of(e)[0] + 1 for e in all_edges)
    flat = ravel_multi_index(tuple(indices), nbins, mode="clip")
    hist = bincount(flat, None if weights is None else w, length=math.prod(nbins))
    hist = lax.reshape(hist, nbins)
    hist = getitem(hist, (slice(1, -1),) * d)
    if density:
        hist = _util.convert(hist, get_aval(x).dtype)
        hist = lax.div(hist, lax.broadcast_in_dim(reductions.sum(hist), _util.shape_of(hist),
                                                  ()))
        for width in ix_(*[diff(e) for e in all_edges]):
            hist = lax.div(hist, _util.broadcast_to("histogramdd", width,
                                                    _util.shape_of(hist)))
    return hist, all_edges


def histogram2d(x: ArrayLike, y: ArrayLike, bins: Any = 10,
                range: Sequence[Any] | None = None,  # noqa: A002 - NumPy's name
                weights: ArrayLike | None = None,
                density: bool | None = None) -> tuple[Array, Array, Array]:
    """The 2-D histogram of the points ``(x[i], y[i])`` and the edges along x and y."""
    xs, ys = _util.operands("histogram2d", x, y, names=("x", "y"))
    try:
        count = len(bins)
    except TypeError:
        count = 1
    if count not in (1, 2):
        edges = asarray(bins)
        bins = [edges, edges]
    xs, ys = _util.promote_dtypes("histogram2d", xs, ys)
    sample = lax.transpose(lax.concatenate([lax.expand_dims(xs, (0,)),
                                            lax.expand_dims(ys, (0,))], 0), (1, 0))
    hist, edges_list = histogramdd(sample, bins, range, weights, density)
    return hist, edges_list[0], edges_list[1]
