"""``lamina.sharding``: devices meshes and shardings (JAX's ``jax.sharding`` names)."""

import numpy as np

from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    SingleDeviceSharding,
    get_current_mesh,
)
from lamina_interpreters_pxla.sharding import ShardingBase as Sharding
from lamina_sharded_jit import with_sharding_constraint

__all__ = [
    "GSPMDSharding", "Mesh", "NamedSharding", "PartitionSpec", "PmapSharding", "Sharding",
    "SingleDeviceSharding", "get_current_mesh", "with_sharding_constraint",
    "AbstractMesh", "get_abstract_mesh",
]


class AbstractMesh:
    """A mesh's axis names and sizes without its devices (JAX's
    ``jax.sharding.AbstractMesh``): what tracing needs to know of a mesh.
    ``AbstractMesh((), ())`` is the empty mesh (``empty`` is True)."""

    __slots__ = ("axis_sizes", "axis_names")

    def __init__(self, axis_sizes: tuple[int, ...], axis_names: tuple[str, ...],
                 axis_types: object = None):
        del axis_types  # lamina's meshes have one kind of axis
        if len(axis_sizes) != len(axis_names):
            raise ValueError(f"AbstractMesh: {len(axis_sizes)} axis sizes for "
                             f"{len(axis_names)} axis names {tuple(axis_names)}")
        self.axis_sizes = tuple(int(s) for s in axis_sizes)
        self.axis_names = tuple(axis_names)

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple[tuple[str, int], ...]:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return int(np.prod(self.axis_sizes, dtype=np.int64))

    @property
    def empty(self) -> bool:
        return not self.axis_names

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, AbstractMesh) and self.axis_sizes == other.axis_sizes
                and self.axis_names == other.axis_names)

    def __hash__(self) -> int:
        return hash((self.axis_sizes, self.axis_names))

    def __repr__(self) -> str:
        return f"AbstractMesh({', '.join(f'{n!r}: {s}' for n, s in self.shape_tuple)})"


def get_abstract_mesh() -> AbstractMesh:
    """The abstract form of the mesh of the enclosing ``with mesh:`` block, or
    the empty mesh outside one."""
    mesh = get_current_mesh()
    if mesh is None:
        return AbstractMesh((), ())
    return AbstractMesh(tuple(mesh.axis_sizes), tuple(mesh.axis_names))
