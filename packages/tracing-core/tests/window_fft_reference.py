"""Numpy reference impls (tests only) of the windowed reductions and the FFT,
written from XLA's definitions: ``installed()`` registers them on top of the
numpy reference interpreter for a block."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import core
from lamina_tracing_core.lax import windowed_reductions as wr
from lamina_tracing_core.lax.fft import FftType, fft_p
from lamina_tracing_core.primitives import impl_rules

Pads = Sequence[tuple[int, int]]


def lowest(dtype: np.dtype[Any]) -> Any:
    if dtype.kind in "fc":
        return -np.inf
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min


def highest(dtype: np.dtype[Any]) -> Any:
    if dtype.kind in "fc":
        return np.inf
    if dtype == np.bool_:
        return True
    return np.iinfo(dtype).max


def window_stack(x: Any, init: Any, window_dimensions: Sequence[int],
                 window_strides: Sequence[int], padding: Pads,
                 base_dilation: Sequence[int] | None = None,
                 window_dilation: Sequence[int] | None = None) -> np.ndarray[Any, Any]:
    """Every window of ``x`` (dilated by ``base_dilation``, padded with
    ``init``) as the trailing axis: shape ``out_shape + (prod(window),)``."""
    a = np.asarray(x)
    nd = a.ndim
    base = base_dilation or (1,) * nd
    wdil = window_dilation or (1,) * nd
    shape = [0 if d == 0 else (d - 1) * b + 1 for d, b in zip(a.shape, base)]
    dil = np.full(shape, init, a.dtype)
    dil[tuple(slice(None, None, b) for b in base)] = a
    p = np.pad(dil, [(max(lo, 0), max(hi, 0)) for lo, hi in padding], constant_values=init)
    p = p[tuple(slice(max(-lo, 0), p.shape[i] - max(-hi, 0))
                for i, (lo, hi) in enumerate(padding))]
    eff = [(w - 1) * r + 1 for w, r in zip(window_dimensions, wdil)]
    out_shape = [0 if n < e else (n - e) // s + 1 for n, e, s in zip(p.shape, eff,
                                                                       window_strides)]
    slices = []
    for off in itertools.product(*(range(w) for w in window_dimensions)):
        idx = tuple(slice(o * r, o * r + (n - 1) * s + 1, s) if n else slice(0, 0)
                    for o, r, n, s in zip(off, wdil, out_shape, window_strides))
        slices.append(p[idx])
    return np.stack(slices, -1)


def _sum(x: Any, **params: Any) -> Any:
    a = np.asarray(x)
    return window_stack(a, 0, **params).sum(-1, dtype=a.dtype)


def _max(x: Any, **params: Any) -> Any:
    a = np.asarray(x)
    return window_stack(a, lowest(a.dtype), **params).max(-1)


def _min(x: Any, **params: Any) -> Any:
    a = np.asarray(x)
    return window_stack(a, highest(a.dtype), **params).min(-1)


def _general(*args: Any, jaxpr: Any, **params: Any) -> list[Any]:
    n = len(args) // 2
    stacks = [window_stack(np.asarray(x), np.asarray(i), **params)
              for x, i in zip(args[:n], args[n:])]
    out_shape = stacks[0].shape[:-1]
    acc = [np.full(out_shape, np.asarray(i)) for i in args[n:]]
    for k in range(stacks[0].shape[-1]):
        new = [np.empty(out_shape, s.dtype) for s in stacks]
        for pos in np.ndindex(*out_shape):
            vals = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *[a[pos] for a in acc],
                                   *[s[pos + (k,)] for s in stacks])
            for j, v in enumerate(vals):
                new[j][pos] = np.asarray(v)
        acc = new
    return acc


def _selected(operand: Any, select_prim: Any, **params: Any) -> np.ndarray[Any, Any]:
    a = np.asarray(operand)
    if select_prim.name == "ge":
        return np.argmax(window_stack(a, lowest(a.dtype), **params), -1)
    return np.argmin(window_stack(a, highest(a.dtype), **params), -1)


def _gather_add(t: Any, operand: Any, *, select_prim: Any, **params: Any) -> Any:
    k = _selected(operand, select_prim, **params)
    tangents = window_stack(np.asarray(t), 0, **params)
    return np.take_along_axis(tangents, k[..., None], -1)[..., 0]


def _scatter_add(source: Any, operand: Any, *, select_prim: Any, **params: Any) -> Any:
    a, s = np.asarray(operand), np.asarray(source)
    k = _selected(a, select_prim, **params)
    positions = window_stack(np.arange(a.size).reshape(a.shape), -1, **params)
    where = np.take_along_axis(positions, k[..., None], -1)[..., 0]
    out = np.zeros(a.size, s.dtype)
    valid = where >= 0
    np.add.at(out, where[valid], s[valid])
    return out.reshape(a.shape)


def _fft(x: Any, *, fft_type: Any, fft_lengths: Sequence[int]) -> Any:
    a = np.asarray(x)
    axes = tuple(range(a.ndim - len(fft_lengths), a.ndim))
    typ = FftType(fft_type)
    if typ == FftType.FFT:
        return np.fft.fftn(a, axes=axes).astype(a.dtype)
    if typ == FftType.IFFT:
        return np.fft.ifftn(a, axes=axes).astype(a.dtype)
    if typ == FftType.RFFT:
        return np.fft.rfftn(a, axes=axes).astype(np.complex64 if a.dtype == np.float32
                                                   else np.complex128)
    return np.fft.irfftn(a, s=fft_lengths, axes=axes).astype(
        np.float32 if a.dtype == np.complex64 else np.float64)


IMPLS = {
    wr.reduce_window_sum_p: lambda x, **p: _sum(x, **p),
    wr.reduce_window_max_p: lambda x, **p: _max(x, **p),
    wr.reduce_window_min_p: lambda x, **p: _min(x, **p),
    wr.reduce_window_p: _general,
    wr.select_and_gather_add_p: lambda t, x, **p: _gather_add(
        t, x, **{"base_dilation": None, "window_dilation": None, **p}),
    wr.select_and_scatter_add_p: _scatter_add,
    fft_p: _fft,
}


@contextlib.contextmanager
def installed() -> Iterator[None]:
    saved = dict(impl_rules)
    impl_rules.update(IMPLS)
    try:
        yield
    finally:
        impl_rules.clear()
        impl_rules.update(saved)
