"""Device-free meshes and the shardings that live in types.

- ``AxisType``: how a mesh axis is partitioned. ``Explicit`` axes appear in the
  types of values (``float32[8@X,4]``) and every operation decides its result's
  sharding from its operands' by a rule, at trace time; ``Auto`` axes are left
  to the compiler; ``Manual`` axes are those a ``shard_map`` body runs per
  device along.
- ``AbstractMesh``: axis names, sizes and types without devices (what tracing
  sees). ``use_abstract_mesh(mesh)`` makes one current for a block (``set_mesh``
  does, with the concrete mesh); ``get_abstract_mesh()`` reads it.
- ``TypeSharding``: the sharding of an aval, over an ``AbstractMesh``: per
  dimension, the Explicit axes it is split over.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["AxisType", "AbstractDevice", "AbstractMesh", "TypeSharding", "get_abstract_mesh",
           "use_abstract_mesh", "EMPTY_MESH"]


class AxisType(enum.Enum):
    """How a mesh axis is partitioned: ``Auto`` (by the compiler),
    ``Explicit`` (in the types, by each operation's sharding rule) or
    ``Manual`` (by hand, inside ``shard_map``)."""

    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class AbstractDevice:
    """What an abstract mesh knows of its devices: their kind and platform."""

    device_kind: str
    num_cores: int | None
    platform: str

    def __repr__(self) -> str:
        return f"AbstractDevice({self.fields_str()})"

    def fields_str(self) -> str:
        """``device_kind=cpu, num_cores=None, platform=cpu``, as JAX's reprs
        show a device."""
        return (f"device_kind={self.device_kind}, num_cores={self.num_cores}, "
                f"platform={self.platform}")


#: Whether a mesh with an Explicit axis was ever made: only then can a value's
#: type carry a sharding, so only then do array avals look for one.
explicit_meshes_made: list[bool] = [False]


def _axis_types(types: Any, n: int) -> tuple[AxisType, ...]:
    if types is None:
        return (AxisType.Auto,) * n
    if isinstance(types, AxisType):
        return (types,) * n
    out = tuple(types)
    if len(out) != n or not all(isinstance(t, AxisType) for t in out):
        raise ValueError(f"axis_types must be an AxisType or {n} of them (one per axis), got "
                         f"{types!r}")
    return out


class AbstractMesh:
    """A mesh's axis names, sizes and types, without devices."""

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[str],
                 axis_types: AxisType | Sequence[AxisType] | None = None, *,
                 abstract_device: AbstractDevice | None = None):
        self.axis_sizes: tuple[int, ...] = tuple(int(s) for s in axis_sizes)
        self.axis_names: tuple[str, ...] = tuple(axis_names)
        if len(self.axis_sizes) != len(self.axis_names):
            raise ValueError(f"AbstractMesh: {len(self.axis_sizes)} axis sizes "
                             f"{self.axis_sizes} for {len(self.axis_names)} names "
                             f"{self.axis_names}")
        self.axis_types = _axis_types(axis_types, len(self.axis_names))
        self.abstract_device = abstract_device
        self._key = (self.axis_sizes, self.axis_names, self.axis_types)
        if AxisType.Explicit in self.axis_types:
            explicit_meshes_made[0] = True

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple[tuple[str, int], ...]:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        size = 1
        for s in self.axis_sizes:
            size *= s
        return size

    @property
    def empty(self) -> bool:
        return not self.axis_names

    def _names_of(self, kind: AxisType) -> tuple[str, ...]:
        return tuple(n for n, t in zip(self.axis_names, self.axis_types) if t is kind)

    @property
    def explicit_axes(self) -> tuple[str, ...]:
        return self._names_of(AxisType.Explicit)

    @property
    def are_all_axes_explicit(self) -> bool:
        """Every axis Explicit (then a value's type says all of its layout)."""
        return all(t is AxisType.Explicit for t in self.axis_types)

    @property
    def auto_axes(self) -> tuple[str, ...]:
        return self._names_of(AxisType.Auto)

    @property
    def manual_axes(self) -> tuple[str, ...]:
        return self._names_of(AxisType.Manual)

    def update_axis_types(self, changes: dict[str, AxisType]) -> AbstractMesh:
        """The mesh with the types of the named axes replaced."""
        types = tuple(changes.get(n, t) for n, t in zip(self.axis_names, self.axis_types))
        return AbstractMesh(self.axis_sizes, self.axis_names, types,
                            abstract_device=self.abstract_device)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbstractMesh) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        """``AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto))``, with
        ``, device_kind=cpu, num_cores=None, platform=cpu`` when it knows its
        devices (a concrete mesh's), as JAX's."""
        axes = ", ".join(f"'{n}': {s}" for n, s in zip(self.axis_names, self.axis_sizes))
        device = "" if self.abstract_device is None else f", {self.abstract_device.fields_str()}"
        return f"AbstractMesh({axes or '()'}, axis_types={self.axis_types}{device})"


EMPTY_MESH = AbstractMesh((), ())


class _MeshState(threading.local):
    def __init__(self) -> None:
        self.stack: list[AbstractMesh] = []


_state = _MeshState()


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh of the innermost ``set_mesh`` / ``use_abstract_mesh``
    (an empty mesh outside them)."""
    return _state.stack[-1] if _state.stack else EMPTY_MESH


@contextmanager
def use_abstract_mesh(mesh: AbstractMesh) -> Iterator[AbstractMesh]:
    """Makes ``mesh`` the current abstract mesh for the block."""
    if not isinstance(mesh, AbstractMesh):
        raise TypeError(f"use_abstract_mesh: expected an AbstractMesh, got {mesh!r}")
    _state.stack.append(mesh)
    try:
        yield mesh
    finally:
        _state.stack.pop()


def push_abstract_mesh(mesh: AbstractMesh) -> None:
    """``use_abstract_mesh`` without the block (``set_mesh`` called as a statement)."""
    _state.stack.append(mesh)


def pop_abstract_mesh() -> None:
    _state.stack.pop()


Spec = tuple[tuple[str, ...], ...]

#: Whether any type has carried a sharding in this process: tracing consults
#: the sharding rules only from then on (a program without Explicit axes pays
#: nothing for them).
types_sharded: list[bool] = [False]


@dataclass(frozen=True)
class TypeSharding:
    """The sharding in a value's type: over ``mesh``, dimension ``d`` split
    over the Explicit axes ``spec[d]``."""

    mesh: AbstractMesh
    spec: Spec

    def __post_init__(self) -> None:
        if any(self.spec):
            types_sharded[0] = True

    def dim_str(self, d: int, size: int) -> str:
        axes = self.spec[d] if d < len(self.spec) else ()
        if not axes:
            return str(size)
        if len(axes) == 1:
            return f"{size}@{axes[0]}"
        return f"{size}@({','.join(axes)})"

    def partition_spec_str(self) -> str:
        parts = []
        for axes in self.spec:
            parts.append("None" if not axes else repr(axes[0]) if len(axes) == 1
                         else repr(tuple(axes)))
        return f"P({parts[0]},)" if len(parts) == 1 else f"P({', '.join(parts)})"

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.partition_spec_str()})"

    @property
    def is_replicated(self) -> bool:
        return not any(self.spec)

    @property
    def is_fully_replicated(self) -> bool:
        """JAX's name (``NamedSharding.is_fully_replicated``) for :attr:`is_replicated`."""
        return not any(self.spec)

    @property
    def memory_kind(self) -> None:
        """A type's sharding names no memory (JAX's abstract shardings: None)."""
        return None


def partition(axes: Sequence[str]) -> Any:
    """One dimension's entry of a ``PartitionSpec`` as JAX keeps it: None, an
    axis name, or a tuple of names."""
    return None if not axes else axes[0] if len(axes) == 1 else tuple(axes)


def replicated(mesh: AbstractMesh, ndim: int) -> TypeSharding:
    """The sharding in the type of an ``ndim``-dimensional value split over no
    axis of ``mesh``: what ``typeof`` shows for a value whose type carries none
    (JAX types every value over its mesh, replicated when nothing splits it)."""
    return TypeSharding(mesh, ((),) * ndim)


def type_sharding(mesh: AbstractMesh, spec: Sequence[Sequence[str] | None], ndim: int
                  ) -> TypeSharding | None:
    """The type sharding over ``mesh`` keeping only its Explicit axes; None when
    nothing is left (the type then carries no sharding)."""
    explicit = set(mesh.explicit_axes)
    dims = tuple(tuple(a for a in (axes or ()) if a in explicit) for axes in spec)
    dims = dims + ((),) * (ndim - len(dims))
    if not any(dims):
        return None
    return TypeSharding(mesh, dims[:ndim])
