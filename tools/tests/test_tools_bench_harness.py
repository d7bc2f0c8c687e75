"""The driver: round alternation, error rows, worker output parsing, reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bench.adapters import Impl
from tools.bench.harness import (
    LaunchConfig,
    git_commit,
    parse_worker_output,
    run_rounds,
    run_workloads,
    worker_command,
    worker_env,
)
from tools.bench.plans import RunMode
from tools.bench.registry import DISPATCH, INFO, Bench, Registry, Workload, workload
from tools.bench.report import (
    format_quantity,
    render_markdown,
    render_table,
    results_document,
    sentence,
    write_json,
)
from tools.bench.results_model import build_row, row_from_json
from tools.bench.worker import RESULT_MARKER, WorkerResult, run_workload

REPO_ROOT = Path(__file__).resolve().parents[2]


def tiny_bench(a: object) -> Bench:
    total = [0]

    def run() -> int:
        total[0] += 1
        return total[0]

    return Bench(run=run, info=lambda: {"eqns": 4})


def tiny_registry() -> Registry:
    reg = Registry()
    workload("tiny", area="t", goal=DISPATCH, description="a tiny workload", registry=reg)(
        tiny_bench
    )
    return reg


TINY = tiny_registry().get("tiny")


def ok(impl: Impl, value: float, **extra: object) -> WorkerResult:
    return WorkerResult(impl=impl, name="tiny", value=value, samples=[value], **extra)  # type: ignore[arg-type]


def failure(impl: Impl, kind: str = "AttributeError", msg: str = "no jit") -> WorkerResult:
    return WorkerResult(impl=impl, name="tiny", error_type=kind, error_message=msg)


class FakeLauncher:
    """Returns scripted results and records the launch order."""

    def __init__(self, script: dict[Impl, list[WorkerResult]]) -> None:
        self.script = {impl: list(results) for impl, results in script.items()}
        self.order: list[str] = []

    def __call__(self, impl: Impl, wl: Workload) -> WorkerResult:
        self.order.append(impl)
        return self.script[impl].pop(0)


def test_rounds_alternate_and_each_side_goes_first_in_every_other_round() -> None:
    launch = FakeLauncher(
        {
            "lamina": [ok("lamina", v, info={"eqns": 4}) for v in (1, 2, 3)],
            "jax": [ok("jax", v) for v in (2, 2, 2)],
        }
    )
    results = run_rounds(TINY, launch, RunMode(rounds=3, quick=False))
    assert launch.order == ["lamina", "jax", "jax", "lamina", "lamina", "jax"]
    row = build_row(TINY, results["lamina"], results["jax"])
    assert row.ratios == [0.5, 1.0, 1.5]
    assert row.ratio is not None and row.ratio.median == 1.0
    assert row.goal_met is True
    assert row.error is None
    assert row.per_eqn("lamina") == pytest.approx(2.0 / 4)


def test_warmup_processes_are_discarded() -> None:
    wl = Workload(
        name="imp", area="i", goal=INFO, description="", setup=tiny_bench, warmup_processes=1
    )
    launch = FakeLauncher(
        {"lamina": [ok("lamina", 99.0), ok("lamina", 1.0)], "jax": [ok("jax", 99.0), ok("jax", 2.0)]}
    )
    results = run_rounds(wl, launch, RunMode(rounds=1, quick=False))
    assert launch.order == ["lamina", "jax", "lamina", "jax"]
    assert [r.value for r in results["jax"] if r] == [2.0]
    assert run_rounds(wl, FakeLauncher({"lamina": [ok("lamina", 1.0)], "jax": [ok("jax", 1.0)]}),
                      RunMode(rounds=1, quick=True))["lamina"][0] is not None


def test_a_failing_side_is_an_error_row_and_is_not_rerun() -> None:
    launch = FakeLauncher({"lamina": [failure("lamina")], "jax": [ok("jax", v) for v in (1, 2, 3)]})
    results = run_rounds(TINY, launch, RunMode(rounds=3, quick=False))
    assert launch.order == ["lamina", "jax", "jax", "jax"]
    row = build_row(TINY, results["lamina"], results["jax"])
    assert row.lamina.values == [None, None, None]
    assert row.jax.summary is not None and row.jax.summary.median == 2
    assert row.ratio is None and row.goal_met is None
    assert row.error == "lamina: AttributeError: no jit"
    assert "lamina does not run this yet (AttributeError: no jit)" in sentence(row)
    table = render_table([row])
    assert "AttributeError: no jit" in table and "tiny" in table


def test_only_one_side_can_be_run() -> None:
    launch = FakeLauncher({"jax": [ok("jax", 1.0)]})
    results = run_rounds(TINY, launch, RunMode(rounds=1, quick=False), impls=("jax",))
    assert launch.order == ["jax"]
    assert results["lamina"] == [None]


def test_run_workloads_never_raises_and_reports_progress() -> None:
    launch = FakeLauncher({"lamina": [failure("lamina")], "jax": [failure("jax", "RuntimeError")]})
    seen: list[str] = []
    outcome = run_workloads([TINY], launch, RunMode(rounds=1, quick=False), progress=seen.append)
    assert outcome.rows[0].error == "lamina: AttributeError: no jit; jax: RuntimeError: no jit"
    assert seen and "tiny" in seen[0] and "error" in seen[0]


def test_jax_in_lamina_process_is_reported() -> None:
    lam = ok("lamina", 1.0, jax_imported=True, jax_import_attempts=None, peak_rss_mb=300.0)
    row = build_row(TINY, [lam], [ok("jax", 1.0, peak_rss_mb=200.0)])
    assert row.lamina.jax_imported is True
    assert "YES" in render_table([row])
    blocked = ok("lamina", 1.0, jax_imported=False, jax_import_attempts=2)
    row = build_row(TINY, [blocked], [ok("jax", 1.0)])
    assert "no (2 blocked)" in render_table([row])


def test_parse_worker_output() -> None:
    good = WorkerResult(impl="jax", name="tiny", value=0.5, samples=[0.5])
    stdout = "library chatter\n" + RESULT_MARKER + " " + json.dumps(good.__dict__) + "\n"
    parsed = parse_worker_output("jax", "tiny", 0, stdout, "")
    assert parsed.ok and parsed.value == 0.5

    crashed = parse_worker_output("lamina", "tiny", -11, "", "warning\nFatal Python error: x\n")
    assert crashed.error_type == "WorkerCrashed"
    assert crashed.error_message == "exit code -11; Fatal Python error: x"

    timed_out = parse_worker_output("lamina", "tiny", None, "", "", timeout_s=30)
    assert timed_out.error_type == "WorkerTimeout" and "30 s" in (timed_out.error_message or "")

    garbled = parse_worker_output("jax", "tiny", 0, RESULT_MARKER + " {not json", "")
    assert garbled.error_type == "BadWorkerOutput"


def test_worker_reports_setup_and_run_errors_in_its_result() -> None:
    reg = Registry()

    def broken_setup(a: object) -> Bench:
        raise ValueError("bad shapes\nsecond line")

    def broken_run(a: object) -> Bench:
        return Bench(run=lambda: 1 / 0)

    workload("broken_setup", area="t", goal=DISPATCH, description="", registry=reg)(broken_setup)
    workload("broken_run", area="t", goal=DISPATCH, description="", registry=reg)(broken_run)
    workload("tiny", area="t", goal=DISPATCH, description="", registry=reg, budget_s=0.01)(
        tiny_bench
    )
    r = run_workload("lamina", "broken_setup", quick=True, registry=reg)
    assert (r.error_type, r.error_message, r.error_stage) == ("ValueError", "bad shapes", "setup")
    r = run_workload("lamina", "broken_run", quick=True, registry=reg)
    assert (r.error_type, r.error_stage) == ("ZeroDivisionError", "run")
    r = run_workload("jax", "nope", quick=True, registry=reg)
    assert (r.error_type, r.error_stage) == ("UnknownWorkloadError", "lookup")
    r = run_workload("jax", "tiny", quick=True, registry=reg)
    assert r.ok and r.value is not None and r.value > 0 and r.info == {"eqns": 4}


def test_worker_process_end_to_end_blocks_jax() -> None:
    # A real worker process (no jax or lamina needed): an unknown workload is
    # an error result, and the lamina worker runs with the jax blocker.
    config = LaunchConfig(pythons={"lamina": sys.executable, "jax": sys.executable}, quick=True)
    cmd = worker_command(config, "lamina", "no_such_workload")
    proc = subprocess.run(
        cmd, cwd=REPO_ROOT, env=worker_env({}, REPO_ROOT), capture_output=True, text=True,
        timeout=60, check=False,
    )
    result = parse_worker_output("lamina", "no_such_workload", proc.returncode, proc.stdout,
                                 proc.stderr)
    assert result.error_type == "UnknownWorkloadError"
    assert result.jax_imported is False
    assert result.jax_import_attempts == 0


def test_blocker_makes_jax_look_absent() -> None:
    code = (
        "from tools.bench.blocker import install_blocker, jax_imported\n"
        "b = install_blocker()\n"
        "try:\n    import jax.core\nexcept ModuleNotFoundError as e:\n    print(type(e).__name__, e.name)\n"
        "print(b.attempts, jax_imported())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[:2] == ["ModuleNotFoundError jax", "['jax'] False"]


def test_worker_env_is_fixed_for_both_sides() -> None:
    env = worker_env({"XLA_FLAGS": "--other", "PYTHONPATH": "/x",
                      "PYTHONDONTWRITEBYTECODE": "1"}, Path("/repo"))
    assert "PYTHONDONTWRITEBYTECODE" not in env  # start-up rows load .pyc files
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=8"
    assert env["JAX_PLATFORMS"] == "cpu"
    assert env["TF_CPP_MIN_LOG_LEVEL"] == "1"
    assert env["PYTHONPATH"].split(":") == ["/repo", "/x"]
    config = LaunchConfig(pythons={"lamina": "/l/python", "jax": "/j/python"},
                          allow_jax_in_lamina=True, quick=True)
    assert worker_command(config, "lamina", "w") == [
        "/l/python", "-m", "tools.bench.worker", "lamina", "w", "--quick", "--allow-jax"
    ]
    assert worker_command(config, "jax", "w") == [
        "/j/python", "-m", "tools.bench.worker", "jax", "w", "--quick"
    ]


def test_workload_env_reaches_its_workers_and_its_row() -> None:
    wl = Workload(name="w", area="t", goal=DISPATCH, description="d", setup=tiny_bench,
                  env=(("OPENBLAS_NUM_THREADS", "1"),))
    env = worker_env({"OPENBLAS_NUM_THREADS": "8"}, Path("/repo"), wl.env)
    assert env["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_NUM_THREADS" not in worker_env({}, Path("/repo"))
    row = build_row(wl, [ok("lamina", 1.0)], [ok("jax", 1.0)])
    assert row.env == {"OPENBLAS_NUM_THREADS": "1"}
    assert row_from_json(json.loads(json.dumps(row.to_json()))).env == row.env
    assert build_row(TINY, [ok("lamina", 1.0)], [ok("jax", 1.0)]).env == {}


def test_markdown_sentences_follow_goal_and_ratio() -> None:
    def row_with(lamina: float, jax: float):  # type: ignore[no-untyped-def]
        return build_row(TINY, [ok("lamina", lamina)], [ok("jax", jax)])

    assert sentence(row_with(0.5, 1.0)) == (
        "lamina is 2.00× faster than JAX (ratio 0.50), meeting the dispatch goal of ≤ 1.0."
    )
    assert sentence(row_with(3.0, 1.0)) == (
        "lamina is 3.00× slower than JAX (ratio 3.00), short of the dispatch goal of ≤ 1.0."
    )
    assert sentence(row_with(1.01, 1.0)).startswith("lamina is on par with JAX")
    noisy = build_row(
        TINY, [ok("lamina", 1.0), ok("lamina", 3.0)], [ok("jax", 1.0), ok("jax", 1.0)]
    )
    assert sentence(noisy).endswith("Rounds varied by up to 100%, so this is a rough figure.")
    md = render_markdown([row_with(0.5, 1.0)])
    assert md.splitlines()[0].startswith("| Benchmark |")
    assert "| 0.50 |" in md


def test_quantities_are_readable() -> None:
    assert format_quantity(1.5, "s") == "1.5 s"
    assert format_quantity(0.0123, "s") == "12.3 ms"
    assert format_quantity(12.3e-6, "s") == "12.3 µs"
    assert format_quantity(5e-8, "s") == "50 ns"
    assert format_quantity(151.7, "MB") == "152 MB"
    assert format_quantity(None, "s") == "-"


def test_json_round_trip(tmp_path: Path) -> None:
    rows = [
        build_row(TINY, [ok("lamina", 1.0), ok("lamina", 2.0)], [ok("jax", 2.0), ok("jax", 2.0)]),
        build_row(TINY, [failure("lamina"), None], [ok("jax", 2.0), ok("jax", 3.0)]),
    ]
    path = tmp_path / "out" / "latest.json"
    write_json(path, results_document(rows, {"date": "today", "git_commit": None}))
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema"] == 1 and data["date"] == "today"
    assert data["rows"][0]["lamina"]["median"] == 1.5
    assert data["rows"][1]["error"] == "lamina: AttributeError: no jit"
    again = [row_from_json(r) for r in data["rows"]]
    assert render_table(again) == render_table(rows)
    assert not list(path.parent.glob("*.tmp"))


def test_git_commit_reads_files(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("abc123\n")
    assert git_commit(tmp_path) == "abc123"
    (git / "refs" / "heads" / "main").unlink()
    (git / "packed-refs").write_text("# pack-refs\ndef456 refs/heads/main\n")
    assert git_commit(tmp_path) == "def456"
    assert git_commit(tmp_path / "missing") is None


def test_time_limit_reduces_rounds_when_the_pace_would_overrun() -> None:
    from tools.bench.harness import rounds_within_limit

    full = RunMode(rounds=3, quick=False)
    assert rounds_within_limit(full, 0.0, 0, 10, 100.0) is full  # no pace yet
    assert rounds_within_limit(full, 50.0, 5, 5, 100.0) is full  # on pace: 100 s
    assert rounds_within_limit(full, 60.0, 5, 5, 100.0).rounds == 1  # would take 120 s
    assert rounds_within_limit(full, 60.0, 5, 5, None) is full


def test_run_workloads_under_a_time_limit() -> None:
    now = [0.0]

    class SlowLauncher:
        def __call__(self, impl: Impl, wl: Workload) -> WorkerResult:
            now[0] += 10.0
            return ok(impl, 1.0)

    reg = Registry()
    for name in ("a", "b", "c"):
        workload(name, area="t", goal=DISPATCH, description="", registry=reg)(tiny_bench)
    outcome = run_workloads(
        list(reg), SlowLauncher(), RunMode(rounds=3, quick=False), time_limit_s=100.0,
        clock=lambda: now[0],
    )
    # a: 3 rounds (60 s); then 60 + 60 * 2 > 100, so b and c get one round.
    assert outcome.reduced == ["b", "c"]
    assert [r.jax.summary.n for r in outcome.rows if r.jax.summary] == [3, 1, 1]
