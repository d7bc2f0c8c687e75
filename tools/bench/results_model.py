"""Rows: what the harness concludes from the workers' results.

Pure data and arithmetic, no processes: the tests drive it with fake
worker results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .adapters import IMPLS, Impl
from .registry import Workload
from .stats import Summary, paired_ratios, summarize
from .worker import WorkerResult


@dataclass
class ImplRow:
    """One implementation's side of a row."""

    values: list[float | None]
    summary: Summary | None
    peak_rss_mb: float | None
    jax_imported: bool | None
    jax_import_attempts: int | None
    error: str | None
    info: dict[str, Any]
    versions: dict[str, str]
    rounds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return None if self.summary is None else self.summary.median


@dataclass
class Row:
    """The comparison of one workload across rounds."""

    name: str
    area: str
    description: str
    goal: str
    goal_label: str
    goal_limit: float | None
    unit: str
    clock: str
    report_memory: bool
    lamina: ImplRow
    jax: ImplRow
    ratios: list[float] = field(default_factory=list)
    ratio: Summary | None = None
    goal_met: bool | None = None
    # The workload's own worker variables (beyond the harness's fixed ones).
    env: dict[str, str] = field(default_factory=dict)

    def side(self, impl: Impl) -> ImplRow:
        return self.lamina if impl == "lamina" else self.jax

    @property
    def error(self) -> str | None:
        """``lamina: TypeError: ...; jax: ...`` for the sides that failed."""
        parts = [f"{impl}: {self.side(impl).error}" for impl in IMPLS if self.side(impl).error]
        return "; ".join(parts) or None

    def per_eqn(self, impl: Impl) -> float | None:
        """Seconds per equation for tracing rows that report an equation count."""
        side = self.side(impl)
        eqns = side.info.get("eqns")
        if self.unit != "s" or side.median is None or not isinstance(eqns, int) or eqns <= 0:
            return None
        return side.median / eqns

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["error"] = self.error
        for impl in IMPLS:
            data[impl]["per_eqn_s"] = self.per_eqn(impl)
            summary = self.side(impl).summary
            data[impl]["median"] = None if summary is None else summary.median
        return data


def describe_failure(result: WorkerResult) -> str:
    """``Type: first line`` of a failed worker result."""
    message = f": {result.error_message}" if result.error_message else ""
    return f"{result.error_type}{message}"


def impl_row(results: Sequence[WorkerResult | None]) -> ImplRow:
    """Fold one implementation's per-round results (None: round skipped)."""
    values = [r.value if r is not None and r.ok else None for r in results]
    ran = [r for r in results if r is not None]
    ok = [r for r in ran if r.ok]
    failed = [r for r in ran if not r.ok]
    measured = [v for v in values if v is not None]
    rss = [r.peak_rss_mb for r in ran if r.peak_rss_mb]
    attempts = [r.jax_import_attempts for r in ran if r.jax_import_attempts is not None]
    return ImplRow(
        values=values,
        summary=summarize(measured) if measured else None,
        peak_rss_mb=max(rss) if rss else None,
        jax_imported=any(r.jax_imported for r in ran) if ran else None,
        jax_import_attempts=max(attempts) if attempts else None,
        error=describe_failure(failed[0]) if failed else None,
        info=dict(ok[0].info) if ok else {},
        versions=dict(ran[0].versions) if ran else {},
        rounds=[round_details(r) for r in results],
    )


def round_details(result: WorkerResult | None) -> dict[str, Any]:
    """What one worker process saw, kept in the JSON for later scrutiny."""
    if result is None:
        return {"skipped": True}
    details: dict[str, Any] = {
        "value": result.value,
        "wall_s": result.wall_s,
        "cpu_over_wall": result.cpu_over_wall,
        "peak_rss_mb": result.peak_rss_mb,
    }
    if result.samples:
        details.update(
            samples=len(result.samples),
            inner=result.inner,
            sample_min=min(result.samples),
            sample_max=max(result.samples),
            warmup_s=result.warmup_s,
        )
    return details


def build_row(
    wl: Workload,
    lamina: Sequence[WorkerResult | None],
    jax: Sequence[WorkerResult | None],
) -> Row:
    """Combine both sides' rounds; the ratio is the median of per-round ratios."""
    lam, jx = impl_row(lamina), impl_row(jax)
    ratios = paired_ratios(lam.values, jx.values) if len(lam.values) == len(jx.values) else []
    ratio = summarize(ratios) if ratios else None
    return Row(
        name=wl.name,
        area=wl.area,
        description=wl.description,
        goal=wl.goal.key,
        goal_label=wl.goal.label,
        goal_limit=wl.goal.limit,
        unit=wl.unit,
        clock=wl.measured_by,
        report_memory=wl.report_memory,
        lamina=lam,
        jax=jx,
        ratios=ratios,
        ratio=ratio,
        goal_met=wl.goal.met(None if ratio is None else ratio.median),
        env=dict(wl.env),
    )


def _summary_from_json(data: Any) -> Summary | None:
    if data is None:
        return None
    return Summary(**{k: data[k] for k in ("n", "median", "min", "max", "q1", "q3")})


def _impl_row_from_json(data: dict[str, Any]) -> ImplRow:
    return ImplRow(
        values=list(data["values"]),
        summary=_summary_from_json(data["summary"]),
        peak_rss_mb=data["peak_rss_mb"],
        jax_imported=data["jax_imported"],
        jax_import_attempts=data["jax_import_attempts"],
        error=data["error"],
        info=dict(data["info"]),
        versions=dict(data["versions"]),
        rounds=list(data.get("rounds", [])),
    )


def row_from_json(data: dict[str, Any]) -> Row:
    """Inverse of :meth:`Row.to_json` (derived fields are recomputed)."""
    return Row(
        name=data["name"],
        area=data["area"],
        description=data["description"],
        goal=data["goal"],
        goal_label=data["goal_label"],
        goal_limit=data["goal_limit"],
        unit=data["unit"],
        clock=data.get("clock", "wall"),
        report_memory=data["report_memory"],
        lamina=_impl_row_from_json(data["lamina"]),
        jax=_impl_row_from_json(data["jax"]),
        ratios=list(data["ratios"]),
        ratio=_summary_from_json(data["ratio"]),
        goal_met=data["goal_met"],
        env=dict(data.get("env", {})),
    )
