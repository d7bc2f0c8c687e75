"""Eager op-by-op dispatch: primitives against numpy, caching, placement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from jaxlib.mlir.dialects import stablehlo
from lamina_mlir_lowering import lowering_rules, register_lowering
from lamina_tracing_core.primitives import Primitive

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import Array, Mesh, NamedSharding, P, SingleDeviceSharding
from lamina_interpreters_pxla import compiler, dispatch
from lamina_interpreters_pxla.dispatch import EagerDispatchError
from lamina_tracing_core import lax, primitives
from lamina_tracing_core import numpy as tnp

pytestmark = pytest.mark.skipif(px.device_count() < 8, reason="needs 8 CPU devices")

RNG = np.random.default_rng(0)
F = RNG.uniform(0.1, 0.9, size=(3, 4)).astype(np.float32)
G = RNG.uniform(0.1, 0.9, size=(3, 4)).astype(np.float32)
I = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)
J = RNG.integers(1, 5, size=(3, 4)).astype(np.int32)
B = F > 0.5

# (name, lax call on device arrays, numpy reference)
CASES: list[tuple[str, Callable[..., Any], Callable[..., Any], tuple[np.ndarray, ...]]] = [
    ("sin", lax.sin, np.sin, (F,)), ("cos", lax.cos, np.cos, (F,)),
    ("tan", lax.tan, np.tan, (F,)), ("asin", lax.asin, np.arcsin, (F,)),
    ("acos", lax.acos, np.arccos, (F,)), ("atan", lax.atan, np.arctan, (F,)),
    ("sinh", lax.sinh, np.sinh, (F,)), ("cosh", lax.cosh, np.cosh, (F,)),
    ("tanh", lax.tanh, np.tanh, (F,)), ("exp", lax.exp, np.exp, (F,)),
    ("exp2", lax.exp2, np.exp2, (F,)), ("expm1", lax.expm1, np.expm1, (F,)),
    ("log", lax.log, np.log, (F,)), ("log1p", lax.log1p, np.log1p, (F,)),
    ("sqrt", lax.sqrt, np.sqrt, (F,)), ("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x), (F,)),
    ("cbrt", lax.cbrt, np.cbrt, (F,)), ("neg", lax.neg, np.negative, (F,)),
    ("abs", lax.abs, np.abs, (I,)), ("sign", lax.sign, np.sign, (I,)),
    ("floor", lax.floor, np.floor, (F * 10,)), ("ceil", lax.ceil, np.ceil, (F * 10,)),
    ("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x)), (F,)),
    ("square", lax.square, np.square, (F,)),
    ("integer_pow", lambda x: lax.integer_pow(x, 3), lambda x: x ** 3, (F,)),
    ("is_finite", lax.is_finite, np.isfinite, (F,)),
    ("not", lax.bitwise_not if hasattr(lax, "bitwise_not") else lax.not_, np.invert, (I,)),
    ("add", lax.add, np.add, (F, G)), ("sub", lax.sub, np.subtract, (F, G)),
    ("mul", lax.mul, np.multiply, (F, G)), ("div", lax.div, np.divide, (F, G)),
    ("int div", lax.div, lambda a, b: np.trunc(a / b).astype(np.int32), (I, J)),
    ("rem", lax.rem, np.fmod, (I, J)), ("pow", lax.pow, np.power, (F, G)),
    ("max", lax.max, np.maximum, (F, G)), ("min", lax.min, np.minimum, (F, G)),
    ("atan2", lax.atan2, np.arctan2, (F, G)),
    ("and", lax.bitwise_and if hasattr(lax, "bitwise_and") else lax.and_, np.bitwise_and,
     (I, J)),
    ("shift_left", lax.shift_left, np.left_shift, (J, J)),
    ("eq", lax.eq, np.equal, (I, J)), ("lt", lax.lt, np.less, (F, G)),
    ("ge", lax.ge, np.greater_equal, (F, G)),
    ("select_n", lax.select_n, lambda p, a, b: np.where(p, b, a), (B, F, G)),
    ("clamp", lambda x: lax.clamp(np.float32(0.3), x, np.float32(0.6)),
     lambda x: np.clip(x, 0.3, 0.6), (F,)),
    ("convert_element_type", lambda x: lax.convert_element_type(x, np.int32),
     lambda x: x.astype(np.int32), (F * 10,)),
    ("reshape", lambda x: lax.reshape(x, (4, 3)), lambda x: x.reshape(4, 3), (F,)),
    ("transpose", lambda x: lax.transpose(x, (1, 0)), np.transpose, (F,)),
    ("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)),
     lambda x: np.broadcast_to(x, (2, 3, 4)), (F,)),
    ("rev", lambda x: lax.rev(x, (0,)), lambda x: x[::-1], (F,)),
    ("slice", lambda x: lax.slice(x, (1, 0), (3, 4), (1, 2)), lambda x: x[1:3, 0:4:2], (F,)),
    ("concatenate", lambda a, b: lax.concatenate([a, b], 1),
     lambda a, b: np.concatenate([a, b], 1), (F, G)),
    ("reduce_sum", lambda x: lax.reduce_sum(x, (1,)), lambda x: x.sum(1), (F,)),
    ("reduce_max", lambda x: lax.reduce_max(x, (0,)), lambda x: x.max(0), (F,)),
    ("reduce_prod", lambda x: lax.reduce_prod(x, (0, 1)), np.prod, (F,)),
    ("argmax", lambda x: lax.argmax(x, 1, np.int32), lambda x: x.argmax(1), (F,)),
    ("cumsum", lambda x: lax.cumsum(x, 1), lambda x: np.cumsum(x, 1), (F,)),
    ("sort", lambda x: lax.sort(x, 1), lambda x: np.sort(x, 1), (F,)),
    ("dot_general", lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ()))),
     lambda a, b: a @ b.T, (F, G)),
    ("iota", lambda: lax.iota(np.int32, 5), lambda: np.arange(5, dtype=np.int32), ()),
    ("dynamic_slice", lambda x: lax.dynamic_slice(x, (1, 1), (2, 2)),
     lambda x: x[1:3, 1:3], (F,)),
    ("pad", lambda x: lax.pad(x, np.float32(0), [(1, 0, 0), (0, 2, 1)]),
     lambda x: np.pad(np.insert(x, [1, 2, 3], 0, axis=1), ((1, 0), (0, 2))), (F,)),
]


@pytest.mark.parametrize("name,fun,reference,operands", CASES, ids=[c[0] for c in CASES])
def test_eager_primitive_matches_numpy(name: str, fun: Callable[..., Any],
                                       reference: Callable[..., Any],
                                       operands: tuple[np.ndarray, ...]) -> None:
    args = [px.device_put(x) for x in operands]
    out = fun(*args)
    assert isinstance(out, Array)
    expected = np.asarray(reference(*operands))
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=2e-6, atol=2e-6)


def test_multiple_results_primitive() -> None:
    values, indices = lax.top_k(px.device_put(np.array([3.0, 1.0, 4.0, 1.5], np.float32)), 2)
    assert values.tolist() == [4.0, 3.0] and indices.tolist() == [2, 0]


def test_the_runtime_is_the_default_eager_impl() -> None:
    assert primitives.default_impl is dispatch.apply_primitive
    assert primitives.default_impl_checks_inputs  # a cache hit was checked before
    lax_prims = [p for p in vars(lax).values() if isinstance(p, Primitive)]
    assert len(lax_prims) > 50
    # no impl per primitive: lax primitives run through the one default, except
    # convert_element_type, whose impl places host data without compiling
    assert [p.name for p in lax_prims if p in primitives.impl_rules] == ["convert_element_type"]


def test_placing_host_data_compiles_nothing() -> None:
    misses = compiler.compile_stats["misses"]
    for n in range(1, 6):
        host = np.arange(n * 7, dtype=np.float32).reshape(n, 7)
        placed = tnp.asarray(host)
        assert type(placed) is Array and not placed.committed
        np.testing.assert_array_equal(np.asarray(placed), host)
    assert compiler.compile_stats["misses"] == misses
    # a conversion to another dtype still runs (and compiles) through the default impl
    converted = lax.convert_element_type(np.ones(3, np.float32), np.int32)
    assert converted.dtype == np.int32 and converted.tolist() == [1, 1, 1]


def test_new_primitives_run_eagerly_with_only_their_rules() -> None:
    twice = Primitive("px_test_twice")
    twice.def_abstract_eval(lambda aval: aval)
    register_lowering(twice, lambda ctx, x: [stablehlo.add(x, x)])
    try:
        out = twice.bind(px.device_put(np.arange(3, dtype=np.float32)))
        assert out.tolist() == [0.0, 2.0, 4.0]
    finally:
        primitives.abstract_eval_rules.pop(twice, None)
        lowering_rules.pop(twice, None)


def test_compile_cache_hit_on_second_call() -> None:
    x = px.device_put(np.arange(7, dtype=np.float32))
    before = dispatch.cache_info()
    lax.exp(x)
    middle = dispatch.cache_info()
    lax.exp(x)
    lax.exp(px.device_put(np.ones(7, np.float32)))
    after = dispatch.cache_info()
    assert middle["misses"] == before["misses"] + 1
    assert after["misses"] == middle["misses"]
    assert after["hits"] == middle["hits"] + 2
    lax.exp(px.device_put(np.ones(8, np.float32)))  # new shape: new program
    assert dispatch.cache_info()["misses"] == after["misses"] + 1


def test_host_inputs_and_scalars() -> None:
    out = lax.add(np.arange(3, dtype=np.float32), np.float32(1))
    assert isinstance(out, Array) and out.tolist() == [1.0, 2.0, 3.0]
    assert not out.committed and out.device == px.default_device()
    w = lax.add(1.0, 2.0)
    assert w.weak_type and float(w) == 3.0
    assert float(lax.add(-0.0, -0.0)) == 0.0 and np.signbit(float(lax.add(-0.0, -0.0)))
    assert float(lax.mul(0.0, 1.0)) == 0.0


def test_x64_changes_scalar_types() -> None:
    from lamina_tracing_core import dtypes
    before = dtypes.x64_enabled()
    try:
        dtypes.enable_x64(True)
        assert lax.add(1.0, 2.0).dtype == np.float64
        dtypes.enable_x64(False)
        assert lax.add(1.0, 2.0).dtype == np.float32
    finally:
        dtypes.enable_x64(before)


def test_committed_placement() -> None:
    devs = px.devices()
    a = px.device_put(np.ones(3, np.float32), devs[4])
    out = lax.add(a, np.ones(3, np.float32))
    assert out.committed and out.device == devs[4]
    moved = lax.add(a, px.device_put(np.ones(3, np.float32)))  # uncommitted one follows
    assert moved.device == devs[4]
    b = px.device_put(np.ones(3, np.float32), devs[5])
    with pytest.raises(EagerDispatchError, match="incompatible devices for committed "
                                                 "arguments: argument 0 on cpu:4, argument 1 "
                                                 "on cpu:5"):
        lax.add(a, b)


def test_sharded_eager_execution() -> None:
    mesh = Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = px.device_put(host, NamedSharding(mesh, P("x", "y")))
    y = lax.sin(x)
    assert y.sharding == NamedSharding(mesh, P("x", "y"))
    np.testing.assert_allclose(np.asarray(y), np.sin(host), rtol=1e-6)
    s = lax.reduce_sum(x, (0,))
    np.testing.assert_allclose(np.asarray(s), host.sum(0))
    z = lax.add(x, px.device_put(host, NamedSharding(mesh, P("y", "x"))))
    np.testing.assert_allclose(np.asarray(z), 2 * host)
    w = lax.add(x, np.float32(1))
    np.testing.assert_allclose(np.asarray(w), host + 1)
    elsewhere = px.device_put(host, devs_sharding := NamedSharding(
        Mesh(np.array(px.devices()[::-1]).reshape(2, 4), ("x", "y")), P("x", "y")))
    assert devs_sharding.num_devices == 8
    with pytest.raises(EagerDispatchError, match="incompatible devices"):
        lax.add(x, elsewhere)


def test_bad_and_deleted_operands_name_the_operand() -> None:
    x = px.device_put(np.ones(3, np.float32))
    x.delete()
    with pytest.raises(px.DeletedArrayError, match="sin: argument 0: Array has been deleted"):
        lax.sin(x)
    live = px.device_put(np.ones(3, np.float32))
    lax.cos(live)
    live.delete()
    with pytest.raises(px.DeletedArrayError, match="cos: argument 0"):
        lax.cos(live)  # the cached fast path checks too


def test_operators_through_array_methods() -> None:
    x = px.device_put(np.arange(4, dtype=np.float32))
    assert (x + 1).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert (2 * x).tolist() == [0.0, 2.0, 4.0, 6.0]
    assert (x @ x).tolist() == 14.0
    assert x[1:3].tolist() == [1.0, 2.0]
    assert float(x.sum()) == 6.0
    assert x.reshape(2, 2).shape == (2, 2)
    assert bool((x < 2).any())


def test_grad_and_jit_free_transformations_run_eagerly() -> None:
    api = pytest.importorskip("lamina_tracing_core.api")
    g = api.grad(lambda v: (v * v + v).sum())(px.device_put(np.arange(3, dtype=np.float32)))
    assert isinstance(g, Array) and g.tolist() == [1.0, 3.0, 5.0]
    vm = api.vmap(lambda v: lax.sin(v))(px.device_put(F))
    np.testing.assert_allclose(np.asarray(vm), np.sin(F), rtol=1e-6)


def test_sharding_of_single_device_results() -> None:
    out = lax.neg(px.device_put(np.ones(2, np.float32), px.devices()[6]))
    assert out.sharding == SingleDeviceSharding(px.devices()[6])


def test_invalid_operands_name_the_operand() -> None:
    with pytest.raises(TypeError, match="sin: argument 0 .*not a valid"):
        lax.sin(np.array(["a"]))
    with pytest.raises(TypeError, match="add: argument 1 .*not a valid"):
        lax.add(np.float32(1), object())


def test_an_impl_of_its_own_wins_and_gets_its_inputs_checked() -> None:
    negate = Primitive("px_test_negate")
    seen: list[Any] = []

    def check(aval: Any) -> Any:
        seen.append(aval)
        return aval

    negate.def_abstract_eval(check)
    register_lowering(negate, lambda ctx, x: [stablehlo.negate(x)])
    try:
        x = px.device_put(np.ones(2, np.float32))
        assert negate.bind(x).tolist() == [-1.0, -1.0]
        checks = len(seen)
        assert negate.bind(x).tolist() == [-1.0, -1.0]
        assert len(seen) == checks  # a cache hit of the default impl: no check again
        negate.def_impl(lambda x: x)  # another layer takes over
        assert negate.bind(x) is x
        assert len(seen) > checks  # so the eval trace checks the inputs itself
    finally:
        primitives.impl_rules.pop(negate, None)
        primitives.abstract_eval_rules.pop(negate, None)
        lowering_rules.pop(negate, None)


def test_scalar_operands_of_a_cached_signature_keep_their_values() -> None:
    x = px.device_put(np.arange(3, dtype=np.float32))
    for k in range(3):  # one compiled program, one device buffer per scalar value
        assert lax.add(x, np.float32(k)).tolist() == [k, k + 1.0, k + 2.0]
        assert (x * k).tolist() == [0.0, k, 2.0 * k]
    assert np.signbit(float(lax.mul(np.float32(1), -0.0)))
    ints = px.device_put(np.ones(2, np.int32))
    assert lax.add(ints, 3).tolist() == [4, 4]
    with pytest.raises(OverflowError, match=r"add: argument 1.*too large"):
        lax.add(ints, 2**40)
