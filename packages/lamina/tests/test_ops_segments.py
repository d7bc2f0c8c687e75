"""``lamina.ops`` segment reductions: identities of empty segments, dropped
out-of-range ids, inferred ``num_segments``, buckets, jit/grad/vmap and the
concreteness error. Expected values recorded from JAX 0.10.2."""

import lamina as lx
import lamina.numpy as jnp
import pytest
from lamina import ops

D = jnp.arange(12.0).reshape(6, 2)
IDS = jnp.array([0, 0, 2, 1, 5, 2])


def test_reductions_match_jax():
    assert ops.segment_sum(D, IDS, 4).tolist() == [[2.0, 4.0], [6.0, 7.0], [14.0, 16.0],
                                                   [0.0, 0.0]]
    assert ops.segment_sum(D[:, 0], IDS).tolist() == [2.0, 6.0, 14.0, 0.0, 0.0, 8.0]
    inf = float("inf")
    assert ops.segment_max(D, IDS, 4).tolist() == [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0],
                                                   [-inf, -inf]]
    assert ops.segment_min(D, IDS, 4).tolist() == [[0.0, 1.0], [6.0, 7.0], [4.0, 5.0],
                                                   [inf, inf]]
    assert ops.segment_prod(D[:, 0] + 1, IDS, 4).tolist() == [3.0, 7.0, 55.0, 1.0]
    assert ops.segment_max(jnp.array([1, 2, 3]), jnp.array([0, 0, 2]), 3).tolist() == \
        [2, -2147483648, 3]
    assert ops.segment_sum(D[:, 0], jnp.array([0, -1, 2, 1, 9, 2]), 3).tolist() == \
        [0.0, 6.0, 14.0]
    assert ops.segment_sum(D[:, 0], IDS, 3, bucket_size=2).tolist() == [2.0, 6.0, 14.0]


def test_transformations():
    assert lx.jit(lambda a, i: ops.segment_sum(a, i, 3))(D[:, 0], IDS).tolist() == \
        [2.0, 6.0, 14.0]
    assert lx.grad(lambda a: ops.segment_max(a, IDS, 4).sum())(D[:, 0]).tolist() == \
        [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert lx.vmap(lambda a: ops.segment_sum(a, IDS, 3))(D.T).tolist() == \
        [[2.0, 6.0, 14.0], [4.0, 7.0, 16.0]]
    with pytest.raises(lx.errors.ConcretizationTypeError, match="num_segments"):
        lx.jit(lambda a, i: ops.segment_sum(a, i))(D[:, 0], IDS)
    with pytest.raises(TypeError, match="segment_sum: segment_ids must be integers"):
        ops.segment_sum(D, jnp.ones(6), 2)
