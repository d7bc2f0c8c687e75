"""Putting host values and device buffers (``ArrayImpl``) where they need to
be, in few jaxlib calls (``transfer.shard_args`` does the same for Arrays).

Each value goes to its sharding (and optionally layout):

- host data (numpy arrays, Python and numpy scalars) is canonicalized (x64
  off turns 64-bit types into 32-bit ones), checked, cut into the slices the
  sharding names and sent with ``_jax.batched_device_put`` (one call per
  value: that function moves the shards of one array);
- device arrays already in place are reused (or re-labelled, e.g. to become
  committed) without a transfer;
- device arrays whose shards only change devices (same slices, other
  devices or memory) are grouped by (source devices, destination devices,
  memory kind) and each group moves in **one**
  ``_jax.batched_copy_array_to_devices_with_sharding`` call;
- real resharding over the same devices runs a compiled identity program;
  anything else goes through the host.

Every error names the argument (``device_put: argument x['a'] ...``).
jaxlib crashes on some bad inputs (a deleted array passed to a copy), so all
checks happen here first.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import (
    ArrayImpl,
    ArrayImplClass,
    DeviceList,
    JaxRuntimeError,
    _jax,
)
from lamina_interpreters_pxla import buffer_use
from lamina_interpreters_pxla.donation import (
    DeletedArrayError,
    deleted_argument_error,
    deleted_message,
    record_donation,
)
from lamina_interpreters_pxla.layouts import (
    AUTO,
    Layout,
    default_layout,
    has_custom_layout,
    mark_custom_layout,
)
from lamina_interpreters_pxla.programs import layout_program, reshard_program
from lamina_interpreters_pxla.sharding import (
    PmapSharding,
    ShardingError,
    SingleDeviceSharding,
    _index_key,
    is_sharding,
)
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray

CopySemantics = _jax.ArrayCopySemantics
HostBufferSemantics = _jax.HostBufferSemantics
REUSE_INPUT = CopySemantics.REUSE_INPUT
ALWAYS_COPY = CopySemantics.ALWAYS_COPY
DONATE_INPUT = CopySemantics.DONATE_INPUT

_PYTHON_SCALARS = (bool, int, float, complex)
#: dtypes that are canonical whatever the x64 setting (no conversion needed)
_PLAIN_DTYPES = frozenset({dtypes.bool_, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8,
                           dtypes.uint16, dtypes.uint32, dtypes.float16, dtypes.bfloat16,
                           dtypes.float32, dtypes.complex64})


@functools.lru_cache(maxsize=4096)
def _shaped(shape: tuple[int, ...], dtype: np.dtype[Any], weak: bool) -> ShapedArray:
    return ShapedArray(shape, dtype, weak)


class InvalidArgumentError(TypeError):
    """A value that cannot become a device array (a string, an object array...)."""


# --- the two jaxlib calls (wrapped so tests can count them) ------------------------
def _batched_device_put(aval: ShapedArray, sharding: Any, shards: list[Any],
                        devices: list[Any], committed: bool, zero_copy: bool) -> ArrayImpl:
    semantics = (HostBufferSemantics.ZERO_COPY if zero_copy
                 else HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL)
    return _jax.batched_device_put(aval, sharding, shards, devices, committed, False,
                                   semantics, enable_x64=dtypes.x64_enabled())


def _batched_copy(impls: list[ArrayImpl], device_lists: list[DeviceList],
                  shardings: list[Any], semantics: list[Any]) -> list[ArrayImpl]:
    out: list[ArrayImpl] = buffer_use.run_using(
        impls, _source_label, lambda: _jax.batched_copy_array_to_devices_with_sharding(
            impls, device_lists, shardings, semantics))
    return out


def _source_label(i: int) -> str:
    return f"copy of source {i}"


# --- host values --------------------------------------------------------------
def _label(what: str, name: str | None) -> str:
    return f"{what}: argument {name}" if name else what


def host_array(x: Any, *, what: str = "device_put",
               name: str | None = None) -> tuple[np.ndarray[Any, Any], bool]:
    """``x`` as a numpy array of lamina's canonical dtype, and its weak-typedness."""
    t = type(x)
    if t is np.ndarray:
        dt = x.dtype
        if dt in _PLAIN_DTYPES:
            return x, False
        arr = x
    elif t in _PYTHON_SCALARS:
        dtype, weak = dtypes.dtype_and_weakness(x)
        try:
            return np.asarray(x, dtype=dtype), weak
        except OverflowError as e:
            raise OverflowError(f"{_label(what, name)}: Python {t.__name__} {x!r} is too "
                                f"large to convert to {dtype}") from e
    if t is np.ndarray:
        pass
    elif isinstance(x, np.generic):
        arr = np.asarray(x)
    elif isinstance(x, np.ma.MaskedArray):
        raise InvalidArgumentError(f"{_label(what, name)}: numpy masked arrays are not "
                                   "supported; use arr.filled() first")
    elif isinstance(x, (str, bytes)) or not (hasattr(x, "__array__")
                                             or isinstance(x, (list, tuple))):
        raise InvalidArgumentError(
            f"{_label(what, name)}: {_short_repr(x)} of type {t.__name__} is not a valid "
            "lamina array (expected an Array, a numpy array or a Python/numpy scalar)")
    else:
        try:
            arr = np.asarray(x)
        except ValueError as e:
            raise InvalidArgumentError(f"{_label(what, name)}: {_short_repr(x)} cannot be "
                                       f"converted to an array: {e}") from e
    dt = arr.dtype
    if dt == dtypes.float0:
        return np.zeros(arr.shape, dtypes.bool_), False
    if not dtypes.is_valid_array_dtype(dt):
        raise InvalidArgumentError(
            f"{_label(what, name)}: dtype {dt} is not a valid lamina array type; only "
            "numeric and boolean arrays are supported")
    canonical = dtypes.canonicalize_dtype(dt)
    if canonical != dt:
        arr = arr.astype(canonical)
    return arr, False


def _short_repr(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _host_shards(arr: np.ndarray[Any, Any], sharding: Any,
                 snapshot: bool) -> tuple[list[Any], list[Any], bool]:
    """The per-device host slices, the devices, and whether jaxlib may alias them.

    jaxlib's copying host-buffer modes fail (``bad_function_call``) when one
    slice goes to several devices of a partially replicated sharding, so
    snapshots of sliced data are taken here (one copy per distinct slice) and
    handed over zero-copy.
    """
    devices = list(sharding._addressable_device_assignment)
    if sharding.num_devices == 1 or sharding.is_fully_replicated:
        return [arr] * len(devices), devices, not snapshot
    indices = sharding.addressable_devices_indices_map(arr.shape)
    if not snapshot:
        return [arr[indices[d]] for d in devices], devices, True
    copies: dict[Any, np.ndarray[Any, Any]] = {}
    shards = []
    for d in devices:
        key = _index_key(indices[d])
        piece = copies.get(key)
        if piece is None:
            piece = copies[key] = np.array(arr[indices[d]])
        shards.append(piece)
    return shards, devices, True


def put_host_value(x: Any, sharding: Any, *, committed: bool = True, zero_copy: bool = False,
                   what: str = "device_put", name: str | None = None,
                   weak_type: bool | None = None) -> ArrayImpl:
    """One host value onto ``sharding`` (one ``batched_device_put``)."""
    arr, weak = host_array(x, what=what, name=name)
    if weak_type is not None:
        weak = weak_type
    try:
        sharding.check_compatible_shape(arr.shape)
        if sharding.num_devices > 1 and not sharding.is_fully_replicated:
            sharding._to_xla_hlo_sharding(arr.ndim)
    except ShardingError as e:
        raise ShardingError(f"{_label(what, name)} of shape {arr.shape}: {e}") from None
    aval = _shaped(arr.shape, arr.dtype, weak)
    shards, devices, alias = _host_shards(arr, sharding, snapshot=not zero_copy)
    if isinstance(sharding, PmapSharding) and not sharding.sharding_spec.chunked:
        return _put_unstacked(aval, sharding, shards, devices, committed, alias)
    return _batched_device_put(aval, sharding, shards, devices, committed, alias)


def _put_unstacked(aval: ShapedArray, sharding: PmapSharding, shards: list[Any],
                   devices: list[Any], committed: bool, zero_copy: bool) -> ArrayImpl:
    """pmap's unstacked layout: each device holds one entry without the axis."""
    singles = []
    for shard, device in zip(shards, devices):
        shard_aval = ShapedArray(np.shape(shard), aval.dtype, aval.weak_type)
        singles.append(_batched_device_put(shard_aval, SingleDeviceSharding(device), [shard],
                                           [device], committed, zero_copy))
    return ArrayImplClass(aval, sharding, singles, committed, _skip_checks=True)


# --- device values ----------------------------------------------------------------
def _parts(impl: ArrayImpl) -> list[ArrayImpl]:
    if impl._sharding.num_devices == 1:
        return [impl]
    parts: list[ArrayImpl] = impl._arrays
    return parts


def relabel(impl: ArrayImpl, sharding: Any, committed: bool) -> ArrayImpl:
    """The same buffers under another (equivalent) sharding or committed flag."""
    out = ArrayImplClass(impl.aval, sharding, _parts(impl), committed, _skip_checks=True)
    if has_custom_layout(impl):
        mark_custom_layout(out)
    return out


def _same_slices(src: Any, dst: Any, shape: tuple[int, ...]) -> bool:
    """True when shard ``i`` of ``src`` is exactly shard ``i`` of ``dst``."""
    if src.num_devices != dst.num_devices or len(src.addressable_devices) != len(
            dst.addressable_devices):
        return False
    if src.is_fully_replicated and dst.is_fully_replicated:
        return True
    ndim = len(shape)
    if src._to_xla_hlo_sharding(ndim) != dst._to_xla_hlo_sharding(ndim):
        return False
    return bool(src.shard_shape(shape) == dst.shard_shape(shape))


def _foreign_to_host(impl: ArrayImpl) -> np.ndarray[Any, Any]:
    """An ArrayImpl made by another library (e.g. jax) brought to the host."""
    if impl.is_deleted():
        raise DeletedArrayError("the array has been deleted")
    return np.asarray(impl)


class _Plan:
    """Where shard_args puts one value and how."""

    __slots__ = ("index", "impl", "dst", "semantics", "committed", "donate")

    def __init__(self, index: int, impl: ArrayImpl, dst: Any, semantics: Any,
                 committed: bool, donate: bool):
        self.index = index
        self.impl = impl
        self.dst = dst
        self.semantics = semantics
        self.committed = committed
        self.donate = donate


def shard_impls(values: Sequence[Any], shardings: Sequence[Any],
                layouts: Sequence[Any] | None = None,
                copy_semantics: Sequence[Any] | None = None, *,
                committed: Sequence[bool] | None = None,
                zero_copy: Sequence[bool] | None = None,
                arg_names: Sequence[str | None] | None = None,
                what: str = "device_put") -> list[ArrayImpl]:
    """``values`` are ``ArrayImpl``s and host values (``transfer.shard_args``
    also takes lamina Arrays). Puts ``values[i]`` on ``shardings[i]`` (with ``layouts[i]`` when a ``Layout``)
    and returns jaxlib ``ArrayImpl``s in the same order.

    ``copy_semantics[i]`` (a ``jaxlib ArrayCopySemantics``, default
    ``REUSE_INPUT``) says whether a device value already in place may be
    returned as is (``REUSE_INPUT``), must be copied (``ALWAYS_COPY``) or is
    given up (``DONATE_INPUT``: it is deleted once moved). ``committed[i]``
    (default True) is the result's committed flag. ``zero_copy[i]`` lets the
    device alias a host numpy buffer (else the data is copied during the call).

    A device value that another thread deletes or donates while it is moved
    raises :class:`DeletedArrayError` naming it, as one deleted before would.
    """
    try:
        return _shard_impls(values, shardings, layouts, copy_semantics, committed, zero_copy,
                            arg_names, what)
    except JaxRuntimeError:
        err = deleted_argument_error(values, lambda i: _label(
            what, arg_names[i] if arg_names is not None else None))
        if err is not None:
            raise err from None
        raise


def _shard_impls(values: Sequence[Any], shardings: Sequence[Any],
                 layouts: Sequence[Any] | None, copy_semantics: Sequence[Any] | None,
                 committed: Sequence[bool] | None, zero_copy: Sequence[bool] | None,
                 arg_names: Sequence[str | None] | None, what: str) -> list[ArrayImpl]:
    n = len(values)
    if len(shardings) != n:
        raise ValueError(f"{what}: {n} values but {len(shardings)} shardings")
    results: list[Any] = [None] * n
    groups: dict[tuple[Any, ...], list[_Plan]] = {}
    relayouts: list[tuple[int, Any, Any, bool, str | None]] = []
    for i, x in enumerate(values):
        dst = shardings[i]
        name = arg_names[i] if arg_names is not None else None
        if not is_sharding(dst):
            raise TypeError(f"{_label(what, name)}: {dst!r} is not a lamina sharding")
        cs = copy_semantics[i] if copy_semantics is not None else REUSE_INPUT
        commit = committed[i] if committed is not None else True
        impl = x
        layout = layouts[i] if layouts is not None else None
        if type(impl) is ArrayImplClass and is_sharding(impl._sharding):
            if has_custom_layout(impl):
                if _keeps_layout(impl, dst, cs, commit, layout):
                    results[i] = impl
                    continue
                impl = _relayout(impl, impl._sharding, None, bool(impl._committed), what, name)
            results[i] = _place_device_value(i, impl, dst, cs, commit, groups, what, name)
        else:
            if type(impl) is ArrayImplClass:
                x = _foreign_to_host(impl)
            results[i] = put_host_value(x, dst, committed=commit,
                                        zero_copy=bool(zero_copy[i]) if zero_copy else False,
                                        what=what, name=name)
        if layout is not None:
            relayouts.append((i, dst, layout, commit, name))
    for plans in groups.values():
        _run_copy_group(plans, results, what)
    for i, dst, layout, commit, name in relayouts:
        results[i] = _apply_layout(results[i], dst, layout, commit, what, name)
    return results


def _place_device_value(i: int, impl: ArrayImpl, dst: Any, cs: Any, committed: bool,
                        groups: dict[tuple[Any, ...], list[_Plan]], what: str,
                        name: str | None) -> ArrayImpl | None:
    if impl.is_deleted():
        raise DeletedArrayError(deleted_message(impl, _label(what, name)))
    src = impl._sharding
    shape = tuple(impl.aval.shape)
    try:
        dst.check_compatible_shape(shape)
        dst._to_xla_hlo_sharding(len(shape))
    except ShardingError as e:
        raise ShardingError(f"{_label(what, name)} of shape {shape}: {e}") from None
    donate = cs == DONATE_INPUT
    same = src is dst or src == dst or src.is_equivalent_to(dst, len(shape))
    if same and cs != ALWAYS_COPY:
        if src is dst and bool(impl._committed) == committed:
            return impl
        return relabel(impl, dst, committed)
    if same or (_same_slices(src, dst, shape) and src.is_fully_addressable):
        key = (src._internal_device_list, dst._internal_device_list, dst.memory_kind)
        semantics = ALWAYS_COPY if (cs == ALWAYS_COPY or donate) else REUSE_INPUT
        groups.setdefault(key, []).append(_Plan(i, impl, dst, semantics, committed, donate))
        return None
    out = _reshard(impl, src, dst, committed, what, name)
    if donate:
        _donate(impl, what)
    return out


def _reshard(impl: ArrayImpl, src: Any, dst: Any, committed: bool, what: str,
             name: str | None) -> ArrayImpl:
    """Moves data between shardings that cut it differently."""
    same_devices = src.device_set == dst.device_set
    device_memory = src.memory_kind == dst.memory_kind == "device"
    unstacked = any(isinstance(s, PmapSharding) and not s.sharding_spec.chunked
                    for s in (src, dst))
    if same_devices and device_memory and not unstacked and src.num_devices > 1:
        exe = reshard_program(impl.aval, src, dst)
        out = exe.run(impl)
        return out if committed else relabel(out, dst, committed)
    if not src.is_fully_addressable:
        raise ShardingError(
            f"{_label(what, name)}: cannot move an array that spans other processes' devices "
            f"from {src!r} to {dst!r}")
    value = to_host(impl)
    return put_host_value(value, dst, committed=committed, what=what, name=name,
                          weak_type=impl.aval.weak_type)


def _run_copy_group(plans: list[_Plan], results: list[Any], what: str) -> None:
    impls = [p.impl for p in plans]
    outs = _batched_copy(impls, [p.dst._internal_device_list for p in plans],
                         [p.dst for p in plans], [p.semantics for p in plans])
    for plan, out in zip(plans, outs):
        if bool(out._committed) != plan.committed:
            out = relabel(out, plan.dst, plan.committed)
        results[plan.index] = out
        if plan.donate:
            _donate(plan.impl, what)


def _donate(impl: ArrayImpl, what: str) -> None:
    record_donation(impl, what)
    buffer_use.delete(impl)


def _keeps_layout(impl: ArrayImpl, dst: Any, cs: Any, committed: bool, layout: Any) -> bool:
    """True when a re-laid-out array already is exactly what was asked for."""
    src = impl._sharding
    return (cs != ALWAYS_COPY and bool(impl._committed) == committed
            and (src is dst or src == dst) and isinstance(layout, Layout)
            and Layout.from_pjrt_layout(impl._pjrt_layout) == layout)


def _apply_layout(impl: ArrayImpl, sharding: Any, layout: Any, committed: bool, what: str,
                  name: str | None) -> ArrayImpl:
    """Re-lays ``impl`` (placed on ``sharding``) out as ``layout``."""
    if layout is AUTO:
        raise ValueError(f"{_label(what, name)}: Layout.AUTO is only meaningful for jit "
                         "inputs and outputs; device_put needs a concrete Layout")
    if not isinstance(layout, Layout):
        raise TypeError(f"{_label(what, name)}: {layout!r} is not a Layout")
    aval = impl.aval
    try:
        layout.check_compatible_aval(tuple(aval.shape))
    except ValueError as e:
        raise ValueError(f"{_label(what, name)}: {e}") from None
    if Layout.from_pjrt_layout(impl._pjrt_layout) == layout:
        return impl
    return _relayout(impl, sharding, layout, committed, what, name)


def _relayout(impl: ArrayImpl, sharding: Any, layout: Layout | None, committed: bool,
              what: str, name: str | None) -> ArrayImpl:
    """Runs the identity program from ``impl``'s layout to ``layout`` (None:
    the default) and checks the backend really produced it."""
    aval = impl.aval
    current = Layout.from_pjrt_layout(impl._pjrt_layout)
    source = current if has_custom_layout(impl) else None
    platform = sharding._device_assignment[0].platform
    try:
        exe = layout_program(aval, sharding, source, layout, committed)
        out = exe.run(impl)
    except Exception as e:
        raise LayoutError(f"{_label(what, name)}: the {platform} backend cannot place "
                          f"{aval.str_short()} with {layout or 'its default layout'}: "
                          f"{e}") from e
    got = Layout.from_pjrt_layout(out._pjrt_layout)
    wanted = layout if layout is not None else default_layout(aval.dtype, aval.shape, sharding)
    if got != wanted:
        raise LayoutError(f"{_label(what, name)}: the {platform} backend does not support "
                          f"{wanted} for {aval.str_short()} (it produced {got})")
    if layout is not None and got != default_layout(aval.dtype, aval.shape, sharding):
        mark_custom_layout(out)
    return out


class LayoutError(ValueError):
    """A layout the backend cannot produce for a value."""


def to_host(impl: ArrayImpl, what: str | None = None) -> np.ndarray[Any, Any]:
    """The data of ``impl`` as a read-only numpy array (one host copy);
    raises DeletedArrayError (naming ``what``) if it is deleted."""
    out: np.ndarray[Any, Any] = buffer_use.run_using(
        [impl], lambda _: what or "", lambda: _copy_to_host(impl))
    return out


def _copy_to_host(impl: ArrayImpl) -> np.ndarray[Any, Any]:
    sharding = impl._sharding
    if sharding.num_devices == 1:
        npy, _ = impl._single_device_array_to_np_array_did_copy()
        return _read_only(npy)
    if sharding.is_fully_replicated:
        npy, _ = impl._fully_replicated_shard()._single_device_array_to_np_array_did_copy()
        return _read_only(npy)
    if not sharding.is_fully_addressable:
        raise RuntimeError(
            "Fetching the value of an Array that spans devices of other processes is not "
            "possible; gather it first (e.g. with a replicated output sharding)")
    shape = tuple(impl.aval.shape)
    out = np.empty(shape, impl.aval.dtype)
    indices = sharding.addressable_devices_indices_map(shape)
    for shard in impl._arrays:
        npy, _ = shard._single_device_array_to_np_array_did_copy()
        out[indices[shard._sharding._device]] = npy
    return _read_only(out)


def _read_only(npy: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    if npy.flags.writeable:
        npy.flags.writeable = False
    return npy
