"""Special-function primitives: the incomplete gamma and beta functions, the
exponentially scaled Bessel functions of order 0 and 1, and Hurwitz's zeta.

``erf``, ``erfc``, ``erf_inv``, ``lgamma``, ``digamma`` and ``polygamma`` are
elementwise primitives of ``lax.elementwise`` (one StableHLO/CHLO op each) and
are re-exported here so that this module lists every special function.

All are elementwise over floating dtypes with JAX's broadcasting rules (equal
shapes, rank-0 operands, or size-1 dimensions), batch elementwise, and have
JAX's derivatives: ``igamma``/``igammac`` in both arguments (the shape
parameter through ``igamma_grad_a``), ``betainc`` in ``x``, ``zeta`` in ``q``,
the Bessel functions in ``x``. Lowering is in mlir-lowering
(``lax_rules.special``): CHLO ops where XLA has them (``zeta``,
``bessel_i1e``), otherwise series and continued fractions written in lax.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.base_primitives import full_like
from lamina_tracing_core.lax.common import FLOAT, ArrayLike, const
from lamina_tracing_core.lax.elementwise import (
    abs, add, digamma, erf, erf_inv, erfc, exp, gt, lgamma, log, log1p, mul, naryop,
    neg, polygamma, reciprocal, select, sign, sub, unop)
from lamina_tracing_core.lax.helpers import defjvp, defjvp2

Array = Any

__all__ = [
    "igamma_p", "igammac_p", "igamma_grad_a_p", "random_gamma_grad_p",
    "regularized_incomplete_beta_p", "bessel_i0e_p", "bessel_i1e_p", "zeta_p",
    "igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "betainc",
    "regularized_incomplete_beta", "bessel_i0e", "bessel_i1e", "zeta",
    "erf", "erfc", "erf_inv", "lgamma", "digamma", "polygamma",
]

# --- primitives -----------------------------------------------------------------
igamma_p = naryop("igamma", [FLOAT, FLOAT])
igammac_p = naryop("igammac", [FLOAT, FLOAT])
igamma_grad_a_p = naryop("igamma_grad_a", [FLOAT, FLOAT])
random_gamma_grad_p = naryop("random_gamma_grad", [FLOAT, FLOAT])
regularized_incomplete_beta_p = naryop("regularized_incomplete_beta", [FLOAT, FLOAT, FLOAT])
bessel_i0e_p = unop("bessel_i0e", FLOAT)
bessel_i1e_p = unop("bessel_i1e", FLOAT)
zeta_p = naryop("zeta", [FLOAT, FLOAT])


# --- user functions -------------------------------------------------------------
def igamma(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized lower incomplete gamma function P(a, x)."""
    return igamma_p.bind(a, x)


def igammac(a: ArrayLike, x: ArrayLike) -> Array:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return igammac_p.bind(a, x)


def igamma_grad_a(a: ArrayLike, x: ArrayLike) -> Array:
    """The derivative of ``igamma(a, x)`` with respect to ``a``."""
    return igamma_grad_a_p.bind(a, x)


def random_gamma_grad(a: ArrayLike, x: ArrayLike) -> Array:
    """The derivative of a ``Gamma(a, 1)`` sample ``x`` with respect to ``a``
    (implicit reparameterisation: ``-(dP/da) / (dP/dx)`` at ``x``)."""
    return random_gamma_grad_p.bind(a, x)


def regularized_incomplete_beta(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """The regularized incomplete beta function I_x(a, b)."""
    return regularized_incomplete_beta_p.bind(a, b, x)


betainc = regularized_incomplete_beta


def bessel_i0e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 0:
    ``exp(-|x|) * I0(x)``."""
    return bessel_i0e_p.bind(x)


def bessel_i1e(x: ArrayLike) -> Array:
    """The exponentially scaled modified Bessel function of order 1:
    ``exp(-|x|) * I1(x)``."""
    return bessel_i1e_p.bind(x)


def zeta(x: ArrayLike, q: ArrayLike) -> Array:
    """The Hurwitz zeta function: the sum over n >= 0 of ``(n + q) ** -x``."""
    return zeta_p.bind(x, q)


# --- derivatives ----------------------------------------------------------------
def _gamma_density(a: Any, x: Any) -> Any:
    """d/dx igamma(a, x) = x**(a-1) exp(-x) / Gamma(a)."""
    return exp(sub(mul(sub(a, const(a, 1)), log(x)), add(x, lgamma(a))))


defjvp(igamma_p,
       lambda g, a, x: mul(g, igamma_grad_a(a, x)),
       lambda g, a, x: mul(g, _gamma_density(a, x)))
defjvp(igammac_p,
       lambda g, a, x: neg(mul(g, igamma_grad_a(a, x))),
       lambda g, a, x: neg(mul(g, _gamma_density(a, x))))


def _no_derivative(what: str) -> Any:
    def rule(g: Any, *args: Any) -> Any:
        raise ValueError(what)
    return rule


def _betainc_jvp_x(g: Any, a: Any, b: Any, x: Any) -> Any:
    log_beta = sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))
    one = const(x, 1)
    log_density = sub(add(mul(sub(b, one), log1p(neg(x))), mul(sub(a, one), log(x))),
                      log_beta)
    return mul(g, exp(log_density))


defjvp(regularized_incomplete_beta_p,
       _no_derivative("betainc: the gradient with respect to a and b is not supported"),
       _no_derivative("betainc: the gradient with respect to a and b is not supported"),
       _betainc_jvp_x)

defjvp(zeta_p,
       _no_derivative("zeta: the gradient with respect to x is not supported"),
       lambda g, x, q: mul(g, neg(mul(x, zeta(add(x, const(x, 1)), q)))))

defjvp2(bessel_i0e_p, lambda g, ans, x: mul(g, sub(bessel_i1e(x), mul(sign(x), ans))))


def _bessel_i1e_jvp(g: Any, ans: Any, x: Any) -> Any:
    # d/dx i1e = i0e - i1e (sign(x) + 1/x); near 0 the limit is 1/2.
    tiny = const(x, float(np.finfo(get_aval(x).dtype).eps))
    not_tiny = gt(abs(x), tiny)
    safe_x = select(not_tiny, x, full_like(x, tiny))
    slope = sub(bessel_i0e(safe_x), mul(ans, add(sign(safe_x), reciprocal(safe_x))))
    return mul(g, select(not_tiny, slope, full_like(x, 0.5)))


defjvp2(bessel_i1e_p, _bessel_i1e_jvp)

# igamma_grad_a and random_gamma_grad have no derivative rules (as in JAX):
# differentiating them raises the usual "no JVP rule" error.
