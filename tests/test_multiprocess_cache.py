"""The persistent caches across the processes of a ``lamina.distributed`` run.

Two runs of 2 processes x 4 CPU devices share one cache directory: the first
compiles (each process its part of every program) and writes both caches; the
second, a restart of the same program, compiles nothing in either process,
counted by the runtime and through ``log_compiles``, traces nothing for the
train step, and computes the same values.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lamina.distributed import launch

pytestmark = pytest.mark.multiprocess

WORKER = str(Path(__file__).with_name("multiprocess_cache_worker.py"))


def _run(cache_dir: Path, out_dir: Path) -> list[dict[str, Any]]:
    out_dir.mkdir()
    buf = io.StringIO()
    result = launch.run([sys.executable, WORKER, str(cache_dir), str(out_dir)], 2, 4,
                        timeout=150, out=buf)
    assert result.status == 0, f"{result.reason}\n{buf.getvalue()[-6000:]}"
    return [json.loads((out_dir / f"p{pid}.json").read_text()) for pid in range(2)]


def test_a_restarted_run_compiles_nothing_in_any_process(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _run(cache, tmp_path / "cold")
    for report in cold:
        assert report["warnings"] == [], report
        assert report["xla_compiles"] >= 2 and report["logged_compiles"] >= 2, report
        assert report["trace_cache"]["stores"] >= 1, report
    # each process keeps its own part of a program that spans processes
    assert len(list(cache.glob("*.lamina-xc"))) >= 4
    warm = _run(cache, tmp_path / "warm")
    for before, report in zip(cold, warm):
        assert report["warnings"] == [], report
        assert report["xla_compiles"] == 0 and report["logged_compiles"] == 0, report
        assert report["disk"]["hits"] >= 2 and report["disk"]["errors"] == 0, report
        assert report["trace_cache"]["hits"] >= 1, report
        assert report["loss"] == before["loss"] and report["psum"] == before["psum"]
    assert warm[0]["psum"] == [[12.0] * 3] * 4  # 4 entries of 1 and 4 of 2
