"""``lamina.nn.dot_product_attention`` against JAX 0.10.2's XLA implementation:
plain, grouped-query heads with bias, mask and causal masking, a local window
with padded sequence lengths and the residual, unbatched inputs, the
gradient, bfloat16 under jit, and JAX's operand checks. Expected values
recorded from JAX 0.10.2 (float32, CPU; rounded to 5 decimals)."""

import lamina as lx
import lamina.nn as nn
import lamina.numpy as jnp
import numpy as np
import pytest

B, T, S, N, K, H = 2, 4, 5, 4, 2, 3
_rng = np.random.RandomState(0)
Q = _rng.randn(B, T, N, H).astype(np.float32)
KEY = _rng.randn(B, S, K, H).astype(np.float32)
V = _rng.randn(B, S, K, H).astype(np.float32)
BIAS = _rng.randn(1, N, T, S).astype(np.float32)
MASK = _rng.rand(B, 1, T, S) > 0.3

PLAIN_0_1 = [[0.61777, -0.08728, 0.02577], [0.78882, -0.22174, -0.43397], [-0.18258, -0.49549, -0.53066], [-0.35314, -0.41832, 0.433]]
MASKED_1 = [[[0.51398, -0.21583, 0.03531], [0.51398, -0.21583, 0.03531], [-0.01447, -0.01719, 0.24752], [-0.01447, -0.01719, 0.24752]], [[-0.03928, -1.16809, 0.52328], [-0.03928, -1.16809, 0.52328], [-0.17155, 0.77179, 0.8235], [-0.17155, 0.77179, 0.8235]], [[0.51398, -0.21583, 0.03531], [0.51398, -0.21583, 0.03531], [-0.01447, -0.01719, 0.24752], [-0.01447, -0.01719, 0.24752]], [[0.73087, -1.44101, -0.04487], [1.44088, -0.06422, -0.20563], [-0.28168, 1.03012, 0.59135], [-0.55603, 0.57912, 0.17684]]]
WINDOWED_0_FROM_2 = [[[0.92719, 0.35146, 0.65797], [0.61044, 0.39387, 0.34238], [0.33564, -0.57116, -0.97335], [-0.26123, -0.10407, -0.31071]], [[0.0, -0.0, -0.0], [0.0, -0.0, -0.0], [-0.0, -0.0, -0.0], [-0.0, -0.0, -0.0]]]
RESIDUAL = [[[0.56429, 1.80767, 1.34158, 0.26764], [1.62887, 2.20561, 1.94693, 1.91439], [1.30498, 2.71126, 0.96524, 0.60092], [-2.381976325057654e+38, -2.381976325057654e+38, -2.381976325057654e+38, -2.381976325057654e+38]], [[1.14632, 0.50235, 0.67872, 0.7836], [0.80956, 1.26356, 0.17706, 0.70772], [-0.53173, 0.40107, 0.03217, 0.59892], [-2.381976325057654e+38, -2.381976325057654e+38, -2.381976325057654e+38, -2.381976325057654e+38]]]
UNBATCHED = [[[1.01744, 0.19596, 0.66402], [1.07043, -0.00812, 0.3128], [-0.31864, -0.15161, -0.80981], [-0.16632, 0.34931, -0.58055]], [[0.61777, -0.08728, 0.02577], [0.78882, -0.22174, -0.43397], [-0.18258, -0.49549, -0.53066], [-0.35314, -0.41832, 0.433]], [[0.34384, -0.52417, 0.01608], [0.74256, 0.05534, 0.07767], [-0.39991, -0.37159, 0.24649], [-0.52688, -0.09969, -0.05682]], [[0.89423, -0.09458, 0.0142], [0.34069, -0.48881, -0.94023], [-0.4821, -0.47097, 1.50114], [-0.25234, 0.40674, -0.74231]]]
CAUSAL_GRAD_0_0 = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, atol=2e-5, rtol=0)


def test_values_match_jax():
    q, k, v = jnp.asarray(Q), jnp.asarray(KEY), jnp.asarray(V)
    _close(nn.dot_product_attention(q, k, v)[0, 1], PLAIN_0_1)
    _close(nn.dot_product_attention(q, k, v, jnp.asarray(BIAS), jnp.asarray(MASK),
                                    is_causal=True)[1], MASKED_1)
    out, residual = nn.dot_product_attention(
        q, k, v, scale=0.5, local_window_size=1,
        query_seq_lengths=jnp.array([3, 4], jnp.int32),
        key_value_seq_lengths=jnp.array([5, 2], jnp.int32), return_residual=True)
    _close(out[0, 2:], WINDOWED_0_FROM_2)
    _close(residual, RESIDUAL)
    _close(nn.dot_product_attention(q[0], k[0], v[0]), UNBATCHED)


def test_gradient_and_jit():
    k, v = jnp.asarray(KEY), jnp.asarray(V)
    grad = lx.grad(lambda a: nn.dot_product_attention(a, k, v, is_causal=True).sum())
    _close(grad(jnp.asarray(Q))[0, 0], CAUSAL_GRAD_0_0)
    bf16 = [jnp.asarray(x, jnp.bfloat16) for x in (Q, KEY, V)]
    assert lx.jit(nn.dot_product_attention)(*bf16).dtype == jnp.bfloat16


def test_operand_checks():
    q, k, v = jnp.asarray(Q), jnp.asarray(KEY), jnp.asarray(V)
    with pytest.raises(ValueError, match="query dtype should be float32, but got float16"):
        nn.dot_product_attention(q.astype(jnp.float16), k, v)
    with pytest.raises(ValueError, match="mask dtype should be bool, but got int32"):
        nn.dot_product_attention(q, k, v, mask=jnp.asarray(MASK, jnp.int32))
    with pytest.raises(ValueError, match="number of query heads must be a multiple"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="cuDNN attention kernel"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
