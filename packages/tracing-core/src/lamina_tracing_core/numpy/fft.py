"""``lamina.numpy.fft``: NumPy's discrete Fourier transforms on ``lax.fft``.

Every transform moves its axes last and calls the ``fft`` primitive over
groups of at most three axes (XLA's limit): a real transform's real axis
goes in the group that is transformed first (RFFT) or last (IRFFT).
``norm`` is NumPy's: ``"backward"`` (the default: inverse transforms scale
by ``1/n``), ``"ortho"`` (both by ``1/sqrt(n)``) or ``"forward"``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax.fft import FftType
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.shape_ops import roll

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_SWAPPED = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _name(fun: str) -> str:
    return f"lamina.numpy.fft.{fun}"


def _check_norm(fun: str, norm: Any) -> None:
    if norm not in _NORMS:
        raise ValueError(f"{_name(fun)}: invalid norm value {norm!r}; should be 'backward', "
                         f"'ortho' or 'forward'")


def _resize(x: Any, axis: int, n: int) -> Any:
    """``x`` cut or zero-padded to length ``n`` along ``axis``."""
    size = _util.shape_of(x)[axis]
    if n == size:
        return x
    if n < size:
        return lax.slice_in_dim(x, 0, n, 1, axis)
    config = [(0, 0, 0)] * _util.ndim_of(x)
    config[axis] = (0, n - size, 0)
    return lax.pad(x, np.zeros((), get_aval(x).dtype), config)


def _on_trailing(x: Any, positions: Sequence[int], typ: FftType,
                 lengths: Sequence[int]) -> Any:
    """``lax.fft`` over the axes at ``positions`` (moved last, then back)."""
    nd = _util.ndim_of(x)
    rest = [i for i in range(nd) if i not in positions]
    perm = rest + list(positions)
    moved = x if perm == list(range(nd)) else lax.transpose(x, tuple(perm))
    out = lax.fft(moved, typ, tuple(lengths))
    if perm == list(range(nd)):
        return out
    return lax.transpose(out, tuple(int(i) for i in np.argsort(perm)))


def _groups(k: int) -> list[list[int]]:
    """Positions ``0..k-1`` in groups of at most three, the last group holding ``k-1``."""
    out = []
    end = k
    while end > 0:
        start = max(0, end - 3)
        out.append(list(range(start, end)))
        end = start
    return out[::-1]


def _fft_core(fun: str, typ: FftType, a: ArrayLike, s: Sequence[int] | None,
              axes: Sequence[int] | None, norm: str | None) -> Array:
    _check_norm(fun, norm)
    x = _util.operand(fun, a, "a")
    nd = _util.ndim_of(x)
    if s is not None:
        try:
            s = [operator.index(v) for v in s]
        except TypeError:
            raise TypeError(f"{_name(fun)}: s must be a sequence of integers, got {s!r}") from None
        if any(v < 1 for v in s):
            raise ValueError(f"{_name(fun)}: invalid number of data points {tuple(s)}; every "
                             "entry of s (n) must be at least 1")
    if axes is None:
        axes = list(range(nd)) if s is None else list(range(nd - len(s), nd))
    try:
        axes = [lax.common.canonicalize_axis(operator.index(ax), nd) for ax in axes]
    except (TypeError, ValueError) as e:
        raise type(e)(f"{_name(fun)}: invalid axes {tuple(axes)} for an array of rank {nd}") \
            from None
    if len(set(axes)) != len(axes):
        raise ValueError(f"{_name(fun)} does not support repeated axes, got axes {tuple(axes)}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{_name(fun)}: s and axes must have the same length, got "
                         f"s={tuple(s)} and axes={tuple(axes)}")
    if not axes:
        return x
    dtype = get_aval(x).dtype
    if typ == FftType.RFFT:
        if dtypes.is_complex(dtype):
            raise TypeError(f"{_name(fun)} takes real input, got an array of dtype {dtype.name}")
        (x,) = _util.promote_dtypes_inexact(fun, x)
    else:
        (x,) = _util.promote_dtypes_inexact(fun, x)
        if not dtypes.is_complex(get_aval(x).dtype):
            x = lax.convert_element_type(x, lax.common.complex_dtype(get_aval(x).dtype))
    shape = _util.shape_of(x)
    lengths = list(s) if s is not None else [shape[ax] for ax in axes]
    if typ == FftType.IRFFT and s is None:
        lengths[-1] = 2 * (shape[axes[-1]] - 1)
        if lengths[-1] < 1:
            raise ValueError(f"{_name(fun)}: invalid number of data points {lengths[-1]}; the "
                             "input needs at least 2 points along the last axis (or pass n)")
    for ax, n in zip(axes, lengths):
        x = _resize(x, ax, n // 2 + 1 if typ == FftType.IRFFT and ax == axes[-1] else n)
    x = _util.strip_weak(x)
    groups = _groups(len(axes))
    if typ in (FftType.FFT, FftType.IFFT):
        for g in groups:
            x = _on_trailing(x, [axes[i] for i in g], typ, [lengths[i] for i in g])
    elif typ == FftType.RFFT:
        last, others = groups[-1], groups[:-1]
        x = _on_trailing(x, [axes[i] for i in last], typ, [lengths[i] for i in last])
        for g in others:
            x = _on_trailing(x, [axes[i] for i in g], FftType.FFT, [lengths[i] for i in g])
    else:
        last, others = groups[-1], groups[:-1]
        for g in others:
            x = _on_trailing(x, [axes[i] for i in g], FftType.IFFT, [lengths[i] for i in g])
        x = _on_trailing(x, [axes[i] for i in last], typ, [lengths[i] for i in last])
    total = math.prod(lengths)
    forward = typ in (FftType.FFT, FftType.RFFT)
    if norm == "ortho":
        factor = 1 / math.sqrt(total) if forward else math.sqrt(total)
    elif norm == "forward":
        factor = 1 / total if forward else float(total)
    else:
        return x
    return lax.mul(x, np.array(factor, get_aval(x).dtype))


def _one_axis(fun: str, axis: Any) -> list[int]:
    if not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{_name(fun)}: axis must be an integer, got {axis!r}")
    return [int(axis)]


def fft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The 1-D discrete Fourier transform along ``axis``."""
    return _fft_core("fft", FftType.FFT, a, None if n is None else [n], _one_axis("fft", axis),
                     norm)


def ifft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The 1-D inverse discrete Fourier transform along ``axis``."""
    return _fft_core("ifft", FftType.IFFT, a, None if n is None else [n],
                     _one_axis("ifft", axis), norm)


def rfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The 1-D transform of real input (the ``n // 2 + 1`` non-negative frequencies)."""
    return _fft_core("rfft", FftType.RFFT, a, None if n is None else [n],
                     _one_axis("rfft", axis), norm)


def irfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The inverse of ``rfft``: ``n`` real points (default ``2 * (m - 1)``)."""
    return _fft_core("irfft", FftType.IRFFT, a, None if n is None else [n],
                     _one_axis("irfft", axis), norm)


def hfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The transform of a Hermitian-symmetric signal given by its first half (real output)."""
    _check_norm("hfft", norm)
    x = _util.operand("hfft", a, "a")
    return _fft_core("hfft", FftType.IRFFT, lax.conj(_as_complex("hfft", x)),
                     None if n is None else [n], _one_axis("hfft", axis), _SWAPPED[norm])


def ihfft(a: ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None) -> Array:
    """The inverse of ``hfft``: the first half of a Hermitian-symmetric spectrum."""
    _check_norm("ihfft", norm)
    out = _fft_core("ihfft", FftType.RFFT, a, None if n is None else [n],
                    _one_axis("ihfft", axis), _SWAPPED[norm])
    return lax.conj(out)


def _as_complex(fun: str, x: Any) -> Any:
    (x,) = _util.promote_dtypes_inexact(fun, x)
    dtype = get_aval(x).dtype
    return x if dtypes.is_complex(dtype) else lax.convert_element_type(
        x, lax.common.complex_dtype(dtype))


def fftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Array:
    """The n-D discrete Fourier transform over ``axes`` (all by default)."""
    return _fft_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """The n-D inverse discrete Fourier transform."""
    return _fft_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Array:
    """The n-D transform of real input (the last axis halved)."""
    return _fft_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Array:
    """The inverse of ``rfftn``."""
    return _fft_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _two_axes(fun: str, axes: Sequence[int]) -> Sequence[int]:
    if len(tuple(axes)) != 2:
        raise ValueError(f"{_name(fun)}: axes must have two entries, got {tuple(axes)}")
    return axes


def fft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None) -> Array:
    """The 2-D discrete Fourier transform."""
    return _fft_core("fft2", FftType.FFT, a, s, _two_axes("fft2", axes), norm)


def ifft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """The 2-D inverse discrete Fourier transform."""
    return _fft_core("ifft2", FftType.IFFT, a, s, _two_axes("ifft2", axes), norm)


def rfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None) -> Array:
    """The 2-D transform of real input."""
    return _fft_core("rfft2", FftType.RFFT, a, s, _two_axes("rfft2", axes), norm)


def irfft2(a: ArrayLike, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None) -> Array:
    """The inverse of ``rfft2``."""
    return _fft_core("irfft2", FftType.IRFFT, a, s, _two_axes("irfft2", axes), norm)


def _freq_dtype(fun: str, dtype: Any) -> np.dtype[Any]:
    out = _util.user_dtype(fun, dtype)
    if out is None:
        return dtypes.default_float_dtype()
    if not dtypes.is_inexact(out):
        raise ValueError(f"{_name(fun)}: dtype must be a floating or complex dtype, got "
                         f"{out.name}")
    return out


def _freqs(fun: str, ints: np.ndarray[Any, Any], n: int, d: Any, dtype: Any) -> Array:
    out_dtype = _freq_dtype(fun, dtype)
    if isinstance(d, (int, float, np.integer, np.floating)):
        # One rounded division in the output dtype, as JAX's (dividing in
        # float64 and rounding after can give another last bit).
        return np.divide(np.asarray(ints, out_dtype), np.asarray(d * n, out_dtype))
    scale = lax.mul(lax.convert_element_type(d, out_dtype), np.array(n, out_dtype))
    return lax.div(np.asarray(ints, out_dtype), scale)


def _check_n(fun: str, n: Any) -> int:
    try:
        value = operator.index(n)
    except TypeError:
        raise TypeError(f"{_name(fun)}: n must be an integer, got {n!r}") from None
    if value < 1:
        raise ValueError(f"{_name(fun)}: n must be positive, got {value}")
    return value


def fftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Array:
    """The sample frequencies of an ``n``-point transform with spacing ``d``."""
    size = _check_n("fftfreq", n)
    ints = np.concatenate([np.arange(0, (size - 1) // 2 + 1), np.arange(-(size // 2), 0)])
    return _freqs("fftfreq", ints, size, d, dtype)


def rfftfreq(n: int, d: ArrayLike = 1.0, *, dtype: Any = None, device: Any = None) -> Array:
    """The non-negative sample frequencies of an ``n``-point real transform."""
    size = _check_n("rfftfreq", n)
    return _freqs("rfftfreq", np.arange(0, size // 2 + 1), size, d, dtype)


def _shift(fun: str, x: ArrayLike, axes: int | Sequence[int] | None, sign: int) -> Array:
    arr = _util.operand(fun, x, "x")
    shape = _util.shape_of(arr)
    if axes is None:
        axes_list = list(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes_list = [int(axes)]
    else:
        axes_list = [int(a) for a in axes]
    if not axes_list:
        return arr
    shifts = [sign * (shape[lax.common.canonicalize_axis(a, len(shape))] // 2)
              for a in axes_list]
    return roll(arr, shifts, axes_list)


def fftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Array:
    """Moves the zero frequency to the centre (along ``axes``, all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x: ArrayLike, axes: int | Sequence[int] | None = None) -> Array:
    """The inverse of ``fftshift``."""
    return _shift("ifftshift", x, axes, -1)
