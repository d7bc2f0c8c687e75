"""lamina.numpy shape manipulation against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core import api

import lamina.numpy as jnp
from lamina.numpy import UnsupportedArgumentError

A = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
M = np.arange(12, dtype=np.int32).reshape(3, 4)
V = np.arange(5, dtype=np.float32)


def check(actual, expected, dtype=None):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    np.testing.assert_array_equal(actual_np, expected.astype(actual_np.dtype))


def test_reshape_ravel_transpose():
    check(jnp.reshape(A, (6, 4)), A.reshape(6, 4))
    check(jnp.reshape(A, (-1, 2)), A.reshape(-1, 2))
    check(jnp.reshape(A, 24), A.reshape(24))
    check(jnp.reshape(A, newshape=(4, -1)), A.reshape(4, -1))
    check(jnp.ravel(A), A.ravel())
    check(jnp.transpose(A), A.T)
    check(jnp.transpose(A, (1, 0, 2)), A.transpose(1, 0, 2))
    check(jnp.transpose(A, (-1, 0, 1)), A.transpose(-1, 0, 1))
    check(jnp.permute_dims(A, (2, 1, 0)), A.transpose(2, 1, 0))
    check(jnp.matrix_transpose(A), np.swapaxes(A, -1, -2))
    with pytest.raises(TypeError, match="cannot reshape"):
        jnp.reshape(A, (5, -1))
    with pytest.raises(ValueError, match="one unknown dimension"):
        jnp.reshape(A, (-1, -1))
    check(jnp.reshape(A, (4, 6), order="F"), A.reshape(4, 6, order="F"))
    with pytest.raises(ValueError, match="Unexpected value for 'order' argument"):
        jnp.reshape(A, (24,), order="X")
    with pytest.raises(ValueError, match="permutation"):
        jnp.transpose(A, (0, 0, 1))


def test_axes_moves():
    check(jnp.moveaxis(A, 0, -1), np.moveaxis(A, 0, -1))
    check(jnp.moveaxis(A, (0, 1), (2, 0)), np.moveaxis(A, (0, 1), (2, 0)))
    check(jnp.swapaxes(A, 0, 2), np.swapaxes(A, 0, 2))
    check(jnp.rollaxis(A, 2), np.rollaxis(A, 2))
    check(jnp.rollaxis(A, 0, 3), np.rollaxis(A, 0, 3))
    check(jnp.squeeze(np.ones((1, 3, 1))), np.ones(3))
    check(jnp.squeeze(np.ones((1, 3, 1)), axis=2), np.ones((1, 3)))
    check(jnp.expand_dims(V, 0), V[None])
    check(jnp.expand_dims(V, (0, -1)), np.expand_dims(V, (0, -1)))
    with pytest.raises(ValueError, match="size not equal to one"):
        jnp.squeeze(A, axis=0)


def test_broadcasting_functions():
    check(jnp.broadcast_to(V, (3, 5)), np.broadcast_to(V, (3, 5)))
    check(jnp.broadcast_to(np.ones((3, 1)), (2, 3, 4)), np.ones((2, 3, 4)))
    assert jnp.broadcast_shapes((3, 1), (4,), ()) == (3, 4)
    a, b = jnp.broadcast_arrays(np.ones((3, 1)), V)
    assert a.shape == b.shape == (3, 5)
    with pytest.raises(ValueError, match="cannot broadcast"):
        jnp.broadcast_to(V, (3,))
    check(jnp.atleast_1d(1.0), [1.0])
    check(jnp.atleast_2d(V), V[None])
    check(jnp.atleast_3d(V), np.atleast_3d(V))
    check(jnp.atleast_3d(M), np.atleast_3d(M))
    x, y = jnp.atleast_2d(1, V)
    assert x.shape == (1, 1) and y.shape == (1, 5)
    assert isinstance(jnp.atleast_1d(np.ones(3)), jnp.ndarray)


def test_joining():
    check(jnp.concatenate([M, M], axis=1), np.concatenate([M, M], axis=1))
    check(jnp.concatenate([M, M.astype(np.float32)]), np.concatenate([M, M]), np.float32)
    check(jnp.concatenate([M, M], axis=None), np.concatenate([M, M], axis=None))
    check(jnp.concat([V, V]), np.concatenate([V, V]))
    check(jnp.stack([V, V], axis=1), np.stack([V, V], axis=1))
    check(jnp.stack([M, M], axis=-1), np.stack([M, M], axis=-1))
    check(jnp.hstack([V, V]), np.hstack([V, V]))
    check(jnp.hstack([M, M]), np.hstack([M, M]))
    check(jnp.vstack([V, V]), np.vstack([V, V]))
    check(jnp.dstack([M, M]), np.dstack([M, M]))
    check(jnp.column_stack([V, V]), np.column_stack([V, V]))
    check(jnp.append(M, [[1, 2, 3, 4]], axis=0), np.append(M, [[1, 2, 3, 4]], axis=0))
    check(jnp.append(M, 5), np.append(M, 5))
    check(jnp.stack(jnp.ones((2, 3))), np.ones((2, 3)))
    for piece, want in zip(jnp.unstack(M, axis=1), np.moveaxis(M, 1, 0)):
        check(piece, want)
    with pytest.raises(ValueError, match="same number of dimensions"):
        jnp.concatenate([M, V])
    with pytest.raises(ValueError, match="same shape"):
        jnp.stack([V, V[:2]])


def test_splitting():
    for got, want in zip(jnp.split(np.arange(6), 3), np.split(np.arange(6), 3)):
        check(got, want)
    for got, want in zip(jnp.split(M, [1, 3], axis=1), np.split(M, [1, 3], axis=1)):
        check(got, want)
    for got, want in zip(jnp.array_split(np.arange(7), 3), np.array_split(np.arange(7), 3)):
        check(got, want)
    for got, want in zip(jnp.hsplit(M, 2), np.hsplit(M, 2)):
        check(got, want)
    for got, want in zip(jnp.vsplit(M, [1]), np.vsplit(M, [1])):
        check(got, want)
    for got, want in zip(jnp.dsplit(A, 2), np.dsplit(A, 2)):
        check(got, want)
    with pytest.raises(ValueError, match="equal division"):
        jnp.split(np.arange(7), 3)


def test_tile_repeat():
    check(jnp.tile(V, 2), np.tile(V, 2))
    check(jnp.tile(M, (2, 1)), np.tile(M, (2, 1)))
    check(jnp.tile(V, (2, 1, 2)), np.tile(V, (2, 1, 2)))
    check(jnp.repeat(M, 2), np.repeat(M, 2))
    check(jnp.repeat(M, 2, axis=1), np.repeat(M, 2, axis=1))
    check(jnp.repeat(M, [1, 0, 2], axis=0), np.repeat(M, [1, 0, 2], axis=0))
    check(jnp.repeat(V, np.array([1, 2, 0, 1, 3]), total_repeat_length=7),
          np.repeat(V, [1, 2, 0, 1, 3]))


def test_repeat_traced_repeats_need_total_length():
    counts = np.array([1, 2, 0, 1, 3], np.int32)

    def f(r):
        return jnp.repeat(V, r, total_repeat_length=7)

    jaxpr = api.make_jaxpr(f)(counts)
    assert len(jaxpr.jaxpr.outvars) == 1
    with pytest.raises(TypeError, match="repeats"):
        api.make_jaxpr(lambda r: jnp.repeat(V, r))(counts)


def test_flip_roll_rot90():
    check(jnp.flip(A), np.flip(A))
    check(jnp.flip(A, 1), np.flip(A, 1))
    check(jnp.flip(A, (0, 2)), np.flip(A, (0, 2)))
    check(jnp.fliplr(M), np.fliplr(M))
    check(jnp.flipud(M), np.flipud(M))
    check(jnp.roll(V, 2), np.roll(V, 2))
    check(jnp.roll(M, -1), np.roll(M, -1))
    check(jnp.roll(M, 1, axis=1), np.roll(M, 1, axis=1))
    check(jnp.roll(M, (1, 2), axis=(0, 1)), np.roll(M, (1, 2), axis=(0, 1)))
    check(jnp.roll(V, 7), np.roll(V, 7))
    for k in range(-1, 5):
        check(jnp.rot90(M, k), np.rot90(M, k))
    check(jnp.rot90(A, 1, axes=(1, 2)), np.rot90(A, 1, axes=(1, 2)))


def test_roll_with_traced_shift():
    def f(s):
        return jnp.roll(V, s)

    for shift in (-3, 0, 2, 6):
        closed = api.make_jaxpr(f)(np.int32(shift))
        from lamina_tracing_core import core
        (out,) = core.eval_jaxpr(closed.jaxpr, closed.consts, np.int32(shift))
        check(out, np.roll(V, shift))


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap", "reflect", "symmetric", "empty"])
def test_pad_modes(mode):
    for width in (2, ((1, 2),), ((0, 3), (2, 1)), 4):
        x = M if not isinstance(width, tuple) or len(width) == 2 else V
        if mode == "empty":
            got = jnp.pad(x, width, mode)
            assert got.shape == np.pad(x, width, mode).shape
            continue
        check(jnp.pad(x, width, mode), np.pad(x, width, mode))


def test_pad_constant_values_and_errors():
    check(jnp.pad(M, 1, constant_values=7), np.pad(M, 1, constant_values=7))
    check(jnp.pad(M, ((1, 0), (0, 2)), constant_values=((1, 2), (3, 4))),
          np.pad(M, ((1, 0), (0, 2)), constant_values=((1, 2), (3, 4))))
    with pytest.raises(UnsupportedArgumentError, match="mode 'median'"):
        jnp.pad(M, 1, mode="median")
    with pytest.raises(ValueError, match="non-negative"):
        jnp.pad(M, -1)
