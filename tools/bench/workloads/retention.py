"""Memory kept per dropped function: ``retained_per_dropped_jit``.

Creates, calls once and drops 300 ``jit(lambda x, i=i: x + i)`` functions
(each a distinct program), runs ``gc.collect()``, and records in the row's
info the RSS growth and the live ``Jaxpr`` objects per dropped function. The
timed figure is the whole loop (informational); the comparison that matters
is the ``kb_per_dropped_fn`` info value (goal: at most 10 KB).
"""

from __future__ import annotations

import gc
import os
from typing import Any

from ..adapters import Adapter
from ..registry import INFO, Bench, workload

_COUNT = 300  # enough for a per-function figure in KB; each is one XLA compile


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _live_jaxprs() -> int:
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "Jaxpr")


def _retained(a: Adapter) -> Bench:
    api = a.api
    facts: dict[str, Any] = {}

    def make(i: int, x: Any) -> None:
        f = api.jit(lambda x, i=i: x + i)
        f(x).block_until_ready()

    def run() -> None:
        import numpy as np  # workloads load without numpy; only the worker imports it

        x = a.np_api.ones((8,), np.float32)
        for i in range(50):  # one-time costs (first compilations, imports) stay out
            make(-i - 1, x)
        gc.collect()
        rss0, jaxprs0 = _rss_bytes(), _live_jaxprs()
        for i in range(_COUNT):
            make(i, x)
        gc.collect()
        facts["kb_per_dropped_fn"] = round((_rss_bytes() - rss0) / _COUNT / 1024, 2)
        facts["live_jaxprs_per_dropped_fn"] = round((_live_jaxprs() - jaxprs0) / _COUNT, 3)
        facts["dropped_fns"] = _COUNT

    return Bench(run=run, single_shot=True, info=lambda: dict(facts))


workload(
    "retained_per_dropped_jit",
    area="memory",
    goal=INFO,
    description="RSS and live jaxprs kept per dropped jit(lambda x, i=i: x + i) after gc",
    warmup_processes=0,
    warmup_iters=0,
    min_samples=1,
    report_memory=True,
)(_retained)
