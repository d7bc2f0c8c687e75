"""Keyword parameters of JAX 0.10.2's API that lamina takes as JAX does:
``random.key``/``wrap_key_data``'s ``dtype``, ``key_dtype``'s ``impl_spec``,
``checkpoint``'s ``static_argnames`` (and the removed ``concrete``),
``local_devices``' ``host_id`` and ``block_until_ready``'s ``x``. Error
texts are JAX's."""

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import random


def test_keys_take_a_dtype():
    rbg = random.key_dtype(impl_spec="rbg")
    assert str(random.key(0, dtype=rbg).dtype) == "key<rbg>"
    assert str(random.key(0, dtype="rbg").dtype) == "key<rbg>"
    data = jnp.zeros(2, jnp.uint32)
    assert str(random.wrap_key_data(data, dtype=random.key_dtype()).dtype) == "key<fry>"
    with pytest.raises(ValueError, match="Cannot specify both `impl` and `dtype` arguments to "
                                         "jax.random.key"):
        random.key(0, impl="rbg", dtype="rbg")
    with pytest.raises(ValueError, match="Cannot specify both `impl` and `dtype` arguments to "
                                         "jax.random.wrap_key_data"):
        random.wrap_key_data(data, impl="rbg", dtype="rbg")


def test_checkpoint_static_argnames_and_removed_concrete():
    f = lx.checkpoint(lambda x, n: (x ** n).sum(), static_argnames="n")
    np.testing.assert_allclose(lx.grad(f)(jnp.arange(3.0), n=3), [0.0, 3.0, 12.0])
    with pytest.raises(NotImplementedError, match="The `concrete` option to `jax.checkpoint` "
                                                  "was deprecated in JAX v0.8.2, and removed"):
        lx.checkpoint(lambda x: x, concrete=True)
    with pytest.raises(TypeError):  # prevent_cse and policy are keyword-only, as in JAX
        lx.checkpoint(lambda x: x, True)


def test_local_devices_host_id_and_block_until_ready_x():
    with pytest.warns(UserWarning, match="The argument to jax.local_devices has been renamed "
                                         "from `host_id` to `process_index`"):
        assert lx.local_devices(host_id=0) == lx.local_devices()
    assert lx.block_until_ready(x=jnp.ones(2)).shape == (2,)
