"""Shardings: how an array's data is laid out over devices.

lamina's shardings subclass jaxlib's C++ ``SingleDeviceSharding`` and
``GSPMDSharding`` so the C++ runtime (``batched_device_put``, result handlers,
the C++ jit cache) accepts them. The runtime reads only ``memory_kind``,
``_to_xla_hlo_sharding(ndim)``, ``_internal_device_list`` and
``__eq__``/``__hash__``; everything else (index maps, addressability,
printing) is defined here in Python. jaxlib's own C++ ``NamedSharding`` is
never constructed (it imports jax and can deadlock), and jaxlib's classes are
never patched.

nanobind allows a single base class, so ``NamedSharding``, ``GSPMDSharding``
and ``PmapSharding`` share code through one private base
(``_HloBackedSharding``) and ``SingleDeviceSharding`` reuses the same module
functions directly.
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import (
    Device,
    DeviceList,
    DeviceListClass,
    HloSharding,
    _jax,
    xc,
)
from lamina_mlir_lowering.sharding import MeshShape, ShardingSpec
from lamina_tracing_core.memory import spaces_used
from lamina_tracing_core.mesh import (
    AbstractDevice,
    AbstractMesh,
    AxisType,
    TypeSharding,
    partition,
    pop_abstract_mesh,
    push_abstract_mesh,
    type_sharding,
)

Index: TypeAlias = tuple[slice | int, ...]
Shape: TypeAlias = tuple[int, ...]


class ShardingError(ValueError):
    """A sharding that does not fit its mesh or the array it is applied to."""


class DuplicateSpecError(ShardingError):
    """A PartitionSpec that uses one mesh axis for two array dimensions."""


# --- PartitionSpec ---------------------------------------------------------
class _UnconstrainedPartition:
    """The ``PartitionSpec.UNCONSTRAINED`` marker: let the compiler choose."""

    _instance: _UnconstrainedPartition | None = None

    def __new__(cls) -> _UnconstrainedPartition:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCONSTRAINED"

    def __reduce__(self) -> str:
        return "UNCONSTRAINED"


UNCONSTRAINED = _UnconstrainedPartition()

PartitionEntry: TypeAlias = "str | tuple[str, ...] | None | _UnconstrainedPartition"


class PartitionSpec(tuple[Any, ...]):
    """``PartitionSpec('x', None, ('y', 'z'))``: for each array dimension, the
    mesh axes it is split over (``None``: not split; a tuple: split over
    several axes, major first; ``UNCONSTRAINED``: the compiler chooses).

    Dimensions beyond the spec's length are not split. Compares like a tuple.
    """

    UNCONSTRAINED = UNCONSTRAINED

    def __new__(cls, *partitions: Any) -> PartitionSpec:
        for i, part in enumerate(partitions):
            _check_partition_entry(i, part, partitions)
        return super().__new__(cls, partitions)

    def __repr__(self) -> str:
        return f"P{tuple.__repr__(self)}"  # JAX 0.10's form

    def __reduce__(self) -> tuple[Any, ...]:
        return (PartitionSpec, tuple(self))

    def _normalized_dims(self) -> tuple[tuple[str, ...] | None, ...]:
        """Each entry as a tuple of axis names (``None`` for unconstrained)."""
        return tuple(_entry_axes(p) for p in self)


P = PartitionSpec


def _check_partition_entry(i: int, part: Any, spec: tuple[Any, ...]) -> None:
    if part is None or part is UNCONSTRAINED or isinstance(part, str):
        return
    if isinstance(part, tuple) and all(isinstance(a, str) for a in part):
        return
    raise TypeError(
        f"PartitionSpec entry {i} is {part!r}: each entry must be None, a mesh axis name "
        f"(str), a tuple of axis names or PartitionSpec.UNCONSTRAINED (spec {spec!r})")


def _entry_axes(part: Any) -> tuple[str, ...] | None:
    if part is UNCONSTRAINED:
        return None
    if part is None:
        return ()
    if isinstance(part, str):
        return (part,)
    return tuple(part)


# --- Mesh ------------------------------------------------------------------
class _MeshStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Mesh] = []


_mesh_stack = _MeshStack()


class Mesh:
    """An n-dimensional array of devices with a name per axis.

    ``with mesh:`` makes it the thread's current mesh, which bare
    ``PartitionSpec``s (``device_put(x, P('x'))``) resolve against.
    """

    def __init__(self, devices: np.ndarray[Any, Any] | Sequence[Any],
                 axis_names: str | Sequence[str],
                 axis_types: AxisType | Sequence[AxisType] | None = None):
        arr = np.array(devices, dtype=object) if not isinstance(devices, np.ndarray) \
            else devices
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if arr.ndim != len(names):
            raise ShardingError(
                f"Mesh: devices has {arr.ndim} dimensions {arr.shape} but {len(names)} axis "
                f"names {names} were given")
        if len(set(names)) != len(names):
            raise ShardingError(f"Mesh: axis names must be distinct, got {names}")
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"Mesh: axis names must be str, got {n!r}")
        flat = tuple(arr.flat)
        if len({id(d) for d in flat}) != len(flat):
            raise ShardingError("Mesh: a device appears more than once")
        self.devices: np.ndarray[Any, Any] = arr.copy()
        self.devices.flags.writeable = False
        self.axis_names: tuple[str, ...] = names
        self._flat_devices = flat
        #: The mesh without its devices (axis names, sizes and types).
        self.abstract_mesh = AbstractMesh(arr.shape, names, axis_types,
                                          abstract_device=_abstract_device(flat))
        self.axis_types: tuple[AxisType, ...] = self.abstract_mesh.axis_types
        self._key = (tuple(d.id for d in flat), tuple(id(d.client) for d in flat[:1]),
                     names, arr.shape, self.axis_types)
        self._hash = hash(self._key)
        if self.abstract_mesh.explicit_axes:
            _explicit_meshes[self.abstract_mesh] = self

    # shape and devices
    @property
    def shape(self) -> dict[str, int]:
        """``{'x': 2, 'y': 4}``, in axis order."""
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return tuple(self.devices.shape)

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def device_ids(self) -> np.ndarray[Any, Any]:
        return np.array([d.id for d in self._flat_devices], dtype=np.int64).reshape(
            self.devices.shape)

    @property
    def _internal_device_list(self) -> DeviceList:
        return _cached_device_list(self._flat_devices)

    @property
    def local_devices(self) -> list[Device]:
        return [d for d in self._flat_devices if _is_addressable(d)]

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self._flat_devices}) > 1

    # context manager
    def __enter__(self) -> Mesh:
        warnings.warn("`with mesh:` context manager has been deprecated. Please use `with "
                      "jax.set_mesh(mesh):` instead.", DeprecationWarning, stacklevel=2)
        _mesh_stack.stack.append(self)
        push_abstract_mesh(self.abstract_mesh)
        return self

    def __exit__(self, *exc: object) -> None:
        popped = _mesh_stack.stack.pop()
        pop_abstract_mesh()
        assert popped is self, "Mesh contexts exited out of order"

    # value semantics
    def __eq__(self, other: object) -> bool:
        if self is other:  # the common case: jit's fast path compares arguments' meshes
            return True
        if not isinstance(other, Mesh):
            return NotImplemented
        return self._key == other._key and all(
            a is b for a, b in zip(self._flat_devices, other._flat_devices))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        """``Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), axis_types=(Auto, Auto))``,
        as JAX's."""
        if not self.axis_names:
            return "Mesh(axis_sizes=(), axis_names=())"
        return (f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names!r}, "
                f"axis_types={self.axis_types})")

    def __str__(self) -> str:
        """``Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))`` (how jaxprs and
        messages show it), as JAX's."""
        if not self.axis_names:
            return "Mesh()"
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        return f"Mesh({axes}, axis_types={self.axis_types})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Mesh, (self.devices, self.axis_names, self.axis_types))

    @property
    def explicit_axes(self) -> tuple[str, ...]:
        return self.abstract_mesh.explicit_axes

    @property
    def auto_axes(self) -> tuple[str, ...]:
        return self.abstract_mesh.auto_axes

    @property
    def manual_axes(self) -> tuple[str, ...]:
        return self.abstract_mesh.manual_axes


def _abstract_device(devices: tuple[Any, ...]) -> AbstractDevice | None:
    """What an abstract mesh records of ``devices`` (from the first): its kind,
    platform and core count (TPU and GPU devices only, as JAX's)."""
    if not devices or devices[0] is None:
        return None
    d = devices[0]
    cores = getattr(d, "num_cores", None) if d.platform == "tpu" else \
        getattr(d, "core_count", None) if d.platform == "gpu" else None
    return AbstractDevice(d.device_kind, cores, d.platform)


#: The latest concrete mesh of each abstract mesh with Explicit axes: where a
#: result whose type is sharded over that abstract mesh is laid out.
_explicit_meshes: weakref.WeakValueDictionary[AbstractMesh, Mesh] = \
    weakref.WeakValueDictionary()


def get_current_mesh() -> Mesh | None:
    """The innermost ``with mesh:`` / ``set_mesh`` of this thread, or None."""
    return _mesh_stack.stack[-1] if _mesh_stack.stack else None


def concrete_mesh(abstract: AbstractMesh) -> Mesh | None:
    """The concrete mesh a type sharded over ``abstract`` lives on: the current
    ``set_mesh`` one if it matches, else the latest mesh made with that shape."""
    current = get_current_mesh()
    if current is not None and current.abstract_mesh == abstract:
        return current
    return _explicit_meshes.get(abstract)


class _ContextMesh(threading.local):
    """The mesh of this thread's innermost ``set_mesh`` (JAX's context mesh):
    a computation none of whose inputs is committed runs on its devices, and
    its results are committed there. ``with mesh:`` does not set it."""

    def __init__(self) -> None:
        self.mesh: Mesh | None = None


context_mesh_state = _ContextMesh()
#: Called with the new context mesh (None: none) whenever it changes: jit's
#: C++ fast path keys its cache on it.
context_mesh_hooks: list[Callable[[Mesh | None], None]] = []


def context_mesh() -> Mesh | None:
    """The mesh computations without committed inputs run on (``set_mesh``), or None."""
    return context_mesh_state.mesh


def _set_context_mesh(mesh: Mesh | None) -> None:
    context_mesh_state.mesh = mesh
    for hook in context_mesh_hooks:
        hook(mesh)


class set_mesh:  # noqa: N801  (JAX's name: a function-like context manager)
    """Makes ``mesh`` the current mesh: bare ``PartitionSpec``s resolve against
    it, ``shard_map`` and ``reshard`` use it, and tracing sees its abstract mesh
    (its Explicit axes put shardings in types). Takes effect at once (a
    statement sets it for the thread); as a context manager, it is undone at
    the end of the block."""

    def __init__(self, mesh: Mesh):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"set_mesh: expected a Mesh, got {mesh!r}")
        self.mesh = mesh
        self._previous = context_mesh_state.mesh
        _mesh_stack.stack.append(mesh)
        push_abstract_mesh(mesh.abstract_mesh)
        _set_context_mesh(mesh)

    def __enter__(self) -> Mesh:
        return self.mesh

    def __exit__(self, *exc: object) -> None:
        popped = _mesh_stack.stack.pop()
        pop_abstract_mesh()
        _set_context_mesh(self._previous)
        assert popped is self.mesh, "set_mesh blocks exited out of order"


def get_mesh() -> Mesh | None:
    """The current concrete mesh (``set_mesh``), or None."""
    return get_current_mesh()


def type_sharding_of(sharding: Any, ndim: int) -> TypeSharding | None:
    """The sharding a value laid out by ``sharding`` has in its type: the
    Explicit axes of a NamedSharding's mesh (None for any other)."""
    if type(sharding) is not NamedSharding or not sharding.mesh.abstract_mesh.explicit_axes:
        return None
    cache = sharding._type_shardings
    if ndim not in cache:
        cache[ndim] = type_sharding(sharding.mesh.abstract_mesh,
                                    sharding.spec._normalized_dims(), ndim)
    result: TypeSharding | None = cache[ndim]
    return result


def named_sharding_of_type(ts: TypeSharding | None) -> NamedSharding | None:
    """The layout a value whose type is sharded by ``ts`` has: a
    ``NamedSharding`` over the concrete mesh of ``ts``'s abstract mesh, its
    spec one entry per dimension (None where the type is not split), as JAX
    lays such values out; None when ``ts`` is None or no concrete mesh is known."""
    if ts is None:
        return None
    mesh = concrete_mesh(ts.mesh)
    if mesh is None:
        return None
    return NamedSharding(mesh, PartitionSpec(*map(partition, ts.spec)))


def _is_addressable(device: Device) -> bool:
    return bool(device.process_index == device.client.process_index())


@functools.lru_cache(maxsize=1024)
def _cached_device_list(devices: tuple[Device, ...]) -> DeviceList:
    return DeviceListClass(devices)


def _as_device_list(devices: Any) -> DeviceList:
    if isinstance(devices, DeviceListClass):
        return devices
    flat = tuple(np.asarray(devices, dtype=object).flat) if isinstance(devices, np.ndarray) \
        else tuple(devices)
    if not flat:
        raise ShardingError("a sharding needs at least one device")
    return _cached_device_list(flat)


# --- index maps computed from an HloSharding ---------------------------------
_REPLICATED = xc.OpSharding.Type.REPLICATED


@functools.lru_cache(maxsize=4096)
def _hlo_indices(hlo: HloSharding, num_devices: int, shape: Shape) -> tuple[Index, ...]:
    """The index of every device position (in device-list order) under ``hlo``."""
    full: Index = (slice(None),) * len(shape)
    if hlo.is_replicated() or hlo.is_maximal():
        return (full,) * num_devices
    if hlo.is_manual() or not hlo.is_tiled():
        raise ShardingError(f"cannot compute array indices for sharding {hlo}")
    dims = list(hlo.tile_assignment_dimensions())
    extra = int(hlo.replicate_on_last_tile_dim()) + len(hlo.subgroup_types())
    data_rank = len(dims) - extra
    if data_rank != len(shape):
        raise ShardingError(
            f"sharding {hlo} is for arrays of rank {data_rank}, but the shape is {shape}")
    tiles = np.asarray(hlo.tile_assignment_devices(), dtype=np.int64).reshape(dims)
    out: list[Index | None] = [None] * num_devices
    for coords in np.ndindex(*dims):
        position = int(tiles[coords])
        if position >= num_devices:
            raise ShardingError(f"sharding {hlo} names device position {position} but only "
                                f"{num_devices} devices were given")
        out[position] = tuple(_tile_slice(shape[d], dims[d], coords[d]) for d in range(data_rank))
    missing = [i for i, idx in enumerate(out) if idx is None]
    if missing:
        raise ShardingError(f"sharding {hlo} leaves device positions {missing} without data")
    return tuple(idx for idx in out if idx is not None)


def _tile_slice(size: int, tiles: int, i: int) -> slice:
    if tiles == 1:
        return slice(None)
    chunk = -(-size // tiles)
    return slice(i * chunk, min((i + 1) * chunk, size))


def _tiles_per_dim(hlo: HloSharding, ndim: int) -> list[int]:
    if hlo.is_replicated() or hlo.is_maximal() or not hlo.is_tiled():
        return [1] * ndim
    return list(hlo.tile_assignment_dimensions())[:ndim]


# --- behaviour shared by every lamina sharding --------------------------------
# nanobind classes take one base only, so each sharding class below defines
# these members by calling the functions here instead of sharing a mixin.
# Shardings are immutable, so derived facts are computed once per instance and
# kept in its __dict__ (device_put of many leaves asks for them per leaf).
def _memo(self: Any, key: str, compute: Any) -> Any:
    cache = self.__dict__
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = compute()
        return value


def _device_assignment(self: Any) -> tuple[Device, ...]:
    """The devices in the sharding's order (positions of its HloSharding)."""
    result: tuple[Device, ...] = _memo(self, "_c_devices",
                                       lambda: tuple(self._internal_device_list))
    return result


def _device_set(self: Any) -> set[Device]:
    return set(_device_assignment(self))


def _num_devices(self: Any) -> int:
    return len(_device_assignment(self))


def _addressable_devices(self: Any) -> set[Device]:
    return set(_addressable_device_assignment(self))


def _addressable_device_assignment(self: Any) -> tuple[Device, ...]:
    result: tuple[Device, ...] = _memo(
        self, "_c_addressable",
        lambda: tuple(d for d in _device_assignment(self) if _is_addressable(d)))
    return result


def _is_fully_addressable(self: Any) -> bool:
    return bool(self._internal_device_list.is_fully_addressable)


def _memory_kind(self: Any) -> str:
    return str(self._memory_kind)


def _note_memory_kind(kind: str | None) -> None:
    """Records that data may now live in host memory (a sharding names
    ``pinned_host``): from then on arrays' types say their memory space and
    tracing applies the memory-space rule (``memory.spaces_used``)."""
    if kind == "pinned_host":
        spaces_used[0] = True


def _devices_indices_map(self: Any, shape: Shape) -> dict[Device, Index]:
    """``{device: index}``: the slice of a ``shape`` array each device holds."""
    indices = self._indices(tuple(shape))
    return dict(zip(self._internal_device_list, indices))


def _addressable_devices_indices_map(self: Any, shape: Shape) -> dict[Device, Index]:
    return {d: i for d, i in self.devices_indices_map(shape).items() if _is_addressable(d)}


def _hlo_based_indices(self: Any, shape: Shape) -> tuple[Index, ...]:
    self.check_compatible_shape(shape)
    return _hlo_indices(self._to_xla_hlo_sharding(len(shape)), self.num_devices, shape)


def _check_compatible_shape(self: Any, shape: Shape) -> None:
    """Raises :class:`ShardingError` unless every split dimension divides evenly."""
    hlo = self._to_xla_hlo_sharding(len(shape))
    tiles = _tiles_per_dim(hlo, len(shape))
    for dim, (size, n) in enumerate(zip(shape, tiles)):
        if size % n:
            raise ShardingError(
                f"Sharding {self!r} implies that array axis {dim} is partitioned {n} times, "
                f"but the dimension size is {size} (full shape: {tuple(shape)}, per-dimension "
                f"tiling factors: {tiles} should evenly divide the shape)")


def _shard_shape(self: Any, shape: Shape) -> Shape:
    """The shape of each shard of a ``shape`` array."""
    shape = tuple(shape)
    self.check_compatible_shape(shape)
    tiles = _tiles_per_dim(self._to_xla_hlo_sharding(len(shape)), len(shape))
    return tuple(s // n for s, n in zip(shape, tiles))


def _is_fully_replicated_via_hlo(self: Any) -> bool:
    return bool(_memo(self, "_c_replicated",
                      lambda: self._to_xla_hlo_sharding(self._min_rank).is_replicated()))


def _is_equivalent_to(self: Any, other: Any, ndim: int) -> bool:
    """Same devices (in the same order), same data placement, same memory kind."""
    if not is_sharding(other):
        return False
    if self._memory_kind != other._memory_kind:
        return False
    if _drops_mapped_axis(self) != _drops_mapped_axis(other):
        return False  # classic pmap shards lack the mapped axis: different buffers
    if self.num_devices == 1 and other.num_devices == 1:
        return bool(self._device_assignment[0] == other._device_assignment[0])
    return bool(self._internal_device_list == other._internal_device_list
                and self._to_xla_hlo_sharding(ndim) == other._to_xla_hlo_sharding(ndim))


def _drops_mapped_axis(sharding: Any) -> bool:
    """True for a classic (rank-reducing) ``PmapSharding``."""
    spec = getattr(sharding, "sharding_spec", None)
    return isinstance(spec, PmapShardingSpec) and not spec.chunked and \
        spec.sharded_axis is not None


def _hlo_sharding_string(self: Any, ndim: int) -> str:
    """The sharding in HLO's iota form, e.g. ``{devices=[4,2]<=[8]}``."""
    return str(self._to_xla_hlo_sharding(ndim))


def _to_sharding_spec(self: Any, ndim: int, device_order: Sequence[Device] | None = None) -> Any:
    """The lowering layer's device-free ``ShardingSpec`` for a rank-``ndim`` value.

    The mesh's ``device_ids`` are *positions* in ``device_order`` (the
    program's device assignment; by default the sharding's own device list),
    i.e. XLA's logical device ids, and ``None`` when they are in iota order.
    A NamedSharding keeps its mesh axes; any other sharding gets a mesh with
    one axis per split dimension (``_d0``, ``_d1``, ...) plus replication axes.
    ``UNCONSTRAINED`` dimensions become unsplit (the spec cannot say "open").
    """
    own = self._device_assignment
    order = own if device_order is None else tuple(device_order)
    position = {d: i for i, d in enumerate(order)}
    missing = [d for d in own if d not in position]
    if missing:
        raise ShardingError(f"{self!r} uses devices {missing} that are not among the "
                            f"program's devices {list(order)}")
    if isinstance(self, NamedSharding):
        self._to_xla_hlo_sharding(ndim)  # checks the rank
        ids = tuple(position[d] for d in self.mesh._flat_devices)
        mesh = MeshShape(self.mesh.axis_names, self.mesh.axis_sizes, _ids_or_none(ids))
        spec_dims = [(_entry_axes(p) or ()) for p in self.spec]
        return ShardingSpec(mesh, tuple(spec_dims) + ((),) * (ndim - len(spec_dims)))
    hlo = self._to_xla_hlo_sharding(ndim)
    if hlo.is_replicated() or hlo.is_maximal() or not hlo.is_tiled():
        ids = tuple(position[d] for d in own)
        return ShardingSpec(MeshShape(("_r",), (len(own),), _ids_or_none(ids)), ((),) * ndim)
    dims = list(hlo.tile_assignment_dimensions())
    tiles = np.asarray(hlo.tile_assignment_devices(), dtype=np.int64).reshape(dims)
    names = [f"_d{i}" for i in range(ndim)] + [f"_r{j}" for j in range(len(dims) - ndim)]
    ids = tuple(position[own[int(p)]] for p in tiles.flat)
    mesh = MeshShape(tuple(names), tuple(dims), _ids_or_none(ids))
    return ShardingSpec(mesh, tuple((names[i],) if dims[i] > 1 else () for i in range(ndim)))


def _ids_or_none(ids: tuple[int, ...]) -> tuple[int, ...] | None:
    return None if ids == tuple(range(len(ids))) else ids


# --- the sharding classes ------------------------------------------------------
class _SharedShardingMethods:
    """What every lamina sharding class has. nanobind classes accept exactly
    one base ("nb_type_init(): invalid number of bases"), so this cannot be a
    mixin: :func:`_with_shared_methods` copies its members onto each class."""

    @property
    def _device_assignment(self) -> tuple[Device, ...]:
        return _device_assignment(self)

    @property
    def device_set(self) -> set[Device]:
        return _device_set(self)

    @property
    def num_devices(self) -> int:
        return _num_devices(self)

    @property
    def addressable_devices(self) -> set[Device]:
        return _addressable_devices(self)

    @property
    def _addressable_device_assignment(self) -> tuple[Device, ...]:
        return _addressable_device_assignment(self)

    @property
    def is_fully_addressable(self) -> bool:
        return _is_fully_addressable(self)

    @property
    def memory_kind(self) -> str:
        return _memory_kind(self)

    def devices_indices_map(self, shape: Shape) -> dict[Device, Index]:
        return _devices_indices_map(self, shape)

    def addressable_devices_indices_map(self, shape: Shape) -> dict[Device, Index]:
        return _addressable_devices_indices_map(self, shape)

    def is_equivalent_to(self, other: object, ndim: int) -> bool:
        return _is_equivalent_to(self, other, ndim)

    def hlo_sharding_string(self, ndim: int) -> str:
        return _hlo_sharding_string(self, ndim)

    def to_sharding_spec(self, ndim: int, device_order: Sequence[Device] | None = None) -> Any:
        return _to_sharding_spec(self, ndim, device_order)


def _with_shared_methods(cls: type[Any]) -> type[Any]:
    """Copies :class:`_SharedShardingMethods`'s members onto ``cls`` (members
    ``cls`` defines itself win)."""
    for name, member in vars(_SharedShardingMethods).items():
        if not name.startswith("__") and name not in vars(cls):
            setattr(cls, name, member)
    return cls


#: the interned SingleDeviceShardings, by (class, device, memory kind)
_interned_single: weakref.WeakValueDictionary[tuple[Any, ...], Any] = (
    weakref.WeakValueDictionary())
_intern_lock = threading.Lock()


@_with_shared_methods
class SingleDeviceSharding(_jax.SingleDeviceSharding):  # type: ignore[misc]
    """All of the array on one device.

    Instances are interned: equal shardings are one object, so hashing and
    comparing them is by identity, in C. jaxlib's C++ dispatch hashes every
    argument's sharding on every cached call, and its own C++ hash only
    applies to jaxlib's exact classes, not to lamina's subclasses.
    """

    _min_rank = 0

    def __new__(cls, device: Device, *, memory_kind: str | None = None) -> SingleDeviceSharding:
        # The key uses the memory kind as jaxlib canonicalizes it (None becomes
        # the device's default), so the base is initialized here first.
        _note_memory_kind(memory_kind)
        obj: SingleDeviceSharding = super().__new__(cls, device, memory_kind)
        _jax.SingleDeviceSharding.__init__(obj, device, memory_kind)
        key = (cls, device, obj._memory_kind)
        with _intern_lock:  # two threads must not both register one key
            hit: SingleDeviceSharding | None = _interned_single.get(key)
            if hit is not None:
                return hit
            _interned_single[key] = obj
        return obj

    def __init__(self, device: Device, *, memory_kind: str | None = None):
        pass  # initialized (or found) by __new__

    # identity, in C: instances are interned
    __hash__ = object.__hash__
    __eq__ = object.__eq__

    def _to_xla_hlo_sharding(self, ndim: int) -> HloSharding:
        return _REPLICATED_HLO

    def _indices(self, shape: Shape) -> tuple[Index, ...]:
        return ((slice(None),) * len(shape),)

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def with_memory_kind(self, kind: str | None) -> SingleDeviceSharding:
        return SingleDeviceSharding(self._device, memory_kind=kind)

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self._memory_kind})"

    def check_compatible_shape(self, shape: Shape) -> None:
        pass

    def shard_shape(self, shape: Shape) -> Shape:
        return tuple(shape)


_REPLICATED_HLO: HloSharding = xc.HloSharding.replicate()


@_with_shared_methods
class _HloBackedSharding(_jax.GSPMDSharding):  # type: ignore[misc]
    """The private base of the multi-device shardings (a GSPMDSharding to C++)."""

    _min_rank = 0

    def _indices(self, shape: Shape) -> tuple[Index, ...]:
        return _hlo_based_indices(self, shape)

    @property
    def is_fully_replicated(self) -> bool:
        return _is_fully_replicated_via_hlo(self)

    def check_compatible_shape(self, shape: Shape) -> None:
        _check_compatible_shape(self, shape)

    def shard_shape(self, shape: Shape) -> Shape:
        return _shard_shape(self, shape)


class GSPMDSharding(_HloBackedSharding):
    """A device list plus an explicit HloSharding (what executables report)."""

    def __init__(self, devices: Any, hlo_sharding: Any, *, memory_kind: str | None = None):
        hlo = _as_hlo_sharding(hlo_sharding)
        dl = _as_device_list(devices)
        _check_hlo_fits_devices(hlo, len(dl))
        _note_memory_kind(memory_kind)
        super().__init__(dl, hlo, memory_kind)
        self._min_rank = 0 if not hlo.is_tiled() else (
            len(hlo.tile_assignment_dimensions()) - int(hlo.replicate_on_last_tile_dim())
            - len(hlo.subgroup_types()))
        self._hash = hash((dl, hlo, self._memory_kind))

    @classmethod
    def get_replicated(cls, devices: Any, *, memory_kind: str | None = None) -> GSPMDSharding:
        return cls(devices, _REPLICATED_HLO, memory_kind=memory_kind)

    def _to_xla_hlo_sharding(self, ndim: int) -> HloSharding:
        return self._hlo_sharding

    def with_memory_kind(self, kind: str | None) -> GSPMDSharding:
        return GSPMDSharding(self._internal_device_list, self._hlo_sharding, memory_kind=kind)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (type(other) is GSPMDSharding
                and self._internal_device_list == other._internal_device_list
                and self._hlo_sharding == other._hlo_sharding
                and self._memory_kind == other._memory_kind)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"GSPMDSharding({self._hlo_sharding}, memory_kind={self._memory_kind})"


def _as_hlo_sharding(value: Any) -> HloSharding:
    if isinstance(value, xc.HloSharding):
        return value
    if isinstance(value, xc.OpSharding):
        return xc.HloSharding.from_proto(value)
    if isinstance(value, str):
        return xc.HloSharding.from_string(value)
    raise TypeError(f"expected an HloSharding, OpSharding or HLO sharding string, got {value!r}")


def _check_hlo_fits_devices(hlo: HloSharding, num_devices: int) -> None:
    if hlo.is_tiled():
        needed = max(hlo.tile_assignment_devices()) + 1
        if needed > num_devices or len(hlo.tile_assignment_devices()) != num_devices:
            raise ShardingError(
                f"HLO sharding {hlo} needs {len(hlo.tile_assignment_devices())} devices but "
                f"{num_devices} were given")


class NamedSharding(_HloBackedSharding):
    """``NamedSharding(mesh, PartitionSpec('x', None))``: array dimensions split
    over named mesh axes."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec | Sequence[Any] | None = None, *,
                 memory_kind: str | None = None):
        if not isinstance(mesh, Mesh):
            raise TypeError(f"NamedSharding: mesh must be a lamina Mesh, got {mesh!r}")
        spec = PartitionSpec() if spec is None else (
            spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec))
        _check_spec_against_mesh(spec, mesh)
        self.mesh = mesh
        self.spec = spec
        self._min_rank = len(spec)
        self._type_shardings: dict[int, TypeSharding | None] = {}
        _note_memory_kind(memory_kind)
        super().__init__(mesh._internal_device_list, self._to_xla_hlo_sharding(len(spec)),
                         memory_kind)
        self._hash = hash((mesh, spec, self._memory_kind))

    def _to_xla_hlo_sharding(self, ndim: int) -> HloSharding:
        if ndim < len(self.spec):
            raise ShardingError(
                f"Sharding {self!r} is only valid for values of rank at least "
                f"{len(self.spec)}, but was applied to a value of rank {ndim}")
        return _named_hlo(self.mesh.axis_names, self.mesh.axis_sizes,
                          self.spec._normalized_dims(), ndim)

    def with_memory_kind(self, kind: str | None) -> NamedSharding:
        return NamedSharding(self.mesh, self.spec, memory_kind=kind)

    def with_spec(self, spec: PartitionSpec | Sequence[Any]) -> NamedSharding:
        return NamedSharding(self.mesh, spec, memory_kind=self._memory_kind)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (type(other) is NamedSharding and self.mesh == other.mesh
                and self.spec == other.spec and self._memory_kind == other._memory_kind)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return (f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}, "
                f"memory_kind={self._memory_kind})")


def _check_spec_against_mesh(spec: PartitionSpec, mesh: Mesh) -> None:
    seen: set[str] = set()
    for part in spec:
        axes = _entry_axes(part) or ()
        for axis in axes:
            if axis not in mesh.axis_names:
                raise ShardingError(
                    f"Resource axis: {axis} of {spec!r} is not found in mesh: "
                    f"{mesh.axis_names}.")
            if axis in seen:
                raise DuplicateSpecError(
                    f"A single NamedSharding spec specification can map every mesh axis to "
                    f"at most one positional dimension, but {spec!r} has duplicate entries "
                    f"for `{axis}`")
            seen.add(axis)


@functools.lru_cache(maxsize=4096)
def _named_hlo(names: tuple[str, ...], sizes: tuple[int, ...],
               spec: tuple[tuple[str, ...] | None, ...], ndim: int) -> HloSharding:
    size_of = dict(zip(names, sizes))
    tile_dims: list[int] = []
    used: list[str] = []
    for d in range(ndim):
        axes = (spec[d] if d < len(spec) else ()) or ()
        tile_dims.append(math.prod(size_of[a] for a in axes))
        used.extend(axes)
    unused = [a for a in names if a not in used]
    replicas = math.prod(size_of[a] for a in unused)
    if all(t == 1 for t in tile_dims):
        return _REPLICATED_HLO
    perm = [names.index(a) for a in used + unused]
    dims = tile_dims + ([replicas] if replicas > 1 else [])
    subgroups = [_REPLICATED] if replicas > 1 else []
    return xc.HloSharding.iota_tile(dims, list(sizes), perm, subgroups)


@dataclass(frozen=True)
class PmapShardingSpec:
    """How ``pmap`` lays a stacked array over its devices.

    ``sharded_axis``: the axis whose entries go one per device (``None``: every
    device holds the whole array). ``chunked``: each shard keeps the array's
    rank (``[1, 100]``, the default, an ordinary XLA sharding) rather than
    dropping the axis (``[100]``, JAX's older "unstacked" form).
    """

    num_shards: int
    sharded_axis: int | None = 0
    chunked: bool = True


class PmapSharding(_HloBackedSharding):
    """The sharding of ``pmap``'s inputs and outputs."""

    def __init__(self, devices: Any, sharding_spec: PmapShardingSpec, *,
                 memory_kind: str | None = None):
        dl = _as_device_list(devices)
        if sharding_spec.sharded_axis is not None and sharding_spec.num_shards != len(dl):
            raise ShardingError(f"PmapSharding: {sharding_spec.num_shards} shards need as many "
                                f"devices, got {len(dl)}")
        self.sharding_spec = sharding_spec
        self._min_rank = 0 if sharding_spec.sharded_axis is None else \
            sharding_spec.sharded_axis + 1
        _note_memory_kind(memory_kind)
        super().__init__(dl, self._to_xla_hlo_sharding(self._min_rank), memory_kind)
        self._hash = hash((dl, sharding_spec, self._memory_kind))

    @classmethod
    def default(cls, shape: Shape, sharded_dim: int | None = 0, devices: Any = None, *,
                chunked: bool = True) -> PmapSharding:
        """Shards ``shape``'s ``sharded_dim`` one entry per device (the first
        ``shape[sharded_dim]`` local devices unless ``devices`` is given)."""
        if sharded_dim is None:
            devs = devices if devices is not None else backends.local_devices()
            return cls(devs, PmapShardingSpec(len(_as_device_list(devs)), None, chunked))
        n = shape[sharded_dim]
        devs = devices if devices is not None else backends.local_devices()[:n]
        return cls(devs, PmapShardingSpec(n, sharded_dim, chunked))

    @property
    def devices(self) -> np.ndarray[Any, Any]:
        return np.array(list(self._internal_device_list), dtype=object)

    def _to_xla_hlo_sharding(self, ndim: int) -> HloSharding:
        axis = self.sharding_spec.sharded_axis
        if axis is None or self.sharding_spec.num_shards == 1:
            return _REPLICATED_HLO
        if ndim <= axis:
            raise ShardingError(f"{self!r} shards axis {axis}, but was applied to a value "
                                f"of rank {ndim}")
        dims = [1] * ndim
        dims[axis] = self.sharding_spec.num_shards
        return xc.HloSharding.iota_tile(dims)

    def _indices(self, shape: Shape) -> tuple[Index, ...]:
        spec = self.sharding_spec
        if spec.chunked or spec.sharded_axis is None:
            return _hlo_based_indices(self, shape)
        self.check_compatible_shape(shape)
        full = [slice(None)] * len(shape)
        out: list[Index] = []
        for i in range(spec.num_shards):
            idx: list[slice | int] = list(full)
            idx[spec.sharded_axis] = i
            out.append(tuple(idx))
        return tuple(out)

    def check_compatible_shape(self, shape: Shape) -> None:
        spec = self.sharding_spec
        if spec.sharded_axis is None:
            return
        if len(shape) <= spec.sharded_axis:
            raise ShardingError(f"{self!r} shards axis {spec.sharded_axis}, but the shape is "
                                f"{tuple(shape)}")
        size = shape[spec.sharded_axis]
        if (size != spec.num_shards) if not spec.chunked else (size % spec.num_shards):
            raise ShardingError(
                f"{self!r} splits axis {spec.sharded_axis} over {spec.num_shards} devices, "
                f"but its size is {size} (full shape: {tuple(shape)})")

    def shard_shape(self, shape: Shape) -> Shape:
        shape = tuple(shape)
        self.check_compatible_shape(shape)
        spec = self.sharding_spec
        if spec.sharded_axis is None:
            return shape
        axis = spec.sharded_axis
        if spec.chunked:
            return shape[:axis] + (shape[axis] // spec.num_shards,) + shape[axis + 1:]
        return shape[:axis] + shape[axis + 1:]

    def with_memory_kind(self, kind: str | None) -> PmapSharding:
        return PmapSharding(self._internal_device_list, self.sharding_spec, memory_kind=kind)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (type(other) is PmapSharding
                and self._internal_device_list == other._internal_device_list
                and self.sharding_spec == other.sharding_spec
                and self._memory_kind == other._memory_kind)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        ids = [d.id for d in self._internal_device_list]
        return (f"PmapSharding(devices={ids}, sharding_spec={self.sharding_spec}, "
                f"memory_kind={self._memory_kind})")


#: every lamina sharding class (jax's shardings are jaxlib subclasses too, so
#: ``isinstance(x, _jax.Sharding)`` would accept them; lamina's code must not)
SHARDING_TYPES: tuple[type, ...] = (SingleDeviceSharding, GSPMDSharding, NamedSharding,
                                    PmapSharding)

Sharding: TypeAlias = "SingleDeviceSharding | GSPMDSharding | NamedSharding | PmapSharding"

#: jaxlib's base class of every sharding, which ``jax.sharding.Sharding`` is
#: (lamina exports it under that name): ``isinstance(s, ShardingBase)`` holds
#: for every lamina sharding, and for jax's too
ShardingBase: Any = _jax.Sharding


@functools.lru_cache(maxsize=None)
def single_device_sharding(device: Device, memory_kind: str | None = None) -> SingleDeviceSharding:
    """The (shared, cached) SingleDeviceSharding of ``device``."""
    return SingleDeviceSharding(device, memory_kind=memory_kind)


def is_sharding(x: object) -> bool:
    return isinstance(x, SHARDING_TYPES)


def named_sharding_from_hlo(mesh: Mesh, hlo: HloSharding, ndim: int,
                            memory_kind: str | None = None) -> NamedSharding | None:
    """A NamedSharding over ``mesh`` whose HloSharding is ``hlo``, if one exists."""
    spec = _spec_from_hlo(mesh.axis_names, mesh.axis_sizes, hlo, ndim)
    return None if spec is None else NamedSharding(mesh, spec, memory_kind=memory_kind)


@functools.lru_cache(maxsize=1024)
def _spec_from_hlo(names: tuple[str, ...], sizes: tuple[int, ...], hlo: HloSharding,
                   ndim: int) -> PartitionSpec | None:
    if hlo.is_replicated():
        return PartitionSpec()
    if not hlo.is_tiled():
        return None
    tiles = _tiles_per_dim(hlo, ndim)
    size_of = dict(zip(names, sizes))

    def options(tile: int, free: tuple[str, ...]) -> list[tuple[str, ...]]:
        if tile == 1:
            return [()]
        out: list[tuple[str, ...]] = []
        for axis in free:
            n = size_of[axis]
            if n > 1 and tile % n == 0:
                rest = tuple(a for a in free if a != axis)
                out.extend((axis,) + tail for tail in options(tile // n, rest))
        return out

    def search(d: int, free: tuple[str, ...], chosen: tuple[tuple[str, ...], ...]
               ) -> PartitionSpec | None:
        if d == ndim:
            dims = tuple(c if len(c) != 1 else c[0] for c in chosen)
            spec = PartitionSpec(*(None if c == () else c for c in dims))
            if _named_hlo(names, sizes, spec._normalized_dims(), ndim) == hlo:
                return _trim(spec)
            return None
        for axes in options(tiles[d], free):
            found = search(d + 1, tuple(a for a in free if a not in axes), chosen + (axes,))
            if found is not None:
                return found
        return None

    return search(0, names, ())


def _trim(spec: PartitionSpec) -> PartitionSpec:
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    return PartitionSpec(*parts)


def resolve_partition_spec(spec: PartitionSpec, *, memory_kind: str | None = None) -> NamedSharding:
    """A bare ``PartitionSpec`` against the current ``with mesh:`` mesh."""
    mesh = get_current_mesh()
    if mesh is None:
        raise ShardingError(
            f"a bare PartitionSpec {spec!r} needs a mesh: use it inside `with mesh:` or pass "
            f"NamedSharding(mesh, spec)")
    return NamedSharding(mesh, spec, memory_kind=memory_kind)


def indices_to_shard_ids(indices: Mapping[Device, Index]) -> dict[Device, int]:
    """Replica ids: devices holding the same index are numbered 0, 1, ..."""
    counts: dict[Hashable, int] = {}
    out: dict[Device, int] = {}
    for device, index in indices.items():
        key = _index_key(index)
        out[device] = counts.get(key, 0)
        counts[key] = out[device] + 1
    return out


def _index_key(index: Index) -> Hashable:
    return tuple((s.start, s.stop, s.step) if isinstance(s, slice) else s for s in index)
