"""while_loop and fori_loop: values, errors, forward-mode autodiff (and the
reverse-mode error), vmap with batched predicates, DCE and debug info."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import core, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.control_flow import fori_loop, scan_p, while_loop, while_p
from lamina_tracing_core.effects import NamedAxisEffect
from lamina_tracing_core.jaxpr import ClosedJaxpr, validate_jaxpr_debug_info

f32 = np.float32

WHILE_GRAD_ERROR = ("Reverse-mode differentiation does not work for lax.while_loop or "
                    "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or "
                    "using fori_loop with static start/stop.")


def _eqns(jaxpr: Any, prim: Any) -> list[Any]:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return [e for e in inner.eqns if e.primitive is prim]


def collatz_steps(n: Any) -> Any:
    def cond_fun(c: Any) -> Any:
        return c[0] != 1

    def body_fun(c: Any) -> Any:
        x, k = c
        even = lax.rem(x, 2) == 0
        return lax.select(even, x // 2, 3 * x + 1), k + 1

    return while_loop(cond_fun, body_fun, (n, np.int32(0)))[1]


def py_collatz(n: int) -> int:
    k = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


def grow(x: Any, limit: Any) -> Any:
    """Doubles x (times sin-ish factor) until it passes limit."""
    return while_loop(lambda c: c[0] < limit, lambda c: (c[0] * 2.0, c[1] * lax.cos(c[1])),
                      (x, x))


# --- values ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 6, 7, 27])
def test_while_matches_python(n: int) -> None:
    assert int(collatz_steps(np.int32(n))) == py_collatz(n)


def test_fori_loop_static_is_scan_and_matches_python() -> None:
    def f(x: Any) -> Any:
        return fori_loop(1, 5, lambda i, c: c * 2.0 + i, x)

    want = 0.5
    for i in range(1, 5):
        want = want * 2.0 + i
    np.testing.assert_allclose(f(f32(0.5)), want)
    jaxpr = tc.make_jaxpr(f)(f32(0.5))
    (eqn,) = _eqns(jaxpr, scan_p)
    dbg = eqn.params["jaxpr"].jaxpr.debug_info
    assert dbg.traced_for == "fori_loop"
    assert dbg.arg_names == ("i", "c")
    assert dbg.result_paths == ("result[0][0]", "result[0][1]")
    assert not _eqns(jaxpr, while_p)


def test_fori_loop_dynamic_bounds_is_a_while() -> None:
    def f(n: Any, x: Any) -> Any:
        return fori_loop(0, n, lambda i, c: c + i, x)

    assert float(f(np.int32(4), f32(1.0))) == 7.0
    jaxpr = tc.make_jaxpr(f)(np.int32(4), f32(1.0))
    (eqn,) = _eqns(jaxpr, while_p)
    dbg = eqn.params["body_jaxpr"].jaxpr.debug_info
    assert dbg.traced_for == "fori_loop"
    assert dbg.arg_names == ("i", None, "c")
    with pytest.raises(ValueError, match="Can only use `unroll`"):
        tc.make_jaxpr(lambda n: fori_loop(0, n, lambda i, c: c, f32(0), unroll=2))(np.int32(3))


def test_fori_loop_bound_dtype_errors() -> None:
    with pytest.raises(TypeError, match="must have equal types"):
        fori_loop(np.int32(0), np.int16(3), lambda i, c: c, f32(0))
    # a weak (Python) bound takes the other's type
    assert float(fori_loop(0, np.int32(3), lambda i, c: c + 1.0, f32(0))) == 3.0


def test_while_weak_init_promotion() -> None:
    out = while_loop(lambda c: c < 5.0, lambda c: c + f32(1.5), 0)
    assert np.asarray(out).dtype == f32 and float(out) == 6.0


# --- errors ----------------------------------------------------------------------------------
def test_while_errors() -> None:
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar, but got output "
                                        "type"):
        while_loop(lambda c: np.array([True, False]), lambda c: c, f32(1.0))
    with pytest.raises(TypeError, match="cond_fun must return a boolean scalar"):
        while_loop(lambda c: 1.0, lambda c: c, f32(1.0))
    with pytest.raises(TypeError) as info:
        while_loop(lambda c: c < 3, lambda c: np.zeros(2, f32), f32(1.0))
    assert ("while_loop body function carry input and carry output must have equal types"
            in str(info.value))
    assert ("The input carry c has type float32[] but the corresponding output carry component "
            "has type float32[2], so the shapes do not match." in str(info.value))
    with pytest.raises(TypeError, match="must have the same pytree structure"):
        while_loop(lambda c: c < 3, lambda c: (c, c), f32(1.0))
    with pytest.raises(TypeError, match="should be callable"):
        while_loop(1, lambda c: c, f32(1.0))  # type: ignore[arg-type]


# --- staging and debug info ------------------------------------------------------------------
def test_while_bodies_debug_info_and_consts() -> None:
    w = f32(3.0)

    def f(x: Any) -> Any:
        return while_loop(lambda c: c < 100.0, lambda c: c * w, x)

    jaxpr = tc.make_jaxpr(f)(f32(1.0))
    (eqn,) = _eqns(jaxpr, while_p)
    assert eqn.params["cond_jaxpr"].jaxpr.debug_info.traced_for == "while_cond"
    assert eqn.params["body_jaxpr"].jaxpr.debug_info.traced_for == "while_body"
    assert eqn.params["cond_jaxpr"].jaxpr.debug_info.arg_names == ("c",)
    assert set(eqn.params) == {"cond_jaxpr", "body_jaxpr", "cond_nconsts", "body_nconsts"}
    validate_jaxpr_debug_info(jaxpr)


def test_named_axis_effects_of_the_body() -> None:
    def f(x: Any) -> Any:
        return while_loop(lambda c: c < 10.0, lambda c: c + lax.psum(c, "i"), x)

    with core.extend_axis_env("i", 2):
        jaxpr = tc.make_jaxpr(f)(f32(0))
    (eqn,) = _eqns(jaxpr, while_p)
    assert NamedAxisEffect("i") in eqn.effects


# --- autodiff ---------------------------------------------------------------------------------
def test_while_forward_mode_matches_finite_differences() -> None:
    T.check_grads(lambda x: grow(x, f32(7.0))[1], (f32(0.9),), order=2, modes=("fwd",))
    jaxpr = tc.make_jaxpr(lambda x, t: tc.jvp(lambda y: grow(y, f32(7.0)), (x,), (t,)))(
        f32(0.9), f32(1.0))
    validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)
    (eqn,) = _eqns(jaxpr, while_p)
    names = eqn.params["cond_jaxpr"].jaxpr.debug_info.arg_names
    assert names == ("c[0]", "c[1]", "tangent(c[0])", "tangent(c[1])")


def test_while_reverse_mode_raises_jax_error() -> None:
    with pytest.raises(ValueError) as info:
        tc.grad(lambda x: grow(x, f32(7.0))[1])(f32(0.9))
    assert str(info.value) == WHILE_GRAD_ERROR
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        # under make_jaxpr the trip count is traced: the loop is a while
        tc.make_jaxpr(tc.grad(lambda x, n: fori_loop(0, n, lambda i, c: c * 2.0, x)))(
            f32(1.0), np.int32(3))


def test_linearize_while_evaluates_forward() -> None:
    out, f_lin = tc.linearize(lambda x: grow(x, f32(7.0))[1], f32(0.9))
    eps = 1e-3
    f = lambda x: grow(x, f32(7.0))[1]  # noqa: E731
    fd = (f(f32(0.9 + eps)) - f(f32(0.9 - eps))) / (2 * eps)
    np.testing.assert_allclose(f_lin(f32(1.0)), fd, rtol=2e-2)
    np.testing.assert_allclose(out, f(f32(0.9)), rtol=1e-6)


def test_fori_loop_static_bounds_is_reverse_differentiable() -> None:
    def f(x: Any, y: Any) -> Any:
        return fori_loop(0, 4, lambda i, c: lax.sin(c) * y + i, x)

    T.check_grads(f, (f32(0.3), f32(1.2)), order=2, modes=("fwd", "rev"))
    validate_jaxpr_debug_info(tc.make_jaxpr(tc.grad(f))(f32(0.3), f32(1.2)))


# --- vmap ------------------------------------------------------------------------------------
def test_vmap_while_batched_predicate() -> None:
    ns = np.array([1, 6, 7, 27, 3], np.int32)
    out = tc.vmap(collatz_steps)(ns)
    np.testing.assert_array_equal(out, [py_collatz(int(n)) for n in ns])


def test_vmap_while_batched_limit_only() -> None:
    limits = np.array([3.0, 10.0, 50.0], f32)
    out = tc.vmap(grow, in_axes=(None, 0))(f32(1.0), limits)
    for i, lim in enumerate(limits):
        x, c = f32(1.0), f32(1.0)
        while x < lim:
            x, c = x * 2.0, c * np.cos(c)
        np.testing.assert_allclose(out[0][i], x)
        np.testing.assert_allclose(out[1][i], c, rtol=1e-5)
    validate_jaxpr_debug_info(tc.make_jaxpr(tc.vmap(grow, in_axes=(None, 0)))(f32(1), limits))


def test_vmap_while_unbatched_predicate_batched_carry() -> None:
    def f(x: Any, k: Any) -> Any:
        return fori_loop(0, k, lambda i, c: c * 1.5, x)

    xs = np.array([1.0, 2.0, 3.0], f32)
    out = tc.vmap(f, in_axes=(0, None))(xs, np.int32(3))
    np.testing.assert_allclose(out, xs * 1.5 ** 3, rtol=1e-6)
    jaxpr = tc.make_jaxpr(tc.vmap(f, in_axes=(0, None)))(xs, np.int32(3))
    (eqn,) = _eqns(jaxpr, while_p)
    # the predicate is not batched: no reduce_or in the cond
    assert all(e.primitive.name != "reduce_or" for e in eqn.params["cond_jaxpr"].jaxpr.eqns)


def test_vmap_of_jvp_of_while() -> None:
    xs = np.array([0.5, 0.9], f32)
    out = tc.vmap(lambda x: tc.jvp(lambda y: grow(y, f32(7.0))[1], (x,), (f32(1.0),))[1])(xs)
    for i, x in enumerate(xs):
        _, t = tc.jvp(lambda y: grow(y, f32(7.0))[1], (x,), (f32(1.0),))
        np.testing.assert_allclose(out[i], t, rtol=1e-5)


# --- DCE ------------------------------------------------------------------------------------
def test_while_dce_drops_unneeded_carry() -> None:
    def f(x: Any, y: Any) -> Any:
        return while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] + 1.0, c[1] * 2.0), (x, y))

    jaxpr = tc.make_jaxpr(f)(f32(0), f32(1)).jaxpr
    (eqn,) = _eqns(jaxpr, while_p)
    used, new_eqn = pe.dce_rules[while_p]([True, False], eqn)
    assert used == [True, False]
    assert len(new_eqn.params["body_jaxpr"].jaxpr.outvars) == 1
    assert new_eqn.params["body_jaxpr"].jaxpr.debug_info.arg_names == ("c[0]",)
    # the predicate needs c[0]: it stays even when only c[1] is used
    used, new_eqn = pe.dce_rules[while_p]([False, True], eqn)
    assert used == [True, True]
    new, _ = pe.dce_jaxpr(jaxpr, [True, False])
    validate_jaxpr_debug_info(new)
    core.check_jaxpr(new)
