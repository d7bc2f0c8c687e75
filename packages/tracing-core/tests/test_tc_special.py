"""The special-function primitives of ``lax.special``: abstract evaluation
(broadcasting, dtypes, errors), JVP rules against finite differences,
batching, and jaxpr round trips. Eager values come from SciPy reference
impls installed for this module (the compiled implementations are checked
against SciPy in lamina's test_scipy_special)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import scipy.special as sp
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.primitives import Primitive, impl_rules
from lamina_tracing_core.primitives import abstract_eval as _abstract_eval


def _d_gammainc_da(a: Any, x: Any) -> Any:
    h = 1e-6 * np.maximum(1.0, np.abs(a))
    return (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)


def _sample_grad(a: Any, x: Any) -> Any:
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    return -_d_gammainc_da(a, x) / density


_REFERENCES: dict[Primitive, Any] = {
    lx.igamma_p: sp.gammainc, lx.igammac_p: sp.gammaincc, lx.igamma_grad_a_p: _d_gammainc_da,
    lx.random_gamma_grad_p: _sample_grad, lx.regularized_incomplete_beta_p: sp.betainc,
    lx.bessel_i0e_p: sp.i0e, lx.bessel_i1e_p: sp.i1e, lx.zeta_p: sp.zeta,
}


@pytest.fixture(autouse=True, scope="module")
def _scipy_impls() -> Iterator[None]:
    saved = {p: impl_rules.get(p) for p in _REFERENCES}

    def make(fn: Any) -> Any:
        def impl(*args: Any, **params: Any) -> Any:
            arrays = [np.asarray(a) for a in args]
            dtype = arrays[0].dtype
            with np.errstate(all="ignore"):
                out = fn(*[a.astype(np.float64) for a in arrays])
            return np.asarray(out, dtype)
        return impl

    for prim, fn in _REFERENCES.items():
        impl_rules[prim] = make(fn)
    try:
        yield
    finally:
        for prim, old in saved.items():
            if old is None:
                impl_rules.pop(prim, None)
            else:
                impl_rules[prim] = old


F32 = np.dtype(np.float32)


def abstract_eval(prim: Primitive, *avals: ShapedArray) -> list[ShapedArray]:
    return _abstract_eval(prim, list(avals), {})


# --- abstract evaluation --------------------------------------------------------------
@pytest.mark.parametrize("prim", [lx.igamma_p, lx.igammac_p, lx.igamma_grad_a_p,
                                  lx.random_gamma_grad_p, lx.zeta_p], ids=lambda p: p.name)
def test_binary_abstract_eval(prim: Primitive) -> None:
    (out,) = abstract_eval(prim, ShapedArray((2, 3), F32), ShapedArray((), F32))
    assert (out.shape, out.dtype) == ((2, 3), F32)
    (out,) = abstract_eval(prim, ShapedArray((2, 1), F32), ShapedArray((2, 3), F32))
    assert out.shape == (2, 3)
    with pytest.raises(TypeError, match=prim.name):
        abstract_eval(prim, ShapedArray((2,), np.dtype(np.int32)), ShapedArray((2,), F32))
    with pytest.raises(TypeError, match=prim.name):
        abstract_eval(prim, ShapedArray((2,), F32), ShapedArray((2,), np.dtype(np.float64)))
    with pytest.raises(TypeError, match=prim.name):
        abstract_eval(prim, ShapedArray((2,), F32), ShapedArray((3,), F32))


def test_betainc_and_bessel_abstract_eval() -> None:
    (out,) = abstract_eval(lx.regularized_incomplete_beta_p, ShapedArray((4,), F32),
                           ShapedArray((), F32), ShapedArray((4,), F32))
    assert (out.shape, out.dtype) == ((4,), F32)
    for prim in (lx.bessel_i0e_p, lx.bessel_i1e_p):
        (out,) = abstract_eval(prim, ShapedArray((3, 2), np.dtype(np.float16)))
        assert (out.shape, out.dtype) == ((3, 2), np.dtype(np.float16))
        with pytest.raises(TypeError, match=prim.name):
            abstract_eval(prim, ShapedArray((3,), np.dtype(np.int32)))
    assert lx.betainc is lx.regularized_incomplete_beta


def test_special_names_in_jaxpr() -> None:
    def f(a: Any, x: Any) -> Any:
        return (lx.igamma(a, x), lx.igammac(a, x), lx.zeta(a, x), lx.bessel_i0e(x),
                lx.bessel_i1e(x), lx.betainc(a, a, x), lx.random_gamma_grad(a, x))

    text = str(api.make_jaxpr(f)(np.float32(2.0), np.float32(0.5)))
    for name in ("igamma", "igammac", "zeta", "bessel_i0e", "bessel_i1e",
                 "regularized_incomplete_beta", "random_gamma_grad"):
        assert f" {name}" in text, (name, text)


# --- values through the reference impls, jaxpr round trips and vmap ------------------------
A = np.array([0.5, 1.5, 3.0, 7.0], np.float32)
X = np.array([0.3, 2.0, 2.5, 9.0], np.float32)
U = np.array([0.1, 0.4, 0.7, 0.95], np.float32)

CASES = [
    ("igamma", lx.igamma, (A, X)),
    ("igammac", lx.igammac, (A, X)),
    ("igamma_grad_a", lx.igamma_grad_a, (A, X)),
    ("random_gamma_grad", lx.random_gamma_grad, (A, X)),
    ("betainc", lx.betainc, (A, X, U)),
    ("bessel_i0e", lx.bessel_i0e, (X,)),
    ("bessel_i1e", lx.bessel_i1e, (X,)),
    ("zeta", lx.zeta, (A + 1.5, X)),
]


@pytest.mark.parametrize("name,fn,args", CASES, ids=[c[0] for c in CASES])
def test_roundtrip_and_vmap(name: str, fn: Any, args: tuple[Any, ...]) -> None:
    check_jaxpr_roundtrip(fn, list(args))
    check_vmap(fn, list(args), [0] * len(args), rtol=1e-5)
    if len(args) > 1:  # one batched operand, the others shared
        check_vmap(fn, list(args), [0] + [None] * (len(args) - 1), rtol=1e-5)


# --- derivatives -----------------------------------------------------------------------
# (float32: without x64 the values are canonicalized to it)
A64 = np.array([0.7, 2.5, 4.0], np.float32)
X64 = np.array([0.4, 1.7, 6.0], np.float32)


def test_igamma_derivatives_in_both_arguments() -> None:
    check_grads(lx.igamma, [A64, X64], order=1, rtol=2e-3, atol=2e-5)
    check_grads(lx.igammac, [A64, X64], order=1, rtol=2e-3, atol=2e-5)


def test_igamma_derivative_formulas() -> None:
    ta, tx = np.ones_like(A64), np.zeros_like(X64)
    _, da = api.jvp(lx.igamma, (A64, X64), (ta, tx))
    a, x = A64.astype(np.float64), X64.astype(np.float64)
    assert_close(da, _d_gammainc_da(a, x).astype(np.float32), rtol=1e-5)
    _, dx = api.jvp(lx.igamma, (A64, X64), (tx, ta))
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    assert_close(dx, density.astype(np.float32), rtol=1e-5)
    _, dxc = api.jvp(lx.igammac, (A64, X64), (tx, ta))
    assert_close(dxc, -np.asarray(dx), rtol=1e-6)


def test_betainc_derivative_in_x_and_errors_for_a_b() -> None:
    b = np.array([1.5, 0.8, 3.0], np.float32)
    x = np.array([0.2, 0.5, 0.8], np.float32)
    check_grads(lambda x_: lx.betainc(A64, b, x_), [x], order=1, rtol=2e-3, atol=2e-5)
    with pytest.raises(ValueError, match="betainc"):
        api.grad(lambda a_: lx.betainc(a_, 2.0, 0.5))(1.5)
    with pytest.raises(ValueError, match="betainc"):
        api.grad(lambda b_: lx.betainc(1.5, b_, 0.5))(2.0)


def test_bessel_derivatives() -> None:
    x = np.array([-3.0, -0.4, 0.6, 2.0, 12.0], np.float32)
    check_grads(lx.bessel_i0e, [x], order=2, rtol=2e-3, atol=2e-5)
    check_grads(lx.bessel_i1e, [x], order=1, rtol=2e-3, atol=2e-5)
    # at 0 (and below eps) the slope of i1e is its limit 1/2
    zeros = np.zeros(2, np.float32)
    _, slope = api.jvp(lx.bessel_i1e, (zeros,), (np.ones(2, np.float32),))
    assert_close(slope, np.full(2, 0.5, np.float32))


def test_zeta_derivative_in_q_only() -> None:
    check_grads(lambda q: lx.zeta(np.full(3, 3.5, np.float32), q),
                [np.array([0.5, 1.0, 4.0], np.float32)], order=1, rtol=2e-3, atol=2e-5)
    with pytest.raises(ValueError, match="zeta"):
        api.grad(lambda s: lx.zeta(s, 2.0))(3.0)


def test_gamma_derivative_primitives_have_no_jvp() -> None:
    # as in JAX: igamma_grad_a and random_gamma_grad are not differentiable
    for fn in (lx.igamma_grad_a, lx.random_gamma_grad):
        with pytest.raises(Exception, match=r"igamma_grad_a|random_gamma_grad"):
            api.grad(lambda a_, f=fn: f(a_, 1.0))(2.0)
