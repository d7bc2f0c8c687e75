"""Autodiff: jvp, linearize, vjp, grad, Jacobians, and jaxpr-level AD with names."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import ad, core, dtypes, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

f32 = np.float32


def local_fn(x: Any, y: Any) -> Any:
    return T.t_add(T.t_mul(T.t_sin(x), y), T.t_cos(T.t_mul(x, x)))


def lax_fn(x: Any, y: Any) -> Any:
    z = lax.mul(lax.sin(x), lax.exp(lax.tanh(y)))
    return lax.reduce_sum(lax.add(z, lax.mul(x, x)), (0,))


# --- numerics -------------------------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2])
def test_check_grads_local_primitives(order: int) -> None:
    x, y = T.rand_args([(3,), (3,)], seed=1)
    T.check_grads(local_fn, (x, y), order=order)


@pytest.mark.parametrize("order", [1, 2])
def test_check_grads_lax(order: int) -> None:
    x, y = T.rand_args([(4,), (4,)], seed=2)
    T.check_grads(lax_fn, (x, y), order=order)


def test_grad_matches_analytic() -> None:
    g = tc.grad(lambda x: T.t_mul(T.t_sin(x), x))(f32(0.7))
    np.testing.assert_allclose(g, np.cos(0.7) * 0.7 + np.sin(0.7), rtol=1e-5)


def test_jvp_pytrees_and_symbolic_zero_for_integer_inputs() -> None:
    def f(x, n):
        return {"a": T.t_mul(x["u"], x["v"]), "n": n}

    x = {"u": f32(2.0), "v": f32(3.0)}
    tangents = ({"u": f32(1.0), "v": f32(0.0)}, np.zeros((), dtypes.float0))
    out, tan = tc.jvp(f, (x, np.int32(4)), tangents)
    assert float(out["a"]) == 6.0 and int(out["n"]) == 4
    assert float(tan["a"]) == 3.0
    assert np.asarray(tan["n"]).dtype == dtypes.float0


def test_untouched_outputs_cost_nothing() -> None:
    def f(x, y):
        return T.t_sin(x), T.t_cos(y)

    def jvp_x_only(x, y):
        return tc.jvp(lambda a: f(a, y), (x,), (f32(1.0),))

    closed = tc.make_jaxpr(jvp_x_only)(f32(1.0), f32(2.0))
    names = [e.primitive.name for e in closed.eqns]
    # primal sin and cos, the tangent of sin (cos * 1): nothing for cos's tangent
    assert names.count("t_sin") == 1 and names.count("t_neg") == 0


def test_jvp_argument_errors() -> None:
    with pytest.raises(TypeError, match="must be tuples or lists"):
        tc.jvp(local_fn, f32(1.0), f32(1.0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="same tree structure"):
        tc.jvp(lambda a: a["x"], ({"x": f32(1.0)},), (f32(1.0),))
    with pytest.raises(ValueError, match="different primal and tangent shapes"):
        tc.jvp(T.t_sin, (f32(1.0),), (np.ones(3, f32),))
    with pytest.raises(TypeError, match="expected tangent dtype float32, but got tangent "
                                        "dtype int32"):
        tc.jvp(T.t_sin, (f32(1.0),), (np.int32(1),))


def test_jvp_has_aux() -> None:
    out, tan, aux = tc.jvp(lambda x: (T.t_sin(x), {"x": x}), (f32(1.0),), (f32(2.0),),
                           has_aux=True)
    np.testing.assert_allclose(tan, 2 * np.cos(1.0), rtol=1e-6)
    assert float(aux["x"]) == 1.0 and not isinstance(aux["x"], core.Tracer)


def test_linearize_matches_jvp() -> None:
    x, y = T.rand_args([(3,), (3,)])
    tx, ty = T.rand_args([(3,), (3,)], seed=3)
    out, f_jvp = tc.linearize(local_fn, x, y)
    out2, tan = tc.jvp(local_fn, (x, y), (tx, ty))
    np.testing.assert_allclose(out, out2, rtol=1e-6)
    np.testing.assert_allclose(f_jvp(tx, ty), tan, rtol=1e-5)


def test_linear_jaxpr_names_tangents() -> None:
    from lamina_linear_util import api_util
    from lamina_linear_util import tree_util as tu
    from lamina_linear_util.linear_util import wrap_init
    dbg = api_util.debug_info("linearize", local_fn, (f32(1.0), f32(2.0)), {})
    f, _ = api_util.result_paths(wrap_init(local_fn, debug_info=dbg))
    flat, _ = api_util.flatten_fun_nokwargs(f, tu.tree_structure((1.0, 2.0)))
    lin = ad.linearize(flat, [f32(1.0), f32(2.0)])
    assert lin.jaxpr.debug_info is not None
    assert lin.jaxpr.debug_info.arg_names == ("tangent(x)", "tangent(y)")
    assert lin.jaxpr.debug_info.result_paths == ("tangent(result)",)
    assert lin.jaxpr.debug_info.func_src_info.startswith("jvp(local_fn) at ")
    validate_jaxpr_debug_info(lin.jaxpr)


def test_vjp_and_has_aux_and_cotangent_errors() -> None:
    x, y = T.rand_args([(3,), (3,)])
    out, vjp_fn = tc.vjp(local_fn, x, y)
    ct = np.ones(3, f32)
    gx, gy = vjp_fn(ct)
    g2 = tc.grad(lambda a, b: T.t_sum(local_fn(a, b)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, g2[0], rtol=1e-5)
    np.testing.assert_allclose(gy, g2[1], rtol=1e-5)
    with pytest.raises(ValueError, match="Tree structure of cotangent input"):
        vjp_fn((ct, ct))
    with pytest.raises(ValueError, match="Shape of cotangent input"):
        vjp_fn(np.ones(4, f32))
    out, vjp_fn, aux = tc.vjp(lambda a: (T.t_sin(a), [a]), f32(1.0), has_aux=True)
    assert float(aux[0]) == 1.0
    np.testing.assert_allclose(vjp_fn(f32(1.0))[0], np.cos(1.0), rtol=1e-6)


def test_grad_options() -> None:
    def f(x, y, scale=1.0):
        return T.t_mul(T.t_sum(T.t_mul(x, y)), scale)

    x, y = np.ones(3, f32), np.arange(3, dtype=f32)
    gx, gy = tc.grad(f, argnums=(0, 1))(x, y, scale=f32(2.0))
    np.testing.assert_allclose(gx, 2 * y)
    np.testing.assert_allclose(gy, 2 * x)
    gy_only = tc.grad(f, argnums=1)(x, y)
    np.testing.assert_allclose(gy_only, x)
    (value, aux), g = tc.value_and_grad(lambda a: (T.t_sum(a), "aux"), has_aux=True)(x)
    assert float(value) == 3.0 and aux == "aux"
    np.testing.assert_allclose(g, np.ones(3))
    g, aux = tc.grad(lambda a: (T.t_sum(a), a), has_aux=True)(x)
    np.testing.assert_allclose(aux, x)
    g_int = tc.grad(lambda a, n: T.t_mul(a, 2.0), argnums=(0, 1), allow_int=True)(
        f32(1.0), np.int32(3))
    assert np.asarray(g_int[1]).dtype == dtypes.float0


def test_grad_errors_name_arguments() -> None:
    with pytest.raises(TypeError, match=r"Gradient only defined for scalar-output functions\. "
                                        r"Output had shape: \(3,\)\."):
        tc.grad(T.t_sin)(np.ones(3, f32))
    with pytest.raises(TypeError) as info:
        tc.grad(lambda x, y: T.t_mul(x, y), argnums=1)(f32(1.0), np.int32(2))
    msg = str(info.value)
    assert msg.startswith("grad requires real- or complex-valued inputs (input dtype that is "
                          "a sub-dtype of np.inexact), but got int32")
    assert "(argument y)" in msg and "allow_int to True" in msg
    with pytest.raises(TypeError, match=r"argument p\['w'\]"):
        tc.grad(lambda p: T.t_sum(p["v"]))({"v": np.ones(2, f32), "w": np.int32(1)})
    with pytest.raises(TypeError, match="requires at least 3 positional arguments"):
        tc.grad(lambda x: x, argnums=2)(f32(1.0))


def test_grad_of_jaxpr_names_match_outer_function() -> None:
    def loss(w, data):
        return T.t_sum(T.t_mul(T.t_sin(w["a"]), data))

    closed = tc.make_jaxpr(tc.grad(loss))({"a": np.ones(3, f32)}, np.ones(3, f32))
    dbg = closed.jaxpr.debug_info
    assert dbg is not None and dbg.arg_names == ("w['a']", "data")
    assert dbg.result_paths == ("result['a']",)
    validate_jaxpr_debug_info(closed)
    core.check_jaxpr(closed)


def test_jacobians_and_hessian() -> None:
    x = np.array([0.1, 0.5, 0.9], f32)

    def f(a):
        return T.t_mul(T.t_sin(a), a)

    expected = np.diag(np.cos(x) * x + np.sin(x))
    np.testing.assert_allclose(tc.jacfwd(f)(x), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tc.jacrev(f)(x), expected, rtol=1e-5, atol=1e-6)
    h = tc.hessian(lambda a: T.t_sum(T.t_mul(T.t_sin(a), a)))(x)
    np.testing.assert_allclose(h, np.diag(2 * np.cos(x) - x * np.sin(x)), rtol=1e-4,
                               atol=1e-5)
    jac = tc.jacrev(lambda p: {"o": T.t_mul(p["a"], p["b"])})({"a": x, "b": x})
    np.testing.assert_allclose(jac["o"]["a"], np.diag(x), rtol=1e-6)


def test_stop_gradient_blocks_derivatives() -> None:
    g = tc.grad(lambda x: lax.mul(lax.stop_gradient(x), x))(f32(3.0))
    assert float(g) == 3.0


def test_cotangents_accumulate_for_reused_values() -> None:
    g = tc.grad(lambda x: T.t_sum(T.t_add(T.t_mul(x, x), x)))(np.arange(3, dtype=f32))
    np.testing.assert_allclose(g, 2 * np.arange(3) + 1)


# --- jaxpr-level AD (what initial-style primitives use) ----------------------------------------------
def _closed(f: Any, *args: Any) -> Any:
    return tc.make_jaxpr(f)(*args)


def test_jvp_jaxpr_names_and_nonzeros() -> None:
    closed = _closed(local_fn, f32(1.0), f32(2.0))
    jvp_closed, out_nz = ad.jvp_jaxpr(closed, [True, False], instantiate=False)
    dbg = jvp_closed.jaxpr.debug_info
    assert out_nz == [True]
    assert dbg is not None and dbg.arg_names == ("x", "y", "tangent(x)")
    assert dbg.result_paths == ("result", "tangent(result)")
    assert dbg.func_src_info is not None and dbg.func_src_info.startswith("jvp(local_fn)")
    validate_jaxpr_debug_info(jvp_closed)
    out = core.jaxpr_as_fun(jvp_closed)(f32(1.0), f32(2.0), f32(1.0))
    _, expected = tc.jvp(local_fn, (f32(1.0), f32(2.0)), (f32(1.0), f32(0.0)))
    np.testing.assert_allclose(out[1], expected, rtol=1e-5)
    const_closed = _closed(lambda x, y: T.t_sin(y), f32(1.0), f32(2.0))
    _, out_nz = ad.jvp_jaxpr(const_closed, [True, False], instantiate=False)
    assert out_nz == [False]
    inst, out_nz = ad.jvp_jaxpr(const_closed, [True, False], instantiate=True)
    assert out_nz == [True] and len(inst.jaxpr.outvars) == 2


def test_partial_eval_jaxpr_nounits_names_residuals() -> None:
    closed = _closed(lambda a, b: T.t_mul(T.t_sin(a), b), f32(1.0), f32(2.0))
    known, unknown, out_uk, res_avals = pe.partial_eval_jaxpr_nounits(
        closed, [False, True], instantiate=False)
    assert out_uk == [True]
    kd, ud = known.jaxpr.debug_info, unknown.jaxpr.debug_info
    assert kd is not None and ud is not None
    assert kd.arg_names == ("a",)
    assert len(kd.result_paths) == len(res_avals)
    assert ud.arg_names[len(res_avals):] == ("b",)
    assert ud.result_paths == ("result",)
    validate_jaxpr_debug_info(known)
    validate_jaxpr_debug_info(unknown)
    res = core.jaxpr_as_fun(known)(f32(1.0))
    out = core.jaxpr_as_fun(unknown)(*res, f32(2.0))
    np.testing.assert_allclose(out[0], np.sin(1.0) * 2.0, rtol=1e-6)
    # a known input that is itself a residual is named after it
    fwd = _closed(lambda a, b: T.t_mul(a, b), f32(1.0), f32(2.0))
    known, unknown, _, _ = pe.partial_eval_jaxpr_nounits(fwd, [False, True], False)
    assert unknown.jaxpr.debug_info is not None
    assert unknown.jaxpr.debug_info.arg_names == ("residual(a)", "b")


def test_transpose_jaxpr_names_cotangents() -> None:
    closed = _closed(lambda r, t: T.t_mul(r, t), f32(3.0), f32(1.0))
    transposed = ad.transpose_jaxpr(closed, [False, True])
    dbg = transposed.jaxpr.debug_info
    assert dbg is not None
    assert dbg.arg_names == ("r", "cotangent(result)")
    assert dbg.result_paths == ("cotangent(t)",)
    assert dbg.func_src_info is not None and dbg.func_src_info.startswith("transpose(")
    validate_jaxpr_debug_info(transposed)
    (ct,) = core.jaxpr_as_fun(transposed)(f32(3.0), f32(2.0))
    assert float(ct) == 6.0


def test_dce_jaxpr_keeps_names_consistent() -> None:
    closed = _closed(lambda a, b: (T.t_sin(a), T.t_cos(b)), f32(1.0), f32(2.0))
    jaxpr = pe.convert_constvars_jaxpr(closed.jaxpr)
    new, used_inputs = pe.dce_jaxpr(jaxpr, [False, True])
    assert used_inputs == [False, True]
    assert [e.primitive.name for e in new.eqns] == ["t_cos"]
    assert new.debug_info is not None
    assert new.debug_info.arg_names == ("b",)
    assert new.debug_info.result_paths == ("result[1]",)
    validate_jaxpr_debug_info(new)
    kept, used = pe.dce_jaxpr(jaxpr, [False, True], instantiate=True)
    assert used == [True, True] and kept.debug_info.arg_names == ("a", "b")  # type: ignore


def test_backward_pass_with_symbolic_zero_cotangents() -> None:
    closed = _closed(lambda t: (T.t_neg(t), T.t_neg(t)), f32(1.0))
    cts = ad.backward_pass(closed.jaxpr, closed.consts,
                           [ad.UndefinedPrimal(closed.in_avals[0])],
                           [Zero(closed.out_avals[0]), f32(2.0)])
    assert float(cts[0]) == -2.0
    cts = ad.backward_pass(closed.jaxpr, closed.consts,
                           [ad.UndefinedPrimal(closed.in_avals[0])],
                           [Zero(closed.out_avals[0]), Zero(closed.out_avals[1])])
    assert type(cts[0]) is Zero


def test_missing_rules_are_clear_errors() -> None:
    from lamina_tracing_core.primitives import MissingRuleError, Primitive
    p = Primitive("no_rules")
    p.def_abstract_eval(lambda a: a)
    p.def_impl(lambda x: x)
    with pytest.raises(MissingRuleError, match="Differentiation rule for 'no_rules'"):
        tc.jvp(lambda x: p.bind(x), (f32(1.0),), (f32(1.0),))
    from lamina_tracing_core.primitives import jvp_rules
    jvp_rules[p] = lambda primals, tangents: (p.bind(*primals), p.bind(*tangents))
    with pytest.raises(MissingRuleError, match="Transpose rule .* for 'no_rules'"):
        tc.grad(lambda x: p.bind(x))(f32(1.0))
