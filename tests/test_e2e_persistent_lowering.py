"""The persistent lowering cache: a traced program's module taken from disk.

With a compilation cache directory set, ``jit`` stores each lowered module
under ``<dir>/lowered``, keyed by the jaxpr and its placement. A restart is
simulated with ``lamina.clear_caches()`` (every in-memory cache, not the
disk): the second run traces again and must take the module from disk, unless
something the lowering reads changed.
"""

from __future__ import annotations

import gc
import importlib.util
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina_interpreters_pxla import persistent_cache
from lamina_sharded_jit import fingerprints, persistent_lowering, persistent_trace

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)


def _after_restart(run: Callable[[], Any]) -> tuple[dict[str, int], Any, Any]:
    """What the lowering cache did in ``run()`` after a simulated restart
    (the first run stores), and both results."""
    first = np.asarray(run())
    lx.clear_caches()
    before = dict(persistent_lowering.stats)
    second = np.asarray(run())
    return {k: v - before[k] for k, v in persistent_lowering.stats.items()}, first, second


def _entries(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "lowered").glob("*" + persistent_lowering.LOWERED_SUFFIX))


def _mlp_step(params: Any, x: Any) -> Any:
    def loss(p: Any) -> Any:
        h = x
        for w, b in p:
            h = jnp.tanh(h @ w + b)
        return jnp.mean(h ** 2)

    value, grads = lx.value_and_grad(loss)(params)
    return value + sum(jnp.sum(g) for g, _ in grads)


PROGRAMS: dict[str, Callable[[], Any]] = {
    "elementwise": lambda: lx.jit(lambda v: jnp.sin(v) * 2.0 + 1.0)(X),
    "grad of an mlp": lambda: lx.jit(_mlp_step)(
        [(np.eye(4, dtype=np.float32), np.zeros(4, np.float32))] * 2, X),
    "scan": lambda: lx.jit(lambda v: lx.lax.scan(lambda c, r: (c + r, c * r), 0.0 * v[0],
                                                 v)[1])(X),
    "cond": lambda: lx.jit(lambda v: lx.lax.cond(v.sum() > 0, jnp.sin, jnp.cos, v))(X),
    "relu (custom_jvp)": lambda: lx.jit(lx.grad(lambda v: lx.nn.relu(v).sum()))(X),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_restarted_program_takes_its_module_from_disk(cache_dir: Path, name: str) -> None:
    did, first, second = _after_restart(PROGRAMS[name])
    assert did["hits"] == 1 and did["misses"] == 0, did
    np.testing.assert_array_equal(first, second)
    assert len(_entries(cache_dir)) == 1


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_verify_mode_finds_the_stored_module_equal_to_a_fresh_one(cache_dir: Path,
                                                                  name: str) -> None:
    lx.config.update("persistent_trace_cache_verify", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", persistent_lowering.PersistentLoweringMismatchWarning)
        did, first, second = _after_restart(PROGRAMS[name])
    assert did["verified"] == 1 and did["mismatches"] == 0, did
    np.testing.assert_array_equal(first, second)


def test_what_the_lowering_reads_is_in_the_key(cache_dir: Path) -> None:
    def run_with(scale: float, donate: bool = False, static: int = 2) -> Any:
        f = lx.jit(lambda v, k: jnp.sin(v) * scale + k, static_argnums=1,
                   donate_argnums=(0,) if donate else ())
        return f(lx.device_put(X), static)

    run_with(2.0)
    for changed in (lambda: run_with(3.0), lambda: run_with(2.0, donate=True),
                    lambda: run_with(2.0, static=5)):
        lx.clear_caches()
        before = dict(persistent_lowering.stats)
        changed()
        assert persistent_lowering.stats["misses"] == before["misses"] + 1
        assert persistent_lowering.stats["hits"] == before["hits"]
    # the same function at another source line: its locations are in the module
    lx.clear_caches()
    before = dict(persistent_lowering.stats)
    lx.jit(lambda v, k: jnp.sin(v) * 2.0 + k, static_argnums=1)(lx.device_put(X), 2)
    assert persistent_lowering.stats["misses"] == before["misses"] + 1
    # ... and the names of the arguments
    lx.clear_caches()
    before = dict(persistent_lowering.stats)
    f = lx.jit(lambda v: jnp.sin(v) * 2.0)
    f(X)
    lx.clear_caches()
    g = lx.jit(lambda w: jnp.sin(w) * 2.0)
    g(X)
    assert persistent_lowering.stats["misses"] == before["misses"] + 2


def test_x64_is_in_the_key(cache_dir: Path) -> None:
    def run() -> Any:
        return lx.jit(lambda v: v.astype(jnp.int32) + 1)(X)

    _after_restart(run)
    lx.clear_caches()
    before = dict(persistent_lowering.stats)
    with lx.enable_x64(True):
        run()
    assert persistent_lowering.stats["misses"] == before["misses"] + 1


def test_an_edited_source_file_is_lowered_again(cache_dir: Path, tmp_path_factory: Any) -> None:
    folder = tmp_path_factory.mktemp("program")
    path = folder / "lowering_cache_program.py"
    path.write_text("import lamina.numpy as jnp\n\ndef f(v):\n    return jnp.cos(v) * 3.0\n")
    spec = importlib.util.spec_from_file_location("lowering_cache_program", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    did, _, _ = _after_restart(lambda: lx.jit(module.f)(X))
    assert did["hits"] == 1
    # the same code object, but the file it lives in changed
    path.write_text(path.read_text() + "# edited\n")
    lx.clear_caches()
    before = dict(persistent_lowering.stats)
    lx.config.update("explain_cache_misses", True)
    try:
        lx.jit(module.f)(X)
    finally:
        lx.config.update("explain_cache_misses", False)
    assert persistent_lowering.stats["misses"] == before["misses"] + 1


def test_a_corrupt_entry_is_lowered_again_with_a_warning(cache_dir: Path) -> None:
    def run() -> Any:
        return lx.jit(lambda v: jnp.exp(v) - 1.0)(X)

    expected = np.asarray(run())
    entry, = _entries(cache_dir)
    entry.write_bytes(entry.read_bytes()[:40])
    lx.clear_caches()
    with pytest.warns(persistent_cache.PersistentCacheWarning,
                      match="persistent lowering cache entry .* lowering again"):
        np.testing.assert_array_equal(np.asarray(run()), expected)
    lx.clear_caches()
    did, _, again = _after_restart(run)  # stored again, whole
    assert did["hits"] == 1
    np.testing.assert_array_equal(again, expected)


def test_programs_that_call_back_are_not_stored(cache_dir: Path) -> None:
    def body(v: Any) -> Any:
        shape = lx.ShapeDtypeStruct(v.shape, v.dtype)
        return lx.pure_callback(lambda a: np.asarray(a) * 2, shape, v) + 1.0

    np.testing.assert_array_equal(np.asarray(lx.jit(body)(X)), X * 2 + 1)
    assert _entries(cache_dir) == []
    assert persistent_lowering.stats["uncacheable"] >= 1


def test_clear_persistent_caches_removes_the_lowered_modules(cache_dir: Path) -> None:
    lx.jit(lambda v: v * 7.0)(X)
    assert _entries(cache_dir)
    persistent_trace.clear_persistent_caches()
    assert _entries(cache_dir) == []


def test_without_a_cache_directory_nothing_is_stored(tmp_path: Path) -> None:
    saved = dict(persistent_cache.cache_config.values)
    persistent_cache.reset_cache()
    try:
        before = dict(persistent_lowering.stats)
        lx.jit(lambda v: v * 9.0)(X)
        assert persistent_lowering.stats == before
    finally:
        persistent_cache.cache_config.values.update(saved)


READ_BY_THE_CALLBACK = 0


def test_recording_skips_what_a_garbage_collection_runs() -> None:
    def on_gc(phase: str, info: dict[str, int]) -> None:
        _ = READ_BY_THE_CALLBACK

    gc.callbacks.append(on_gc)
    try:
        with fingerprints.recording() as ran:
            gc.collect()
            np.add(1, 2)
    finally:
        gc.callbacks.remove(on_gc)
    assert on_gc.__code__ not in ran
    assert sys.getprofile() is None
