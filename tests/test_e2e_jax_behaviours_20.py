"""Behaviours found to differ from JAX 0.10.2 (issue 20, item 3), end to end on
the runtime: tracers are ``lamina.Array`` instances, eager ``truncated_normal``
equals its jitted form (and JAX's numbers), and the array methods and indexing
fixes hold on device arrays. The expected values are JAX's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina_tracing_core.core import Tracer


# --- isinstance(tracer, lamina.Array) ----------------------------------------------------------
def test_tracers_are_arrays_under_jit_grad_vmap() -> None:
    seen: list[bool] = []

    def f(x: Any) -> Any:
        seen.append(isinstance(x, lx.Array))
        return x * 2.0

    lx.jit(f)(1.0)
    lx.grad(f)(1.0)
    lx.vmap(f)(jnp.ones(3))
    assert seen == [True, True, True]


def test_array_instance_checks_as_jax() -> None:
    assert isinstance(jnp.ones(2), lx.Array)
    assert not isinstance(np.ones(2), lx.Array)
    assert not isinstance(1.0, lx.Array)
    assert not issubclass(Tracer, lx.Array)  # as in JAX: only isinstance accepts tracers
    assert type(jnp.ones(2)) is lx.Array


# --- truncated_normal: eager == jit == JAX ------------------------------------------------------
#: jax.random.truncated_normal(PRNGKey(0), -2.0, 2.0, (16,)) from JAX 0.10.2, as float32 bits
_JAX_TRUNCATED_NORMAL_BITS = [
    1069178079, 1071348963, 3201518127, 3180964641, 1043073141, 3211370772, 3203474197,
    1055961417, 1059139796, 3211038262, 1071979909, 3218506424, 1051649217, 1041902662,
    1066865257, 1068462885]


def test_truncated_normal_eager_equals_jit_and_jax() -> None:
    key = lx.random.PRNGKey(0)
    eager = np.asarray(lx.random.truncated_normal(key, -2.0, 2.0, (16,)))
    jitted = np.asarray(lx.jit(lambda k: lx.random.truncated_normal(k, -2.0, 2.0, (16,)))(key))
    np.testing.assert_array_equal(eager.view(np.uint32), _JAX_TRUNCATED_NORMAL_BITS)
    np.testing.assert_array_equal(jitted.view(np.uint32), _JAX_TRUNCATED_NORMAL_BITS)
    big = lx.random.truncated_normal(key, -2.0, 2.0, (1000,))
    big_jit = lx.jit(lambda k: lx.random.truncated_normal(k, -2.0, 2.0, (1000,)))(key)
    np.testing.assert_array_equal(np.asarray(big), np.asarray(big_jit))
    # broadcast bounds and a list shape still work through the compiled form
    out = lx.random.truncated_normal(key, jnp.array([-1.0, 0.0]), 1.5, [3, 2])
    assert out.shape == (3, 2)
    assert bool(jnp.all(out[:, 1] > 0.0)) and bool(jnp.all(out < 1.5))


# --- methods and indexing on device arrays ------------------------------------------------------
def test_reshape_and_ravel_methods_in_fortran_order() -> None:
    x = jnp.arange(6)
    np.testing.assert_array_equal(x.reshape((2, 3), order="F"), [[0, 2, 4], [1, 3, 5]])
    np.testing.assert_array_equal(x.reshape(2, 3, order="F"), [[0, 2, 4], [1, 3, 5]])
    m = jnp.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(m.ravel(order="F"), [0, 3, 1, 4, 2, 5])
    np.testing.assert_array_equal(m.flatten(order="F"), [0, 3, 1, 4, 2, 5])
    jitted = lx.jit(lambda a: jnp.reshape(a, (3, 2), order="F"))(x)
    np.testing.assert_array_equal(jitted, [[0, 3], [1, 4], [2, 5]])


def test_empty_index_into_empty_axis_eager_and_jit() -> None:
    z = jnp.zeros((0, 3))
    idx = jnp.zeros((0,), jnp.int32)
    assert z[idx].shape == (0, 3)
    assert lx.jit(lambda a, i: a[i])(z, idx).shape == (0, 3)
    assert z.at[idx].set(1.0).shape == (0, 3)
    assert lx.grad(lambda a: a[idx].sum())(z).shape == (0, 3)
    with pytest.raises(TypeError, match="gather"):
        z[jnp.array([0, 1])]  # a non-empty result is still JAX's error


def test_uint32_beyond_int32_on_device() -> None:
    assert int(jnp.uint32(2998342421)) == 2998342421
    assert int(jnp.array(2**32 - 1, dtype="uint32")) == 2**32 - 1
    assert jnp.zeros(3, jnp.uint32).at[0].set(2998342421).tolist() == [2998342421, 0, 0]
    out = lx.jit(lambda: jnp.uint32(2998342421))()
    assert out.dtype == np.uint32 and int(out) == 2998342421
    with pytest.raises(OverflowError, match="2998342421 too large"):
        jnp.uint32(1) + 2998342421  # an operand must fit the default integer type, as JAX
