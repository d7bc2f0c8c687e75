"""The ``legacy_prng_key`` and ``default_prng_impl`` settings: raw keys
allowed, warned about or refused by the ``lamina.random`` functions that take
keys, and the implementation ``key`` and ``PRNGKey`` use. Texts and values
were recorded from JAX 0.10.2."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import random

LEGACY = ('Legacy uint32 key array passed as key to jax.random function. Please create keys '
          'using jax.random.key(). If use of a raw key array was intended, set '
          'jax_legacy_prng_key="allow".')


@pytest.fixture(autouse=True)
def _restore_settings() -> Iterator[None]:
    yield
    lx.config.update("jax_legacy_prng_key", "allow")
    lx.config.update("jax_default_prng_impl", "threefry2x32")


RAW_KEY_USES = {
    "normal": lambda k: random.normal(k),
    "split": lambda k: random.split(k),
    "fold_in": lambda k: random.fold_in(k, 1),
    "bits": lambda k: random.bits(k),
    "key_data": lambda k: random.key_data(k),
    "key_impl": lambda k: random.key_impl(k),
    "gamma": lambda k: random.gamma(k, 2.0),
}


def test_defaults_read_through_config_and_flags() -> None:
    assert lx.config.jax_legacy_prng_key == "allow"
    assert lx.config.jax_default_prng_impl == "threefry2x32"
    assert lx.legacy_prng_key.value == "allow"
    assert lx.default_prng_impl.value == "threefry2x32"


@pytest.mark.parametrize("use", sorted(RAW_KEY_USES))
def test_error_refuses_raw_keys_with_jax_text(use: str) -> None:
    raw = jnp.array([0, 0], jnp.uint32)
    with lx.legacy_prng_key("error"):
        assert lx.config.jax_legacy_prng_key == "error"
        with pytest.raises(ValueError, match="in lamina.random") as info:
            RAW_KEY_USES[use](raw)
    assert str(info.value).startswith(LEGACY)
    assert lx.config.jax_legacy_prng_key == "allow"
    RAW_KEY_USES[use](raw)  # allowed again after the block


@pytest.mark.parametrize("use", sorted(RAW_KEY_USES))
def test_warn_warns_once_at_the_callers_line(use: str) -> None:
    raw = jnp.array([0, 0], jnp.uint32)
    lx.config.update("jax_legacy_prng_key", "warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        RAW_KEY_USES[use](raw)
    assert [str(w.message).startswith(LEGACY) for w in caught] == [True]
    assert caught[0].category is UserWarning
    assert caught[0].filename == __file__


def test_key_creation_and_typed_keys_are_never_refused() -> None:
    # as in JAX: PRNGKey and wrap_key_data make raw keys or take key data; typed
    # keys pass every sampler, including those that split keys internally
    with lx.legacy_prng_key("error"):
        assert random.PRNGKey(0).tolist() == [0, 0]
        k = random.wrap_key_data(jnp.array([0, 5], jnp.uint32))
        random.normal(k)
        key = random.key(0)
        random.gamma(key, 2.0)
        random.beta(key, 2.0, 3.0)
        random.poisson(key, 3.0)
        random.permutation(key, 5)
        random.choice(key, 5)
        random.dirichlet(key, jnp.ones(3))
        random.orthogonal(key, 3)
        random.split(key)
        random.fold_in(key, 3)


def test_bad_values_are_refused() -> None:
    with pytest.raises(ValueError, match=r"legacy_prng_key: the value must be one of "
                                         r"\['allow', 'warn', 'error'\], got 'bad'"):
        lx.config.update("jax_legacy_prng_key", "bad")
    with pytest.raises(ValueError, match=r"default_prng_impl: the value must be one of "
                                         r"\['threefry2x32', 'rbg', 'unsafe_rbg'\], got 'foo'"):
        with lx.default_prng_impl("foo"):
            pass
    assert lx.config.jax_default_prng_impl == "threefry2x32"


def test_default_impl_rbg_keys_and_values() -> None:
    # JAX 0.10.2: under default_prng_impl('rbg') PRNGKey(0) is [0 0 0 0], keys
    # are key<rbg>, and a raw key of shape (4,) is rbg data
    with lx.default_prng_impl("rbg"):
        assert random.default_prng_impl() == "rbg"
        assert lx.config.jax_default_prng_impl == "rbg"
        assert random.PRNGKey(0).tolist() == [0, 0, 0, 0]
        assert str(random.key(0).dtype) == "key<rbg>"
        raw = random.PRNGKey(3)
        assert random.key_impl(raw) == "rbg"
        assert random.split(raw).shape == (2, 4)
        np.testing.assert_allclose(random.normal(raw, (3,)),
                                   [0.62100786, 0.8047896, -0.15007442], rtol=1e-6)
        np.testing.assert_allclose(random.uniform(raw, (2,)), [0.73270273, 0.78952944],
                                   rtol=1e-6)
        with pytest.raises(TypeError, match=r"lamina.random.normal: argument key .*uint32\[4\] "
                                            r"array of rbg key data.* got u32\[2\]"):
            random.normal(jnp.array([0, 0], jnp.uint32))
        rbg_raw = random.PRNGKey(1)
    assert random.default_prng_impl() == "threefry2x32"
    assert random.PRNGKey(0).shape == (2,)
    with pytest.raises(TypeError, match=r"uint32\[2\] array of threefry2x32 key data.*u32\[4\]"):
        random.normal(rbg_raw)


def test_default_impl_unsafe_rbg_through_config_update() -> None:
    lx.config.update("jax_default_prng_impl", "unsafe_rbg")
    assert str(random.key(0).dtype) == "key<urbg>"
    assert random.key_dtype() == random.key(0).dtype
    np.testing.assert_allclose(random.normal(random.PRNGKey(3), (3,)),
                               [0.62100786, 0.8047896, -0.15007442], rtol=1e-6)


def test_default_impl_is_part_of_the_jit_trace() -> None:
    # lamina retraces under another implementation (JAX 0.10.2 reuses the trace
    # made under the first, giving threefry key data under rbg)
    f = lx.jit(lambda s: random.key_data(random.key(s)))
    assert f(0).shape == (2,)
    with lx.default_prng_impl("rbg"):
        assert f(0).shape == (4,)
    assert f(0).shape == (2,)
