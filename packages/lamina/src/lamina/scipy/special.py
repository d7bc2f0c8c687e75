"""``lamina.scipy.special``: SciPy's special functions (JAX's ``jax.scipy.special``).

Arguments are promoted to an inexact dtype as ``jnp`` promotes them. The
gamma-family, error, Bessel and zeta functions are lax primitives (``lax.lgamma``,
``lax.igamma``, ``lax.bessel_i0e``, ...) with their derivatives; the rest are
compositions written to stay finite where the naive formula overflows
(``logsumexp``, ``log_ndtr``, ``xlogy`` at 0). ``logsumexp`` is ``lamina.nn``'s;
``softmax`` and ``log_softmax`` are ``lamina.nn``'s over all axes by default.
"""

from __future__ import annotations

import fractions
import functools
import math
from typing import Any

import numpy as np
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import control_flow as lax_control
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp
import lamina.nn as _nn
from lamina.nn import logsumexp
from lamina.scipy._bessel_jn import bessel_jn
from lamina.scipy._faddeeva import erfcx_complex, wofz
from lamina.scipy._owens_t import owens_t
from lamina.scipy._spherical_harmonics import sph_harm_y
from lamina.scipy._trig_integrals import fresnel, sici

Array = Any
ArrayLike = Any

__all__ = [
    "bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn",
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn",
    "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1",
    "hyp2f1", "i0", "i0e", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit",
    "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma", "rel_entr",
    "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py", "xlogy", "zeta",
]


def _real(fun: str, *args: ArrayLike) -> list[Array]:
    """``args`` promoted to one inexact dtype; complex inputs are refused."""
    out = _util.promote_args_inexact(f"lamina.scipy.special.{fun}", *args)
    if out and dtypes.is_complex(get_aval(out[0]).dtype):
        raise ValueError(f"lamina.scipy.special.{fun} does not support complex-valued inputs")
    return list(out)


def _k(x: Array, value: float) -> Any:
    return np.array(value, get_aval(x).dtype)


# --- gamma and beta -----------------------------------------------------------------
def gammaln(x: ArrayLike) -> Array:
    """``log|Gamma(x)|``."""
    (a,) = _real("gammaln", x)
    return lax.lgamma(a)


loggamma = gammaln


def gammasgn(x: ArrayLike) -> Array:
    """The sign of ``Gamma(x)``: NaN at the poles (non-positive integers) and NaN."""
    (a,) = _real("gammasgn", x)
    floor_a = lax.floor(a)
    negative = jnp.less(a, 0)
    pole = jnp.logical_or(jnp.logical_and(negative, jnp.equal(a, floor_a)), jnp.isnan(a))
    odd = jnp.not_equal(jnp.remainder(floor_a, 2), 0)
    minus = jnp.logical_or(jnp.logical_and(negative, odd),
                           jnp.logical_and(jnp.equal(a, 0), jnp.signbit(a)))
    return jnp.where(pole, _k(a, np.nan), jnp.where(minus, _k(a, -1), _k(a, 1)))


def gamma(x: ArrayLike) -> Array:
    """The gamma function (``gammasgn(x) * exp(gammaln(x))``)."""
    (a,) = _real("gamma", x)
    return jnp.multiply(gammasgn(a), lax.exp(lax.lgamma(a)))


def betaln(a: ArrayLike, b: ArrayLike) -> Array:
    """``log|B(a, b)|``."""
    x, y = _real("betaln", a, b)
    return jnp.subtract(jnp.add(lax.lgamma(x), lax.lgamma(y)), lax.lgamma(jnp.add(x, y)))


def beta(a: ArrayLike, b: ArrayLike) -> Array:
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``."""
    x, y = _real("beta", a, b)
    sign = jnp.multiply(jnp.multiply(gammasgn(x), gammasgn(y)), gammasgn(jnp.add(x, y)))
    return jnp.multiply(sign, jnp.exp(betaln(x, y)))


def betainc(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    p, q, v = _real("betainc", a, b, x)
    p, q, v = jnp.broadcast_arrays(p, q, v)
    return lax.betainc(p, q, v)


def digamma(x: ArrayLike) -> Array:
    """The logarithmic derivative of the gamma function."""
    (a,) = _real("digamma", x)
    return lax.digamma(a)


def polygamma(n: ArrayLike, x: ArrayLike) -> Array:
    """The ``n``-th derivative of ``digamma`` (``n`` of an integer dtype)."""
    n_dtype = get_aval(_util.operand("lamina.scipy.special.polygamma", n, "n")).dtype
    if not dtypes.issubdtype(n_dtype, np.integer):
        raise ValueError(f"lamina.scipy.special.polygamma: the argument n must have an integer "
                         f"dtype, got {n_dtype}")
    m, a = _real("polygamma", n, x)
    m, a = jnp.broadcast_arrays(m, a)
    return lax.polygamma(m, a)


def gammainc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function ``P(a, x)``."""
    s, v = _real("gammainc", a, x)
    return _igamma_broadcast(s, v)


def gammaincc(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function ``Q(a, x)``."""
    s, v = _real("gammaincc", a, x)
    return _igammac_broadcast(s, v)


# JAX binds igamma to the operands as given, broadcasting inside the one-op
# program it compiles; XLA's expansion of igamma then gives other last bits
# for a broadcast scalar than for a full array. So the broadcast runs inside
# one compiled program here too.
def _broadcast_then(op: Any) -> Any:
    def run(s: Array, v: Array) -> Array:
        return op(*jnp.broadcast_arrays(s, v))

    return tc_api.compiled_when_eager(run)


_igamma_broadcast = _broadcast_then(lax.igamma)
_igammac_broadcast = _broadcast_then(lax.igammac)


def multigammaln(a: ArrayLike, d: int) -> Array:
    """``log`` of the multivariate gamma function of dimension ``d``."""
    dim = _util.concrete_int("lamina.scipy.special.multigammaln", d, "d")
    if dim < 1:
        raise ValueError(f"lamina.scipy.special.multigammaln: d must be >= 1, got {dim}")
    (x,) = _real("multigammaln", a)
    constant = 0.25 * dim * (dim - 1) * math.log(math.pi)
    shifts = jnp.divide(jnp.arange(dim, dtype=get_aval(x).dtype), 2)
    terms = lax.lgamma(jnp.subtract(jnp.expand_dims(x, -1), shifts))
    return jnp.add(jnp.sum(terms, axis=-1), _k(x, constant))


def factorial(n: ArrayLike, exact: bool = False) -> Array:
    """``n!`` as ``Gamma(n + 1)`` (0 for negative ``n``); ``exact=True`` is not
    available (the result does not fit an integer dtype beyond n = 20)."""
    if exact:
        raise ValueError("lamina.scipy.special.factorial: exact=True is not supported; "
                         "use exact=False for the floating-point value")
    (x,) = _real("factorial", n)
    return jnp.where(jnp.less(x, 0), _k(x, 0), jnp.exp(lax.lgamma(jnp.add(x, 1))))


def comb(N: ArrayLike, k: ArrayLike, *, exact: bool = False,  # noqa: N803
         repetition: bool = False) -> Array:
    """The number of ways to choose ``k`` of ``N`` things (0 outside ``0 <= k <= N``)."""
    if exact:
        raise ValueError("lamina.scipy.special.comb: exact=True is not supported")
    n, kk = _real("comb", N, k)
    if repetition:
        return jnp.where(jnp.logical_and(jnp.equal(kk, 0), jnp.greater_equal(n, 0)),
                         _k(n, 1), comb(jnp.subtract(jnp.add(n, kk), 1), kk))
    ok = jnp.logical_and(jnp.logical_and(jnp.less_equal(kk, n), jnp.greater_equal(n, 0)),
                         jnp.greater_equal(kk, 0))
    safe_n = jnp.where(ok, n, _k(n, 0))
    safe_k = jnp.where(ok, kk, _k(n, 0))
    log_c = jnp.subtract(jnp.subtract(lax.lgamma(jnp.add(safe_n, 1)),
                                      lax.lgamma(jnp.add(safe_k, 1))),
                         lax.lgamma(jnp.add(jnp.subtract(safe_n, safe_k), 1)))
    return jnp.where(ok, jnp.exp(log_c), _k(n, 0))


def poch(z: ArrayLike, m: ArrayLike) -> Array:
    """The rising factorial ``Gamma(z + m) / Gamma(z)``."""
    x, y = _real("poch", z, m)
    s = jnp.add(x, y)
    sign = jnp.multiply(gammasgn(s), gammasgn(x))
    value = jnp.multiply(sign, jnp.exp(jnp.subtract(lax.lgamma(s), lax.lgamma(x))))
    return jnp.where(jnp.equal(y, 0), _k(x, 1), value)


@functools.lru_cache(maxsize=16)
def _bernoulli_numbers(n: int) -> tuple[float, ...]:
    """B_0..B_n exactly (the Akiyama-Tanigawa algorithm on fractions), with
    SciPy's convention B_1 = -1/2, rounded to floats once."""
    row: list[fractions.Fraction] = []
    out: list[fractions.Fraction] = []
    for m in range(n + 1):
        row.append(fractions.Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        out.append(row[0])
    if n >= 1:
        out[1] = -out[1]
    values = []
    for f in out:
        try:
            values.append(float(f))
        except OverflowError:
            values.append(math.inf if f > 0 else -math.inf)
    return tuple(values)


def bernoulli(n: int) -> Array:
    """The Bernoulli numbers B_0 .. B_n (``n`` a non-negative Python int), with
    B_1 = -1/2 as in SciPy."""
    count = _util.concrete_int("lamina.scipy.special.bernoulli", n, "n")
    if count < 0:
        raise ValueError(f"lamina.scipy.special.bernoulli: n must be a non-negative integer, "
                         f"got {count}")
    return jnp.asarray(np.array(_bernoulli_numbers(count), dtypes.default_float_dtype()))


# --- error function and the normal distribution ----------------------------------------
def erf(x: ArrayLike) -> Array:
    """The error function."""
    (a,) = _real("erf", x)
    return lax.erf(a)


def erfc(x: ArrayLike) -> Array:
    """The complementary error function ``1 - erf(x)``."""
    (a,) = _real("erfc", x)
    return lax.erfc(a)


def erfinv(x: ArrayLike) -> Array:
    """The inverse of ``erf`` on (-1, 1)."""
    (a,) = _real("erfinv", x)
    return lax.erf_inv(a)


def _ndtr(x: Array) -> Array:
    half_sqrt2 = _k(x, 0.5 * math.sqrt(2.0))
    w = jnp.multiply(x, half_sqrt2)
    z = jnp.abs(w)
    # 1 + erf near 0; erfc in the tails keeps the small side accurate.
    y = jnp.where(jnp.less(z, half_sqrt2), jnp.add(_k(x, 1), lax.erf(w)),
                  jnp.where(jnp.greater(w, 0), jnp.subtract(_k(x, 2), lax.erfc(z)),
                            lax.erfc(z)))
    return jnp.multiply(_k(x, 0.5), y)


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF."""
    (a,) = _real("ndtr", x)
    return _ndtr(a)


# Cephes' rational approximations of the normal quantile (ndtri.c).
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2,
             -8.57456785154685413611e-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)


def _horner(coefficients: tuple[float, ...], x: Array) -> Array:
    # jnp.polyval with the coefficients in x's dtype, as JAX's ndtri evaluates
    # them: eagerly each polynomial is its own compiled program (JAX's bits).
    return jnp.polyval(np.asarray(coefficients, jnp.result_type(x)), x)


def ndtri(p: ArrayLike) -> Array:
    """The standard normal quantile (inverse of ``ndtr``): -inf at 0, inf at 1,
    NaN outside [0, 1]."""
    (q,) = _real("ndtri", p)
    e2 = math.exp(-2.0)
    # Work with the smaller tail: q' = min(q, 1 - q) (the formula is odd about 1/2).
    upper = jnp.greater(q, _k(q, -math.expm1(-2.0)))
    tail = jnp.where(upper, jnp.subtract(_k(q, 1), q), q)
    # q' == 0 would take log(0): compute at 1/2 instead (those results become -inf/inf below)
    tail = jnp.where(jnp.equal(tail, 0), _k(q, 0.5), tail)
    # Centre: x / sqrt(2 pi) = w + w^3 P0(w^2) / Q0(w^2), w = q' - 1/2.
    w = jnp.subtract(tail, _k(q, 0.5))
    ww = jnp.square(w)
    centre = jnp.add(w, jnp.multiply(jnp.multiply(w, ww),
                                     jnp.divide(_horner(_NDTRI_P0, ww), _horner(_NDTRI_Q0, ww))))
    centre = jnp.multiply(centre, _k(q, -math.sqrt(2.0 * math.pi)))
    # Tails: x = z - log(z)/z - P(1/z) / (z Q(1/z)), z = sqrt(-2 log q').
    z = jnp.sqrt(jnp.multiply(_k(q, -2.0), jnp.log(tail)))
    inv_z = jnp.divide(_k(q, 1), z)
    lead = jnp.subtract(z, jnp.divide(jnp.log(z), z))
    far = jnp.divide(jnp.divide(_horner(_NDTRI_P2, inv_z), _horner(_NDTRI_Q2, inv_z)), z)
    near = jnp.divide(jnp.divide(_horner(_NDTRI_P1, inv_z), _horner(_NDTRI_Q1, inv_z)), z)
    tails = jnp.subtract(lead, jnp.where(jnp.greater_equal(z, 8.0), far, near))
    x = jnp.where(jnp.greater(tail, _k(q, e2)), centre, tails)
    x = jnp.where(jnp.greater(q, _k(q, 1.0 - e2)), x, jnp.negative(x))
    x = jnp.where(jnp.equal(q, 0), _k(q, -np.inf), jnp.where(jnp.equal(q, 1), _k(q, np.inf), x))
    outside = jnp.logical_or(jnp.logical_or(jnp.less(q, 0), jnp.greater(q, 1)), jnp.isnan(q))
    return jnp.where(outside, _k(q, np.nan), x)


def _norm_logpdf(x: Array) -> Array:
    return jnp.subtract(jnp.multiply(_k(x, -0.5), jnp.square(x)),
                        _k(x, 0.5 * math.log(2.0 * math.pi)))


def _log_ndtr_series(x: Array, order: int) -> Array:
    """The asymptotic series of log Phi(x) for x << -1: log of
    phi(x)/(-x) * (1 + sum_n (-1)^n (2n-1)!! / x^(2n))."""
    x2 = jnp.square(x)
    total = jnp.ones_like(x)
    power = x2
    double_factorial = 1
    for n in range(1, order + 1):
        double_factorial *= 2 * n - 1
        term = jnp.divide(_k(x, float(double_factorial)), power)
        total = jnp.subtract(total, term) if n % 2 else jnp.add(total, term)
        power = jnp.multiply(power, x2)
    log_scale = jnp.subtract(jnp.subtract(jnp.multiply(_k(x, -0.5), x2), jnp.log(jnp.negative(x))),
                             _k(x, 0.5 * math.log(2.0 * math.pi)))
    return jnp.add(log_scale, jnp.log(total))


def _log_ndtr_impl(x: Array, series_order: int) -> Array:
    wide = get_aval(x).dtype == np.float64
    lower, upper = (-20.0, 8.0) if wide else (-10.0, 5.0)
    above = jnp.greater(x, upper)
    # one ndtr evaluation: at -x above the upper bound (log(1-e) ~ -e), else at
    # max(x, lower) (the clamp keeps the unused branch finite)
    arg = jnp.where(above, jnp.negative(x), jnp.maximum(x, _k(x, lower)))
    phi = _ndtr(arg)
    series = _log_ndtr_series(jnp.minimum(x, _k(x, lower)), series_order)
    return jnp.where(above, jnp.negative(phi),
                     jnp.where(jnp.greater(x, lower), jnp.log(phi), series))


@functools.lru_cache(maxsize=32)
def _log_ndtr_of_order(series_order: int) -> Any:
    """log_ndtr for one (static) series order, as a custom-JVP function: the
    derivative is phi(x) / Phi(x) = exp(log phi(x) - log_ndtr(x)), finite in
    both tails. (The order is closed over, not passed as an argument.)"""
    fun = custom_jvp(lambda x: _log_ndtr_impl(x, series_order))

    def jvp(primals: Any, tangents: Any) -> tuple[Array, Array]:
        (x,), (t,) = primals, tangents
        ans = fun(x)
        return ans, jnp.multiply(t, jnp.exp(jnp.subtract(_norm_logpdf(x), ans)))

    fun.defjvp(jvp)
    return fun


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """``log(ndtr(x))``, accurate far into both tails (an asymptotic series of
    ``series_order`` terms below -20, -10 in float32)."""
    order = _util.concrete_int("lamina.scipy.special.log_ndtr", series_order, "series_order")
    if order < 0 or order > 30:
        raise ValueError(f"lamina.scipy.special.log_ndtr: series_order must be in [0, 30], "
                         f"got {order}")
    (a,) = _real("log_ndtr", x)
    if get_aval(a).dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        a32 = lax.convert_element_type(a, np.float32)
        return lax.convert_element_type(_log_ndtr_of_order(order)(a32), get_aval(a).dtype)
    return _log_ndtr_of_order(order)(a)


# --- logistic -----------------------------------------------------------------------
def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    (a,) = _real("expit", x)
    return lax.logistic(a)


def _logit(x: Array) -> Array:
    return jnp.log(jnp.divide(x, jnp.subtract(_k(x, 1), x)))


_logit_cj = custom_jvp(_logit)
_logit_cj.defjvps(lambda g, ans, x: jnp.divide(g, jnp.multiply(x, jnp.subtract(_k(x, 1), x))))


def logit(x: ArrayLike) -> Array:
    """``log(x / (1 - x))``, the inverse of ``expit``."""
    (a,) = _real("logit", x)
    return _logit_cj(a)


def softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as SciPy's)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x: ArrayLike, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default, as SciPy's)."""
    return _nn.log_softmax(x, axis=axis)


# --- entropies ------------------------------------------------------------------------
def _xlogy(x: Array, y: Array) -> Array:
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log(y)), jnp.zeros_like(x))


_xlogy_cj = custom_jvp(_xlogy)


@_xlogy_cj.defjvp
def _xlogy_jvp(primals: Any, tangents: Any) -> tuple[Array, Array]:
    (x, y), (dx, dy) = primals, tangents
    out = _xlogy_cj(x, y)
    return out, jnp.add(jnp.multiply(dx, jnp.log(y)), jnp.divide(jnp.multiply(dy, x), y))


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, 0 where ``x == 0`` (unless ``y`` is NaN), with a derivative
    defined there."""
    a, b = _real("xlogy", x, y)
    a, b = jnp.broadcast_arrays(a, b)
    return _xlogy_cj(a, b)


def _xlog1py(x: Array, y: Array) -> Array:
    keep = jnp.logical_or(jnp.not_equal(x, 0), jnp.isnan(y))
    return jnp.where(keep, jnp.multiply(x, jnp.log1p(y)), jnp.zeros_like(x))


_xlog1py_cj = custom_jvp(_xlog1py)


@_xlog1py_cj.defjvp
def _xlog1py_jvp(primals: Any, tangents: Any) -> tuple[Array, Array]:
    (x, y), (dx, dy) = primals, tangents
    out = _xlog1py_cj(x, y)
    return out, jnp.add(jnp.multiply(dx, jnp.log1p(y)),
                        jnp.divide(jnp.multiply(dy, x), jnp.add(y, 1)))


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, 0 where ``x == 0`` (unless ``y`` is NaN)."""
    a, b = _real("xlog1py", x, y)
    a, b = jnp.broadcast_arrays(a, b)
    return _xlog1py_cj(a, b)


def _xlogx(x: Array) -> Array:
    return _xlogy_cj(x, x)


_xlogx_cj = custom_jvp(_xlogx)
_xlogx_cj.defjvps(lambda g, ans, x: jnp.multiply(g, jnp.add(jnp.log(x), 1)))


def entr(x: ArrayLike) -> Array:
    """``-x log x`` (0 at 0, -inf for negative ``x``)."""
    (a,) = _real("entr", x)
    return jnp.where(jnp.less(a, 0), _k(a, -np.inf), jnp.negative(_xlogx_cj(a)))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """``p log(p / q)`` for p, q > 0; 0 for p == 0 <= q; inf otherwise."""
    a, b = _real("rel_entr", p, q)
    a, b = jnp.broadcast_arrays(a, b)
    both = jnp.logical_and(jnp.greater(a, 0), jnp.greater(b, 0))
    zero_p = jnp.logical_and(jnp.equal(a, 0), jnp.greater_equal(b, 0))
    safe_a = jnp.where(both, a, _k(a, 1))
    safe_b = jnp.where(both, b, _k(a, 1))
    value = jnp.subtract(_xlogx_cj(safe_a), _xlogy_cj(safe_a, safe_b))
    return jnp.where(both, value, jnp.where(zero_p, _k(a, 0), _k(a, np.inf)))


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """``p log(p / q) - p + q`` (``q`` at p == 0 <= q; inf otherwise)."""
    a, b = _real("kl_div", p, q)
    return jnp.add(jnp.subtract(rel_entr(a, b), a), b)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log x`` at lmbda 0)."""
    a, lam = _real("boxcox", x, lmbda)
    zero = jnp.equal(lam, 0)
    safe = jnp.where(zero, jnp.ones_like(lam), lam)
    log_a = jnp.log(a)
    return jnp.where(zero, log_a, jnp.divide(jnp.expm1(jnp.multiply(safe, log_a)), safe))


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform of ``1 + x``."""
    a, lam = _real("boxcox1p", x, lmbda)
    zero = jnp.equal(lam, 0)
    safe = jnp.where(zero, jnp.ones_like(lam), lam)
    log_a = jnp.log1p(a)
    return jnp.where(zero, log_a, jnp.divide(jnp.expm1(jnp.multiply(safe, log_a)), safe))


# --- Bessel and zeta --------------------------------------------------------------------
def i0e(x: ArrayLike) -> Array:
    """``exp(-|x|) I0(x)``."""
    (a,) = _real("i0e", x)
    return lax.bessel_i0e(a)


def i0(x: ArrayLike) -> Array:
    """The modified Bessel function of order 0."""
    (a,) = _real("i0", x)
    return jnp.multiply(jnp.exp(jnp.abs(a)), lax.bessel_i0e(a))


def i1e(x: ArrayLike) -> Array:
    """``exp(-|x|) I1(x)``."""
    (a,) = _real("i1e", x)
    return lax.bessel_i1e(a)


def i1(x: ArrayLike) -> Array:
    """The modified Bessel function of order 1."""
    (a,) = _real("i1", x)
    return jnp.multiply(jnp.exp(jnp.abs(a)), lax.bessel_i1e(a))


def zeta(x: ArrayLike, q: ArrayLike | None = None) -> Array:
    """The Hurwitz zeta function ``sum_n (n + q) ** -x`` (``q`` is required:
    the Riemann zeta function is ``zeta(x, 1)``)."""
    if q is None:
        raise ValueError("lamina.scipy.special.zeta: q is required (the Riemann zeta function "
                         "is zeta(x, 1.0))")
    a, b = _real("zeta", x, q)
    a, b = jnp.broadcast_arrays(a, b)
    return lax.zeta(a, b)


# --- exponential integrals ---------------------------------------------------------------
_EULER_GAMMA = 0.57721566490153286061


def _where_safe(pred: Array, x: Array, safe: float) -> Array:
    """``x`` where ``pred`` holds, else ``safe``: keeps a branch's arithmetic
    (and its derivative) finite on the elements another branch answers."""
    return jnp.where(pred, x, _k(x, safe))


def _e1_series(x: Array) -> Array:
    """``E1`` for ``0 < x <= 1``: ``-gamma - log x - sum (-x)^k / (k k!)``."""
    term, total = jnp.ones_like(x), jnp.zeros_like(x)
    for k in range(1, 26):
        term = term * -x / k
        total = total + term / k
    return -_k(x, _EULER_GAMMA) - jnp.log(x) - total


def _en_continued_fraction(n: Array, x: Array, depth: int = 60) -> Array:
    """``E_n(x)`` for ``x > 1``: ``exp(-x)`` times the continued fraction
    ``1 / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...)))``,
    evaluated from its tail."""
    tail = jnp.zeros_like(x)
    for i in range(depth, 0, -1):
        tail = -i * (n + (i - 1)) / (x + n + 2 * i + tail)
    return jnp.exp(-x) / (x + n + tail)


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E1(x) = integral_x^inf exp(-t) / t dt``
    (``x >= 0``; NaN below 0, ``inf`` at 0)."""
    (a,) = _real("exp1", x)
    return _exp1_jit(a)


def _exp1(x: Array) -> Array:
    small = x <= 1
    series = _e1_series(_where_safe(small & (x > 0), x, 0.5))
    fraction = _en_continued_fraction(jnp.ones_like(x), _where_safe(~small, x, 2.0))
    out = jnp.where(small, series, fraction)
    out = jnp.where(x == 0, _k(x, np.inf), out)
    return jnp.where((x < 0) | jnp.isnan(x), _k(x, np.nan), out)


def _ei_series(x: Array) -> Array:
    """``Ei`` for ``0 < x <= 20``: ``gamma + log x + sum x^k / (k k!)``."""
    term, total = jnp.ones_like(x), jnp.zeros_like(x)
    for k in range(1, 91):
        term = term * x / k
        total = total + term / k
    return _k(x, _EULER_GAMMA) + jnp.log(x) + total


def _ei_asymptotic(x: Array) -> Array:
    """``Ei`` for ``x > 20``: ``exp(x) / x * sum k! / x^k``."""
    term, total = jnp.ones_like(x), jnp.ones_like(x)
    for k in range(1, 21):
        term = term * k / x
        total = total + term
    return jnp.exp(x) / x * total


def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x)`` (the principal value
    ``-integral_{-x}^inf exp(-t) / t dt``); ``Ei(x) = -E1(-x)`` for ``x < 0``."""
    (a,) = _real("expi", x)
    return _expi_jit(a)


def _expi(x: Array) -> Array:
    negative = x < 0
    series_region = (x > 0) & (x <= 20)
    from_e1 = -_exp1(_where_safe(negative, -x, 1.0))
    series = _ei_series(_where_safe(series_region, x, 1.0))
    asymptotic = _ei_asymptotic(_where_safe(x > 20, x, 30.0))
    out = jnp.where(negative, from_e1, jnp.where(series_region, series, asymptotic))
    out = jnp.where(x == np.inf, _k(x, np.inf), out)
    out = jnp.where(jnp.isnan(x), x, out)
    return jnp.where(x == 0, _k(x, -np.inf), out)


def _en_series(n: Array, x: Array) -> Array:
    """``E_n(x)`` for ``0 < x <= 1`` and integer ``n >= 1``: the series with
    its ``k = n - 1`` term replaced by the digamma part."""
    nm1 = n - 1
    total = jnp.zeros_like(x)
    power = jnp.ones_like(x)  # (-x)^k / k!
    for k in range(0, 40):
        if k:
            power = power * -x / k
        total = total - jnp.where(nm1 == k, _k(x, 0.0), power / _where_safe(nm1 != k, k - nm1,
                                                                              1.0))
        total = total + jnp.where(nm1 == k, power * (-jnp.log(x) + lax.digamma(n)), _k(x, 0.0))
    return total


def expn(n: ArrayLike, x: ArrayLike) -> Array:
    """The generalized exponential integral ``E_n(x) = integral_1^inf
    exp(-x t) / t^n dt`` for integer ``n >= 0`` and ``x >= 0`` (NaN elsewhere)."""
    a, b = _real("expn", n, x)
    a, b = jnp.broadcast_arrays(a, b)
    return _expn_jit(a, b)


def _expn(n: Array, x: Array) -> Array:
    bad = (n < 0) | (x < 0) | (n != jnp.floor(n)) | jnp.isnan(x)
    small = x <= 1
    n_safe = _where_safe(n >= 1, n, 1.0)
    series = _en_series(n_safe, _where_safe(small & (x > 0), x, 0.5))
    fraction = _en_continued_fraction(n_safe, _where_safe(~small, x, 2.0))
    out = jnp.where(small, series, fraction)
    out = jnp.where(x == 0, jnp.where(n > 1, 1 / _where_safe(n > 1, n - 1, 1.0),
                                      _k(x, np.inf)), out)
    out = jnp.where(n == 0, jnp.exp(-x) / x, out)
    return jnp.where(bad, _k(x, np.nan), out)


# --- the dilogarithm -------------------------------------------------------------------------
_PI2_6 = math.pi ** 2 / 6


def _li2_series(z: Array) -> Array:
    """``Li2(z) = sum z^k / k^2`` for ``|z| <= 1/2``."""
    power, total = jnp.ones_like(z), jnp.zeros_like(z)
    for k in range(1, 48):
        power = power * z
        total = total + power / (k * k)
    return total


def _li2_unit(w: Array) -> Array:
    """``Li2(w)`` for ``0 <= w <= 1``: the series, or Euler's reflection
    ``Li2(w) = pi^2/6 - log w log(1 - w) - Li2(1 - w)`` above 1/2."""
    low = w <= 0.5
    direct = _li2_series(_where_safe(low, w, 0.0))
    w_high = _where_safe(~low, w, 0.75)
    reflected = (_k(w, _PI2_6) - jnp.log(w_high) * jnp.log1p(-w_high)
                 - _li2_series(1 - w_high))
    reflected = jnp.where(w == 1, _k(w, _PI2_6), reflected)
    return jnp.where(low, direct, reflected)


def spence(x: ArrayLike) -> Array:
    """SciPy's dilogarithm ``spence(x) = integral_1^x log t / (1 - t) dt =
    Li2(1 - x)`` for ``x >= 0`` (NaN below 0)."""
    (a,) = _real("spence", x)
    return _spence_jit(a)


def _spence(x: Array) -> Array:
    z = 1 - x
    # z in [0, 1]: Li2 directly; z < 0 (x > 1): Landen's identity
    # Li2(z) = -Li2(z / (z - 1)) - log(1 - z)^2 / 2, with z / (z - 1) in (0, 1).
    direct = _li2_unit(_where_safe((z >= 0) & (z <= 1), z, 0.0))
    z_neg = _where_safe(z < 0, z, -1.0)
    landen = -_li2_unit(z_neg / (z_neg - 1)) - 0.5 * jnp.square(jnp.log1p(-z_neg))
    out = jnp.where(z >= 0, direct, landen)
    return jnp.where((x < 0) | (x == np.inf) | jnp.isnan(x), _k(x, np.nan), out)


# --- scaled complementary error function and Dawson's integral ----------------------------
_INV_SQRT_PI = 1 / math.sqrt(math.pi)


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x^2) erfc(x)``, finite
    for large ``x`` (about ``1 / (x sqrt(pi))``); of a complex ``x`` it is the
    Faddeeva function ``wofz(i x)``."""
    (a,) = _util.promote_args_inexact("lamina.scipy.special.erfcx", x)
    if dtypes.is_complex(get_aval(a).dtype):
        return erfcx_complex(a)
    return _erfcx_jit(a)


def _erfcx(x: Array) -> Array:
    large = x >= 2
    x_small = _where_safe(~large, x, 0.0)
    direct = jnp.exp(jnp.square(x_small)) * lax.erfc(x_small)
    # Laplace's continued fraction 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))).
    x_large = _where_safe(large, x, 3.0)
    tail = jnp.zeros_like(x)
    for k in range(80, 0, -1):
        tail = (k / 2) / (x_large + tail)
    fraction = _k(x, _INV_SQRT_PI) / (x_large + tail)
    fraction = jnp.where(x == np.inf, _k(x, 0.0), fraction)
    return jnp.where(large, fraction, jnp.where(jnp.isnan(x), x, direct))


_RYBICKI_H = 0.4


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``exp(-x^2) integral_0^x exp(t^2) dt`` (Rybicki's
    exponentially converging sum; relative error about 2e-7)."""
    (a,) = _real("dawsn", x)
    return _dawsn_jit(a)


def _dawsn(x: Array) -> Array:
    ax = jnp.abs(x)
    small = ax < 0.2
    x2 = jnp.square(x)
    series = x * (1 - 2 / 3 * x2 * (1 - 2 / 5 * x2 * (1 - 2 / 7 * x2)))
    # Rybicki: the nearest even multiple n0 h of |x|, then a sum over odd offsets.
    xa = _where_safe(~small & (ax < np.inf), ax, 1.0)
    n0 = 2 * jnp.round(0.5 * xa / _RYBICKI_H)
    xp = xa - n0 * _RYBICKI_H
    e1 = jnp.exp(2 * xp * _RYBICKI_H)
    e2 = jnp.square(e1)
    d1, d2 = n0 + 1, n0 - 1
    total = jnp.zeros_like(x)
    for i in range(6):
        c = math.exp(-((2 * i + 1) * _RYBICKI_H) ** 2)
        total = total + c * (e1 / d1 + 1 / (d2 * e1))
        d1, d2, e1 = d1 + 2, d2 - 2, e1 * e2
    far = _k(x, _INV_SQRT_PI) * jnp.sign(x) * jnp.exp(-jnp.square(xp)) * total
    far = jnp.where(ax == np.inf, _k(x, 0.0), far)
    return jnp.where(small | jnp.isnan(x), series, far)


# --- confluent and Gauss hypergeometric functions -------------------------------------------
def _hyp_series(terms: int, ratio: Any, like: Array) -> Array:
    """``sum_k t_k`` with ``t_0 = 1`` and ``t_k = t_{k-1} * ratio(k - 1)``
    (a loop of fixed length: a scan, so reverse mode differentiates it)."""
    def body(k: Any, state: tuple[Array, Array]) -> tuple[Array, Array]:
        term = state[0] * ratio(lax.convert_element_type(k, get_aval(like).dtype))
        return term, state[1] + term

    ones = jnp.ones_like(like)
    return lax_control.fori_loop(0, terms, body, (ones, ones))[1]


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """Kummer's confluent hypergeometric function ``1F1(a; b; x)`` (its series;
    for ``x < 0`` Kummer's transformation ``exp(x) 1F1(b - a; b; -x)``)."""
    a_, b_, x_ = _real("hyp1f1", a, b, x)
    a_, b_, x_ = jnp.broadcast_arrays(a_, b_, x_)
    return _hyp1f1_jit(a_, b_, x_)


def _hyp1f1(a: Array, b: Array, x: Array) -> Array:
    negative = x < 0
    a2 = jnp.where(negative, b - a, a)
    z = jnp.abs(x)
    total = _hyp_series(200, lambda k: (a2 + k) / (b + k) * z / (k + 1), x)
    return jnp.where(negative, jnp.exp(x) * total, total)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Array:
    """The Gauss hypergeometric function ``2F1(a, b; c; x)`` for ``x < 1``
    (its series; for ``x < 0`` Pfaff's transformation
    ``(1 - x)^-a 2F1(a, c - b; c; x / (x - 1))``), NaN for ``x > 1``."""
    a_, b_, c_, x_ = _real("hyp2f1", a, b, c, x)
    a_, b_, c_, x_ = jnp.broadcast_arrays(a_, b_, c_, x_)
    return _hyp2f1_jit(a_, b_, c_, x_)


def _hyp2f1(a: Array, b: Array, c: Array, x: Array) -> Array:
    negative = x < 0
    b2 = jnp.where(negative, c - b, b)
    z = jnp.where(negative, x / (x - 1), x)
    z = _where_safe(z < 1, z, 0.0)
    total = _hyp_series(400, lambda k: (a + k) * (b2 + k) / ((c + k) * (k + 1)) * z, x)
    out = jnp.where(negative, jnp.power(1 - x, -a) * total, total)
    at_one = jnp.exp(lax.lgamma(c) + lax.lgamma(c - a - b) - lax.lgamma(c - a)
                     - lax.lgamma(c - b))
    out = jnp.where(x == 1, jnp.where(c - a - b > 0, at_one, _k(x, np.inf)), out)
    return jnp.where(x > 1, _k(x, np.nan), out)


_exp1_jit = jit(_exp1)
_expi_jit = jit(_expi)
_expn_jit = jit(_expn)
_spence_jit = jit(_spence)
_erfcx_jit = jit(_erfcx)
_dawsn_jit = jit(_dawsn)
_hyp1f1_jit = jit(_hyp1f1)
_hyp2f1_jit = jit(_hyp2f1)
