"""sici, fresnel, wofz (and complex erfcx), owens_t, bessel_jn and sph_harm_y
against SciPy (float32), edges included; their derivatives, jit, vmap and the
errors for bad arguments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special as sp

import lamina
from lamina.scipy import special as ls
from lamina.test_util import check_grads

INF, NAN = np.inf, np.nan


def close(actual: Any, expected: Any, rtol: float, atol: float = 1e-7) -> None:
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=rtol, atol=atol,
                               equal_nan=True)


def test_sici_and_fresnel_match_scipy_with_edges() -> None:
    x = np.array([0.0, -0.0, 1e-5, 1.0, -1.0, 3.99, 4.0, 4.01, 7.9, 8.1, -20.0, 100.0, 1e7,
                  1e10, INF, -INF, NAN], np.float32)
    x64 = x.astype(np.float64)
    (si, ci), (s, c) = lamina.jit(lambda v: (ls.sici(v), ls.fresnel(v)))(x)
    want_si, want_ci = sp.sici(x64)
    close(si, want_si, 2e-6)
    close(ci, want_ci, 2e-6, atol=2e-7)
    fx = np.array([0.0, 1e-3, 1.0, -1.0, 1.6, 1.601, -2.0, 3.0, 30.0, 1e4, INF, -INF, NAN],
                  np.float32)
    s, c = ls.fresnel(fx)
    want_s, want_c = sp.fresnel(fx.astype(np.float64))
    close(s, want_s, 2e-6)
    close(c, want_c, 2e-6)
    assert ls.fresnel(np.float16(1.0))[0].dtype == np.float16


def test_sici_and_fresnel_derivatives_vmap() -> None:
    x = np.float32([0.7, 5.0, -9.0])
    dsi, dci = (lamina.vmap(lamina.grad(lambda v, i=i: ls.sici(v)[i]))(x) for i in (0, 1))
    close(dsi, np.sin(x) / x, 1e-5)
    close(dci, np.cos(x) / x, 1e-5)
    ds, dc = (lamina.vmap(lamina.grad(lambda v, i=i: ls.fresnel(v)[i]))(x) for i in (0, 1))
    close(ds, np.sin(np.pi * x.astype(np.float64) ** 2 / 2), 2e-5, atol=1e-5)
    close(dc, np.cos(np.pi * x.astype(np.float64) ** 2 / 2), 2e-5, atol=1e-5)
    check_grads(lambda v: ls.sici(v)[1], (np.float32([0.5, 6.0]),), order=1, atol=2e-2,
                rtol=2e-2)


def test_wofz_and_complex_erfcx_match_scipy() -> None:
    z = np.array([0.0, 1 + 1j, -3 - 2j, 10j, 0.5 - 0.1j, -2 + 0.3j, 1e4 + 1j, 6 - 0.01j],
                 np.complex64)
    w = lamina.jit(ls.wofz)(z)
    assert w.dtype == np.complex64
    close(w, sp.wofz(z.astype(np.complex128)), 3e-6)
    close(ls.wofz(np.float32([0.0, 1.0, -2.5])), sp.wofz(np.array([0.0, 1.0, -2.5])), 3e-6)
    close(ls.erfcx(np.complex64([1 + 1j, -0.5 + 2j])), sp.erfcx(np.array([1 + 1j, -0.5 + 2j])),
          3e-6)
    # w'(z) = -2 z w(z) + 2 i / sqrt(pi)
    z0 = np.complex64(0.3 + 0.8j)
    _, tangent = lamina.jvp(ls.wofz, (z0,), (np.complex64(1.0),))
    close(tangent, -2 * z0 * sp.wofz(complex(z0)) + 2j / np.sqrt(np.pi), 3e-6)


def test_owens_t_matches_scipy_with_edges_and_derivatives() -> None:
    h = np.float32([0.0, 1.0, -1.0, INF, 2.0, NAN, 0.0, 0.5, 3.0, 0.1, 10.0, 0.3, 1.0])
    a = np.float32([0.5, 2.0, 0.3, 1.0, -INF, 1.0, INF, -5.0, 0.99, 100.0, 0.2, 1.0, NAN])
    close(lamina.jit(ls.owens_t)(h, a), sp.owens_t(h.astype(np.float64), a.astype(np.float64)),
          2e-6, atol=1e-8)
    # a scalar h broadcasts against a vector a, under vmap too
    close(lamina.vmap(ls.owens_t, (None, 0))(np.float32(0.5), np.float32([0.5, 3.0])),
          sp.owens_t(0.5, np.array([0.5, 3.0])), 2e-6)
    check_grads(ls.owens_t, (np.float32([0.7, -1.5]), np.float32([1.3, 0.4])), order=1,
                atol=1e-2, rtol=1e-2)
    dh, da = lamina.grad(ls.owens_t, (0, 1))(np.float32(0.7), np.float32(1.3))
    eps = 1e-5
    close(dh, (sp.owens_t(0.7 + eps, 1.3) - sp.owens_t(0.7 - eps, 1.3)) / (2 * eps), 1e-4)
    close(da, (sp.owens_t(0.7, 1.3 + eps) - sp.owens_t(0.7, 1.3 - eps)) / (2 * eps), 1e-4)


def test_bessel_jn_matches_scipy() -> None:
    z = np.float32([0.0, 1e-3, 0.5, 1.0, -3.0, 10.0, 25.0])
    out = lamina.jit(lambda v: ls.bessel_jn(v, v=4))(z)
    assert out.shape == (5, 7)
    close(out, sp.jv(np.arange(5)[:, None], z.astype(np.float64)), 2e-5, atol=2e-7)
    grid = np.float32([[2.0, 7.0], [0.25, 12.0]])
    close(ls.bessel_jn(grid, v=1), sp.jv(np.arange(2)[:, None, None], grid.astype(np.float64)),
          2e-5, atol=2e-7)
    close(lamina.vmap(lambda v: ls.bessel_jn(v, v=2))(z[:3]),
          sp.jv(np.arange(3)[None, :], z[:3, None].astype(np.float64)), 2e-5, atol=2e-7)


def test_sph_harm_y_matches_scipy() -> None:
    n = np.array([0, 1, 2, 3, 5, 4, 2, 6])
    m = np.array([0, -1, 2, 1, -3, 4, 0, -6])
    theta = np.float32([0.3, 0.5, 1.0, 2.0, 0.0, 3.14159, 1.2, 0.9])
    phi = np.float32([0.1, 0.2, 0.3, 4.0, 1.0, 2.0, 6.0, 5.5])
    want = sp.sph_harm_y(n, m, theta.astype(np.float64), phi.astype(np.float64))
    close(ls.sph_harm_y(n, m, theta, phi), want, 2e-5, atol=1e-6)
    jitted = lamina.jit(lambda n, m, t, p: ls.sph_harm_y(n, m, t, p, n_max=6))
    close(jitted(n, m, theta, phi), want, 2e-5, atol=1e-6)
    # a scalar theta broadcasts
    close(ls.sph_harm_y(np.array([2]), np.array([1]), 0.5, np.float32([0.2, 0.3])),
          sp.sph_harm_y(2, 1, 0.5, np.array([0.2, 0.3])), 2e-5)


@pytest.mark.parametrize("call, error, words", [
    (lambda: ls.sici(np.complex64(1j)), ValueError, "sici: the argument x"),
    (lambda: ls.fresnel(np.complex64(1j)), ValueError, "fresnel: the argument x"),
    (lambda: ls.owens_t(np.complex64(1j), 1.0), ValueError, "owens_t: the arguments h and a"),
    (lambda: ls.bessel_jn(1.0, v=-1), ValueError, "bessel_jn: the argument v"),
    (lambda: ls.bessel_jn(1.0, v=1.5), TypeError, "the argument v"),
    (lambda: ls.bessel_jn(1.0, v=5, n_iter=3), ValueError, "the argument n_iter"),
    (lambda: ls.bessel_jn(np.complex64(1.0), v=1), ValueError, "bessel_jn: the argument z"),
    (lambda: ls.sph_harm_y(np.float32([1.0]), np.array([0]), 0.1, 0.1), TypeError,
     "sph_harm_y: the argument n"),
    (lambda: ls.sph_harm_y(np.array([1]), np.array([0]), 0.1, 0.1, diff_n=1), ValueError,
     "the argument diff_n"),
    (lambda: lamina.jit(lambda n: ls.sph_harm_y(n, n, 0.1, 0.1))(np.array([1])), Exception,
     "the argument n (when n_max is None)"),
])
def test_bad_arguments(call: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        call()
