"""The benchmark workloads, one module per area.

Importing an area module registers its workloads in
:data:`tools.bench.registry.REGISTRY`. Workload modules import numpy inside
their setup functions, never at module level, so that the import-time
workload measures ``import lamina`` / ``import jax`` in a process that has
loaded nothing else of size.
"""

from __future__ import annotations

import importlib

AREA_MODULES = (".pytrees", ".tracing", ".lowering", ".dispatch", ".steps", ".imports",
                ".retention", ".callbacks", ".warm_start", ".kernels", ".scipy_random",
                ".shard_map")


def load_all() -> None:
    """Register every workload (idempotent: modules are imported once)."""
    for module in AREA_MODULES:
        importlib.import_module(module, __package__)
