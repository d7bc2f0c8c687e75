"""Rendering rows: the stdout table, the Markdown table, the JSON document."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .results_model import ImplRow, Row

SCHEMA_VERSION = 1
ERROR_COLUMN_CHARS = 70
# |ratio - 1| below this reads as "on par".
PARITY_BAND = 0.03
# Rounds further apart than this (relative to the median) make a row rough.
NOISY_SPREAD = 0.5


def format_quantity(value: float | None, unit: str) -> str:
    """``12.3 µs``, ``4.56 ms``, ``1.23 s``, ``152 MB``; ``-`` for None."""
    if value is None:
        return "-"
    if unit == "MB":
        return f"{value:.0f} MB"
    for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return f"{value / scale:.3g} {suffix}"
    return f"{value / 1e-9:.3g} ns"


def format_ratio(row: Row) -> str:
    if row.ratio is None:
        return "-"
    ratio = row.ratio.median
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def format_goal(row: Row) -> str:
    """``≤0.5 met``, ``≤1.0 MISSED``, ``-`` when no goal or no ratio."""
    if row.goal_limit is None:
        return "-"
    verdict = {True: "met", False: "MISSED", None: "?"}[row.goal_met]
    return f"≤{row.goal_limit} {verdict}"


def format_spread(row: Row) -> str:
    """Range of the rounds relative to the median, per side: ``L 4% J 2%``."""
    parts = []
    for tag, side in (("L", row.lamina), ("J", row.jax)):
        if side.summary is not None and side.summary.n > 1:
            parts.append(f"{tag} {100 * side.summary.rel_spread:.0f}%")
    return " ".join(parts) or "-"


def format_jax_in_lamina(side: ImplRow) -> str:
    if side.jax_imported is None:
        return "-"
    text = "YES" if side.jax_imported else "no"
    if side.jax_import_attempts:
        text += f" ({side.jax_import_attempts} blocked)"
    return text


def format_rss(row: Row) -> str:
    if not row.report_memory:
        return ""
    return "/".join(format_quantity(s.peak_rss_mb, "MB").replace(" MB", "") for s in (row.lamina, row.jax)) + " MB"


def shorten(text: str | None, limit: int = ERROR_COLUMN_CHARS) -> str:
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


TABLE_HEADER = (
    "name",
    "clock",
    "lamina",
    "jax",
    "ratio",
    "goal",
    "spread",
    "jax in lamina proc",
    "peak RSS L/J",
    "error",
)


def table_cells(row: Row) -> tuple[str, ...]:
    return (
        row.name,
        row.clock,
        format_quantity(row.lamina.median, row.unit),
        format_quantity(row.jax.median, row.unit),
        format_ratio(row),
        format_goal(row),
        format_spread(row),
        format_jax_in_lamina(row.lamina),
        format_rss(row),
        shorten(row.error),
    )


def render_table(rows: Sequence[Row]) -> str:
    """A fixed-width text table, one line per row."""
    lines = [TABLE_HEADER, *(table_cells(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(TABLE_HEADER))]
    out = []
    for index, cells in enumerate(lines):
        out.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
        if index == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _speed_phrase(ratio: float) -> str:
    if abs(ratio - 1.0) < PARITY_BAND:
        return "lamina is on par with JAX"
    if ratio < 1.0:
        return f"lamina is {1 / ratio:.2f}× faster than JAX"
    return f"lamina is {ratio:.2f}× slower than JAX"


def _memory_phrase(row: Row, ratio: float) -> str:
    lam = format_quantity(row.lamina.median, row.unit)
    jx = format_quantity(row.jax.median, row.unit)
    return f"lamina's process peaks at {lam} against JAX's {jx} ({ratio:.2f}×)"


def sentence(row: Row) -> str:
    """Where lamina stands on this row, in one sentence."""
    if row.lamina.error:
        return f"lamina does not run this yet ({row.lamina.error})."
    if row.jax.error:
        return f"The JAX reference failed ({row.jax.error}), so there is no comparison."
    if row.ratio is None:
        return "Not measured."
    ratio = row.ratio.median
    lead = _memory_phrase(row, ratio) if row.unit == "MB" else _speed_phrase(ratio)
    # The project's name is lower case, also at the start of a sentence.
    if row.goal_limit is None:
        text = f"{lead}; no goal is set for this figure."
    else:
        verdict = "meeting" if row.goal_met else "short of"
        text = f"{lead} (ratio {ratio:.2f}), {verdict} the {row.goal_label} goal of ≤ {row.goal_limit}."
    return text + _noise_note(row)


def _noise_note(row: Row) -> str:
    spreads = [s.summary.rel_spread for s in (row.lamina, row.jax) if s.summary is not None]
    worst = max(spreads, default=0.0)
    if worst <= NOISY_SPREAD:
        return ""
    return f" Rounds varied by up to {100 * worst:.0f}%, so this is a rough figure."


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(rows: Sequence[Row]) -> str:
    """The table for the root README's "Performance" section."""
    lines = [
        "| Benchmark | lamina | JAX | lamina/JAX | Goal | Where lamina stands |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        goal = "-" if row.goal_limit is None else f"≤ {row.goal_limit}"
        cells = (
            f"`{row.name}`: {row.description}",
            format_quantity(row.lamina.median, row.unit),
            format_quantity(row.jax.median, row.unit),
            format_ratio(row),
            goal,
            sentence(row),
        )
        lines.append("| " + " | ".join(_md_escape(c) for c in cells) + " |")
    return "\n".join(lines)


def results_document(rows: Sequence[Row], meta: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA_VERSION, **meta, "rows": [r.to_json() for r in rows]}


def write_json(path: Path, document: dict[str, Any]) -> None:
    """Write atomically (a ``.tmp`` sibling renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
