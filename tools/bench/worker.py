"""One fresh process, one implementation, one workload.

``python -m tools.bench.worker IMPL NAME [--quick] [--allow-jax]`` runs the
workload's warm-up and measurement and prints one line
``@@tools.bench.result@@ {json}`` on stdout, then exits without the
interpreter's teardown. A failing workload is a result with an ``error``,
not a crash. In a ``lamina`` worker the jax import blocker is installed
before anything else unless ``--allow-jax`` is given, and the result records
whether jax ended up in ``sys.modules``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .adapters import Adapter, Impl, check_impl
from .blocker import JaxImportBlocker, install_blocker, jax_imported
from .registry import Registry, Workload

RESULT_MARKER = "@@tools.bench.result@@"
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
ERROR_MESSAGE_CHARS = 240


@dataclass
class WorkerResult:
    """What a worker reports; the harness reads it back from JSON."""

    impl: str
    name: str
    value: float | None = None
    unit: str = "s"
    clock: str = "wall"
    samples: list[float] = field(default_factory=list)
    inner: int = 0
    iterations: int = 0
    warmup_s: float = 0.0
    wall_s: float = 0.0
    # CPU time over wall time while measuring: well below 1 for single-threaded
    # work means the process waited for a CPU (a busy machine).
    cpu_over_wall: float | None = None
    peak_rss_mb: float = 0.0
    jax_imported: bool = False
    jax_import_attempts: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    error_type: str | None = None
    error_message: str | None = None
    error_stage: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_type is None and self.value is not None


def first_line(exc: BaseException) -> str:
    """The exception's first non-empty message line, shortened."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(text) > ERROR_MESSAGE_CHARS:
        text = text[: ERROR_MESSAGE_CHARS - 1] + "…"
    return text


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.worker")
    parser.add_argument("impl", help="lamina or jax")
    parser.add_argument("name", help="workload name")
    parser.add_argument("--quick", action="store_true", help="smoke-run measurement plan")
    parser.add_argument(
        "--allow-jax", action="store_true", help="lamina worker: do not block imports of jax"
    )
    parser.add_argument(
        "--adapter",
        default=None,
        help="run this implementation's adapter in IMPL's slot (jax in the lamina slot "
        "is the harness's A/A self-check)",
    )
    return parser.parse_args(argv)


def run_workload(
    impl: Impl,
    name: str,
    quick: bool,
    adapter_impl: Impl | None = None,
    registry: Registry | None = None,
) -> WorkerResult:
    """Set up, measure and describe one workload in this process.

    Every failure of the workload (unknown name, setup, timing) becomes the
    result's error; only a failure of ``info`` keeps the timing.
    """
    from .plans import plan_for
    from .timing import measure

    result = WorkerResult(impl=impl, name=name)
    adapter = Adapter(impl if adapter_impl is None else adapter_impl)
    stage = "lookup"
    try:
        wl = _lookup(name, registry)
        result.unit = wl.unit
        if wl.recursion_limit is not None:
            sys.setrecursionlimit(max(sys.getrecursionlimit(), wl.recursion_limit))
        stage = "setup"
        bench = wl.setup(adapter)
        stage = "run"
        result.clock = wl.measured_by
        wall0, cpu0 = time.perf_counter(), time.process_time()
        measurement = measure(bench, plan_for(wl, quick), CLOCKS[wl.clock], time.perf_counter)
        wall = time.perf_counter() - wall0
        result.cpu_over_wall = (time.process_time() - cpu0) / wall if wall > 0 else None
        result.samples = measurement.samples
        result.inner = measurement.inner
        result.iterations = measurement.iterations
        result.warmup_s = measurement.warmup_s
        result.value = measurement.value if wl.metric == "time" else peak_rss_mb()
        stage = "info"
        if bench.info is not None:
            result.info = bench.info()
    except Exception as exc:
        if stage == "info":  # the timing stands; only the extra facts are missing
            result.info = {"info_error": f"{type(exc).__name__}: {first_line(exc)}"}
        else:
            result.value = None
            result.error_type = type(exc).__name__
            result.error_message = first_line(exc)
            result.error_stage = stage
    if stage != "lookup":
        result.versions = adapter.versions()
    return result


def _lookup(name: str, registry: Registry | None) -> Workload:
    if registry is None:
        from .registry import REGISTRY
        from .workloads import load_all

        load_all()
        registry = REGISTRY
    return registry.get(name)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    args = _parse(argv)
    impl = check_impl(args.impl)
    adapter_impl = impl if args.adapter is None else check_impl(args.adapter)
    blocker: JaxImportBlocker | None = None
    if impl == "lamina" and adapter_impl == "lamina" and not args.allow_jax:
        blocker = install_blocker()  # before anything can import jax
    result = run_workload(impl, args.name, args.quick, adapter_impl)
    result.peak_rss_mb = peak_rss_mb()
    result.jax_imported = jax_imported()
    result.jax_import_attempts = None if blocker is None else len(blocker.attempts)
    result.wall_s = time.perf_counter() - started
    payload = json.dumps(result.__dict__, default=str)
    sys.stdout.write(f"\n{RESULT_MARKER} {payload}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: it is not measured, can be slow, and a crash
    # in a library's exit hook would hide a result that is already printed.
    os._exit(0)


if __name__ == "__main__":
    main()
