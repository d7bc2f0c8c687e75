"""What the named axes of collectives mean in the module being built.

Two modes, as in XLA:

- ``ReplicaAxisContext`` (pmap): the program runs once per *replica*; each
  named axis of ``axis_env`` (outermost first) splits the replicas, so replica
  ``r`` has index ``(r // prod(inner sizes)) % size`` along an axis.
  Collectives name replica groups; ``axis_index`` reads ``stablehlo.replica_id``.
- ``ShardingAxisContext`` (SPMD jit): one program over ``mesh``'s partitions.
  Collectives over the ``manual_axes`` use partition ids (logical mesh
  positions) with a channel handle and ``use_global_device_ids``;
  ``axis_index`` reads ``stablehlo.partition_id``.

``groups(names)`` gives the device groups a collective over ``names`` spans,
``axis_index_divisor(name)`` what ``axis_index`` divides by before the modulo.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from lamina_mlir_lowering.sharding import MeshShape

__all__ = ["ReplicaAxisContext", "ShardingAxisContext", "AxisContext", "UnboundAxisError",
           "axis_groups"]


class UnboundAxisError(NameError):
    """A collective names an axis the module's axis context does not bind."""


def axis_groups(mesh_sizes: Sequence[int], positions: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Device groups of a collective over the mesh axes at ``positions``.

    Devices are numbered row-major over ``mesh_sizes``; each group holds the
    devices that differ only along the chosen axes, ordered by their index
    along those axes (major to minor, in the order given)."""
    iota = np.arange(math.prod(mesh_sizes)).reshape(tuple(mesh_sizes))
    moved = np.moveaxis(iota, list(positions), list(range(len(positions))))
    span = math.prod(mesh_sizes[p] for p in positions)
    groups = moved.reshape(span, -1).T
    return tuple(tuple(int(i) for i in g) for g in groups)


def _as_names(names: Hashable | Sequence[Hashable]) -> tuple[Hashable, ...]:
    return tuple(names) if isinstance(names, (tuple, list)) else (names,)


@dataclass(frozen=True)
class ReplicaAxisContext:
    """Replica mode: ``axis_env`` is ``((name, size), ...)``, outermost first.

    ``num_replicas`` defaults to the product of the sizes; a larger multiple
    adds an unnamed innermost axis of replicas (as JAX's axis environment)."""

    axis_env: tuple[tuple[Hashable, int], ...]
    num_replicas: int | None = None

    def __post_init__(self) -> None:
        env = tuple((name, int(size)) for name, size in self.axis_env)
        object.__setattr__(self, "axis_env", env)
        names = [n for n, _ in env]
        if len(set(names)) != len(names):
            raise ValueError(f"ReplicaAxisContext: axis names {names} repeat")
        total = math.prod(s for _, s in env)
        if self.num_replicas is None:
            object.__setattr__(self, "num_replicas", total)
        elif self.num_replicas % total:
            raise ValueError(f"ReplicaAxisContext: num_replicas={self.num_replicas} is not "
                             f"a multiple of the axis sizes' product {total}")

    @property
    def axis_names(self) -> tuple[Hashable, ...]:
        return tuple(n for n, _ in self.axis_env)

    def _mesh(self) -> tuple[list[int], list[Hashable]]:
        # Extra replicas (num_replicas beyond the named axes) form an unnamed
        # innermost axis, as in JAX.
        sizes = [s for _, s in self.axis_env]
        names = [n for n, _ in self.axis_env]
        return [*sizes, self.total // math.prod(sizes)], [*names, None]

    @property
    def total(self) -> int:
        assert self.num_replicas is not None
        return self.num_replicas

    def _position(self, names: list[Hashable], name: Hashable) -> int:
        for i, n in enumerate(names[:-1]):
            if n == name:
                return i
        raise UnboundAxisError(f"unbound axis name: {name} (bound axes: {self.axis_names})")

    def axis_size(self, name: Hashable) -> int:
        sizes, names = self._mesh()
        return sizes[self._position(names, name)]

    def groups(self, names: Hashable | Sequence[Hashable]) -> tuple[tuple[int, ...], ...]:
        sizes, mesh_names = self._mesh()
        return axis_groups(sizes, [self._position(mesh_names, n) for n in _as_names(names)])

    def axis_index_divisor(self, name: Hashable) -> int:
        sizes, names = self._mesh()
        return math.prod(sizes[self._position(names, name) + 1:])


@dataclass(frozen=True)
class ShardingAxisContext:
    """SPMD mode over ``mesh``. ``manual_axes`` are the axes collectives may
    use (the program is per-device along them, as inside shard_map);
    ``None`` means all of the mesh's axes."""

    mesh: MeshShape
    manual_axes: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.manual_axes is None:
            object.__setattr__(self, "manual_axes", self.mesh.axis_names)
        else:
            object.__setattr__(self, "manual_axes", tuple(self.manual_axes))
            for a in self.manual_axes:
                if a not in self.mesh.axis_names:
                    raise ValueError(f"ShardingAxisContext: manual axis {a!r} is not in "
                                     f"mesh {self.mesh.axis_names}")

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(self.manual_axes or ())

    def _position(self, name: Hashable) -> int:
        if name not in (self.manual_axes or ()):
            raise UnboundAxisError(
                f"unbound axis name: {name} (manual axes of the mesh: {self.manual_axes})")
        return self.mesh.axis_names.index(name)

    def axis_size(self, name: Hashable) -> int:
        return self.mesh.axis_sizes[self._position(name)]

    def groups(self, names: Hashable | Sequence[Hashable]) -> tuple[tuple[int, ...], ...]:
        """Groups of partition ids: mesh positions mapped through the mesh's
        ``device_ids`` (positions in the program's device assignment)."""
        groups = axis_groups(self.mesh.axis_sizes, [self._position(n) for n in _as_names(names)])
        ids = self.mesh.device_ids
        if ids is None or self.mesh.is_iota():
            return groups
        return tuple(tuple(ids[i] for i in g) for g in groups)

    def axis_index_divisor(self, name: Hashable) -> int:
        return math.prod(self.mesh.axis_sizes[self._position(name) + 1:])

    def mesh_positions(self) -> tuple[int, ...] | None:
        """For each partition id, its row-major position in the mesh; None
        when they are the same (the mesh is in device-assignment order)."""
        ids = self.mesh.device_ids
        if ids is None or self.mesh.is_iota():
            return None
        positions = [0] * len(ids)
        for pos, pid in enumerate(ids):
            positions[pid] = pos
        return tuple(positions)


AxisContext = ReplicaAxisContext | ShardingAxisContext
