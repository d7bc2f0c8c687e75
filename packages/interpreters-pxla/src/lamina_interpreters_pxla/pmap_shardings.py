"""Where a pmap computation runs and how its arrays are laid out.

A pmap over an axis of size ``n`` whose body nests pmaps needing ``r``
replicas each runs ``n * r`` replicas, replica ``k`` on ``devices[k]``; the
entry ``i`` of a mapped input goes to replicas ``i*r .. i*r + r - 1``.

With chunked shards (the default) the layout is an ordinary mesh sharding:
``NamedSharding(Mesh(devices, (name,)), P(..., name))`` with the mapped axis
at the mapped position (a second, replicated mesh axis when ``r > 1``), and
``P()`` for broadcast (``None``) values. Without, it is the classic
rank-reducing ``PmapSharding``. The shardings are cached, so equal layouts
are the same objects and the dispatch path compares them by identity.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import Device
from lamina_interpreters_pxla.sharding import (
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    PmapShardingSpec,
)

__all__ = ["DEFAULT_MESH_AXIS", "REPLICA_MESH_AXIS", "addressable", "choose_devices",
           "mesh_axis_name", "PmapLayout"]

#: The mesh axis of a pmap whose axis name is not a string (or None).
DEFAULT_MESH_AXIS = "_pmap"
#: The mesh axis along which nested pmaps' replicas hold copies.
REPLICA_MESH_AXIS = "_pmap_replicas"


def mesh_axis_name(axis_name: Hashable) -> str:
    """The mesh axis that stands for the pmapped axis in chunked shardings."""
    if isinstance(axis_name, str) and axis_name != REPLICA_MESH_AXIS:
        return axis_name
    return DEFAULT_MESH_AXIS


def too_many_devices_message(needed: int, available: int) -> str:
    return (f"compiling computation that requires {needed} logical devices, but only "
            f"{available} XLA devices are available (num_replicas={needed})")


def choose_devices(local_replicas: int, num_processes: int,
                   devices: Sequence[Device] | None, backend: str | None,
                   name: str) -> tuple[Device, ...]:
    """The device of every replica, in replica order: the first
    ``local_replicas * num_processes`` of ``devices`` when given; else the
    first ``local_replicas`` local devices of each process of ``backend``, in
    process order. A clear error when there are not enough."""
    needed = local_replicas * num_processes
    if devices is not None:
        pool = tuple(devices)
        platforms = {d.platform for d in pool}
        if len(platforms) > 1:
            raise ValueError(f"pmap of {name}: devices must all be of one platform, got "
                             f"{sorted(platforms)}")
        if len({id(d) for d in pool}) != len(pool):
            raise ValueError(f"pmap of {name}: a device appears twice in devices={list(pool)}")
        if needed > len(pool):
            raise ValueError(f"pmap of {name}: {too_many_devices_message(needed, len(pool))}")
        return pool[:needed]
    chosen: list[Device] = []
    for process in range(num_processes):
        local = backends.local_devices(process if num_processes > 1 else None,
                                       backend=backend)
        if local_replicas > len(local):
            available = len(local) * num_processes
            raise ValueError(f"pmap of {name}: "
                             f"{too_many_devices_message(needed, available)}")
        chosen.extend(local[:local_replicas])
    return tuple(chosen)


def addressable(devices: Sequence[Device]) -> tuple[Device, ...]:
    """The devices of this process, in order."""
    return tuple(d for d in devices if d.process_index == d.client.process_index())


@functools.lru_cache(maxsize=1024)
def _mesh(devices: tuple[Device, ...], names: tuple[str, ...],
          shape: tuple[int, ...]) -> Mesh:
    return Mesh(np.array(devices, dtype=object).reshape(shape), names)


@functools.lru_cache(maxsize=4096)
def _named(devices: tuple[Device, ...], names: tuple[str, ...], shape: tuple[int, ...],
           spec: tuple[Any, ...]) -> NamedSharding:
    return NamedSharding(_mesh(devices, names, shape), PartitionSpec(*spec))


@functools.lru_cache(maxsize=4096)
def _pmap_sharding(devices: tuple[Device, ...], num_shards: int, axis: int | None
                   ) -> PmapSharding:
    return PmapSharding(devices, PmapShardingSpec(num_shards, axis, chunked=False))


class PmapLayout:
    """The devices and shardings of one pmap computation, as this process sees it.

    ``devices``: this process's replicas' devices, in replica order;
    ``axis_size``: this process's share ``n`` of the mapped axis;
    ``replication``: replicas per entry ``r``; ``chunked``: chunked shards or
    the classic layout. (In a multi-process pmap each process passes and gets
    its own entries: arrays on its own devices.)
    """

    __slots__ = ("devices", "axis_size", "replication", "chunked", "mesh_axis")

    def __init__(self, devices: tuple[Device, ...], axis_size: int, replication: int,
                 chunked: bool, axis_name: Hashable):
        if len(devices) != axis_size * replication:
            raise ValueError(f"PmapLayout: {len(devices)} devices for {axis_size} x "
                             f"{replication} replicas")
        self.devices = devices
        self.axis_size = axis_size
        self.replication = replication
        self.chunked = chunked
        self.mesh_axis = mesh_axis_name(axis_name)

    @property
    def stacked(self) -> bool:
        """True when the program's own layout differs from the arrays' (the
        classic layout with nested replicas: mapped values are repeated per
        replica going in, and one replica per entry is kept coming out)."""
        return not self.chunked and self.replication > 1

    def _mesh_names_and_shape(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        if self.replication == 1:
            return (self.mesh_axis,), (self.axis_size,)
        return (self.mesh_axis, REPLICA_MESH_AXIS), (self.axis_size, self.replication)

    def program_sharding(self, axis: int | None, ndim: int) -> Any:
        """The sharding of a value as the program takes or gives it (``ndim``:
        the rank of the stacked value)."""
        if self.chunked:
            names, shape = self._mesh_names_and_shape()
            if axis is None:
                return _named(self.devices, names, shape, ())
            spec = (None,) * axis + (self.mesh_axis,)
            return _named(self.devices, names, shape, spec)
        if axis is None:
            return _pmap_sharding(self.devices, len(self.devices), None)
        return _pmap_sharding(self.devices, len(self.devices), axis)

    def array_sharding(self, axis: int | None, ndim: int) -> Any:
        """The sharding of a value as the caller passes or gets it."""
        if not self.stacked:
            return self.program_sharding(axis, ndim)
        firsts = self.devices[::self.replication]
        if axis is None:
            return _pmap_sharding(self.devices, len(self.devices), None)
        return _pmap_sharding(firsts, self.axis_size, axis)
