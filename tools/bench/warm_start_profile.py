"""Where lamina's share of a warm start goes: checkpoints of fresh processes.

``python -m tools.bench.warm_start_profile MODE [--rounds N] [--modules]``
runs the lamina side of a ``warm_start`` workload (MODE ``both``:
``warm_start_both_caches``, ``compile``: ``warm_start_compile_cache``,
``cold``: ``cold_start_train_step``) in ``N`` fresh processes after one that
fills the caches (a cache directory of this tool's own). Each process first
pays the floor (numpy, ml_dtypes, jaxlib, the CPU client, numpy's random
generator: what ``warm_start_floor`` times, outside the checkpoints), then
times, in CPU and wall milliseconds, ``import lamina`` and the cache settings
(which load the runtime), ``jit`` of the train step, the data, and the first
result; with CPython's garbage collections among them. The table gives
medians. ``--modules`` lists what the last process imported beyond the floor,
by package: what a warm start loads.

CPU time is the quieter figure on a shared machine; wall time is what the
benchmark reports.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

# What the benchmark's workers run without (harness.WORKER_ENV_REMOVED; not
# imported from there, so that this tool's children load no more than they did).
WORKER_ENV_REMOVED = ("PYTHONDONTWRITEBYTECODE",)

MODES = ("both", "compile", "cold")


def _child(mode: str, directory: str) -> None:
    import importlib

    importlib.import_module("numpy.random")
    importlib.import_module("ml_dtypes")
    importlib.import_module("jaxlib.xla_client").make_cpu_client().devices()
    floor = set(sys.modules)
    from .adapters import Adapter
    from .workloads.models import block_leaves, make_train_step, mlp_batch, mlp_params

    collections_ms: collections.Counter[int] = collections.Counter()
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.process_time()
        else:
            collections_ms[info["generation"]] += (time.process_time() - started[0]) * 1e3

    gc.callbacks.append(on_gc)
    marks: list[tuple[str, float, float]] = []
    wall0, cpu0 = time.perf_counter(), time.process_time()

    def mark(name: str) -> None:
        marks.append((name, (time.perf_counter() - wall0) * 1e3,
                      (time.process_time() - cpu0) * 1e3))

    api = importlib.import_module("lamina")
    if mode != "cold":
        api.config.update("jax_compilation_cache_dir", directory)
        api.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    if mode == "both":
        api.config.update("persistent_trace_cache", True)
    mark("import lamina, settings")
    step = api.jit(make_train_step(Adapter("lamina")))
    mark("jit(train_step)")
    x, y = mlp_batch()
    params = mlp_params()
    mark("data")
    block_leaves(step(params, x, y))
    mark("first result")
    gc.callbacks.remove(on_gc)
    print(json.dumps({"marks": marks, "gc_ms": dict(collections_ms),
                      "modules": sorted(set(sys.modules) - floor)}))


def _run(mode: str, directory: str) -> dict[str, Any]:
    # as the benchmark's workers: load the .pyc files, do not recompile every source
    env = {k: v for k, v in os.environ.items() if k not in WORKER_ENV_REMOVED}
    proc = subprocess.run([sys.executable, "-m", "tools.bench.warm_start_profile", "--child",
                           mode, directory], capture_output=True, text=True, timeout=300,
                          env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the profiled process failed:\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def _table(mode: str, reports: list[dict[str, Any]]) -> str:
    lines = [f"{mode}: medians of {len(reports)} processes (ms since the floor)",
             f"  {'checkpoint':28s} {'wall':>8s} {'cpu':>8s}"]
    for i, (name, _, _) in enumerate(reports[0]["marks"]):
        wall = statistics.median(r["marks"][i][1] for r in reports)
        cpu = statistics.median(r["marks"][i][2] for r in reports)
        lines.append(f"  {name:28s} {wall:8.1f} {cpu:8.1f}")
    for gen in ("0", "1", "2"):
        ms = statistics.median(r["gc_ms"].get(gen, 0.0) for r in reports)
        lines.append(f"  {'gc generation ' + gen:28s} {'':8s} {ms:8.1f}")
    return "\n".join(lines)


def _modules(report: dict[str, Any]) -> str:
    by_package: dict[str, list[str]] = collections.defaultdict(list)
    for name in report["modules"]:
        top = name.split(".")[0]
        by_package[".".join(name.split(".")[:2]) if top == "jaxlib" else top].append(name)
    return "\n".join(f"  {pkg:34s} {len(mods):4d}" for pkg, mods in
                     sorted(by_package.items(), key=lambda kv: -len(kv[1])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modules", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("directory", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.mode, args.directory)
        return 0
    directory = os.path.join(tempfile.gettempdir(), f"warm-start-profile-{args.mode}")
    _run(args.mode, directory)  # fills the caches
    reports = [_run(args.mode, directory) for _ in range(args.rounds)]
    print(_table(args.mode, reports))
    if args.modules:
        print("imported beyond the floor, by package:")
        print(_modules(reports[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
