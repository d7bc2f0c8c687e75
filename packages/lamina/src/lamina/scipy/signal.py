"""``lamina.scipy.signal``: N-dimensional convolution and correlation (direct,
through XLA's convolution, or through the FFT), ``detrend``, and the windowed
Fourier analysis ``stft``, ``istft``, ``welch`` and ``csd``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

from lamina_sharded_jit import jit

import lamina.numpy as jnp
from lamina.scipy._spectral import csd, istft, stft, welch

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve",
           "istft", "stft", "welch"]

Array = Any
ArrayLike = Any
_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct", "fft")


def _inputs(fun: str, in1: ArrayLike, in2: ArrayLike, mode: str) -> tuple[Array, Array]:
    if mode not in _MODES:
        raise ValueError(f"lamina.scipy.signal.{fun}: mode must be one of {_MODES}, got "
                         f"{mode!r}")
    x, k = _util.promote_dtypes_inexact(f"lamina.scipy.signal.{fun}", in1, in2)
    if get_aval(x).ndim != get_aval(k).ndim:
        raise ValueError(f"lamina.scipy.signal.{fun}: in1 and in2 should have the same "
                         f"dimensionality, got shapes {get_aval(x).shape} and "
                         f"{get_aval(k).shape}")
    if 0 in get_aval(x).shape or 0 in get_aval(k).shape:
        raise ValueError(f"lamina.scipy.signal.{fun}: in1 and in2 cannot be empty")
    return x, k


def _valid_order(fun: str, x: Array, k: Array) -> tuple[Array, Array]:
    """For ``valid``: the larger input first (one must be at least as large as
    the other in every dimension, as SciPy requires)."""
    xs, ks = get_aval(x).shape, get_aval(k).shape
    if all(a >= b for a, b in zip(xs, ks)):
        return x, k
    if all(b >= a for a, b in zip(xs, ks)):
        return k, x
    raise ValueError(f"lamina.scipy.signal.{fun}: for 'valid' mode, one input must be at "
                     f"least as large as the other in every dimension, got shapes {xs} and {ks}")


def _crop(full: Array, mode: str, shape1: Sequence[int], shape2: Sequence[int],
          round_up: bool = False) -> Array:
    """The ``same`` (centered, ``in1``'s shape; an odd surplus left over on the
    right, or on the left with ``round_up``) or ``valid`` part of a full result."""
    if mode == "full":
        return full
    if mode == "same":
        target = tuple(shape1)
    else:
        target = tuple(max(a, b) - min(a, b) + 1 for a, b in zip(shape1, shape2))
    shift = 1 if round_up and mode == "same" else 0
    starts = [(f - t + shift) // 2 for f, t in zip(get_aval(full).shape, target)]
    return lax.slice(full, starts, [s + t for s, t in zip(starts, target)])


def _full_direct(x: Array, k: Array, precision: Any) -> Array:
    """The full convolution: XLA's convolution (a correlation) with the kernel reversed."""
    xs, ks = get_aval(x).shape, get_aval(k).shape
    nd = len(xs)
    if dtypes.is_complex(get_aval(x).dtype):
        # Complex products as four real convolutions.
        xr, xi, kr, ki = lax.real(x), lax.imag(x), lax.real(k), lax.imag(k)
        real = lax.sub(_full_direct(xr, kr, precision), _full_direct(xi, ki, precision))
        imag = lax.add(_full_direct(xr, ki, precision), _full_direct(xi, kr, precision))
        return lax.complex(real, imag)
    flipped = lax.rev(k, tuple(range(nd)))
    out = lax.conv_general_dilated(
        lax.reshape(x, (1, 1) + xs), lax.reshape(flipped, (1, 1) + ks), (1,) * nd,
        [(m - 1, m - 1) for m in ks], precision=precision or lax.Precision.HIGHEST)
    return lax.reshape(out, tuple(a + b - 1 for a, b in zip(xs, ks)))


def _full_fft(x: Array, k: Array) -> Array:
    xs, ks = get_aval(x).shape, get_aval(k).shape
    size = tuple(a + b - 1 for a, b in zip(xs, ks))
    axes = tuple(range(len(size)))
    if dtypes.is_complex(get_aval(x).dtype):
        return jnp.fft.ifftn(jnp.fft.fftn(x, size, axes) * jnp.fft.fftn(k, size, axes), size,
                             axes)
    product = jnp.fft.rfftn(x, size, axes) * jnp.fft.rfftn(k, size, axes)
    return jnp.fft.irfftn(product, size, axes).astype(get_aval(x).dtype)


def _convolve(fun: str, in1: ArrayLike, in2: ArrayLike, mode: str, method: str,
              precision: Any, reverse_second: bool, round_up: bool = False) -> Array:
    if method not in _METHODS:
        raise ValueError(f"lamina.scipy.signal.{fun}: method must be one of {_METHODS}, got "
                         f"{method!r}")
    x, k = _inputs(fun, in1, in2, mode)
    if reverse_second:  # correlation is convolution with the reversed conjugate
        k = lax.rev(jnp.conj(k) if dtypes.is_complex(get_aval(k).dtype) else k,
                    tuple(range(get_aval(k).ndim)))
    shape1, shape2 = get_aval(x).shape, get_aval(k).shape
    if mode == "valid":
        x, k = _valid_order(fun, x, k)
    return _convolve_compiled(x, k, mode, method, precision, shape1, shape2, round_up)


def _convolve_full_and_crop(x: Array, k: Array, mode: str, method: str, precision: Any,
                            shape1: tuple[int, ...], shape2: tuple[int, ...],
                            round_up: bool) -> Array:
    full = _full_fft(x, k) if method == "fft" else _full_direct(x, k, precision)
    return _crop(full, mode, shape1, shape2, round_up)


# One compiled computation per shapes and options, as in JAX.
_convolve_compiled = jit(_convolve_full_and_crop, static_argnums=(2, 3, 4, 5, 6, 7))


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Array:
    """The N-dimensional convolution of ``in1`` and ``in2`` (``full``, ``same``:
    centered with ``in1``'s shape, or ``valid``); ``method='fft'`` uses the FFT."""
    return _convolve("convolve", in1, in2, mode, method, precision, reverse_second=False)


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Array:
    """The N-dimensional cross-correlation ``sum in1[n + k] * conj(in2[k])``."""
    return _convolve("correlate", in1, in2, mode, method, precision, reverse_second=True)


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full",
                axes: Sequence[int] | None = None) -> Array:
    """The N-dimensional convolution through the FFT (over every axis)."""
    if axes is not None and tuple(sorted(_util.canonicalize_axes(
            "lamina.scipy.signal.fftconvolve", axes, jnp.ndim(in1)))) != tuple(
            range(jnp.ndim(in1))):
        raise ValueError("lamina.scipy.signal.fftconvolve: axes must name every axis (lamina "
                         "convolves over all of them)")
    return _convolve("fftconvolve", in1, in2, mode, "fft", None, reverse_second=False)


def _check_2d(fun: str, in1: ArrayLike, in2: ArrayLike, boundary: str, fillvalue: Any) -> None:
    if jnp.ndim(in1) != 2 or jnp.ndim(in2) != 2:
        raise ValueError(f"lamina.scipy.signal.{fun}: in1 and in2 must be 2-dimensional, got "
                         f"{jnp.ndim(in1)} and {jnp.ndim(in2)} dimensions")
    if boundary != "fill" or fillvalue != 0:
        raise ValueError(f"lamina.scipy.signal.{fun}: only boundary='fill' with fillvalue=0 is "
                         f"supported (as in JAX), got boundary={boundary!r}, "
                         f"fillvalue={fillvalue!r}")


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
               fillvalue: Any = 0, precision: Any = None) -> Array:
    """The 2-D convolution (zero-filled boundary)."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve("convolve2d", in1, in2, mode, "direct", precision, reverse_second=False)


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: Any = 0, precision: Any = None) -> Array:
    """The 2-D cross-correlation (zero-filled boundary). Its ``same`` window
    sits half a sample further right than ``correlate``'s for even kernels, as
    in SciPy."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    return _convolve("correlate2d", in1, in2, mode, "direct", precision, reverse_second=True,
                     round_up=True)


def _remove_line(segment: Array) -> Array:
    """``segment`` (last axis) minus its least-squares line."""
    n = get_aval(segment).shape[-1]
    t = jnp.arange(n, dtype=get_aval(segment).dtype)
    t_centered = t - (n - 1) / 2
    mean = jnp.mean(segment, axis=-1, keepdims=True)
    denominator = jnp.sum(jnp.square(t_centered))
    slope = (jnp.sum((segment - mean) * t_centered, axis=-1, keepdims=True)
             / (denominator if n > 1 else 1.0))
    return segment - mean - slope * t_centered


def detrend(data: ArrayLike, axis: int = -1, type: str = "linear",  # noqa: A002 - SciPy's name
            bp: int | Sequence[int] = 0, overwrite_data: None = None) -> Array:
    """``data`` minus its mean (``type='constant'``) or its least-squares line
    along ``axis``, fitted on each piece between the breakpoints ``bp``."""
    del overwrite_data
    (x,) = _util.promote_dtypes_inexact("lamina.scipy.signal.detrend", data)
    ax = _util.canonicalize_axis("lamina.scipy.signal.detrend", axis, get_aval(x).ndim)
    if type in ("constant", "c"):
        return x - jnp.mean(x, axis=ax, keepdims=True)
    if type not in ("linear", "l"):
        raise ValueError(f"lamina.scipy.signal.detrend: type must be 'linear' or 'constant', "
                         f"got {type!r}")
    n = get_aval(x).shape[ax]
    points = sorted({0, n, *(int(b) for b in jnp.atleast_1d(jnp.asarray(bp)).tolist())})
    if points[0] < 0 or points[-1] > n:
        raise ValueError(f"lamina.scipy.signal.detrend: breakpoints bp must lie in [0, {n}], "
                         f"got {bp!r}")
    return _detrend_linear_compiled(x, ax, tuple(points))


def _detrend_linear(x: Array, ax: int, points: tuple[int, ...]) -> Array:
    moved = jnp.moveaxis(x, ax, -1)
    pieces = [_remove_line(moved[..., lo:hi]) for lo, hi in zip(points, points[1:]) if hi > lo]
    return jnp.moveaxis(jnp.concatenate(pieces, axis=-1), -1, ax)


_detrend_linear_compiled = jit(_detrend_linear, static_argnums=(1, 2))
