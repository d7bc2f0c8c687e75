"""Global arrays: Arrays whose shards live on the devices of several processes.

In a multi-process run each process holds only the shards on its own
(addressable) devices; the others are known only by their place in the
sharding. These constructors build such an Array from what one process has:

- :func:`make_array_from_single_device_arrays`: this process's shards, already
  on their devices (one single-device Array per addressable device);
- :func:`make_array_from_callback`: a function giving the data of any index of
  the global array (called once per addressable device);
- :func:`make_array_from_process_local_data`: this process's block of the
  global array as host data (a per-process batch, say), with the global shape
  given or inferred from how the sharding spreads over processes.

:func:`host_local_array_to_global_array` and
:func:`global_array_to_host_local_array` convert between such global Arrays
and per-process ("host-local") Arrays laid out over the process's part of a
mesh (:func:`local_mesh`), sharing buffers where the layouts agree.

Every process must call them with the same shape and sharding. In a single
process they are ordinary constructors. Errors name the function and the
offending argument (``arrays[2]``, ``local_data['x']``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import ArrayImpl, ArrayImplClass, Device
from lamina_interpreters_pxla.array import Array, deleted_message
from lamina_interpreters_pxla.buffers import _batched_device_put
from lamina_interpreters_pxla.sharding import (
    Index,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    Shape,
    ShardingError,
    is_sharding,
    resolve_partition_spec,
    single_device_sharding,
)
from lamina_interpreters_pxla.transfer import host_array, shard_args
from lamina_linear_util import tree_util
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import Tracer


class GlobalArrayError(ValueError):
    """Data that does not fit the global array it should become (wrong shard
    shapes or devices, process-local data of the wrong size...)."""


# --- argument checks -------------------------------------------------------------------------
def _sharding_arg(fn: str, sharding: Any) -> Any:
    if isinstance(sharding, PartitionSpec):
        return resolve_partition_spec(sharding)
    if not is_sharding(sharding):
        raise TypeError(f"{fn}: sharding must be a lamina sharding (e.g. NamedSharding(mesh, "
                        f"P('x'))), got {sharding!r}")
    if isinstance(sharding, PmapSharding) and not sharding.sharding_spec.chunked:
        raise ShardingError(f"{fn}: an unstacked PmapSharding has shards of another rank "
                            f"than the array; use a chunked sharding ({sharding!r})")
    return sharding


def _shape_arg(fn: str, shape: Any, what: str = "shape") -> Shape:
    try:
        out = tuple(_as_index(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fn}: {what} must be a tuple of non-negative ints, got "
                        f"{shape!r}") from None
    if any(d < 0 for d in out):
        raise GlobalArrayError(f"{fn}: {what} must be a tuple of non-negative ints, "
                               f"got {shape!r}")
    return out


def _as_index(d: Any) -> int:
    """``int`` of an integer-like (numpy ints included), a TypeError otherwise."""
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise TypeError(d)
    return int(d.__index__())


def _check_shape_fits(fn: str, shape: Shape, sharding: Any) -> Shape:
    """The shard shape of a ``shape`` array under ``sharding``."""
    try:
        return tuple(sharding.shard_shape(shape))
    except ShardingError as e:
        raise ShardingError(f"{fn}: shape {shape}: {e}") from None


def _dtype_of(fn: str, values: Sequence[Any], dtype: Any) -> np.dtype[Any]:
    if dtype is not None:
        canonical: np.dtype[Any] = dtypes.canonicalize_dtype(np.dtype(dtype))
        return canonical
    if not values:
        raise GlobalArrayError(f"{fn}: this process has no addressable shards, so the dtype "
                               "cannot be taken from them; pass dtype=")
    first: np.dtype[Any] = np.dtype(values[0].dtype)
    return first


# --- from single-device arrays ---------------------------------------------------------------
def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any,
                                         arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Array:
    """The global Array of ``shape`` and ``sharding`` whose shards on this process's
    devices are ``arrays`` (no copy).

    ``arrays`` holds one single-device Array per addressable device of
    ``sharding`` (in any order; each is matched to its device), each of the
    sharding's shard shape and of one dtype (``dtype``, default the first
    array's). Each process passes its own shards.
    """
    fn = "make_array_from_single_device_arrays"
    shape = _shape_arg(fn, shape)
    sharding = _sharding_arg(fn, sharding)
    shard_shape = _check_shape_fits(fn, shape, sharding)
    if isinstance(arrays, (Array, np.ndarray)) or not isinstance(arrays, Sequence):
        raise TypeError(f"{fn}: arrays must be a list or tuple of single-device Arrays, got "
                        f"{type(arrays).__name__}")
    impls = [_single_device_impl(fn, i, x) for i, x in enumerate(arrays)]
    out_dtype = _dtype_of(fn, [impl.aval for impl in impls], dtype)
    ordered = _order_by_device(fn, impls, sharding, shard_shape, out_dtype)
    aval = ShapedArray(shape, out_dtype, False)
    return Array(ArrayImplClass(aval, sharding, ordered, True, _skip_checks=True))


def _single_device_impl(fn: str, i: int, x: Any) -> ArrayImpl:
    impl = x._arr if type(x) is Array else x
    if type(impl) is not ArrayImplClass or not is_sharding(impl._sharding):
        raise TypeError(f"{fn}: arrays[{i}] must be a lamina Array on one device (e.g. from "
                        f"device_put(x, device)), got {type(x).__name__}")
    if impl.is_deleted():
        raise ValueError(deleted_message(impl, f"{fn}: arrays[{i}]"))
    if impl._sharding.num_devices != 1:
        raise GlobalArrayError(f"{fn}: arrays[{i}] must be on a single device, but it is "
                               f"sharded over {impl._sharding.num_devices} devices")
    return impl


def _order_by_device(fn: str, impls: list[ArrayImpl], sharding: Any, shard_shape: Shape,
                     dtype: np.dtype[Any]) -> list[ArrayImpl]:
    """``impls`` in the order of ``sharding``'s addressable devices, checked."""
    wanted = list(sharding._addressable_device_assignment)
    position = {d: k for k, d in enumerate(wanted)}
    placed: list[ArrayImpl | None] = [None] * len(wanted)
    for i, impl in enumerate(impls):
        device = impl._sharding._device_assignment[0]
        k = position.get(device)
        if k is None:
            raise GlobalArrayError(f"{fn}: arrays[{i}] is on {device}, which is not one of "
                                   f"this process's devices of the sharding {_ids(wanted)}")
        if placed[k] is not None:
            raise GlobalArrayError(f"{fn}: two arrays are on {device} (arrays[{i}] and an "
                                   "earlier one)")
        if tuple(impl.aval.shape) != shard_shape or np.dtype(impl.aval.dtype) != dtype:
            raise GlobalArrayError(
                f"{fn}: arrays[{i}] on {device} has type "
                f"{np.dtype(impl.aval.dtype).name}{list(impl.aval.shape)}, but every shard of "
                f"this array must be {dtype.name}{list(shard_shape)} (the sharding's shard "
                "shape)")
        placed[k] = impl
    missing = [wanted[k] for k, impl in enumerate(placed) if impl is None]
    if missing:
        raise GlobalArrayError(f"{fn}: got {len(impls)} arrays but the sharding has "
                               f"{len(wanted)} devices in this process; no array for "
                               f"{_ids(missing)}")
    return [impl for impl in placed if impl is not None]


def _ids(devices: Sequence[Device]) -> str:
    return "[" + ", ".join(str(d) for d in devices) + "]"


# --- from a callback ---------------------------------------------------------------------------
def make_array_from_callback(shape: Sequence[int], sharding: Any,
                             data_callback: Callable[[Index], Any], dtype: Any = None) -> Array:
    """The global Array of ``shape`` and ``sharding`` whose data at index ``idx``
    is ``data_callback(idx)``.

    The callback is called with the index (a tuple of slices) of each of this
    process's shards and returns that shard's data (a numpy array, a scalar or
    an Array). A fully replicated sharding calls it once.
    """
    fn = "make_array_from_callback"
    shape = _shape_arg(fn, shape)
    sharding = _sharding_arg(fn, sharding)
    shard_shape = _check_shape_fits(fn, shape, sharding)
    devices = list(sharding._addressable_device_assignment)
    if sharding.is_fully_replicated:
        full: Index = (slice(None),) * len(shape)
        values = [_call(fn, data_callback, full)] * len(devices)
    else:
        indices = sharding.addressable_devices_indices_map(shape)
        values = [_call(fn, data_callback, indices[d]) for d in devices]
    out_dtype = _dtype_of(fn, values, dtype)
    for device, value in zip(devices, values):
        if tuple(np.shape(value)) != shard_shape:
            raise GlobalArrayError(
                f"{fn}: data_callback returned shape {tuple(np.shape(value))} for the shard on "
                f"{device}; the sharding's shard shape is {shard_shape} (global shape {shape})")
    aval = ShapedArray(shape, out_dtype, False)
    if any(type(v) is Array for v in values):
        return _assemble_device_values(fn, aval, sharding, devices, values)
    return Array(_batched_device_put(aval, sharding, _owned_copies(values, out_dtype), devices,
                                     True, True))


def _owned_copies(values: list[Any], dtype: np.dtype[Any]) -> list[np.ndarray[Any, Any]]:
    """One private contiguous copy per distinct value, handed to jaxlib zero-copy.

    jaxlib's copying host-buffer modes fail (``bad_function_call``) when one
    host slice goes to several devices of a partially replicated sharding;
    private copies can be aliased safely instead (nobody else can mutate them).
    """
    copies: dict[int, np.ndarray[Any, Any]] = {}
    out = []
    for value in values:
        copy = copies.get(id(value))
        if copy is None:
            copy = copies[id(value)] = np.array(value, dtype=dtype, copy=True, order="C")
        out.append(copy)
    return out


def _call(fn: str, data_callback: Callable[[Index], Any], index: Index) -> Any:
    value = data_callback(index)
    if isinstance(value, Tracer):
        raise TypeError(f"{fn}: data_callback returned a tracer for index {index}; it must "
                        "return concrete data (it cannot run under jit, grad or vmap)")
    if type(value) is Array:
        return value
    arr, _ = host_array(value, what=fn, name=f"data_callback({index})")
    return arr


def _assemble_device_values(fn: str, aval: ShapedArray, sharding: Any,
                            devices: list[Device], values: list[Any]) -> Array:
    """Shards some of which are Arrays: each goes to its device in one batch."""
    converted = []
    for value in values:
        if type(value) is not Array:
            value = np.asarray(value, aval.dtype)
        elif value.dtype != aval.dtype:
            value = value.astype(aval.dtype)
        converted.append(value)
    placed = shard_args(converted, [single_device_sharding(d) for d in devices], what=fn)
    return Array(ArrayImplClass(aval, sharding, placed, True, _skip_checks=True))


# --- from process-local data ---------------------------------------------------------------------
def make_array_from_process_local_data(sharding: Any, local_data: Any,
                                       global_shape: Any = None) -> Any:
    """The global Array made of every process's ``local_data`` (a pytree of them).

    ``local_data`` is this process's block: along a dimension that the
    sharding splits across processes, it holds this process's slices (in
    order); along any other dimension, the whole extent (then it must be the
    same data on every process that shares those slices). ``global_shape``
    (default: inferred, each split dimension being the local size times the
    number of distinct process blocks) may also give a dimension equal to the
    local size, meaning "the local data is the whole dimension".

    ``sharding`` and ``global_shape`` may be one value for every leaf or a pytree
    prefix of ``local_data``. In a single process this is ``device_put``.
    """
    fn = "make_array_from_process_local_data"
    paths_leaves, treedef = tree_util.tree_flatten_with_path(local_data)
    n = len(paths_leaves)
    shardings = _broadcast_arg(fn, "sharding", sharding, local_data, n, is_sharding_leaf)
    shapes = _broadcast_arg(fn, "global_shape", global_shape, local_data, n, _is_shape_leaf)
    out = []
    for (path, leaf), s, g in zip(paths_leaves, shardings, shapes):
        name = f"local_data{tree_util.keystr(path)}"
        out.append(_from_local_data(fn, name, _sharding_arg(fn, s), leaf, g))
    return tree_util.tree_unflatten(treedef, out)


def is_sharding_leaf(x: Any) -> bool:
    return is_sharding(x) or isinstance(x, PartitionSpec)


def _is_shape_leaf(x: Any) -> bool:
    return x is None or (isinstance(x, tuple) and all(isinstance(d, (int, np.integer))
                                                      for d in x))


def _broadcast_arg(fn: str, what: str, prefix: Any, tree: Any, n: int,
                   is_leaf: Callable[[Any], bool]) -> list[Any]:
    if is_leaf(prefix):
        return [prefix] * n
    try:
        out = tree_util.broadcast_prefix(prefix, tree, is_leaf=is_leaf)
    except ValueError as e:
        raise GlobalArrayError(f"{fn}: {what} must be one value or a pytree prefix of "
                               f"local_data: {e}") from None
    return list(out)


def _from_local_data(fn: str, name: str, sharding: Any, leaf: Any, global_shape: Any) -> Array:
    if type(leaf) is Array:
        leaf = np.asarray(leaf)
    data, _ = host_array(leaf, what=fn, name=name)
    local_shape = tuple(data.shape)
    target = None if global_shape is None else _shape_arg(fn, global_shape, "global_shape")
    if len(sharding.device_set) == len(sharding.addressable_devices):
        if target is not None and target != local_shape:
            raise GlobalArrayError(f"{fn}: {name}: in a single process global_shape must be "
                                   f"None or the local shape {local_shape}, got {target}")
        return Array(shard_args([data], [sharding], what=fn, arg_names=[name])[0])
    if target is None:
        target = infer_global_shape(fn, name, sharding, local_shape)
    elif len(target) != len(local_shape):
        raise GlobalArrayError(f"{fn}: {name} has rank {len(local_shape)} but global_shape "
                               f"{target} has rank {len(target)}")
    lookup = _local_slices(fn, name, sharding, local_shape, target)

    def callback(index: Index) -> Any:
        return data[tuple(lookup[d](s) for d, s in enumerate(index))]

    return make_array_from_callback(target, sharding, callback, dtype=data.dtype)


def _bounds(s: slice | int, size: int) -> tuple[int, int]:
    if isinstance(s, int):
        return s, s + 1
    start, stop, _ = s.indices(size)
    return start, stop


def _process_blocks(sharding: Any, probe: Shape, dim: int) -> dict[int, frozenset[int]]:
    """For each process: the tile starts it holds along ``dim`` of a ``probe``
    array (one element per tile)."""
    blocks: dict[int, set[int]] = {}
    for device, index in sharding.devices_indices_map(probe).items():
        start, _ = _bounds(index[dim], probe[dim])
        blocks.setdefault(int(device.process_index), set()).add(start)
    return {p: frozenset(s) for p, s in blocks.items()}


def infer_global_shape(fn: str, name: str, sharding: Any, local_shape: Shape) -> Shape:
    """The global shape when each process holds one block of ``local_shape``.

    Along each dimension the processes' sets of tiles must all have the same
    size and be equal or disjoint (the sharding is uniform across processes);
    the global size is the local size times the number of distinct sets.
    """
    tiles = tuple(_tile_counts(sharding, len(local_shape)))
    out = []
    for dim, local in enumerate(local_shape):
        blocks = set(_process_blocks(sharding, tiles, dim).values())
        sizes = {len(b) for b in blocks}
        disjoint = sum(len(b) for b in blocks) == len(frozenset().union(*blocks))
        if len(sizes) != 1 or not disjoint:
            raise GlobalArrayError(
                f"{fn}: {name}: the sharding spreads dimension {dim} unevenly over the "
                "processes, so the global shape cannot be inferred; pass global_shape=")
        out.append(local * len(blocks))
    return tuple(out)


def _tile_counts(sharding: Any, ndim: int) -> list[int]:
    hlo = sharding._to_xla_hlo_sharding(ndim)
    if hlo.is_replicated() or hlo.is_maximal() or not hlo.is_tiled():
        return [1] * ndim
    return [int(t) for t in list(hlo.tile_assignment_dimensions())[:ndim]]


def _local_slices(fn: str, name: str, sharding: Any, local_shape: Shape,
                  global_shape: Shape) -> list[Callable[[slice | int], slice]]:
    """Per dimension: global index of a shard -> slice of the local data."""
    _check_shape_fits(fn, global_shape, sharding)
    shard_shape = sharding.shard_shape(global_shape)
    indices = sharding.addressable_devices_indices_map(global_shape)
    lookups: list[Callable[[slice | int], slice]] = []
    for dim, (local, total) in enumerate(zip(local_shape, global_shape)):
        if local == total:
            lookups.append(lambda s: s if isinstance(s, slice) else slice(s, s + 1))
            continue
        starts = sorted({_bounds(index[dim], total)[0] for index in indices.values()})
        held = len(starts) * shard_shape[dim]
        if local != held:
            raise GlobalArrayError(
                f"{fn}: {name} has size {local} in dimension {dim}, but it must be either the "
                f"global size {total} or what this process's devices hold ({held} = "
                f"{len(starts)} x {shard_shape[dim]}) (global_shape={global_shape})")
        lookups.append(_slice_lookup(starts, shard_shape[dim], total))
    return lookups


def _slice_lookup(starts: list[int], size: int, total: int) -> Callable[[slice | int], slice]:
    position = {start: k for k, start in enumerate(starts)}

    def lookup(s: slice | int) -> slice:
        k = position[_bounds(s, total)[0]]
        return slice(k * size, (k + 1) * size)

    return lookup



# --- host-local arrays <-> global arrays over a mesh -----------------------------------------------
def local_mesh(mesh: Mesh) -> Mesh:
    """The part of ``mesh`` on this process's devices, as a mesh with the same axes.

    The devices of one process must form a box of the mesh (a contiguous
    range along every axis, e.g. one row of a ``(processes, devices)`` mesh).
    """
    addressable = np.vectorize(lambda d: bool(d.process_index == d.client.process_index()),
                               otypes=[bool])(mesh.devices)
    if not addressable.any():
        raise GlobalArrayError(f"{mesh!r} has none of this process's devices")
    box = tuple(np.unique(np.nonzero(addressable)[axis]) for axis in range(mesh.devices.ndim))
    if any(len(r) and r[-1] - r[0] + 1 != len(r) for r in box) or \
            not addressable[np.ix_(*box)].all() or addressable[np.ix_(*box)].size \
            != addressable.sum():
        raise GlobalArrayError(f"the devices of this process do not form a contiguous block of "
                               f"{mesh!r}; host-local arrays need such a mesh")
    return Mesh(mesh.devices[np.ix_(*box)], mesh.axis_names)


def _spec_scales(mesh: Mesh, local: Mesh, spec: PartitionSpec,
                 ndim: int) -> list[tuple[int, int]]:
    """Per dimension: (global tiles, local tiles) of ``spec``."""
    sizes, local_sizes = mesh.shape, local.shape
    out = []
    for d in range(ndim):
        axes = spec._normalized_dims()[d] if d < len(spec) else ()
        axes = axes or ()
        out.append((int(np.prod([sizes[a] for a in axes])),
                    int(np.prod([local_sizes[a] for a in axes]))))
    return out


def _spec_leaf(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _per_leaf_specs(fn: str, tree: Any, pspecs: Any) -> tuple[list[tuple[Any, Any]], Any]:
    paths_leaves, treedef = tree_util.tree_flatten_with_path(tree)
    if _spec_leaf(pspecs):
        specs = [pspecs] * len(paths_leaves)
    else:
        try:
            specs = tree_util.broadcast_prefix(pspecs, tree, is_leaf=_spec_leaf)
        except ValueError as e:
            raise GlobalArrayError(f"{fn}: pspecs must be a PartitionSpec or a pytree prefix "
                                   f"of the inputs: {e}") from None
    out = []
    for (path, leaf), spec in zip(paths_leaves, specs):
        name = f"inputs{tree_util.keystr(path)}"
        if spec is None:
            raise GlobalArrayError(f"{fn}: the pspec of {name} is None; use PartitionSpec() "
                                   "for a replicated value")
        out.append(((name, leaf), spec))
    return out, treedef


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """Each process's host-local arrays (a pytree) as global Arrays over ``global_mesh``.

    A local array is laid out by its ``PartitionSpec`` over this process's part
    of the mesh (:func:`local_mesh`); along a dimension split over mesh axes
    spanning ``k`` times as many devices globally as locally, the global array
    is ``k`` times larger. Arrays already on the local devices that way are
    re-wrapped without a copy; global Arrays pass through.
    """
    fn = "host_local_array_to_global_array"
    leaves, treedef = _per_leaf_specs(fn, local_inputs, pspecs)
    local = local_mesh(global_mesh)
    return tree_util.tree_unflatten(treedef, [
        _local_to_global(fn, name, leaf, global_mesh, local, spec)
        for (name, leaf), spec in leaves])


def _local_to_global(fn: str, name: str, x: Any, mesh: Mesh, local: Mesh,
                     spec: PartitionSpec) -> Any:
    impl = x._arr if type(x) is Array else x
    if type(impl) is ArrayImplClass and not impl._sharding.is_fully_addressable:
        return x
    global_sharding = NamedSharding(mesh, spec)
    local_sharding = NamedSharding(local, spec)
    shape = tuple(np.shape(x) if type(impl) is not ArrayImplClass else impl.aval.shape)
    global_shape = []
    for d, (size, (tiles, local_tiles)) in enumerate(zip(shape, _spec_scales(
            mesh, local, spec, len(shape)))):
        if size % local_tiles:
            raise GlobalArrayError(f"{fn}: {name} has size {size} in dimension {d}, which "
                                   f"{local_tiles} local devices cannot split evenly ({spec})")
        global_shape.append(size // local_tiles * tiles)
    if type(impl) is ArrayImplClass and is_sharding(impl._sharding) and \
            impl._sharding.is_equivalent_to(local_sharding, len(shape)):
        aval = ShapedArray(tuple(global_shape), impl.aval.dtype, impl.aval.weak_type)
        return Array(impl._rewrap_with_aval_and_sharding(aval, global_sharding))
    data, weak = host_array(np.asarray(x) if type(x) is Array else x, what=fn, name=name)
    indices = local_sharding.devices_indices_map(shape)
    devices = list(global_sharding._addressable_device_assignment)
    aval = ShapedArray(tuple(global_shape), data.dtype, weak)
    values = [data[indices[d]] for d in devices]
    return Array(_batched_device_put(aval, global_sharding, _owned_copies(values, data.dtype),
                                     devices, True, True))


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Mesh, pspecs: Any) -> Any:
    """The inverse of :func:`host_local_array_to_global_array`: each global Array
    (resharded to ``NamedSharding(global_mesh, pspec)`` first if needed) as this
    process's local Array over :func:`local_mesh`, sharing its buffers."""
    fn = "global_array_to_host_local_array"
    leaves, treedef = _per_leaf_specs(fn, global_inputs, pspecs)
    local = local_mesh(global_mesh)
    return tree_util.tree_unflatten(treedef, [
        _global_to_local(fn, name, leaf, global_mesh, local, spec)
        for (name, leaf), spec in leaves])


def _global_to_local(fn: str, name: str, x: Any, mesh: Mesh, local: Mesh,
                     spec: PartitionSpec) -> Any:
    impl = x._arr if type(x) is Array else x
    if type(impl) is ArrayImplClass and impl._sharding.is_fully_addressable:
        return x
    if type(impl) is not ArrayImplClass:
        raise TypeError(f"{fn}: {name} must be a global Array, got {type(x).__name__}")
    global_sharding = NamedSharding(mesh, spec)
    shape = tuple(impl.aval.shape)
    if not (impl._sharding == global_sharding
            or impl._sharding.is_equivalent_to(global_sharding, len(shape))):
        impl, = shard_args([impl], [global_sharding], what=fn, arg_names=[name])
    local_shape = tuple(size // tiles * local_tiles for size, (tiles, local_tiles) in
                        zip(shape, _spec_scales(mesh, local, spec, len(shape))))
    aval = ShapedArray(local_shape, impl.aval.dtype, impl.aval.weak_type)
    return Array(impl._rewrap_with_aval_and_sharding(aval, NamedSharding(local, spec)))


def process_major_devices(per_process: int, backend: Any = None) -> list[Device]:
    """The first ``per_process`` devices of every process, process 0's first: the
    device order of multi-process ``pmap`` and ``sharded_jit`` (a mesh built
    from it in order gives each process a contiguous block)."""
    count = backends.process_count(backend)
    rows = [backends.local_devices(process_index=p, backend=backend) for p in range(count)]
    fewest = min(len(r) for r in rows)
    if not 0 < per_process <= fewest:
        raise GlobalArrayError(f"process_major_devices: {per_process} devices per process were "
                               f"asked for, but the processes have {[len(r) for r in rows]} "
                               "local devices")
    return [d for r in rows for d in r[:per_process]]


def local_tile_counts(mesh: Mesh, spec: PartitionSpec, ndim: int) -> tuple[int, ...]:
    """How many pieces ``NamedSharding(mesh, spec)`` cuts each dimension into on
    this process's part of the mesh (the per-process partition counts)."""
    return tuple(local for _, local in _spec_scales(mesh, local_mesh(mesh), spec, ndim))
