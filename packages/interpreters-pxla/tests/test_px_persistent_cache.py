"""The persistent compilation cache: entries on disk, their safety, their settings.

A "restarted process" is simulated by emptying the in-memory compile cache:
the next compilation of the same module then has only the disk to go to.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import compiler
from lamina_interpreters_pxla import persistent_cache as pc
from lamina_interpreters_pxla.config import ConfigError
from lamina_linear_util.cache import set_explain_cache_misses

ADD_ONE = """
module @jit_add_one attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32> {jax.arg_info = "x"}) -> tensor<4xf32> {
    %c = stablehlo.constant dense<%s> : tensor<4xf32>
    %0 = stablehlo.add %a, %c : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


def _module(constant: float = 1.0) -> str:
    return ADD_ONE.replace("%s", f"{constant:.1f}")


@pytest.fixture
def cache_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh cache directory with every compilation written to it."""
    saved = dict(pc.cache_config.values)
    pc.cache_config.update("compilation_cache_dir", str(tmp_path))
    pc.cache_config.update("persistent_cache_min_compile_time_secs", 0)
    compiler.clear_compile_cache()
    try:
        yield tmp_path
    finally:
        pc.cache_config.values.update(saved)
        pc.reset_cache()
        compiler.clear_compile_cache()


def _compile_and_run(module: str, expected: float) -> None:
    dev = px.devices()[0]
    loaded = compiler.compile_module(module, [dev], name="jit_add_one")
    x = px.device_put(np.zeros(4, np.float32), dev)
    out = loaded.execute_sharded([x._arr]).consume_with_handlers(
        [compiler.result_handler(x.aval, x.sharding)])[0]
    np.testing.assert_array_equal(np.asarray(px.Array(out)), np.full(4, expected, np.float32))


def _restart() -> None:
    """What a new process has: an empty in-memory cache."""
    compiler.clear_compile_cache()


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"*{pc.ENTRY_SUFFIX}"))


def test_second_compile_loads_from_disk(cache_dir: Path) -> None:
    before = dict(compiler.compile_stats), dict(pc.disk_stats)
    _compile_and_run(_module(), 1.0)
    assert len(_entries(cache_dir)) == 1
    assert pc.is_initialized()
    _restart()
    _compile_and_run(_module(), 1.0)
    assert compiler.compile_stats["xla_compiles"] == before[0]["xla_compiles"] + 1
    assert pc.disk_stats["hits"] == before[1]["hits"] + 1
    assert pc.disk_stats["writes"] == before[1]["writes"] + 1


def test_another_module_is_another_entry(cache_dir: Path) -> None:
    _compile_and_run(_module(1.0), 1.0)
    _compile_and_run(_module(2.0), 2.0)
    assert len(_entries(cache_dir)) == 2


def test_truncated_entry_is_recompiled_with_a_warning(cache_dir: Path) -> None:
    _compile_and_run(_module(), 1.0)
    (entry,) = _entries(cache_dir)
    entry.write_bytes(entry.read_bytes()[:100])
    _restart()
    compiles = compiler.compile_stats["xla_compiles"]
    with pytest.warns(pc.PersistentCacheWarning, match="truncated"):
        _compile_and_run(_module(), 1.0)
    assert compiler.compile_stats["xla_compiles"] == compiles + 1
    # rewritten whole: the next restart loads it without a warning
    _restart()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compile_and_run(_module(), 1.0)
    assert compiler.compile_stats["xla_compiles"] == compiles + 1


def test_corrupt_and_foreign_entries_are_recompiled(cache_dir: Path) -> None:
    _compile_and_run(_module(), 1.0)
    (entry,) = _entries(cache_dir)
    blob = bytearray(entry.read_bytes())
    blob[-10] ^= 0xFF
    entry.write_bytes(bytes(blob))
    _restart()
    with pytest.warns(pc.PersistentCacheWarning, match="checksum"):
        _compile_and_run(_module(), 1.0)
    # a well-formed entry whose payload jaxlib cannot load
    entry.write_bytes(pc.pack_entry(b"not an executable"))
    _restart()
    with pytest.warns(pc.PersistentCacheWarning, match="could not load"):
        _compile_and_run(_module(), 1.0)


def test_min_compile_time_and_entry_size(cache_dir: Path) -> None:
    pc.cache_config.update("persistent_cache_min_compile_time_secs", 1000)
    _compile_and_run(_module(1.0), 1.0)
    assert _entries(cache_dir) == []
    pc.cache_config.update("persistent_cache_min_compile_time_secs", 0)
    pc.cache_config.update("persistent_cache_min_entry_size_bytes", 10**9)
    _compile_and_run(_module(2.0), 2.0)
    assert _entries(cache_dir) == []
    pc.cache_config.update("persistent_cache_min_entry_size_bytes", -1)
    _compile_and_run(_module(3.0), 3.0)
    assert len(_entries(cache_dir)) == 1


def test_size_limit_evicts_least_recently_used(cache_dir: Path) -> None:
    _compile_and_run(_module(1.0), 1.0)
    (first,) = _entries(cache_dir)
    size = first.stat().st_size
    os.utime(first, (1, 1))  # long ago: the least recently used
    pc.cache_config.update("compilation_cache_max_size", int(size * 2.5))
    _compile_and_run(_module(2.0), 2.0)
    _compile_and_run(_module(3.0), 3.0)
    remaining = _entries(cache_dir)
    assert len(remaining) == 2 and first not in remaining


def test_disk_hits_and_misses_are_explained(cache_dir: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    previous = set_explain_cache_misses(True)
    caplog.set_level(logging.WARNING, logger="lamina.cache")
    try:
        _compile_and_run(_module(), 1.0)
        _restart()
        _compile_and_run(_module(), 1.0)
    finally:
        set_explain_cache_misses(previous)
    text = caplog.text
    assert "persistent compilation cache miss for jit_add_one" in text
    assert "persistent compilation cache write for jit_add_one" in text
    assert "persistent compilation cache hit for jit_add_one" in text


def test_settings_are_checked_and_reset_the_cache(tmp_path: Path) -> None:
    saved = dict(pc.cache_config.values)
    try:
        with pytest.raises(ConfigError, match="min_compile_time_secs"):
            pc.cache_config.update("persistent_cache_min_compile_time_secs", -1)
        with pytest.raises(ConfigError, match="enable_xla_caches"):
            pc.cache_config.update("persistent_cache_enable_xla_caches", "some")
        with pytest.raises(ConfigError, match="unknown persistent cache setting"):
            pc.cache_config.update("compilation_cache_dirs", "x")
        pc.set_cache_dir(tmp_path)
        assert not pc.is_initialized()
        assert pc.active_cache() is not None and pc.is_initialized()
        pc.cache_config.update("enable_compilation_cache", False)
        assert pc.active_cache() is None and not pc.is_initialized()
        disk = pc.PersistentCache(str(tmp_path))
        assert disk.xla_cache_overrides("cpu") == ()
        assert [name for name, _ in disk.xla_cache_overrides("cuda")] == [
            "xla_gpu_per_fusion_autotune_cache_dir"]
    finally:
        pc.cache_config.values.update(saved)
        pc.reset_cache()


def test_modules_with_host_callbacks_are_not_stored() -> None:
    assert pc.calls_back(b'stablehlo.custom_call @xla_ffi_python_cpu_callback(%0)')
    assert not pc.calls_back(_module().encode())
