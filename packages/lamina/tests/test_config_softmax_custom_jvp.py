"""``softmax_custom_jvp``: ``nn.softmax`` differentiated through its
operations (off, JAX's default) or by its custom JVP rule (on). Values and
primitives recorded from JAX 0.10.2."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest

X = [[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]]
W = [0.3, -1.2, 2.0]
MASK = [True, False, True]


@pytest.fixture(autouse=True)
def _restore_setting() -> Iterator[None]:
    yield
    lx.config.update("jax_softmax_custom_jvp", False)


def _loss(x: Any) -> Any:
    return jnp.sum(lx.nn.softmax(x) * jnp.array(W))


def _masked_loss(x: Any) -> Any:
    return jnp.sum(lx.nn.softmax(x, where=jnp.array(MASK)) * jnp.array(W))


def _primitives(f: Any, x: Any) -> list[str]:
    return sorted({str(e.primitive) for e in lx.make_jaxpr(f)(x).eqns})


def test_off_by_default_differentiates_through_the_operations() -> None:
    x = jnp.array(X)
    assert lx.config.jax_softmax_custom_jvp is False
    assert lx.softmax_custom_jvp.value is False
    assert _primitives(lx.nn.softmax, x) == ["broadcast_in_dim", "div", "exp", "max",
                                             "reduce_max", "reduce_sum", "stop_gradient", "sub"]
    np.testing.assert_allclose(
        lx.grad(_loss)(x), [[-0.06876687705516815, -0.5540205240249634, 0.6227872967720032],
                            [-0.047459717839956284, -0.020336611196398735, 0.06779646873474121]],
        rtol=1e-6)
    np.testing.assert_allclose(
        lx.grad(_masked_loss)(x), [[-0.1784890741109848, 0.0, 0.178489089012146],
                                   [-0.04837014153599739, 0.0, 0.04837000370025635]], rtol=1e-6)


def test_on_uses_the_custom_rule() -> None:
    x = jnp.array(X)
    with lx.softmax_custom_jvp():
        assert lx.config.jax_softmax_custom_jvp is True
        assert _primitives(lx.nn.softmax, x) == ["custom_jvp_call"]
        assert "custom_jvp_call" in _primitives(lx.grad(_loss), x)
        np.testing.assert_allclose(
            lx.grad(_loss)(x), [[-0.06876686960458755, -0.5540204644203186, 0.6227872967720032],
                                [-0.04745972529053688, -0.020336611196398735,
                                 0.06779623031616211]], rtol=1e-6)
        np.testing.assert_allclose(
            lx.grad(_masked_loss)(x), [[-0.1784890592098236, 0.0, 0.17848920822143555],
                                       [-0.04837013781070709, 0.0, 0.0483701229095459]],
            rtol=1e-6)
        # the rule's tangent for a constant shift is exactly zero
        tangent = lx.jvp(lx.nn.softmax, (x,), (jnp.ones_like(x),))[1]
        assert tangent.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert _primitives(lx.nn.softmax, x)[0] == "broadcast_in_dim"


def test_jit_retraces_when_the_setting_changes() -> None:
    x = jnp.array(X)
    f = lx.jit(lx.nn.softmax)
    assert "custom_jvp_call" not in str(lx.make_jaxpr(f)(x))
    with lx.softmax_custom_jvp(True):
        assert "custom_jvp_call" in str(lx.make_jaxpr(f)(x))
    assert "custom_jvp_call" not in str(lx.make_jaxpr(f)(x))
