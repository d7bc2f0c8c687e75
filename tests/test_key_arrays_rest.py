"""Typed key arrays where JAX 0.10.2 treats them specially: shapes of keys
(``ShapeDtypeStruct`` with a key dtype), staged-out trees, tangents and
cotangents in custom rules, the C++ fast path, and keys meeting varying values
in ``shard_map``. Expected values and messages are JAX 0.10.2's, recorded."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
from lamina import random
from lamina.sharding import Mesh, PartitionSpec as P


def _mesh2() -> Mesh:
    if len(lx.devices()) < 2:
        pytest.skip("needs 2 devices")
    return Mesh(np.array(lx.devices()[:2]), ("x",))


_REUSE = ("requires all arguments to have matching type. Got key type: key<fry>[] vs arg "
          "type: float32[1]{V:x}. Use lamina.lax.pcast(..., to='varying') to make them match. "
          "If your key is less varying than arg, watch out for key-reuse problems.")


@pytest.mark.parametrize("sampler, fun", [
    (lambda k, a: random.gamma(k, a), "gamma"),
    (lambda k, a: random.loggamma(k, a), "gamma"),
    (lambda k, a: random.beta(k, a, 1.0), "lamina.random.beta"),
])
def test_replicated_key_with_varying_argument_is_refused(sampler, fun) -> None:
    mesh = _mesh2()
    f = lx.jit(lx.shard_map(sampler, mesh=mesh, in_specs=(P(), P("x")), out_specs=P("x")))
    with pytest.raises(TypeError) as err:
        f(random.key(0), np.array([1.0, 2.0], np.float32))
    assert str(err.value) == f"{fun} {_REUSE}"


def test_varying_key_with_invariant_argument_draws() -> None:
    mesh = _mesh2()
    a = np.array([1.0, 2.0], np.float32)
    varying = lx.jit(lx.shard_map(lambda k, a: random.gamma(k[0], a), mesh=mesh,
                                  in_specs=(P("x"), P("x")), out_specs=P("x")))
    np.testing.assert_allclose(varying(random.split(random.key(0), 2), a),
                               [0.6031933, 3.9326215], rtol=1e-6)
    spread = lx.jit(lx.shard_map(lambda k, a: random.gamma(k[0], a), mesh=mesh,
                                 in_specs=(P("x"), P()), out_specs=P("x")))
    np.testing.assert_allclose(spread(random.split(random.key(0), 2), a),
                               [0.6031933, 0.6927401, 2.3589952, 0.281124], rtol=1e-6)
