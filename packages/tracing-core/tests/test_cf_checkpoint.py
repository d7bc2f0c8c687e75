"""checkpoint / remat: values, policies (what is saved vs recomputed), autodiff,
vmap, DCE and debug info."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import core, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.checkpoint import checkpoint, checkpoint_policies, remat, remat_p
from lamina_tracing_core.control_flow import scan
from lamina_tracing_core.jaxpr import ClosedJaxpr, validate_jaxpr_debug_info

f32 = np.float32


def _remat_eqns(jaxpr: Any) -> list[Any]:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return [e for e in inner.eqns if e.primitive is remat_p]


def two_layers(x: Any, w: Any) -> Any:
    y = lax.sin(x @ w)
    return lax.sin(y @ w).sum()


def _args() -> tuple[Any, Any]:
    rng = np.random.RandomState(0)
    return (rng.standard_normal((2, 3)).astype(f32),
            (0.3 * rng.standard_normal((3, 3))).astype(f32))


def _backward_counts(policy: Any) -> Counter[str]:
    """Primitive counts of the checkpoint equation the backward pass runs."""
    jaxpr = tc.make_jaxpr(tc.grad(checkpoint(two_layers, policy=policy)))(*_args())
    (eqn,) = _remat_eqns(jaxpr)
    assert eqn.params["differentiated"] is True
    return Counter(e.primitive.name for e in eqn.params["jaxpr"].eqns)


# --- values and staging ------------------------------------------------------------------------
def test_checkpoint_values_and_staging() -> None:
    x, w = _args()
    np.testing.assert_allclose(checkpoint(two_layers)(x, w), two_layers(x, w), rtol=1e-6)
    jaxpr = tc.make_jaxpr(checkpoint(two_layers))(x, w)
    (eqn,) = _remat_eqns(jaxpr)
    assert set(eqn.params) == {"jaxpr", "prevent_cse", "differentiated", "policy"}
    assert eqn.params["differentiated"] is False and eqn.params["prevent_cse"] is True
    dbg = eqn.params["jaxpr"].debug_info
    assert dbg.traced_for == "checkpoint / remat"
    assert dbg.arg_names == ("x", "w")
    assert dbg.result_paths == ("result",)
    assert remat is checkpoint


def test_static_argnums_and_kwargs() -> None:
    def f(x: Any, n: int, scale: Any = 1.0) -> Any:
        for _ in range(n):
            x = lax.sin(x) * scale
        return x

    g = checkpoint(f, static_argnums=(1,))
    np.testing.assert_allclose(g(f32(0.5), 3, scale=f32(2.0)), f(f32(0.5), 3, f32(2.0)),
                               rtol=1e-6)
    (eqn,) = _remat_eqns(tc.make_jaxpr(lambda x, s: g(x, 2, scale=s))(f32(0.5), f32(2.0)))
    assert eqn.params["jaxpr"].debug_info.arg_names == ("x", "scale")


def test_closed_over_tracers_are_operands() -> None:
    def f(x: Any, y: Any) -> Any:
        return checkpoint(lambda v: lax.sin(v * y))(x)

    T.check_grads(f, (f32(0.4), f32(1.7)), order=1, modes=("fwd", "rev"))


# --- policies ------------------------------------------------------------------------------------
def test_nothing_saveable_recomputes_the_forward_pass() -> None:
    counts = _backward_counts(None)
    assert counts["dot_general"] == 4  # 2 recomputed + 2 transposed
    assert counts["sin"] >= 1  # the first layer's output is recomputed
    assert _backward_counts(checkpoint_policies.nothing_saveable) == counts


def test_dots_saveable_saves_only_dots() -> None:
    counts = _backward_counts(checkpoint_policies.dots_saveable)
    assert counts["dot_general"] == 2  # only the transposed dots
    assert counts["cos"] == 2  # the elementwise derivatives are recomputed
    assert _backward_counts(checkpoint_policies.checkpoint_dots) == counts


def test_everything_saveable_recomputes_nothing() -> None:
    counts = _backward_counts(checkpoint_policies.everything_saveable)
    assert counts["dot_general"] == 2
    assert counts["sin"] == 0 and counts["cos"] == 0


def test_dots_with_no_batch_dims_saveable() -> None:
    def batched(x: Any, w: Any) -> Any:
        y = lax.dot_general(x, w, (((2,), (1,)), ((0,), (0,))))  # has a batch dim
        return lax.sin(lax.dot_general(lax.sin(y), w[0], (((2,), (0,)), ((), ())))).sum()

    rng = np.random.RandomState(3)
    x = rng.standard_normal((2, 3, 3)).astype(f32)
    w = (0.3 * rng.standard_normal((2, 3, 3))).astype(f32)
    jaxpr = tc.make_jaxpr(tc.grad(checkpoint(
        batched, policy=checkpoint_policies.dots_with_no_batch_dims_saveable)))(x, w)
    (eqn,) = _remat_eqns(jaxpr)
    counts = Counter(e.primitive.name for e in eqn.params["jaxpr"].eqns)
    # the batched dot is recomputed, the unbatched one is saved
    assert counts["dot_general"] == 3
    T.check_grads(checkpoint(batched, policy=checkpoint_policies.dots_with_no_batch_dims_saveable),
                  (x, w), order=1, modes=("rev",))


@pytest.mark.parametrize("policy", [None, checkpoint_policies.dots_saveable,
                                    checkpoint_policies.everything_saveable])
def test_checkpoint_gradients_match(policy: Any) -> None:
    x, w = _args()
    g = tc.grad(checkpoint(two_layers, policy=policy), argnums=(0, 1))(x, w)
    want = tc.grad(two_layers, argnums=(0, 1))(x, w)
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    T.check_grads(checkpoint(two_layers, policy=policy), (x, w), order=2, modes=("fwd", "rev"))


# --- transformations and debug info --------------------------------------------------------------
def test_grad_jaxpr_debug_info() -> None:
    jaxpr = tc.make_jaxpr(tc.grad(checkpoint(two_layers)))(*_args())
    validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)
    (eqn,) = _remat_eqns(jaxpr)
    dbg = eqn.params["jaxpr"].debug_info
    assert dbg.func_src_info.startswith("transpose(")
    assert len(dbg.arg_names) == len(eqn.params["jaxpr"].invars)


def test_vmap_and_jvp_of_checkpoint() -> None:
    rng = np.random.RandomState(2)
    xs = rng.standard_normal((4, 2, 3)).astype(f32)
    _, w = _args()
    out = tc.vmap(checkpoint(two_layers), in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(out, [two_layers(x, w) for x in xs], rtol=1e-5)
    g = tc.vmap(tc.grad(checkpoint(two_layers)), in_axes=(0, None))(xs, w)
    for i, x in enumerate(xs):
        np.testing.assert_allclose(g[i], tc.grad(two_layers)(x, w), rtol=1e-5, atol=1e-6)
    jaxpr = tc.make_jaxpr(tc.vmap(tc.grad(checkpoint(two_layers)), in_axes=(0, None)))(xs, w)
    validate_jaxpr_debug_info(jaxpr)
    t = tc.jvp(checkpoint(two_layers), (xs[0], w), (xs[1], w))
    want = tc.jvp(two_layers, (xs[0], w), (xs[1], w))
    np.testing.assert_allclose(t[1], want[1], rtol=1e-5)


def test_checkpointed_scan_body_and_scan_inside_checkpoint() -> None:
    def step(c: Any, x: Any) -> Any:
        return lax.sin(c * x) + c, c

    def f(c: Any, xs: Any) -> Any:
        return scan(checkpoint(step), c, xs)[0]

    def g(c: Any, xs: Any) -> Any:
        return checkpoint(lambda c_, xs_: scan(step, c_, xs_)[0])(c, xs)

    xs = np.linspace(0.1, 0.9, 4).astype(f32)
    for fn in (f, g):
        np.testing.assert_allclose(fn(f32(0.3), xs), scan(step, f32(0.3), xs)[0], rtol=1e-6)
        T.check_grads(fn, (f32(0.3), xs), order=1, modes=("fwd", "rev"))
        validate_jaxpr_debug_info(tc.make_jaxpr(tc.grad(fn))(f32(0.3), xs))


def test_remat_dce_rule() -> None:
    def f(x: Any) -> Any:
        return checkpoint(lambda v: (lax.sin(v), lax.cos(v) * 2))(x)

    jaxpr = tc.make_jaxpr(f)(f32(0.1)).jaxpr
    (eqn,) = _remat_eqns(jaxpr)
    used, new_eqn = pe.dce_rules[remat_p]([False, True], eqn)
    assert used == [True]
    names = Counter(e.primitive.name for e in new_eqn.params["jaxpr"].eqns)
    assert names["sin"] == 0 and names["cos"] == 1
    assert new_eqn.params["jaxpr"].debug_info.result_paths == ("result[1]",)
    new, _ = pe.dce_jaxpr(jaxpr, [False, True])
    validate_jaxpr_debug_info(new)
