"""Name stacks through transformations, and jaxprs printed as JAX prints them.

Name stacks follow JAX's shape (``jvp(f)`` for a forward pass,
``transpose(jvp(f))`` for its backward pass, ``vmap(f)``), with the function
name filled in; every new jaxpr's equations carry stacks relative to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import lamina_tracing_core as tc
from lamina_tracing_core import core, lax
from lamina_tracing_core.checkpoint import checkpoint
from lamina_tracing_core.control_flow import cond, scan, while_loop
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr
from lamina_tracing_core.jaxpr import pp_jaxpr
from lamina_tracing_core.source_info import NameStack, extend_name_stack

f32 = np.float32


def stacks(jaxpr: ClosedJaxpr | Jaxpr) -> list[tuple[str, str]]:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return [(e.primitive.name, str(e.source_info.name_stack)) for e in inner.eqns]


def f(x: Any) -> Any:
    return lax.mul(lax.sin(x), x)


# --- name stacks ------------------------------------------------------------------------------
def test_grad_names_forward_jvp_and_backward_transpose() -> None:
    got = stacks(tc.make_jaxpr(tc.grad(f))(f32(1.0)))
    assert ("sin", "jvp(f)") in got
    assert ("cos", "jvp(f)") in got
    backward = [s for p, s in got if p in ("mul", "add_any") and s != "jvp(f)"]
    assert backward and set(backward) == {"transpose(jvp(f))"}
    assert ("add_any", "transpose(jvp(f))") in got  # the cotangent accumulation too
    assert all(s in ("jvp(f)", "transpose(jvp(f))") for _, s in got)


def test_vjp_and_linearize_name_their_passes() -> None:
    def g(x: Any) -> Any:
        out, pullback = tc.vjp(f, x)
        return pullback(f32(1.0))[0]

    got = stacks(tc.make_jaxpr(g)(f32(1.0)))
    assert ("sin", "jvp(f)") in got and ("mul", "transpose(jvp(f))") in got

    def h(x: Any) -> Any:
        _, f_jvp = tc.linearize(f, x)
        return f_jvp(f32(1.0))

    got = stacks(tc.make_jaxpr(h)(f32(1.0)))
    assert {s for _, s in got} == {"jvp(f)"}


def test_jvp_and_vmap_name_their_equations() -> None:
    got = stacks(tc.make_jaxpr(lambda x: tc.jvp(f, (x,), (x,)))(f32(1.0)))
    assert got and {s for _, s in got} == {"jvp(f)"}
    got = stacks(tc.make_jaxpr(tc.vmap(f))(np.ones(3, f32)))
    assert got == [("sin", "vmap(f)"), ("mul", "vmap(f)")]


def test_nested_transformations_compose_names() -> None:
    got = {s for _, s in stacks(tc.make_jaxpr(tc.vmap(tc.grad(f)))(np.ones(3, f32)))}
    assert got == {"vmap(f)/jvp(f)", "vmap(f)/transpose(jvp(f))"}
    got = {s for _, s in stacks(tc.make_jaxpr(tc.grad(tc.grad(f)))(f32(1.0)))}
    assert "jvp(f)/jvp(f)" in got
    assert any(s.startswith("transpose(jvp(f))") for s in got)


def test_named_scopes_inside_transformations() -> None:
    def scoped(x: Any) -> Any:
        with extend_name_stack("layer"):
            return lax.mul(lax.sin(x), x)

    got = {s for _, s in stacks(tc.make_jaxpr(tc.grad(scoped))(f32(1.0)))}
    assert got == {"jvp(scoped)/layer", "transpose(jvp(scoped))/layer"}


def test_transformation_applied_inside_a_scope_keeps_the_scope() -> None:
    def outer(x: Any) -> Any:
        with extend_name_stack("block"):
            return tc.grad(f)(x)

    got = {s for _, s in stacks(tc.make_jaxpr(outer)(f32(1.0)))}
    assert got == {"block/jvp(f)", "block/transpose(jvp(f))"}


def test_new_jaxprs_start_from_an_empty_stack() -> None:
    with extend_name_stack("ignored"):
        closed = tc.make_jaxpr(f)(f32(1.0))
    assert {s for _, s in stacks(closed)} == {""}


def test_control_flow_bodies_are_relative_to_their_equation() -> None:
    def g(x: Any) -> Any:
        y = cond(lax.gt(x, f32(0)), lax.sin, lax.cos, x)
        c, _ = scan(lambda c, _: (lax.mul(c, f32(2)), None), y, None, length=2)
        return c

    closed = tc.make_jaxpr(tc.grad(g))(f32(1.0))
    outer = stacks(closed)
    assert ("cond", "jvp(g)") in outer and ("cond", "transpose(jvp(g))") in outer
    assert ("scan", "jvp(g)") in outer and ("scan", "transpose(jvp(g))") in outer
    for eqn in closed.eqns:
        for sub in core.subjaxprs_of_params(eqn.params):
            assert {s for _, s in stacks(sub)} <= {""}, eqn.primitive.name


def test_transformations_inside_control_flow_bodies() -> None:
    def g(x: Any) -> Any:
        return cond(lax.gt(x, f32(0)), tc.grad(f), lax.sin, x)

    closed = tc.make_jaxpr(g)(f32(1.0))
    [branches] = [e.params["branches"] for e in closed.eqns if e.primitive.name == "cond"]
    in_grad = {s for b in branches for _, s in stacks(b)}
    assert {"jvp(f)", "transpose(jvp(f))"} <= in_grad

    def h(c: Any, xs: Any) -> Any:
        return scan(lambda c, x: (lax.add(c, tc.vmap(f)(x)), None), c, xs)[0]

    closed = tc.make_jaxpr(h)(np.ones(3, f32), np.ones((2, 3), f32))
    [body] = [e.params["jaxpr"] for e in closed.eqns if e.primitive.name == "scan"]
    assert {s for _, s in stacks(body)} == {"vmap(f)", ""}


def test_checkpoint_equations_carry_the_transformation() -> None:
    def g(x: Any) -> Any:
        return checkpoint(f)(x)

    closed = tc.make_jaxpr(tc.grad(g))(f32(1.0))
    remats = [e for e in closed.eqns if e.primitive.name == "checkpoint"]
    assert remats and str(remats[-1].source_info.name_stack) == "transpose(jvp(g))"
    assert {s for _, s in stacks(remats[-1].params["jaxpr"])} <= {""}


def test_eval_jaxpr_replays_stacks_under_the_current_one() -> None:
    inner = tc.make_jaxpr(tc.grad(f))(f32(1.0))

    def replay(x: Any) -> Any:
        with extend_name_stack("outer"):
            return core.jaxpr_as_fun(inner)(x)[0]

    got = {s for _, s in stacks(tc.make_jaxpr(replay)(f32(1.0)))}
    assert got == {"outer/jvp(f)", "outer/transpose(jvp(f))"}


def test_transposing_wraps_the_first_element() -> None:
    assert str(NameStack(("jvp(f)", "layer")).wrap("transpose")) == "transpose(jvp(f))/layer"
    assert NameStack().wrap("transpose") == NameStack()


def test_pp_jaxpr_source_info_shows_name_stacks() -> None:
    closed = tc.make_jaxpr(tc.grad(f))(f32(1.0))
    text = pp_jaxpr(closed, source_info=True)
    assert "[jvp(f)]" in text and "[transpose(jvp(f))]" in text
    assert f"{__file__}:" in text
    assert "[jvp(f)]" not in pp_jaxpr(closed)


def test_user_lines_skip_every_lamina_layer() -> None:
    closed = tc.make_jaxpr(tc.vmap(tc.grad(f)))(np.ones(3, f32))
    files = {e.source_info.frame.file_name for e in closed.eqns if e.source_info.frame}
    assert files == {__file__}


# --- printing as JAX does -------------------------------------------------------------------
def test_short_jaxprs_print_on_one_line() -> None:
    text = pp_jaxpr(tc.make_jaxpr(lambda x: lax.cos(lax.sin(x)))(f32(1.0)), names=False)
    assert text == "{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = cos b in (c,) }"
    text = pp_jaxpr(tc.make_jaxpr(lambda x, y: (x, y))(f32(1.0), np.int32(2)), names=False)
    assert text == "{ lambda ; a:f32[] b:i32[]. let  in (a, b) }"
    long = pp_jaxpr(tc.make_jaxpr(lambda x: lax.mul(lax.cos(lax.sin(x)), f32(2)))(f32(1.0)),
                    names=False)
    assert long.splitlines() == ["{ lambda ; a:f32[]. let", "    b:f32[] = sin a",
                                 "    c:f32[] = cos b", "    d:f32[] = mul c 2.0:f32[]",
                                 "  in (d,) }"]


def test_nested_jaxprs_and_defaults_print_as_jax() -> None:
    closed = tc.make_jaxpr(lambda x: while_loop(lambda c: lax.lt(c, 3), lambda c: lax.add(c, 1),
                                                x))(np.int32(1))
    text = pp_jaxpr(closed, names=False)
    assert "      body_jaxpr={ lambda ; c:i32[]. let d:i32[] = add c 1:i32[] in (d,) }" in text
    closed = tc.make_jaxpr(lambda x: cond(lax.gt(x, f32(0)), lax.sin, lambda y: y, x))(f32(1))
    text = pp_jaxpr(closed, names=False)
    assert ("      branches=(\n        { lambda ; e:f32[]. let  in (e,) }\n"
            "        { lambda ; f:f32[]. let g:f32[] = sin f in (g,) }\n      )") in text
    x = np.ones((2, 3), f32)
    text = pp_jaxpr(tc.make_jaxpr(
        lambda x: (lax.broadcast_in_dim(x, (4, 2, 3), (1, 2)), x @ x.T,
                   lax.convert_element_type(x, np.int32), lax.mul(x, x)))(x), names=False)
    assert "broadcast_in_dim[broadcast_dimensions=(1, 2)] a" in text
    assert "dimension_numbers=(([1], [0]), ([], []))" in text
    assert "preferred_element_type=float32" in text  # as JAX's matmul sets it
    assert "convert_element_type[new_dtype=int32 weak_type=False] a" in text
    assert "mul a a" in text and "sharding" not in text and "precision" not in text


def test_static_indexing_is_one_slice() -> None:
    closed = tc.make_jaxpr(lambda x: x[1, 2:4, ::2])(np.ones((4, 5, 6), f32))
    assert [e.primitive.name for e in closed.eqns] == ["slice", "squeeze"]
    assert closed.eqns[0].params["strides"] == (1, 1, 2)
    closed = tc.make_jaxpr(lambda x: x[1:3, :, ::-1])(np.ones((4, 5, 6), f32))
    assert [e.primitive.name for e in closed.eqns] == ["slice", "rev"]
