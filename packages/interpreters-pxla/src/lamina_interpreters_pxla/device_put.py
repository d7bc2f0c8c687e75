"""``device_put`` and ``device_get``.

``device_put(tree, device)`` is **one** operation however many leaves the
tree has: a single ``bind`` of ``device_put_p`` with one operand per leaf and
per-leaf params (destination, source, copy semantics, aliasing). Eagerly its
impl rule hands every leaf to one batched :func:`shard_args` call; under
``jit`` it is an identity (with the sharding recorded for the compiler),
under ``grad`` it is linear (tangents and cotangents are ``device_put`` too)
and under ``vmap`` the destination is adjusted for the batch dimension.

Destinations: ``None`` (leave committed arrays where they are, put host data
on the default device uncommitted), a ``Device``, a lamina sharding, a
``Format(layout, sharding)`` or a bare ``PartitionSpec`` (resolved against the
current ``with mesh:``), or a pytree prefix of those. Arguments are checked
before anything moves, and errors name the leaf (``device_put: argument
x['a']``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import ArrayImplClass, DeviceClass
from lamina_interpreters_pxla.array import Array, DeletedArrayError, deleted_message
from lamina_interpreters_pxla.backends import backends, default_device
from lamina_interpreters_pxla.layouts import Format, Layout
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    PmapShardingSpec,
    ShardingError,
    SingleDeviceSharding,
    is_sharding,
    resolve_partition_spec,
    single_device_sharding,
)
from lamina_interpreters_pxla.transfer_guard import explicit_device_get, explicit_device_put
from lamina_interpreters_pxla.transfer import (
    ALWAYS_COPY,
    DONATE_INPUT,
    REUSE_INPUT,
    host_array,
    shard_args,
)
from lamina_linear_util import tree_util
from lamina_mlir_lowering import register_lowering
from lamina_tracing_core import ad_util, dtypes
from lamina_tracing_core.ad import is_undefined_primal
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.memory import kind_to_space, own_space_primitives
from lamina_tracing_core.numpy import creation as jnp_creation
from lamina_tracing_core.primitives import (
    Primitive,
    batching_rules,
    jvp_rules,
    transpose_rules,
)

device_put_p = Primitive("device_put", multiple_results=True)
"""``device_put_p.bind(*leaves, devices=(...), srcs=(...), copy_semantics=(...),
may_alias=(...))``: one operand per leaf, each param a tuple with one entry per
leaf. ``devices[i]`` is ``None``, a Device, a lamina sharding or a Format."""


# --- the user functions ------------------------------------------------------------
def _is_dest_leaf(x: Any) -> bool:
    return (x is None or isinstance(x, (DeviceClass, PartitionSpec, Format))
            or is_sharding(x))


def device_put(x: Any, device: Any = None, *, src: Any = None, donate: Any = False,
               may_alias: Any = None) -> Any:
    """Puts every leaf of the pytree ``x`` on ``device`` (see the module docstring).

    ``donate=True`` gives up the input arrays (they are deleted once moved);
    ``may_alias=True`` lets the result share the input's buffers, including a
    host numpy buffer on CPU; ``may_alias=False`` always copies; the default
    reuses device buffers but snapshots host data. ``donate``, ``may_alias``,
    ``device`` and ``src`` may each be a pytree prefix of ``x``.
    """
    paths_leaves, treedef = tree_util.tree_flatten_with_path(x)
    leaves = [leaf for _, leaf in paths_leaves]
    names = ["x" + tree_util.keystr(path) for path, _ in paths_leaves]
    dests = _broadcast("device", device, x, len(leaves))
    sources = _broadcast("src", src, x, len(leaves))
    donates = _broadcast("donate", donate, x, len(leaves), bool_flag=True)
    aliases = _broadcast("may_alias", may_alias, x, len(leaves), bool_flag=True)
    dests = [_canonical_dest(d, name) for d, name in zip(dests, names)]
    sources = [_canonical_dest(s, name) for s, name in zip(sources, names)]
    semantics = [_copy_semantics(d, a, name) for d, a, name in zip(donates, aliases, names)]
    leaves = [_check_leaf(leaf, dest, name) for leaf, dest, name in zip(leaves, dests, names)]
    _leaf_names.names = names  # lets the eager impl name leaves in its errors
    try:
        with explicit_device_put():  # transfer guards let asked-for transfers through
            outs = device_put_p.bind(*leaves, devices=tuple(dests), srcs=tuple(sources),
                                     copy_semantics=tuple(semantics), may_alias=tuple(aliases))
    finally:
        _leaf_names.names = None
    return tree_util.tree_unflatten(treedef, outs)


class _LeafNames(threading.local):
    names: list[str] | None = None


_leaf_names = _LeafNames()


def _broadcast(what: str, prefix: Any, tree: Any, n: int, *, bool_flag: bool = False) -> list[Any]:
    if bool_flag and (prefix is None or isinstance(prefix, bool)):
        return [prefix] * n
    if _is_dest_leaf(prefix):
        return [prefix] * n
    try:
        return tree_util.broadcast_prefix(prefix, tree, is_leaf=_is_dest_leaf)
    except ValueError as e:
        # JAX's wording (code matches on it), then lamina's detail
        raise ValueError(f"device_put {what} specification must be a tree prefix of the "
                         f"corresponding value; {e}") from None


def _canonical_dest(dest: Any, name: str) -> Any:
    if dest is None or is_sharding(dest) or isinstance(dest, Format):
        if isinstance(dest, Format) and dest.sharding is None and dest.layout is not None:
            raise ValueError(f"device_put: argument {name}: a Format with a layout needs a "
                             "sharding")
        return dest
    if isinstance(dest, DeviceClass):
        if not any(dest.client is c for c in backends().values()):
            raise ValueError(f"device_put: argument {name}: device {dest!r} belongs to "
                             "another library's client, not to lamina's")
        return single_device_sharding(dest)
    if isinstance(dest, PartitionSpec):
        try:
            return resolve_partition_spec(dest)
        except ShardingError as e:
            raise ShardingError(f"device_put: argument {name}: {e}") from None
    raise TypeError(f"device_put: argument {name}: {dest!r} of type {type(dest).__name__} is "
                    "not a Device, a lamina Sharding, a Format or a PartitionSpec")


def _copy_semantics(donate: Any, may_alias: Any, name: str) -> Any:
    if donate and may_alias is False:
        raise ValueError(f"device_put: argument {name}: donate=True and may_alias=False "
                         "contradict each other")
    if donate:
        return DONATE_INPUT
    return ALWAYS_COPY if may_alias is False else REUSE_INPUT


def _check_leaf(leaf: Any, dest: Any, name: str) -> Any:
    """Checks ``leaf`` can go to ``dest``, naming it in the error; returns the
    leaf to bind (another library's array becomes its numpy value)."""
    if type(leaf) is Array:
        if leaf._arr.is_deleted():
            raise DeletedArrayError(deleted_message(leaf._arr, f"device_put: argument {name}"))
        aval = leaf.aval
    elif isinstance(leaf, Tracer):
        aval = leaf.aval
    elif type(leaf) is np.ndarray:
        if not dtypes.is_valid_array_dtype(leaf.dtype):
            host_array(leaf, name=name)  # raises the clear error
        _check_shape(leaf.shape, dest, name)
        return leaf
    elif type(leaf) is int:
        aval = ShapedArray((), host_array(leaf, name=name)[0].dtype)  # checks overflow
    elif type(leaf) is ArrayImplClass and is_sharding(leaf._sharding) and isinstance(
            leaf.aval, ShapedArray):
        return _check_leaf(Array(leaf), dest, name)  # a bare lamina buffer
    else:
        try:
            aval = get_aval(leaf)
        except TypeError:
            leaf = host_array(leaf, name=name)[0]  # e.g. a jax array; else a clear error
            aval = get_aval(leaf)
        if not dtypes.is_valid_array_dtype(aval.dtype):
            host_array(leaf, name=name)
    _check_shape(aval.shape, dest, name)
    return leaf


def _check_shape(shape: tuple[int, ...], dest: Any, name: str) -> None:
    sharding = dest.sharding if isinstance(dest, Format) else dest
    try:
        if sharding is not None:
            sharding._to_xla_hlo_sharding(len(shape))
            sharding.check_compatible_shape(tuple(shape))
        if isinstance(dest, Format) and isinstance(dest.layout, Layout):
            dest.layout.check_compatible_aval(tuple(shape))
    except (ShardingError, ValueError) as e:
        raise type(e)(f"device_put: argument {name} of shape {tuple(shape)}: {e}") from None


def device_get(x: Any) -> Any:
    """The pytree ``x`` with every Array replaced by its (read-only) numpy value.
    All transfers start before the first one is awaited."""
    leaves, treedef = tree_util.tree_flatten(x)
    with explicit_device_get():  # transfer guards let asked-for transfers through
        for leaf in leaves:
            if type(leaf) is Array:
                leaf.copy_to_host_async()
        values = [np.asarray(leaf) if type(leaf) is Array else leaf for leaf in leaves]
    return tree_util.tree_unflatten(treedef, values)


# --- the primitive's rules ---------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, devices: Sequence[Any], srcs: Sequence[Any],
                   copy_semantics: Sequence[Any], may_alias: Sequence[Any]) -> list[ShapedArray]:
    if not (len(avals) == len(devices) == len(srcs) == len(copy_semantics) == len(may_alias)):
        raise TypeError(f"device_put: {len(avals)} operands but {len(devices)} devices, "
                        f"{len(srcs)} srcs, {len(copy_semantics)} copy semantics")
    return [_moved_aval(a, d) for a, d in zip(avals, devices)]


def _moved_aval(aval: ShapedArray, dest: Any) -> ShapedArray:
    """``aval`` in the memory space of ``dest``'s memory kind (a destination
    without a sharding leaves the value's space as it is)."""
    sharding = dest.sharding if isinstance(dest, Format) else dest
    if sharding is None:
        return aval
    space = kind_to_space(sharding.memory_kind)
    return aval if aval.memory_space is space else aval.update(memory_space=space)


def _impl(*xs: Any, devices: Sequence[Any], srcs: Sequence[Any],
          copy_semantics: Sequence[Any], may_alias: Sequence[Any]) -> list[Any]:
    """Eager device_put: every leaf in one ``shard_args`` call."""
    out: list[Any] = list(xs)
    todo: list[int] = []
    shardings: list[Any] = []
    layouts: list[Any] = []
    committed: list[bool] = []
    for i, (x, dest) in enumerate(zip(xs, devices)):
        is_array = type(x) is Array
        if dest is None or (isinstance(dest, Format) and dest.sharding is None):
            if is_array and copy_semantics[i] == REUSE_INPUT and (
                    dest is None or dest.layout is None):
                continue  # already where it belongs
            sharding = x.sharding if is_array else single_device_sharding(default_device())
            commit = x.committed if is_array else False
        else:
            sharding = dest.sharding if isinstance(dest, Format) else dest
            commit = True
        todo.append(i)
        shardings.append(sharding)
        layouts.append(dest.layout if isinstance(dest, Format) else None)
        committed.append(commit)
    if not todo:
        return out
    impls = shard_args([xs[i] for i in todo], shardings,
                       layouts if any(lay is not None for lay in layouts) else None,
                       [copy_semantics[i] for i in todo], committed=committed,
                       zero_copy=[may_alias[i] is True for i in todo],
                       arg_names=[_leaf_name(i, len(xs)) for i in todo])
    for i, impl in zip(todo, impls):
        x = xs[i]
        out[i] = x if type(x) is Array and x._arr is impl else Array(impl)
    return out


def _leaf_name(i: int, n: int) -> str:
    names = _leaf_names.names
    return names[i] if names is not None and len(names) == n else f"#{i}"


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], *, devices: Sequence[Any],
         srcs: Sequence[Any], copy_semantics: Sequence[Any],
         may_alias: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    params = dict(devices=devices, srcs=srcs, copy_semantics=copy_semantics,
                  may_alias=may_alias)
    primals_out = device_put_p.bind(*primals, **params)
    live = [i for i, t in enumerate(tangents) if type(t) is not ad_util.Zero]
    tangents_out = list(tangents)
    if live:
        moved = device_put_p.bind(
            *(tangents[i] for i in live), devices=tuple(devices[i] for i in live),
            srcs=tuple(srcs[i] for i in live),
            copy_semantics=tuple(_undonated(copy_semantics[i]) for i in live),
            may_alias=tuple(may_alias[i] for i in live))
        for i, t in zip(live, moved):
            tangents_out[i] = t
    return primals_out, tangents_out


def _undonated(cs: Any) -> Any:
    return REUSE_INPUT if cs == DONATE_INPUT else cs


def _transpose(cts: Sequence[Any], *invals: Any, devices: Sequence[Any], srcs: Sequence[Any],
               copy_semantics: Sequence[Any], may_alias: Sequence[Any]) -> list[Any]:
    results: list[Any] = [None] * len(invals)
    live: list[int] = []
    for i, (ct, x) in enumerate(zip(cts, invals)):
        if not is_undefined_primal(x):
            continue
        if type(ct) is ad_util.Zero:
            results[i] = ad_util.Zero(x.aval)
        else:
            live.append(i)
    if live:
        moved = device_put_p.bind(
            *(cts[i] for i in live), devices=tuple(srcs[i] for i in live),
            srcs=tuple(devices[i] for i in live),
            copy_semantics=tuple(ALWAYS_COPY if copy_semantics[i] != REUSE_INPUT
                                 else REUSE_INPUT for i in live),
            may_alias=tuple(None for _ in live))
        for i, ct in zip(live, moved):
            results[i] = ct
    return results


def _batch(batched_args: Sequence[Any], batch_dims: Sequence[int | None], *,
           devices: Sequence[Any], srcs: Sequence[Any], copy_semantics: Sequence[Any],
           may_alias: Sequence[Any]) -> tuple[list[Any], list[int | None]]:
    new_devices = tuple(_batched_dest(d, bd) for d, bd in zip(devices, batch_dims))
    new_srcs = tuple(_batched_dest(s, bd) for s, bd in zip(srcs, batch_dims))
    outs = device_put_p.bind(*batched_args, devices=new_devices, srcs=new_srcs,
                             copy_semantics=tuple(copy_semantics), may_alias=tuple(may_alias))
    return outs, list(batch_dims)


def _batched_dest(dest: Any, bd: int | None) -> Any:
    """The destination of a value that gained a batch axis at ``bd``."""
    if bd is None or dest is None or isinstance(dest, SingleDeviceSharding):
        return dest
    if isinstance(dest, Format):
        layout = dest.layout
        if isinstance(layout, Layout):
            m2m = tuple(m + 1 if m >= bd else m for m in layout.major_to_minor)
            layout = Layout((bd,) + m2m, layout.tiling, layout.sub_byte_element_size_in_bits)
        return Format(layout, _batched_dest(dest.sharding, bd))
    if isinstance(dest, NamedSharding):
        parts = tuple(dest.spec) + (None,) * max(0, bd - len(dest.spec))
        return dest.with_spec(PartitionSpec(*parts[:bd], None, *parts[bd:]))
    if isinstance(dest, PmapSharding):
        pspec = dest.sharding_spec
        if pspec.sharded_axis is None:
            return dest
        axis = pspec.sharded_axis + (1 if bd <= pspec.sharded_axis else 0)
        return PmapSharding(dest._internal_device_list,
                            PmapShardingSpec(pspec.num_shards, axis, pspec.chunked),
                            memory_kind=dest.memory_kind)
    if isinstance(dest, GSPMDSharding) and dest.is_fully_replicated:
        return dest
    raise ShardingError(f"device_put under vmap: cannot add a batch dimension to {dest!r}; "
                        "use a NamedSharding")


def _lowering(ctx: Any, *operands: Any, devices: Sequence[Any], srcs: Sequence[Any],
              copy_semantics: Sequence[Any], may_alias: Sequence[Any]) -> list[Any]:
    """Inside a compiled program device_put moves nothing: the program's
    input and output shardings decide placement, so it lowers to its operands."""
    del ctx, devices, srcs, copy_semantics, may_alias
    return list(operands)


device_put_p.def_abstract_eval(_abstract_eval)
own_space_primitives.add(device_put_p)  # its destinations say where results live
device_put_p.def_impl(_impl)
jvp_rules[device_put_p] = _jvp
transpose_rules[device_put_p] = _transpose
batching_rules[device_put_p] = _batch
register_lowering(device_put_p, _lowering)

# jnp's creation functions place their results (their ``device=``) with it
jnp_creation.device_put_impl[:] = [device_put]
