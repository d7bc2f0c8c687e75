"""Workloads, their goals, and the registry the harness selects from.

A workload is written once against an :class:`~tools.bench.adapters.Adapter`
(the ``lamina`` or ``jax`` module behind the same API names) and registered
with :func:`workload`. The harness runs it for both implementations and
compares them with the workload's :class:`Goal`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .adapters import Adapter

Metric = Literal["time", "peak_rss"]
# "wall": time.perf_counter. "cpu": time.process_time, the CPU time of all
# the process's threads; used for single-threaded Python work (tracing,
# lowering) so that other processes on a shared machine do not skew it.
ClockName = Literal["wall", "cpu"]


@dataclass(frozen=True)
class Goal:
    """What ratio (lamina / jax) a workload aims for; ``limit`` None: no goal."""

    key: str
    label: str
    limit: float | None

    def met(self, ratio: float | None) -> bool | None:
        """True/False when both the goal and the ratio exist, else None."""
        if self.limit is None or ratio is None:
            return None
        return ratio <= self.limit


TRACING = Goal("tracing", "tracing/lowering", 0.5)
DISPATCH = Goal("dispatch", "dispatch", 1.0)
EAGER = Goal("eager", "eager", 2.0)
STEP = Goal("step", "step time", 1.05)
COMPILE = Goal("compile", "compile time (same XLA compiler)", 1.05)
INFO = Goal("info", "informational", None)


@dataclass
class Bench:
    """What a workload's ``setup`` returns: the code to time, ready to run.

    * ``run``: one iteration. Timed in batches when it is fast.
    * ``prepare``: when given, called before every timed iteration, untimed;
      it returns the zero-argument callable to time (e.g. a fresh ``Lowered``
      whose ``compile()`` is timed). ``run`` is then unused.
    * ``warmup``: called before timing (default ``run`` or a prepared call),
      so that one-time costs (compilation, module-level caches) stay out.
    * ``info``: called once after timing; facts that make the comparison
      checkable (equation counts, trace counts), stored in the row.
    * ``single_shot``: time exactly one call, no warm-up (import time).
    """

    run: Callable[[], object]
    prepare: Callable[[], Callable[[], object]] | None = None
    warmup: Callable[[], object] | None = None
    info: Callable[[], dict[str, Any]] | None = None
    single_shot: bool = False


Setup = Callable[["Adapter"], Bench]


@dataclass(frozen=True)
class Workload:
    """A named benchmark and how long to spend on it in each process."""

    name: str
    area: str
    goal: Goal
    description: str
    setup: Setup
    metric: Metric = "time"
    clock: ClockName = "wall"
    budget_s: float = 0.4
    min_samples: int = 3
    max_samples: int = 1000
    warmup_iters: int = 2
    warmup_processes: int = 0
    report_memory: bool = False
    recursion_limit: int | None = None
    timeout_s: float = 120.0
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Extra environment variables for this workload's worker processes, the
    # same on both sides (e.g. a BLAS thread count, read only at start-up).
    env: tuple[tuple[str, str], ...] = ()

    @property
    def unit(self) -> str:
        return "s" if self.metric == "time" else "MB"

    @property
    def measured_by(self) -> str:
        """What the figure is: ``wall``/``cpu`` time or ``rss``."""
        return self.clock if self.metric == "time" else "rss"


class UnknownWorkloadError(LookupError):
    """A requested name matched no workload, area or pattern."""


class Registry:
    """Workloads by name, in registration order."""

    def __init__(self) -> None:
        self._by_name: dict[str, Workload] = {}

    def add(self, wl: Workload) -> Workload:
        if wl.name in self._by_name:
            raise ValueError(f"Registry.add: workload {wl.name!r} is already registered")
        self._by_name[wl.name] = wl
        return wl

    def get(self, name: str) -> Workload:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownWorkloadError(f"no workload named {name!r}") from None

    def __iter__(self) -> Iterator[Workload]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        return list(self._by_name)

    def areas(self) -> list[str]:
        return list(dict.fromkeys(wl.area for wl in self))

    def select(self, patterns: Iterable[str]) -> list[Workload]:
        """Workloads matching any pattern, in registration order, no repeats.

        A pattern is an exact name, an area, a shell glob (``make_jaxpr_*``)
        or a name prefix (``pytree`` selects ``pytree_flatten_unflatten``).
        A pattern that matches nothing raises :class:`UnknownWorkloadError`.
        """
        chosen: dict[str, Workload] = {}
        for pattern in patterns:
            matches = self._match(pattern)
            if not matches:
                raise UnknownWorkloadError(
                    f"no workload matches {pattern!r}; known: {', '.join(self.names())}"
                )
            for wl in matches:
                chosen[wl.name] = wl
        return [wl for wl in self if wl.name in chosen]

    def _match(self, pattern: str) -> list[Workload]:
        if pattern in self._by_name:
            return [self._by_name[pattern]]
        rules: tuple[Callable[[Workload], bool], ...] = (
            lambda wl: wl.area == pattern,
            lambda wl: fnmatch.fnmatchcase(wl.name, pattern),
            lambda wl: wl.name.startswith(pattern),
        )
        for rule in rules:
            found = [wl for wl in self if rule(wl)]
            if found:
                return found
        return []


REGISTRY = Registry()


def workload(
    name: str,
    *,
    area: str,
    goal: Goal,
    description: str,
    registry: Registry | None = None,
    **options: Any,
) -> Callable[[Setup], Setup]:
    """Register the decorated ``setup(adapter) -> Bench`` as a workload."""

    def register(setup: Setup) -> Setup:
        target = REGISTRY if registry is None else registry
        target.add(
            Workload(
                name=name, area=area, goal=goal, description=description, setup=setup, **options
            )
        )
        return setup

    return register
