"""Final-style map primitives (the pmap interface) under every trace.

``t_pmap_p`` is a test-local ``MapPrimitive`` whose impl traces the function
the way the pmap layer will (``trace_to_jaxpr_final`` with the axis bound)
and evaluates it with a vmap over the mapped axis, so the numbers can be
checked on one CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import WrappedFun, wrap_init
from lamina_tracing_core import batching, core, effects, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.jaxpr import ClosedJaxpr, validate_jaxpr_debug_info

f32 = np.float32

t_pmap_p = core.MapPrimitive("t_pmap")
seen_debug_info: list[Any] = []
seen_params: list[dict[str, Any]] = []


def _t_pmap_impl(fun: WrappedFun, *args: Any, axis_name: Any, axis_size: int,
                 in_axes: tuple[int | None, ...], out_axes_thunk: Any,
                 **params: Any) -> list[Any]:
    seen_debug_info.append(fun.debug_info)
    seen_params.append(dict(params, in_axes=in_axes))
    avals = [core.mapped_aval(axis_size, ax, core.get_aval(x)) for x, ax in zip(args, in_axes)]
    with core.extend_axis_env(axis_name, axis_size):
        jaxpr, _, consts = pe.trace_to_jaxpr_final(fun, avals)
    closed = ClosedJaxpr(jaxpr, consts)
    validate_jaxpr_debug_info(closed)
    out_axes = out_axes_thunk()
    moved = [batching.moveaxis(x, ax, 0) if ax is not None else x
             for x, ax in zip(args, in_axes)]
    batched, out_batched = batching.batch_jaxpr(
        closed, batching.AxisData(axis_name, axis_size), [ax is not None for ax in in_axes],
        instantiate=[ax is not None for ax in out_axes])
    outs = core.jaxpr_as_fun(batched)(*moved)
    return [np.asarray(batching.moveaxis(o, 0, ax)) if ax is not None else np.asarray(o)
            for o, ax in zip(outs, out_axes)]


core.impl_rules[t_pmap_p] = _t_pmap_impl


def _donation_updater(params: dict[str, Any], in_sources: tuple[int | None, ...]
                      ) -> dict[str, Any]:
    donated = params["donated"]
    return dict(params, donated=tuple(donated[s] if s is not None else False
                                      for s in in_sources))


core.map_param_updaters[t_pmap_p] = _donation_updater


def t_pmap(f: Any, axis_name: Any = "i") -> Any:
    def mapped(*args: Any) -> Any:
        dbg = api_util.debug_info("pmap", f, args, {})
        fun, _ = api_util.result_paths(wrap_init(f, debug_info=dbg))
        flat_args, in_tree = tu.tree_flatten(args)
        flat_fun, out_tree = api_util.flatten_fun_nokwargs(fun, in_tree)
        size = np.shape(flat_args[0])[0]
        outs = t_pmap_p.bind(flat_fun, *flat_args, axis_name=axis_name, axis_size=size,
                             in_axes=(0,) * len(flat_args),
                             out_axes_thunk=lambda: (0,) * out_tree().num_leaves,
                             donated=(False,) * len(flat_args))
        return tu.tree_unflatten(out_tree(), outs)
    return mapped


def body(x: Any, y: Any) -> Any:
    return T.t_add(T.t_mul(T.t_sin(x), y), lax.psum(x, "i"))


def reference(xs: Any, ys: Any) -> Any:
    return tc.vmap(body, axis_name="i")(xs, ys)


XS = np.linspace(0.1, 0.9, 4).astype(f32)
YS = np.linspace(1.0, 2.0, 4).astype(f32)


def test_eager_map_and_debug_info_reaches_impl() -> None:
    seen_debug_info.clear()
    np.testing.assert_allclose(t_pmap(body)(XS, YS), reference(XS, YS), rtol=1e-6)
    dbg = seen_debug_info[-1]
    assert dbg.traced_for == "pmap" and dbg.arg_names == ("x", "y")


def test_jvp_of_map() -> None:
    seen_debug_info.clear()
    seen_params.clear()
    tx = np.ones(4, f32)
    out, tan = tc.jvp(t_pmap(body), (XS, YS), (tx, np.zeros(4, f32)))
    ref_out, ref_tan = tc.jvp(reference, (XS, YS), (tx, np.zeros(4, f32)))
    np.testing.assert_allclose(out, ref_out, rtol=1e-6)
    np.testing.assert_allclose(tan, ref_tan, rtol=1e-6)
    dbg = seen_debug_info[-1]
    assert dbg.arg_names == ("x", "y", "tangent(x)", "tangent(y)")
    assert dbg.func_src_info.startswith("jvp(body)")
    assert tuple(dbg.resolve_result_paths().result_paths) == ("result", "tangent(result)")
    assert seen_params[-1]["donated"] == (False,) * 4


def test_vmap_of_map() -> None:
    xs = np.stack([XS, XS * 2])
    ys = np.stack([YS, YS])
    out = tc.vmap(t_pmap(body))(xs, ys)
    expected = np.stack([reference(xs[i], ys[i]) for i in range(2)])
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    out_t = tc.vmap(t_pmap(body), in_axes=1, out_axes=1)(xs.T, ys.T)
    np.testing.assert_allclose(out_t, expected.T, rtol=1e-6)
    assert seen_debug_info[-1].func_src_info.startswith("vmap(body)")


def test_map_staged_into_a_jaxpr() -> None:
    closed = tc.make_jaxpr(t_pmap(body))(XS, YS)
    eqn = closed.eqns[0]
    assert eqn.primitive is t_pmap_p
    assert eqn.params["in_axes"] == (0, 0) and eqn.params["out_axes"] == (0,)
    inner = eqn.params["call_jaxpr"]
    assert effects.NamedAxisEffect("i") in inner.effects
    assert effects.NamedAxisEffect("i") not in eqn.effects
    assert inner.debug_info.arg_names == ("x", "y")
    validate_jaxpr_debug_info(closed)
    out = core.jaxpr_as_fun(closed)(XS, YS)
    np.testing.assert_allclose(out[0], reference(XS, YS), rtol=1e-6)


def test_map_closing_over_outer_values_under_jit_like_staging() -> None:
    c = np.full(4, 3.0, f32)

    def outer(x):
        return t_pmap(lambda a: T.t_mul(a, T.t_sin(x)))(c)

    closed = tc.make_jaxpr(outer)(f32(0.5))
    eqn = closed.eqns[-1]
    assert eqn.params["in_axes"][0] is None  # the closed-over value is broadcast
    assert eqn.params["donated"] == (False,) * len(eqn.invars)
    np.testing.assert_allclose(core.jaxpr_as_fun(closed)(f32(0.5))[0], c * np.sin(0.5),
                               rtol=1e-6)


def test_grad_of_map() -> None:
    def loss(xs, ys):
        return T.t_sum(t_pmap(body)(xs, ys))

    def ref_loss(xs, ys):
        return T.t_sum(reference(xs, ys))

    seen_debug_info.clear()
    g = tc.grad(loss, argnums=(0, 1))(XS, YS)
    known_body, transposed_body = seen_debug_info
    assert known_body.arg_names == ("x", "y")
    assert known_body.resolve_result_paths().result_paths[0] == "result"
    assert transposed_body.func_src_info.startswith("transpose(jvp(body))")
    assert transposed_body.resolve_result_paths().result_paths == (
        "cotangent(x)", "cotangent(y)")
    ref = tc.grad(ref_loss, argnums=(0, 1))(XS, YS)
    np.testing.assert_allclose(g[0], ref[0], rtol=1e-5)
    np.testing.assert_allclose(g[1], ref[1], rtol=1e-5)


def test_grad_of_map_with_closure() -> None:
    def loss(w, xs):
        return T.t_sum(t_pmap(lambda a: T.t_mul(T.t_sin(a), w))(xs))

    g = tc.grad(loss)(f32(2.0), XS)
    np.testing.assert_allclose(g, np.sum(np.sin(XS)), rtol=1e-5)


def test_linearize_and_jaxpr_of_grad_of_map() -> None:
    def loss(xs):
        return T.t_sum(t_pmap(lambda a: T.t_mul(T.t_sin(a), a))(xs))

    closed = tc.make_jaxpr(tc.grad(loss))(XS)
    validate_jaxpr_debug_info(closed)
    assert closed.jaxpr.debug_info.arg_names == ("xs",)
    g = core.jaxpr_as_fun(closed)(XS)[0]
    np.testing.assert_allclose(g, np.cos(XS) * XS + np.sin(XS), rtol=1e-5)


def test_map_requires_out_axes_thunk_param() -> None:
    with pytest.raises(KeyError):
        tc.jvp(lambda x: t_pmap_p.bind(wrap_init(lambda a: [a]), x, axis_name="i",
                                       axis_size=4, in_axes=(0,), donated=(False,)),
               (XS,), (XS,))


def test_jvp_and_vmap_of_map_closing_over_tracers() -> None:
    def f(w):
        return t_pmap(lambda a: T.t_mul(T.t_sin(a), w))(XS)

    out, tan = tc.jvp(f, (f32(2.0),), (f32(1.0),))
    np.testing.assert_allclose(out, np.sin(XS) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(tan, np.sin(XS), rtol=1e-6)
    ws = np.array([1.0, 2.0, 3.0], f32)
    np.testing.assert_allclose(tc.vmap(f)(ws), np.sin(XS)[None] * ws[:, None], rtol=1e-6)
    np.testing.assert_allclose(tc.vmap(f, out_axes=1)(ws), (np.sin(XS)[None] * ws[:, None]).T,
                               rtol=1e-6)


def test_jaxpr_of_grad_of_map_with_closure() -> None:
    def loss(w, xs):
        return T.t_sum(t_pmap(lambda a: T.t_mul(T.t_sin(a), w))(xs))

    closed = tc.make_jaxpr(tc.grad(loss))(f32(2.0), XS)
    validate_jaxpr_debug_info(closed)
    g = core.jaxpr_as_fun(closed)(f32(2.0), XS)[0]
    np.testing.assert_allclose(g, np.sum(np.sin(XS)), rtol=1e-5)
