"""lax.fft (FFT, IFFT, RFFT, IRFFT) and lamina.numpy.fft against numpy.fft:
values, norms, axes and sizes, derivatives (orders 1-2), vmap and errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import window_fft_reference
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core import numpy as tnp

jfft = tnp.fft
RNG = np.random.RandomState(11)


@pytest.fixture(autouse=True, scope="module")
def _reference_impls() -> Iterator[None]:
    with window_fft_reference.installed():
        yield


def real(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


def cplx(*shape: int) -> np.ndarray[Any, Any]:
    return (real(*shape) + 1j * real(*shape)).astype(np.complex64)


TOL = dict(rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_one_dimensional_transforms(norm: Any) -> None:
    x, z = real(3, 8), cplx(3, 8)
    for name, arg in [("fft", z), ("ifft", z), ("rfft", x), ("irfft", z[:, :5]),
                      ("hfft", z[:, :5]), ("ihfft", x)]:
        for n in (None, 6, 11):
            got = getattr(jfft, name)(arg, n=n, axis=-1, norm=norm)
            want = getattr(np.fft, name)(arg, n=n, axis=-1, norm=norm)
            assert_close(got, want.astype(np.asarray(got).dtype), err_msg=f"{name} n={n}", **TOL)
    assert_close(jfft.fft(z, axis=0), np.fft.fft(z, axis=0).astype(np.complex64), **TOL)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_multi_dimensional_transforms(norm: Any) -> None:
    x, z = real(2, 4, 6), cplx(2, 4, 6)
    for name, arg in [("fftn", z), ("ifftn", z), ("rfftn", x), ("irfftn", z),
                      ("fft2", z), ("ifft2", z), ("rfft2", x), ("irfft2", z)]:
        for kwargs in ({}, {"axes": (0, 2)}, {"s": (3, 8), "axes": (2, 1)}):
            if name.endswith("2") and "axes" in kwargs and "s" not in kwargs:
                continue
            got = getattr(jfft, name)(arg, norm=norm, **kwargs)
            want = getattr(np.fft, name)(arg, norm=norm, **kwargs)
            assert_close(got, want.astype(np.asarray(got).dtype),
                         err_msg=f"{name} {kwargs}", **TOL)


def test_more_than_three_axes() -> None:
    x, z = real(2, 3, 2, 4, 2), cplx(2, 3, 2, 4, 2)
    assert_close(jfft.fftn(z), np.fft.fftn(z).astype(np.complex64), **TOL)
    assert_close(jfft.rfftn(x), np.fft.rfftn(x).astype(np.complex64), **TOL)
    spectrum = np.fft.rfftn(x).astype(np.complex64)
    axes = tuple(range(x.ndim))
    assert_close(jfft.irfftn(spectrum, s=x.shape, axes=axes),
                 np.fft.irfftn(spectrum, s=x.shape, axes=axes).astype(np.float32), **TOL)


def test_freqs_and_shifts() -> None:
    for n in (1, 6, 7):
        assert_close(jfft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5).astype(np.float32))
        assert_close(jfft.rfftfreq(n), np.fft.rfftfreq(n).astype(np.float32))
    x = real(4, 5)
    assert_close(jfft.fftshift(x), np.fft.fftshift(x))
    assert_close(jfft.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1))
    assert_close(jfft.ifftshift(jfft.fftshift(x)), x)


def test_dtypes() -> None:
    assert np.asarray(jfft.fft(np.arange(4))).dtype == np.complex64
    assert np.asarray(jfft.rfft(np.arange(4))).dtype == np.complex64
    assert np.asarray(jfft.irfft(np.ones(3, np.complex64))).dtype == np.float32
    assert np.asarray(jfft.hfft(np.ones(3, np.float32))).dtype == np.float32


@pytest.mark.parametrize("typ", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("lengths", [(6,), (4, 5)])
def test_lax_fft_grads(typ: str, lengths: tuple[int, ...]) -> None:
    if typ == "RFFT":
        x: Any = real(2, *lengths)
    elif typ == "IRFFT":
        x = cplx(2, *lengths[:-1], lengths[-1] // 2 + 1)
    else:
        x = cplx(2, *lengths)
    f = lambda x: lx.fft(x, typ, lengths)  # noqa: E731
    # Real in, real out: the check's inner products do not depend on a
    # convention for complex cotangents.
    if typ == "RFFT":
        def g(xr: Any) -> Any:
            y = f(xr)
            return lx.real(y) * 0.7 + lx.imag(y) * 1.3
        check_grads(g, [x], order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    else:
        def h(xr: Any, xi: Any) -> Any:
            y = f(lx.complex(xr, xi))
            return (lx.real(y) * 0.7 + lx.imag(y) * 1.3) if typ != "IRFFT" else y
        check_grads(h, [np.real(x), np.imag(x)], order=2, modes=("fwd", "rev"), atol=2e-2,
                    rtol=2e-2)
    check_vmap(f, [x], [1])
    check_jaxpr_roundtrip(f, [x], **TOL)


def test_numpy_fft_grads_and_vmap() -> None:
    x = real(3, 6)
    check_grads(lambda x: lx.imag(jfft.rfft(x, n=8, norm="ortho")), [x], order=1, atol=2e-2,
                rtol=2e-2)
    check_grads(lambda x: jfft.irfft(jfft.rfft(x)), [x], order=1, atol=2e-2, rtol=2e-2)
    check_vmap(lambda x: jfft.fft2(x), [x], [0])
    g = api.grad(lambda x: lx.real(jfft.fft(x)).sum())(x)
    # d/dx_j sum_k Re(sum_n x_n e^{-2 pi i k n / N}) = sum_k cos(2 pi k j / N) = N [j == 0]
    assert_close(g, np.tile(np.array([6.0, 0, 0, 0, 0, 0], np.float32), (3, 1)), atol=1e-4)


def test_errors() -> None:
    z = cplx(4)
    with pytest.raises(ValueError, match="invalid norm"):
        jfft.fft(z, norm="sideways")
    with pytest.raises(TypeError, match="rfft takes real input"):
        jfft.rfft(z)
    with pytest.raises(ValueError, match="repeated axes"):
        jfft.fftn(cplx(2, 2), axes=(0, 0))
    with pytest.raises(ValueError, match="same length"):
        jfft.fftn(cplx(2, 2), s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="invalid number of data points"):
        jfft.fft(z, n=0)
    with pytest.raises(ValueError, match="fft_lengths must have 1 to 3"):
        lx.fft(cplx(2, 2, 2, 2), "FFT", (2, 2, 2, 2))
    with pytest.raises(ValueError, match="trailing dimensions"):
        lx.fft(z, "FFT", (5,))
