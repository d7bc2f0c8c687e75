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
    # JAX 0.10.2: a typed key is a jax.Array and a jnp.ndarray (flax checks the latter)
    assert isinstance(k, lamina.Array) and isinstance(k, jnp.ndarray)
    assert issubclass(type(k), jnp.ndarray)


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
    with pytest.raises(TypeError, match="wrap_key_data: argument key_bits_array must be "
                                        "threefry2x32 key data of shape"):
        random.wrap_key_data(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match="wrap_key_data: argument key_bits_array.*uint32"):
        random.wrap_key_data(np.zeros((2,), np.int32))
    with pytest.raises(TypeError, match="wrap_key_data: argument key_bits_array must be rbg "
                                        "key data of shape \\(\\.\\.\\., 4\\)"):
        random.wrap_key_data(np.zeros((2,), np.uint32), impl="rbg")
    with pytest.raises(TypeError, match="already a typed key"):
        random.wrap_key_data(random.key(0))
    with pytest.raises(ValueError, match="key: unknown or unsupported PRNG implementation"):
        random.key(0, impl="philox")
    with pytest.raises(TypeError, match="key_data: argument keys must be threefry2x32 key"):
        random.key_data(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="normal: argument key must be a PRNG key.*f32\\[2\\]"):
        random.normal(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="lamina.numpy.add: argument x1 is a typed PRNG key"):
        jnp.add(random.key(0), 1)
    with pytest.raises(TypeError, match="lamina.numpy.stack: argument arrays\\[1\\] is not a "
                                        "key array"):
        jnp.stack([random.key(0), random.PRNGKey(0)])
    with pytest.raises(TypeError, match="lamina.numpy.where: argument y has key dtype key<rbg>"):
        jnp.where(True, random.key(0), random.key(0, impl="rbg"))
    with pytest.raises(TypeError, match="already a typed key"):
        random.wrap_key_data(random.key(0), impl="rbg")


def test_key_arrays_in_numpy_structure():
    ks = random.split(random.key(1), 6)
    data = np.asarray(random.key_data(ks))
    assert isinstance(ks, lamina.Array) and jnp.shape(ks) == (6,) and jnp.ndim(ks) == 1
    grid = jnp.reshape(ks, (2, 3))
    assert grid.shape == (2, 3) and grid.dtype == ks.dtype
    checks = {
        "stack": (jnp.stack([ks[0], ks[1]]), data[:2]),
        "stack_axis1": (jnp.stack([grid, grid], axis=-1), np.stack([data.reshape(2, 3, 2)] * 2, 2)),
        "concatenate": (jnp.concatenate([ks[:2], ks[4:]]), data[[0, 1, 4, 5]]),
        "where": (jnp.where(jnp.array([True, False, True]), grid[0], grid[1]),
                  data.reshape(2, 3, 2)[[0, 1, 0], [0, 1, 2]]),
        "ellipsis": (grid[..., 1], data.reshape(2, 3, 2)[:, 1]),
        "newaxis": (ks[None, 2:4], data[None, 2:4]),
        "transpose": (grid.T, data.reshape(2, 3, 2).transpose(1, 0, 2)),
        "moveaxis": (jnp.moveaxis(grid, 0, -1), data.reshape(2, 3, 2).transpose(1, 0, 2)),
        "broadcast_to": (jnp.broadcast_to(ks[0], (2, 2)), np.broadcast_to(data[0], (2, 2, 2))),
        "expand_squeeze": (jnp.squeeze(jnp.expand_dims(ks, -1), 1), data),
        "take": (jnp.take(ks, jnp.array([5, 0])), data[[5, 0]]),
        "asarray": (jnp.asarray(ks), data),
    }
    for name, (got, want) in checks.items():
        assert isinstance(got, random.PRNGKeyArray), name
        np.testing.assert_array_equal(np.asarray(random.key_data(got)), want, err_msg=name)
    # Inside jit and vmap the same functions take traced keys.
    picked = lamina.jit(lambda c, a, b: jnp.where(c, a, b))(jnp.array([False, True, True]),
                                                             grid[0], grid[1])
    np.testing.assert_array_equal(np.asarray(random.key_data(picked)),
                                  data.reshape(2, 3, 2)[[1, 0, 0], [0, 1, 2]])
    paired = lamina.vmap(lambda k: jnp.stack([k, random.fold_in(k, 1)]))(ks[:2])
    assert paired.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(random.key_data(paired[1, 1])),
                                  np.asarray(random.key_data(random.fold_in(ks[1], 1))))


# JAX 0.10.2's values (peer environment): random.key(42, impl=...), its split,
# split to (2, 3) (row 1), fold_in(k, 7), uniform(k, (3,)), bits(k, (4,), uint8),
# randint(k, (4,), 0, 10), gamma(k, 2.0, (3,)), permutation(k, 6), and
# vmap(lambda k: uniform(k, (2,)))(split(k, 3)).
_RBG_REFERENCE = {
    "rbg": dict(
        split=[[1832780943, 270669613, 1832780943, 270669613],
               [64467757, 2916123636, 64467757, 2916123636]],
        split23=[[3134548294, 894150801, 3134548294, 894150801],
                 [2954079971, 3276725750, 2954079971, 3276725750],
                 [2765691542, 824333390, 2765691542, 824333390]],
        fold_in=[2547012911, 1371500959, 2547012911, 1371500959],
        randint=[1, 0, 5, 1], gamma=[0.5628349781036377, 2.0621910095214844, 0.43754303455352783],
        perm=[2, 1, 3, 4, 5, 0],
        vmap_uniform=[[0.4252859354019165, 0.9507490396499634],
                      [0.47966551780700684, 0.20923590660095215],
                      [0.8791253566741943, 0.8528361320495605]]),
    "unsafe_rbg": dict(
        split=[[2620864722, 2991908441, 282133475, 2589630650],
               [4105776319, 298289174, 864345282, 274752888]],
        split23=[[121532186, 92310596, 2900603346, 2008188525],
                 [1328550726, 2340856697, 2158919378, 1723337487],
                 [3463793296, 2759598209, 3565056766, 1896687008]],
        fold_in=[2104303640, 250182049, 1106406590, 1983638428],
        randint=[9, 1, 9, 7], gamma=[0.209461972117424, 3.1897451877593994, 1.6867655515670776],
        perm=[4, 3, 0, 2, 1, 5],
        vmap_uniform=[[0.6102668046951294, 0.2586473226547241],
                      [0.3331958055496216, 0.7897067070007324],
                      [0.09988486766815186, 0.836920976638794]]),
}


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_keys_match_jax(impl):
    ref = _RBG_REFERENCE[impl]
    k = random.key(42, impl=impl)
    assert str(k.dtype) == {"rbg": "key<rbg>", "unsafe_rbg": "key<urbg>"}[impl]
    assert random.key_impl(k) == impl and jnp.issubdtype(k.dtype, dtypes.prng_key)
    np.testing.assert_array_equal(np.asarray(random.key_data(k)), [0, 42, 0, 42])
    np.testing.assert_array_equal(np.asarray(random.key_data(random.split(k))), ref["split"])
    np.testing.assert_array_equal(np.asarray(random.key_data(random.split(k, (2, 3))))[1],
                                  ref["split23"])
    np.testing.assert_array_equal(np.asarray(random.key_data(random.fold_in(k, 7))),
                                  ref["fold_in"])
    # Both draw their bits from XLA's generator directly, so they agree here.
    uniform = [0.6102175712585449, 0.6966079473495483, 0.06568920612335205]
    np.testing.assert_array_equal(np.asarray(random.uniform(k, (3,)), np.float64), uniform)
    np.testing.assert_array_equal(np.asarray(lamina.jit(lambda kk: random.uniform(kk, (3,)))(k),
                                             np.float64), uniform)
    np.testing.assert_array_equal(np.asarray(random.bits(k, (4,), jnp.uint8)), [210, 89, 227, 186])
    np.testing.assert_array_equal(np.asarray(random.randint(k, (4,), 0, 10)), ref["randint"])
    np.testing.assert_array_equal(np.asarray(random.gamma(k, 2.0, (3,)), np.float64),
                                  ref["gamma"])
    np.testing.assert_array_equal(np.asarray(random.permutation(k, 6)), ref["perm"])
    batched = lamina.vmap(lambda kk: random.uniform(kk, (2,)))(random.split(k, 3))
    np.testing.assert_array_equal(np.asarray(batched, np.float64), ref["vmap_uniform"])
