"""lamina.scipy.stats against SciPy: every function of each distribution at
points inside and outside the support and far in the tails (compiled with
jit), under vmap, with gradients (check_grads) and shape errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.stats as st

import lamina
from lamina.scipy import stats as ls
from lamina.test_util import check_grads

INF, NAN = np.inf, np.nan


def f32(*values: float) -> np.ndarray[Any, Any]:
    return np.array(values, np.float32)


def close(actual: Any, expected: Any, rtol: float = 3e-5, atol: float = 1e-6) -> None:
    a = np.asarray(actual)
    e = np.asarray(expected, np.float64).astype(a.dtype)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)


X = f32(-40.0, -8.0, -1.5, 0.0, 0.3, 2.0, 9.0, 40.0, INF, -INF, NAN)
Q = f32(0.0, 1e-30, 1e-6, 0.2, 0.5, 0.97, 1.0, -0.5, 2.0, NAN)


def test_norm_every_function() -> None:
    names = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")

    def f(x: Any, q: Any) -> Any:
        out = {n: getattr(ls.norm, n)(x, 0.5, 2.0) for n in names}
        out["ppf"] = ls.norm.ppf(q, 0.5, 2.0)
        out["isf"] = ls.norm.isf(q, 0.5, 2.0)
        return out

    outs = lamina.jit(f)(X, Q)
    x64, q64 = X.astype(np.float64), Q.astype(np.float64)
    for name in names:
        with np.errstate(all="ignore"):
            expected = getattr(st.norm, name)(x64, 0.5, 2.0)
        close(outs[name], expected, rtol=5e-5, atol=1e-7)
    close(outs["ppf"], st.norm.ppf(q64, 0.5, 2.0), rtol=5e-5)
    close(outs["isf"], st.norm.isf(q64, 0.5, 2.0), rtol=5e-5)


def _cases() -> list[tuple[str, Any, Any, tuple[Any, ...], Any]]:
    pos = f32(0.0, 0.2, 1.0, 3.5, 20.0, -1.0)
    unit = f32(0.0, 0.05, 0.4, 0.9, 1.0, 1.3, -0.2)
    return [
        ("laplace.logpdf", ls.laplace.logpdf, st.laplace.logpdf, (1.0, 2.0), X[:9]),
        ("laplace.cdf", ls.laplace.cdf, st.laplace.cdf, (1.0, 2.0), X[:9]),
        ("logistic.logpdf", ls.logistic.logpdf, st.logistic.logpdf, (1.0, 2.0), X[:8]),
        ("logistic.cdf", ls.logistic.cdf, st.logistic.cdf, (1.0, 2.0), X[:9]),
        ("logistic.sf", ls.logistic.sf, st.logistic.sf, (1.0, 2.0), X[:9]),
        ("logistic.ppf", ls.logistic.ppf, st.logistic.ppf, (1.0, 2.0), Q[2:7]),
        ("cauchy.logpdf", ls.cauchy.logpdf, st.cauchy.logpdf, (1.0, 2.0), X[:8]),
        ("cauchy.cdf", ls.cauchy.cdf, st.cauchy.cdf, (1.0, 2.0), X[:9]),
        ("cauchy.sf", ls.cauchy.sf, st.cauchy.sf, (1.0, 2.0), X[:8]),
        ("cauchy.ppf", ls.cauchy.ppf, st.cauchy.ppf, (1.0, 2.0), Q[2:9]),
        ("expon.logpdf", ls.expon.logpdf, st.expon.logpdf, (0.5, 2.0), X[:9]),
        ("expon.cdf", ls.expon.cdf, st.expon.cdf, (0.5, 2.0), X[:9]),
        ("expon.logsf", ls.expon.logsf, st.expon.logsf, (0.5, 2.0), X[:9]),
        ("expon.ppf", ls.expon.ppf, st.expon.ppf, (0.5, 2.0), Q[2:9]),
        ("uniform.logpdf", ls.uniform.logpdf, st.uniform.logpdf, (-1.0, 3.0), X[:9]),
        ("uniform.cdf", ls.uniform.cdf, st.uniform.cdf, (-1.0, 3.0), X[:9]),
        ("uniform.ppf", ls.uniform.ppf, st.uniform.ppf, (-1.0, 3.0), Q[:9]),
        ("gamma.logpdf", ls.gamma.logpdf, st.gamma.logpdf, (2.5, 0.0, 1.5), pos),
        ("gamma.cdf", ls.gamma.cdf, st.gamma.cdf, (2.5, 0.0, 1.5), pos),
        ("gamma.sf", ls.gamma.sf, st.gamma.sf, (2.5, 0.0, 1.5), pos),
        ("chi2.logpdf", ls.chi2.logpdf, st.chi2.logpdf, (3.0,), pos),
        ("chi2.cdf", ls.chi2.cdf, st.chi2.cdf, (3.0,), pos),
        ("beta.logpdf", ls.beta.logpdf, st.beta.logpdf, (2.0, 3.5), unit),
        ("beta.cdf", ls.beta.cdf, st.beta.cdf, (2.0, 3.5), unit),
        ("beta.sf", ls.beta.sf, st.beta.sf, (2.0, 3.5), unit),
        ("t.logpdf", ls.t.logpdf, st.t.logpdf, (3.0, 0.5, 2.0), X[:8]),
        ("poisson.logpmf", ls.poisson.logpmf, st.poisson.logpmf, (3.5,),
         f32(-1.0, 0.0, 1.0, 2.5, 4.0, 30.0)),
        ("poisson.cdf", ls.poisson.cdf, st.poisson.cdf, (3.5,), f32(-1.0, 0.0, 1.0, 2.5, 4.0, 30.0)),
        ("bernoulli.logpmf", ls.bernoulli.logpmf, st.bernoulli.logpmf, (0.3,),
         f32(-1.0, 0.0, 1.0, 2.0)),
        ("bernoulli.cdf", ls.bernoulli.cdf, st.bernoulli.cdf, (0.3,), f32(-1.0, 0.0, 0.5, 1.0, 3.0)),
        ("bernoulli.ppf", ls.bernoulli.ppf, st.bernoulli.ppf, (0.3,), f32(0.1, 0.7, 0.8, 1.0)),
        ("binom.logpmf", ls.binom.logpmf, st.binom.logpmf, (10.0, 0.35),
         f32(-1.0, 0.0, 3.0, 10.0, 11.0)),
        ("geom.logpmf", ls.geom.logpmf, st.geom.logpmf, (0.25,), f32(0.0, 1.0, 2.0, 7.0)),
        ("nbinom.logpmf", ls.nbinom.logpmf, st.nbinom.logpmf, (4.0, 0.3),
         f32(-1.0, 0.0, 3.0, 12.0)),
        ("pareto.logpdf", ls.pareto.logpdf, st.pareto.logpdf, (2.5, 0.5, 1.5), pos),
        ("pareto.cdf", ls.pareto.cdf, st.pareto.cdf, (2.5, 0.5, 1.5), pos),
        ("pareto.logsf", ls.pareto.logsf, st.pareto.logsf, (2.5, 0.5, 1.5), pos),
        ("pareto.ppf", ls.pareto.ppf, st.pareto.ppf, (2.5, 0.5, 1.5), Q[:9]),
        ("gumbel_r.logpdf", ls.gumbel_r.logpdf, st.gumbel_r.logpdf, (0.5, 2.0), X[1:8]),
        ("gumbel_r.cdf", ls.gumbel_r.cdf, st.gumbel_r.cdf, (0.5, 2.0), X[:9]),
        ("gumbel_r.sf", ls.gumbel_r.sf, st.gumbel_r.sf, (0.5, 2.0), X[:9]),
        ("gumbel_r.ppf", ls.gumbel_r.ppf, st.gumbel_r.ppf, (0.5, 2.0), Q[2:9]),
        ("gumbel_l.logpdf", ls.gumbel_l.logpdf, st.gumbel_l.logpdf, (0.5, 2.0), X[:7]),
        ("gumbel_l.cdf", ls.gumbel_l.cdf, st.gumbel_l.cdf, (0.5, 2.0), X[:9]),
        ("gumbel_l.logsf", ls.gumbel_l.logsf, st.gumbel_l.logsf, (0.5, 2.0), X[:8]),
        ("gumbel_l.ppf", ls.gumbel_l.ppf, st.gumbel_l.ppf, (0.5, 2.0), Q[2:9]),
        ("vonmises.logpdf", ls.vonmises.logpdf, st.vonmises.logpdf, (3.0,),
         f32(-3.0, -1.0, 0.0, 0.5, 3.1)),
        ("vonmises.logpdf large kappa", ls.vonmises.logpdf, st.vonmises.logpdf, (500.0,),
         f32(-0.1, 0.0, 0.05)),
        ("wrapcauchy.logpdf", ls.wrapcauchy.logpdf, st.wrapcauchy.logpdf, (0.4,),
         f32(0.0, 1.0, 3.0, 6.0)),
        ("gennorm.logpdf", ls.gennorm.logpdf, st.gennorm.logpdf, (1.5,), X[1:8]),
        ("gennorm.cdf", ls.gennorm.cdf, st.gennorm.cdf, (1.5,), X[1:8]),
    ]


CASES = _cases()


def test_distributions_match_scipy() -> None:
    # one compiled program for all of them
    outs = lamina.jit(lambda xs: [fn(x, *params) for (_, fn, _, params, _), x in
                                  zip(CASES, xs)])([c[4] for c in CASES])
    for (name, _, ref, params, x), out in zip(CASES, outs):
        with np.errstate(all="ignore"):
            expected = ref(x.astype(np.float64), *params)
        try:
            close(out, expected, rtol=5e-5, atol=1e-6)
        except AssertionError as e:
            raise AssertionError(f"lamina.scipy.stats.{name}: {e}") from None


def test_pdf_is_exp_logpdf_and_log_functions() -> None:
    x = f32(0.1, 0.5, 2.0)
    close(ls.gamma.pdf(x, 2.0), st.gamma.pdf(x.astype(np.float64), 2.0))
    close(ls.beta.logcdf(x[:2], 2.0, 3.0), st.beta.logcdf(x[:2].astype(np.float64), 2.0, 3.0))
    close(ls.poisson.pmf(f32(0.0, 2.0), 1.5), st.poisson.pmf([0.0, 2.0], 1.5))


def test_multivariate_normal() -> None:
    rng = np.random.RandomState(0)
    a = rng.standard_normal((3, 3))
    cov = (a @ a.T + 3 * np.eye(3)).astype(np.float32)
    mean = f32(0.5, -1.0, 2.0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    got = lamina.jit(ls.multivariate_normal.logpdf)(x, mean, cov)
    close(got, st.multivariate_normal.logpdf(x.astype(np.float64), mean, cov), rtol=2e-5)
    close(ls.multivariate_normal.pdf(x[0], mean, cov),
          st.multivariate_normal.pdf(x[0].astype(np.float64), mean, cov), rtol=2e-5)
    # scalar covariance (cov * I) and a scalar distribution
    close(ls.multivariate_normal.logpdf(x, mean, 2.0),
          st.multivariate_normal.logpdf(x.astype(np.float64), mean, 2.0 * np.eye(3)), rtol=2e-5)
    close(ls.multivariate_normal.logpdf(f32(0.3, 1.0), 0.5, 2.0),
          st.norm.logpdf([0.3, 1.0], 0.5, np.sqrt(2.0)), rtol=2e-5)
    # vmap over a batch of means
    means = rng.standard_normal((2, 3)).astype(np.float32)
    got_v = lamina.vmap(lambda m: ls.multivariate_normal.logpdf(x[0], m, cov))(means)
    close(got_v, [st.multivariate_normal.logpdf(x[0], m, cov) for m in means], rtol=2e-5)
    with pytest.raises(ValueError, match="multivariate_normal.logpdf: cov must"):
        ls.multivariate_normal.logpdf(x, mean, np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError, match="allow_singular"):
        ls.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)  # type: ignore[arg-type]


def test_multinomial() -> None:
    p = f32(0.2, 0.5, 0.3)
    x = np.array([[1.0, 2.0, 3.0], [0.0, 6.0, 0.0], [1.0, 1.0, 1.0]], np.float32)
    got = lamina.jit(ls.multinomial.logpmf)(x, 6.0, p)
    close(got, st.multinomial.logpmf(x, 6, p), rtol=2e-5)
    close(ls.multinomial.pmf(x[0], 6.0, p), st.multinomial.pmf(x[0], 6, p), rtol=2e-5)


def test_dirichlet() -> None:
    alpha = f32(1.5, 2.0, 3.0)
    x = np.array([[0.2, 0.1], [0.3, 0.6], [0.5, 0.3]], np.float32)
    close(lamina.jit(ls.dirichlet.logpdf)(x, alpha), st.dirichlet.logpdf(x, alpha), rtol=2e-5)
    # K - 1 components (the last one implied) and a point off the simplex
    close(ls.dirichlet.logpdf(x[:2, 0], alpha), st.dirichlet.logpdf(x[:, 0], alpha), rtol=2e-5)
    assert np.asarray(ls.dirichlet.logpdf(f32(0.5, 0.6, 0.1), alpha)) == -INF
    close(ls.dirichlet.pdf(x[:, 1], alpha), st.dirichlet.pdf(x[:, 1], alpha), rtol=2e-5)
    with pytest.raises(ValueError, match="dirichlet.logpdf: alpha must be one-dimensional"):
        ls.dirichlet.logpdf(x, np.ones((3, 1), np.float32))
    with pytest.raises(ValueError, match="dirichlet.logpdf: x must have 3 or 2"):
        ls.dirichlet.logpdf(np.ones((4,), np.float32), alpha)


def test_vmap_and_gradients() -> None:
    locs = f32(-1.0, 0.0, 2.0)
    got = lamina.vmap(lambda m: ls.norm.logcdf(f32(-30.0, 0.0, 3.0), m, 1.5))(locs)
    close(got, st.norm.logcdf(np.array([-30.0, 0.0, 3.0])[None], locs[:, None], 1.5), rtol=5e-5)
    # (float32 finite differences: a step of 1e-2)
    tol: dict[str, Any] = dict(atol=2e-3, rtol=2e-3, eps=1e-2)
    check_grads(ls.norm.logpdf, (f32(0.3, -2.0), f32(0.5, 0.1), f32(1.5, 1.2)), order=1, **tol)
    check_grads(ls.norm.logcdf, (f32(-15.0, 0.5, 4.0),), order=1, **tol)
    check_grads(ls.norm.ppf, (f32(0.1, 0.6),), order=1, **dict(tol, eps=1e-3))
    check_grads(lambda x, a: ls.gamma.logpdf(x, a), (f32(0.7, 3.0), f32(2.0, 4.5)), order=1,
                **tol)
    check_grads(lambda x: ls.t.logpdf(x, 4.0), (f32(-1.0, 2.0),), order=1, **tol)
    rng = np.random.RandomState(1)
    a = rng.standard_normal((2, 2))
    cov = (a @ a.T + 2 * np.eye(2)).astype(np.float32)
    check_grads(lambda m: ls.multivariate_normal.logpdf(f32(0.3, -0.2), m, cov),
                (f32(0.1, 0.4),), order=1, **tol)


def test_norm_logpdf_rounds_as_jax() -> None:
    """JAX's ADVI example fits a density through norm.logpdf: the same
    arithmetic as JAX (log(2 pi scale^2), the quadratic over scale^2, halved)
    gives JAX 0.10.2's float32 bits, eager and under jit."""
    x = lamina.numpy.linspace(-3, 3, 7, dtype=np.float32)
    eager = [-3.568943977355957, -2.530881881713867, -1.838840126991272, -1.4928194284439087,
             -1.4928194284439087, -1.8388402462005615, -2.530881881713867]
    jitted = [-3.568943977355957, -2.530881643295288, -1.838840126991272, -1.4928194284439087,
              -1.4928194284439087, -1.8388402462005615, -2.530881643295288]
    np.testing.assert_array_equal(np.asarray(ls.norm.logpdf(x, 0.5, 1.7)),
                                  np.array(eager, np.float32))
    np.testing.assert_array_equal(np.asarray(lamina.jit(ls.norm.logpdf)(x, 0.5, 1.7)),
                                  np.array(jitted, np.float32))
