"""``lamina.dlpack``: arrays in and out through DLPack, with JAX's dtypes,
copy rules and errors (the behaviours recorded from JAX 0.10.2)."""

from __future__ import annotations

from typing import Any

import lamina as lx
import lamina.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from lamina import dlpack

#: dtypes that survive a NumPy round trip unchanged (x64 off: JAX gives the
#: same dtypes for these)
_ROUND_TRIP = [np.float32, np.float16, np.int8, np.int16, np.int32, np.uint8, np.uint16,
               np.uint32, np.bool_, np.complex64]


def _aligned(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """A copy of ``values`` whose buffer is 64-byte aligned, which XLA's CPU
    client needs to alias a buffer instead of copying it."""
    raw = np.empty(values.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


@pytest.mark.parametrize("dtype", _ROUND_TRIP, ids=lambda t: np.dtype(t).name)
def test_numpy_round_trip(dtype: Any) -> None:
    host = np.arange(6).reshape(2, 3).astype(dtype)
    arr = dlpack.from_dlpack(host)
    assert type(arr) is lx.Array
    assert arr.dtype == np.dtype(dtype) and arr.shape == (2, 3)
    assert arr.committed and not arr.weak_type  # JAX: committed, strong
    back = np.from_dlpack(arr)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, host)
    np.testing.assert_array_equal(np.asarray(arr + arr), host + host)


def test_wide_dtypes_are_canonicalized_as_in_jax() -> None:
    # JAX 0.10.2 without x64: float64 -> float32, int64 -> int32
    assert dlpack.from_dlpack(np.arange(3.0)).dtype == np.float32
    assert dlpack.from_dlpack(np.arange(3, dtype=np.int64)).dtype == np.int32
    assert dlpack.from_dlpack(np.arange(3, dtype=np.uint64)).dtype == np.uint32
    with lx.enable_x64(True):
        assert dlpack.from_dlpack(np.arange(3.0)).dtype == np.float64


def test_lamina_array_round_trip() -> None:
    x = jnp.arange(5, dtype=jnp.float32) * 2
    y = dlpack.from_dlpack(x)
    np.testing.assert_array_equal(np.asarray(y), [0, 2, 4, 6, 8])
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()  # no copy
    z = dlpack.from_dlpack(x, copy=True)
    assert z.unsafe_buffer_pointer() != x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(np.asarray(z), np.asarray(x))


def test_shares_memory_unless_copy_is_asked() -> None:
    host = _aligned(np.arange(4, dtype=np.float32))
    shared = dlpack.from_dlpack(host)
    copied = dlpack.from_dlpack(host, copy=True)
    assert shared.unsafe_buffer_pointer() == host.ctypes.data
    assert copied.unsafe_buffer_pointer() != host.ctypes.data
    host[0] = 99.0
    assert float(shared[0]) == 99.0
    assert float(copied[0]) == 0.0


def test_transposed_producer_keeps_its_values() -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4).T
    arr = dlpack.from_dlpack(host)
    np.testing.assert_array_equal(np.asarray(arr), host)
    np.testing.assert_array_equal(np.asarray(arr * 1), host)  # a program relays it out
    copied = dlpack.from_dlpack(host, copy=True)
    np.testing.assert_array_equal(np.asarray(copied + 0), host)
    wide = dlpack.from_dlpack(np.arange(12.0).reshape(3, 4).T)  # converted to float32
    np.testing.assert_array_equal(np.asarray(wide), np.arange(12.0).reshape(3, 4).T)


def test_device_placement_and_copy_false() -> None:
    other = lx.devices()[1]
    moved = dlpack.from_dlpack(np.arange(3.0), device=other)
    assert moved.devices() == {other} and moved.committed
    with pytest.raises(ValueError, match=r"needs a copy.*copy=False"):
        dlpack.from_dlpack(np.arange(3.0), device=other, copy=False)
    same = dlpack.from_dlpack(_aligned(np.arange(3.0)), device=lx.devices()[0], copy=False)
    assert same.devices() == {lx.devices()[0]}
    mesh = lx.make_mesh((2,), ("x",))
    with pytest.raises(ValueError, match="single device.*2 devices"):
        dlpack.from_dlpack(np.arange(3.0), device=lx.NamedSharding(mesh, lx.P()))


def test_unaligned_buffer_needs_a_copy() -> None:
    unaligned = _aligned(np.arange(5, dtype=np.float32))[1:]  # 4 bytes past a 64-byte edge
    with pytest.raises(ValueError, match="not aligned to 64 bytes, but copy=False"):
        dlpack.from_dlpack(unaligned, copy=False)
    np.testing.assert_array_equal(np.asarray(dlpack.from_dlpack(unaligned)), [1, 2, 3, 4])


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.int4,
                                   np.dtype("U3")], ids=str)
def test_unsupported_numpy_dtypes_raise(dtype: Any) -> None:
    # NumPy (the producer) refuses these, as under JAX
    with pytest.raises(BufferError, match="DLPack only supports"):
        dlpack.from_dlpack(np.zeros(3, dtype))


def test_not_a_producer_raises() -> None:
    with pytest.raises(TypeError, match=r"from_dlpack.*__dlpack__ and __dlpack_device__.*list"):
        dlpack.from_dlpack([1, 2])


def test_non_compact_strides_raise() -> None:
    with pytest.raises(lx.errors.JaxRuntimeError, match="compact"):
        dlpack.from_dlpack(np.arange(12.0).reshape(3, 4)[:, ::2])


def test_is_supported_dtype_matches_jax() -> None:
    # JAX 0.10.2: [True, False, False, True, True]
    answers = [dlpack.is_supported_dtype(t)
               for t in [np.float32, "int4", ml_dtypes.float8_e4m3fn, "bfloat16", np.uint64]]
    assert answers == [True, False, False, True, True]
    assert len(dlpack.SUPPORTED_DTYPES) == 15
    with pytest.raises(TypeError, match="dtype=None"):
        dlpack.is_supported_dtype(None)


def test_array_exports_and_its_errors() -> None:
    x = jnp.arange(3.0)
    assert x.__dlpack_device__() == (1, 0) == (dlpack.DLDeviceType.kDLCPU, 0)
    np.testing.assert_array_equal(np.from_dlpack(x), [0.0, 1.0, 2.0])
    with pytest.raises(BufferError, match="below 0.5"):
        x.__dlpack__(max_version=(0, 4))
    with pytest.raises(BufferError, match="unsupported device type"):
        x.__dlpack__(dl_device=(5, 0))
    mesh = lx.make_mesh((2,), ("x",))
    sharded = lx.device_put(jnp.arange(8.0), lx.NamedSharding(mesh, lx.P("x")))
    with pytest.raises(BufferError, match="single"):
        np.from_dlpack(sharded)


def test_numpy_namespace_and_alias_names() -> None:
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(np.arange(3))), [0, 1, 2])
    assert lx.dlpack is dlpack
