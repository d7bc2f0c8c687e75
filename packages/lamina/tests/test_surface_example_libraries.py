"""``lamina.example_libraries.stax`` and ``optimizers`` give JAX 0.10.2's
numbers: the expected values were recorded from ``jax.example_libraries``
with the same keys and inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import random
from lamina.example_libraries import optimizers, stax

# JAX: the first Dense layer of serial(Dense(4), Relu, Dense(3), LogSoftmax)
# initialized with PRNGKey(0) for inputs (-1, 5).
JAX_W0 = [[0.10168712586164474, -0.39013993740081787, -0.6241578459739685, -0.2094869762659073],
          [-0.5052779912948608, 0.1463996022939682, 0.4999408423900604, 0.25392019748687744],
          [-0.37688159942626953, 0.5685867667198181, -0.004899744410067797, 0.22942659258842468],
          [-0.1520470380783081, -0.2596619725227356, 0.1413659006357193, 0.3793110251426697],
          [-0.10477448254823685, -0.42714619636535645, 0.4907444417476654, 0.273573637008667]]
JAX_B0 = [-0.013356249779462814, -0.0035256301052868366, 0.00309704034589231,
          -0.010009460151195526]
JAX_LOSS0 = 0.9900530576705933
# The loss after three steps of each optimizer.
JAX_LOSS3 = {
    "sgd": 0.908328652381897, "adam": 0.9344668388366699, "momentum": 0.8420653343200684,
    "rmsprop": 0.8576958775520325, "adagrad": 0.9056234359741211, "sm3": 0.9066118001937866,
    "adamax": 0.9349278211593628, "nesterov": 0.7883100509643555,
    "rmsprop_momentum": 0.743508517742157,
}


def _mlp() -> tuple[Any, Any, Any]:
    init, apply = stax.serial(stax.Dense(4), stax.Relu, stax.Dense(3), stax.LogSoftmax)
    out_shape, params = init(random.PRNGKey(0), (-1, 5))
    assert out_shape == (-1, 3)
    x = jnp.arange(10., dtype=jnp.float32).reshape(2, 5) / 10
    y = jnp.array([0, 2])

    def loss(p: Any) -> Any:
        return -jnp.mean(apply(p, x)[jnp.arange(2), y])

    return params, apply, loss


def test_mlp_init_and_loss_match_jax() -> None:
    params, _, loss = _mlp()
    np.testing.assert_array_equal(np.asarray(params[0][0]), np.float32(JAX_W0))
    np.testing.assert_array_equal(np.asarray(params[0][1]), np.float32(JAX_B0))
    assert params[1] == () and params[3] == ()
    assert float(loss(params)) == JAX_LOSS0


OPTIMIZERS = {
    "sgd": lambda: optimizers.sgd(0.1), "adam": lambda: optimizers.adam(1e-2),
    "momentum": lambda: optimizers.momentum(0.1, 0.9),
    "rmsprop": lambda: optimizers.rmsprop(0.01), "adagrad": lambda: optimizers.adagrad(0.1),
    "sm3": lambda: optimizers.sm3(0.1), "adamax": lambda: optimizers.adamax(0.01),
    "nesterov": lambda: optimizers.nesterov(0.1, 0.9),
    "rmsprop_momentum": lambda: optimizers.rmsprop_momentum(0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_three_steps_match_jax(name: str) -> None:
    params, _, loss = _mlp()
    opt_init, opt_update, get_params = OPTIMIZERS[name]()
    state = opt_init(params)
    for i in range(3):
        state = opt_update(i, lamina.grad(loss)(get_params(state)), state)
    # XLA's CPU code generation depends on the host CPU, so JAX's own last bit
    # after three steps differs between machines (seen: 0.9344668388 and
    # 0.9344668984 for adam); one float32 ulp is allowed.
    np.testing.assert_allclose(float(loss(get_params(state))), JAX_LOSS3[name], rtol=2e-7)


def test_optimizer_state_passes_through_jit() -> None:
    params, _, loss = _mlp()
    opt_init, opt_update, get_params = optimizers.adam(1e-2)

    @lamina.jit
    def step(i: Any, state: Any) -> Any:
        return opt_update(i, lamina.grad(loss)(get_params(state)), state)

    state = opt_init(params)
    for i in range(3):
        state = step(i, state)
    assert isinstance(state, optimizers.OptimizerState)
    np.testing.assert_allclose(float(loss(get_params(state))), JAX_LOSS3["adam"], rtol=1e-6)


def test_update_rejects_a_gradient_of_another_structure() -> None:
    opt_init, opt_update, _ = optimizers.sgd(0.1)
    state = opt_init({"a": jnp.ones(2)})
    with pytest.raises(TypeError, match="did not match the parameter tree"):
        opt_update(0, [jnp.ones(2)], state)


def test_pack_unpack_round_trip() -> None:
    opt_init, opt_update, get_params = optimizers.momentum(0.1, 0.9)
    state = opt_init({"w": jnp.ones(3), "b": jnp.zeros(())})
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked["w"], optimizers.JoinPoint)
    x, velocity = marked["w"].subtree
    np.testing.assert_array_equal(np.asarray(x), np.ones(3))
    again = optimizers.pack_optimizer_state(marked)
    assert again.tree_def == state.tree_def and again.subtree_defs == state.subtree_defs
    np.testing.assert_array_equal(np.asarray(get_params(again)["w"]), np.ones(3))


def test_schedules_and_utilities_match_jax() -> None:
    values = [optimizers.exponential_decay(0.1, 10, 0.5)(3),
              optimizers.inverse_time_decay(0.1, 10, 0.5, staircase=True)(15),
              optimizers.inverse_time_decay(0.1, 10, 0.5)(15),
              optimizers.polynomial_decay(0.1, 10, 0.01, 2.0)(4),
              optimizers.piecewise_constant([2, 5], [1., 0.5, 0.1])(5),
              optimizers.piecewise_constant([2, 5], [1., 0.5, 0.1])(6)]
    assert [float(v) for v in values] == [0.08122523963562356, 0.06666667014360428,
                                          0.05714285714285715, 0.04240000247955322, 0.5,
                                          0.10000000149011612]
    assert float(optimizers.constant(0.3)(100)) == 0.3
    grads = {"a": jnp.array([3., 4.]), "b": jnp.array(12.)}
    assert float(optimizers.l2_norm(grads)) == 13.0
    clipped = optimizers.clip_grads(grads, 1.0)
    assert np.asarray(clipped["a"]).tolist() == [0.23076924681663513, 0.3076923191547394]
    assert float(clipped["b"]) == 0.9230769872665405
    with pytest.raises(ValueError, match="one shorter"):
        optimizers.piecewise_constant([1, 2], [1.])
    with pytest.raises(TypeError):
        optimizers.make_schedule(jnp.ones(2))


def test_conv_batchnorm_fan_dropout_network_matches_jax() -> None:
    init, apply = stax.serial(
        stax.Conv(2, (3, 3), padding="SAME"), stax.BatchNorm(), stax.Tanh, stax.FanOut(2),
        stax.parallel(stax.Identity, stax.Sigmoid), stax.FanInConcat(), stax.Flatten,
        stax.Dense(2), stax.Dropout(0.5))
    out_shape, params = init(random.PRNGKey(1), (2, 4, 4, 1))
    assert tuple(out_shape) == (2, 2)
    x = jnp.arange(32., dtype=jnp.float32).reshape(2, 4, 4, 1) / 32
    out = apply(params, x, rng=random.PRNGKey(2))
    # JAX's values (the convolution may round differently in the last bit).
    np.testing.assert_allclose(np.asarray(out), [[3.6876301765441895, -0.28098270297050476],
                                                 [0.0, -2.0365703105926514]],
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="PRNG key"):
        apply(params, x)


def test_layer_shapes() -> None:
    rng = random.PRNGKey(0)
    assert stax.Flatten[0](rng, (3, 4, 5))[0] == (3, 20)
    assert stax.FanInConcat(axis=1)[0](rng, [(2, 3), (2, 5)])[0] == (2, 8)
    assert stax.FanInSum[0](rng, [(2, 3), (2, 3)])[0] == (2, 3)
    shape, params = stax.ConvTranspose(4, (3, 3), strides=(2, 2), padding="SAME")[0](
        rng, (1, 5, 5, 3))
    assert tuple(shape) == (1, 10, 10, 4) and params[0].shape == (3, 3, 3, 4)
    shape, (beta, gamma) = stax.BatchNorm(axis=0)[0](rng, (8, 3))
    assert shape == (8, 3) and beta.shape == (3,) and gamma.shape == (3,)
    init, apply = stax.shape_dependent(lambda s: stax.Dense(s[-1] * 2))
    shape, params = init(rng, (1, 3))
    assert shape == (1, 6) and apply(params, jnp.ones((1, 3))).shape == (1, 6)
    out = stax.serial(stax.FanOut(2), stax.parallel(stax.Identity, stax.Exp), stax.FanInSum)
    _, p = out[0](rng, (2,))
    np.testing.assert_allclose(np.asarray(out[1](p, jnp.zeros(2))), [1.0, 1.0])
