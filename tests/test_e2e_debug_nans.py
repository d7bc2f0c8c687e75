"""NaN/Inf checks (``debug_nans``/``debug_infs``) that name the culprit.

A jitted computation whose result holds a NaN is evaluated again equation by
equation; the ``FloatingPointError`` names the first equation producing it:
its primitive, the user's source line, the name stack and which arguments of
the function each operand depends on (by path). JAX names the primitive only.
"""

from __future__ import annotations

import re

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest


@pytest.fixture
def nan_checks():
    lx.config.update("jax_debug_nans", True)
    yield
    lx.config.update("jax_debug_nans", False)
    lx.config.update("debug_infs", False)


def _init(n_layers: int, width: int) -> dict:
    rng = np.random.default_rng(0)
    params = {f"dense{i}": {"w": jnp.asarray(rng.normal(size=(width, width)) / width,
                                             dtype=np.float32),
                            "b": jnp.zeros(width, np.float32)} for i in range(n_layers)}
    # dense9's weights are zero: log(w) is -inf there, masked out by the where
    params["dense9"]["w"] = jnp.zeros((width, width), np.float32)
    return params


def _layer(p, h, i):
    w = p["w"]
    if i == 9:
        safe = jnp.where(w > 0, jnp.log(w), 0.0)  # NAN_LINE: the backward pass divides 0 by 0
        return jnp.tanh(h @ (w + safe) + p["b"])
    return jnp.tanh(h @ w + p["b"])


def loss(params, x):
    h = x
    for i in range(16):
        h = _layer(params[f"dense{i}"], h, i)
    return jnp.sum(h ** 2)


NAN_LINE = next(i for i, line in enumerate(open(__file__).read().splitlines(), 1)
                if "NAN_LINE:" in line and "safe =" in line)


def test_nan_in_the_backward_pass_of_a_16_layer_mlp_is_named(nan_checks) -> None:
    params = _init(16, 8)
    x = jnp.ones((4, 8), np.float32)
    assert np.isfinite(float(lx.jit(loss)(params, x)))  # the forward pass is clean
    with pytest.raises(FloatingPointError) as info:
        lx.jit(lx.grad(loss))(params, x)
    message = str(info.value)
    first = message.splitlines()[0]
    # the primitive and the user's source line
    assert first.startswith("invalid value (nan) encountered in div at ")
    assert f"test_e2e_debug_nans.py:{NAN_LINE} (_layer)" in first
    # the name stack: the backward pass of loss, inside the jit of grad(loss)
    assert re.search(r"name stack: jit\(loss\)/transpose\(jvp\(loss\)\)/div", message), message
    # the operand that is zero depends on dense9's weights alone
    assert "depends on params['dense9']['w']\n" in message + "\n", message
    # without the check the same call returns NaNs silently
    lx.config.update("jax_debug_nans", False)
    grads = lx.jit(lx.grad(loss))(params, x)
    assert np.isnan(np.asarray(grads["dense9"]["w"])).any()


def test_eager_ops_are_checked_and_infs_on_request(nan_checks) -> None:
    with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in log at "
                                                 r".*test_e2e_debug_nans.py"):
        jnp.log(jnp.float32(-1.0))
    assert float(jnp.log(jnp.float32(0.0))) == -np.inf  # an Inf is fine without debug_infs
    lx.config.update("debug_infs", True)
    with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
        lx.jit(lambda a, b: a / b)(1.0, 0.0)
    assert lx.config.read("debug_nans") and lx.config.read("jax_debug_infs")


def test_checks_are_off_by_default() -> None:
    assert not lx.config.read("debug_nans")
    assert np.isnan(float(lx.jit(jnp.log)(-1.0)))


def test_log_compiles_names_the_function_arguments_and_time(caplog) -> None:
    def step(params, x, *, scale=2.0):
        return jnp.sum(params["w"] @ x) * scale

    lx.config.update("jax_log_compiles", True)
    lx.config.update("explain_cache_misses", True)
    try:
        with caplog.at_level("WARNING"):
            f = lx.jit(step)
            f({"w": jnp.ones((2, 3))}, jnp.ones(3))
            f({"w": jnp.ones((2, 3))}, jnp.ones(3))  # cached: no second compilation
            f({"w": jnp.ones((2, 4))}, jnp.ones(4))
    finally:
        lx.config.update("jax_log_compiles", False)
        lx.config.update("explain_cache_misses", False)
    compiles = [r.getMessage() for r in caplog.records if r.name == "lamina.compiles"
                and "jit(step)" in r.getMessage()]
    assert len(compiles) == 2, compiles
    assert re.match(r"Finished XLA compilation of jit\(step\) in [0-9.]+ ms; arguments: "
                    r"params\['w'\]: f32\[2,3\], x: f32\[3\]$", compiles[0]), compiles[0]
    assert "params['w']: f32[2,4]" in compiles[1]
    # the cache-miss explanation says why the second compilation happened
    explained = [r.getMessage() for r in caplog.records if r.name == "lamina.cache"]
    assert any("params['w'] changed from f32[2,3] to f32[2,4]" in m or
               "argument params['w'] changed" in m for m in explained), explained



def test_log_compiles_context_manager_scopes_the_setting(caplog) -> None:
    assert lx.log_compiles.value is False
    with caplog.at_level("WARNING"), lx.log_compiles(True):
        assert lx.config.read("jax_log_compiles") is True
        lx.jit(lambda v: v * 3.0)(jnp.ones(5))
    assert lx.log_compiles.value is False
    lx.jit(lambda v: v * 4.0)(jnp.ones(5))
    compiles = [r.getMessage() for r in caplog.records if r.name == "lamina.compiles"
                and "jit(<lambda>)" in r.getMessage()]
    assert len(compiles) == 1 and "arguments: v: f32[5]" in compiles[0], compiles


def test_on_off_flags_default_to_on_in_a_block() -> None:
    # JAX 0.10.2: `with jax.log_compiles():` (optax's tests), `with jax.enable_x64():`
    # turn the flag on; a flag with values (numpy_rank_promotion) needs its value
    for flag in (lx.log_compiles, lx.enable_x64, lx.explain_cache_misses):
        assert flag.value is False
        with flag():
            assert flag.value is True
        assert flag.value is False
    with pytest.raises(TypeError, match="numpy_rank_promotion: the block needs"):
        lx.numpy_rank_promotion()


def test_pmap_results_are_checked(nan_checks, devices8) -> None:
    with pytest.raises(FloatingPointError, match=r"invalid value \(nan\) encountered in "
                                                 r"pmap\(<lambda>\)'s result"):
        lx.pmap(lambda x: jnp.log(x - 4.0))(jnp.arange(8.0))
