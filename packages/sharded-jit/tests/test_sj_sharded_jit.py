"""sharded_jit with partition counts, on the jit path (the behaviours of the
old sharded_jit tests, on 8 CPU devices)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np
import pytest

import lamina_sharded_jit as sj
from lamina_sharded_jit.sharded_jit import PartitionSpec as P
from lamina_sharded_jit.sharded_jit import sharded_jit, with_sharding_constraint
from lamina_tracing_core import api, lax
from lamina_tracing_core.control_flow import while_loop


def arange(*shape: int) -> np.ndarray:  # type: ignore[type-arg]
    return np.arange(math.prod(shape), dtype=np.float32).reshape(shape)


def test_basic(devices8: list[Any]) -> None:
    @partial(sharded_jit, in_parts=(P(2, 1), P(2, 1)), out_parts=None)
    def f(x: Any, y: Any) -> Any:
        return x + y

    x = arange(8, 8)
    actual = f(x, x + 1)
    np.testing.assert_allclose(np.asarray(actual), x + (x + 1))
    shards = actual.addressable_shards
    assert len(shards) == 2
    np.testing.assert_allclose(np.asarray(shards[0].data), x + (x + 1))  # replicated
    text = f.lower(x, x).as_text()
    assert "mhlo.num_partitions = 2" in text and '[{"p0"}, {}]' in text


def test_pytree_args_and_outputs(devices8: list[Any]) -> None:
    def f(a: Any, b: Any, c: Any) -> Any:
        a1, a2 = a
        c1, (c2, c3) = c
        return a1 + a2 + b + c1 + c2 + c3

    a = (arange(4, 4), 1)
    b = arange(4, 4)
    c = [2, (arange(4, 4), arange(4, 4))]
    expected = arange(4, 4) * 4 + 3
    result = sharded_jit(f, (None, P(2, 1), [None, P(2, 1)]), P(2, 1))(a, b, c)
    np.testing.assert_allclose(np.asarray(result), expected)
    assert len(result.addressable_shards) == 2
    assert result.addressable_shards[0].data.shape == (2, 4)
    result = sharded_jit(f, None, P(2, 1))(a, b, c)
    np.testing.assert_allclose(np.asarray(result), expected)

    def g(x: Any) -> Any:
        return x + 1, ((x + 2, x + 3), x + 4)

    x = arange(4, 4)
    out = sharded_jit(g, (P(2, 1),), (P(2, 1), ((P(1, 2), None), P(2, 1))))(x)
    np.testing.assert_allclose(np.asarray(out[1][0][0]), x + 2)
    assert out[1][0][0].addressable_shards[0].data.shape == (4, 2)
    assert out[1][0][1].addressable_shards[0].data.shape == (4, 4)


def test_all_replicated_runs_on_one_device() -> None:
    result = sharded_jit(lambda x: x + 1, in_parts=None, out_parts=None)(1.0)
    assert float(result) == 2.0
    assert len(result.addressable_shards) == 1


def test_sharding_constraint(devices8: list[Any]) -> None:
    def f(x: Any) -> Any:
        y = x + 1
        y = with_sharding_constraint(y, P(1, 2))
        return y * 2

    x = arange(8, 8)
    actual = sharded_jit(f, in_parts=P(2, 1), out_parts=P(2, 1))(x)
    np.testing.assert_allclose(np.asarray(actual), (x + 1) * 2)
    assert [s.data.shape for s in actual.addressable_shards] == [(4, 8), (4, 8)]
    with pytest.raises(ValueError, match=r"with_sharding_constraint with partitions="
                       r"PartitionSpec\(1, 2\) \(total partitions: 2\) doesn't match expected "
                       r"number of partitions: 4. If these partitions look right, check outer "
                       r"sharded_jit and/or other with_sharding_constraint calls."):
        sharded_jit(f, in_parts=P(2, 2), out_parts=P(2, 2))(x)
    # replicated inputs and outputs: the constraint decides the partition count
    actual = sharded_jit(f, in_parts=None, out_parts=None)(x)
    np.testing.assert_allclose(np.asarray(actual), (x + 1) * 2)
    shards = actual.addressable_shards
    assert len(shards) == 2
    np.testing.assert_allclose(np.asarray(shards[0].data), np.asarray(shards[1].data))
    text = sharded_jit(f, in_parts=None, out_parts=None).lower(x).as_text()
    assert "sdy.sharding_constraint" in text and "mhlo.num_partitions = 2" in text


def test_nested_sharding_constraint_in_a_jitted_while_loop(devices8: list[Any]) -> None:
    @sj.jit
    def f(x: Any) -> Any:
        return while_loop(lambda i: i[0, 0] < 10.0,
                          lambda i: with_sharding_constraint(i + 1.0, P(2, 1)), x)

    x = arange(8, 8)
    actual = sharded_jit(f, in_parts=None, out_parts=None)(x)
    np.testing.assert_allclose(np.asarray(actual), x + 10.0)
    assert len(actual.addressable_shards) == 2


def test_grad_of_sharding_constraint(devices8: list[Any]) -> None:
    @partial(sharded_jit, in_parts=P(4, 1), out_parts=None)
    def f(x: Any) -> Any:
        y = x + 1
        p, vjp_f = api.vjp(lambda z: lax.sin(with_sharding_constraint(z, P(2, 2))), y)
        return vjp_f(p)

    x = arange(4, 4)
    (actual,) = f(x)
    np.testing.assert_allclose(np.asarray(actual), np.sin(x + 1) * np.cos(x + 1), rtol=1e-5,
                               atol=1e-6)
    # linear under jvp as well
    g = sharded_jit(lambda x: api.jvp(lambda z: with_sharding_constraint(z * 3, P(2, 1)),
                                      (x,), (np.ones((4, 4), np.float32),)), in_parts=P(2, 1),
                    out_parts=None)
    primal, tangent = g(x)
    np.testing.assert_allclose(np.asarray(tangent), np.full((4, 4), 3.0))


def test_static_argnums_and_explicit_num_partitions(devices8: list[Any]) -> None:
    f = sharded_jit(lambda x, n: x * n, in_parts=(P(2, 1), None), out_parts=P(2, 1),
                    static_argnums=1)
    x = arange(4, 4)
    np.testing.assert_allclose(np.asarray(f(x, 3)), x * 3)
    np.testing.assert_allclose(np.asarray(f(x, 4)), x * 4)
    g = sharded_jit(lambda x: x + 1, in_parts=None, out_parts=None, num_partitions=4)
    assert len(g(x).addressable_shards) == 4
    with pytest.raises(ValueError, match=r"in_parts is PartitionSpec\(2, 1\) \(2 partitions\) "
                       "and num_partitions gives 4 partitions"):
        sharded_jit(lambda x: x, in_parts=P(2, 1), out_parts=None, num_partitions=4)


def test_many_args(devices8: list[Any]) -> None:
    n = 100
    f = sharded_jit(lambda *args: sum(args), in_parts=(P(2, 1),) * n, out_parts=None)
    args = [arange(4, 4)] * n
    np.testing.assert_allclose(np.asarray(f(*args)), arange(4, 4) * n)


def test_errors(devices8: list[Any]) -> None:
    with pytest.raises(ValueError, match=r"in_parts\[1\] is PartitionSpec\(4, 1\) "
                       r"\(4 partitions\) and in_parts\[0\] gives 2 partitions"):
        sharded_jit(lambda x, y: x + y, in_parts=(P(2, 1), P(4, 1)), out_parts=None)
    f = sharded_jit(lambda x, y: x + y, in_parts=(P(2, 1), P(2, 1)), out_parts=None)
    with pytest.raises(NotImplementedError, match=r"sharded_jit\(<lambda>\) over kwargs not "
                       r"yet supported \(got y\)"):
        f(arange(4, 4), y=arange(4, 4))
    with pytest.raises(NotImplementedError, match=r"with_sharding_constraint\(\) should only "
                       r"be called inside sharded_jit\(\)"):
        with_sharding_constraint(arange(4, 4), P(2, 1))
    with pytest.raises(ValueError, match="sharded_jit computation requires 9 devices, but only "
                       "8 devices are available"):
        sharded_jit(lambda x: x + x, in_parts=P(9), out_parts=None)(np.ones(9, np.float32))
    with pytest.raises(ValueError, match=r"has 1 entries for a value of rank 2"):
        sharded_jit(lambda x: with_sharding_constraint(x, P(2)), in_parts=None,
                    out_parts=None)(arange(4, 4))
    with pytest.raises(ValueError, match="local_in_parts"):
        sharded_jit(lambda x: x, in_parts=P(2), out_parts=None, local_in_parts=P(4))
    ok = sharded_jit(lambda x: x * 2, in_parts=P(2), out_parts=P(2), local_in_parts=P(2),
                     local_num_partitions=None)
    np.testing.assert_allclose(np.asarray(ok(np.ones(2, np.float32))), 2.0)


def test_compiles_once(devices8: list[Any]) -> None:
    from lamina_sharded_jit import execution
    f = sharded_jit(lambda x: x + 1, in_parts=P(2), out_parts=P(2))
    x = np.arange(2, dtype=np.float32)
    f(x)
    before = execution.stats["compilations"]
    f(x)
    f(x)
    assert execution.stats["compilations"] == before
