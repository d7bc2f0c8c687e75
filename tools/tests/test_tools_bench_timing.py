"""The in-process measurement loop, driven by a fake clock."""

from __future__ import annotations

import pytest

from tools.bench.registry import Bench
from tools.bench.timing import Plan, measure


class FakeClock:
    """Time advances only when the fake workload 'runs'."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.now += seconds


def test_fast_iterations_are_batched_and_warmed_up() -> None:
    clock = FakeClock()
    calls: list[str] = []

    def run() -> None:
        calls.append("run")
        clock.spend(1e-5)

    def warmup() -> None:
        calls.append("warm")
        clock.spend(0.5)  # e.g. compilation: must not show in the samples

    plan = Plan(budget_s=0.2, min_samples=3, max_samples=1000, warmup_iters=2)
    m = measure(Bench(run=run, warmup=warmup), plan, clock)
    assert calls[:2] == ["warm", "warm"]
    assert 990 <= m.inner <= 1000  # 10 ms samples (budget / 20) of 10 µs calls
    assert m.value == pytest.approx(1e-5)
    assert m.warmup_s == pytest.approx(1.0)
    assert len(m.samples) >= 3
    assert m.iterations == len(m.samples) * m.inner


def test_slow_iterations_use_the_calibration_call_as_a_sample() -> None:
    clock = FakeClock()
    durations = iter([3.0, 2.0, 4.0, 9.0])

    def run() -> None:
        clock.spend(next(durations))

    plan = Plan(budget_s=0.0, min_samples=1, max_samples=5, warmup_iters=1)
    m = measure(Bench(run=run), plan, clock)
    assert m.inner == 1
    assert m.samples == [2.0]  # 3.0 was the warm-up


def test_min_samples_beat_the_budget() -> None:
    clock = FakeClock()

    def run() -> None:
        clock.spend(1.0)

    m = measure(
        Bench(run=run), Plan(budget_s=0.1, min_samples=4, max_samples=10, warmup_iters=0), clock
    )
    assert len(m.samples) == 4


def test_prepare_is_untimed() -> None:
    clock = FakeClock()
    prepared: list[int] = []

    def prepare() -> object:
        clock.spend(10.0)  # e.g. lowering before a timed compile
        prepared.append(1)

        def timed() -> None:
            clock.spend(0.25)

        return timed

    plan = Plan(budget_s=0.0, min_samples=2, max_samples=10, warmup_iters=1)
    m = measure(Bench(run=lambda: None, prepare=prepare), plan, clock)  # type: ignore[arg-type]
    assert m.samples == [0.25, 0.25]
    assert len(prepared) == 3  # one warm-up, two samples


def test_single_shot_runs_once_without_warmup() -> None:
    clock = FakeClock()
    calls: list[int] = []

    def run() -> None:
        calls.append(1)
        clock.spend(1.5)

    plan = Plan(budget_s=5.0, min_samples=3, max_samples=10, warmup_iters=3)
    m = measure(Bench(run=run, single_shot=True), plan, clock)
    assert calls == [1]
    assert m.samples == [1.5]


def test_inconsistent_plan_is_refused() -> None:
    with pytest.raises(ValueError, match="Plan"):
        Plan(budget_s=1.0, min_samples=5, max_samples=2, warmup_iters=0)


def test_budget_can_run_on_another_clock() -> None:
    # CPU-time samples against a wall-clock budget: a busy machine (wall
    # advancing faster than CPU) ends the sampling sooner.
    cpu, wall = FakeClock(), FakeClock()

    def run() -> None:
        cpu.spend(0.01)
        wall.spend(0.04)

    plan = Plan(budget_s=0.4, min_samples=1, max_samples=1000, warmup_iters=0)
    m = measure(Bench(run=run), plan, clock=cpu, budget_clock=wall)
    assert m.value == pytest.approx(0.01)
    assert len(m.samples) <= 11


def test_counted_bench_detects_iterations_a_cache_answered() -> None:
    from tools.bench.workloads.models import BODY_RUNS, counted_bench

    seen: set[int] = set()

    def traces_once_per_key() -> int:
        # Like a trace cache keyed on the same function: only the first call traces.
        if not seen:
            BODY_RUNS["test_cached"] += 1
            seen.add(1)
        return 3

    def traces_every_time() -> int:
        BODY_RUNS["test_fresh"] += 1
        return 7

    plan = Plan(budget_s=0.0, min_samples=4, max_samples=4, warmup_iters=1)
    cached = counted_bench(traces_once_per_key, "test_cached", facts=lambda r: {"last": r})
    measure(cached, plan, FakeClock())
    assert cached.info is not None
    assert cached.info() == {"body_runs_per_call": 0.0, "last": 3}
    fresh = counted_bench(traces_every_time, "test_fresh")
    measure(fresh, plan, FakeClock())
    assert fresh.info is not None
    assert fresh.info() == {"body_runs_per_call": 1.0}
