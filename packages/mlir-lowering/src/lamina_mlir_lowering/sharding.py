"""Device-free descriptions of shardings, and their MLIR/HLO forms.

The lowering layer knows no devices: a sharding reaches it as a
``ShardingSpec`` over a ``MeshShape`` (axis names and sizes, and optionally
the order of device ids in the mesh). The runtime layer converts its
``NamedSharding`` into one of these. ``UNSPECIFIED`` (or ``None``) means "no
sharding annotation; let the compiler choose".

Forms produced:
- Shardy (the default): ``#sdy.sharding<@mesh, [{"x"}, {}]>`` referring to a
  module-level ``sdy.mesh @mesh = <["x"=4, "y"=2]>``;
- GSPMD (opt-in): the ``mhlo.sharding`` string in XLA's iota form, e.g.
  ``{devices=[4,1,2]<=[8] last_tile_dim_replicate}``, exactly as JAX prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from jaxlib import xla_client as xc

if TYPE_CHECKING:
    from jaxlib.mlir import ir

__all__ = ["MeshShape", "ShardingSpec", "Unspecified", "UNSPECIFIED", "ArgSharding",
           "is_unspecified"]


class Unspecified:
    """No sharding annotation: the compiler is free to choose."""

    _instance: Unspecified | None = None

    def __new__(cls) -> Unspecified:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSPECIFIED"

    def __reduce__(self) -> str:
        return "UNSPECIFIED"


UNSPECIFIED: Final = Unspecified()


@dataclass(frozen=True)
class MeshShape:
    """A logical device mesh without devices: ``axis_names[i]`` has
    ``axis_sizes[i]`` entries. ``device_ids`` optionally lists the device id at
    each mesh position (row-major); ``None`` means ids ``0..size-1`` in order."""

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    device_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axis_names", tuple(self.axis_names))
        object.__setattr__(self, "axis_sizes", tuple(int(s) for s in self.axis_sizes))
        if len(self.axis_names) != len(self.axis_sizes):
            raise ValueError(f"MeshShape: {len(self.axis_names)} axis_names "
                             f"{self.axis_names} for {len(self.axis_sizes)} axis_sizes")
        if len(set(self.axis_names)) != len(self.axis_names):
            raise ValueError(f"MeshShape: axis_names {self.axis_names} repeat a name")
        for name, size in zip(self.axis_names, self.axis_sizes):
            if not isinstance(name, str) or not name:
                raise TypeError(f"MeshShape: axis name {name!r} is not a non-empty str")
            if size < 1:
                raise ValueError(f"MeshShape: axis {name!r} has size {size} < 1")
        if self.device_ids is not None:
            ids = tuple(int(i) for i in self.device_ids)
            object.__setattr__(self, "device_ids", ids)
            if len(ids) != self.size or len(set(ids)) != len(ids):
                raise ValueError(f"MeshShape: device_ids {ids} must be {self.size} distinct ids")

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    def axis_size(self, name: str) -> int:
        try:
            return self.axis_sizes[self.axis_names.index(name)]
        except ValueError:
            raise ValueError(f"axis {name!r} is not in mesh {self.axis_names}") from None

    def is_iota(self) -> bool:
        return self.device_ids is None or self.device_ids == tuple(range(self.size))

    def to_sdy_mesh_attr(self) -> ir.Attribute:
        """``<["x"=4, "y"=2]>`` (with device ids when not in iota order)."""
        # Imported here: the runtime's shardings use these classes without
        # MLIR (a program from the persistent trace cache loads no dialects).
        from jaxlib.mlir.dialects import sdy

        axes = [sdy.MeshAxisAttr.get(n, s) for n, s in zip(self.axis_names, self.axis_sizes)]
        ids = [] if self.is_iota() else list(self.device_ids or ())
        return sdy.MeshAttr.get(axes, ids)


@dataclass(frozen=True)
class ShardingSpec:
    """How an array of rank ``len(dims)`` is laid out over ``mesh``.

    ``dims[i]`` lists the mesh axes dimension ``i`` is split over (major to
    minor); ``()`` leaves it whole. Axes used by no dimension replicate the
    array; ``replicated`` names axes that are *explicitly* replicated (Shardy's
    ``replicated_axes``: the partitioner may not shard further along them)."""

    mesh: MeshShape
    dims: tuple[tuple[str, ...], ...]
    replicated: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        dims = tuple(tuple(d) if isinstance(d, (tuple, list)) else (d,) for d in self.dims)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "replicated", tuple(self.replicated))
        used: list[str] = []
        for axes in dims + (self.replicated,):
            for axis in axes:
                if axis not in self.mesh.axis_names:
                    raise ValueError(f"ShardingSpec: axis {axis!r} is not in mesh "
                                     f"{self.mesh.axis_names}")
                if axis in used:
                    raise ValueError(f"ShardingSpec: axis {axis!r} is used twice in {self}")
                used.append(axis)

    @staticmethod
    def replicate(mesh: MeshShape, ndim: int) -> ShardingSpec:
        return ShardingSpec(mesh, ((),) * ndim)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    def tile_counts(self) -> tuple[int, ...]:
        """How many pieces each dimension is cut into."""
        return tuple(math.prod(self.mesh.axis_size(a) for a in axes) for axes in self.dims)

    def is_fully_replicated(self) -> bool:
        return all(c == 1 for c in self.tile_counts())

    def shard_shape(self, global_shape: Sequence[int]) -> tuple[int, ...]:
        """The per-device shape of an array of ``global_shape``."""
        self.check_rank(len(global_shape), "shard_shape")
        out = []
        for size, count in zip(global_shape, self.tile_counts()):
            if size % count:
                raise ValueError(f"ShardingSpec.shard_shape: dimension of size {size} "
                                 f"does not split evenly into {count} shards ({self})")
            out.append(size // count)
        return tuple(out)

    def global_shape(self, shard_shape: Sequence[int]) -> tuple[int, ...]:
        self.check_rank(len(shard_shape), "global_shape")
        return tuple(s * c for s, c in zip(shard_shape, self.tile_counts()))

    def check_rank(self, ndim: int, where: str) -> None:
        if ndim != len(self.dims):
            raise ValueError(f"{where}: sharding {self} has {len(self.dims)} dimensions "
                             f"for an array of rank {ndim}")

    # --- MLIR / HLO forms ---------------------------------------------------
    def to_sdy_attr(self, mesh_name: str = "mesh") -> ir.Attribute:
        """``#sdy.sharding<@mesh_name, [{"x"}, {}]>``; every dimension closed."""
        from jaxlib.mlir.dialects import sdy  # see to_sdy_mesh_attr

        dims = [sdy.DimensionShardingAttr.get([sdy.AxisRefAttr.get(a) for a in axes],
                                              is_closed=True) for axes in self.dims]
        replicated = [sdy.AxisRefAttr.get(a) for a in self.replicated]
        return sdy.TensorShardingAttr.get(mesh_name, dims, replicated)

    def to_hlo_sharding(self) -> xc.HloSharding:
        """XLA's ``HloSharding`` in iota form (tile assignment positions index
        the mesh's device list, so device ids don't enter)."""
        tiles = list(self.tile_counts())
        if all(t == 1 for t in tiles):
            return xc.HloSharding.replicate()
        used = [a for axes in self.dims for a in axes]
        unused = [a for a in self.mesh.axis_names if a not in used]
        names = self.mesh.axis_names
        perm = [names.index(a) for a in used + unused]
        replicated_size = math.prod(self.mesh.axis_size(a) for a in unused)
        subgroups = []
        if replicated_size > 1:
            tiles.append(replicated_size)
            subgroups = [xc.OpSharding.Type.REPLICATED]
        if perm == sorted(perm):
            return xc.HloSharding.iota_tile(tiles, [self.mesh.size], [0], subgroups)
        return xc.HloSharding.iota_tile(tiles, list(self.mesh.axis_sizes), perm, subgroups)

    def to_hlo_sharding_str(self) -> str:
        """``{devices=[4,2]<=[8]}``-style string, as JAX prints it."""
        return str(self.to_hlo_sharding())

    def __str__(self) -> str:
        dims = ", ".join("{" + ", ".join(repr(a) for a in axes) + "}" for axes in self.dims)
        rep = f", replicated={self.replicated}" if self.replicated else ""
        return f"ShardingSpec([{dims}] over {dict(zip(self.mesh.axis_names, self.mesh.axis_sizes))}{rep})"


ArgSharding = ShardingSpec | Unspecified | None


def is_unspecified(s: object) -> bool:
    return s is None or isinstance(s, Unspecified)
