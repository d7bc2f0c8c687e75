"""``lamina.nn.identity``, ``sparse_sigmoid``, ``log1mexp`` (with its custom
derivative) and ``logmeanexp``: values recorded from JAX 0.10.2 (float32, CPU)."""

import lamina as lx
import lamina.nn as nn
import lamina.numpy as jnp
import numpy as np
import pytest

X = [-2.0, -1.0, -0.5, 0.0, 0.3, 1.0, 2.5]
P = [1e-6, 0.1, 0.6931471805599453, 1.0, 5.0, 30.0]


def test_identity_and_sparse_sigmoid():
    x = jnp.array(X)
    assert nn.identity(x).tolist() == jnp.asarray(X, jnp.float32).tolist()
    assert nn.sparse_sigmoid(x).tolist() == [0.0, 0.0, 0.25, 0.5, 0.6499999761581421, 1.0, 1.0]
    assert lx.grad(lambda v: nn.sparse_sigmoid(v).sum())(x).tolist() == \
        [0.0, 0.25, 0.5, 0.5, 0.5, 0.25, 0.0]
    with pytest.raises(TypeError, match="identity requires ndarray or scalar arguments, got "
                                        "<class 'list'> at position 0"):
        nn.identity([1, 2])


def test_log1mexp_and_its_derivative():
    p = jnp.array(P)
    np.testing.assert_array_equal(nn.log1mexp(p), np.float32(
        [-13.815510749816895, -2.352168560028076, -0.6931471824645996, -0.4586751461029053,
         -0.006760749500244856, -9.357622912219837e-14]))
    np.testing.assert_array_equal(lx.grad(lambda v: nn.log1mexp(v).sum())(p), np.float32(
        [999999.5625, 9.508333206176758, 1.0, 0.5819767117500305, 0.006783654913306236,
         9.357623589846195e-14]))


def test_logmeanexp():
    m = jnp.arange(6.0).reshape(2, 3)
    assert nn.logmeanexp(m).tolist() == 3.6644339561462402
    assert nn.logmeanexp(m, axis=1).tolist() == [1.3089935779571533, 4.308993816375732]
    assert nn.logmeanexp(m, axis=0, keepdims=True).tolist() == \
        [[2.355440139770508, 3.355440139770508, 4.355440139770508]]
    assert nn.logmeanexp(m, axis=1, where=jnp.array([True, False, True])).tolist() == \
        [1.4337809085845947, 4.433780670166016]
