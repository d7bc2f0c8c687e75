"""Warm starts: the persistent compilation cache across processes and programs.

The cross-process test starts four processes at once on an empty cache
directory (concurrent writers of the same entries), then a fifth, which must
compile nothing for the demo's jitted train step and get the same loss. The
in-process tests stand for a restart with ``lamina.clear_caches()`` (which
empties every in-memory cache, not the disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina_interpreters_pxla import compiler, persistent_cache

WORKER = Path(__file__).with_name("warm_start_worker.py")


def _start(cache_dir: Path, *flags: str) -> subprocess.Popen[str]:
    env = dict(os.environ, LAMINA_NUM_CPU_DEVICES="8", TF_CPP_MIN_LOG_LEVEL="1")
    env.pop("XLA_FLAGS", None)
    return subprocess.Popen([sys.executable, str(WORKER), str(cache_dir), *flags], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report


def test_concurrent_writers_then_processes_that_compile_nothing(tmp_path: Path) -> None:
    writers = [_start(tmp_path, "--no-pmap", "--trace-cache") for _ in range(4)]
    cold = [_result(p) for p in writers]
    assert all(r["warnings"] == [] for r in cold), cold
    assert len({r["loss"] for r in cold}) == 1
    assert not list(tmp_path.rglob(".tmp-*")), "a writer left a temporary file"
    # the compilation cache alone: traced again, compiled never
    warm = _result(_start(tmp_path, "--no-pmap"))
    assert warm["xla_compiles"] == 0 and warm["logged_compiles"] == 0, warm
    # a writer that starts late may already find another's entry on disk
    assert all(r["logged_compiles"] >= 1 or r["disk"]["hits"] >= 1 for r in cold), cold
    assert any(r["logged_compiles"] >= 1 for r in cold), cold
    assert warm["disk"]["errors"] == 0 and warm["disk"]["hits"] > 0
    assert warm["traces"] > 0
    # with the trace cache: the train step is neither traced nor compiled
    warmer = _result(_start(tmp_path, "--no-pmap", "--trace-cache"))
    assert warmer["xla_compiles"] == warmer["logged_compiles"] == 0, warmer
    assert warmer["traces"] == 0
    assert warmer["trace_cache"]["hits"] == 1
    for report in (warm, warmer):
        assert report["warnings"] == []
        assert report["loss"] == cold[0]["loss"]


def _compiles_after_restart(run: Any) -> tuple[int, Any, Any]:
    """XLA compilations of ``run()`` after a simulated restart, and both results."""
    first = np.asarray(run())
    lx.clear_caches()
    before = compiler.compile_stats["xla_compiles"]
    second = np.asarray(run())
    return compiler.compile_stats["xla_compiles"] - before, first, second


@pytest.mark.parametrize("kind", ["jit", "pmap", "sharded_jit", "jit_mesh", "shard_map"])
def test_every_kind_of_program_loads_from_disk(cache_dir: Path, kind: str,
                                               devices8: list[Any]) -> None:
    x = np.arange(16.0, dtype=np.float32).reshape(8, 2)

    def body(v: Any) -> Any:
        return jnp.sin(v) * 2.0 + jnp.sum(v)

    if kind == "jit":
        def run() -> Any:
            return lx.jit(body)(x)
    elif kind == "pmap":
        def run() -> Any:
            return lx.pmap(lambda v: lx.lax.psum(body(v), "i"), axis_name="i")(x)
    elif kind == "sharded_jit":
        from lamina.sharded_jit import PartitionSpec, sharded_jit

        def run() -> Any:
            return sharded_jit(body, in_parts=PartitionSpec(8, 1),
                               out_parts=PartitionSpec(8, 1))(x)
    elif kind == "jit_mesh":
        mesh = lx.sharding.Mesh(np.array(devices8), ("d",))
        sharding = lx.sharding.NamedSharding(mesh, lx.sharding.PartitionSpec("d"))

        def run() -> Any:
            return lx.jit(body, in_shardings=sharding, out_shardings=sharding)(x)
    else:
        mesh = lx.sharding.Mesh(np.array(devices8), ("d",))

        def run() -> Any:
            per_block = lx.shard_map(lambda v: lx.lax.psum(body(v), "d"), mesh=mesh,
                                     in_specs=lx.P("d"), out_specs=lx.P())
            return lx.jit(per_block)(x)
    compiles, first, second = _compiles_after_restart(run)
    assert compiles == 0
    np.testing.assert_array_equal(first, second)


def test_the_jax_style_controls(tmp_path: Path) -> None:
    from lamina.experimental.compilation_cache import compilation_cache as cc

    saved = dict(persistent_cache.cache_config.values)
    try:
        cc.set_cache_dir(str(tmp_path))
        assert lx.config.read("jax_compilation_cache_dir") == str(tmp_path)
        assert not cc.is_initialized()
        lx.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        lx.jit(lambda v: v * 3.0 - 1.0)(np.float32(2.0))
        assert cc.is_initialized() and list(tmp_path.glob("*.lamina-xc"))
        cc.reset_cache()
        assert not cc.is_initialized()
        assert lx.compilation_cache.reset_cache is cc.reset_cache
    finally:
        persistent_cache.cache_config.values.update(saved)
        persistent_cache.reset_cache()
