"""``lamina.dlpack``: exchanging arrays with other libraries through DLPack.

:func:`from_dlpack` takes any object with ``__dlpack__`` and
``__dlpack_device__`` (a NumPy array, a lamina Array, a PyTorch tensor...) and
returns a lamina Array that shares its memory when no copy or transfer is
asked for. The other direction is the Array's own ``__dlpack__``, so
``np.from_dlpack(x)`` reads a lamina Array without a copy on CPU.

As in JAX, the result has the canonical dtype of the source's (a float64
buffer becomes float32 unless x64 is on) and is committed to its device.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import ml_dtypes
import numpy as np

from lamina_interpreters_pxla._jaxlib import ArrayImplClass, JaxRuntimeError, _jax
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.backends import get_backend
from lamina_interpreters_pxla.device_put import device_put
from lamina_interpreters_pxla.layouts import mark_custom_layout
from lamina_interpreters_pxla.sharding import is_sharding, single_device_sharding
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.base_primitives import convert_element_type
from lamina_tracing_core.dtypes import canonicalize_dtype

__all__ = ["SUPPORTED_DTYPES", "DLDeviceType", "from_dlpack", "is_supported_dtype"]


class DLDeviceType(enum.IntEnum):
    """DLPack's device kinds that lamina's backends can hold."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLROCM = 10


#: the scalar types a DLPack exchange carries (JAX's set: no 8-bit or 4-bit floats)
SUPPORTED_DTYPES: frozenset[type[Any]] = frozenset({
    np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
    np.complex64, np.complex128, np.bool_})

_SUPPORTED_NP_DTYPES: frozenset[np.dtype[Any]] = frozenset(
    np.dtype(t) for t in SUPPORTED_DTYPES)

_DL_DEVICE_PLATFORMS: dict[int, str] = {
    DLDeviceType.kDLCPU: "cpu",
    DLDeviceType.kDLCUDA: "cuda",
    DLDeviceType.kDLCUDAHost: "cuda",
    DLDeviceType.kDLROCM: "rocm",
}


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can cross a DLPack exchange."""
    if dtype is None:
        # np.dtype(None) is float64, which would answer a question nobody asked
        raise TypeError(f"is_supported_dtype: expected a string or dtype-like object; "
                        f"got dtype={dtype!r}")
    return np.dtype(dtype) in _SUPPORTED_NP_DTYPES


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None) -> Array:
    """A lamina Array holding the data of ``external_array``, a DLPack producer.

    ``device`` (a Device, or a sharding over a single device) places and
    commits the result there; without it the result lives on the producer's
    device. ``copy=True`` always copies, ``copy=False`` never does (and raises
    ``ValueError`` when ``device`` would need a transfer), ``copy=None``
    copies only when needed. Without a copy the result shares the producer's
    memory: mutating the producer afterwards changes it.
    """
    target = _single_device(device)
    if not (hasattr(external_array, "__dlpack__")
            and hasattr(external_array, "__dlpack_device__")):
        raise TypeError("from_dlpack: the array passed must have __dlpack__ and "
                        f"__dlpack_device__ methods; got {type(external_array).__name__}")
    dl_device_type, device_id = external_array.__dlpack_device__()
    source = _source_device(external_array, dl_device_type, device_id)
    needs_transfer = target is not None and target != source
    if needs_transfer and copy is False:
        raise ValueError(
            f"from_dlpack: device={target!r} needs a copy, since the source device is "
            f"{source!r}, but copy=False; pass copy=True or copy=None")
    arr, own_buffers = _unpack(external_array, source, int(dl_device_type), copy)
    if needs_transfer:
        arr = device_put(arr, target)
    elif copy and not own_buffers:
        arr = arr._copy()
    elif not own_buffers:
        return arr
    # a copy runs asynchronously and reads the producer's memory, which the
    # caller may change as soon as we return: wait until it is taken
    arr.block_until_ready()
    return arr


def _unpack(external_array: Any, source: Any, dl_device_type: int, copy: bool | None
            ) -> tuple[Array, bool]:
    """The producer's data as a lamina Array on ``source`` (its canonical dtype),
    and whether the Array has buffers of its own (a dtype conversion made them)."""
    stream = _stream_for(source, dl_device_type)
    capsule = external_array.__dlpack__(stream=stream)
    aval, row_major = _capsule_description(capsule)
    # jaxlib's CPU client aliases the buffer even when asked to copy, so a
    # requested copy is made by the caller, once the data is on lamina's side
    impl = _import_capsule(capsule, source, stream, False if copy is False else None,
                           dl_device_type)
    # jaxlib builds the array without an aval (it would ask `jax.core` for
    # one); lamina's arrays always carry theirs
    wrapped = ArrayImplClass(aval, single_device_sharding(source), [impl], True,
                             _skip_checks=True)
    if not row_major:
        # a transposed producer keeps its layout; programs need it relaid out
        mark_custom_layout(wrapped)
    arr = Array(wrapped)
    canonical = canonicalize_dtype(arr.dtype)
    if canonical == arr.dtype:
        return arr, False
    return _convert(arr, canonical), True


def _single_device(device: Any) -> Any:
    if device is None or not is_sharding(device):
        return device
    devices = device.device_set
    if len(devices) != 1:
        raise ValueError("from_dlpack: can only unpack onto a single device, but the "
                         f"sharding given as device= spans {len(devices)} devices")
    (only,) = devices
    return only


def _source_device(external_array: Any, dl_device_type: Any, device_id: int) -> Any:
    platform = _DL_DEVICE_PLATFORMS.get(int(dl_device_type))
    if platform is None:
        raise TypeError(f"from_dlpack: the array is on an unsupported device type "
                        f"(DLDeviceType: {dl_device_type}): {type(external_array).__name__}")
    return get_backend(platform).device_from_local_hardware_id(device_id)


def _stream_for(source: Any, dl_device_type: int) -> int | None:
    """The stream the producer must make its data ready on (None on CPU)."""
    if dl_device_type in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        return None
    try:
        stream: int | None = source.get_stream_for_external_ready_events()
    except JaxRuntimeError as e:
        if "UNIMPLEMENTED" not in str(e):
            raise
        stream = None
    return stream


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """The head of a ``DLManagedTensor``: the tensor's description (DLPack 0.x)."""

    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


#: DLPack's (type code, bits) -> the dtype lamina gives such an array
_DL_DTYPES: dict[tuple[int, int], np.dtype[Any]] = {
    (code, np.dtype(t).itemsize * 8): np.dtype(t)
    for code, types in (
        (0, (np.int8, np.int16, np.int32, np.int64)),
        (1, (np.uint8, np.uint16, np.uint32, np.uint64)),
        (2, (np.float16, np.float32, np.float64)),
        (4, (ml_dtypes.bfloat16,)),
        (5, (np.complex64, np.complex128)),
        (6, (np.bool_,)))
    for t in types}

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _capsule_description(capsule: Any) -> tuple[ShapedArray, bool]:
    """The shape and dtype a ``dltensor`` capsule describes (read, not
    consumed), and whether its strides are the compact row-major ones."""
    try:
        address = _capsule_pointer(capsule, b"dltensor")
    except ValueError:
        raise BufferError("from_dlpack: the producer's __dlpack__ did not return an "
                          "unconsumed 'dltensor' capsule") from None
    tensor = _DLTensor.from_address(address)
    key = (tensor.dtype.code, tensor.dtype.bits)
    if key not in _DL_DTYPES or tensor.dtype.lanes != 1:
        raise BufferError(f"from_dlpack: DLPack dtype (code {key[0]}, {key[1]} bits, "
                          f"{tensor.dtype.lanes} lanes) is not supported")
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    return ShapedArray(shape, _DL_DTYPES[key]), _is_row_major(tensor, shape)


def _is_row_major(tensor: _DLTensor, shape: tuple[int, ...]) -> bool:
    if not tensor.strides:  # DLPack: no strides means compact row-major
        return True
    expected = 1
    for axis in reversed(range(len(shape))):
        if shape[axis] != 1 and tensor.strides[axis] != expected:
            return False
        expected *= shape[axis]
    return True


def _import_capsule(capsule: Any, source: Any, stream: int | None, copy: bool | None,
                    dl_device_type: int) -> Any:
    try:
        return _jax.dlpack_managed_tensor_to_buffer(capsule, source, stream, copy,
                                                    dl_device_type)
    except JaxRuntimeError as e:
        text = str(e)
        where = text.find("is not aligned to")
        if where < 0:
            raise
        reason = text[where:].strip().rstrip(".")
        raise ValueError(f"from_dlpack: the source data needs a copy, since its buffer {reason}, "
                         "but copy=False; pass copy=True or copy=None") from None


def _convert(arr: Array, dtype: np.dtype[Any]) -> Array:
    out: Array = convert_element_type(arr, dtype)
    return out
