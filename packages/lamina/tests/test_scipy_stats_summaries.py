"""truncnorm, betabinom, poisson.entropy, mode, rankdata and sem against SciPy
(float32 tolerances), edges included."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as ss

import lamina
import lamina.scipy.stats as ls


# Far in a tail the float32 log masses keep about 3 digits of a difference.
@pytest.mark.parametrize("a, b, rtol", [(-1.0, 2.0, 2e-4), (3.0, 8.0, 2e-4), (-40.0, -30.0, 5e-3)])
def test_truncnorm_matches_scipy(a, b, rtol):
    x = np.concatenate([np.linspace(a - 1, b + 1, 11), [a, b, np.inf, -np.inf, np.nan]])
    for name in ("logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"):
        got = getattr(ls.truncnorm, name)(x.astype(np.float32), a, b)
        np.testing.assert_allclose(np.asarray(got, np.float64), getattr(ss.truncnorm, name)(x, a, b),
                                   rtol=rtol, atol=1e-6, equal_nan=True, err_msg=name)
    # Far in a tail the log density stays finite and precise.
    np.testing.assert_allclose(np.asarray(ls.truncnorm.logpdf(np.float32(30.5), 30.0, 31.0)),
                               ss.truncnorm.logpdf(30.5, 30.0, 31.0), rtol=1e-4)


def test_betabinom_and_poisson_entropy():
    k = np.array([-1, 0, 1, 2.5, 5, 10, 11], np.float32)
    np.testing.assert_allclose(np.asarray(ls.betabinom.pmf(k, 10.0, 2.0, 3.0)),
                               ss.betabinom.pmf(k, 10, 2, 3), rtol=1e-5, atol=1e-8)
    mu = np.array([0.0, 0.5, 3.0, 50.0, 99.0, 101.0, -1.0])
    np.testing.assert_allclose(np.asarray(ls.poisson.entropy(mu.astype(np.float32))),
                               ss.poisson.entropy(mu), rtol=1e-5, equal_nan=True)
    grad = lamina.grad(lambda m: ls.poisson.entropy(m))(np.float32(4.0))
    step = 1e-4
    numeric = (ss.poisson.entropy(4.0 + step) - ss.poisson.entropy(4.0 - step)) / (2 * step)
    np.testing.assert_allclose(float(grad), numeric, rtol=1e-3)


def test_mode_rankdata_sem_match_scipy():
    d = np.array([[3, 1, 2, 2], [5, 5, 1, 1], [0, 2, 2, 9]], np.float32)
    for method in ("average", "min", "max", "dense", "ordinal"):
        np.testing.assert_array_equal(np.asarray(ls.rankdata(d, method, axis=1)),
                                      ss.rankdata(d, method, axis=1), err_msg=method)
        np.testing.assert_array_equal(np.asarray(ls.rankdata(d, method)), ss.rankdata(d, method))
    np.testing.assert_array_equal(np.asarray(ls.rankdata(np.float32([1, np.nan, 2]))),
                                  [np.nan] * 3)
    for axis in (0, 1, None):
        got, want = ls.mode(d, axis=axis), ss.mode(d, axis=axis)
        np.testing.assert_array_equal(np.asarray(got.mode), want.mode)
        np.testing.assert_array_equal(np.asarray(got.count), want.count)
        np.testing.assert_allclose(np.asarray(ls.sem(d, axis=axis)), ss.sem(d, axis=axis),
                                   rtol=1e-6)
    assert ls.mode(d, axis=1, keepdims=True).mode.shape == (3, 1)
    with_nan = np.float32([1, np.nan, 3, 4])
    np.testing.assert_allclose(np.asarray(ls.sem(with_nan, nan_policy="omit")),
                               ss.sem(with_nan, nan_policy="omit"), rtol=1e-6)
    with pytest.raises(ValueError, match="rankdata: unknown method 'mean'"):
        ls.rankdata(d, "mean")
    batched = lamina.vmap(lambda row: ls.rankdata(row))(d)
    np.testing.assert_array_equal(np.asarray(batched), ss.rankdata(d, axis=1))


def test_gaussian_kde_matches_scipy_and_jax():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((2, 30)).astype(np.float32)
    weights = rng.uniform(0.5, 1, 30).astype(np.float32)
    points = rng.standard_normal((2, 5)).astype(np.float32)
    for bw, w in ((None, None), ("silverman", weights), (0.3, None)):
        ours, theirs = ls.gaussian_kde(data, bw, w), ss.gaussian_kde(data, bw, w)
        np.testing.assert_allclose(np.asarray(ours(points)), theirs(points), rtol=1e-4)
        np.testing.assert_allclose(np.asarray(ours.logpdf(points)), theirs.logpdf(points),
                                   rtol=1e-4)
        np.testing.assert_allclose(np.asarray(ours.integrate_gaussian([0.1, 0.2], np.eye(2))),
                                   theirs.integrate_gaussian([0.1, 0.2], np.eye(2)), rtol=1e-4)
    one, one_scipy = ls.gaussian_kde(data[0]), ss.gaussian_kde(data[0])
    np.testing.assert_allclose(float(one.integrate_box_1d(-0.5, 1.0)),
                               one_scipy.integrate_box_1d(-0.5, 1.0), rtol=1e-4)
    np.testing.assert_allclose(float(one.integrate_kde(ls.gaussian_kde(data[1]))),
                               one_scipy.integrate_kde(ss.gaussian_kde(data[1])), rtol=1e-4)
    # JAX 0.10.2 (peer environment): gaussian_kde(data[0]).resample(PRNGKey(0), (4,)).
    np.testing.assert_allclose(
        np.asarray(one.resample(lamina.random.PRNGKey(0), (4,))),
        [[-1.8804720640182495, -1.372867226600647, -0.38507068157196045, 1.728407859802246]],
        rtol=1e-5)
    assert lamina.jit(lambda kde, p: kde.evaluate(p))(ls.gaussian_kde(data), points).shape == (5,)
    with pytest.raises(ValueError, match="gaussian_kde: argument weights should be one-dim"):
        ls.gaussian_kde(data, weights=weights[:3])
