"""Eager ``scan``/``while_loop``/``fori_loop``/``cond`` run as one compiled
program each, as JAX 0.10.2 dispatches them: the results carry XLA's bits for
the whole loop (recorded with JAX 0.10.2 on CPU, float32), not those of the
body's operations run one by one; side effects and checks still happen."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import lax
from lamina.experimental import checkify


def _bits(x: Any) -> str:
    return np.asarray(x).tobytes().hex()


def test_eager_scan_has_jax_bits() -> None:
    def step(c: Any, x: Any) -> Any:
        c = c * 1.0001 + jnp.sin(x)
        return c, c * 2

    c, ys = lax.scan(step, jnp.ones(3, jnp.float32), jnp.arange(1000, dtype=jnp.float32))
    assert _bits(c[0]) == "f01e983f"  # 1.1884441 (op by op: 1.1884433)
    assert np.asarray(ys).sum(dtype=np.float64) == float.fromhex("0x1.7983097520000p+13")


def test_eager_grad_of_scan_has_jax_bits() -> None:
    def loss(w: Any) -> Any:
        def body(c: Any, x: Any) -> Any:
            return jnp.tanh(c * w + jnp.sin(x)) * 1.7 + c * 0.3, None
        return lax.scan(body, jnp.float32(0.5), jnp.arange(200, dtype=jnp.float32) * 0.37)[0]

    g = lamina.grad(loss)(jnp.float32(0.9))
    assert _bits(g) == "c1057440"  # 3.8128512
    assert _bits(lamina.jit(lamina.grad(loss))(jnp.float32(0.9))) == "c1057440"


def test_eager_fori_and_while_have_jax_bits() -> None:
    w = lax.fori_loop(0, 300, lambda i, c: c * 0.999 + jnp.cos(c * i), jnp.float32(0.25))
    assert _bits(w) == "f9b5acc0"  # -5.3972135
    v = lax.while_loop(lambda c: c[1] < 500,
                       lambda c: (jnp.exp(jnp.sin(c[0])) * 0.9 + c[0] * 0.1, c[1] + 1),
                       (jnp.float32(0.3), 0))[0]
    assert _bits(v) == "1a4c2340"  # 2.5515199


def test_eager_cond_and_switch_pick_their_branch() -> None:
    assert float(lax.cond(True, lambda x: x + 1, lambda x: x - 1, jnp.float32(2))) == 3.0
    assert float(lax.cond(jnp.bool_(False), lambda x: x + 1, lambda x: x - 1, 2.0)) == 1.0
    assert float(lax.switch(5, [lambda x: x, lambda x: x * 3], jnp.float32(2))) == 6.0
    assert float(lax.switch(-1, [lambda x: x, lambda x: x * 3], jnp.float32(2))) == 2.0


def test_callbacks_inside_an_eager_scan_run_in_order() -> None:
    seen: list[tuple[int, int]] = []

    def body(c: Any, x: Any) -> Any:
        lamina.debug.callback(lambda x, c: seen.append((int(x), int(c))), x, c, ordered=True)
        return c + x, None

    out, _ = lax.scan(body, 0, jnp.arange(4))
    lamina.effects_barrier()
    assert int(out) == 6
    assert seen == [(0, 0), (1, 0), (2, 1), (3, 3)]


def test_checkify_inside_an_eager_loop_still_reports() -> None:
    def f(x: Any) -> Any:
        def body(i: Any, c: Any) -> Any:
            checkify.check(c < 10, "carry too large: {c}", c=c)
            return c + i
        return lax.fori_loop(0, 5, body, x)

    err, out = checkify.checkify(f)(jnp.int32(0))
    assert int(out) == 10 and err.get() is None
    err, _ = checkify.checkify(f)(jnp.int32(8))
    message = err.get()
    assert message is not None and "carry too large: 11" in message


def test_nan_inside_an_eager_scan_is_reported() -> None:
    # JAX 0.10.2: "invalid value (nan) encountered in scan".
    lamina.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in"):
            lax.scan(lambda c, x: (jnp.log(c - x), None), jnp.float32(1), jnp.arange(3.0))
    finally:
        lamina.config.update("jax_debug_nans", False)


def test_disable_jit_runs_the_loop_in_python() -> None:
    def loss(w: Any) -> Any:
        return lax.scan(lambda c, x: (c * w + x, c), 1.0, jnp.arange(3.0))[0]

    with lamina.disable_jit():
        assert float(lax.scan(lambda c, x: (c + x, c), 0.0, jnp.arange(3.0))[0]) == 3.0
        assert int(lax.while_loop(lambda c: c < 3, lambda c: c + 1, 0)) == 3
        assert float(lax.cond(True, lambda x: x + 1, lambda x: x, 1.0)) == 2.0
        assert float(lamina.grad(loss)(2.0)) == 13.0


def test_a_carry_passed_through_comes_back_as_given() -> None:
    # JAX 0.10.2 returns a loop-invariant carry as given, whatever the trip count.
    for trips in (0, 3):
        out = lax.fori_loop(0, trips, lambda i, c: (c[0] + 1, c[1]), (1.0, 2))
        assert isinstance(out[0], lamina.Array) and type(out[1]) is int
    carry, _ = lax.scan(lambda c, x: ((c[0] + 1, c[1]), None), (1.0, 2), None, length=3)
    assert float(carry[0]) == 4.0 and type(carry[1]) is int
