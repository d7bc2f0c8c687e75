"""Windowed Fourier analysis: ``stft``, ``istft``, ``csd`` and ``welch``, with
SciPy's conventions (segments of ``nperseg`` samples every ``nperseg -
noverlap``, each detrended, windowed and transformed; ``'spectrum'`` or
``'density'`` scaling; a one-sided result for real input with the interior
bins doubled for power spectra).

Segment counts, lengths and paddings are static (Python ints), so each call
traces to gathers, FFTs and reductions of fixed shapes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from lamina_tracing_core import dtypes
from lamina_tracing_core.numpy import _util

from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any

_BOUNDARIES = (None, "even", "odd", "constant", "zeros")


def _fun(name: str) -> str:
    return f"lamina.scipy.signal.{name}"


def _complex_dtype(dtype: Any) -> np.dtype[Any]:
    """The complex dtype of ``dtype``'s precision (complex64 below double)."""
    wide = np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))
    return np.dtype(np.complex128 if wide else np.complex64)


# --- windows ----------------------------------------------------------------------------------
def _cosine_sum(n: int, coefficients: tuple[float, ...]) -> np.ndarray[Any, Any]:
    """A periodic (DFT-even) generalized cosine window of length ``n``."""
    phase = 2 * np.pi * np.arange(n) / n
    window = np.zeros(n)
    for k, c in enumerate(coefficients):
        window += (-1) ** k * c * np.cos(k * phase)
    return window


def _bartlett(n: int) -> np.ndarray[Any, Any]:
    # periodic: the symmetric window of n + 1 points without its last point
    m = n + 1
    k = np.arange(m)
    return (1 - np.abs(2 * k - (m - 1)) / (m - 1))[:n]


_WINDOWS: dict[str, Callable[[int], np.ndarray[Any, Any]]] = {
    "hann": lambda n: _cosine_sum(n, (0.5, 0.5)),
    "hamming": lambda n: _cosine_sum(n, (0.54, 0.46)),
    "blackman": lambda n: _cosine_sum(n, (0.42, 0.5, 0.08)),
    "boxcar": np.ones,
    "bartlett": _bartlett,
}
_WINDOW_ALIASES = {"hanning": "hann", "han": "hann", "ones": "boxcar", "rect": "boxcar",
                   "rectangular": "boxcar", "box": "boxcar", "hamm": "hamming",
                   "black": "blackman", "blk": "blackman", "bart": "bartlett", "brt": "bartlett"}


def _named_window(fun: str, window: str | tuple[Any, ...], n: int) -> np.ndarray[Any, Any]:
    """SciPy's ``get_window(window, n)`` (periodic). The common windows are
    computed here; any other name or ``(name, parameter)`` tuple asks SciPy."""
    name = window if isinstance(window, str) else None
    if name is not None and name.lower() in (*_WINDOWS, *_WINDOW_ALIASES):
        key = name.lower()
        return _WINDOWS[_WINDOW_ALIASES.get(key, key)](n) if n > 1 else np.ones(n)
    try:
        # SciPy is optional (the `test` extra): only these rarer windows need it
        from scipy.signal import get_window  # type: ignore[import-untyped]
    except ImportError as err:
        raise ImportError(f"{_fun(fun)}: window={window!r} needs SciPy; the built-in windows "
                          f"are {sorted(_WINDOWS)}") from err
    return np.asarray(get_window(window, n))


def _window(fun: str, window: Any, nperseg: int | None, length: int,
            dtype: np.dtype[Any]) -> tuple[Array, int]:
    """The window as an array and the segment length, as SciPy settles them: a
    named window gets ``nperseg`` (default 256, at most the input's length); an
    array window sets ``nperseg``."""
    if isinstance(window, (str, tuple)):
        n = 256 if nperseg is None else nperseg
        if n > length:
            warnings.warn(f"{_fun(fun)}: nperseg = {n} is greater than input length = "
                          f"{length}, using nperseg = {length}", stacklevel=3)
            n = length
        return jnp.asarray(_named_window(fun, window, n), dtype), n
    win = jnp.asarray(_util.operand(_fun(fun), window, "window"))
    if win.ndim != 1:
        raise ValueError(f"{_fun(fun)}: the argument window must be 1-D, got shape {win.shape}")
    if length < win.shape[0]:
        raise ValueError(f"{_fun(fun)}: the window (length {win.shape[0]}) is longer than the "
                         f"input signal (length {length})")
    if nperseg is not None and nperseg != win.shape[0]:
        raise ValueError(f"{_fun(fun)}: the value of nperseg ({nperseg}) must equal the "
                         f"length of the window ({win.shape[0]})")
    return win, win.shape[0]


# --- the shared analysis -----------------------------------------------------------------------
def _extend(x: Array, boundary: str | None, n: int) -> Array:
    """``x`` extended by ``n`` samples at both ends of its last axis."""
    if boundary is None or n < 1:
        return x
    widths = [(0, 0)] * (x.ndim - 1) + [(n, n)]
    if boundary == "zeros":
        return jnp.pad(x, widths)
    if boundary == "constant":
        return jnp.pad(x, widths, mode="edge")
    if boundary == "even":
        return jnp.pad(x, widths, mode="reflect")
    # odd: reflected about the end points (2 x[0] - x[n:0:-1], ..., 2 x[-1] - x[-2:-n-2:-1])
    left = 2 * x[..., :1] - jnp.flip(x[..., 1:n + 1], axis=-1)
    right = 2 * x[..., -1:] - jnp.flip(x[..., -n - 1:-1], axis=-1)
    return jnp.concatenate([left, x, right], axis=-1)


def _no_detrend(d: Array) -> Array:
    return d


def _remove_mean(d: Array) -> Array:
    return d - jnp.mean(d, axis=-1, keepdims=True)


def _remove_line(d: Array) -> Array:
    n = d.shape[-1]
    centered = np.arange(n) - (n - 1) / 2
    t = jnp.asarray(centered, d.dtype)
    mean = jnp.mean(d, axis=-1, keepdims=True)
    slope = jnp.sum((d - mean) * t, axis=-1, keepdims=True) / max(float(np.sum(centered ** 2)),
                                                                  1.0)
    return d - mean - slope * t


# (module-level functions: the same detrend compiles once)
_DETRENDERS: dict[Any, Callable[[Array], Array]] = {
    False: _no_detrend, None: _no_detrend, "constant": _remove_mean, "c": _remove_mean,
    "linear": _remove_line, "l": _remove_line}


def _detrender(fun: str, detrend: Any) -> Callable[[Array], Array]:
    if callable(detrend):
        return detrend  # type: ignore[no-any-return]
    if isinstance(detrend, (str, bool)) or detrend is None:
        found = _DETRENDERS.get(detrend)
        if found is not None:
            return found
    raise ValueError(f"{_fun(fun)}: detrend must be 'constant', 'linear', False or a callable, "
                     f"got {detrend!r}")


def _segment_ffts(x: Array, win: Array, detrend: Callable[[Array], Array], nperseg: int,
                  step: int, nfft: int, two_sided: bool) -> Array:
    """The windowed FFTs of ``x``'s segments along its last axis:
    ``(..., segments, frequencies)``."""
    count = (x.shape[-1] - nperseg) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(nperseg)[None, :]
    segments = detrend(x[..., index])
    if dtypes.is_complex(win.dtype):
        segments = segments.astype(win.dtype)
    segments = win * segments
    if two_sided:
        return jnp.fft.fft(segments, n=nfft)
    return jnp.fft.rfft(jnp.real(segments), n=nfft)


def _settle(fun: str, nperseg: int, noverlap: Any, nfft: Any) -> tuple[int, int]:
    overlap = nperseg // 2 if noverlap is None else _util.concrete_int(
        fun, noverlap, "the argument noverlap")
    length = nperseg if nfft is None else _util.concrete_int(fun, nfft, "the argument nfft")
    if length < nperseg:
        raise ValueError(f"{_fun(fun)}: nfft ({length}) must be greater than or equal to "
                         f"nperseg ({nperseg})")
    if not 0 <= overlap < nperseg:
        raise ValueError(f"{_fun(fun)}: noverlap ({overlap}) must be in [0, nperseg) with "
                         f"nperseg = {nperseg}")
    return overlap, length


def _spectral(fun: str, x: ArrayLike, y: ArrayLike | None, fs: Any, window: Any,
              nperseg: Any, noverlap: Any, nfft: Any, detrend: Any, return_onesided: bool,
              scaling: str, axis: int, mode: str, boundary: str | None,
              padded: bool) -> tuple[Array, Array, Array]:
    """``(frequencies, segment times, result)``; the result has the frequencies
    where ``axis`` was and the segments last (SciPy's ``_spectral_helper``)."""
    if boundary not in _BOUNDARIES:
        raise ValueError(f"{_fun(fun)}: boundary must be one of {list(_BOUNDARIES)}, got "
                         f"{boundary!r}")
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"{_fun(fun)}: scaling must be 'density' or 'spectrum', got "
                         f"{scaling!r}")
    if y is None:
        (a,) = _util.promote_dtypes_inexact(_fun(fun), x)
        b = a
    else:
        a, b = _util.promote_dtypes_inexact(_fun(fun), x, y)
        if a.ndim != b.ndim:
            raise ValueError(f"{_fun(fun)}: x and y must have the same rank, got shapes "
                             f"{a.shape} and {b.shape}")
    ax = _util.canonicalize_axis(_fun(fun), axis, a.ndim)
    freqs, time, spectra = _spectral_last(fun, jnp.moveaxis(a, ax, -1), jnp.moveaxis(b, ax, -1),
                                          y is not None, fs, window, nperseg, noverlap, nfft,
                                          detrend, return_onesided, scaling, mode, boundary,
                                          padded)
    # (..., frequencies, segments): the frequencies go back to ax, segments last
    if ax < a.ndim - 1:
        spectra = jnp.moveaxis(spectra, -2, ax)
    return freqs, time, spectra


def _spectral_last(fun: str, a: Array, b: Array, cross: bool, fs: Any, window: Any,
                   nperseg: Any, noverlap: Any, nfft: Any, detrend: Any, return_onesided: bool,
                   scaling: str, mode: str, boundary: str | None,
                   padded: bool) -> tuple[Array, Array, Array]:
    y = b if cross else None
    if y is not None and a.shape[-1] != b.shape[-1]:
        # the shorter signal is zero-padded to the longer one's length
        longest = max(a.shape[-1], b.shape[-1])
        a, b = (jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, longest - v.shape[-1])])
                for v in (a, b))
    seg = None if nperseg is None else _util.concrete_int(fun, nperseg, "the argument nperseg")
    if seg is not None and seg < 1:
        raise ValueError(f"{_fun(fun)}: nperseg must be a positive integer, got {seg}")
    win, seg = _window(fun, window, seg, a.shape[-1], a.dtype)
    overlap, length = _settle(fun, seg, noverlap, nfft)
    if boundary == "odd" and seg // 2 > a.shape[-1] - 1:
        raise ValueError(f"{_fun(fun)}: the odd extension length {seg // 2} exceeds the signal "
                         f"length minus 1 ({a.shape[-1] - 1})")
    two_sided = not return_onesided
    if return_onesided and (dtypes.is_complex(a.dtype) or dtypes.is_complex(b.dtype)):
        warnings.warn(f"{_fun(fun)}: input data is complex, switching to "
                      "return_onesided=False", stacklevel=3)
        two_sided = True
    spec = _Spec(seg, seg - overlap, length, boundary, padded, scaling, mode, two_sided,
                 y is not None, _detrender(fun, detrend))
    return _analysis_compiled(a, b, win, fs, spec)  # type: ignore[no-any-return]


class _Spec(NamedTuple):
    """The static settings of one analysis (hashable: a compile-cache key)."""

    nperseg: int
    step: int
    nfft: int
    boundary: str | None
    padded: bool
    scaling: str
    mode: str
    two_sided: bool
    cross: bool
    detrend: Callable[[Array], Array]


def _analysis(a: Array, b: Array, win: Array, fs: Any, spec: _Spec) -> tuple[Array, Array, Array]:
    """``(frequencies, segment times, result)`` of signals whose time axis is
    last; the result is ``(..., frequencies, segments)``."""
    seg, step, length = spec.nperseg, spec.step, spec.nfft
    a, b = (_extend(v, spec.boundary, seg // 2) for v in (a, b))
    if spec.padded:
        extra = (-(a.shape[-1] - seg) % step) % seg
        a, b = (jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, extra)]) for v in (a, b))
    if spec.scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    else:
        scale = 1.0 / jnp.sum(win) ** 2
    if spec.mode == "stft":
        scale = jnp.sqrt(scale)
    spectra = _segment_ffts(a, win, spec.detrend, seg, step, length, spec.two_sided)
    if spec.cross:
        spectra = jnp.conj(spectra) * _segment_ffts(b, win, spec.detrend, seg, step, length,
                                                    spec.two_sided)
    elif spec.mode == "psd":
        spectra = jnp.conj(spectra) * spectra
    spectra = spectra * scale
    if not spec.two_sided and spec.mode == "psd":
        # the one-sided power folds the negative frequencies onto the positive
        # ones: every bin but DC (and Nyquist, for an even length) doubles
        last = length // 2 + 1 - (0 if length % 2 else 1)
        factor = np.ones(length // 2 + 1)
        factor[1:last] = 2.0
        spectra = spectra * factor
    result_dtype = _complex_dtype(a.dtype)
    freq_dtype = np.finfo(result_dtype).dtype
    if spec.two_sided:
        freqs = jnp.fft.fftfreq(length, dtype=freq_dtype) * fs
    else:
        freqs = jnp.fft.rfftfreq(length, dtype=freq_dtype) * fs
    half = seg / 2
    times = np.arange(half, a.shape[-1] - half + 1, step)
    if spec.boundary is not None:
        times = times - half
    time = jnp.asarray(times, freq_dtype) / fs
    spectra = spectra.astype(result_dtype)
    if not spec.cross and spec.mode != "stft":
        spectra = jnp.real(spectra)
    return freqs.astype(freq_dtype), time.astype(freq_dtype), jnp.swapaxes(spectra, -1, -2)


_analysis_compiled = jit(_analysis, static_argnums=(4,))


class _Synthesis(NamedTuple):
    """The static settings of one inverse STFT."""

    nperseg: int
    step: int
    nfft: int
    onesided: bool
    boundary: bool
    scaling: str


def _overlap_add(z: Array, win: Array, fs: Any, spec: _Synthesis) -> Array:
    """The signal of STFT ``z`` (``(..., segments, frequencies)``): each
    segment's inverse FFT, windowed, added at its place and divided by the
    summed squared window."""
    seg, step = spec.nperseg, spec.step
    frames = jnp.fft.irfft(z, n=spec.nfft) if spec.onesided else jnp.fft.ifft(z, n=spec.nfft)
    frames = frames[..., :seg]
    # undo stft's scaling: 'spectrum' divided by sum(win), 'psd' by sqrt(fs sum(win^2))
    frames = frames * (jnp.sum(win) if spec.scaling == "spectrum"
                       else jnp.sqrt(fs * jnp.sum(win * win)))
    count = frames.shape[-2]
    out_length = seg + (count - 1) * step
    index = (np.arange(count)[:, None] * step + np.arange(seg)[None, :]).reshape(-1)
    flat = (frames * win).reshape(frames.shape[:-2] + (count * seg,))
    x = jnp.zeros(frames.shape[:-2] + (out_length,), flat.dtype).at[..., index].add(flat)
    norm = jnp.zeros((out_length,), win.dtype).at[index].add(jnp.tile(jnp.abs(win) ** 2, count))
    if spec.boundary:
        x = x[..., seg // 2:out_length - seg // 2]
        norm = norm[seg // 2:out_length - seg // 2]
    return x / jnp.where(norm > 1e-10, norm, 1.0)


_overlap_add_compiled = jit(_overlap_add, static_argnums=(3,))


# --- the public functions ---------------------------------------------------------------------
def stft(x: ArrayLike, fs: Any = 1.0, window: Any = "hann", nperseg: int = 256,
         noverlap: int | None = None, nfft: int | None = None, detrend: Any = False,
         return_onesided: bool = True, boundary: str | None = "zeros", padded: bool = True,
         axis: int = -1, scaling: str = "spectrum") -> tuple[Array, Array, Array]:
    """The short-time Fourier transform ``(f, t, Zxx)`` of ``x`` along ``axis``
    (SciPy's ``stft``): ``Zxx`` has the frequencies at ``axis`` and the segment
    times last."""
    if scaling not in ("spectrum", "psd"):
        raise ValueError(f"lamina.scipy.signal.stft: scaling must be 'spectrum' or 'psd', got "
                         f"{scaling!r}")
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                     return_onesided, "spectrum" if scaling == "spectrum" else "density",
                     axis, "stft", boundary, padded)


def csd(x: ArrayLike, y: ArrayLike | None, fs: Any = 1.0, window: Any = "hann",
        nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
        detrend: Any = "constant", return_onesided: bool = True, scaling: str = "density",
        axis: int = -1, average: str = "mean") -> tuple[Array, Array]:
    """The cross power spectral density ``(f, Pxy)`` of ``x`` and ``y`` by
    Welch's method (the mean or median of the segments' cross periodograms);
    ``y=None`` is the power spectral density of ``x``."""
    return _csd("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                scaling, axis, average)


def _csd(fun: str, x: ArrayLike, y: ArrayLike | None, fs: Any, window: Any, nperseg: Any,
         noverlap: Any, nfft: Any, detrend: Any, return_onesided: bool, scaling: str,
         axis: int, average: str) -> tuple[Array, Array]:
    if average not in ("mean", "median"):
        raise ValueError(f"{_fun(fun)}: average must be 'mean' or 'median', got {average!r}")
    freqs, _, pxy = _spectral(fun, x, y, fs, window, nperseg, noverlap, nfft, detrend,
                              return_onesided, scaling, axis, "psd", None, False)
    if y is not None:
        pxy = pxy.astype(_complex_dtype(pxy.dtype))
    if pxy.ndim >= 2 and pxy.size > 0:
        count = pxy.shape[-1]
        if count == 1:
            pxy = pxy[..., 0]
        elif average == "median":
            pxy = _median_over_segments(pxy) / _median_bias(count)
        else:
            pxy = jnp.mean(pxy, axis=-1)
    return freqs, pxy


def _median_over_segments(p: Array) -> Array:
    if dtypes.is_complex(p.dtype):
        return (jnp.median(jnp.real(p), axis=-1) + 1j * jnp.median(jnp.imag(p), axis=-1))
    return jnp.median(p, axis=-1)


def _median_bias(n: int) -> float:
    """The bias of the median of ``n`` chi-squared(2) periodograms against their
    mean (SciPy's ``_median_bias``): ``1 - 1/2 + 1/3 - ...`` over ``n`` odd terms."""
    k = np.arange(1, (n - 1) // 2 + 1)
    return float(1 + np.sum(1.0 / (2 * k + 1) - 1.0 / (2 * k)))


def welch(x: ArrayLike, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant",
          return_onesided: bool = True, scaling: str = "density", axis: int = -1,
          average: str = "mean") -> tuple[Array, Array]:
    """The power spectral density ``(f, Pxx)`` of ``x`` by Welch's method."""
    freqs, pxx = _csd("welch", x, None, fs, window, nperseg, noverlap, nfft, detrend,
                      return_onesided, scaling, axis, average)
    return freqs, jnp.real(pxx)


def istft(Zxx: ArrayLike, fs: Any = 1.0, window: Any = "hann",  # noqa: N803 - SciPy's name
          nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
          input_onesided: bool = True, boundary: bool = True, time_axis: int = -1,
          freq_axis: int = -2, scaling: str = "spectrum") -> tuple[Array, Array]:
    """The inverse of ``stft``: ``(t, x)`` by inverse FFTs of the segments,
    windowed overlap-add and division by the summed squared window."""
    fun = "istft"
    z = jnp.asarray(_util.operand(_fun(fun), Zxx, "Zxx"))
    if z.ndim < 2:
        raise ValueError(f"{_fun(fun)}: Zxx must be at least 2-D, got shape {z.shape}")
    if scaling not in ("spectrum", "psd"):
        raise ValueError(f"{_fun(fun)}: scaling must be 'spectrum' or 'psd', got {scaling!r}")
    f_ax = _util.canonicalize_axis(_fun(fun), freq_axis, z.ndim)
    t_ax = _util.canonicalize_axis(_fun(fun), time_axis, z.ndim)
    if f_ax == t_ax:
        raise ValueError(f"{_fun(fun)}: time_axis and freq_axis must differ, both are {f_ax}")
    z = z.astype(_complex_dtype(z.dtype))
    n_default = 2 * (z.shape[f_ax] - 1) if input_onesided else z.shape[f_ax]
    seg = n_default if nperseg is None else _util.concrete_int(fun, nperseg,
                                                               "the argument nperseg")
    if seg < 1:
        raise ValueError(f"{_fun(fun)}: nperseg must be a positive integer, got {seg}")
    if nfft is None:
        length = n_default + (1 if input_onesided and seg == n_default + 1 else 0)
    else:
        length = _util.concrete_int(fun, nfft, "the argument nfft")
    if length < seg:
        raise ValueError(f"{_fun(fun)}: the FFT length ({length}) must be at least nperseg "
                         f"({seg})")
    overlap, _ = _settle(fun, seg, noverlap, None)
    others = [i for i in range(z.ndim) if i not in (f_ax, t_ax)]
    z = jnp.transpose(z, (*others, t_ax, f_ax))  # (..., segments, frequencies)
    real_dtype = np.finfo(z.dtype).dtype
    if isinstance(window, (str, tuple)):
        win = jnp.asarray(_named_window(fun, window, seg), real_dtype)
    else:
        win = jnp.asarray(_util.operand(_fun(fun), window, "window"))
        if win.shape != (seg,):
            raise ValueError(f"{_fun(fun)}: the window must be 1-D of length nperseg = {seg}, "
                             f"got shape {win.shape}")
    x = _overlap_add_compiled(z, win, fs, _Synthesis(seg, seg - overlap, length, input_onesided,
                                                     boundary, scaling))
    if x.ndim > 1 and t_ax != z.ndim - 1:
        x = jnp.moveaxis(x, -1, t_ax if f_ax > t_ax else t_ax - 1)
    # SciPy counts the times along the result's first axis (a batch axis when
    # there is one), and so does this.
    time = jnp.arange(x.shape[0], dtype=real_dtype) / fs
    return time, x
