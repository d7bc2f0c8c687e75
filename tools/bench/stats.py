"""Summary statistics for benchmark rounds (pure Python, no numpy).

Each round gives one value per implementation (the median iteration time
inside that round's fresh process). Across rounds an implementation is
summarised by its median and spread; the two are compared pair by pair: the
ratio of a round is lamina's value over jax's from the same round, and the
reported ratio is the median of those per-round ratios, so slow drifts of a
shared machine cancel out instead of biasing one side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def median(values: Sequence[float]) -> float:
    """The median; the mean of the two middle values for an even count."""
    if not values:
        raise ValueError("median: values is empty")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default method), ``0 <= q <= 1``."""
    if not values:
        raise ValueError("quantile: values is empty")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile: q must be in [0, 1], got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Median and spread of one implementation's round values."""

    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_spread(self) -> float:
        """(max - min) / median: how far apart the rounds were."""
        return (self.max - self.min) / self.median if self.median else math.inf


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("summarize: values is empty")
    return Summary(
        n=len(values),
        median=median(values),
        min=min(values),
        max=max(values),
        q1=quantile(values, 0.25),
        q3=quantile(values, 0.75),
    )


def paired_ratios(
    lamina: Sequence[float | None], jax: Sequence[float | None]
) -> list[float]:
    """Per-round lamina/jax ratios for rounds where both sides have a value.

    The sequences are indexed by round; ``None`` marks a failed or skipped
    round, which drops that pair. A zero jax value gives no ratio.
    """
    if len(lamina) != len(jax):
        raise ValueError(
            f"paired_ratios: lamina has {len(lamina)} rounds but jax has {len(jax)}"
        )
    return [
        lv / jv
        for lv, jv in zip(lamina, jax, strict=True)
        if lv is not None and jv is not None and jv > 0
    ]


def ratio_of_rounds(
    lamina: Sequence[float | None], jax: Sequence[float | None]
) -> Summary | None:
    """Summary of the per-round ratios, or None when no round has both sides."""
    ratios = paired_ratios(lamina, jax)
    return summarize(ratios) if ratios else None
