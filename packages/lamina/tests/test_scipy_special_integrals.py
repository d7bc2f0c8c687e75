"""Exponential integrals, the dilogarithm, erfcx, Dawson's integral and the
hypergeometric functions against SciPy (float32), edges included, with
gradients, jit and vmap."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import lamina
from lamina.scipy import special as ls

_X_POSITIVE = [0.0, 1e-6, 0.1, 0.5, 1.0, 1.001, 2.0, 5.0, 19.9, 20.1, 50.0, 80.0, np.inf, np.nan]
_X_REAL = _X_POSITIVE + [-0.5, -3.0, -30.0, -np.inf]


def _close(got, want, rtol, atol=0.0):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol,
                               equal_nan=True)


@pytest.mark.parametrize("name, args, rtol", [
    ("exp1", (_X_REAL,), 2e-6),
    ("expi", (_X_REAL,), 2e-6),
    ("spence", ([0.0, 1e-4, 0.3, 0.5, 0.7, 1.0, 1.3, 1.9, 2.0, 10.0, 1e6, np.inf, -1.0,
                 np.nan],), 1e-6),
    ("erfcx", ([-30.0, -1.0, 0.0, 1.9, 2.0, 2.01, 10.0, 1e10, np.inf, -np.inf, np.nan],), 1e-6),
    ("dawsn", ([-10.0, -0.19, 0.0, 0.2, 1.0, 5.0, 1e4, np.inf, np.nan],), 2e-6),
])
def test_one_argument_functions_match_scipy(name, args, rtol):
    x = np.asarray(args[0])
    _close(getattr(ls, name)(x.astype(np.float32)), getattr(sp, name)(x), rtol, atol=1e-7)


def test_expn_matches_scipy():
    x = np.array(_X_POSITIVE)
    for n in (0, 1, 2, 5, 30):
        _close(ls.expn(np.full(x.shape, n, np.float32), x.astype(np.float32)),
               sp.expn(n, x), 3e-6)
    _close(ls.expn(np.float32([-1, 1.5]), np.float32([1, 1])), [np.nan, np.nan], 0)


def test_hypergeometric_functions_match_scipy():
    a = np.array([0.5, 1.0, 2.0, -1.5, 3.0])
    for x in (-10.0, -1.0, 0.0, 0.5, 5.0, 20.0):
        args = (a, np.full(5, 2.5), np.full(5, x))
        _close(ls.hyp1f1(*(v.astype(np.float32) for v in args)), sp.hyp1f1(*args), 2e-6)
    for x in (-5.0, -0.9, 0.0, 0.3, 0.8, 0.95, 1.0):
        args = (a, np.full(5, 1.5), np.full(5, 4.25), np.full(5, x))
        _close(ls.hyp2f1(*(v.astype(np.float32) for v in args)), sp.hyp2f1(*args), 2e-6)


def test_gradients_jit_and_vmap():
    x = np.float32(2.5)
    assert np.isclose(lamina.grad(ls.exp1)(x), -np.exp(-2.5) / 2.5, rtol=1e-5)
    assert np.isclose(lamina.grad(ls.spence)(x), np.log(2.5) / (1 - 2.5), rtol=1e-5)
    xs = np.float32([0.5, 3.0])
    _close(lamina.vmap(ls.expn, (None, 0))(np.float32(2), xs), sp.expn(2, xs), 2e-6)
    _close(lamina.jit(lambda v: ls.hyp1f1(1.0, 2.0, v))(xs), sp.hyp1f1(1, 2, xs), 2e-6)
