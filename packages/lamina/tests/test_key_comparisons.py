"""Typed PRNG keys compare elementwise by their key data, as in JAX 0.10.2:
``==``/``!=``, ``jnp.equal``/``not_equal``, ``isclose``/``allclose``,
``array_equal``/``array_equiv``, eagerly, under ``jit`` and ``vmap``. The
expected values are JAX's (obtained in the peer environment)."""

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest


@pytest.fixture
def keys():
    pair = lx.random.split(lx.random.key(1))
    other = lx.random.split(lx.random.key(2))
    return pair, other, lx.random.key(1)


def test_elementwise_equality_as_jax(keys):
    pair, other, parent = keys
    np.testing.assert_array_equal(pair == pair, [True, True])
    np.testing.assert_array_equal(pair == other, [False, False])
    np.testing.assert_array_equal(pair != parent, [True, True])  # broadcast against a 0-d key
    np.testing.assert_array_equal(jnp.equal(pair, pair[::-1]), [False, False])
    np.testing.assert_array_equal(jnp.not_equal(pair, other), [True, True])
    np.testing.assert_array_equal(jnp.isclose(pair, pair), [True, True])
    assert bool(jnp.allclose(pair, pair)) and not bool(jnp.allclose(pair, other))


def test_whole_array_equality_as_jax(keys):
    pair, other, parent = keys
    assert bool(jnp.array_equal(pair, pair))
    assert not bool(jnp.array_equal(pair, other))
    different_shapes = jnp.array_equal(pair, parent)
    assert isinstance(different_shapes, lx.Array) and not bool(different_shapes)
    assert bool(jnp.array_equiv(pair, pair)) and not bool(jnp.array_equiv(pair, parent))


def test_under_jit_and_vmap(keys):
    pair, other, _ = keys
    assert not bool(lx.jit(jnp.array_equal)(pair, other))
    assert bool(lx.jit(jnp.array_equal)(pair, pair))
    np.testing.assert_array_equal(lx.vmap(lambda a, b: a == b)(pair, pair), [True, True])
    text = str(lx.make_jaxpr(jnp.array_equal)(pair, other))
    assert "eq" in text and "reduce_and" in text


def test_key_arrays_are_unhashable_like_arrays(keys):
    with pytest.raises(TypeError, match="unhashable"):
        hash(keys[2])


@pytest.mark.parametrize("make_other, message", [
    (lambda k: 1, "argument x2 is not a key array"),
    (lambda k: lx.random.key_data(k), "argument x2 is not a key array"),
    (lambda k: lx.random.key(1, impl="rbg"), "keys of different implementations"),
    (lambda k: lx.random.split(lx.random.key(0), 3), "do not broadcast"),
])
def test_bad_comparisons_name_the_function_and_argument(keys, make_other, message):
    pair = keys[0]
    with pytest.raises(TypeError, match=message) as info:
        jnp.equal(pair, make_other(pair))
    assert "lamina.numpy.equal" in str(info.value)
