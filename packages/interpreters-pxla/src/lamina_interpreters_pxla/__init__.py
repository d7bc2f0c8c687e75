"""Devices, Array, shardings, device_put, executables, eager dispatch and pmap.

Importing this package creates no backend; the first use of a device does.
It registers lamina's ``Array`` with tracing-core (``aval_handlers``) and the
eager impl rule of every primitive (``dispatch``).
"""

from lamina_interpreters_pxla import _jaxlib  # noqa: F401  (sets TF_CPP_MIN_LOG_LEVEL first)
from lamina_interpreters_pxla.__about__ import __version__
from lamina_interpreters_pxla.array import Array, DeletedArrayError, Shard
from lamina_interpreters_pxla.backends import (
    BackendError,
    default_backend,
    default_device,
    device_count,
    devices,
    get_backend,
    local_device_count,
    local_devices,
    process_count,
    process_index,
)
from lamina_interpreters_pxla.config import config
from lamina_interpreters_pxla.device_put import device_get, device_put, device_put_p
from lamina_interpreters_pxla.dispatch import apply_primitive
from lamina_interpreters_pxla import callbacks  # noqa: F401  (eager callback impls)
from lamina_interpreters_pxla.effects_runtime import effects_barrier
from lamina_interpreters_pxla.executable import (
    BuildOptions,
    CompileError,
    Executable,
    block_until_ready,
    compile_module,
)
from lamina_interpreters_pxla.layouts import Format, Layout
from lamina_interpreters_pxla.stages import ArgInfo, Compiled, Lowered, OutInfo, Traced
from lamina_interpreters_pxla.transfer import shard_args
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    PmapSharding,
    PmapShardingSpec,
    ShardingError,
    SingleDeviceSharding,
)

__all__ = [
    "ArgInfo", "Compiled", "Lowered", "OutInfo", "Traced",
    "Array", "BackendError", "apply_primitive", "BuildOptions", "CompileError", "DeletedArrayError",
    "Executable", "Format", "GSPMDSharding", "Layout", "Mesh", "NamedSharding", "P",
    "PartitionSpec", "PmapSharding", "PmapShardingSpec", "Shard", "ShardingError",
    "SingleDeviceSharding", "__version__", "block_until_ready", "compile_module", "config",
    "default_backend", "default_device", "device_count", "device_get", "device_put",
    "device_put_p", "devices", "get_backend", "local_device_count", "local_devices",
    "process_count", "process_index", "shard_args",
    "effects_barrier",
]
