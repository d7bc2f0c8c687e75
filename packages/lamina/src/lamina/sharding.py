"""``lamina.sharding``: devices meshes and shardings (JAX's ``jax.sharding`` names)."""

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
]
