"""Utilities for multi-process runs (``jax.experimental.multihost_utils``'s API).

``process_allgather(x, tiled=False)`` gathers a pytree from every process,
``broadcast_one_to_all(x)`` sends process 0's pytree to all, ``assert_equal``
checks that every process holds the same values, and
``sync_global_devices(name)`` is a barrier over every process and device;
``host_local_array_to_global_array`` / ``global_array_to_host_local_array``
convert between per-process arrays and global ones over a mesh.
The global-array constructors (``make_array_from_process_local_data`` and
friends) are here too, and at the top level of ``lamina``.
"""

from lamina_interpreters_pxla.multihost import (
    GlobalArrayError,
    global_array_to_host_local_array,
    host_local_array_to_global_array,
    local_mesh,
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
)
from lamina_interpreters_pxla.multihost_utils import (
    ProcessSyncError,
    assert_equal,
    broadcast_one_to_all,
    process_allgather,
    process_mesh,
    sync_global_devices,
)

__all__ = [
    "GlobalArrayError", "ProcessSyncError", "assert_equal", "broadcast_one_to_all",
    "global_array_to_host_local_array", "host_local_array_to_global_array", "local_mesh",
    "make_array_from_callback", "make_array_from_process_local_data",
    "make_array_from_single_device_arrays", "process_allgather", "process_mesh",
    "sync_global_devices",
]
