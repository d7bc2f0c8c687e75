"""``lax.index_take``: points of several axes, indices taken modulo the axis
size (Python-style), gradient and jit. Expected values recorded from JAX
0.10.2 (which refuses unsorted ``axes``; lamina takes them in any order)."""

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import pytest

SRC = jnp.arange(24.0).reshape(2, 3, 4)


def test_values_match_jax():
    assert lax.index_take(SRC, (jnp.array([0, 1, 1]), jnp.array([2, 0, 3])), (0, 2)).tolist() \
        == [[2.0, 6.0, 10.0], [12.0, 16.0, 20.0], [15.0, 19.0, 23.0]]
    assert lax.index_take(SRC, (jnp.array([1, 0]),), (1,)).tolist() == [
        [[4.0, 5.0, 6.0, 7.0], [16.0, 17.0, 18.0, 19.0]],
        [[0.0, 1.0, 2.0, 3.0], [12.0, 13.0, 14.0, 15.0]]]
    assert lax.index_take(SRC, (jnp.array([5]),), (0,)).tolist() == [
        [[12.0, 13.0, 14.0, 15.0], [16.0, 17.0, 18.0, 19.0], [20.0, 21.0, 22.0, 23.0]]]
    assert lax.index_take(SRC, (jnp.array([-1]),), (2,)).tolist() == \
        [[[3.0, 7.0, 11.0], [15.0, 19.0, 23.0]]]


def test_gradient_jit_and_axis_order():
    idxs = (jnp.array([0, 1, 1]), jnp.array([2, 0, 2]))
    grad = lx.grad(lambda s: lax.index_take(s, idxs, (0, 2)).sum())(SRC)
    assert grad[1].tolist() == [[1.0, 0.0, 1.0, 0.0]] * 3
    # axes in another order: the index arrays follow them
    assert lx.jit(lambda s: lax.index_take(s, idxs[::-1], (2, 0)))(SRC).tolist() == \
        lax.index_take(SRC, idxs, (0, 2)).tolist()
    with pytest.raises(ValueError, match="index_take: 1 index arrays for 2 axes"):
        lax.index_take(SRC, idxs[:1], (0, 2))
