"""lamina.scipy.special against SciPy: values over the domains and at the
edges (0, +-inf, NaN, large arguments) compiled with jit, under vmap, the
derivatives (check_grads), logsumexp's stability, and bad-argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special as sp

import lamina
from lamina.scipy import special as ls
from lamina.test_util import check_grads

INF, NAN = np.inf, np.nan


def f32(*values: float) -> np.ndarray[Any, Any]:
    return np.array(values, np.float32)


def close(actual: Any, expected: Any, rtol: float = 2e-5, atol: float = 1e-6) -> None:
    a = np.asarray(actual)
    e = np.asarray(expected, np.float64).astype(a.dtype)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


# --- the primitives behind the scipy names (compiled lowering: series, continued fractions) --
def test_gammainc_gammaincc_values_and_edges() -> None:
    a = f32(0.5, 1.0, 3.0, 10.0, 1e-3, 100.0, 100.0, 2.0, 0.0, 0.0, 2.0, -1.0, 2.0, NAN, 5.0)
    x = f32(0.3, 2.0, 2.5, 12.0, 5.0, 90.0, 110.0, 0.0, 0.0, 3.0, INF, 1.0, -1.0, 1.0, 1e-30)
    p, q, s = lamina.jit(lambda a, x: (ls.gammainc(a, x), ls.gammaincc(a, x),
                                       ls.gammainc(2.0, x[:2])))(a, x)
    close(p, sp.gammainc(a.astype(np.float64), x.astype(np.float64)), rtol=2e-5)
    close(q, sp.gammaincc(a.astype(np.float64), x.astype(np.float64)), rtol=2e-5)
    # a scalar broadcasts against an array
    close(s, sp.gammainc(2.0, x[:2].astype(np.float64)))


def test_betainc_values_and_edges() -> None:
    a = f32(0.5, 1.0, 2.0, 5.0, 0.1, 50.0, 2.0, 2.0, 0.0, 2.0, -1.0, 2.0, NAN)
    b = f32(2.0, 0.5, 1.0, 3.0, 7.0, 40.0, 3.0, 3.0, 1.0, 0.0, 1.0, 2.0, 1.0)
    x = f32(0.1, 0.5, 0.9, 0.3, 0.99, 0.55, 0.0, 1.0, 0.5, 0.5, 0.5, 1.5, 0.5)
    out = lamina.jit(ls.betainc)(a, b, x)
    close(out, sp.betainc(*(v.astype(np.float64) for v in (a, b, x))), rtol=5e-5)


def test_bessel_values() -> None:
    x = f32(-1e4, -20.0, -3.0, -0.5, 0.0, 1e-3, 4.0, 7.9, 8.1, 30.0, 1e4, INF, NAN)
    outs = lamina.jit(lambda x: (ls.i0e(x), ls.i1e(x)))(x)
    x64 = x.astype(np.float64)
    close(outs[0], sp.i0e(x64), rtol=2e-6)
    close(outs[1], sp.i1e(x64), rtol=2e-6)
    small = f32(-3.0, 0.0, 0.5, 10.0)
    i0, i1 = lamina.jit(lambda x: (ls.i0(x), ls.i1(x)))(small)
    close(i0, sp.i0(small.astype(np.float64)), rtol=2e-6)
    close(i1, sp.i1(small.astype(np.float64)), rtol=2e-6)


def test_zeta_values() -> None:
    s = f32(1.5, 2.0, 3.0, 10.0, 1.0, 4.0)
    q = f32(0.5, 1.0, 7.0, 2.0, 1.0, 1e3)
    close(lamina.jit(ls.zeta)(s, q), sp.zeta(s.astype(np.float64), q.astype(np.float64)),
          rtol=2e-5)
    with pytest.raises(ValueError, match="zeta: q is required"):
        ls.zeta(2.0)


def test_float16_is_computed_in_float32() -> None:
    x = np.array([0.5, 3.0], np.float16)
    out = ls.gammainc(x, x)
    assert out.dtype == np.float16
    close(out, sp.gammainc([0.5, 3.0], [0.5, 3.0]), rtol=2e-3)
    assert ls.i0e(x).dtype == np.float16


def test_float64_precision() -> None:
    with lamina.enable_x64(True):
        a = np.array([0.5, 3.0, 30.0])
        x = np.array([0.2, 4.0, 25.0])
        p = np.array([1e-300, 1e-20, 0.3, 0.999])
        t = np.array([-40.0, -1.0, 9.0])

        def f(a: Any, x: Any, p: Any, t: Any) -> Any:
            return (ls.gammainc(a, x), ls.betainc(a, a, x / 40), ls.i0e(x), ls.ndtri(p),
                    ls.log_ndtr(t))

        outs = lamina.jit(f)(a, x, p, t)
        assert all(o.dtype == np.float64 for o in outs)
        close(outs[0], sp.gammainc(a, x), rtol=1e-12)
        close(outs[1], sp.betainc(a, a, x / 40), rtol=1e-11)
        close(outs[2], sp.i0e(x), rtol=1e-14)
        close(outs[3], sp.ndtri(p), rtol=1e-13)
        close(outs[4], sp.log_ndtr(t), rtol=1e-13)


# --- elementwise names --------------------------------------------------------------------
GAMMA_X = f32(-2.5, -1.5, -1.0, -0.0, 0.0, 1e-4, 0.5, 2.0, 7.5, 30.0, INF, NAN)

UNARY: list[tuple[str, Any, Any, Any, float]] = [
    ("gammaln", ls.gammaln, sp.gammaln, GAMMA_X, 2e-5),
    ("gamma", ls.gamma, sp.gamma, f32(-2.5, -1.5, -1.0, 1e-4, 0.5, 2.0, 7.5, 30.0, NAN), 1e-4),
    ("gammasgn", ls.gammasgn, sp.gammasgn, f32(-2.5, -1.5, -1.0, -0.0, 0.0, 0.5, INF, NAN), 0),
    ("digamma", ls.digamma, sp.digamma, f32(-2.5, 1e-3, 0.5, 2.0, 100.0, INF, NAN), 2e-5),
    ("erf", ls.erf, sp.erf, f32(-INF, -3.0, -0.1, 0.0, 0.5, 4.0, INF, NAN), 2e-6),
    ("erfc", ls.erfc, sp.erfc, f32(-INF, -3.0, 0.0, 0.5, 4.0, 9.0, INF, NAN), 2e-5),
    ("erfinv", ls.erfinv, sp.erfinv, f32(-1.0, -0.999, -0.3, 0.0, 0.6, 1.0, 1.5, NAN), 2e-5),
    ("ndtr", ls.ndtr, sp.ndtr, f32(-INF, -20.0, -5.0, -0.3, 0.0, 1.0, 8.0, INF, NAN), 2e-5),
    ("ndtri", ls.ndtri, sp.ndtri,
     f32(0.0, 1e-37, 1e-20, 1e-6, 0.02, 0.3, 0.5, 0.9, 0.99999, 1.0, -0.1, 1.1, NAN), 2e-5),
    ("log_ndtr", ls.log_ndtr, sp.log_ndtr,
     f32(-INF, -1e4, -50.0, -12.0, -9.0, -3.0, 0.0, 4.0, 6.0, 30.0, INF, NAN), 2e-5),
    ("expit", ls.expit, sp.expit, f32(-INF, -100.0, -2.0, 0.0, 3.0, 100.0, INF, NAN), 2e-6),
    ("logit", ls.logit, sp.logit, f32(0.0, 1e-6, 0.3, 0.5, 0.9, 1.0, 1.5, NAN), 2e-5),
    ("entr", ls.entr, sp.entr, f32(-1.0, 0.0, 1e-10, 0.5, 2.0, INF, NAN), 2e-6),
    ("factorial", ls.factorial, sp.factorial, f32(-1.0, 0.0, 1.0, 5.0, 10.0, 20.0), 1e-5),
]


def test_unary_values() -> None:
    # one compiled program for every function (fewer compilations)
    outs = lamina.jit(lambda xs: [fn(x) for (_, fn, _, _, _), x in zip(UNARY, xs)])(
        [case[3] for case in UNARY])
    for (name, _, ref, x, rtol), out in zip(UNARY, outs):
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64))
        try:
            close(out, expected, rtol=rtol, atol=0 if rtol == 0 else 1e-7)
        except AssertionError as e:
            raise AssertionError(f"lamina.scipy.special.{name}: {e}") from None


BINARY: list[tuple[str, Any, Any, Any, Any, float]] = [
    ("xlogy", ls.xlogy, sp.xlogy, f32(0.0, 0.0, 2.0, 0.0, 3.0, -1.0),
     f32(0.0, 2.0, 3.0, NAN, 0.0, 4.0), 2e-6),
    ("xlog1py", ls.xlog1py, sp.xlog1py, f32(0.0, 0.0, 2.0, 0.5, 3.0),
     f32(-1.0, 2.0, 1e-8, NAN, 4.0), 2e-6),
    ("rel_entr", ls.rel_entr, sp.rel_entr, f32(0.0, 0.5, 2.0, -1.0, 0.3, 1.0),
     f32(1.0, 0.25, 3.0, 1.0, -1.0, 0.0), 2e-6),
    ("kl_div", ls.kl_div, sp.kl_div, f32(0.0, 0.5, 2.0, -1.0, 0.3),
     f32(1.0, 0.25, 3.0, 1.0, 0.0), 2e-6),
    ("betaln", ls.betaln, sp.betaln, f32(0.5, 2.0, 30.0, 1e-3), f32(0.5, 3.0, 40.0, 5.0), 2e-5),
    ("beta", ls.beta, sp.beta, f32(0.5, 2.0, -0.5, 3.0), f32(0.5, 3.0, 2.0, 4.0), 2e-5),
    ("comb", ls.comb, sp.comb, f32(10.0, 5.0, 3.0, 30.0, -1.0), f32(3.0, 5.0, 4.0, 15.0, 1.0), 2e-5),
    ("poch", ls.poch, sp.poch, f32(3.0, 0.5, 2.0, -1.5), f32(2.0, 3.0, 0.0, 2.0), 2e-5),
    ("boxcox", ls.boxcox, sp.boxcox, f32(1.0, 2.0, 5.0, 0.5), f32(0.0, 0.5, -1.0, 2.0), 2e-6),
    ("boxcox1p", ls.boxcox1p, sp.boxcox1p, f32(0.0, 1e-7, 4.0, 0.5), f32(0.0, 0.5, -1.0, 2.0),
     2e-6),
]


def test_binary_values() -> None:
    outs = lamina.jit(lambda xs, ys: [fn(x, y) for (_, fn, *_), x, y in zip(BINARY, xs, ys)])(
        [case[3] for case in BINARY], [case[4] for case in BINARY])
    for (name, _, ref, x, y, rtol), out in zip(BINARY, outs):
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64), y.astype(np.float64))
        try:
            close(out, expected, rtol=rtol)
        except AssertionError as e:
            raise AssertionError(f"lamina.scipy.special.{name}: {e}") from None


def test_polygamma_and_multigammaln() -> None:
    n = np.array([0, 1, 2, 3], np.int32)
    x = f32(0.5, 2.0, 3.5, 10.0)
    close(lamina.jit(ls.polygamma)(n, x), sp.polygamma(n, x.astype(np.float64)), rtol=2e-5)
    close(ls.multigammaln(f32(3.0, 4.5), 3), sp.multigammaln(np.array([3.0, 4.5]), 3),
          rtol=2e-6)
    with pytest.raises(ValueError, match="polygamma: the argument n must have an integer"):
        ls.polygamma(1.0, 2.0)
    with pytest.raises(ValueError, match="multigammaln: d must be >= 1"):
        ls.multigammaln(3.0, 0)


def test_bernoulli_numbers() -> None:
    for n in (0, 1, 2, 7, 30):
        close(ls.bernoulli(n), sp.bernoulli(n), rtol=1e-6)
    with pytest.raises(ValueError, match="bernoulli: n must be a non-negative"):
        ls.bernoulli(-1)


def test_bad_arguments_name_the_function() -> None:
    with pytest.raises(ValueError, match="factorial: exact=True"):
        ls.factorial(3.0, exact=True)
    with pytest.raises(ValueError, match="log_ndtr: series_order"):
        ls.log_ndtr(1.0, series_order=-1)
    with pytest.raises(ValueError, match="gammaln does not support complex"):
        ls.gammaln(np.complex64(1.0))
    with pytest.raises(TypeError, match="gammainc"):
        ls.gammainc("a", 1.0)


# --- logsumexp and softmax ---------------------------------------------------------------
def test_logsumexp_is_stable() -> None:
    x = f32(1000.0, 1000.0, -1000.0)
    close(ls.logsumexp(x), 1000.0 + np.log(2.0), rtol=1e-6)
    close(ls.logsumexp(-x), 1000.0, rtol=1e-6)
    close(ls.logsumexp(f32(-INF, 1.0)), 1.0)
    assert np.asarray(ls.logsumexp(f32(-INF, -INF))) == -INF
    assert np.asarray(ls.logsumexp(f32(INF, 1.0))) == INF
    m = np.arange(12, dtype=np.float32).reshape(3, 4) * 300
    close(lamina.jit(lambda v: ls.logsumexp(v, axis=1, keepdims=True))(m),
          sp.logsumexp(m.astype(np.float64), axis=1, keepdims=True), rtol=1e-6)
    close(ls.logsumexp(m, axis=(0, 1)), sp.logsumexp(m.astype(np.float64)), rtol=1e-6)
    b = f32(1.0, -2.0, 0.5)
    out, sign = ls.logsumexp(f32(0.0, 1.0, 2.0), b=b, return_sign=True)
    ref, ref_sign = sp.logsumexp([0.0, 1.0, 2.0], b=[1.0, -2.0, 0.5], return_sign=True)
    close(out, ref, rtol=1e-6)
    assert np.asarray(sign) == ref_sign


def test_softmax_family_matches_scipy() -> None:
    x = np.array([[1.0, 2.0, 1000.0], [-1000.0, 0.0, 3.0]], np.float32)
    close(ls.softmax(x, axis=-1), sp.softmax(x.astype(np.float64), axis=-1), rtol=1e-6)
    close(ls.log_softmax(x, axis=0), sp.log_softmax(x.astype(np.float64), axis=0), rtol=1e-6)


# --- vmap -----------------------------------------------------------------------------
def test_vmap() -> None:
    a = f32(0.5, 2.0, 7.0)
    x = f32(1.0, 3.0)
    got = lamina.vmap(lambda a_: ls.gammainc(a_, x))(a)
    close(got, sp.gammainc(a[:, None].astype(np.float64), x.astype(np.float64)), rtol=2e-5)
    m = np.linspace(-500, 500, 12, dtype=np.float32).reshape(3, 4)
    close(lamina.vmap(ls.logsumexp)(m), sp.logsumexp(m.astype(np.float64), axis=1), rtol=1e-6)
    u = f32(0.2, 0.7)
    got_b = lamina.jit(lamina.vmap(ls.betainc, in_axes=(None, 0, 0)))(2.0, f32(1.0, 3.0), u)
    close(got_b, sp.betainc(2.0, [1.0, 3.0], u.astype(np.float64)), rtol=5e-5)


# --- derivatives ------------------------------------------------------------------------
def test_gradients() -> None:
    tol = dict(atol=2e-3, rtol=2e-3)
    # (the series and fractions converge to float32 eps: a wider step for the differences)
    wide: dict[str, Any] = dict(atol=2e-3, rtol=2e-3, eps=1e-2)
    # (forward mode of igamma's rules is checked in tracing-core's test_tc_special)
    check_grads(ls.gammainc, (f32(0.8, 5.0), f32(0.6, 7.0)), order=1, modes=("rev",), **wide)
    check_grads(lambda x: ls.betainc(f32(2.0, 0.7), f32(3.0, 1.5), x), (f32(0.3, 0.6),),
                order=1, **wide)
    check_grads(ls.i0e, (f32(-2.0, 0.5, 9.0),), order=1, **tol)
    check_grads(ls.i1e, (f32(-2.0, 0.5, 9.0),), order=1, **tol)
    check_grads(lambda q: ls.zeta(3.0, q), (f32(0.5, 2.0),), order=1, **tol)
    check_grads(ls.gammaln, (f32(0.5, 3.0),), order=2, **wide)
    check_grads(ls.ndtri, (f32(0.05, 0.9),), order=1, modes=("rev",), **tol)
    check_grads(ls.log_ndtr, (f32(-20.0, -3.0, 0.5, 7.0),), order=1, **wide)
    check_grads(ls.logit, (f32(0.2, 0.7),), order=1, modes=("rev",), **tol)
    check_grads(lambda v: ls.logsumexp(v, axis=-1), (f32(1.0, 2.0, -3.0),), order=1, **tol)
    check_grads(ls.xlogy, (f32(0.5, 2.0), f32(1.5, 3.0)), order=1, **tol)
    check_grads(ls.xlog1py, (f32(0.5, 2.0), f32(1.5, 3.0)), order=1, modes=("rev",), **tol)


def test_custom_derivatives_at_the_edges() -> None:
    def grads(x0: Any, y: Any, t: Any, big: Any, a: Any, xa: Any) -> Any:
        return (lamina.grad(ls.xlogy, argnums=(0, 1))(x0, y), lamina.grad(ls.log_ndtr)(t),
                lamina.grad(ls.logsumexp)(big), lamina.grad(ls.gammainc)(a, xa),
                lamina.grad(ls.entr)(y))

    (gx, gy), g_tail, g_lse, g_a, g_entr = lamina.jit(grads)(
        np.float32(0.0), np.float32(2.0), np.float32(-40.0), f32(1000.0, 0.0), np.float32(2.0),
        np.float32(3.0))
    # xlogy's derivative in x at x = 0 is log(y); in y it is x / y = 0
    close(gx, np.log(2.0))
    assert float(gy) == 0.0
    # log_ndtr far in the lower tail: d/dx log Phi(x) ~ -x
    close(g_tail, 40.025, rtol=1e-4)
    close(g_lse, [1.0, 0.0])
    # gammainc's derivative in a (through igamma_grad_a) against a central difference
    h = 1e-4
    close(g_a, (sp.gammainc(2.0 + h, 3.0) - sp.gammainc(2.0 - h, 3.0)) / (2 * h), rtol=1e-4)
    close(g_entr, -(np.log(2.0) + 1))
