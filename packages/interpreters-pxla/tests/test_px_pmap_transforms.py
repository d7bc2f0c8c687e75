"""Transformations of pmap (each WrappedFun -> WrappedFun, updating the debug
info that reaches the lowered module): jvp, grad/vjp (partial evaluation and
the transposed map), vmap of pmap and pmap of vmap, checkpoint, closures over
outer tracers, and pmap equations inside staged jaxprs (the lowering rule
that jit of pmap needs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import pmap_execution
from lamina_interpreters_pxla.executable import BuildOptions, compile_module, result_handler
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_config import chunked_shards_scope
from lamina_interpreters_pxla.pmap_lowering import jaxpr_replicas
from lamina_interpreters_pxla.sharding import GSPMDSharding, SingleDeviceSharding
from lamina_interpreters_pxla.transfer import shard_args
from lamina_mlir_lowering import LoweringError, lower_jaxpr_to_module
from lamina_tracing_core import api, checkpoint, lax
from lamina_tracing_core.avals import ShapedArray

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N,
                                reason="needs 8 devices: run with XLA_FLAGS="
                                       "--xla_force_host_platform_device_count=8")

X = (np.arange(N * 3, dtype=np.float32).reshape(N, 3) - 10.0) / 7.0
Y = np.linspace(0.5, 1.5, N * 3, dtype=np.float32).reshape(N, 3)


@pytest.fixture(params=[True, False], ids=["chunked", "classic"])
def layout(request: Any) -> Any:
    with chunked_shards_scope(request.param):
        yield request.param


def body(x: Any, y: Any) -> Any:
    return lax.sin(x) * y + lax.psum(x * x, "i")


def body_np(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sin(x) * y + (x * x).sum(0)


def last_lowering() -> Any:
    """The module of the pmap computation the impl rule ran last."""
    return pmap_execution.recent_executables[-1].lowering


def lowerings_since(n: int) -> list[Any]:
    return [exe.lowering for exe in pmap_execution.recent_executables[n:]]


def mark() -> int:
    pmap_execution.recent_executables.clear()
    return 0


def test_values_and_names_of_plain_call(layout: bool) -> None:
    out = pmap(body, axis_name="i")(X, Y)
    np.testing.assert_allclose(np.asarray(out), body_np(X, Y), rtol=1e-5)
    assert last_lowering().arg_names == ("x", "y")
    assert last_lowering().result_names == ("result",)


# --- jvp ------------------------------------------------------------------------------------
def test_jvp_of_pmap_values_and_tangent_names(layout: bool) -> None:
    tx, ty = np.ones_like(X), np.full_like(Y, 0.5)
    out, tan = api.jvp(pmap(body, axis_name="i"), (X, Y), (tx, ty))
    np.testing.assert_allclose(np.asarray(out), body_np(X, Y), rtol=1e-5)
    want = np.cos(X) * tx * Y + np.sin(X) * ty + (2 * X * tx).sum(0)
    np.testing.assert_allclose(np.asarray(tan), want, rtol=1e-5, atol=1e-5)
    lowering = last_lowering()
    assert lowering.arg_names == ("x", "y", "tangent(x)", "tangent(y)")
    assert lowering.result_names == ("result", "tangent(result)")


def test_jvp_with_a_zero_tangent_keeps_names_aligned() -> None:
    out, tan = api.jvp(lambda x: pmap(body, axis_name="i")(x, Y), (X,), (np.ones_like(X),))
    np.testing.assert_allclose(np.asarray(tan), np.cos(X) * Y + (2 * X).sum(0), rtol=1e-5)
    names = last_lowering().arg_names
    assert "tangent(x)" in names and "tangent(y)" not in names


# --- grad / vjp -------------------------------------------------------------------------------
def loss(x: Any, y: Any) -> Any:
    return pmap(body, axis_name="i")(x, y).sum()


def numeric_grad(f: Any, x: np.ndarray, eps: float = 1e-2) -> np.ndarray:
    g = np.zeros_like(x, dtype=np.float64)
    flat = x.reshape(-1)
    for k in range(flat.size):
        up, down = flat.copy(), flat.copy()
        up[k] += eps
        down[k] -= eps
        g.reshape(-1)[k] = (float(f(up.reshape(x.shape))) - float(f(down.reshape(x.shape)))) \
            / (2 * eps)
    return g


def loss_np(x: np.ndarray) -> float:
    return float(body_np(x.astype(np.float64), Y.astype(np.float64)).sum())


def test_grad_of_pmap_with_collectives_matches_finite_differences(layout: bool) -> None:
    g = api.grad(loss)(X, Y)
    np.testing.assert_allclose(np.asarray(g), numeric_grad(loss_np, X), rtol=1e-3, atol=1e-3)
    # lamina's own forward values agree with the finite differences too
    lam = numeric_grad(lambda x: np.asarray(loss(x.astype(np.float32), Y)), X, eps=5e-2)
    np.testing.assert_allclose(np.asarray(g), lam, rtol=2e-2, atol=2e-2)


def test_grad_of_pmap_with_all_gather_and_ppermute(layout: bool) -> None:
    perm = [(j, (j + 1) % N) for j in range(N)]

    def f(x: Any) -> Any:
        gathered = lax.all_gather(x, "i")
        shifted = lax.ppermute(x, "i", perm)
        return (lax.sin(gathered).sum(0) * shifted).sum()

    def total(x: Any) -> Any:
        return pmap(f, axis_name="i")(x).sum()

    def total_np(x: np.ndarray) -> float:
        shifted = np.roll(x, 1, axis=0)
        return float((np.sin(x).sum(0)[None] * shifted).sum())

    g = api.grad(total)(X)
    np.testing.assert_allclose(np.asarray(g), numeric_grad(total_np, X.astype(np.float64)),
                               rtol=1e-3, atol=1e-3)


def test_grad_names_the_transposed_map() -> None:
    start = mark()
    api.grad(loss, argnums=(0, 1))(X, Y)
    new = lowerings_since(start)
    forward = [low for low in new if low.arg_names == ("x", "y")]
    assert forward, [low.arg_names for low in new]
    transposed = [low for low in new
                  if any(n and n.startswith("cotangent(") for n in low.arg_names)]
    assert transposed, [low.arg_names for low in new]
    outs = transposed[-1].result_names
    assert all(n is not None and n.startswith("cotangent(") for n in outs)
    assert any("x" in n for n in outs) and any("y" in n for n in outs)


def test_vjp_of_pmap(layout: bool) -> None:
    out, vjp_fun = api.vjp(pmap(body, axis_name="i"), X, Y)
    ct = np.linspace(-1, 1, N * 3, dtype=np.float32).reshape(N, 3)
    gx, gy = vjp_fun(ct)
    np.testing.assert_allclose(np.asarray(gx), np.cos(X) * Y * ct + 2 * X * ct.sum(0),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gy), np.sin(X) * ct, rtol=1e-5, atol=1e-6)


def test_grad_with_broadcast_argument_sums_over_devices(layout: bool) -> None:
    w = np.array([1.0, 2.0, 3.0], np.float32)

    def f(w: Any) -> Any:
        return pmap(lambda x, w: lax.sin(x) * w, in_axes=(0, None))(X, w).sum()

    np.testing.assert_allclose(np.asarray(api.grad(f)(w)), np.sin(X).sum(0), rtol=1e-5)


def test_grad_through_closure_over_an_outer_tracer() -> None:
    def f(w: Any) -> Any:
        return pmap(lambda x: lax.sin(x) * w)(X).sum()

    np.testing.assert_allclose(np.asarray(api.grad(f)(np.float32(2.0))), np.sin(X).sum(),
                               rtol=1e-5)


# --- vmap ---------------------------------------------------------------------------------------
def test_vmap_of_pmap(layout: bool) -> None:
    xs = np.stack([X, 2 * X, -X])
    out = api.vmap(pmap(body, axis_name="i"), in_axes=(0, None))(xs, Y)
    np.testing.assert_allclose(np.asarray(out), np.stack([body_np(x, Y) for x in xs]),
                               rtol=1e-5)
    assert last_lowering().arg_names == ("x", "y")


def test_vmap_of_pmap_over_another_axis(layout: bool) -> None:
    xs = np.stack([X, 2 * X], axis=2)  # [N, 3, 2]
    out = api.vmap(pmap(body, axis_name="i"), in_axes=(2, None), out_axes=1)(xs, Y)
    want = np.stack([body_np(xs[..., k], Y) for k in range(2)], axis=1)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)


def test_pmap_of_vmap(layout: bool) -> None:
    xs = np.arange(N * 4 * 3, dtype=np.float32).reshape(N, 4, 3)

    def per_device(rows: Any) -> Any:
        return api.vmap(lambda r: r * lax.psum(r, "i"))(rows)

    out = pmap(per_device, axis_name="i")(xs)
    np.testing.assert_allclose(np.asarray(out), xs * xs.sum(0), rtol=1e-6)


def test_vmap_with_axis_name_inside_pmap(layout: bool) -> None:
    xs = np.arange(N * 4, dtype=np.float32).reshape(N, 4)

    def per_device(row: Any) -> Any:
        return api.vmap(lambda v: lax.psum(v, ("i", "b")), axis_name="b")(row)

    out = pmap(per_device, axis_name="i")(xs)
    np.testing.assert_allclose(np.asarray(out), np.full(xs.shape, xs.sum()))


# --- checkpoint ------------------------------------------------------------------------------
def test_checkpoint_of_pmap(layout: bool) -> None:
    f = checkpoint.checkpoint(pmap(body, axis_name="i"))
    np.testing.assert_allclose(np.asarray(f(X, Y)), body_np(X, Y), rtol=1e-5)
    g = api.grad(lambda x: f(x, Y).sum())(X)
    np.testing.assert_allclose(np.asarray(g), np.asarray(api.grad(loss)(X, Y)), rtol=1e-5)


def test_pmap_of_checkpoint(layout: bool) -> None:
    f = pmap(checkpoint.checkpoint(body), axis_name="i")
    g = api.grad(lambda x: f(x, Y).sum())(X)
    np.testing.assert_allclose(np.asarray(g), np.asarray(api.grad(loss)(X, Y)), rtol=1e-5)


# --- staged pmap equations -------------------------------------------------------------------------
def test_make_jaxpr_of_pmap_keeps_the_names_and_evaluates() -> None:
    closed = api.make_jaxpr(pmap(body, axis_name="i"))(X, Y)
    eqn, = closed.jaxpr.eqns
    dbg = eqn.params["call_jaxpr"].debug_info
    assert dbg.arg_names == ("x", "y") and dbg.result_paths == ("result",)
    assert dbg.traced_for == "pmap"
    out, = api.eval_jaxpr(closed.jaxpr, closed.consts, X, Y)
    np.testing.assert_allclose(np.asarray(out), body_np(X, Y), rtol=1e-5)
    assert last_lowering().arg_names == ("x", "y")


def test_pmap_equation_lowers_in_a_replica_mode_module() -> None:
    # What jit of pmap needs: the enclosing computation compiled with
    # jaxpr_replicas(jaxpr) replicas, every replica holding the whole input.
    closed = api.make_jaxpr(lambda x, y: pmap(body, axis_name="i")(x, y) * 2)(X, Y)
    replicas = jaxpr_replicas(closed)
    assert replicas == N
    lowering = lower_jaxpr_to_module("jit_outer", closed, num_replicas=replicas)
    devices = px.devices()[:N]
    loaded = compile_module(lowering.module, devices,
                            BuildOptions(num_replicas=N, use_shardy=False))
    replicated = GSPMDSharding.get_replicated(devices)
    args = shard_args([X, Y], [replicated, replicated])
    results = loaded.execute_sharded(args)
    out, = results.consume_with_handlers([result_handler(ShapedArray(X.shape, X.dtype),
                                                         replicated)])
    np.testing.assert_allclose(np.asarray(px.Array(out)), body_np(X, Y) * 2, rtol=1e-5)


def test_pmap_equation_outside_replica_mode_lowers_batched() -> None:
    # A single-replica module (jit of pmap): the map becomes its vmapped body.
    closed = api.make_jaxpr(pmap(body, axis_name="i"))(X, Y)
    lowering = lower_jaxpr_to_module("jit_body", closed)
    assert "all_reduce" not in lowering.as_text()
    device = px.devices()[0]
    loaded = compile_module(lowering.module, [device])
    s = SingleDeviceSharding(device)
    results = loaded.execute_sharded(shard_args([X, Y], [s, s]))
    out, = results.consume_with_handlers([result_handler(ShapedArray(X.shape, X.dtype), s)])
    np.testing.assert_allclose(np.asarray(px.Array(out)), body_np(X, Y), rtol=1e-5)


def test_pmap_equation_with_too_few_replicas_is_a_clear_error() -> None:
    closed = api.make_jaxpr(pmap(body, axis_name="i"))(X, Y)
    with pytest.raises(LoweringError, match=r"pmap of body over an axis of size 8 needs 8 "
                                            r"replicas, but the enclosing computation has 2"):
        lower_jaxpr_to_module("pmap_outer", closed, num_replicas=2)


