"""cond / while / scan, higher-order calls (func.call to private functions),
and names through traced and transformed jaxprs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lamina_tracing_core import ad, lax
from lamina_tracing_core import control_flow as cf
from lamina_tracing_core.api import grad, make_jaxpr, vmap
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.primitives import Primitive
from ml_build import JaxprBuilder
from ml_runner import run

import lamina_mlir_lowering as ml

F32 = np.float32


def lower(closed: Any, **kwargs: Any) -> ml.LoweringResult:
    return ml.lower_jaxpr_to_module("jit_f", closed, **kwargs)


def _jit_like_primitive() -> Primitive:
    """A call primitive with jit's params, lowered as the jit layer lowers it."""
    call_p = Primitive("jit", multiple_results=True)
    ml.register_lowering(call_p, ml.make_call_rule("jaxpr", name_param="name",
                                                   inline_param="inline"))
    return call_p


def test_cond_and_switch() -> None:
    def f(p, x):
        return cf.cond(p, lambda v: lax.sin(v) * 2, lambda v: v + 1, x)

    x = np.arange(3, dtype=F32)
    result = lower(make_jaxpr(f)(True, x))
    assert "stablehlo.case" in result.as_text()
    np.testing.assert_allclose(run(result, np.array(True), x)[0], np.sin(x) * 2, rtol=1e-6)
    np.testing.assert_allclose(run(result, np.array(False), x)[0], x + 1)

    def g(i, x):
        return cf.switch(i, [lambda v: v, lambda v: v * 10, lambda v: -v], x)

    res_g = lower(make_jaxpr(g)(np.int32(0), x))
    for i, expected in [(0, x), (1, x * 10), (2, -x), (7, -x), (-3, x)]:
        np.testing.assert_allclose(run(res_g, np.array(i, np.int32), x)[0], expected)


def test_while_and_fori_loop() -> None:
    def f(x, limit):
        return cf.while_loop(lambda c: c[0] < limit, lambda c: (c[0] + 1, c[1] * 2.0),
                             (np.int32(0), x))

    res = lower(make_jaxpr(f)(F32(1.5), np.int32(3)))
    assert "stablehlo.while" in res.as_text()
    n, v = run(res, np.array(1.5, F32), np.array(5, np.int32))
    assert n == 5 and v == 1.5 * 32

    def g(x):
        return cf.fori_loop(0, 6, lambda i, c: c * 2 + i, x)

    res_g = lower(make_jaxpr(g)(F32(1.0)))
    expected = 1.0
    for i in range(6):
        expected = expected * 2 + i
    assert run(res_g, np.array(1.0, F32))[0] == expected


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_carries_consts_and_ys(reverse: bool) -> None:
    w = np.array([2.0, -1.0], F32)

    def f(init, xs):
        def body(c, x):
            new = c * w + x
            return new, (new.sum(), x * 3)
        return cf.scan(body, init, xs, reverse=reverse)

    xs = np.arange(8, dtype=F32).reshape(4, 2)
    init = np.ones(2, F32)
    res = lower(make_jaxpr(f)(init, xs))
    text = res.as_text()
    assert "stablehlo.while" in text and "stablehlo.dynamic_update_slice" in text
    carry, sums, tripled = run(res, init, xs)
    c = init.copy()
    exp_sums = np.zeros(4, F32)
    order = range(3, -1, -1) if reverse else range(4)
    for t in order:
        c = c * w + xs[t]
        exp_sums[t] = c.sum()
    np.testing.assert_allclose(carry, c)
    np.testing.assert_allclose(sums, exp_sums)
    np.testing.assert_allclose(tripled, xs * 3)


def test_scan_of_length_zero_and_nested_control_flow() -> None:
    def f(xs):
        def body(c, x):
            c = cf.cond(x > 2, lambda v: v + x, lambda v: v - x, c)
            return c, c
        return cf.scan(body, F32(0), xs)

    xs = np.array([1.0, 3.0, 5.0], F32)
    res = lower(make_jaxpr(f)(xs))
    c, ys = run(res, xs)
    np.testing.assert_allclose(ys, [-1.0, 2.0, 7.0])
    empty = np.zeros((0,), F32)
    res0 = lower(make_jaxpr(f)(empty))
    c0, ys0 = run(res0, empty)
    assert c0 == 0 and ys0.shape == (0,)


def test_inner_jit_becomes_one_private_function_per_callee() -> None:
    call_p = _jit_like_primitive()
    inner_b = JaxprBuilder("g")
    a = inner_b.arg((3,), F32, "a")
    inner = inner_b.build([inner_b.eqn(ew.sin_p, a)])
    other_b = JaxprBuilder("g")
    o = other_b.arg((3,), F32, "o")
    other = other_b.build([other_b.eqn(ew.cos_p, o)])
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    out_aval = [inner.out_avals[0]]
    params = dict(name="g", inline=False)
    y1, = b.eqn(call_p, x, out_avals=out_aval, jaxpr=inner, **params)
    y2, = b.eqn(call_p, y1, out_avals=out_aval, jaxpr=inner, **params)
    y3, = b.eqn(call_p, y2, out_avals=out_aval, jaxpr=other, **params)
    y4, = b.eqn(call_p, y3, out_avals=out_aval, jaxpr=inner, name="g", inline=True)
    res = lower(b.build([y4]))
    text = res.as_text()
    assert text.count("func.func private @g(") == 1
    assert text.count("func.func private @g_0(") == 1
    assert text.count("call @g(") == 2 and text.count("call @g_0(") == 1
    debug = res.as_text(debug_info=True)
    assert '"jit(f)/jit(g)"' in debug            # call-site op name
    assert 'loc("a")' in debug                    # callee arguments keep their names
    xv = np.arange(3, dtype=F32)
    np.testing.assert_allclose(run(res, xv)[0], np.sin(np.cos(np.sin(np.sin(xv)))), rtol=1e-6)


def test_calls_in_multi_platform_modules_pass_the_platform_index() -> None:
    call_p = _jit_like_primitive()
    inner_b = JaxprBuilder("g")
    a = inner_b.arg((2,), F32, "a")
    inner = inner_b.build([inner_b.eqn(ew.neg_p, a)])
    b = JaxprBuilder("f")
    x = b.arg((2,), F32, "x")
    y, = b.eqn(call_p, x, out_avals=inner.out_avals, jaxpr=inner, name="g", inline=False)
    res = lower(b.build([y]), platforms=("cpu", "tpu"))
    assert "func.func private @g(%arg0: tensor<i32>" in res.as_text()
    np.testing.assert_array_equal(run(res, np.array([1.0, -2.0], F32))[0], [-1.0, 2.0])


def test_make_call_rule_for_higher_layers() -> None:
    closed_call_p = Primitive("ml_test_closed_call", multiple_results=True)
    ml.register_lowering(closed_call_p, ml.make_call_rule("call_jaxpr", name_param=None))
    inner_b = JaxprBuilder("h")
    a = inner_b.arg((), F32, "a")
    inner = inner_b.build([inner_b.eqn(ew.exp_p, a)])
    b = JaxprBuilder("f")
    x = b.arg((), F32, "x")
    y, = b.eqn(closed_call_p, x, out_avals=inner.out_avals, call_jaxpr=inner)
    res = lower(b.build([y]))
    assert "func.func private @ml_test_closed_call(" in res.as_text()
    np.testing.assert_allclose(run(res, np.array(1.0, F32))[0], np.e, rtol=1e-6)


def test_traced_names_reach_the_module() -> None:
    def f(x, y):
        return {"a": lax.sin(x) * y["hi"], "b": [x]}

    closed = make_jaxpr(f)(F32(1.0), {"hi": F32(2.0)})
    res = lower(closed)
    assert res.arg_names == ("x", "y['hi']")
    assert res.result_names == ("result['a']", "result['b'][0]")
    assert 'jax.arg_info = "y[\'hi\']"' in res.as_text()


def test_names_survive_jvp_grad_and_vmap() -> None:
    def f(x, y):
        return {"a": lax.sin(x) * y["hi"]}

    closed = make_jaxpr(f)(F32(1.0), {"hi": F32(2.0)})
    jvp_closed, _ = ad.jvp_jaxpr(closed, [True, False], instantiate=True)
    res = lower(jvp_closed)
    assert res.arg_names == ("x", "y['hi']", "tangent(x)")
    assert res.result_names == ("result['a']", "tangent(result['a'])")
    assert 'jax.arg_info = "tangent(x)"' in res.as_text()
    assert "jvp(f)" in res.as_text(debug_info=True)
    out, t_out = run(res, np.array(0.5, F32), np.array(3.0, F32), np.array(1.0, F32))
    np.testing.assert_allclose(t_out, np.cos(0.5) * 3.0, rtol=1e-6)

    g = make_jaxpr(grad(lambda x, y: lax.sin(x) * y["hi"]))(F32(1.0), {"hi": F32(2.0)})
    assert lower(g).arg_names == ("x", "y['hi']")
    v = make_jaxpr(vmap(f))(np.ones(3, F32), {"hi": np.ones(3, F32)})
    res_v = lower(v)
    assert res_v.arg_names == ("x", "y['hi']")
    assert res_v.in_avals[0].shape == (3,)
