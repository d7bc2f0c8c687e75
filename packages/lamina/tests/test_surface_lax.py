"""The ``lax`` names JAX 0.10.2 has that are not kernels: values are JAX's,
recorded from ``jax.lax`` with the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import lax


def test_split_stack_unstack_tile() -> None:
    x = jnp.arange(12.).reshape(3, 4)
    a, b = lax.split(x, (1, 3), axis=1)
    np.testing.assert_array_equal(np.asarray(a), [[0.], [4.], [8.]])
    np.testing.assert_array_equal(np.asarray(b), [[1., 2., 3.], [5., 6., 7.], [9., 10., 11.]])
    with pytest.raises(ValueError, match="sum"):
        lax.split(x, (1, 2), axis=1)
    np.testing.assert_array_equal(np.asarray(lax.stack([jnp.ones(2), jnp.zeros(2)], axis=1)),
                                  [[1., 0.], [1., 0.]])
    parts = lax.unstack(x, axis=1)
    assert isinstance(parts, tuple) and len(parts) == 4
    np.testing.assert_array_equal(np.asarray(parts[2]), [2., 6., 10.])
    np.testing.assert_array_equal(np.asarray(lax.tile(jnp.arange(3), (2,))), [0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(np.asarray(lax.tile(x, (2, 3))), np.tile(np.asarray(x), (2, 3)))
    with pytest.raises(TypeError, match="reps length"):
        lax.tile(x, (2,))


def test_composites_differentiate_and_batch() -> None:
    def f(x: object) -> object:
        a, b = lax.split(x, (2, 1))
        return jnp.sum(lax.tile(a, (2,)) * 3.0) + jnp.sum(lax.stack([b, b]) ** 2)

    x = jnp.array([1., 2., 3.])
    np.testing.assert_array_equal(np.asarray(lamina.grad(f)(x)), [6., 6., 12.])
    batched = lamina.vmap(lambda v: lax.unstack(v)[1])(jnp.arange(6.).reshape(2, 3))
    np.testing.assert_array_equal(np.asarray(batched), [1., 4.])


def test_empty_broadcast_shapes_broadcast_like() -> None:
    e = lax.empty((2, 3), jnp.float32)
    assert e.shape == (2, 3) and e.dtype == np.float32
    assert lax.empty((2,), "int32").dtype == np.int32
    assert lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert lax.broadcast_shapes((1,), (5, 1, 1)) == (5, 1, 1)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        lax.broadcast_shapes((2,), (3,))
    out = lax.broadcast_like(jnp.float32(2), jnp.ones((2, 3), jnp.int32))
    assert out.shape == (2, 3) and out.dtype == np.float32


def test_mulhi_matches_jax() -> None:
    assert int(lax.mulhi(jnp.int32(-7), jnp.int32(1 << 30))) == -2
    assert int(lax.mulhi(jnp.uint32(0xffffffff), jnp.uint32(3))) == 2
    out = lax.mulhi(jnp.array([123456789, -5], jnp.int32), jnp.array([987654321, 7], jnp.int32))
    assert np.asarray(out).tolist() == [28389652, -1]
    assert int(lax.mulhi(jnp.uint8(200), jnp.uint8(200))) == 156
    assert int(lax.mulhi(jnp.int16(-300), jnp.int16(300))) == -2
    batched = lamina.vmap(lambda v: lax.mulhi(v, jnp.uint32(7)))(
        jnp.arange(3, dtype=jnp.uint32) * 0x40000000)
    assert np.asarray(batched).tolist() == [0, 1, 3]
    with pytest.raises(TypeError, match="subtypes of integer"):
        lax.mulhi(1.0, 2.0)


def test_mulhi_agrees_with_wide_products() -> None:
    rng = np.random.default_rng(0)
    for dt, wide in ((np.int8, np.int64), (np.uint16, np.int64), (np.int32, np.int64),
                     (np.uint32, np.uint64)):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
        b = rng.integers(info.min, info.max, 64, dtype=dt, endpoint=True)
        expected = ((a.astype(wide) * b.astype(wide)) >> (8 * np.dtype(dt).itemsize)).astype(dt)
        np.testing.assert_array_equal(np.asarray(lamina.jit(lax.mulhi)(a, b)), expected)


def test_optimization_barrier() -> None:
    out = lax.optimization_barrier((jnp.ones(2), 3))
    assert isinstance(out, tuple) and int(out[1]) == 3
    text = str(lamina.make_jaxpr(lax.optimization_barrier)((jnp.ones(2), jnp.int32(3))))
    assert "optimization_barrier" in text
    jitted = lamina.jit(lax.optimization_barrier)({"a": jnp.arange(3.)})
    np.testing.assert_array_equal(np.asarray(jitted["a"]), [0., 1., 2.])
    assert "optimization_barrier" in lamina.jit(
        lambda x: lax.optimization_barrier(x * 2)).lower(1.0).as_text()
    assert float(lamina.grad(lambda x: lax.optimization_barrier(x) * 2.)(1.)) == 2.0
    np.testing.assert_array_equal(
        np.asarray(lamina.vmap(lambda x: lax.optimization_barrier(x) + 1)(jnp.arange(3.))),
        [1., 2., 3.])


def test_platform_dependent() -> None:
    assert float(lax.platform_dependent(1., cpu=lambda x: x + 1, default=lambda x: x - 1)) == 2.
    jitted = lamina.jit(lambda x: lax.platform_dependent(x, tpu=lambda x: x + 1,
                                                         default=lambda x: x - 1))
    assert float(jitted(1.)) == 0.
    with pytest.raises(ValueError, match="no branch for platform 'cpu'"):
        lax.platform_dependent(1., tpu=lambda x: x + 1)


def test_shape_tuples_match_jax() -> None:
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (1, 1), "SAME", dn) == \
        (1, 5, 5, 8)
    assert lax.conv_general_shape_tuple((2, 7, 6, 3), (3, 2, 3, 4), (2, 1), "VALID", dn) == \
        (2, 3, 5, 4)
    assert lax.conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "SAME", dn) == \
        (1, 10, 10, 8)
    assert lax.conv_transpose_shape_tuple((1, 5, 5, 3), (3, 3, 3, 8), (2, 2), "VALID", dn) == \
        (1, 11, 11, 8)
    assert lax.conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), [(1, 1), (0, 0)]) == \
        (2, 4, 5, 4)
    assert lax.reduce_window_shape_tuple((4, 6), (2, 3), (2, 1), [(0, 0), (1, 1)]) == (2, 6)
    assert lax.reduce_window_shape_tuple((4, 6), (2, 2), (1, 1), [(0, 0), (0, 0)],
                                         (2, 1), (1, 2)) == (6, 4)


def test_type_names_and_control_flow_primitives() -> None:
    assert lax.RandomAlgorithm.RNG_THREE_FRY.value == 1
    assert lax.RandomAlgorithm.RNG_DEFAULT == 0
    for name in ("DotDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "PrecisionLike",
                 "cond_p", "scan_p", "while_p"):
        assert hasattr(lax, name), name
    assert "cond" in str(lamina.make_jaxpr(
        lambda p, x: lax.cond(p, lambda v: v + 1, lambda v: v, x))(True, 1.0))
    assert lax.cond_p.name == "cond"
