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


# --- ShapeDtypeStruct of keys ---------------------------------------------------------------
def test_shape_dtype_struct_of_keys() -> None:
    k = random.key(0)
    s = lx.ShapeDtypeStruct((3,), k.dtype)
    assert repr(s) == "ShapeDtypeStruct(shape=(3,), dtype=key<fry>)"
    assert isinstance(s, lx.ShapeDtypeStruct)
    assert (s.shape, s.dtype, s.ndim, s.size) == ((3,), k.dtype, 1, 3)
    assert repr(lx.typeof(s)) == "ShapedArray(key<fry>[3])"
    assert repr(lx.typeof(k)) == "ShapedArray(key<fry>[])"
    assert lx.tree_util.tree_leaves([s, k]) == [s, k]
    with pytest.raises(TypeError):  # JAX 0.10.2 refuses it too
        random.key_data(s)


def test_eval_shape_of_keys_gives_key_structs() -> None:
    k = random.key(0)
    s = lx.ShapeDtypeStruct((3,), k.dtype)
    assert repr(lx.eval_shape(lambda k: k, s)) == "ShapeDtypeStruct(shape=(3,), dtype=key<fry>)"
    assert repr(lx.eval_shape(random.split, k)) == "ShapeDtypeStruct(shape=(2,), dtype=key<fry>)"
    assert repr(lx.eval_shape(random.key_data, s)) == "ShapeDtypeStruct(shape=(3, 2), dtype=uint32)"
    out = lx.eval_shape(lambda k: {"k": k, "d": random.key_data(k)}, k)
    assert out == {"k": lx.ShapeDtypeStruct((), k.dtype),
                   "d": lx.ShapeDtypeStruct((2,), np.uint32)}
    _, shapes = lx.make_jaxpr(lambda k: (k, random.key_data(k)), return_shape=True)(k)
    assert repr(shapes) == ("(ShapeDtypeStruct(shape=(), dtype=key<fry>), "
                            "ShapeDtypeStruct(shape=(2,), dtype=uint32))")


def test_lower_and_trace_with_key_structs() -> None:
    k = random.key(0)
    s = lx.ShapeDtypeStruct((3,), k.dtype)
    f = lx.jit(lambda k: random.split(k[0]))
    assert "func.func public @main" in f.lower(s).as_text()
    assert f.trace(s).jaxpr.in_avals[0].shape == (3, 2)  # the key data's
    lowered = lx.jit(lambda k: k).lower(s)
    assert (str(lowered.in_tree), str(lowered.out_tree)) == ("PyTreeDef(((*,), {}))",
                                                             "PyTreeDef(*)")
    assert repr(lowered.args_info) == "((ArgInfo(k: key<fry>[3]),), {})"
    assert repr(lowered.out_info.aval) == "ShapedArray(key<fry>[3])"
    compiled = f.lower(s).compile()
    keys = random.split(k, 3)
    np.testing.assert_array_equal(random.key_data(compiled(keys)),
                                  random.key_data(f(keys)))
    with pytest.raises(TypeError, match="Argument 'k' compiled with key<fry>\\[3\\] and "
                                        "called with key<fry>\\[4\\]"):  # JAX's
        compiled(random.split(k, 4))


# --- the stages' trees as users see them ----------------------------------------------------
def test_stage_trees_show_keys_as_leaves() -> None:
    k = random.key(0)
    f = lx.jit(lambda k, x: (k, x))
    traced = f.trace(k, 1.0)
    lowered = f.lower(k, 1.0)
    compiled = lowered.compile()
    for stage in (traced, lowered, compiled):
        assert str(stage.in_tree) == "PyTreeDef(((*, *), {}))"  # JAX 0.10.2's
        assert str(stage.out_tree) == "PyTreeDef((*, *))"
    (key_info, x_info), kwargs = lowered.args_info
    assert kwargs == {}
    assert repr(key_info.aval) == "ShapedArray(key<fry>[])"
    assert key_info.name == "k" and not key_info.donated
    assert repr(x_info.aval) == "ShapedArray(float32[], weak_type=True)"
    key_out, x_out = traced.out_info
    assert (key_out.shape, key_out.dtype) == ((), k.dtype)
    assert lx.tree_util.tree_structure(compiled.input_shardings) == lowered.in_tree
    out = compiled(k, 2.0)
    np.testing.assert_array_equal(random.key_data(out[0]), random.key_data(k))
    with pytest.raises(TypeError, match="seen a pytree leaf but now given a tuple"):
        compiled((k,), 2.0)


# --- keys in custom rules -------------------------------------------------------------------
def _custom_jvp_on_keys(seen: list):
    @lx.custom_jvp
    def f(k, x):
        return random.split(k), x * 2.0

    @f.defjvp
    def f_jvp(primals, tangents):
        k, x = primals
        tk, tx = tangents
        seen.append((type(tk), np.shape(tk), tk.dtype))
        # a key result's tangent: one float0 array of the key's shape
        return f(k, x), (np.zeros((2,), lx.dtypes.float0), tx * 2.0)
    return f


@pytest.mark.parametrize("how", ["jvp", "jit_jvp", "grad"])
def test_custom_jvp_rule_sees_one_float0_tangent_per_key(how) -> None:
    seen: list = []
    f = _custom_jvp_on_keys(seen)
    k = random.key(0)

    def g(x):
        return f(k, x)[1]
    if how == "jvp":
        out = lx.jvp(g, (1.0,), (1.0,))
    elif how == "jit_jvp":
        out = lx.jit(lambda x: lx.jvp(g, (x,), (1.0,)))(1.0)
    else:
        out = (None, lx.grad(g)(1.0))
    assert float(out[1]) == 2.0
    kind, shape, dtype = seen[0]
    assert shape == () and dtype == lx.dtypes.float0  # JAX 0.10.2: float0[] for key<fry>[]
    assert kind is not random.PRNGKeyArray


@pytest.mark.parametrize("ct", [
    lambda: np.zeros((3,), lx.dtypes.float0),
    lambda: np.zeros((3, 2), lx.dtypes.float0),
    lambda: np.zeros((3,), np.float32),
    lambda: random.split(random.key(1), 3),
    lambda: None,
])
def test_custom_vjp_ignores_what_bwd_gives_a_key(ct) -> None:
    # JAX 0.10.2 drops any cotangent of an input whose cotangent type is float0
    @lx.custom_vjp
    def h(k, x):
        return x * 2.0

    h.defvjp(lambda k, x: (x * 2.0, None), lambda r, c: (ct(), c * 2.0))
    assert float(lx.grad(lambda x: h(random.split(random.key(0), 3), x))(1.0)) == 2.0


def test_custom_vjp_container_for_a_key_is_refused() -> None:
    @lx.custom_vjp
    def h(k, x):
        return x * 2.0

    h.defvjp(lambda k, x: (x * 2.0, None),
             lambda r, c: ((np.zeros((3,), lx.dtypes.float0),), c * 2.0))
    with pytest.raises(TypeError, match="same container \\(pytree\\) structure"):
        lx.grad(lambda x: h(random.split(random.key(0), 3), x))(1.0)


def test_custom_vjp_ignores_what_bwd_gives_an_integer_input() -> None:
    @lx.custom_vjp
    def h(d, x):
        return x * 2.0

    h.defvjp(lambda d, x: (x * 2.0, None), lambda r, c: (np.ones(5, np.float32), c * 2.0))
    assert float(lx.grad(lambda x: h(np.arange(3), x))(1.0)) == 2.0


# --- the C++ fast path ----------------------------------------------------------------------
@pytest.fixture
def python_calls(monkeypatch: pytest.MonkeyPatch):
    """Counts the calls that reach jit's Python path (the C++ path's misses)."""
    from lamina_sharded_jit import api as sj_api
    count = [0]
    original = sj_api.Jitted._python_call

    def counting(self, args, kwargs):
        count[0] += 1
        return original(self, args, kwargs)

    monkeypatch.setattr(sj_api.Jitted, "_python_call", counting)
    yield count


def test_key_arguments_and_results_stay_on_the_fast_path(python_calls) -> None:
    k = random.key(0)
    f = lx.jit(lambda k, x: {"keys": (k, random.split(k)), "draw": random.normal(k) + x})
    x = lx.device_put(np.float32(1.0))
    first = f(k, x)
    for _ in range(3):
        out = f(k, x)
    assert python_calls[0] == 1
    keys, pair = out["keys"]
    assert isinstance(keys, random.PRNGKeyArray) and isinstance(pair, random.PRNGKeyArray)
    assert (keys.shape, pair.shape, pair.dtype) == ((), (2,), k.dtype)
    np.testing.assert_array_equal(random.key_data(pair), random.key_data(first["keys"][1]))
    assert float(out["draw"]) == float(first["draw"])
    f(pair[0], x)  # a key result fed back: the same signature
    assert python_calls[0] == 1


def test_key_arrays_tell_where_they_live(devices8):
    """JAX 0.10.2: a key array's sharding is its key data's over the key
    dimensions, and it answers the placement questions arrays answer."""
    from lamina.sharding import NamedSharding, PartitionSpec

    keys = lx.random.split(lx.random.key(0), 8)
    assert keys.sharding == lx.sharding.SingleDeviceSharding(lx.devices()[0])
    assert not keys.committed and not keys.is_deleted()
    mesh = lx.make_mesh((8,), ("i",))
    placed = lx.device_put(keys, NamedSharding(mesh, PartitionSpec("i")))
    assert placed.sharding == NamedSharding(mesh, PartitionSpec("i"))
    assert placed.committed and placed.is_fully_addressable and not placed.is_fully_replicated
    assert len(placed.devices()) == 8 and len(placed.addressable_shards) == 8
    assert placed.addressable_shards[0].data.shape == (1,)
    assert (placed.itemsize, placed.nbytes) == (8, 64)
