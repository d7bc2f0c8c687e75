"""stax's pooling layers (MaxPool, SumPool, AvgPool): shapes and values, and a
small CNN (conv, max-pool, avg-pool, sum-pool, dense) trained with SGD giving
JAX 0.10.2's losses."""

from __future__ import annotations

from typing import Any

import numpy as np

import lamina
import lamina.numpy as jnp
from lamina.example_libraries import optimizers, stax


def test_pooling_values_and_shapes() -> None:
    x = np.arange(2 * 4 * 4 * 1, dtype=np.float32).reshape(2, 4, 4, 1)
    rng = lamina.random.PRNGKey(0)
    for layer, want in [(stax.MaxPool, x.reshape(2, 2, 2, 2, 2, 1).max((2, 4))),
                        (stax.SumPool, x.reshape(2, 2, 2, 2, 2, 1).sum((2, 4))),
                        (stax.AvgPool, x.reshape(2, 2, 2, 2, 2, 1).mean((2, 4)))]:
        init, apply = layer((2, 2), strides=(2, 2))
        shape, params = init(rng, x.shape)
        assert tuple(shape) == (2, 2, 2, 1)
        np.testing.assert_allclose(np.asarray(apply(params, x)), want)
    # SAME padding: the average counts only the real elements of each window
    init, apply = stax.AvgPool((2, 2), padding="SAME")
    out = np.asarray(apply((), np.ones((1, 3, 3, 1), np.float32)))
    np.testing.assert_allclose(out, np.ones((1, 3, 3, 1)))
    # a channels-first spec
    init, apply = stax.MaxPool((2, 2), strides=(2, 2), spec="NCHW")
    xc = np.transpose(x, (0, 3, 1, 2))
    assert tuple(init(rng, xc.shape)[0]) == (2, 1, 2, 2)
    np.testing.assert_allclose(np.asarray(apply((), xc)),
                               np.transpose(x.reshape(2, 2, 2, 2, 2, 1).max((2, 4)),
                                            (0, 3, 1, 2)))


def test_small_cnn_trains_like_jax() -> None:
    init, apply = stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.Relu,
                              stax.MaxPool((2, 2), strides=(2, 2)),
                              stax.Conv(4, (3, 3), padding="SAME"), stax.Relu,
                              stax.AvgPool((2, 2), strides=(1, 1), padding="SAME"),
                              stax.SumPool((2, 2), strides=(2, 2)),
                              stax.Flatten, stax.Dense(3), stax.LogSoftmax)
    _, params = init(lamina.random.PRNGKey(0), (-1, 8, 8, 1))
    rng = np.random.RandomState(0)
    x = rng.standard_normal((6, 8, 8, 1)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.randint(0, 3, 6)]

    def loss(p: Any, x: Any, y: Any) -> Any:
        return -jnp.mean(jnp.sum(apply(p, x) * y, axis=1))

    opt_init, opt_update, get_params = optimizers.sgd(0.1)
    state = opt_init(params)

    @lamina.jit
    def step(i: Any, state: Any) -> Any:
        value, grads = lamina.value_and_grad(loss)(get_params(state), x, y)
        return value, opt_update(i, grads, state)

    losses = []
    for i in range(5):
        value, state = step(i, state)
        losses.append(float(value))
    # jax.example_libraries.stax with JAX 0.10.2, same program
    np.testing.assert_allclose(losses, [1.2960771322250366, 0.8950382471084595,
                                        0.7651483416557312, 0.6434544920921326,
                                        0.5121726989746094], rtol=1e-4)
