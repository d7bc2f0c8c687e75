"""The debug-info holes of issue 19 (items 1, 2, 5, 6): names that used to
vanish through pmap under vjp, jvp and grad, stale records that used to be
dropped silently, and the naming algebra (``cotangent(x)``, never
``cotangent(tangent(x))``).

Each test failed before its fix: item 1 gave the backward pmap's results
``(None,)``; item 2 gave ``(None, None)`` result paths and a staged pmap with
no debug info at all; item 5 turned a stale record into all ``None`` without
a word; item 6 named gradients ``cotangent(tangent(x))``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from e2e_helpers import sub_jaxprs
from lamina_linear_util.debug_info import DebugInfoError, TracingDebugInfo, set_validation
from lamina_linear_util.linear_util import transformation, wrap_init
from lamina_tracing_core import names
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

X8 = np.linspace(0.1, 0.9, 8).astype(np.float32)
C = np.float32(2.0)
SCALAR = ShapedArray((), np.dtype("float32"))


def _pmap_infos(fun: Any, *args: Any) -> list[Any]:
    closed = lx.make_jaxpr(fun)(*args)
    validate_jaxpr_debug_info(closed, recursive=True)
    return [j.debug_info for j in sub_jaxprs(closed, "xla_pmap")]


# --- item 1: vjp(pmap(f)) with an unused input ---------------------------------------------------
def _unused_y(x: Any, y: Any) -> Any:
    return jnp.sin(x)


def _pullback_of_pmap(a: Any, b: Any) -> Any:
    out, pullback = lx.vjp(lx.pmap(_unused_y), a, b)
    return pullback(jnp.ones_like(out))


def test_vjp_of_pmap_with_an_unused_input_names_the_gradient(devices8: Any) -> None:
    forward, backward = _pmap_infos(_pullback_of_pmap, X8, X8)
    assert forward.arg_names == ("x", "y")
    assert backward.func_src_info.startswith("transpose(jvp(_unused_y)) at ")
    # y's cotangent is zero, so the backward map returns x's only
    assert backward.result_paths == ("cotangent(x)",)
    assert backward.arg_names[-1] == "cotangent(result)"
    gx, gy = _pullback_of_pmap(X8, X8)
    np.testing.assert_allclose(np.asarray(gx), np.cos(X8), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gy), np.zeros(8), rtol=0)


def test_vjp_of_pmap_with_an_unused_first_input_names_the_used_one(devices8: Any) -> None:
    def unused_x(x: Any, y: Any) -> Any:
        return y * y

    def pullback(a: Any, b: Any) -> Any:
        out, pb = lx.vjp(lx.pmap(unused_x), a, b)
        return pb(jnp.ones_like(out))

    _, backward = _pmap_infos(pullback, X8, X8)
    assert backward.result_paths == ("cotangent(y)",)


# --- item 2: jvp / grad of a pmap whose body closes over a traced value --------------------------
def _closing_pmap(a: Any, c: Any) -> Any:
    def g(x: Any) -> Any:
        return jnp.sin(x) * c
    return lx.pmap(g)(a)


def test_jvp_of_pmap_closing_over_a_tracer_names_its_results(devices8: Any) -> None:
    def prog(a: Any, c: Any) -> Any:
        return lx.jvp(lambda c: _closing_pmap(a, c), (c,), (jnp.float32(1.0),))

    (dbg,) = _pmap_infos(prog, X8, C)
    assert dbg.traced_for == "pmap"
    assert dbg.result_paths == ("result", "tangent(result)")
    assert dbg.arg_names[-1] == "x"
    primal, tangent = prog(X8, C)
    np.testing.assert_allclose(np.asarray(primal), np.sin(X8) * C, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(tangent), np.sin(X8), rtol=1e-6)


def test_grad_of_pmap_closing_over_a_tracer_names_both_maps(devices8: Any) -> None:
    def loss(a: Any, c: Any) -> Any:
        return _closing_pmap(a, c).sum()

    known, transposed = _pmap_infos(lx.grad(loss, argnums=1), X8, C)
    # the known map: the primal result, then a residual (a computed value)
    assert known.result_paths == ("result", None)
    # the staged map exists with the body's names (it had no debug info)
    assert transposed.traced_for == "pmap"
    assert transposed.func_src_info.startswith("transpose(g) at ")
    assert transposed.arg_names[-1] == "cotangent(result)"
    value = lx.grad(loss, argnums=1)(X8, C)
    np.testing.assert_allclose(np.asarray(value), np.sin(X8).sum(), rtol=1e-5)


# --- item 5: a stale record raises under validation, else keeps the certain names ----------------
def _drop_last_output(*args: Any) -> Any:
    outs = yield args, {}
    yield list(outs)[:-1]


def _two_outputs(x: Any) -> Any:
    return [x * 2.0, x * 3.0]


def _stale_fun() -> Any:
    dbg = TracingDebugInfo("jit", "_two_outputs at model.py:1", ("x",),
                           ("result[0]", "result[1]"))
    return transformation(_drop_last_output, wrap_init(_two_outputs, debug_info=dbg))


def test_a_stale_record_raises_naming_the_transformation_under_validation() -> None:
    with pytest.raises(DebugInfoError, match=r"stale debug info for _two_outputs at model.py:1 "
                       r"\(traced for jit\): 2 result_paths .* for 1 results; the count was "
                       r"changed by one of the transformations _drop_last_output"):
        pe.trace_to_jaxpr_dynamic(_stale_fun(), [SCALAR])


@pytest.fixture
def no_validation() -> Iterator[None]:
    set_validation(False)
    yield
    set_validation(True)


def test_without_validation_a_stale_record_keeps_what_is_certain(no_validation: None) -> None:
    jaxpr, _, _ = pe.trace_to_jaxpr_dynamic(_stale_fun(), [SCALAR])
    assert jaxpr.debug_info is not None
    assert jaxpr.debug_info.arg_names == ("x",)  # the count fits: kept
    # one of two paths dropped, which one is unknown: not a wrong name
    assert jaxpr.debug_info.result_paths == (None,)


def test_has_aux_names_only_the_differentiated_outputs() -> None:
    # grad with has_aux used to carry the paths of (ans, aux) for ans alone
    closed = lx.make_jaxpr(lx.grad(lambda x: (jnp.sin(x), {"a": x}), has_aux=True))(1.0)
    validate_jaxpr_debug_info(closed, recursive=True)
    lowered = lx.jit(lx.grad(lambda x: (jnp.sin(x), x), has_aux=True)).lower(1.0)
    assert 'jax.result_info = "result[0]"' in lowered.as_text()


# --- item 6: the naming algebra -------------------------------------------------------------------
def test_the_algebra() -> None:
    assert names.tangent("x") == "tangent(x)"
    assert names.cotangent("x") == "cotangent(x)"
    assert names.cotangent(names.tangent("y['hi']")) == "cotangent(y['hi'])"
    assert names.cotangent(names.tangent("result['a']")) == "cotangent(result['a'])"
    # forward over reverse is not rewritten
    assert names.tangent(names.cotangent("x")) == "tangent(cotangent(x))"
    assert names.cotangent("tangent(a)(b)") == "cotangent(tangent(a)(b))"
    assert names.residual("x") == "residual(x)"
    assert names.batched("x") == "x" and names.per_replica("x") == "x"
    for op in (names.tangent, names.cotangent, names.residual, names.batched,
               names.per_replica):
        assert op(None) is None
    assert names.select(names.tangent, ["a", "b", None], [True, False, True]) == (
        "tangent(a)", None)


def _g(x: Any, y: Any) -> Any:
    return {"a": jnp.sin(x["a"]) * y[0], "b": y[0]}


XD = {"a": np.float32(0.5)}
YD = [np.float32(1.5)]


def test_gradients_and_cotangent_inputs_are_named_as_documented() -> None:
    def pullback(x: Any, y: Any) -> Any:
        out, pb = lx.vjp(lx.jit(_g), x, y)
        return pb({"a": jnp.float32(1.0), "b": jnp.float32(1.0)})

    closed = lx.make_jaxpr(pullback)(XD, YD)
    validate_jaxpr_debug_info(closed, recursive=True)
    infos = [j.debug_info for j in sub_jaxprs(closed, "jit")]
    transposed = [d for d in infos if d.func_src_info.startswith("transpose(")]
    assert len(transposed) == 1
    (dbg,) = transposed
    assert "cotangent(result['a'])" in dbg.arg_names
    assert "cotangent(result['b'])" in dbg.arg_names
    assert dbg.result_paths == ("cotangent(x['a'])", "cotangent(y[0])")
    assert not any("tangent(" in n and "cotangent(tangent(" in n
                   for n in dbg.arg_names + dbg.result_paths if n is not None)


def test_grad_of_pmap_names_the_gradient_after_the_input(devices8: Any) -> None:
    def h(x: Any, y: Any) -> Any:
        return jnp.sin(x["a"]) * y[0]

    xp = {"a": X8.reshape(8, 1)}
    yp = [X8.reshape(8, 1) + 1.0]
    _, transposed = _pmap_infos(lx.grad(lambda a, b: lx.pmap(h)(a, b).sum()), xp, yp)
    assert transposed.result_paths == ("cotangent(x['a'])",)
    assert transposed.arg_names[-1] == "cotangent(result)"
