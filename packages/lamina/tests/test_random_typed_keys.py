"""Typed key arrays (``random.key``): a key dtype, accepted wherever a raw key
is, through jit, vmap, scan and pmap, with JAX 0.10.2's numbers."""

from __future__ import annotations

import numpy as np
import pytest

import lamina
import lamina.dtypes as dtypes
import lamina.numpy as jnp
import lamina.random as random


def test_key_is_typed():
    k = random.key(0)
    assert k.shape == () and k.ndim == 0
    assert str(k.dtype) == "key<fry>"
    assert jnp.issubdtype(k.dtype, dtypes.prng_key)
    assert dtypes.issubdtype(k.dtype, dtypes.extended)
    assert not jnp.issubdtype(k.dtype, jnp.floating)
    assert not jnp.issubdtype(jnp.float32, dtypes.prng_key)
    assert random.key_dtype() == k.dtype
    assert random.key_impl(k) == random.default_prng_impl() == "threefry2x32"
    np.testing.assert_array_equal(np.asarray(random.key_data(k)), [0, 0])
    np.testing.assert_array_equal(np.asarray(random.key_data(random.key(42))), [0, 42])
    assert "key<fry>" in repr(k)


def test_split_fold_in_and_indexing_stay_typed():
    k = random.key(0)
    ks = random.split(k, 3)
    assert isinstance(ks, random.PRNGKeyArray) and ks.shape == (3,) and len(ks) == 3
    np.testing.assert_array_equal(np.asarray(random.key_data(ks)),
                                  np.asarray(random.split(random.PRNGKey(0), 3)))
    assert ks[1].shape == () and ks[1:].shape == (2,)
    np.testing.assert_array_equal(np.asarray(random.key_data(ks[2])),
                                  [4146024105, 2718843009])
    grid = random.split(k, (2, 3))
    assert grid.shape == (2, 3) and grid.reshape(-1).shape == (6,)
    assert [key.shape for key in grid[0]] == [(), (), ()]
    np.testing.assert_array_equal(np.asarray(random.key_data(random.fold_in(k, 7))),
                                  [2716826189, 292468403])
    assert random.clone(k).dtype == k.dtype
    wrapped = random.wrap_key_data(np.array([[0, 42], [1, 2]], np.uint32))
    assert wrapped.shape == (2,)
    np.testing.assert_array_equal(np.asarray(random.uniform(wrapped[0], (3,))),
                                  np.asarray(random.uniform(random.PRNGKey(42), (3,))))


def test_every_sampler_takes_a_typed_key():
    typed, raw = random.key(3), random.PRNGKey(3)
    calls = [
        lambda k: random.uniform(k, (3,)), lambda k: random.randint(k, (3,), 0, 9),
        lambda k: random.permutation(k, 5), lambda k: random.categorical(k, jnp.zeros(4)),
        lambda k: random.gamma(k, 2.0, (3,)), lambda k: random.rayleigh(k, 1.0, (3,)),
    ]
    for call in calls:
        np.testing.assert_array_equal(np.asarray(call(typed)), np.asarray(call(raw)))
    np.testing.assert_array_equal(np.asarray(random.gamma(typed, 2.0, (3,)), np.float64),
                                  [0.6336129307746887, 0.8083616495132446, 5.848491668701172])


def test_typed_keys_through_transformations():
    k = random.key(0)
    ks = random.split(k, 3)
    out = lamina.vmap(lambda key: random.normal(key, (2,)))(ks)
    np.testing.assert_array_equal(np.asarray(out, np.float64),
                                  [[1.004014253616333, -0.9063372015953064],
                                   [-2.442455768585205, -2.0356805324554443],
                                   [1.2956359386444092, 1.3550105094909668]])
    folded = lamina.jit(lambda key: random.fold_in(key, 7))(k)
    assert isinstance(folded, random.PRNGKeyArray)
    np.testing.assert_array_equal(np.asarray(random.key_data(folded)), [2716826189, 292468403])

    def body(carry, _):
        carry, sub = random.split(carry)
        return carry, random.uniform(sub)

    carry, ys = lamina.lax.scan(body, k, None, length=3)
    assert isinstance(carry, random.PRNGKeyArray)
    np.testing.assert_array_equal(np.asarray(ys, np.float64),
                                  [0.007293820381164551, 0.10429036617279053, 0.0826038122177124])
    np.testing.assert_array_equal(np.asarray(random.key_data(carry)), [683029726, 1624662641])
    per_device = lamina.pmap(lambda key: random.uniform(key))(random.split(k, 2))
    np.testing.assert_array_equal(np.asarray(per_device),
                                  [np.asarray(random.uniform(key)) for key in random.split(k, 2)])


def test_bad_keys_are_named():
    with pytest.raises(TypeError, match="uniform: expected a single PRNG key.*shape \\(3,\\)"):
        random.uniform(random.split(random.key(0), 3))
    with pytest.raises(TypeError, match="wrap_key_data: expected key data of shape"):
        random.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match="wrap_key_data: expected key data.*uint32"):
        random.wrap_key_data(np.zeros((2,), np.int32))
    with pytest.raises(TypeError, match="already a typed key"):
        random.wrap_key_data(random.key(0))
    with pytest.raises(ValueError, match="key: unknown or unsupported PRNG implementation"):
        random.key(0, impl="philox")
    with pytest.raises(TypeError, match="key_data: expected key data"):
        random.key_data(np.zeros(3, np.float32))
