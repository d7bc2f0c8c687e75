"""Statistics of benchmark rounds: medians, quantiles, paired ratios."""

from __future__ import annotations

import pytest

from tools.bench.stats import median, paired_ratios, quantile, ratio_of_rounds, summarize


def test_median_odd_and_even() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="median"):
        median([])


def test_quantile_interpolates_like_numpy_linear() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 4.0
    assert quantile(values, 0.25) == pytest.approx(1.75)
    assert quantile(values, 0.75) == pytest.approx(3.25)
    with pytest.raises(ValueError, match="q must be"):
        quantile(values, 1.5)


def test_summary_spread() -> None:
    s = summarize([2.0, 1.0, 4.0])
    assert (s.n, s.median, s.min, s.max) == (3, 2.0, 1.0, 4.0)
    assert s.rel_spread == pytest.approx(1.5)
    assert s.iqr == pytest.approx(s.q3 - s.q1)
    assert s.q1 == pytest.approx(1.5)


def test_ratio_is_median_of_per_round_ratios_not_ratio_of_medians() -> None:
    lamina = [1.0, 4.0, 9.0]
    jax = [2.0, 2.0, 3.0]
    assert paired_ratios(lamina, jax) == [0.5, 2.0, 3.0]
    summary = ratio_of_rounds(lamina, jax)
    assert summary is not None
    assert summary.median == 2.0
    # the ratio of medians would be 4/2 = 2.0 too; make them differ:
    summary = ratio_of_rounds([1.0, 10.0, 3.0], [1.0, 1.0, 10.0])
    assert summary is not None
    assert summary.median == 1.0  # per-round ratios 1, 10, 0.3
    assert median([1.0, 10.0, 3.0]) / median([1.0, 1.0, 10.0]) == 3.0


def test_failed_rounds_drop_out_of_the_pairing() -> None:
    assert paired_ratios([1.0, None, 3.0], [2.0, 2.0, None]) == [0.5]
    assert ratio_of_rounds([None], [1.0]) is None
    assert paired_ratios([1.0], [0.0]) == []


def test_rounds_must_line_up() -> None:
    with pytest.raises(ValueError, match="paired_ratios"):
        paired_ratios([1.0], [1.0, 2.0])
