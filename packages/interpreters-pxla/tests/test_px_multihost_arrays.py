"""Global-array constructors and multihost utilities in one process (8 CPU devices).

The multi-process behaviour is tested in tests/test_multiprocess_*.py; here
the constructors' contracts (placement, order, checks, error messages) are
checked where every shard is addressable.
"""

from __future__ import annotations

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import multihost_utils
from lamina_interpreters_pxla.multihost import (
    GlobalArrayError,
    infer_global_shape,
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
)


@pytest.fixture(scope="module")
def mesh() -> px.Mesh:
    devices = px.devices()
    if len(devices) < 8:
        pytest.skip("needs 8 CPU devices")
    return px.Mesh(np.array(devices[:8]).reshape(2, 4), ("x", "y"))


def _check_shards(x: px.Array, expected: np.ndarray) -> None:
    for shard in x.addressable_shards:
        np.testing.assert_array_equal(np.asarray(shard.data), expected[shard.index])
    np.testing.assert_array_equal(np.asarray(x), expected)


def test_from_single_device_arrays_any_order(mesh: px.Mesh) -> None:
    g = np.arange(64, dtype=np.float32).reshape(8, 8)
    s = px.NamedSharding(mesh, px.P("x", "y"))
    indices = s.addressable_devices_indices_map(g.shape)
    pieces = [px.device_put(g[idx], d) for d, idx in reversed(list(indices.items()))]
    x = make_array_from_single_device_arrays((8, 8), s, pieces)
    assert x.sharding == s and x.shape == (8, 8) and x.dtype == np.float32
    assert x.committed and x.is_fully_addressable
    _check_shards(x, g)
    # the shards are reused, not copied
    assert any(p._arr.unsafe_buffer_pointer() == x.addressable_data(0)._arr
               .unsafe_buffer_pointer() for p in pieces)


def test_from_single_device_arrays_errors(mesh: px.Mesh) -> None:
    g = np.arange(16, dtype=np.float32).reshape(4, 4)
    s = px.NamedSharding(mesh, px.P("x"))
    devices = list(s._addressable_device_assignment)
    good = [px.device_put(g[:2] if k < 4 else g[2:], d) for k, d in enumerate(devices)]
    fn = make_array_from_single_device_arrays
    with pytest.raises(GlobalArrayError, match="no array for"):
        fn((4, 4), s, good[:-1])
    with pytest.raises(GlobalArrayError, match=r"arrays\[1\] on .* has type float32\[1, 4\]"):
        fn((4, 4), s, [good[0], px.device_put(g[:1], devices[1])] + good[2:])
    with pytest.raises(GlobalArrayError, match="two arrays are on"):
        fn((4, 4), s, [good[0], good[0]] + good[2:])
    with pytest.raises(TypeError, match=r"arrays\[0\] must be a lamina Array"):
        fn((4, 4), s, [g[:2]] + good[1:])
    with pytest.raises(px.ShardingError, match="shape"):
        fn((3, 4), s, good)
    sharded = px.device_put(g, s)
    with pytest.raises(GlobalArrayError, match=r"arrays\[0\] must be on a single device"):
        fn((4, 4), s, [sharded] + good[1:])


def test_from_callback_partially_replicated(mesh: px.Mesh) -> None:
    g = np.arange(24, dtype=np.int32).reshape(4, 6)
    s = px.NamedSharding(mesh, px.P(None, "x"))  # replicated over y
    calls: list[tuple] = []

    def cb(index: tuple) -> np.ndarray:
        calls.append(index)
        return g[index]

    x = make_array_from_callback(g.shape, s, cb)
    assert len(calls) == 8 and x.dtype == np.int32
    _check_shards(x, g)


def test_from_callback_replicated_calls_once_and_dtype(mesh: px.Mesh) -> None:
    calls = []
    s = px.NamedSharding(mesh, px.P())
    x = make_array_from_callback((3,), s, lambda idx: calls.append(idx) or np.ones(3),
                                 dtype=np.float32)
    assert len(calls) == 1 and x.dtype == np.float32 and x.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(x), np.ones(3, np.float32))


def test_from_callback_returning_arrays_and_bad_shapes(mesh: px.Mesh) -> None:
    g = np.arange(8, dtype=np.float32)
    s = px.NamedSharding(mesh, px.P(("x", "y")))
    x = make_array_from_callback((8,), s, lambda idx: px.device_put(g[idx]))
    _check_shards(x, g)
    with pytest.raises(GlobalArrayError, match=r"returned shape \(2,\)"):
        make_array_from_callback((8,), s, lambda idx: np.zeros(2, np.float32))


def test_process_local_data_is_device_put_in_one_process(mesh: px.Mesh) -> None:
    g = np.arange(16, dtype=np.float32).reshape(8, 2)
    s = px.NamedSharding(mesh, px.P("x"))
    tree = make_array_from_process_local_data(s, {"a": g, "b": g[:, 0]})
    _check_shards(tree["a"], g)
    _check_shards(tree["b"], g[:, 0])
    with pytest.raises(GlobalArrayError, match=r"local_data\['a'\]: in a single process"):
        make_array_from_process_local_data(s, {"a": g, "b": g[:, 0]},
                                           {"a": (16, 2), "b": None})


def test_infer_global_shape_single_process(mesh: px.Mesh) -> None:
    s = px.NamedSharding(mesh, px.P("x", "y"))
    # one process holds every tile: the global shape is the local one
    assert infer_global_shape("f", "x", s, (8, 4)) == (8, 4)


def test_utils_in_one_process(mesh: px.Mesh) -> None:
    x = np.arange(3.0, dtype=np.float32)
    np.testing.assert_array_equal(multihost_utils.process_allgather(x), x[None])
    np.testing.assert_array_equal(multihost_utils.process_allgather(x, tiled=True), x)
    out = multihost_utils.broadcast_one_to_all({"v": x})
    np.testing.assert_array_equal(out["v"], x)
    multihost_utils.assert_equal(x)
    multihost_utils.sync_global_devices("single process")
    with pytest.raises(TypeError, match="name must be a str"):
        multihost_utils.sync_global_devices(3)  # type: ignore[arg-type]


def test_host_local_round_trip_in_one_process(mesh: px.Mesh) -> None:
    from lamina_interpreters_pxla.multihost import (
        global_array_to_host_local_array,
        host_local_array_to_global_array,
        local_mesh,
    )
    assert local_mesh(mesh) == mesh
    g = np.arange(32, dtype=np.float32).reshape(8, 4)
    tree = {"a": g, "b": g[0]}
    specs = {"a": px.P("x", "y"), "b": px.P()}
    glob = host_local_array_to_global_array(tree, mesh, specs)
    assert glob["a"].sharding == px.NamedSharding(mesh, px.P("x", "y"))
    _check_shards(glob["a"], g)
    back = global_array_to_host_local_array(glob, mesh, specs)
    _check_shards(back["a"], g)
    _check_shards(back["b"], g[0])
    with pytest.raises(GlobalArrayError, match=r"pspec of inputs\['a'\] is None"):
        host_local_array_to_global_array(tree, mesh, {"a": None, "b": px.P()})
