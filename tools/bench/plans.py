"""How much measuring each run mode does.

A full run spends each workload's own budget per process; ``--quick`` is a
smoke run: a quarter of the budget, one sample minimum and at most one
warm-up iteration, still enough to catch a broken workload or adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import Workload
from .timing import Plan

QUICK_BUDGET_FACTOR = 0.25


@dataclass(frozen=True)
class RunMode:
    """Rounds (fresh process pairs) and warm-up processes for one run."""

    rounds: int
    quick: bool

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"RunMode: rounds must be >= 1, got {self.rounds}")

    def warmup_processes(self, wl: Workload) -> int:
        return 0 if self.quick else wl.warmup_processes


FULL_ROUNDS = 3
QUICK_ROUNDS = 1


def default_mode(quick: bool, rounds: int | None = None) -> RunMode:
    """The mode for ``--quick``/full runs, ``rounds`` overriding the default."""
    if rounds is None:
        rounds = QUICK_ROUNDS if quick else FULL_ROUNDS
    return RunMode(rounds=rounds, quick=quick)


def plan_for(wl: Workload, quick: bool) -> Plan:
    """The in-process measurement plan of ``wl``."""
    if not quick:
        return Plan(
            budget_s=wl.budget_s,
            min_samples=wl.min_samples,
            max_samples=wl.max_samples,
            warmup_iters=wl.warmup_iters,
        )
    return Plan(
        budget_s=wl.budget_s * QUICK_BUDGET_FACTOR,
        min_samples=1,
        max_samples=max(1, wl.max_samples),
        warmup_iters=min(wl.warmup_iters, 1),
    )
