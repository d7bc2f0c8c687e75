"""The in-process measurement loop a worker runs for one workload.

Warm-up first (compilation and one-time caches stay out of the figures),
then samples until the time budget is spent and at least ``min_samples``
were taken. Fast iterations are timed in batches (``inner`` calls per sample)
so the clock's own cost does not count; the reported value is the median of
the per-iteration times of the samples.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .registry import Bench
from .stats import median

Clock = Callable[[], float]

# A sample should last at least this long (or budget/20 when that is longer)
# so that batches of fast calls are not dominated by the clock.
MIN_SAMPLE_S = 0.002
SAMPLES_PER_BUDGET = 20


@dataclass(frozen=True)
class Plan:
    """How long to measure one workload in one process."""

    budget_s: float
    min_samples: int
    max_samples: int
    warmup_iters: int

    def __post_init__(self) -> None:
        if self.budget_s < 0 or self.min_samples < 1 or self.max_samples < self.min_samples:
            raise ValueError(f"Plan: inconsistent limits {self}")


@dataclass
class Measurement:
    """Per-iteration times of one process's samples and their median."""

    samples: list[float]
    inner: int
    warmup_s: float
    iterations: int = field(init=False)

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("Measurement: no samples")
        self.iterations = len(self.samples) * self.inner

    @property
    def value(self) -> float:
        return median(self.samples)


def _timed(call: Callable[[], object], clock: Clock) -> float:
    start = clock()
    call()
    return clock() - start


def _batch_size(per_call_s: float, plan: Plan) -> int:
    target = max(MIN_SAMPLE_S, plan.budget_s / SAMPLES_PER_BUDGET)
    if per_call_s <= 0:
        return 1000
    return max(1, int(target / per_call_s))


def _enough(samples: int, started: float, plan: Plan, clock: Clock) -> bool:
    if samples >= plan.max_samples:
        return True
    return samples >= plan.min_samples and clock() - started >= plan.budget_s


def measure(
    bench: Bench,
    plan: Plan,
    clock: Clock = time.perf_counter,
    budget_clock: Clock | None = None,
) -> Measurement:
    """Warm up and time ``bench`` according to ``plan``.

    Samples are read from ``clock``; the budget and the warm-up duration are
    counted on ``budget_clock`` (default: ``clock``). The worker times
    CPU-clock workloads against a wall-clock budget, so a busy machine gives
    fewer samples instead of a longer run.
    """
    spent = clock if budget_clock is None else budget_clock
    if bench.single_shot:
        return Measurement(samples=[_timed(bench.run, clock)], inner=1, warmup_s=0.0)
    if bench.prepare is not None:
        return _measure_prepared(bench.prepare, bench.warmup, plan, clock, spent)
    return _measure_batched(bench.run, bench.warmup, plan, clock, spent)


def _measure_batched(
    run: Callable[[], object],
    warmup: Callable[[], object] | None,
    plan: Plan,
    clock: Clock,
    spent: Clock,
) -> Measurement:
    warm_start = spent()
    for _ in range(plan.warmup_iters):
        (warmup or run)()
    warmup_s = spent() - warm_start
    gc.collect()
    started = spent()
    first = _timed(run, clock)  # calibrates the batch size; after warm-up it is a fair sample
    inner = _batch_size(first, plan)
    samples = [first] if inner == 1 else []
    while not _enough(len(samples), started, plan, spent):
        elapsed = _timed(lambda: _repeat(run, inner), clock)
        samples.append(elapsed / inner)
    return Measurement(samples=samples, inner=inner, warmup_s=warmup_s)


def _repeat(run: Callable[[], object], times: int) -> None:
    for _ in range(times):
        run()


def _measure_prepared(
    prepare: Callable[[], Callable[[], object]],
    warmup: Callable[[], object] | None,
    plan: Plan,
    clock: Clock,
    spent: Clock,
) -> Measurement:
    warm_start = spent()
    for _ in range(plan.warmup_iters):
        if warmup is not None:
            warmup()
        else:
            prepare()()
    warmup_s = spent() - warm_start
    gc.collect()
    started = spent()
    samples: list[float] = []
    while not _enough(len(samples), started, plan, spent):
        call = prepare()
        samples.append(_timed(call, clock))
    return Measurement(samples=samples, inner=1, warmup_s=warmup_s)
