"""Memory kept per dropped function: ``retained_per_dropped_<kind>``.

Each workload creates, uses once and drops a few hundred distinct functions
of one kind, runs ``gc.collect()``, and records in the row's info the RSS
growth and the live ``Jaxpr`` objects per dropped function:

- ``jit``: ``jit(lambda x, i=i: x + i)`` called once (one compile each);
- ``pmap``: ``pmap(lambda x, i=i: x + i)`` called once on one device;
- ``eval_shape``: ``eval_shape(lambda x, i=i: x + i, x)`` (traced only);
- ``grad_jit``: ``grad(jit(lambda x, i=i: (x * i).sum()))`` called once
  (the JVP, partial-eval and transposition rules of the inner jit).

The timed figure is the whole loop (informational); the comparison that
matters is the ``kb_per_dropped_fn`` info value (goal: at most 10 KB), with
``live_jaxprs_per_dropped_fn`` beside it.

Before each RSS reading, both sides hand the C allocator's free pages back to
the system (glibc's ``malloc_trim(0)``, where the C library has it): freed
memory that the allocator keeps for reuse depends on how XLA's compile
threads happened to fragment the heap, not on what the library still holds,
and it swings the figure by tens of KB per function from run to run.
"""

from __future__ import annotations

import ctypes
import gc
import os
from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..registry import INFO, Bench, workload

#: One-time costs (first compilations, imports, bounded caches filling up)
#: are paid by this many functions before the measurement starts.
_WARMUP = 50


def _release_free_heap() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: measure as it is
        pass


def _rss_bytes() -> int:
    _release_free_heap()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _live_jaxprs() -> int:
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "Jaxpr")


def _maker(kind: str, a: Adapter) -> Callable[[int, Any], None]:
    """``make(i, x)``: builds the ``i``-th function of ``kind``, uses it once
    on ``x`` and drops it."""
    api = a.api

    def make_jit(i: int, x: Any) -> None:
        api.jit(lambda x, i=i: x + i)(x).block_until_ready()

    def make_pmap(i: int, x: Any) -> None:
        api.pmap(lambda x, i=i: x + i)(x[None]).block_until_ready()

    def make_eval_shape(i: int, x: Any) -> None:
        api.eval_shape(lambda x, i=i: x + i, x)

    def make_grad_jit(i: int, x: Any) -> None:
        api.grad(api.jit(lambda x, i=i: (x * i).sum()))(x).block_until_ready()

    makers: dict[str, Callable[[int, Any], None]] = {
        "jit": make_jit, "pmap": make_pmap, "eval_shape": make_eval_shape,
        "grad_jit": make_grad_jit}
    return makers[kind]


def _retained(kind: str, count: int) -> Callable[[Adapter], Bench]:
    def setup(a: Adapter) -> Bench:
        facts: dict[str, Any] = {}
        make = _maker(kind, a)

        def run() -> None:
            import numpy as np  # workloads load without numpy; only the worker imports it

            x = a.np_api.ones((8,), np.float32)
            for i in range(_WARMUP):
                make(-i - 1, x)
            gc.collect()
            rss0, jaxprs0 = _rss_bytes(), _live_jaxprs()
            for i in range(count):
                make(i, x)
            gc.collect()
            facts["kb_per_dropped_fn"] = round((_rss_bytes() - rss0) / count / 1024, 2)
            facts["live_jaxprs_per_dropped_fn"] = round((_live_jaxprs() - jaxprs0) / count, 3)
            facts["dropped_fns"] = count

        return Bench(run=run, single_shot=True, info=lambda: dict(facts))

    return setup


#: kind -> (functions dropped, what one is). Each jit/pmap/grad function is
#: one or two XLA compiles: the counts keep a side to about 20 s.
_KINDS = {
    "jit": (300, "jit(lambda x, i=i: x + i) called once"),
    "pmap": (200, "pmap(lambda x, i=i: x + i) called once"),
    "eval_shape": (300, "eval_shape(lambda x, i=i: x + i, x)"),
    "grad_jit": (200, "grad(jit(lambda x, i=i: (x * i).sum())) called once"),
}

for _kind, (_count, _what) in _KINDS.items():
    workload(
        f"retained_per_dropped_{_kind}",
        area="memory",
        goal=INFO,
        description=f"RSS and live jaxprs kept per dropped {_what}, after gc",
        warmup_processes=0,
        warmup_iters=0,
        min_samples=1,
        report_memory=True,
    )(_retained(_kind, _count))
