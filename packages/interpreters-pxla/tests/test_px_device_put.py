"""device_put / device_get: pytrees, shardings, batching of transfers, errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import (
    Array,
    Format,
    Layout,
    Mesh,
    NamedSharding,
    P,
    ShardingError,
    SingleDeviceSharding,
)
from lamina_interpreters_pxla import buffers
from lamina_interpreters_pxla import transfer as sa
from lamina_interpreters_pxla.device_put import device_put_p
from lamina_linear_util import tree_util
from lamina_tracing_core import primitives

pytestmark = pytest.mark.skipif(px.device_count() < 8, reason="needs 8 CPU devices")


@pytest.fixture
def mesh() -> Mesh:
    return Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))


def _mixed_tree(n: int) -> list[Any]:
    """``n`` leaves cycling through numpy arrays, Python and numpy scalars, Arrays."""
    makers: list[Callable[[int], Any]] = [
        lambda i: np.full((8, 2), i, np.float32),
        lambda i: float(i),
        lambda i: np.int32(i),
        lambda i: px.device_put(np.full((8,), i, np.int32), px.devices()[i % 8]),
    ]
    return [makers[i % 4](i) for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_pytrees_of_many_leaves_single_device(n: int) -> None:
    tree = {"leaves": _mixed_tree(n), "meta": None}
    out = px.device_put(tree, px.devices()[3])
    assert tree_util.tree_structure(out) == tree_util.tree_structure(tree)
    for before, after in zip(tree["leaves"], out["leaves"]):
        assert isinstance(after, Array) and after.committed
        assert after.sharding == SingleDeviceSharding(px.devices()[3])
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before))


@pytest.mark.parametrize("n", [0, 1, 10, 1000])
def test_pytrees_of_many_leaves_named_sharding(n: int, mesh: Mesh) -> None:
    leaves = [x for x in _mixed_tree(4 * n) if np.ndim(x) >= 1][:n]
    sharding = NamedSharding(mesh, P("x"))
    out = px.device_put(leaves, sharding)
    assert len(out) == len(leaves)
    for before, after in zip(leaves, out):
        assert after.sharding == sharding
        np.testing.assert_array_equal(np.asarray(after), np.asarray(before))
        for shard in after.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data),
                                          np.asarray(before)[shard.index])


def test_default_destination_keeps_arrays_and_commits_nothing() -> None:
    a = px.device_put(np.ones(3, np.float32), px.devices()[2])
    out = px.device_put({"a": a, "h": np.zeros(2), "s": 1.5})
    assert out["a"] is a  # already in place: the same Array
    assert not out["h"].committed and out["h"].device == px.default_device()
    assert out["s"].weak_type


def test_device_prefix_tree(mesh: Mesh) -> None:
    devs = px.devices()
    tree = {"a": np.ones(8, np.float32), "b": (np.zeros(8), np.arange(8))}
    out = px.device_put(tree, {"a": devs[1], "b": NamedSharding(mesh, P("y"))})
    assert out["a"].device == devs[1]
    assert out["b"][0].sharding == out["b"][1].sharding == NamedSharding(mesh, P("y"))
    with pytest.raises(ValueError, match="device specification must be a tree prefix"):
        px.device_put(tree, [devs[0], devs[1]])


def test_bare_partition_spec_uses_current_mesh(mesh: Mesh) -> None:
    with mesh:
        out = px.device_put(np.zeros((4, 4)), P("x", "y"))
    assert out.sharding == NamedSharding(mesh, P("x", "y"))
    with pytest.raises(ShardingError, match="argument x: a bare PartitionSpec"):
        px.device_put(np.zeros(4), P("x"))


def test_device_to_device_resharding(mesh: Mesh) -> None:
    devs = px.devices()
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    a = px.device_put(host, NamedSharding(mesh, P("x", "y")))
    targets = [
        NamedSharding(mesh, P("y", "x")),  # same devices, different cut: identity program
        NamedSharding(mesh, P()),  # replicate
        SingleDeviceSharding(devs[6]),  # gather
        NamedSharding(Mesh(np.array(devs[4:]), ("z",)), P("z")),  # other devices
        NamedSharding(Mesh(np.array(devs[::-1]).reshape(2, 4), ("x", "y")), P("x", "y")),
    ]
    for target in targets:
        b = px.device_put(a, target)
        assert b.sharding == target
        np.testing.assert_array_equal(np.asarray(b), host)
        for shard in b.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), host[shard.index])
        c = px.device_put(b, NamedSharding(mesh, P("x", "y")))
        np.testing.assert_array_equal(np.asarray(c), host)
    assert not a.is_deleted()


def test_one_bind_and_one_copy_per_device_group(monkeypatch: pytest.MonkeyPatch) -> None:
    devs = px.devices()
    counts = {"bind": 0, "put": 0, "copy": 0, "copied": 0}
    real_impl = primitives.impl_rules[device_put_p]
    real_put, real_copy = buffers._batched_device_put, buffers._batched_copy

    def impl(*args: Any, **params: Any) -> Any:
        counts["bind"] += 1
        return real_impl(*args, **params)

    def put(*args: Any) -> Any:
        counts["put"] += 1
        return real_put(*args)

    def copy(impls: list[Any], *args: Any) -> Any:
        counts["copy"] += 1
        counts["copied"] += len(impls)
        return real_copy(impls, *args)

    on1 = [px.device_put(np.full(4, i, np.float32), devs[1]) for i in range(5)]
    on2 = [px.device_put(np.full(4, i, np.float32), devs[2]) for i in range(3)]
    host = [np.full(4, i, np.float32) for i in range(4)]
    monkeypatch.setitem(primitives.impl_rules, device_put_p, impl)
    monkeypatch.setattr(buffers, "_batched_device_put", put)
    monkeypatch.setattr(buffers, "_batched_copy", copy)
    out = px.device_put({"on1": on1, "on2": on2, "host": host}, devs[5])
    assert counts == {"bind": 1, "put": 4, "copy": 2, "copied": 8}
    assert all(x.device == devs[5] for x in out["on1"] + out["on2"] + out["host"])
    assert [int(x[0]) if False else float(np.asarray(x)[0]) for x in out["on1"]] == \
        [0.0, 1.0, 2.0, 3.0, 4.0]


def test_copy_semantics_donate_and_alias() -> None:
    devs = px.devices()
    a = px.device_put(np.arange(4, dtype=np.float32), devs[1])
    same = px.device_put(a, devs[1])
    assert same._arr is a._arr or same.unsafe_buffer_pointer() == a.unsafe_buffer_pointer()
    copied = px.device_put(a, devs[1], may_alias=False)
    assert copied.unsafe_buffer_pointer() != a.unsafe_buffer_pointer()
    assert copied.tolist() == a.tolist()
    moved = px.device_put(a, devs[2], donate=True)
    assert moved.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert a.is_deleted()
    with pytest.raises(px.DeletedArrayError, match="donated to device_put"):
        np.asarray(a)
    with pytest.raises(ValueError, match="contradict"):
        px.device_put(copied, donate=True, may_alias=False)
    buf = np.zeros(1024 + 16, np.float32)
    off = (-buf.ctypes.data % 64) // 4
    aligned = buf[off:off + 1024]
    aliased = px.device_put(aligned, devs[0], may_alias=True)
    snap = px.device_put(aligned, devs[0])
    aligned[0] = 3.0
    assert float(np.asarray(snap)[0]) == 0.0
    assert float(np.asarray(aliased)[0]) in (0.0, 3.0)  # aliasing is allowed, not required


def test_committed_flags() -> None:
    devs = px.devices()
    u = px.device_put(np.ones(2))
    assert not u.committed
    c = px.device_put(u, devs[0])
    assert c.committed and c.device == devs[0]
    assert not u.committed  # the input keeps its flag


def test_bad_inputs_name_the_argument(mesh: Mesh) -> None:
    with pytest.raises(TypeError, match=r"argument x\['s'\].*'hi' of type str"):
        px.device_put({"s": "hi"})
    with pytest.raises(TypeError, match=r"argument x\[0\]: dtype object"):
        px.device_put([np.array([1, None], dtype=object)])
    with pytest.raises(TypeError, match=r"argument x\[1\]: dtype <U1"):
        px.device_put([1.0, np.array(["a"])])
    four = NamedSharding(Mesh(np.array(px.devices()[:4]), ("x",)), P("x"))
    with pytest.raises(ShardingError, match=r"argument x\['a'\] of shape \(6,\).*partitioned "
                                            r"4 times.*dimension size is 6"):
        px.device_put({"a": np.ones(6)}, four)
    with pytest.raises(ShardingError, match=r"argument x\[1\] of shape \(4,\).*rank at least "
                                            r"2"):
        px.device_put([np.ones((4, 4)), np.ones(4)], NamedSharding(mesh, P("x", "y")))
    with pytest.raises(TypeError, match=r"argument x: 'cpu:0' of type str is not a Device"):
        px.device_put(np.ones(2), "cpu:0")
    with pytest.raises(OverflowError, match=r"argument x\[0\].*too large"):
        px.device_put([2 ** 40])
    with pytest.raises(TypeError, match="argument ragged.*cannot be converted"):
        sa.shard_args([[[1], [2, 3]]], [SingleDeviceSharding(px.devices()[0])],
                      arg_names=["ragged"])
    with pytest.raises(TypeError, match="argument m: numpy masked arrays"):
        sa.shard_args([np.ma.masked_array([1, 2])], [SingleDeviceSharding(px.devices()[0])],
                      arg_names=["m"])


def test_layouts() -> None:
    d = px.devices()[2]
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    default = px.device_put(host, d)
    assert default.format.layout == Layout((0, 1))
    col_major = px.device_put(host, Format(Layout((1, 0)), SingleDeviceSharding(d)))
    assert col_major.format.layout == Layout((1, 0))
    assert col_major.format.sharding == SingleDeviceSharding(d)
    np.testing.assert_array_equal(np.asarray(col_major), host)
    back = px.device_put(col_major, Format(Layout((0, 1)), SingleDeviceSharding(d)))
    assert back.format.layout == Layout((0, 1))
    np.testing.assert_array_equal(np.asarray(back), host)
    # a non-default layout never reaches a program that expects the default one
    np.testing.assert_array_equal(np.asarray(px.device_put(col_major, px.devices()[5])), host)
    same = px.device_put(col_major, Format(Layout((1, 0)), SingleDeviceSharding(d)))
    assert same._arr is col_major._arr
    from lamina_interpreters_pxla.layouts import default_layout
    assert default_layout(np.float32, (2, 3), SingleDeviceSharding(d)) == Layout((0, 1))


def test_layout_errors_name_the_argument() -> None:
    s = SingleDeviceSharding(px.devices()[0])
    with pytest.raises(ValueError, match=r"argument x\['w'\] of shape \(2, 3\).*rank 3"):
        px.device_put({"w": np.ones((2, 3))}, Format(Layout((0, 1, 2)), s))
    # f32 elements cannot be packed 4 bits wide: the CPU backend says no
    packed = Layout((0, 1), sub_byte_element_size_in_bits=4)
    with pytest.raises(ValueError, match=r"argument x\['w'\]: the cpu backend does not "
                                         r"support"):
        px.device_put({"w": np.ones((2, 3), np.float32)}, Format(packed, s))
    bad_tile = Layout((0, 1), tiling=((0,),))
    with pytest.raises(ValueError, match=r"argument x\['v'\]: the cpu backend cannot place"):
        px.device_put({"v": np.ones((2, 3), np.float32)}, Format(bad_tile, s))
    with pytest.raises(ValueError, match="needs a concrete sharding"):
        Format(Layout((0,)))
    with pytest.raises(ValueError, match="permutation"):
        Layout((0, 0))


def test_device_get() -> None:
    tree = {"a": px.device_put(np.arange(3)), "b": [2, px.device_put(1.5)], "c": None}
    host = px.device_get(tree)
    assert isinstance(host["a"], np.ndarray) and host["a"].tolist() == [0, 1, 2]
    assert host["b"][0] == 2 and float(host["b"][1]) == 1.5 and host["c"] is None


def test_device_put_is_one_equation_under_make_jaxpr(mesh: Mesh) -> None:
    api = pytest.importorskip("lamina_tracing_core.api")
    sharding = NamedSharding(mesh, P("x"))

    def f(x: Any, y: Any) -> Any:
        return px.device_put({"x": x, "y": y}, sharding)

    closed = api.make_jaxpr(f)(np.ones(8, np.float32), np.ones((8, 2), np.float32))
    eqns = closed.jaxpr.eqns
    assert [e.primitive for e in eqns] == [device_put_p]
    assert len(eqns[0].invars) == 2
    assert eqns[0].params["devices"] == (sharding, sharding)


def test_device_put_under_jvp_and_grad() -> None:
    api = pytest.importorskip("lamina_tracing_core.api")
    d = px.devices()[3]
    primal, tangent = api.jvp(lambda x: px.device_put(x, d), (np.float32(2.0),),
                              (np.float32(1.0),))
    assert float(primal) == 2.0 and float(tangent) == 1.0
    g = api.grad(lambda x: px.device_put(x, d) * 3.0)(np.float32(2.0))
    assert float(g) == 3.0


def test_device_put_under_vmap(mesh: Mesh) -> None:
    api = pytest.importorskip("lamina_tracing_core.api")
    sharding = NamedSharding(mesh, P("x"))
    out = api.vmap(lambda x: px.device_put(x, sharding), in_axes=1)(
        np.arange(16, dtype=np.float32).reshape(8, 2))
    np.testing.assert_array_equal(np.asarray(out), np.arange(16).reshape(8, 2).T)


def test_pmap_shardings_chunked_and_unstacked() -> None:
    host = np.arange(24, dtype=np.float32).reshape(8, 3)
    chunked = px.PmapSharding.default((8, 3))
    a = px.device_put(host, chunked)
    assert [s.data.shape for s in a.addressable_shards] == [(1, 3)] * 8
    np.testing.assert_array_equal(np.asarray(a), host)
    unstacked = px.PmapSharding(px.devices(), px.PmapShardingSpec(8, 0, chunked=False))
    b = px.device_put(host, unstacked)
    assert [s.data.shape for s in b.addressable_shards] == [(3,)] * 8
    assert b.addressable_shards[5].index == (5, slice(None))
    np.testing.assert_array_equal(np.asarray(b.addressable_shards[5].data), host[5])
    np.testing.assert_array_equal(np.asarray(b), host)
    c = px.device_put(b, chunked)  # unstacked -> chunked goes through the host
    np.testing.assert_array_equal(np.asarray(c), host)
    assert [s.data.shape for s in c.addressable_shards] == [(1, 3)] * 8
