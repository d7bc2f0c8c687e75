"""``jnp.matmul`` of operands without batch axes stages one ``dot_general``,
as JAX's does (libraries count primitives in jaxprs: equinox's tests do)."""

import numpy as np
import pytest
from lamina_tracing_core import api
from lamina_tracing_core import numpy as jnp


@pytest.mark.parametrize("a, b", [((3, 2), (2,)), ((2,), (2, 3)), ((2,), (2,)), ((3, 2), (2, 4))])
def test_matmul_is_one_dot_general(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    x, y = np.arange(np.prod(a), dtype=np.float32).reshape(a), np.ones(b, np.float32)
    closed = api.make_jaxpr(jnp.matmul)(x, y)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["dot_general"]
    np.testing.assert_allclose(jnp.matmul(x, y), np.matmul(x, y))
