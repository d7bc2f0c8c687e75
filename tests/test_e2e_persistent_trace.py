"""The persistent trace cache: a restarted process skips tracing, and never wrongly.

A "restart" here empties every in-memory cache (``lamina.clear_caches()``)
and executes the test's modules again from their files (new function
objects, as in a new process); the cache directory stays. Each invalidation
case changes one thing the trace depends on between two runs and checks that
the second run traces again (and computes the new result), then that a third,
unchanged run is served from the new entry.
"""

from __future__ import annotations

import pickle
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina as lx
from lamina_interpreters_pxla import persistent_cache
from lamina_sharded_jit import persistent_trace
from lamina_sharded_jit.settings import config as jit_config
from lamina_sharded_jit.tracing import trace_stats

CALLEE = '''
import lamina.numpy as jnp

def activation(v):
    return jnp.tanh(v){callee_extra}
'''

PROGRAM = '''
import lamina as lx
import lamina.numpy as jnp
import pt_callee

SCALE = {scale}

def make_step(shift):
    def step(x, y):
        h = pt_callee.activation(x) * SCALE + shift
        return {{"out": h{source_extra}, "total": jnp.sum(y["w"] * x)}}
    return step

def with_power(x, n):
    return x ** n
'''


def _load(name: str, path: Path) -> types.ModuleType:
    """Executes ``path`` as module ``name`` (fresh function objects, no .pyc)."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module


class Program:
    """The two test modules on disk, and a restart that executes them again."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.values = {"scale": "2.0", "source_extra": "", "callee_extra": ""}
        self.module: types.ModuleType | None = None

    def write(self, **values: str) -> None:
        self.values.update(values)
        (self.directory / "pt_callee.py").write_text(CALLEE.format(**self.values))
        (self.directory / "pt_program.py").write_text(PROGRAM.format(**self.values))

    def restart(self) -> types.ModuleType:
        lx.clear_caches()
        _load("pt_callee", self.directory / "pt_callee.py")
        self.module = _load("pt_program", self.directory / "pt_program.py")
        return self.module


@pytest.fixture
def program(tmp_path: Path) -> Iterator[Program]:
    saved = dict(persistent_cache.cache_config.values)
    saved_jit = (jit_config.persistent_trace_cache, jit_config.persistent_trace_cache_verify)
    lx.config.update("compilation_cache_dir", str(tmp_path / "cache"))
    lx.config.update("persistent_cache_min_compile_time_secs", 0)
    lx.config.update("persistent_trace_cache", True)
    lx.config.update("persistent_trace_cache_verify", False)
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    p = Program(source_dir)
    p.write()
    try:
        yield p
    finally:
        persistent_cache.cache_config.values.update(saved)
        persistent_cache.reset_cache()
        jit_config.persistent_trace_cache, jit_config.persistent_trace_cache_verify = saved_jit
        for name in ("pt_program", "pt_callee"):
            sys.modules.pop(name, None)
        lx.clear_caches()


X = np.linspace(-1.0, 1.0, 4).astype(np.float32)
Y = {"w": np.arange(4.0, dtype=np.float32)}


def _run(module: types.ModuleType, shift: float = 0.5) -> tuple[dict[str, Any], dict[str, int]]:
    """One call of the jitted step; the result and what the caches did."""
    before = dict(persistent_trace.stats), trace_stats["traces"]
    out = lx.jit(module.make_step(shift))(X, Y)
    did = {k: v - before[0][k] for k, v in persistent_trace.stats.items()}
    did["traces"] = trace_stats["traces"] - before[1]
    return {k: np.asarray(v) for k, v in out.items()}, did


def _expected(scale: float = 2.0, shift: float = 0.5, extra: Callable[[Any], Any] = lambda h: h,
              callee: Callable[[Any], Any] = np.tanh) -> np.ndarray:
    return np.asarray(extra(callee(X) * scale + shift), np.float32)


def test_a_restart_skips_tracing_and_keeps_the_names(program: Program) -> None:
    out, did = _run(program.restart())
    assert did["misses"] == 1 and did["stores"] == 1 and did["traces"] >= 1
    out2, did2 = _run(program.restart())
    assert did2["hits"] == 1 and did2["traces"] == 0 and did2["misses"] == 0
    np.testing.assert_allclose(out2["out"], _expected(), rtol=1e-6)
    np.testing.assert_array_equal(out2["total"], out["total"])
    # the debug info survived the restart: names and source locations
    step = lx.jit(program.module.make_step(0.5))  # type: ignore[union-attr]
    step(X, Y)
    (sig,) = step._jitted._calls.signatures()
    assert sig.params is None  # served from disk: never traced here
    exe = sig.run.executable
    assert exe.arg_names == ["x", "y['w']"]
    assert exe.result_names == ["result['out']", "result['total']"]
    text = exe.lowering.module.operation.get_asm(enable_debug_info=True)
    assert 'jax.arg_info = "y[\'w\']"' in text and "pt_program.py" in text


def test_the_stages_after_a_hit_trace_once_and_match_a_cold_process(program: Program
                                                                   ) -> None:
    # an entry holds the lowered program, not the jaxpr: after a hit, .trace,
    # .lower, make_jaxpr and transformations trace (once) as in a cold process
    cold = lx.jit(program.restart().make_step(0.5))
    cold(X, Y)
    cold_text, cold_jaxpr = cold.lower(X, Y).as_text(), str(lx.make_jaxpr(cold)(X, Y))
    step = lx.jit(program.restart().make_step(0.5))
    before = dict(persistent_trace.stats), trace_stats["traces"]
    step(X, Y)
    assert persistent_trace.stats["hits"] == before[0]["hits"] + 1
    assert trace_stats["traces"] == before[1]
    assert step.lower(X, Y).as_text() == cold_text
    assert trace_stats["traces"] > before[1]  # .lower traced: the entry holds no jaxpr
    assert str(lx.make_jaxpr(step)(X, Y)) == cold_jaxpr
    assert [str(e.primitive) for e in step.trace(X, Y).jaxpr.eqns][:1] == ["tanh"]
    grad = lx.grad(lambda x: step(x, Y)["total"])(X)
    np.testing.assert_allclose(np.asarray(grad), Y["w"], rtol=1e-6)


CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # case: (what to write or pass the second time, the expected result's arguments)
    "function source": ({"source_extra": " * 3.0"}, {"extra": lambda h: h * 3.0}),
    "callee source": ({"callee_extra": " + 1.0"}, {"callee": lambda v: np.tanh(v) + 1.0}),
    "global constant": ({"scale": "4.0"}, {"scale": 4.0}),
    "closed-over constant": ({"shift": 1.5}, {"shift": 1.5}),
}


@pytest.mark.parametrize("case", sorted(CHANGES))
def test_a_change_invalidates_the_entry(program: Program, case: str) -> None:
    _run(program.restart())
    change, expected = CHANGES[case]
    shift = change.get("shift", 0.5)
    program.write(**{k: v for k, v in change.items() if k != "shift"})
    out, did = _run(program.restart(), shift)
    assert did["hits"] == 0 and did["misses"] == 1 and did["traces"] >= 1, did
    np.testing.assert_allclose(out["out"], _expected(**expected), rtol=1e-6)
    again, did = _run(program.restart(), shift)  # the new entry serves the next restart
    assert did["hits"] == 1 and did["traces"] == 0, did
    np.testing.assert_allclose(again["out"], out["out"], rtol=1e-6)


def test_a_static_argument_and_a_setting_are_in_the_key(program: Program) -> None:
    module = program.restart()
    power = lx.jit(module.with_power, static_argnums=1)
    np.testing.assert_allclose(np.asarray(power(X, 2)), X ** 2, rtol=1e-6)
    module = program.restart()
    before = dict(persistent_trace.stats)
    power = lx.jit(module.with_power, static_argnums=1)
    np.testing.assert_allclose(np.asarray(power(X, 3)), X ** 3, rtol=1e-6)
    assert persistent_trace.stats["hits"] == before["hits"]
    np.testing.assert_allclose(np.asarray(power(X, 2)), X ** 2, rtol=1e-6)
    assert persistent_trace.stats["hits"] == before["hits"] + 1
    _run(program.restart())
    try:
        lx.config.update("enable_x64", True)
        _, did = _run(program.restart())
        assert did["hits"] == 0 and did["misses"] == 1
    finally:
        lx.config.update("enable_x64", False)


def test_verify_mode_finds_no_difference_and_catches_a_tampered_entry(program: Program
                                                                      ) -> None:
    _run(program.restart())
    lx.config.update("persistent_trace_cache_verify", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", persistent_trace.PersistentTraceMismatchWarning)
        _, did = _run(program.restart())
    assert did["verified"] == 1 and did["mismatches"] == 0 and did["traces"] >= 1
    (entry_path,) = (program.directory.parent / "cache" / "traces").glob(
        f"*{persistent_trace.TRACE_SUFFIX}")
    entry = pickle.loads(persistent_cache.unpack_entry(entry_path.read_bytes()))
    entry["result_names"] = ("result['a']", "result['b']")
    entry_path.write_bytes(persistent_cache.pack_entry(pickle.dumps(entry)))
    with pytest.warns(persistent_trace.PersistentTraceMismatchWarning, match="result_names"):
        _run(program.restart())


def test_uncacheable_closures_trace_as_usual_and_clearing_empties_the_caches(
        program: Program) -> None:
    import threading

    lock = threading.Lock()

    def uses_a_lock(x: Any) -> Any:
        with lock:
            return x + 1.0

    before = dict(persistent_trace.stats)
    np.testing.assert_allclose(np.asarray(lx.jit(uses_a_lock)(X)), X + 1.0)
    assert persistent_trace.stats["uncacheable"] == before["uncacheable"] + 1
    _run(program.restart())
    cache = program.directory.parent / "cache"
    assert list(cache.glob("*.lamina-xc")) and list((cache / "traces").glob("*"))
    lx.clear_persistent_caches()
    assert not list(cache.glob("*.lamina-xc")) and not list((cache / "traces").glob("*"))


def _closing_over(tree_map: Callable[..., Any]) -> Callable[[Any], Any]:
    def step(params: Any) -> Any:
        return tree_map(lambda p: p * 2.0, params)

    return step


def test_a_closure_over_the_pytree_functions_is_cacheable_and_names_the_view() -> None:
    from lamina_linear_util import tree_util as lu_trees

    users = persistent_trace.fingerprint(_closing_over(lx.tree_util.tree_map))
    assert users == persistent_trace.fingerprint(_closing_over(lx.tree_util.tree_map))
    # transformations' view (a key array a node) is another function: another key
    assert users != persistent_trace.fingerprint(_closing_over(lu_trees.tree_map))
    # the bound methods pickle by name, back to the very module globals
    assert pickle.loads(pickle.dumps(lx.tree_util.tree_map)).__self__ is lu_trees.user_trees
    assert pickle.loads(pickle.dumps(lu_trees.tree_map)).__self__ is lu_trees.transform_trees
    with pytest.raises(TypeError, match="Pytrees.__reduce__"):
        pickle.dumps(lu_trees.Pytrees(lu_trees.default_registry))


def test_a_restart_serves_a_step_closing_over_tree_map(program: Program) -> None:
    params = {"w": X, "b": Y["w"]}
    before = dict(persistent_trace.stats)
    first = lx.jit(_closing_over(lx.tree_util.tree_map))(params)
    lx.clear_caches()
    again = lx.jit(_closing_over(lx.tree_util.tree_map))(params)
    assert persistent_trace.stats["hits"] == before["hits"] + 1
    assert persistent_trace.stats["uncacheable"] == before["uncacheable"]
    for k in params:
        np.testing.assert_array_equal(np.asarray(again[k]), np.asarray(first[k]))
