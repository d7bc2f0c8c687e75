"""Behaviours 10 and 13: pmap's chunked shards (and the setting turning them
off), and pmap speaking of ``static_broadcasted_argnums``."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
from lamina import lax
from lamina_interpreters_pxla.pmap_config import chunked_shards, chunked_shards_scope

A = np.arange(800, dtype=np.float32).reshape(8, 100)


def _double(x):
    return x * 2


# --- behaviour 10 -------------------------------------------------------------------------------
def test_chunked_is_the_default():
    assert chunked_shards() is True


def test_chunked_shards_keep_the_rank(devices8):
    out = lx.pmap(_double)(A)
    assert out.shape == (8, 100)
    shards = out.addressable_shards
    assert len(shards) == 8
    assert [s.data.shape for s in shards] == [(1, 100)] * 8
    assert [s.device for s in shards] == devices8
    for i, s in enumerate(shards):
        np.testing.assert_array_equal(np.asarray(s.data), 2 * A[i:i + 1])
    # an ordinary mesh sharding, as jit understands it
    assert type(out.sharding).__name__ == "NamedSharding"
    np.testing.assert_array_equal(np.asarray(lx.jit(lambda v: v + 1)(out)), 2 * A + 1)


def test_classic_shards_drop_the_mapped_axis(devices8):
    with chunked_shards_scope(False):
        out = lx.pmap(_double)(A)
        assert out.shape == (8, 100)
        assert [s.data.shape for s in out.addressable_shards] == [(100,)] * 8
        np.testing.assert_array_equal(np.asarray(out), 2 * A)
        assert type(out.sharding).__name__ == "PmapSharding"
    assert chunked_shards() is True
    out = lx.pmap(_double)(A)
    assert [s.data.shape for s in out.addressable_shards] == [(1, 100)] * 8


def test_chunked_pmap_lowers_per_device_blocks_of_full_rank(devices8):
    text = lx.pmap(_double).lower(A).as_text()
    assert "tensor<1x100xf32>" in text
    with chunked_shards_scope(False):
        text = lx.pmap(_double).lower(A).as_text()
    assert "tensor<1x100xf32>" not in text and "tensor<100xf32>" in text


def test_collectives_give_the_same_values_in_both_layouts(devices8):
    fun = lx.pmap(lambda x: lax.psum(x, "i") - x, axis_name="i")
    chunked = np.asarray(fun(A))
    with chunked_shards_scope(False):
        classic = np.asarray(lx.pmap(lambda x: lax.psum(x, "i") - x, axis_name="i")(A))
    np.testing.assert_allclose(chunked, A.sum(0) - A)
    np.testing.assert_allclose(classic, chunked)


def test_the_config_flag_turns_chunking_off(devices8):
    assert lx.config.read("pmap_chunked_shards") is True
    lx.config.update("pmap_chunked_shards", False)
    try:
        out = lx.pmap(_double)(A)
        assert [s.data.shape for s in out.addressable_shards] == [(100,)] * 8
    finally:
        lx.config.update("pmap_chunked_shards", True)


# --- behaviour 13 -------------------------------------------------------------------------------
def test_pmap_doc_speaks_of_static_broadcasted_argnums():
    assert "static_broadcasted_argnums" in lx.pmap.__doc__
    assert "static_argnums" not in lx.pmap.__doc__.replace("static_broadcasted_argnums", "")


def _add(a, b):
    return a + b


def test_too_few_arguments_for_static_broadcasted_argnums(devices8):
    with pytest.raises(ValueError) as info:
        lx.pmap(_add, static_broadcasted_argnums=(1,))(np.ones(8, np.float32))
    assert "static_broadcasted_argnums=(1,)" in str(info.value)
    assert "positional" in str(info.value)


def test_static_broadcasted_argnums_work(devices8):
    fun = lx.pmap(lambda x, n: x * n, static_broadcasted_argnums=(1,))
    np.testing.assert_array_equal(np.asarray(fun(A, 3)), A * 3)


def test_too_few_arguments_without_statics_is_pythons_type_error(devices8):
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        lx.pmap(_add)(np.ones(8, np.float32))
