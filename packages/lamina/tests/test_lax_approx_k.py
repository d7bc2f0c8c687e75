"""``lax.approx_max_k`` / ``approx_min_k``: exact on CPU, as JAX's fallback;
values, indices (ties: lower index first), reduction_dimension, gradient,
vmap and the float-only check. Expected values recorded from JAX 0.10.2."""

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import pytest

X = [[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], [2.0, 7.0, 1.0, 8.0, 2.0, 8.0, 1.0, 8.0]]


def test_values_and_indices_match_jax():
    x = jnp.array(X)
    values, indices = lax.approx_max_k(x, 3)
    assert values.tolist() == [[9.0, 6.0, 5.0], [8.0, 8.0, 8.0]]
    assert indices.tolist() == [[5, 7, 4], [3, 5, 7]] and indices.dtype == jnp.int32
    values, indices = lax.approx_min_k(x, 3)
    assert values.tolist() == [[1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]
    assert indices.tolist() == [[1, 3, 6], [2, 6, 0]]
    values, indices = lax.approx_max_k(x, 1, reduction_dimension=0)
    assert values.tolist() == [[3.0, 7.0, 4.0, 8.0, 5.0, 9.0, 2.0, 8.0]]
    assert indices.tolist() == [[0, 1, 0, 1, 0, 0, 0, 1]]


def test_gradient_and_vmap():
    x = jnp.array(X)
    grad = lx.grad(lambda a: lax.approx_max_k(a, 2)[0].sum())(x)
    assert grad.tolist() == [[0, 0, 0, 0, 0, 1, 0, 1], [0, 0, 0, 1, 0, 1, 0, 0]]
    values, indices = lx.vmap(lambda a: lax.approx_min_k(a, 2))(x)
    assert values.tolist() == [[1.0, 1.0], [1.0, 1.0]] and indices.tolist() == [[1, 3], [2, 6]]


def test_checks():
    with pytest.raises(ValueError, match="approx_min_k: operand must be a floating type"):
        lax.approx_min_k(jnp.array([3, 1, 5]), 2)
    with pytest.raises(ValueError, match=r"recall_target must be in \(0, 1\]"):
        lax.approx_max_k(jnp.array(X), 3, recall_target=1.5)
