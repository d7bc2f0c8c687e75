"""Exchanging data between the processes of a multi-process run.

- :func:`process_allgather`: every process's value of a pytree, on every process
  (stacked or concatenated), or the whole value of a global Array;
- :func:`broadcast_one_to_all`: one process's value on every process;
- :func:`assert_equal`: a check that every process holds the same values;
- :func:`sync_global_devices`: a barrier over every process and device.

The data moves on the devices, through XLA's collectives (gloo on CPU): a
process's value becomes its block of a global Array over a
``(processes, local_devices)`` mesh, which an identity program reshards to
replicated. The barrier goes through the coordination service, with a
timeout, so a process that died is an error naming the barrier instead of a
hang. In a single process everything is local.
"""

from __future__ import annotations

import itertools
import threading
import time
import zlib
from typing import Any

import numpy as np

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.multihost import make_array_from_process_local_data
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    PartitionSpec,
)
from lamina_interpreters_pxla.transfer import host_array, shard_args
from lamina_linear_util import tree_util


class ProcessSyncError(RuntimeError):
    """The processes of a run could not be synchronized (one failed or is late)."""


#: what went wrong with the run, once a barrier failed (``None`` while healthy)
_peer_failure: list[str] = []


def peer_failure() -> str | None:
    """Why the run is broken (a failed barrier, a lost process), or None."""
    return _peer_failure[0] if _peer_failure else None


def record_peer_failure(reason: str) -> None:
    """Marks the run broken (the first reason is kept); ``lamina.distributed``
    calls it when a process stops sending heartbeats."""
    if not _peer_failure:
        _peer_failure.append(reason)


def _process_count() -> int:
    return backends.process_count()


def process_mesh() -> Mesh:
    """All devices as a ``(processes, local_devices)`` mesh, row ``p`` holding
    process ``p``'s devices."""
    count = _process_count()
    rows = [backends.local_devices(process_index=p) for p in range(count)]
    sizes = {len(r) for r in rows}
    if len(sizes) != 1:
        raise ValueError("multihost_utils needs the same number of devices in every process, "
                         f"got {[len(r) for r in rows]}")
    return Mesh(np.array(rows, dtype=object), ("processes", "local_devices"))


# --- allgather ------------------------------------------------------------------------------
def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Gathers a pytree from every process; returns numpy arrays.

    A host value (numpy array, scalar, fully addressable Array) of the same
    shape on every process becomes ``[value of process 0, value of process 1,
    ...]``: stacked on a new axis 0 (``tiled=False``) or concatenated along
    axis 0 (``tiled=True``; scalars are always stacked). A global Array (not
    fully addressable) becomes its whole value, which needs ``tiled=True``.
    """
    paths_leaves, treedef = tree_util.tree_flatten_with_path(in_tree)
    out = [_allgather_leaf(leaf, tiled, f"in_tree{tree_util.keystr(path)}")
           for path, leaf in paths_leaves]
    return tree_util.tree_unflatten(treedef, out)


def _allgather_leaf(x: Any, tiled: bool, name: str) -> np.ndarray[Any, Any]:
    if type(x) is Array and not x.is_fully_addressable:
        if not tiled:
            raise ValueError(f"process_allgather: {name} is a global Array (not fully "
                             "addressable); gathering it gives its whole value and needs "
                             "tiled=True")
        return _replicated_value(x)
    host, _ = host_array(np.asarray(x) if type(x) is Array else x,
                         what="process_allgather", name=name)
    if host.ndim == 0 or not tiled:
        host = host[None]
    if _process_count() == 1:
        return np.asarray(host)
    mesh = process_mesh()
    blocks = make_array_from_process_local_data(
        NamedSharding(mesh, PartitionSpec("processes")), host)
    return _replicated_value(blocks)


def _replicated_value(x: Array) -> np.ndarray[Any, Any]:
    """The whole value of a global Array (every process gets all of it)."""
    sharding = x.sharding
    if isinstance(sharding, NamedSharding):
        replicated: Any = NamedSharding(sharding.mesh, PartitionSpec(),
                                        memory_kind=sharding.memory_kind)
    else:
        replicated = GSPMDSharding.get_replicated(sharding._internal_device_list,
                                                  memory_kind=sharding.memory_kind)
    impl, = shard_args([x], [replicated], what="process_allgather")
    return np.array(Array(impl).addressable_data(0))


# --- broadcast and equality ------------------------------------------------------------------
def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """Every process gets the source process's pytree (numpy arrays).

    The source is process 0 unless ``is_source`` says otherwise; exactly one
    process must be the source, and every process passes values of the same
    shapes and dtypes.
    """
    if _process_count() == 1:
        return tree_util.tree_map(lambda x: np.asarray(host_array(x)[0]), in_tree)
    if is_source is None:
        is_source = backends.process_index() == 0
    flags = process_allgather(np.int32(bool(is_source)))
    sources = [p for p, flag in enumerate(flags.tolist()) if flag]
    if len(sources) != 1:
        raise ValueError(f"broadcast_one_to_all: exactly one process must be the source, but "
                         f"processes {sources} passed is_source=True")
    gathered = process_allgather(in_tree)
    return tree_util.tree_map(lambda g: g[sources[0]], gathered)


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """Raises AssertionError unless every process passes equal values.

    Global Arrays are one value by construction and are not compared.
    """
    leaves = [x for x in tree_util.tree_leaves(in_tree)
              if not (type(x) is Array and not x.is_fully_addressable)]
    gathered = process_allgather(leaves)
    for i, (mine, everyone) in enumerate(zip(leaves, gathered)):
        mine_host = np.asarray(everyone[backends.process_index()])
        differing = [p for p in range(len(everyone))
                     if not np.array_equal(everyone[p], mine_host, equal_nan=True)]
        if differing:
            raise AssertionError(
                f"{fail_message or 'assert_equal'}: leaf {i} differs between processes: "
                f"process {backends.process_index()} has {np.asarray(mine)!r}, processes "
                f"{differing} have other values")


# --- barrier ---------------------------------------------------------------------------------
_barrier_counts: dict[str, itertools.count[int]] = {}
_barrier_lock = threading.Lock()

#: the default barrier timeout, in seconds
DEFAULT_SYNC_TIMEOUT = 300.0


def sync_global_devices(name: str, *, timeout_seconds: float | None = None) -> None:
    """A barrier across every process and device of the run, called ``name``.

    Every process must call it with the same ``name``, in the same order. A
    process that does not arrive within ``timeout_seconds`` (default 300) — it
    died, hangs, or passed another name — makes the others raise
    :class:`ProcessSyncError` naming the barrier; the run is then marked broken
    (``peer_failure()``).
    """
    if not isinstance(name, str):
        raise TypeError(f"sync_global_devices: name must be a str, got {name!r}")
    timeout = DEFAULT_SYNC_TIMEOUT if timeout_seconds is None else float(timeout_seconds)
    settings = backends.distributed_settings()
    if settings is not None and _process_count() > 1:
        broken = peer_failure()
        if broken is not None:  # waiting could only time out
            raise ProcessSyncError(f"sync_global_devices({name!r}): the run is broken: {broken}")
        _coordination_barrier(settings.client, name, timeout)
        _device_barrier(name)


def _coordination_barrier(client: Any, name: str, timeout: float) -> None:
    with _barrier_lock:
        counter = _barrier_counts.setdefault(name, itertools.count())
        n = next(counter)
    barrier_id = f"lamina/sync_global_devices/{name}/{n}"
    start = time.monotonic()
    try:
        client.wait_at_barrier(barrier_id, max(1, int(timeout * 1000)))
    except Exception as e:
        waited = time.monotonic() - start
        reason = (f"sync_global_devices({name!r}): not every process reached the barrier "
                  f"(this process waited {waited:.1f}s of its timeout_seconds={timeout:g}; "
                  f"the coordination service times a barrier from the first process to "
                  f"reach it, with that process's timeout). A process failed, is slow, or "
                  f"called it with another name. jaxlib says: {_first_lines(str(e), 4)}")
        record_peer_failure(reason)
        raise ProcessSyncError(reason) from e


def _device_barrier(name: str) -> None:
    """Runs a collective over every device, which also checks the name agrees."""
    digest = np.uint32(zlib.crc32(name.encode()))
    assert_equal(digest, f"sync_global_devices name mismatch ({name!r})")


def _first_lines(text: str, n: int) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:n] if line.strip())

