"""``import lamina`` vs ``import jax`` in a fresh process: time and peak RSS.

These workloads import nothing before the measured import (the worker and
the workload modules load only the standard library), and one discarded
process per implementation warms the OS file cache first. ``import lamina``
loads its parts lazily, so ``time_to_first_jit`` adds the first use: import,
then the first ``jit(lambda x: x + 1)`` call's result.
"""

from __future__ import annotations

import importlib

from ..adapters import Adapter
from ..registry import INFO, Bench, workload


def _import_root(a: Adapter) -> Bench:
    root = a.modules.root
    return Bench(run=lambda: importlib.import_module(root), single_shot=True)


workload(
    "import_time",
    area="import",
    goal=INFO,
    description="import lamina / import jax in a fresh process",
    warmup_processes=1,
    warmup_iters=0,
    min_samples=1,
    report_memory=True,
)(_import_root)

workload(
    "import_peak_rss",
    area="import",
    goal=INFO,
    description="peak RSS of a fresh process after the import",
    metric="peak_rss",
    warmup_processes=1,
    warmup_iters=0,
    min_samples=1,
    report_memory=True,
)(_import_root)


def _first_jit(a: Adapter) -> Bench:
    root = a.modules.root

    def run() -> object:
        import numpy as np

        api = importlib.import_module(root)
        return api.jit(lambda x: x + 1)(np.float32(1.0)).block_until_ready()

    return Bench(run=run, single_shot=True)


workload(
    "time_to_first_jit",
    area="import",
    goal=INFO,
    description="fresh process: import, then the first jit(lambda x: x + 1) result",
    warmup_processes=1,
    warmup_iters=0,
    min_samples=1,
    report_memory=True,
)(_first_jit)
