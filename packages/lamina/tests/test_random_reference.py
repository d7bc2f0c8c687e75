"""lamina.random reproduces JAX 0.10's numbers (partitionable Threefry-2x32)."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core import api, core

import lamina
import lamina.numpy as jnp
import lamina.random as random

K = random.PRNGKey(0)


def check(actual, expected, rtol=1e-6, atol=1e-6):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual_np.astype(np.float64), expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual_np, expected)


def test_keys_match_jax():
    check(K, np.array([0, 0], np.uint32))
    assert K.dtype == np.uint32
    check(random.PRNGKey(42), [0, 42])
    check(random.PRNGKey(-1), [0, 4294967295])
    check(random.PRNGKey(2 ** 32), [0, 0])  # 32-bit seeds wrap, as in JAX without x64
    check(random.PRNGKey(2 ** 31), [0, 2147483648])
    check(random.PRNGKey(np.int32(-5)), [0, 4294967291])
    check(random.PRNGKey(np.uint32(7)), [0, 7])
    check(random.key_data(random.key(42)), random.PRNGKey(42))
    check(random.key_data(K), K)
    check(random.key_data(random.wrap_key_data(np.array([0, 42], np.uint32))), [0, 42])
    with pytest.raises(TypeError, match="integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="PRNG key"):
        random.uniform(np.zeros(3, np.uint32))


def test_split_and_fold_in_match_jax():
    check(random.split(K), [[1797259609, 2579123966], [928981903, 3453687069]])
    check(random.split(random.PRNGKey(42), 3),
          [[1832780943, 270669613], [64467757, 2916123636], [2465931498, 255383827]])
    check(random.split(K, (2, 2)), [[[1797259609, 2579123966], [928981903, 3453687069]],
                                    [[4146024105, 2718843009], [2467461003, 3840466878]]])
    check(random.fold_in(K, 7), [2716826189, 292468403])
    check(random.fold_in(K, np.int32(5)), [1524306142, 1887795613])
    check(random.fold_in(K, jnp.uint32(3)), [2467461003, 3840466878])
    with pytest.raises(OverflowError):
        random.fold_in(K, -1)


def test_bits_and_integers_match_jax():
    check(random.bits(K, (4,)), [4070199207, 4202968722, 1427181096, 2012915765])
    check(random.bits(K, (3,), jnp.uint8), [167, 146, 40])
    check(random.randint(K, (4,), 0, 10), [9, 0, 2, 3])
    check(random.randint(K, (5,), 0, 256, jnp.uint8), [101, 80, 200, 61, 3])


def test_more_integers_match_jax_under_jit():
    # One compiled program for many draws keeps the test fast; eager and jit
    # agree (the eager path is covered above).
    @lamina.jit
    def draws(k):
        return (random.bits(k, (3,), jnp.uint16), random.randint(k, (4,), -5, 5),
                random.randint(k, (3,), 0, 2 ** 31 - 1),
                random.randint(k, (2, 3), np.array([0, 10, 100]), np.array([5, 20, 200])),
                random.rademacher(k, (4,)))

    bits16, small, large, ranged, signs = draws(K)
    check(bits16, [20391, 13970, 3624])
    check(small, [4, -5, -3, -2])
    check(large, [31327077, 89727312, 349724617])
    check(ranged, [[4, 10, 112], [3, 11, 147]])
    check(signs, [-1, -1, 1, 1])
    with pytest.raises(TypeError, match="unsigned"):
        random.bits(K, (2,), jnp.int32)


def test_floats_match_jax():
    check(random.uniform(K, (4,)), [0.947667, 0.9785799, 0.33229148, 0.46866846])
    check(random.uniform(K, (2, 3), jnp.float16),
          np.array([[0.3105, 0.2129, 0.0547], [0.6562, 0.2324, 0.4111]], np.float16), rtol=1e-3)
    check(random.uniform(K, (2,), minval=np.array([0.0, 10.0]), maxval=np.array([1.0, 20.0])),
          [0.947667, 19.785799], rtol=1e-6)
    check(random.normal(K, (4,)), [1.6226422, 2.0252647, -0.43359444, -0.07861735], rtol=1e-5)
    check(random.normal(random.PRNGKey(123), (2, 2)),
          [[1.6359469, 0.8408094], [0.02212393, -0.52927685]], rtol=1e-5)
    check(random.truncated_normal(K, -1.0, 1.0, (4,)),
          [0.8618594, 0.9412883, -0.2910484, -0.05364177], rtol=1e-5)
    check(random.truncated_normal(K, np.array([-1.0, 0.0]), 2.0), [1.5094677, 1.8387917],
          rtol=1e-5)
    with pytest.raises(ValueError, match="float dtype"):
        random.uniform(K, (2,), jnp.int32)


def test_more_distributions_match_jax_under_jit():
    @lamina.jit
    def draws(k):
        return (random.exponential(k, (3,)), random.laplace(k, (3,)), random.logistic(k, (3,)),
                random.cauchy(k, (3,)), random.gumbel(k, (3,)))

    exponential, laplace, logistic, cauchy, gumbel = draws(K)
    check(exponential, [2.950128, 3.8434246, 0.40390354], rtol=1e-5)
    check(laplace, [-2.2569816, -3.1502788, 0.40859544], rtol=1e-5)
    check(logistic, [2.896376, 3.8217716, -0.6978392], rtol=1e-5)
    check(cauchy, [6.0274944, 14.837895, -0.58172226], rtol=1e-4)
    check(gumbel, [2.9233725, 3.8326178, -0.09689324], rtol=1e-5)


def test_discrete_draws_match_jax():
    check(random.bernoulli(K, 0.5, (6,)), [False, False, True, True, False, True])
    check(random.bernoulli(K, np.array([0.1, 0.9, 0.5], np.float32)), [False, False, True])
    check(random.permutation(K, 6), [0, 1, 5, 4, 3, 2])
    check(random.permutation(K, jnp.arange(12).reshape(3, 4), axis=1),
          [[0, 1, 3, 2], [4, 5, 7, 6], [8, 9, 11, 10]])
    check(random.permutation(K, jnp.arange(12).reshape(3, 4), independent=True),
          [[0, 1, 6, 3], [8, 5, 10, 7], [4, 9, 2, 11]])
    check(random.categorical(K, np.array([0.1, 0.5, 1.0]), shape=(5,)), [1, 1, 2, 1, 2])
    check(random.categorical(K, np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]), axis=1), [1, 0])
    check(random.categorical(K, np.array([[0.0, 1.0], [2.0, 1.0], [0.0, 0.0]]), axis=0,
                             shape=(4, 2)), [[0, 0], [2, 0], [1, 1], [1, 1]])
    check(random.choice(K, 10, (3,), replace=False), [0, 1, 8])
    p = np.array([0.1, 0.2, 0.3, 0.2, 0.2], np.float32)
    check(random.choice(K, 5, (4,), p=p), [0, 0, 3, 2])
    check(random.choice(K, 5, (3,), replace=False, p=p), [1, 0, 4])
    check(random.choice(K, jnp.arange(10.0).reshape(5, 2), (3,), replace=False),
          [[0.0, 1.0], [2.0, 3.0], [8.0, 9.0]])
    check(random.choice(K, jnp.arange(6).reshape(2, 3), (2,), axis=1), [[1, 0], [4, 3]])
    with pytest.raises(ValueError, match="larger sample"):
        random.choice(K, 3, (4,), replace=False)
    with pytest.raises(TypeError, match="floating"):
        random.bernoulli(K, 1)


def test_reproducible_and_transformable():
    a = random.normal(random.PRNGKey(7), (3,))
    b = random.normal(random.PRNGKey(7), (3,))
    check(a, np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(random.normal(random.PRNGKey(8), (3,))))
    keys = random.split(K, 3)
    check(api.vmap(lambda k: random.uniform(k, (2,)))(keys),
          [[0.8423141, 0.18237865], [0.00729382, 0.02089119], [0.9024495, 0.91229284]])
    for i in range(3):
        check(random.uniform(keys[i], (2,)), np.asarray(api.vmap(
            lambda k: random.uniform(k, (2,)))(keys))[i])
    check(api.vmap(random.PRNGKey)(np.arange(3, dtype=np.int32)), [[0, 0], [0, 1], [0, 2]])
    jaxpr = api.make_jaxpr(lambda k: random.normal(k, (2,)))(K)
    assert "threefry2x32" in str(jaxpr)
    (out,) = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, K)
    check(out, random.normal(K, (2,)))


def test_threefry_2x32_function():
    check(random.threefry_2x32(K, np.arange(4, dtype=np.uint32)),
          [4146024105, 967050713, 2718843009, 1272950319])
    odd = random.threefry_2x32((np.uint32(1), np.uint32(2)), np.arange(3, dtype=np.uint32))
    check(odd, [4128513521, 2271449651, 2345921600])


def test_x64_keys_and_numbers_match_jax():
    from lamina_tracing_core import dtypes
    dtypes.enable_x64(True)
    try:
        check(random.PRNGKey(2 ** 40 + 5), [256, 5])
        check(random.PRNGKey(-1), [4294967295, 4294967295])
        check(random.uniform(random.PRNGKey(0), (3,)), [0.41845711, 0.21629545, 0.96532146])
        assert random.uniform(random.PRNGKey(0), (3,)).dtype == np.float64
        check(random.randint(random.PRNGKey(0), (3,), 0, 10), [5, 1, 5])
        check(random.bits(random.PRNGKey(0), (2,), jnp.uint64),
              np.array([7719171245655871230, 3989946895414531357], np.uint64))
        check(random.normal(random.PRNGKey(0), (2,)), [-0.20584214, -0.78476578], rtol=1e-7)
        assert jnp.arange(3).dtype == np.int64 and jnp.linspace(0, 1, 3).dtype == np.float64
        assert jnp.sum(jnp.ones(3, jnp.int32)).dtype == np.int64
        assert (jnp.ones(2, jnp.float32) + 1.0).dtype == np.float32
    finally:
        dtypes.enable_x64(False)


def test_bfloat16_draws_match_jax():
    check(random.normal(K, (3,), jnp.bfloat16).astype(jnp.float32), [0.386719, 0.182617, -1.0],
          rtol=1e-2)
    assert (jnp.ones(3, jnp.bfloat16) + 1.0).dtype == jnp.bfloat16


def test_complex_normal_matches_jax_eager_and_jitted():
    # JAX 0.10.2: jax.random.normal(jax.random.key(3), (4,), dtype="complex64"),
    # as uint32 words (real, imaginary) per element; jitted, the same words
    expected = [3218555715, 3215974750, 3214568625, 1033357881,
                3199330190, 3171538312, 3207485483, 1046319117]
    k = random.key(3)
    eager = np.asarray(random.normal(k, (4,), dtype="complex64"))
    jitted = np.asarray(lamina.jit(lambda k: random.normal(k, (4,), dtype=jnp.complex64))(k))
    assert eager.dtype == np.complex64
    assert eager.view(np.uint32).tolist() == expected
    assert jitted.view(np.uint32).tolist() == expected
    with pytest.raises(ValueError, match="normal: dtype argument must be a float dtype"):
        random.normal(k, (2,), dtype=jnp.int32)
