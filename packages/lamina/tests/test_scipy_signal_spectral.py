"""stft, istft, welch and csd against scipy.signal (float32): boundaries,
paddings, detrending, windows by name, tuple and array, one- and two-sided,
median averaging, other axes; jit, vmap and the argument errors."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.signal as ss

import lamina
from lamina.scipy import signal as ls

_RNG = np.random.default_rng(0)
X = _RNG.standard_normal(100).astype(np.float32)
Y = _RNG.standard_normal(100).astype(np.float32)
XY = np.stack([X, Y])


def _same(got: Any, want: Any, rtol: float = 3e-6) -> None:
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == np.shape(w)
        scale = max(float(np.max(np.abs(w))), 1e-30) if np.size(w) else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=rtol * 10 * scale)


@pytest.mark.parametrize("kwargs", [
    dict(nperseg=16),
    dict(nperseg=15, noverlap=5, boundary="odd", padded=False, detrend="linear"),
    dict(nperseg=16, boundary="even", return_onesided=False, nfft=20),
    dict(nperseg=16, boundary="constant", scaling="psd", fs=3.0),
])
def test_stft_matches_scipy(kwargs: dict[str, Any]) -> None:
    _same(ls.stft(X, **kwargs), ss.stft(X.astype(np.float64), **kwargs))


@pytest.mark.parametrize("args, kwargs", [
    ((X,), dict(nperseg=32)),
    ((X,), dict(nperseg=20, average="median", scaling="spectrum", window="hamming", nfft=33)),
    ((X,), {}),
    ((XY,), dict(nperseg=16, window="blackman", detrend=False)),
    ((X,), dict(nperseg=16, window=("tukey", 0.3))),
    ((X,), dict(window=np.hanning(12))),
])
def test_welch_matches_scipy(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # nperseg > input length: both warn
        want = ss.welch(*(a.astype(np.float64) for a in args), **kwargs)
        got = ls.welch(*args, **{k: (v.astype(np.float32) if isinstance(v, np.ndarray) else v)
                                 for k, v in kwargs.items()})
    _same(got, want)


def test_csd_matches_scipy() -> None:
    _same(ls.csd(X, Y, nperseg=32), ss.csd(X.astype(np.float64), Y.astype(np.float64),
                                           nperseg=32))
    stacked = np.stack([X, Y], 1)
    _same(ls.csd(stacked, Y[:, None], nperseg=16, axis=0),
          ss.csd(stacked.astype(np.float64), Y[:, None].astype(np.float64), nperseg=16, axis=0))
    # a shorter y is zero-padded to x's length
    _same(ls.csd(X, Y[:80], nperseg=16), ss.csd(X.astype(np.float64), Y[:80].astype(np.float64),
                                                nperseg=16))


def test_istft_matches_scipy_and_inverts_stft() -> None:
    _, _, z = ss.stft(X.astype(np.float64), nperseg=16)
    _same(ls.istft(z.astype(np.complex64), nperseg=16), ss.istft(z, nperseg=16))
    _, _, z = ss.stft(XY.astype(np.float64), nperseg=15, noverlap=10)
    zt = np.swapaxes(z, -1, -2)
    _same(ls.istft(zt.astype(np.complex64), nperseg=15, noverlap=10, time_axis=-2, freq_axis=-1),
          ss.istft(zt, nperseg=15, noverlap=10, time_axis=-2, freq_axis=-1))
    _, _, z = ss.stft(X.astype(np.float64), nperseg=16, return_onesided=False, boundary=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SciPy: the ends are not covered twice
        want = ss.istft(z, nperseg=16, input_onesided=False, boundary=False)
    _same(ls.istft(z.astype(np.complex64), nperseg=16, input_onesided=False, boundary=False),
          want)
    _, back = ls.istft(ls.stft(X, nperseg=16)[2], nperseg=16)
    np.testing.assert_allclose(np.asarray(back)[:100], X, atol=2e-6)


def test_jit_and_vmap() -> None:
    f, p = lamina.jit(lambda v: ls.welch(v, nperseg=16))(X)
    _same((f, p), ss.welch(X.astype(np.float64), nperseg=16))
    z = lamina.vmap(lambda v: ls.stft(v, nperseg=16)[2])(XY)
    _same((z,), (ss.stft(XY.astype(np.float64), nperseg=16)[2],))


@pytest.mark.parametrize("call, words", [
    (lambda: ls.stft(X, nperseg=16, boundary="wrap"), "stft: boundary must be one of"),
    (lambda: ls.welch(X, nperseg=16, noverlap=16), r"welch: noverlap \(16\) must be in"),
    (lambda: ls.welch(X, nperseg=16, nfft=8), r"welch: nfft \(8\) must be greater"),
    (lambda: ls.csd(X, Y, nperseg=16, average="max"), "csd: average must be"),
    (lambda: ls.welch(X, nperseg=16, scaling="power"), "welch: scaling must be"),
    (lambda: ls.welch(X, window=np.ones((2, 2), np.float32)), "welch: the argument window"),
    (lambda: ls.welch(X, nperseg=8, window=np.ones(4, np.float32)), "must equal the length"),
    (lambda: ls.istft(np.ones(4, np.complex64)), "istft: Zxx must be at least 2-D"),
    (lambda: ls.csd(X, XY, nperseg=16), "csd: x and y must have the same rank"),
])
def test_bad_arguments(call: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()
