"""A small CNN (conv, max-pool, avg-pool, dense) built and trained with
``example_libraries.stax`` and ``optimizers``: the same JAX program, run once
on JAX 0.10.2 and once on lamina under the alias, gives the same initial
parameters and the same losses step by step."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from e2e_helpers import peer_python, run_python

CNN_PROGRAM = """
    import json

    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.example_libraries import optimizers, stax

    init, apply = stax.serial(
        stax.Conv(8, (3, 3), padding="SAME"), stax.Relu,
        stax.MaxPool((2, 2), strides=(2, 2)),
        stax.Conv(8, (3, 3), strides=(1, 1), padding="VALID"), stax.Relu,
        stax.AvgPool((2, 2), strides=(1, 1), padding="SAME"),
        stax.Flatten, stax.Dense(16), stax.Relu, stax.Dense(10), stax.LogSoftmax)
    out_shape, params = init(jax.random.key(0), (-1, 12, 12, 1))

    data = np.random.RandomState(0)
    x = data.rand(32, 12, 12, 1).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[data.randint(0, 10, 32)]

    def loss(p, x, y):
        return -jnp.mean(jnp.sum(apply(p, x) * y, axis=1))

    opt_init, opt_update, get_params = optimizers.momentum(0.05, mass=0.9)

    @jax.jit
    def step(i, state):
        value, grads = jax.value_and_grad(loss)(get_params(state), x, y)
        return value, opt_update(i, grads, state)

    state, losses = opt_init(params), []
    for i in range(8):
        value, state = step(i, state)
        losses.append(float(value))
    leaves = jax.tree_util.tree_leaves(params)
    print(json.dumps({"shape": [int(d) for d in out_shape], "losses": losses,
                      "init": [float(np.asarray(p, np.float64).sum()) for p in leaves]}))
"""


def _run(prefix: str) -> dict[str, list[float]]:
    proc = run_python(peer_python(), prefix + textwrap.dedent(CNN_PROGRAM), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, list[float]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.peer
def test_stax_cnn_trains_with_jaxs_losses() -> None:
    on_jax = _run("")
    on_lamina = _run("import lamina.compat; lamina.compat.install()\n")
    # JAX's pooling shape rule turns the -1 batch size into 0; lamina's does too
    assert on_lamina["shape"] == on_jax["shape"] == [0, 10]
    np.testing.assert_array_equal(on_lamina["init"], on_jax["init"])
    assert on_jax["losses"][-1] < on_jax["losses"][0]  # it learns
    np.testing.assert_allclose(on_lamina["losses"], on_jax["losses"], rtol=1e-6, atol=0)
