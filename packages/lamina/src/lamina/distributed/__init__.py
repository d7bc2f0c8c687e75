"""Multi-process lamina on XLA's distributed runtime.

``initialize`` joins this process to a run of several processes (hosts): process 0
starts jaxlib's coordination service, every process connects a client to it, and
the CPU client is created with that client and gloo collectives, so
``lamina.devices()`` lists every process's devices and ``lamina.local_devices()``
this process's own. Programs then span all of them: ``jit`` over a global ``Mesh``,
``pmap`` with collectives across processes. ``python -m lamina.distributed.launch``
starts such a run on one machine.

The names are loaded on first use, so the launcher does not import jaxlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "DistributedError": "lamina.distributed.runtime",
    "ProcessLostError": "lamina.distributed.runtime",
    "initialize": "lamina.distributed.runtime",
    "is_initialized": "lamina.distributed.runtime",
    "shutdown": "lamina.distributed.runtime",
    "distributed_client": "lamina.distributed.runtime",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina.distributed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
