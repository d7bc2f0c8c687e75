"""Array: numpy round trips, shards, Python protocol, deletion."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import Array, Mesh, NamedSharding, P, SingleDeviceSharding
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval

pytestmark = pytest.mark.skipif(px.device_count() < 8, reason="needs 8 CPU devices")

ALL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
              np.complex64, np.complex128]
SHAPES = [(), (0,), (3,), (8, 3), (2, 0, 4), (8, 4, 2)]


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request: pytest.FixtureRequest) -> Iterator[bool]:
    before = dtypes.x64_enabled()
    dtypes.enable_x64(request.param)
    try:
        yield request.param
    finally:
        dtypes.enable_x64(before)


def _sample(shape: tuple[int, ...], dtype: object) -> np.ndarray:
    rng = np.random.default_rng(0)
    data = rng.integers(0, 100, size=shape)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return data % 2 == 0
    if dt.kind == "c":
        return (data + 1j * data[::-1] if data.ndim else data + 1j).astype(dt)
    return data.astype(dt)


def _shardings(shape: tuple[int, ...]) -> list[object]:
    devs = px.devices()
    out: list[object] = [None, devs[5]]
    mesh = Mesh(np.array(devs).reshape(2, 4), ("x", "y"))
    out.append(NamedSharding(mesh, P()))
    if len(shape) >= 1 and shape[0] % 2 == 0:
        out.append(NamedSharding(mesh, P("x")))
    if len(shape) >= 2 and shape[0] % 8 == 0:
        out.append(NamedSharding(mesh, P(("x", "y"))))
    if len(shape) >= 2 and shape[0] % 4 == 0 and shape[1] % 2 == 0:
        out.append(NamedSharding(mesh, P("y", "x")))
    return out


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_round_trip_every_dtype_shape_sharding(dtype: object, x64: bool) -> None:
    for shape in SHAPES:
        host = _sample(shape, dtype)
        expected_dtype = dtypes.canonicalize_dtype(host.dtype)
        for sharding in _shardings(shape):
            arr = px.device_put(host, sharding)
            assert isinstance(arr, Array)
            assert arr.shape == shape and arr.ndim == len(shape)
            assert arr.dtype == expected_dtype
            assert arr.size == host.size
            assert arr.aval == ShapedArray(shape, expected_dtype, False)
            assert get_aval(arr) is arr.aval
            back = np.asarray(arr)
            assert back.dtype == expected_dtype
            np.testing.assert_array_equal(back, host.astype(expected_dtype))
            _check_shards(arr, back)


def _check_shards(arr: Array, value: np.ndarray) -> None:
    indices = arr.sharding.devices_indices_map(arr.shape)
    shards = arr.addressable_shards
    assert [s.device for s in shards] == list(arr.sharding._device_assignment)
    for shard in shards:
        assert shard.index == indices[shard.device]
        assert shard.data.sharding == SingleDeviceSharding(shard.device)
        np.testing.assert_array_equal(np.asarray(shard.data), value[shard.index])


def test_weak_type_is_kept_and_shown() -> None:
    a = px.device_put(2.0)
    assert a.weak_type and a.aval.weak_type and a.dtype == np.float32
    assert repr(a) == "Array(2., dtype=float32, weak_type=True)"
    assert repr(px.device_put(3)) == "Array(3, dtype=int32, weak_type=True)"
    assert repr(px.device_put(np.int64(3))) == "Array(3, dtype=int32)"
    assert repr(px.device_put(True)) == "Array(True, dtype=bool)"


def test_repr_like_jax() -> None:
    assert repr(px.device_put(np.array([1.0, 2.0], np.float32))) == \
        "Array([1., 2.], dtype=float32)"
    assert repr(px.device_put(np.zeros((0, 3), np.float32))) == \
        "Array([], shape=(0, 3), dtype=float32)"
    assert repr(px.device_put(np.array([1, 2], np.uint8))) == "Array([1, 2], dtype=uint8)"
    assert repr(px.device_put(np.array(3, ml_dtypes.bfloat16))) == "Array(3, dtype=bfloat16)"
    assert repr(px.device_put(np.array([1 + 2j], np.complex64))) == \
        "Array([1.+2.j], dtype=complex64)"
    assert repr(px.device_put(np.zeros((2, 3), np.float32))) == (
        "Array([[0., 0., 0.],\n       [0., 0., 0.]], dtype=float32)")
    long = repr(px.device_put(np.arange(30, dtype=np.float32)))
    assert long.startswith("Array([ 0.,  1.,") and long.endswith("dtype=float32)")
    assert "\n       13.," in long
    assert str(px.device_put(np.array([1.0, 2.0], np.float32))) == "[1. 2.]"
    assert f"{px.device_put(2.5):.2f}" == "2.50"
    assert f"{px.device_put(np.array([1.0, 2.0], np.float32))}" == "[1. 2.]"


def test_numpy_view_is_read_only_and_zero_copy_where_possible() -> None:
    a = px.device_put(np.arange(4, dtype=np.float32))
    v = np.asarray(a)
    assert not v.flags.writeable
    assert np.asarray(a) is v  # cached
    c = np.array(a)
    assert c.flags.writeable and c.base is None or c.base is not v
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="needs a copy"):
        a.__array__(np.float64, copy=False)


def test_host_data_is_snapshotted() -> None:
    host = np.zeros(1024, np.float32)
    a = px.device_put(host)
    host[0] = 5
    assert float(np.asarray(a)[0]) == 0.0


def test_scalar_conversions() -> None:
    assert float(px.device_put(2.5)) == 2.5
    assert int(px.device_put(7)) == 7
    assert complex(px.device_put(1 + 2j)) == 1 + 2j
    assert bool(px.device_put(np.array([1.0], np.float32)))
    assert [10, 20, 30][px.device_put(1)] == 20
    assert px.device_put(np.arange(3)).tolist() == [0, 1, 2]
    assert px.device_put(np.float32(1.5)).item() == 1.5
    v = px.device_put(np.arange(3.0, dtype=np.float32))
    with pytest.raises(TypeError, match="Only scalar arrays"):
        float(v)
    with pytest.raises(TypeError, match="Only scalar arrays"):
        int(v)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(v)
    with pytest.raises(TypeError, match="only integer scalar arrays"):
        [1, 2][px.device_put(1.0)]


def test_len_and_iter() -> None:
    a = px.device_put(np.arange(6, dtype=np.int32).reshape(3, 2), px.devices()[2])
    assert len(a) == 3
    rows = list(a)
    assert all(isinstance(r, Array) for r in rows)
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    assert rows[0].sharding == SingleDeviceSharding(px.devices()[2]) and rows[0].committed
    s = px.device_put(2.0)
    with pytest.raises(TypeError, match="len\\(\\) of unsized object"):
        len(s)
    with pytest.raises(TypeError, match="iteration over a 0-d array"):
        iter(s)


def test_hash_raises_like_jax() -> None:
    with pytest.raises(TypeError, match="unhashable type: 'Array'"):
        hash(px.device_put(1.0))


def test_pickle_round_trip() -> None:
    a = px.device_put(np.arange(4, dtype=np.int32), px.devices()[3])
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, Array) and b.tolist() == [0, 1, 2, 3] and b.dtype == np.int32
    w = pickle.loads(pickle.dumps(px.device_put(2.0)))
    assert w.weak_type and float(w) == 2.0


def test_copy_and_deepcopy() -> None:
    a = px.device_put(np.arange(3, dtype=np.float32))
    assert copy.copy(a) is a
    b = copy.deepcopy(a)
    assert b is not a and b.tolist() == a.tolist()
    a.delete()
    assert b.tolist() == [0.0, 1.0, 2.0]


def test_dlpack() -> None:
    a = px.device_put(np.arange(4, dtype=np.float32), px.devices()[0])
    assert a.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(np.from_dlpack(a), np.arange(4, dtype=np.float32))
    mesh = Mesh(np.array(px.devices()), ("x",))
    sharded = px.device_put(np.arange(8.0), NamedSharding(mesh, P("x")))
    with pytest.raises(BufferError, match="single device"):
        sharded.__dlpack__()


def test_placement_attributes() -> None:
    devs = px.devices()
    a = px.device_put(np.ones(3, np.float32))
    assert not a.committed and a.sharding == SingleDeviceSharding(devs[0])
    assert a.device == devs[0] and a.devices() == {devs[0]}
    assert a.is_fully_replicated and a.is_fully_addressable
    b = px.device_put(np.ones(3, np.float32), devs[4])
    assert b.committed and b.device == devs[4]
    mesh = Mesh(np.array(devs).reshape(2, 4), ("x", "y"))
    c = px.device_put(np.ones((4, 4), np.float32), NamedSharding(mesh, P("x", "y")))
    assert c.committed and not c.is_fully_replicated and c.device == c.sharding
    assert len(c.addressable_shards) == 8
    assert c.nbytes == 64 and c.itemsize == 4
    assert c.on_device_size_in_bytes() == 64


def test_block_until_ready_and_async_copy() -> None:
    a = px.device_put(np.arange(5, dtype=np.float32))
    assert a.block_until_ready() is a and a.is_ready()
    a.copy_to_host_async()
    tree = {"a": a, "b": [px.device_put(1.0), 3]}
    assert px.block_until_ready(tree) is tree


def test_deleted_array_errors() -> None:
    a = px.device_put(np.arange(3, dtype=np.float32))
    np.asarray(a)  # cache a host copy; deletion must still win
    a.delete()
    assert a.is_deleted()
    a.delete()  # idempotent
    for use in (np.asarray, lambda x: x.tolist(), lambda x: x.block_until_ready(),
                lambda x: x.addressable_shards, lambda x: x.copy_to_host_async()):
        with pytest.raises(px.DeletedArrayError, match="Array has been deleted with "
                                                       "shape=f32\\[3\\]"):
            use(a)
    assert repr(a) == "Array(<deleted>, shape=(3,), dtype=float32)"
    with pytest.raises(px.DeletedArrayError, match="argument x\\['k'\\]"):
        px.device_put({"k": a}, px.devices()[1])


def test_pinned_host_memory_kind() -> None:
    d = px.devices()[1]
    a = px.device_put(np.arange(3, dtype=np.float32), SingleDeviceSharding(
        d, memory_kind="pinned_host"))
    assert a.sharding.memory_kind == "pinned_host"
    assert a.tolist() == [0.0, 1.0, 2.0]
    b = px.device_put(a, SingleDeviceSharding(d))
    assert b.sharding.memory_kind == "device" and b.tolist() == [0.0, 1.0, 2.0]


def test_array_format_reports_layout() -> None:
    a = px.device_put(np.zeros((2, 3), np.float32))
    assert a.format.layout == px.Layout((0, 1))
    assert a.format.sharding == a.sharding
