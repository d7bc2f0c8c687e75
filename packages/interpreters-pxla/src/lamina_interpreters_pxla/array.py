"""``Array``: lamina's array type, a thin wrapper over jaxlib's C++ ``ArrayImpl``.

``ArrayImpl`` cannot be subclassed and lamina never patches it, so an
``Array`` holds one in ``_arr`` and adds the Python protocol (shape, numpy
conversion, printing, shards, operators from the ``ArrayMethods`` mixin). The
``ArrayImpl``'s ``aval`` is always a tracing-core ``ShapedArray`` and its
sharding a lamina sharding: executables take ``x._arr`` directly and their
outputs are wrapped with :func:`wrap_impl`.

Data is immutable; deleting (or donating) an array frees its buffers, and any
later use raises :class:`DeletedArrayError` naming the call that donated it.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import (
    ArrayImpl,
    ArrayImplClass,
    Device,
    JaxRuntimeError,
    _jax,
)
from lamina_interpreters_pxla import buffer_use
from lamina_interpreters_pxla.backends import default_device
from lamina_interpreters_pxla.buffers import ALWAYS_COPY, put_host_value, shard_impls, to_host
from lamina_interpreters_pxla.donation import DeletedArrayError as DeletedArrayError
from lamina_interpreters_pxla.donation import deleted_message as deleted_message
from lamina_interpreters_pxla.donation import donor_of as donor_of
from lamina_interpreters_pxla.donation import record_donation as record_donation
from lamina_interpreters_pxla.layouts import Format, Layout
from lamina_interpreters_pxla.sharding import (
    type_sharding_of,
    Index,
    SingleDeviceSharding,
    indices_to_shard_ids,
    single_device_sharding,
)
from lamina_tracing_core import avals as _avals
from lamina_tracing_core.array_methods import ArrayMethods
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.memory import kind_to_space, spaces_used
from lamina_tracing_core.mesh import explicit_meshes_made
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray


class _ArrayType(type):
    """The metaclass of :class:`Array`: ``isinstance(x, Array)`` also holds for
    a tracer (under jit, grad or vmap), as ``isinstance(x, jax.Array)`` does in
    JAX, so code checking for arrays works unchanged inside transformations.

    Python answers ``isinstance`` for an exact ``Array`` before calling this
    hook, so the common check costs nothing extra; ``issubclass(Tracer, Array)``
    stays False, as in JAX. A typed key array is an Array too, as in JAX.
    Code that needs a concrete array checks ``type(x) is Array``.
    """

    def __instancecheck__(cls, instance: object) -> bool:
        return (isinstance(instance, (Tracer, PRNGKeyArray))
                or type.__instancecheck__(cls, instance))


class Shard:
    """One addressable piece of an Array: where it lives and which slice it is."""

    __slots__ = ("device", "index", "replica_id", "data")

    def __init__(self, device: Device, index: Index, replica_id: int, data: Array):
        self.device = device
        self.index = index
        self.replica_id = replica_id
        self.data = data

    def __repr__(self) -> str:
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data})")


class Array(ArrayMethods, metaclass=_ArrayType):
    """An immutable array on one or more devices (a jaxlib ``ArrayImpl`` inside).

    Users get Arrays from ``device_put`` and from computations; the
    constructor takes the ``ArrayImpl`` and is internal. ``isinstance(x,
    Array)`` is also True for tracers (see ``_ArrayType``).
    """

    __slots__ = ("_arr", "_npy", "_dispatch_key", "__weakref__")
    __array_priority__ = 100

    _arr: ArrayImpl
    _npy: np.ndarray[Any, Any] | None
    #: (aval, sharding, committed), built by eager dispatch on first use
    _dispatch_key: tuple[Any, ...] | None

    def __init__(self, arr: ArrayImpl):
        self._arr = arr
        self._npy = None
        self._dispatch_key = None

    # --- the type ---------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        """Shape, dtype, weak type, and the sharding over Explicit mesh axes
        (``typeof``'s answer for an array laid out over such a mesh)."""
        return _aval_of_array(self)

    # ArrayMethods declares shape/dtype as plain attributes; here they are
    # read-only views of the aval.
    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        shape: tuple[int, ...] = self._arr.aval.shape
        return shape

    @property
    def dtype(self) -> np.dtype[Any]:  # type: ignore[override]
        dtype: np.dtype[Any] = self._arr.aval.dtype
        return dtype

    @property
    def ndim(self) -> int:
        return len(self._arr.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def weak_type(self) -> bool:
        return bool(self._arr.aval.weak_type)

    @property
    def itemsize(self) -> int:
        return int(self.dtype.itemsize)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    # --- placement ------------------------------------------------------------
    @property
    def sharding(self) -> Any:
        return self._arr._sharding

    @property
    def committed(self) -> bool:
        """True when the array was placed explicitly (``device_put`` with a
        device or sharding, or computed from committed arrays): computations
        then run where it is instead of on the default device."""
        return bool(self._arr._committed)

    def devices(self) -> set[Device]:
        return set(self.sharding.device_set)

    @property
    def device(self) -> Any:
        """The device of a single-device array, else its sharding."""
        sharding = self.sharding
        if sharding.num_devices == 1:
            return sharding._device_assignment[0]
        return sharding

    @property
    def is_fully_replicated(self) -> bool:
        return bool(self.sharding.is_fully_replicated)

    @property
    def is_fully_addressable(self) -> bool:
        return bool(self.sharding.is_fully_addressable)

    @property
    def format(self) -> Any:
        """The array's ``Format`` (layout plus sharding)."""
        self._check_if_deleted()
        return Format(Layout.from_pjrt_layout(self._arr._pjrt_layout), self.sharding)

    @property
    def addressable_shards(self) -> list[Shard]:
        """This process's shards, in the sharding's device order."""
        self._check_if_deleted()
        sharding = self.sharding
        indices = sharding.addressable_devices_indices_map(self.shape)
        replica_ids = indices_to_shard_ids(indices)
        aval = self.aval
        shard_aval = aval.update(shape=sharding.shard_shape(aval.shape))
        out = []
        for impl in self._single_device_impls():
            device = impl._sharding._device
            if impl.aval is not shard_aval:
                impl = impl._rewrap_with_aval_and_sharding(shard_aval,
                                                           SingleDeviceSharding(device))
            out.append(Shard(device, indices[device], replica_ids[device], Array(impl)))
        return out

    def addressable_data(self, index: int) -> Array:
        return self.addressable_shards[index].data

    def _single_device_impls(self) -> list[ArrayImpl]:
        if self.sharding.num_devices == 1:
            return [self._arr]
        impls: list[ArrayImpl] = self._arr._arrays
        return impls

    # --- lifetime -----------------------------------------------------------
    def block_until_ready(self) -> Array:
        try:
            self._arr.block_until_ready()
        except JaxRuntimeError:
            self._check_if_deleted()  # names the deleted array; else re-raise
            raise
        return self

    def is_ready(self) -> bool:
        return bool(self._arr.is_ready())

    def delete(self) -> None:
        """Frees the device buffers now (once calls that read them in other
        threads finish); any later use is an error."""
        buffer_use.delete(self._arr)
        self._npy = None

    def is_deleted(self) -> bool:
        return bool(self._arr.is_deleted())

    def _check_if_deleted(self, what: str | None = None) -> None:
        if self._arr.is_deleted():
            self._npy = None
            raise DeletedArrayError(deleted_message(self._arr, what))

    def copy_to_host_async(self) -> None:
        """Starts copying the data to the host (``np.asarray`` then won't wait)."""
        self._check_if_deleted()
        if self._npy is not None:
            return
        try:
            for impl in self._single_device_impls():
                impl._copy_single_device_array_to_host_async()
        except JaxRuntimeError:
            self._check_if_deleted()  # deleted by another thread meanwhile
            raise

    def on_device_size_in_bytes(self) -> int:
        return int(sum(i.on_device_size_in_bytes() for i in self._single_device_impls()))

    def unsafe_buffer_pointer(self) -> int:
        if self.sharding.num_devices != 1:
            raise ValueError("unsafe_buffer_pointer() is supported only for unsharded arrays.")
        return int(self._arr.unsafe_buffer_pointer())

    # --- host data ----------------------------------------------------------
    @property
    def _value(self) -> np.ndarray[Any, Any]:
        """The data as a read-only numpy array (fetched once, then cached)."""
        npy = self._npy
        if npy is not None and not self._arr.is_deleted():
            return npy
        self._check_if_deleted()
        try:
            npy = to_host(self._arr)
        except JaxRuntimeError:
            self._check_if_deleted()  # deleted by another thread meanwhile
            raise
        self._npy = npy
        return npy

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        value = self._value
        if copy is True:
            return np.array(value, dtype=dtype, copy=True)
        if dtype is not None and np.dtype(dtype) != value.dtype:
            if copy is False:
                raise ValueError(f"converting {self.dtype} to {np.dtype(dtype)} needs a copy, "
                                 "but copy=False was given")
            return value.astype(dtype)
        return value

    def tolist(self) -> Any:
        return self._value.tolist()

    def item(self, *args: Any) -> Any:
        return self._value.item(*args)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[Any, int] | None = None, copy: bool | None = None) -> Any:
        self._check_if_deleted()
        if self.sharding.num_devices != 1:
            raise BufferError(
                "__dlpack__ needs an array on a single device, but this one is sharded over "
                f"{self.sharding.num_devices} devices")
        if max_version is not None and tuple(max_version) < (0, 5):
            raise BufferError(f"__dlpack__: DLPack versions below 0.5 are not supported, "
                              f"but max_version={max_version} was requested")
        if dl_device is not None and int(dl_device[0]) not in _DLPACK_DEVICE_TYPES.values():
            raise BufferError(f"__dlpack__: unsupported device type in dl_device={dl_device}")
        if dl_device is not None and tuple(dl_device) != tuple(self.__dlpack_device__()):
            raise BufferError(f"__dlpack__: cannot export to device {dl_device} without a "
                              "transfer; device_put the array there first")
        impl = self._copy()._arr if copy else self._arr
        return _jax.buffer_to_dlpack_managed_tensor(impl, stream=stream)

    def __dlpack_device__(self) -> tuple[Any, int]:
        if self.sharding.num_devices != 1:
            raise BufferError("__dlpack__ is only supported for single-device arrays.")
        device = self.sharding._device_assignment[0]
        return _DLPACK_DEVICE_TYPES.get(device.platform, 1), int(device.local_hardware_id or 0)

    # --- Python protocol ----------------------------------------------------
    def __repr__(self) -> str:
        prefix = "Array("
        dtype_str = f"dtype={self.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        if self._arr.is_deleted():
            return f"{prefix}<deleted>, shape={self.shape}, {dtype_str})"
        if not (self.is_fully_addressable or self.is_fully_replicated):
            return f"{prefix}shape={self.shape}, {dtype_str})"
        line_width = np.get_printoptions()["linewidth"]
        if self.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value, prefix=prefix, suffix=",", separator=", ",
                                   max_line_width=line_width)
        last_line_len = len(body) - body.rfind("\n") + 1
        sep = " " * len(prefix) if last_line_len + len(dtype_str) + 2 > line_width else " "
        return f"{prefix}{body},{sep}{dtype_str})"

    def __str__(self) -> str:
        if self._arr.is_deleted() or not self.is_fully_addressable:
            return repr(self)
        return str(self._value)

    def __format__(self, format_spec: str) -> str:
        if self._arr.is_deleted() or not self.is_fully_addressable:
            return repr(self)
        value = self._value
        return format(value if value.ndim else value[()], format_spec)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[Array]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        value = self._value
        sharding = self.sharding if self.sharding.num_devices == 1 else None
        return (place_host_value(value[i], sharding, weak_type=self.weak_type,
                                 committed=self.committed) for i in range(self.shape[0]))

    def _check_scalar(self, kind: str) -> None:
        if self.size != 1:
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got "
                            f"arr.ndim={self.ndim} ({kind}() of an array of shape "
                            f"{self.shape})")

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is "
                             "ambiguous. Use a.any() or a.all()")
        return bool(self._value)

    def __int__(self) -> int:
        self._check_scalar("int")
        return int(self._value.reshape(()))

    def __float__(self) -> float:
        self._check_scalar("float")
        return float(self._value.reshape(()))

    def __complex__(self) -> complex:
        self._check_scalar("complex")
        return complex(self._value.reshape(()))

    def __index__(self) -> int:
        if self.shape or self.dtype.kind not in "iub":
            raise TypeError(f"only integer scalar arrays can be converted to a scalar index "
                            f"(got an array of shape {self.shape} and dtype {self.dtype})")
        return operator.index(self._value[()])

    def __hash__(self) -> int:
        raise TypeError("unhashable type: 'Array'")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles the host data; unpickling puts it on the default device."""
        return (_rebuild_array, (np.array(self._value), self.weak_type))

    def __copy__(self) -> Array:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Array:
        return self._copy()

    def _copy(self) -> Array:
        """A new Array with its own buffers (same sharding and committedness)."""
        self._check_if_deleted("copy")
        impl, = shard_impls([self._arr], [self.sharding], copy_semantics=[ALWAYS_COPY],
                            committed=[self.committed], what="copy")
        return Array(impl)


#: jaxlib platform -> DLPack device type (kDLCPU=1, kDLCUDA=2, kDLROCM=10)
_DLPACK_DEVICE_TYPES: dict[str, int] = {"cpu": 1, "cuda": 2, "gpu": 2, "rocm": 10}


def _rebuild_array(value: np.ndarray[Any, Any], weak_type: bool) -> Array:
    return place_host_value(value, None, weak_type=weak_type, committed=False)


def place_host_value(value: Any, sharding: Any, *, weak_type: bool = False,
                     committed: bool = False) -> Array:
    """A host value as an Array on ``sharding`` (the default device when None)."""
    if sharding is None:
        sharding = single_device_sharding(default_device())
    return Array(put_host_value(value, sharding, committed=committed, weak_type=weak_type))


def wrap_impl(impl: ArrayImpl) -> Array:
    """An ``Array`` around an ``ArrayImpl`` whose ``aval`` is a ShapedArray."""
    return Array(impl)


def is_array_impl(x: object) -> bool:
    return type(x) is ArrayImplClass


def _aval_of_array(x: Array) -> ShapedArray:
    aval: ShapedArray = x._arr.aval
    if explicit_meshes_made[0]:
        # Laid out over a mesh's Explicit axes: the sharding is in the type.
        sharding = type_sharding_of(x._arr._sharding, aval.ndim)
        if sharding is not None:
            aval = aval.update(sharding=sharding)
    if spaces_used[0]:
        # Data in pinned host memory has a host type (float32<host>[4]).
        space = kind_to_space(x._arr._sharding.memory_kind)
        if aval.memory_space is not space:
            aval = aval.update(memory_space=space)
    return aval


_avals.aval_handlers[Array] = _aval_of_array



def wrap_results(tree: Any, impls: Sequence[ArrayImpl]) -> Any:
    """The ``ArrayImpl``s a cached call made, as ``Array``s in ``tree`` (a
    ``PyTreeDef``; ``None``: ``impls`` is one bare result). jaxlib's C++ jit
    path calls this once per cached call, hence ``Array.__init__`` inlined."""
    if tree is None:
        x: Array = _new_object(Array)
        x._arr = impls[0]
        x._npy = None
        x._dispatch_key = None
        return x
    arrays = []
    for impl in impls:
        x = _new_object(Array)
        x._arr = impl
        x._npy = None
        x._dispatch_key = None
        arrays.append(x)
    return tree.unflatten(arrays)


_new_object = object.__new__
