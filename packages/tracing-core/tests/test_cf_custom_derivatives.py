"""custom_jvp and custom_vjp: eager, jvp/grad (the rules are used), vmap of the
function and of the rules, staging (the equation and its debug info), rebinding
a staged equation (as jit does), and the errors for malformed rules."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import lax
from lamina_tracing_core.custom_derivatives import (
    SymbolicZero,
    custom_vjp_primal_tree_values,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
)
from lamina_tracing_core.errors import UnexpectedTracerError
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

f32 = np.float32


def staged(f: Any) -> Any:
    """``f`` staged to a jaxpr and evaluated from it (what ``jit`` does):
    transformations then meet the staged custom-derivative equation."""
    def run(*args: Any) -> Any:
        closed = tc.make_jaxpr(f)(*args)
        outs = tc.eval_jaxpr(closed.jaxpr, closed.consts, *args)
        return outs[0] if len(outs) == 1 else outs
    return run


# A custom_jvp whose rule is deliberately 10x the true derivative in x, so
# tests can tell the rule was used.
@custom_jvp
def scaled(x: Any, y: Any) -> Any:
    return lax.sin(x) * y


@scaled.defjvp
def _scaled_jvp(primals: Any, tangents: Any) -> Any:
    x, y = primals
    tx, ty = tangents
    return scaled(x, y), 10 * lax.cos(x) * y * tx + lax.sin(x) * ty


@custom_jvp
def log1pexp(x: Any) -> Any:
    return lax.log(1.0 + lax.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + lax.exp(x)))


@custom_vjp
def clip_grad(x: Any, y: Any) -> Any:
    return x * y


def _clip_fwd(x: Any, y: Any) -> Any:
    return clip_grad(x, y), (x, y)


def _clip_bwd(res: Any, ct: Any) -> Any:
    x, y = res
    return (ct * y * 10, ct * x)


clip_grad.defvjp(_clip_fwd, _clip_bwd)


# --- custom_jvp ----------------------------------------------------------------------------
def test_custom_jvp_eager_runs_the_function() -> None:
    np.testing.assert_allclose(scaled(f32(1.0), f32(2.0)), np.sin(1.0) * 2, rtol=1e-6)


@pytest.mark.parametrize("wrap", [lambda f: f, staged])
def test_custom_jvp_rule_is_used_by_jvp_and_grad(wrap: Any) -> None:
    f = wrap(scaled)
    g = tc.grad(f, argnums=(0, 1))(f32(1.0), f32(2.0))
    np.testing.assert_allclose(g[0], 10 * np.cos(1.0) * 2, rtol=1e-5)
    np.testing.assert_allclose(g[1], np.sin(1.0), rtol=1e-5)
    _, t = tc.jvp(f, (f32(1.0), f32(2.0)), (f32(1.0), f32(0.0)))
    np.testing.assert_allclose(t, 10 * np.cos(1.0) * 2, rtol=1e-5)


def test_custom_jvp_matches_finite_differences() -> None:
    T.check_grads(log1pexp, (np.array([-2.0, 0.5, 3.0], f32),), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(tc.grad(log1pexp)(f32(50.0)), 1.0)  # the rule's formula


@pytest.mark.parametrize("wrap", [lambda f: f, staged])
def test_custom_jvp_under_vmap(wrap: Any) -> None:
    xs = np.array([0.1, 0.7, 1.3], f32)
    ys = np.array([2.0, -1.0, 0.5], f32)
    np.testing.assert_allclose(tc.vmap(wrap(scaled))(xs, ys), np.sin(xs) * ys, rtol=1e-6)
    g = tc.vmap(tc.grad(wrap(scaled)))(xs, ys)
    np.testing.assert_allclose(g, 10 * np.cos(xs) * ys, rtol=1e-5)
    g = tc.grad(lambda a, b: tc.vmap(wrap(scaled))(a, b).sum())(xs, ys)
    np.testing.assert_allclose(g, 10 * np.cos(xs) * ys, rtol=1e-5)


def test_custom_jvp_staging_and_debug_info() -> None:
    w = f32(3.0)

    @custom_jvp
    def f(x: Any, y: Any) -> Any:
        return x * y * w

    f.defjvp(lambda p, t: (f(*p), t[0] * p[1] * w + t[1] * p[0] * w))
    jaxpr = tc.make_jaxpr(f)(f32(1.0), f32(2.0))
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive is custom_jvp_call_p]
    assert set(eqn.params) == {"call_jaxpr", "jvp_jaxpr_fun", "num_consts", "symbolic_zeros"}
    dbg = eqn.params["call_jaxpr"].jaxpr.debug_info
    assert dbg.traced_for == "custom_jvp fun"
    assert dbg.arg_names[eqn.params["num_consts"]:] == ("x", "y")
    assert dbg.result_paths == ("result",)
    validate_jaxpr_debug_info(jaxpr)
    validate_jaxpr_debug_info(tc.make_jaxpr(tc.grad(staged(f)))(f32(1.0), f32(2.0)))
    np.testing.assert_allclose(tc.grad(staged(f))(f32(1.0), f32(2.0)), 6.0)


def test_custom_jvp_nondiff_argnums() -> None:
    def apply(fn: Any, x: Any) -> Any:
        return fn(x)

    app = custom_jvp(apply, nondiff_argnums=(0,))

    @app.defjvp
    def _app_jvp(fn: Any, primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return app(fn, x), 2 * t * fn(x)

    np.testing.assert_allclose(app(lax.sin, f32(0.5)), np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(tc.grad(lambda x: app(lax.sin, x))(f32(0.5)), 2 * np.sin(0.5),
                               rtol=1e-6)
    np.testing.assert_allclose(
        tc.vmap(tc.grad(lambda x: app(lax.exp, x)))(np.array([0.0, 1.0], f32)),
        2 * np.exp([0.0, 1.0]), rtol=1e-5)


def test_custom_jvp_nondiff_python_values_stay_static_when_staged() -> None:
    # A Python bool (or a NumPy array) in a nondiff position reaches the
    # function and the rule as the very object given, also while staging, so
    # they can branch on it; only tracers get their gradient cut.
    seen: list[Any] = []

    def pick(flag: Any, table: Any, x: Any) -> Any:
        seen.append((flag, table))
        return lax.sin(x) if flag else lax.cos(x)

    f = custom_jvp(pick, nondiff_argnums=(0, 1))

    @f.defjvp
    def _f_jvp(flag: Any, table: Any, primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return f(flag, table, x), (lax.cos(x) if flag else -lax.sin(x)) * t

    table = np.arange(3.0)
    x = f32(0.5)
    for flag, value, slope in ((True, np.sin(0.5), np.cos(0.5)),
                               (False, np.cos(0.5), -np.sin(0.5))):
        def at(v: Any, flag: bool = flag) -> Any:
            return f(flag, table, v)

        np.testing.assert_allclose(staged(at)(x), value, rtol=1e-6)
        g = staged(tc.grad(at))(x)
        np.testing.assert_allclose(g, slope, rtol=1e-6)
    assert all(type(flag) is bool and t is table for flag, t in seen)

    # A traced value in a nondiff position is a constant to differentiation.
    scale = custom_jvp(lambda s, x: s * x, nondiff_argnums=(0,))
    scale.defjvp(lambda s, p, t: (scale(s, p[0]), s * t[0]))
    np.testing.assert_allclose(tc.grad(lambda s: scale(s, f32(3.0)))(f32(2.0)), 0.0)


def test_custom_jvp_defjvps() -> None:
    @custom_jvp
    def f(x: Any, y: Any) -> Any:
        return lax.sin(x) * y

    f.defjvps(lambda tx, ans, x, y: lax.cos(x) * tx * y, lambda ty, ans, x, y: lax.sin(x) * ty)
    T.check_grads(f, (f32(0.4), f32(1.5)), order=1, modes=("fwd", "rev"))

    @custom_jvp
    def h(x: Any, y: Any) -> Any:
        return x * 3.0

    h.defjvps(lambda tx, ans, x, y: tx * 3.0, None)
    g = tc.grad(h, argnums=(0, 1))(f32(1.0), f32(2.0))
    assert float(g[0]) == 3.0 and float(g[1]) == 0.0


def test_custom_jvp_symbolic_zeros() -> None:
    seen: list[bool] = []

    @custom_jvp
    def f(x: Any, y: Any) -> Any:
        return x * y

    def f_jvp(primals: Any, tangents: Any) -> Any:
        (x, y), (tx, ty) = primals, tangents
        seen.append(type(ty) is SymbolicZero)
        t = tx * y if type(ty) is SymbolicZero else tx * y + x * ty
        return f(x, y), t

    f.defjvp(f_jvp, symbolic_zeros=True)
    np.testing.assert_allclose(tc.grad(f)(f32(2.0), f32(3.0)), 3.0)
    assert seen and seen[-1] is True


def test_custom_jvp_rule_errors() -> None:
    @custom_jvp
    def f(x: Any) -> Any:
        return x * 2

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function f using "
                                             "defjvp"):
        f(f32(1.0))
    f.defjvp(lambda p, t: p[0] * 2)
    with pytest.raises(TypeError, match="must produce a pair \\(list or tuple of length two\\)"):
        tc.jvp(f, (f32(1.0),), (f32(1.0),))
    f.defjvp(lambda p, t: ((p[0] * 2,), t[0] * 2))
    with pytest.raises(TypeError, match="equal container \\(pytree\\) structures"):
        tc.jvp(f, (f32(1.0),), (f32(1.0),))
    f.defjvp(lambda p, t: (p[0] * 2, np.ones(3, f32)))
    with pytest.raises(TypeError, match="Expected float32\\[\\] \\(tangent type of "
                                        "float32\\[\\]\\) but got float32\\[3\\]"):
        tc.jvp(f, (f32(1.0),), (f32(1.0),))


# --- custom_vjp --------------------------------------------------------------------------------
def test_custom_vjp_eager_runs_the_function() -> None:
    np.testing.assert_allclose(clip_grad(f32(2.0), f32(3.0)), 6.0)


@pytest.mark.parametrize("wrap", [lambda f: f, staged])
def test_custom_vjp_rule_is_used_by_grad(wrap: Any) -> None:
    g = tc.grad(wrap(clip_grad), argnums=(0, 1))(f32(2.0), f32(3.0))
    np.testing.assert_allclose(g, (30.0, 2.0))
    jaxpr = tc.make_jaxpr(tc.grad(wrap(clip_grad)))(f32(2.0), f32(3.0))
    validate_jaxpr_debug_info(jaxpr)


@pytest.mark.parametrize("wrap", [lambda f: f, staged])
def test_custom_vjp_under_vmap(wrap: Any) -> None:
    xs = np.array([1.0, 2.0, 3.0], f32)
    ys = np.array([0.5, -1.0, 2.0], f32)
    np.testing.assert_allclose(tc.vmap(wrap(clip_grad))(xs, ys), xs * ys)
    np.testing.assert_allclose(tc.vmap(tc.grad(wrap(clip_grad)))(xs, ys), ys * 10)
    g = tc.grad(lambda a, b: tc.vmap(wrap(clip_grad))(a, b).sum(), argnums=(0, 1))(xs, ys)
    np.testing.assert_allclose(g[0], ys * 10)
    np.testing.assert_allclose(g[1], xs)
    g = tc.grad(lambda a: tc.vmap(wrap(clip_grad), in_axes=(0, None))(a, f32(4.0)).sum())(xs)
    np.testing.assert_allclose(g, 40.0)


def test_custom_vjp_matches_finite_differences_when_rule_is_right() -> None:
    @custom_vjp
    def f(x: Any, y: Any) -> Any:
        return {"p": lax.sin(x) * y, "q": x}

    def fwd(x: Any, y: Any) -> Any:
        return f(x, y), (lax.cos(x), lax.sin(x), y)

    def bwd(res: Any, ct: Any) -> Any:
        cos_x, sin_x, y = res
        return (ct["p"] * cos_x * y + ct["q"], ct["p"] * sin_x)

    f.defvjp(fwd, bwd)
    T.check_grads(lambda x, y: f(x, y)["p"] + f(x, y)["q"], (f32(0.3), f32(1.4)), order=1,
                  modes=("rev",))


def test_custom_vjp_staging_and_debug_info() -> None:
    jaxpr = tc.make_jaxpr(clip_grad)(f32(1.0), f32(2.0))
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive is custom_vjp_call_p]
    assert set(eqn.params) == {"call_jaxpr", "fwd_jaxpr_thunk", "num_consts", "bwd",
                               "out_trees", "symbolic_zeros"}
    dbg = eqn.params["call_jaxpr"].jaxpr.debug_info
    assert dbg.traced_for == "custom_vjp fun"
    assert dbg.arg_names == ("x", "y")
    validate_jaxpr_debug_info(jaxpr)


def test_custom_vjp_nondiff_argnums_and_none_cotangents() -> None:
    def apply(fn: Any, x: Any, y: Any) -> Any:
        return fn(x) * y

    app = custom_vjp(apply, nondiff_argnums=(0,))
    app.defvjp(lambda fn, x, y: (app(fn, x, y), (x, y)),
               lambda fn, res, ct: (ct * 7.0, None))
    g = tc.grad(lambda x, y: app(lax.sin, x, y), argnums=(0, 1))(f32(0.5), f32(2.0))
    assert float(g[0]) == 7.0 and float(g[1]) == 0.0
    mul = custom_vjp(lambda a, b: a * b, nondiff_argnums=(1,))
    mul.defvjp(lambda a, b: (a * b, ()), lambda b, res, ct: (ct * b,))
    np.testing.assert_allclose(tc.grad(lambda x: mul(x, f32(3.0)))(f32(1.0)), 3.0)
    with pytest.raises(UnexpectedTracerError, match="nondiff_argnums"):
        tc.grad(lambda x: mul(x, x))(f32(1.0))


def test_custom_vjp_forward_mode_is_an_error() -> None:
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff \\(jvp\\) to a "
                                        "custom_vjp function"):
        tc.jvp(clip_grad, (f32(1.0), f32(2.0)), (f32(1.0), f32(1.0)))


def test_custom_vjp_rule_errors() -> None:
    @custom_vjp
    def f(x: Any) -> Any:
        return x * 2

    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function f using "
                                             "defvjp"):
        f(f32(1.0))
    f.defvjp(lambda x: x * 2, lambda r, g: (g,))
    with pytest.raises(TypeError, match="Custom VJP fwd rule <lambda> for function f must "
                                        "produce a pair"):
        tc.grad(f)(f32(1.0))
    f.defvjp(lambda x: ((x * 2,), x), lambda r, g: (g,))
    # staged, the function's output is known when the fwd rule is traced
    with pytest.raises(TypeError, match="the first element represents the primal output") as e:
        tc.grad(staged(f))(f32(1.0))
    assert "(float32[],)" in str(e.value) and "container/pytree structure" in str(e.value)
    f.defvjp(lambda x: (x * 2, x), lambda r, g: g)
    with pytest.raises(TypeError, match="Custom VJP bwd rule must produce an output with the "
                                        "same container"):
        tc.grad(f)(f32(1.0))
    f.defvjp(lambda x: (x * 2, x), lambda r, g: (np.ones(3, f32),))
    with pytest.raises(ValueError, match="at output\\[0\\] the bwd rule produced an output of "
                                         "type float32\\[3\\]"):
        tc.grad(f)(f32(1.0))


@pytest.mark.parametrize("wrap", [lambda f: f, staged])
def test_custom_vjp_symbolic_zeros(wrap: Any) -> None:
    seen: list[Any] = []

    @custom_vjp
    def f(x: Any, y: Any) -> Any:
        return x * y, x

    def fwd(x: Any, y: Any) -> Any:
        seen.append((x.perturbed, y.perturbed))
        x, y = custom_vjp_primal_tree_values((x, y))
        return f(x, y), (x, y)

    def bwd(res: Any, cts: Any) -> Any:
        x, y = res
        ct0, ct1 = cts
        seen.append(type(ct1) is SymbolicZero)
        return (ct0 * y if type(ct1) is SymbolicZero else ct0 * y + ct1), ct0 * x

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    g = tc.grad(wrap(lambda x: f(x, f32(3.0))[0]))(f32(2.0))
    assert float(g) == 3.0
    assert seen == [(True, False), True]


def test_nondiff_python_values_stay_python_values() -> None:
    """Only tracers among nondiff arguments get their gradient stopped (as in
    JAX): a custom_jvp function of static Python values returns what Python
    computes, not an array."""
    @functools.partial(custom_jvp, nondiff_argnums=(0,))
    def bump(static: Any, dynamic: Any) -> Any:
        return static + 1

    bump.defjvp(lambda s, p, t: (bump(s, *p), t[0]))
    out = bump(1, ())
    assert type(out) is int and out == 2
