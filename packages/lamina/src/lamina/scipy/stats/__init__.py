"""``lamina.scipy.stats``: SciPy's distributions (JAX's ``jax.scipy.stats``),
one module per distribution with its ``logpdf``/``pdf``/``cdf``/... functions."""

from lamina.scipy.stats import bernoulli as bernoulli
from lamina.scipy.stats import betabinom as betabinom
from lamina.scipy.stats import beta as beta
from lamina.scipy.stats import binom as binom
from lamina.scipy.stats import cauchy as cauchy
from lamina.scipy.stats import chi2 as chi2
from lamina.scipy.stats import dirichlet as dirichlet
from lamina.scipy.stats import expon as expon
from lamina.scipy.stats import gamma as gamma
from lamina.scipy.stats import gennorm as gennorm
from lamina.scipy.stats import geom as geom
from lamina.scipy.stats import gumbel_l as gumbel_l
from lamina.scipy.stats import gumbel_r as gumbel_r
from lamina.scipy.stats import laplace as laplace
from lamina.scipy.stats import logistic as logistic
from lamina.scipy.stats import multinomial as multinomial
from lamina.scipy.stats import multivariate_normal as multivariate_normal
from lamina.scipy.stats import nbinom as nbinom
from lamina.scipy.stats import norm as norm
from lamina.scipy.stats import pareto as pareto
from lamina.scipy.stats import poisson as poisson
from lamina.scipy.stats import t as t
from lamina.scipy.stats import truncnorm as truncnorm
from lamina.scipy.stats import uniform as uniform
from lamina.scipy.stats import vonmises as vonmises
from lamina.scipy.stats import wrapcauchy as wrapcauchy

from lamina.scipy.stats.descriptive import ModeResult, mode, rankdata, sem
from lamina.scipy.stats.kde import gaussian_kde

__all__ = [
    "ModeResult",
    "bernoulli",
    "betabinom",
    "beta",
    "binom",
    "cauchy",
    "chi2",
    "dirichlet",
    "expon",
    "gamma",
    "gaussian_kde",
    "gennorm",
    "geom",
    "gumbel_l",
    "gumbel_r",
    "laplace",
    "logistic",
    "mode",
    "multinomial",
    "multivariate_normal",
    "nbinom",
    "norm",
    "pareto",
    "poisson",
    "rankdata",
    "sem",
    "t",
    "truncnorm",
    "uniform",
    "vonmises",
    "wrapcauchy",
]
