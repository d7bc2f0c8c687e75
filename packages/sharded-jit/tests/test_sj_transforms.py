"""pjit_p under every transformation: values, and jaxprs whose debug info
validates (conftest turns validation on for every produced jaxpr)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_tracing_core import api, lax, validate_jaxpr_debug_info
from lamina_tracing_core.checkpoint import checkpoint
from lamina_tracing_core.control_flow import cond, fori_loop, scan, while_loop
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.effects import NamedAxisEffect


def f(x: Any, y: Any) -> Any:
    return lax.sin(x) * y + x * x


X = np.linspace(0.1, 1.0, 4).astype(np.float32)


def ref(x: Any, y: Any) -> Any:
    return np.sin(x) * y + x * x


def test_eager_values_and_pytrees() -> None:
    out = sj.jit(lambda t: {"s": f(t["x"], t["y"]), "l": [t["x"] + 1]})({"x": X, "y": 2.0})
    np.testing.assert_allclose(np.asarray(out["s"]), ref(X, 2.0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["l"][0]), X + 1, rtol=1e-6)
    assert sj.jit(lambda: 3.0)().shape == ()
    assert sj.jit(lambda x: None)(1.0) is None


def test_grad_jvp_vjp_linearize_of_jit() -> None:
    jf = sj.jit(f)
    g = api.grad(lambda x: jf(x, 2.0).sum())(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X) * 2 + 2 * X, rtol=1e-5)
    p, t = api.jvp(lambda x: jf(x, 2.0), (X,), (np.ones_like(X),))
    np.testing.assert_allclose(np.asarray(t), np.cos(X) * 2 + 2 * X, rtol=1e-5)
    out, vjp_fn = api.vjp(jf, X, 2.0)
    gx, gy = vjp_fn(np.ones_like(X))
    np.testing.assert_allclose(np.asarray(gy), np.sin(X).sum(), rtol=1e-5)
    _, f_jvp = api.linearize(lambda x: jf(x, 2.0), X)
    np.testing.assert_allclose(np.asarray(f_jvp(np.ones_like(X))), np.cos(X) * 2 + 2 * X,
                               rtol=1e-5)
    # second order
    h = api.grad(api.grad(lambda x: sj.jit(lambda z: lax.sin(z) * z)(x)))(0.5)
    np.testing.assert_allclose(float(h), -np.sin(0.5) * 0.5 + 2 * np.cos(0.5), rtol=1e-5)


def test_grad_of_jit_reuses_the_compiled_programs() -> None:
    from lamina_sharded_jit import execution
    jf = sj.jit(f)
    g = api.grad(lambda x: jf(x, 2.0))
    g(0.5)
    before = execution.stats["compilations"], execution.stats["lowerings"]
    for v in (0.1, 0.2, 0.3):
        np.testing.assert_allclose(float(g(v)), np.cos(v) * 2 + 2 * v, rtol=1e-5)
    assert (execution.stats["compilations"], execution.stats["lowerings"]) == before


def test_vmap_of_jit_and_jit_of_vmap() -> None:
    xs = np.stack([X, X * 2])
    out = api.vmap(sj.jit(f), in_axes=(0, None))(xs, 3.0)
    np.testing.assert_allclose(np.asarray(out), ref(xs, 3.0), rtol=1e-6)
    out = sj.jit(api.vmap(f, in_axes=(1, None)))(xs, 3.0)
    np.testing.assert_allclose(np.asarray(out), ref(xs, 3.0).T, rtol=1e-6)
    out = api.vmap(sj.jit(lambda a, b: f(a, b)), in_axes=(None, 0))(X, np.array([1., 2.],
                                                                                  np.float32))
    np.testing.assert_allclose(np.asarray(out), np.stack([ref(X, 1.), ref(X, 2.)]), rtol=1e-6)


def test_named_axis_effects_propagate_through_jit() -> None:
    from lamina_tracing_core.lax import collectives
    jpsum = sj.jit(lambda x: collectives.psum(x, "i"))
    out = api.vmap(jpsum, axis_name="i")(X)
    np.testing.assert_allclose(np.asarray(out), np.full(4, X.sum()), rtol=1e-5)
    jaxpr = api.make_jaxpr(jpsum, axis_env=[("i", 4)])(1.0)
    eqn = jaxpr.jaxpr.eqns[0]
    assert eqn.primitive is sj.pjit_p and NamedAxisEffect("i") in eqn.effects
    # a psum of an unbatched value over the vmapped axis still batches the jit
    out = api.vmap(lambda x: sj.jit(lambda y: collectives.psum(y, "i"))(2.0),
                   axis_name="i")(X)
    np.testing.assert_allclose(np.asarray(out), np.full(4, 8.0))


def test_jit_of_jit_and_closures_over_outer_tracers() -> None:
    jf = sj.jit(sj.jit(f))
    np.testing.assert_allclose(np.asarray(jf(X, 2.0)), ref(X, 2.0), rtol=1e-6)

    def outer(x: Any) -> Any:
        return sj.jit(lambda y: y * x)(3.0)  # the inner function closes over a tracer

    np.testing.assert_allclose(float(api.grad(outer)(2.0)), 3.0)
    np.testing.assert_allclose(np.asarray(sj.jit(api.vmap(outer))(X)), X * 3.0, rtol=1e-6)
    jaxpr = api.make_jaxpr(outer)(2.0)
    validate_jaxpr_debug_info(jaxpr)
    inner = jaxpr.jaxpr.eqns[0].params["jaxpr"].jaxpr.debug_info
    assert inner.arg_names == (None, "y")  # the closed-over value has no name


def test_control_flow_inside_and_around_jit() -> None:
    body = sj.jit(lambda i, c: c * 1.5)
    out = sj.jit(lambda x: fori_loop(0, 3, body, x))(X)
    np.testing.assert_allclose(np.asarray(out), X * 1.5 ** 3, rtol=1e-5)
    w = sj.jit(lambda x: while_loop(lambda c: c[0] < 10.0, lambda c: c + 1.0, x))(X)
    assert float(np.asarray(w)[0]) >= 10.0
    c = sj.jit(lambda p, x: cond(p, sj.jit(lambda z: z + 1), lambda z: z - 1, x))
    np.testing.assert_allclose(np.asarray(c(True, X)), X + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(c(False, X)), X - 1, rtol=1e-6)
    s = api.grad(lambda x: scan(lambda carry, _: (sj.jit(lax.sin)(carry), None), x,
                                None, length=2)[0])(0.3)
    np.testing.assert_allclose(float(s), np.cos(np.sin(0.3)) * np.cos(0.3), rtol=1e-5)


def test_custom_jvp_and_checkpoint_inside_jit() -> None:
    @custom_jvp
    def clipped(x: Any) -> Any:
        return lax.sin(x)

    @clipped.defjvp
    def clipped_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        return clipped(x), t * 7.0

    g = api.grad(sj.jit(lambda x: clipped(x)))(0.2)
    np.testing.assert_allclose(float(g), 7.0)
    r = api.grad(checkpoint(lambda x: sj.jit(lambda y: lax.sin(y) * y)(x)))(0.4)
    np.testing.assert_allclose(float(r), np.cos(0.4) * 0.4 + np.sin(0.4), rtol=1e-5)


def test_dce_prunes_unused_outputs_and_inputs() -> None:
    from lamina_tracing_core import partial_eval as pe
    jaxpr = api.make_jaxpr(lambda x, y: sj.jit(lambda a, b: (a * 2, b * 3))(x, y)[0])(1.0, 2.0)
    new, used = pe.dce_jaxpr(jaxpr.jaxpr, [True])
    eqn = new.eqns[0]
    assert eqn.primitive is sj.pjit_p and len(eqn.outvars) == 1 and len(eqn.invars) == 1
    assert used == [True, False]
    assert eqn.params["jaxpr"].jaxpr.debug_info.arg_names == ("a",)
    assert len(eqn.params["in_shardings"]) == len(eqn.params["donated_invars"]) == 1
    validate_jaxpr_debug_info(new)


def test_abstract_eval_checks_argument_types() -> None:
    jaxpr = api.make_jaxpr(sj.jit(f))(X, 2.0)
    params = jaxpr.jaxpr.eqns[0].params
    with pytest.raises(TypeError, match="argument x has type float32\\[3\\]"):
        sj.pjit_p.bind(np.ones(3, np.float32), 2.0, **params)


def test_outputs_are_lamina_arrays_with_shardings() -> None:
    out = sj.jit(lambda x: x + 1)(X)
    assert isinstance(out, px.Array)
    assert out.sharding == px.SingleDeviceSharding(px.devices()[0])
    assert not out.committed
    committed = px.device_put(X, px.devices()[0])
    assert sj.jit(lambda x: x + 1)(committed).committed
