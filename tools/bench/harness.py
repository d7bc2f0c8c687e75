"""The benchmark driver: ``python -m tools.bench [NAME ...] [--all] [options]``.

For every selected workload and every round it starts a fresh lamina worker
and then a fresh jax worker (``python -m tools.bench.worker IMPL NAME``) with
the same environment, collects their results, and folds the rounds into a
row (medians, spread, the median of per-round lamina/jax ratios, the goal).
A worker that fails, crashes or times out gives an error in its row; the run
goes on.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .adapters import IMPLS, Impl
from .plans import RunMode, default_mode
from .registry import REGISTRY, Registry, UnknownWorkloadError, Workload
from .report import render_markdown, render_table, results_document, write_json
from .results_model import Row, build_row, row_from_json
from .worker import RESULT_MARKER, WorkerResult

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
LATEST_JSON = RESULTS_DIR / "latest.json"
PARTIAL_JSON = RESULTS_DIR / "partial.json"
# `hatch run bench:all` must finish within 10 minutes on the 2-core machine.
DEFAULT_TIME_LIMIT_S = 540.0

# The environment every worker gets, whichever implementation it runs.
WORKER_ENV = {
    "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
    "JAX_PLATFORMS": "cpu",
    "TF_CPP_MIN_LOG_LEVEL": "1",
}


# ---------------------------------------------------------------- launching


@dataclass(frozen=True)
class LaunchConfig:
    """How to start workers."""

    pythons: dict[Impl, str]
    quick: bool = False
    allow_jax_in_lamina: bool = False
    # "jax" runs jax in the lamina slot too: an A/A run that checks the
    # harness itself (ratios should scatter around 1.0).
    lamina_adapter: Impl = "lamina"
    timeout_scale: float = 1.0
    cwd: Path = REPO_ROOT


def worker_command(config: LaunchConfig, impl: Impl, name: str) -> list[str]:
    cmd = [config.pythons[impl], "-m", "tools.bench.worker", impl, name]
    if config.quick:
        cmd.append("--quick")
    if impl == "lamina" and config.allow_jax_in_lamina:
        cmd.append("--allow-jax")
    if impl == "lamina" and config.lamina_adapter != "lamina":
        cmd += ["--adapter", config.lamina_adapter]
    return cmd


# Removed from every worker's environment: start-up rows (import, warm start)
# must load modules as users do, from the .pyc files the warm-up process wrote,
# not recompile every module's source in every measured process.
WORKER_ENV_REMOVED = ("PYTHONDONTWRITEBYTECODE",)


def worker_env(
    base: dict[str, str], repo_root: Path, extra: Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """``base`` with the fixed benchmark variables and a workload's ``extra``
    ones, without those that would make a fresh process slower than a user's,
    and with the repo on PYTHONPATH."""
    env = {k: v for k, v in base.items() if k not in WORKER_ENV_REMOVED}
    env.update(WORKER_ENV)
    env.update(extra)
    path = [str(repo_root)]
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def failed_result(impl: Impl, name: str, error_type: str, message: str) -> WorkerResult:
    return WorkerResult(
        impl=impl, name=name, error_type=error_type, error_message=message, error_stage="worker"
    )


def parse_worker_output(
    impl: Impl,
    name: str,
    returncode: int | None,
    stdout: str,
    stderr: str,
    timeout_s: float | None = None,
) -> WorkerResult:
    """The worker's result line, or an error result saying why there is none.

    ``returncode`` None means the worker was killed after ``timeout_s``.
    """
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            try:
                data = json.loads(line[len(RESULT_MARKER) :])
                return WorkerResult(**data)
            except (ValueError, TypeError) as exc:
                return failed_result(impl, name, "BadWorkerOutput", str(exc))
    if returncode is None:
        return failed_result(impl, name, "WorkerTimeout", f"no result after {timeout_s:g} s")
    detail = _last_line(stderr) or _last_line(stdout) or "no output"
    return failed_result(impl, name, "WorkerCrashed", f"exit code {returncode}; {detail}")


class Launcher(Protocol):
    def __call__(self, impl: Impl, wl: Workload) -> WorkerResult: ...


class SubprocessLauncher:
    """Starts ``python -m tools.bench.worker`` for real."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.base_env = dict(os.environ)

    def __call__(self, impl: Impl, wl: Workload) -> WorkerResult:
        timeout = wl.timeout_s * self.config.timeout_scale
        cmd = worker_command(self.config, impl, wl.name)
        env = worker_env(self.base_env, self.config.cwd, wl.env)
        try:
            proc = subprocess.run(
                cmd,
                cwd=self.config.cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return parse_worker_output(impl, wl.name, None, out, "", timeout)
        except OSError as exc:  # e.g. a --lamina-python that does not exist
            return failed_result(impl, wl.name, type(exc).__name__, str(exc))
        return parse_worker_output(impl, wl.name, proc.returncode, proc.stdout, proc.stderr)


# ------------------------------------------------------------- orchestration


def run_rounds(
    wl: Workload,
    launch: Launcher,
    mode: RunMode,
    impls: Sequence[Impl] = IMPLS,
) -> dict[Impl, list[WorkerResult | None]]:
    """Alternate the implementations over the rounds, after warm-up processes,
    each going first in every other round (lamina/jax, jax/lamina, ...): a
    process started right after another (while that one's exit still runs)
    is a few percent slower, which a fixed order would charge to one side
    (``self-check`` showed jax 1.01-1.04x itself in the first slot).

    Once an implementation has failed, its later rounds are skipped (None):
    failures are deterministic and re-running them only costs time.
    """
    for _ in range(mode.warmup_processes(wl)):
        for impl in impls:
            launch(impl, wl)
    results: dict[Impl, list[WorkerResult | None]] = {impl: [] for impl in IMPLS}
    failed: set[Impl] = set()
    for index in range(mode.rounds):
        for impl in (IMPLS if index % 2 == 0 else tuple(reversed(IMPLS))):
            if impl not in impls or impl in failed:
                results[impl].append(None)
                continue
            result = launch(impl, wl)
            results[impl].append(result)
            if not result.ok:
                failed.add(impl)
    return results


@dataclass
class RunOutcome:
    rows: list[Row]
    wall_s: float
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    reduced: list[str] = field(default_factory=list)


def rounds_within_limit(
    mode: RunMode, elapsed_s: float, done: int, remaining: int, time_limit_s: float | None
) -> RunMode:
    """The mode for the next workload under a time limit for the whole run.

    If finishing at the pace so far would overrun ``time_limit_s``, the next
    workload gets one round instead of ``mode.rounds`` (its row shows n=1);
    the pace is re-estimated before every workload, so a run that catches
    up goes back to full rounds. No limit, or no pace yet: ``mode``.
    """
    if time_limit_s is None or done == 0 or mode.rounds == 1:
        return mode
    projected = elapsed_s + elapsed_s / done * remaining
    if projected <= time_limit_s:
        return mode
    return RunMode(rounds=1, quick=mode.quick)


def run_workloads(
    workloads: Sequence[Workload],
    launch: Launcher,
    mode: RunMode,
    impls: Sequence[Impl] = IMPLS,
    progress: Callable[[str], None] | None = None,
    time_limit_s: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> RunOutcome:
    """Run every workload and build its row; never raises for a failing workload."""
    started = clock()
    outcome = RunOutcome(rows=[], wall_s=0.0)
    for index, wl in enumerate(workloads, 1):
        t0 = clock()
        this_mode = rounds_within_limit(
            mode, t0 - started, index - 1, len(workloads) - index + 1, time_limit_s
        )
        if this_mode.rounds != mode.rounds:
            outcome.reduced.append(wl.name)
        results = run_rounds(wl, launch, this_mode, impls)
        row = build_row(wl, results["lamina"], results["jax"])
        outcome.rows.append(row)
        for impl in IMPLS:
            if row.side(impl).versions and impl not in outcome.versions:
                outcome.versions[impl] = row.side(impl).versions
        if progress is not None:
            status = f"error: {row.error}" if row.error else "ok"
            rounds = "" if this_mode is mode else " (1 round: time limit)"
            progress(
                f"[{index}/{len(workloads)}] {wl.name}: {clock() - t0:.1f} s{rounds}, {status}"
            )
    outcome.wall_s = clock() - started
    return outcome


# -------------------------------------------------------------- metadata


def git_commit(repo_root: Path = REPO_ROOT) -> str | None:
    """The checked-out commit, read from ``.git`` files (no git command)."""
    git = repo_root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head[len("ref:") :].strip()
        ref_file = git / ref
        if ref_file.exists():
            return ref_file.read_text().strip()
        packed = git / "packed-refs"
        if packed.exists():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: how busy the shared machine was."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_start": load_average(),
    }


# ---------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description="lamina vs jax benchmarks, each in fresh alternating processes.",
    )
    parser.add_argument(
        "names", nargs="*", help="workloads: names, areas, globs (make_jaxpr_*) or prefixes"
    )
    parser.add_argument("--all", action="store_true", help="run every workload")
    parser.add_argument("--list", action="store_true", help="list workloads and exit")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, short budgets")
    parser.add_argument("--rounds", type=int, default=None, help="process pairs per workload")
    parser.add_argument(
        "--impl", choices=IMPLS, action="append", help="run only this side (repeatable)"
    )
    parser.add_argument("--lamina-python", default=sys.executable, help="interpreter for lamina")
    parser.add_argument("--jax-python", default=sys.executable, help="interpreter for jax")
    parser.add_argument(
        "--allow-jax-in-lamina",
        action="store_true",
        help="do not block `import jax` in the lamina worker",
    )
    parser.add_argument(
        "--jax-in-lamina-slot",
        action="store_true",
        help="A/A self-check of the harness: run jax in both slots (uses --jax-python)",
    )
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--json", type=Path, default=None, help="where to write the results")
    parser.add_argument("--no-json", action="store_true", help="write no JSON file")
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="render an earlier results file instead of running",
    )
    parser.add_argument(
        "--timeout-scale", type=float, default=1.0, help="multiply every worker timeout"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="seconds for the whole run; when the pace would overrun it, later workloads "
        f"get one round (default {DEFAULT_TIME_LIMIT_S:g} with --all, else none; 0: none)",
    )
    return parser


def select_workloads(args: argparse.Namespace, registry: Registry) -> list[Workload]:
    if args.all:
        return list(registry)
    return registry.select(args.names)


def list_workloads(registry: Registry) -> str:
    width = max(len(wl.name) for wl in registry)
    return "\n".join(
        f"{wl.name.ljust(width)}  [{wl.area}, {wl.goal.label}]  {wl.description}"
        for wl in registry
    )


def default_json_path(args: argparse.Namespace) -> Path:
    """Full ``--all`` runs update latest.json; anything else goes to partial.json."""
    full = args.all and not args.quick and not args.impl and not args.jax_in_lamina_slot
    return LATEST_JSON if full else PARTIAL_JSON


def resolve_time_limit(args: argparse.Namespace) -> float | None:
    if args.time_limit is None:
        return DEFAULT_TIME_LIMIT_S if args.all else None
    return args.time_limit if args.time_limit > 0 else None


def render(rows: Sequence[Row], markdown: bool) -> str:
    return render_markdown(rows) if markdown else render_table(rows)


def _eprint(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def rows_from_file(path: Path) -> list[Row]:
    document = json.loads(path.read_text(encoding="utf-8"))
    return [row_from_json(r) for r in document["rows"]]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .workloads import load_all

    load_all()
    if args.list:
        print(list_workloads(REGISTRY))
        return 0
    if args.from_json is not None:
        print(render(rows_from_file(args.from_json), args.markdown))
        return 0
    if not args.all and not args.names:
        _eprint("give workload names or --all (see --list)")
        return 2
    try:
        workloads = select_workloads(args, REGISTRY)
    except UnknownWorkloadError as exc:
        _eprint(str(exc))
        return 2
    mode = default_mode(args.quick, args.rounds)
    aa_check = args.jax_in_lamina_slot
    config = LaunchConfig(
        pythons={
            "lamina": args.jax_python if aa_check else args.lamina_python,
            "jax": args.jax_python,
        },
        quick=args.quick,
        allow_jax_in_lamina=args.allow_jax_in_lamina,
        lamina_adapter="jax" if aa_check else "lamina",
        timeout_scale=args.timeout_scale,
    )
    impls: tuple[Impl, ...] = tuple(args.impl) if args.impl else IMPLS
    started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    machine_at_start = machine_info()
    time_limit = resolve_time_limit(args)
    outcome = run_workloads(
        workloads, SubprocessLauncher(config), mode, impls, _eprint, time_limit
    )
    print(render(outcome.rows, args.markdown))
    _eprint(f"total: {outcome.wall_s:.1f} s for {len(workloads)} workloads")
    if outcome.reduced:
        _eprint(f"one round only (time limit {time_limit:g} s): {', '.join(outcome.reduced)}")
    if not args.no_json:
        path = args.json or default_json_path(args)
        machine = {**machine_at_start, "load_average_at_end": load_average()}
        meta = {
            "date": started_at,
            "machine": machine,
            "git_commit": git_commit(),
            "settings": {
                "rounds": mode.rounds,
                "time_limit_s": time_limit,
                "rounds_reduced_for_time": outcome.reduced,
                "quick": mode.quick,
                "impls": list(impls),
                "pythons": dict(config.pythons),
                "jax_blocked_in_lamina": not config.allow_jax_in_lamina and not aa_check,
                "lamina_slot_runs": config.lamina_adapter,
                "worker_env": dict(WORKER_ENV),
                "worker_env_removed": list(WORKER_ENV_REMOVED),
            },
            "versions": outcome.versions,
            "wall_s": outcome.wall_s,
        }
        write_json(path, results_document(outcome.rows, meta))
        _eprint(f"results written to {path}")
    return 0
