"""lamina.scipy.signal, fft (DCT), integrate, cluster.vq,
ndimage.map_coordinates and interpolate.RegularGridInterpolator against SciPy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.fft as sf
import scipy.interpolate as si
import scipy.ndimage as sn
import scipy.signal as ss

import lamina
import lamina.scipy as lsc

_RNG = np.random.default_rng(0)
_A = _RNG.standard_normal((7, 5)).astype(np.float32)
_B = _RNG.standard_normal((3, 4)).astype(np.float32)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolutions_match_scipy(mode):
    for name, method in (("convolve", "direct"), ("correlate", "direct"), ("convolve", "fft")):
        got = getattr(lsc.signal, name)(_A, _B, mode, method=method)
        np.testing.assert_allclose(np.asarray(got), getattr(ss, name)(_A, _B, mode, method=method),
                                   atol=1e-4, err_msg=f"{name} {method}")
    for name in ("convolve2d", "correlate2d"):
        np.testing.assert_allclose(np.asarray(getattr(lsc.signal, name)(_A, _B, mode)),
                                   getattr(ss, name)(_A, _B, mode), atol=1e-4, err_msg=name)
    np.testing.assert_allclose(np.asarray(lsc.signal.fftconvolve(_A, _B, mode)),
                               ss.fftconvolve(_A, _B, mode), atol=1e-4)


def test_convolution_edges_and_errors():
    small = _B[:2, :2]
    np.testing.assert_allclose(np.asarray(lsc.signal.convolve(small, _A, "valid")),
                               ss.convolve(small, _A, "valid"), atol=1e-4)
    c = (_RNG.standard_normal(6) + 1j * _RNG.standard_normal(6)).astype(np.complex64)
    d = (_RNG.standard_normal(3) + 1j).astype(np.complex64)
    np.testing.assert_allclose(np.asarray(lsc.signal.correlate(c, d)), ss.correlate(c, d),
                               atol=1e-4)
    with pytest.raises(ValueError, match="signal.convolve: in1 and in2 should have the same "):
        lsc.signal.convolve(_A, _B[0])
    with pytest.raises(ValueError, match="'valid' mode, one input must be at least as large"):
        lsc.signal.convolve(_A, np.ones((8, 2), np.float32), "valid")
    with pytest.raises(ValueError, match="convolve2d: only boundary='fill'"):
        lsc.signal.convolve2d(_A, _B, boundary="wrap")
    grad = lamina.grad(lambda a: lsc.signal.convolve(a, _B).sum())(_A)
    np.testing.assert_allclose(np.asarray(grad), np.full_like(_A, _B.sum()), rtol=1e-5)


def test_detrend_matches_scipy():
    x = _RNG.standard_normal((20, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(lsc.signal.detrend(x, axis=0)), ss.detrend(x, axis=0),
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(lsc.signal.detrend(x, axis=0, bp=[5, 12])),
                               ss.detrend(x, axis=0, bp=[5, 12]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(lsc.signal.detrend(x, type="constant")),
                               ss.detrend(x, type="constant"), atol=1e-5)


@pytest.mark.parametrize("n", [1, 7, 8])
def test_dct_matches_scipy(n):
    v = _RNG.standard_normal((3, n)).astype(np.float32)
    for norm in (None, "ortho"):
        np.testing.assert_allclose(np.asarray(lsc.fft.dct(v, norm=norm)), sf.dct(v, norm=norm),
                                   atol=1e-4)
        np.testing.assert_allclose(np.asarray(lsc.fft.idct(v, norm=norm)), sf.idct(v, norm=norm),
                                   atol=1e-4)


def test_dctn_vq_and_trapezoid():
    v = _RNG.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(lsc.fft.dctn(v, norm="ortho")),
                               sf.dctn(v, norm="ortho"), atol=1e-4)
    np.testing.assert_allclose(np.asarray(lsc.fft.idctn(v)), sf.idctn(v), atol=1e-4)
    np.testing.assert_allclose(np.asarray(lsc.fft.dct(v, n=8, axis=0)), sf.dct(v, n=8, axis=0),
                               atol=1e-4)
    np.testing.assert_allclose(np.asarray(lamina.jit(lsc.fft.idct)(lsc.fft.dct(v))), v,
                               atol=1e-5)
    with pytest.raises(NotImplementedError, match="only the DCT of type 2"):
        lsc.fft.dct(v, type=3)
    codes = _RNG.standard_normal((4, 3)).astype(np.float32)
    obs = _RNG.standard_normal((10, 3)).astype(np.float32)
    (index, dist), (want_index, want_dist) = lsc.cluster.vq.vq(obs, codes), svq.vq(obs, codes)
    np.testing.assert_array_equal(np.asarray(index), want_index)
    np.testing.assert_allclose(np.asarray(dist), want_dist, atol=1e-5)
    assert float(lsc.integrate.trapezoid(np.float32([1, 2, 4]))) == 4.5


def test_map_coordinates_matches_scipy():
    x = _RNG.standard_normal((5, 6)).astype(np.float32)
    inside = [_RNG.uniform(0, 4, 7).astype(np.float32), _RNG.uniform(0, 5, 7).astype(np.float32)]
    outside = [np.float32([-1.7, 5.2, 7.9, -3.3]), np.float32([6.5, -0.2, 2.0, 11.4])]
    for order in (0, 1):
        for mode in ("constant", "nearest", "wrap", "mirror", "reflect"):
            np.testing.assert_allclose(
                np.asarray(lsc.ndimage.map_coordinates(x, inside, order, mode)),
                sn.map_coordinates(x, inside, order=order, mode=mode), atol=1e-5,
                err_msg=f"{order} {mode}")
    for mode in ("nearest", "mirror", "reflect", "grid-wrap"):
        np.testing.assert_allclose(
            np.asarray(lsc.ndimage.map_coordinates(x, outside, 1, mode)),
            sn.map_coordinates(x, outside, order=1, mode=mode), atol=1e-5, err_msg=mode)
    grad = lamina.grad(lambda c: lsc.ndimage.map_coordinates(x, [c, np.float32(2.0)], 1))(
        np.float32(1.25))
    np.testing.assert_allclose(float(grad), x[2, 2] - x[1, 2], rtol=1e-5)
    with pytest.raises(ValueError, match="map_coordinates: coordinates must give one array"):
        lsc.ndimage.map_coordinates(x, inside[:1], 1)


@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_regular_grid_interpolator_matches_scipy(method):
    px, py = np.sort(_RNG.uniform(0, 3, 5)), np.linspace(-1, 1, 4)
    values = _RNG.standard_normal((5, 4, 2)).astype(np.float32)
    xi = np.stack([_RNG.uniform(-0.5, 3.5, 9), _RNG.uniform(-1.2, 1.2, 9)], -1).astype(np.float32)
    for fill in (np.nan, None):
        ours = lsc.interpolate.RegularGridInterpolator(
            (px.astype(np.float32), py.astype(np.float32)), values, method, fill_value=fill)
        theirs = si.RegularGridInterpolator((px, py), values, method, bounds_error=False,
                                            fill_value=fill)
        np.testing.assert_allclose(np.asarray(ours(xi)), theirs(xi), atol=1e-5, equal_nan=True)
    with pytest.raises(ValueError, match="points\\[1\\] must be 1-D with 4 entries"):
        lsc.interpolate.RegularGridInterpolator((px, py[:3]), values)
