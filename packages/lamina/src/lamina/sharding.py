"""``lamina.sharding``: device meshes and shardings (JAX's ``jax.sharding`` names)."""

from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    SingleDeviceSharding,
    get_current_mesh,
    get_mesh,
    set_mesh,
)
from lamina_interpreters_pxla.sharding import ShardingBase as Sharding
from lamina_interpreters_pxla.sharding import single_device_sharding as _single_device_sharding
from lamina_sharded_jit import with_sharding_constraint
from lamina_sharded_jit.explicit_sharding import auto_axes, explicit_axes, reshard
from lamina_tracing_core.avals import ManualAxisType
from lamina_tracing_core.mesh import (
    AbstractDevice,
    AbstractMesh,
    AxisType,
    get_abstract_mesh,
    use_abstract_mesh,
)


def make_single_device_sharding(device: object, *, memory_kind: str | None = None
                                ) -> SingleDeviceSharding:
    """The sharding that puts a whole array on ``device`` (in ``memory_kind``,
    one of the device's memories, e.g. ``'device'`` or ``'pinned_host'``)."""
    return _single_device_sharding(device, memory_kind)


__all__ = [
    "AbstractDevice", "AbstractMesh", "AxisType", "GSPMDSharding", "ManualAxisType", "Mesh",
    "NamedSharding",
    "PartitionSpec", "PmapSharding", "Sharding", "SingleDeviceSharding", "auto_axes",
    "explicit_axes", "get_abstract_mesh", "get_current_mesh", "get_mesh",
    "make_single_device_sharding", "reshard", "set_mesh", "use_abstract_mesh",
    "with_sharding_constraint",
]

