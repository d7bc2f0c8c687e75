"""Control flow, checkpoint and custom derivatives nested in each other, under
grad, vmap and their compositions, against unnested references."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import core, lax
from lamina_tracing_core.checkpoint import checkpoint
from lamina_tracing_core.control_flow import cond, scan, while_loop
from lamina_tracing_core.custom_derivatives import custom_jvp, custom_vjp

f32 = np.float32


YS = np.array([0.3, 1.2, -0.4], f32)


def nested(x: Any, ys: Any) -> Any:
    """A scan whose body has a cond and an inner scan."""
    def body(c: Any, y: Any) -> Any:
        c2 = cond(c > 0.5, lambda a: lax.sin(a) * y, lambda a: a * y + 1.0, c)
        inner = scan(lambda cc, z: (cc * z + c2, cc), c2, np.array([0.5, 0.7], f32))[0]
        return inner, c2 * c

    c, out = scan(body, x, ys)
    return c + out.sum()


@custom_jvp
def relu3(x: Any) -> Any:
    return lax.max(x, f32(0))


relu3.defjvp(lambda p, t: (relu3(p[0]),
                           lax.select(p[0] > 0, t[0], lax.full_like(t[0], 0.0)) * 3.0))


@custom_vjp
def grad5(x: Any) -> Any:
    return x


grad5.defvjp(lambda x: (x, None), lambda _, g: (g * 5.0,))


def test_nested_scan_cond_scan_derivatives() -> None:
    T.check_grads(nested, (f32(0.7), YS), order=2, modes=("fwd", "rev"))


def test_nested_under_vmap_and_vmap_of_grad() -> None:
    xs = np.array([0.1, 0.7, 0.9], f32)
    np.testing.assert_allclose(tc.vmap(nested, in_axes=(0, None))(xs, YS),
                               [nested(x, YS) for x in xs], rtol=1e-5)
    g = tc.vmap(tc.grad(nested), in_axes=(0, None))(xs, YS)
    np.testing.assert_allclose(g, [tc.grad(nested)(x, YS) for x in xs], rtol=1e-5)
    jaxpr = tc.make_jaxpr(tc.vmap(tc.grad(nested), in_axes=(0, None)))(xs, YS)
    tc.validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)


def test_hessian_through_scan_and_cond() -> None:
    h = tc.hessian(nested)(f32(0.7), YS)
    eps = 1e-2
    g = tc.grad(nested)
    fd = (g(f32(0.7 + eps), YS) - g(f32(0.7 - eps), YS)) / (2 * eps)
    np.testing.assert_allclose(h, fd, rtol=5e-2)


def test_while_inside_scan_forward_mode_and_vmap() -> None:
    def h(x: Any) -> Any:
        body = lambda c, _: (while_loop(lambda v: v < 5.0, lambda v: v * 1.5 + c,  # noqa: E731
                                        c + 0.1), c)
        return scan(body, x, None, length=3)[0]

    T.check_grads(h, (f32(0.3),), order=1, modes=("fwd",))
    np.testing.assert_allclose(tc.vmap(h)(np.array([0.3, 0.5], f32)),
                               [h(f32(0.3)), h(f32(0.5))], rtol=1e-6)


def test_vmap_while_with_cond_body_batched_predicate() -> None:
    def w(x: Any) -> Any:
        return while_loop(lambda v: v[0] < 10.0,
                          lambda v: (cond(v[0] > 2, lambda a: a * 2, lambda a: a + 1, v[0]),
                                     v[1] + 1), (x, np.int32(0)))

    xs = np.array([0.5, 3.0, 20.0], f32)
    out = tc.vmap(w)(xs)
    for i, x in enumerate(xs):
        want = w(x)
        np.testing.assert_allclose(out[0][i], want[0])
        assert int(out[1][i]) == int(want[1])


@pytest.mark.parametrize("fn,slope", [(relu3, 3.0), (grad5, 5.0)])
def test_custom_rules_in_a_batched_scan_body_under_grad(fn: Any, slope: float) -> None:
    """The rules of a custom function staged inside a vmapped scan body are
    used by a later grad (the batched rule is traced while vmap is alive)."""
    ys = np.array([0.3, 1.2, 0.4], f32)
    xs = np.array([0.1, 0.7, 0.9], f32)

    def one(a: Any) -> Any:
        return scan(lambda c, y: (fn(c * y + a), c), a, ys)[0]

    g = tc.grad(lambda x: tc.vmap(one)(x).sum())(xs)
    np.testing.assert_allclose(g, [tc.grad(one)(x) for x in xs], rtol=1e-5)
    dc = 1.0
    for y in ys:
        dc = slope * (y * dc + 1.0)
    np.testing.assert_allclose(g, dc, rtol=1e-5)


def test_checkpointed_cond_with_custom_jvp_in_scan() -> None:
    @custom_jvp
    def sq(x: Any) -> Any:
        return x * x

    sq.defjvp(lambda p, t: (sq(p[0]), 2 * p[0] * t[0]))

    def k(x: Any, ys: Any) -> Any:
        step = checkpoint(lambda c, y: (cond(y > 0, lambda a: sq(a) * 0.5, lax.sin, c), c))
        return scan(step, x, ys)[0]

    T.check_grads(k, (f32(0.7), YS), order=2, modes=("fwd", "rev"))
    xs = np.array([0.1, 0.7, 0.9], f32)
    g = tc.vmap(tc.grad(k), in_axes=(0, None))(xs, YS)
    np.testing.assert_allclose(g, [tc.grad(k)(x, YS) for x in xs], rtol=1e-5)
    jaxpr = tc.make_jaxpr(tc.grad(k))(f32(0.7), YS)
    tc.validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)


@custom_vjp
def sin_vjp10(x: Any) -> Any:
    return lax.sin(x)


sin_vjp10.defvjp(lambda x: (lax.sin(x), lax.cos(x)), lambda c, g: (g * c * 10.0,))


@custom_jvp
def sin_jvp10(x: Any) -> Any:
    return lax.sin(x)


sin_jvp10.defjvp(lambda p, t: (sin_jvp10(p[0]), lax.cos(p[0]) * t[0] * 10.0))


@pytest.mark.parametrize("fn", [sin_vjp10, sin_jvp10])
@pytest.mark.parametrize("policy", [None, "everything"])
def test_custom_rules_inside_checkpoint(fn: Any, policy: Any) -> None:
    from lamina_tracing_core.checkpoint import checkpoint_policies
    pol = checkpoint_policies.everything_saveable if policy else None
    g = checkpoint(lambda x: fn(x * 2.0) * 3.0, policy=pol)
    np.testing.assert_allclose(tc.grad(g)(f32(0.3)), np.cos(0.6) * 60.0, rtol=1e-5)
    np.testing.assert_allclose(tc.vmap(tc.grad(g))(np.array([0.3, 0.1], f32)),
                               np.cos([0.6, 0.2]) * 60.0, rtol=1e-5)
    jaxpr = tc.make_jaxpr(tc.grad(g))(f32(0.3))
    tc.validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)
