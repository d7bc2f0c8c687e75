"""Memory goes when functions go (issue 18), checked by object lifetimes, not
by timing or RSS (the benchmark ``retained_per_dropped_*`` measures RSS).

- A dropped ``jit`` or ``grad(jit)`` function frees its jaxprs, lowered
  modules and executables at once, by reference counting, without waiting
  for a cycle collection (a jaxpr, its lowering and its executable used to
  hold each other in cycles, and the C++ function and its Python side did
  too, so compiled programs piled up between full collections).
- ``pmap`` and ``eval_shape`` functions free theirs after ``gc.collect()``.
- Functions kept alive do not retrace, and live functions with the same
  program share one compilation.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import lamina as lx
from lamina_interpreters_pxla import compiler, pmap_execution
from lamina_interpreters_pxla.executable import Executable
from lamina_mlir_lowering import LoweringResult
from lamina_sharded_jit import execution
from lamina_tracing_core.jaxpr import Jaxpr

#: what a dropped function must not keep alive
_KINDS = (Jaxpr, LoweringResult, execution.LoweredProgram, execution.CompiledProgram, Executable)

#: functions made per test; a few of the last ones' objects may stay reachable
#: from small fixed-size records of recent work, never more
_DROPPED = 20
_FEW = 4


def _x() -> Any:
    return lx.numpy.ones((8,), np.float32)


def _tracked() -> set[int]:
    return {id(o) for o in gc.get_objects() if isinstance(o, _KINDS)}


def _new_refs(before: set[int]) -> list[weakref.ref[Any]]:
    return [weakref.ref(o) for o in gc.get_objects()
            if isinstance(o, _KINDS) and id(o) not in before]


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _objects_of_one(make: Callable[[], Any]) -> tuple[list[weakref.ref[Any]], set[str]]:
    """Weak references to what one call of ``make`` created, of the kinds
    above, taken while the function ``make`` returns is alive; and the names
    of those kinds."""
    before = _tracked()
    keep = make()
    refs = _new_refs(before)
    kinds = {type(r()).__name__ for r in refs}
    del keep
    return refs, kinds


def _alive(refs: list[weakref.ref[Any]]) -> list[str]:
    return [type(o).__name__ for o in (r() for r in refs) if o is not None]


def _jit_of(i: int) -> Any:
    f = lx.jit(lambda x, i=i: x + i)
    f(_x()).block_until_ready()
    return f


def _grad_jit_of(i: int) -> Any:
    f = lx.grad(lx.jit(lambda x, i=i: (x * i).sum()))
    f(_x()).block_until_ready()
    return f


def test_a_dropped_jit_frees_its_program_without_a_collection() -> None:
    _jit_of(-1)  # the first call of the process pays one-time costs
    for i in range(3):
        with _no_cycle_collection():
            refs, kinds = _objects_of_one(lambda i=i: _jit_of(i))
            alive = _alive(refs)
        assert {"Jaxpr", "LoweringResult", "LoweredProgram", "Executable"} <= kinds, kinds
        assert alive == [], f"still alive after jit #{i} was dropped: {alive}"


def test_a_dropped_grad_of_jit_frees_its_programs_without_a_collection() -> None:
    _grad_jit_of(-1)
    for i in range(3):
        with _no_cycle_collection():
            refs, kinds = _objects_of_one(lambda i=i: _grad_jit_of(i + 2))
            alive = _alive(refs)
        assert {"Jaxpr", "Executable"} <= kinds, kinds
        assert alive == [], f"still alive after grad(jit) #{i} was dropped: {alive}"


def _dropped_then_collected(make: Callable[[int], Any],
                            forget_recent: Callable[[], None] = lambda: None
                            ) -> tuple[int, list[list[str]]]:
    """Makes and drops :data:`_DROPPED` functions, calls ``forget_recent``
    and collects; returns how many objects they made and, per function
    whose objects are not all gone, what is still alive."""
    make(-1)
    gc.collect()
    per_function = [_objects_of_one(lambda i=i: make(i))[0] for i in range(_DROPPED)]
    forget_recent()
    gc.collect()
    alive = [names for names in map(_alive, per_function) if names]
    return sum(map(len, per_function)), alive


def test_dropped_pmap_functions_free_their_programs() -> None:
    def make(i: int) -> Any:
        f = lx.pmap(lambda x, i=i: x + i)
        f(_x()[None]).block_until_ready()
        return f

    def forget_recent() -> None:
        # the fixed-size records of the last pmaps run (for introspection)
        pmap_execution.recent_executables.clear()
        pmap_execution.recent_lowerings.clear()

    made, alive = _dropped_then_collected(make, forget_recent)
    assert made >= _DROPPED, "the pmaps lowered nothing"
    assert alive == [], alive


def test_dropped_eval_shape_functions_free_their_jaxprs() -> None:
    def make(i: int) -> Any:
        f = lambda x, i=i: x * i  # noqa: E731 - a fresh function per call
        lx.eval_shape(f, _x())
        return f

    made, alive = _dropped_then_collected(make)
    assert made >= _DROPPED, "eval_shape traced nothing"
    assert len(alive) <= _FEW, alive


def test_kept_functions_neither_retrace_nor_recompile_after_others_drop() -> None:
    traces: list[int] = []

    def body(x: Any) -> Any:
        traces.append(1)
        return x * 3

    f = lx.jit(body)
    g = lx.grad(lx.jit(lambda x: (x * 5).sum()))
    x = _x()
    f(x)
    g(x)
    gc.collect()
    lowerings = execution.stats["lowerings"]
    compiles = compiler.compile_stats["misses"]
    for i in range(5):
        _jit_of(100 + i)  # others come and go in between
        gc.collect()
        f(x)
        f._jitted(x)  # the Python path too
        g(x)
    assert len(traces) == 1
    assert execution.stats["lowerings"] == lowerings + 5
    assert compiler.compile_stats["misses"] == compiles + 5


def test_live_functions_with_the_same_program_share_one_compilation() -> None:
    def body() -> Callable[[Any], Any]:
        return lambda x: x * 11 - 1  # one source location: the same module each time

    x = _x()
    f = lx.jit(body())
    f(x)
    hits = compiler.compile_stats["hits"]
    misses = compiler.compile_stats["misses"]
    g = lx.jit(body())  # another function (traced and lowered again), the same module
    np.testing.assert_allclose(np.asarray(g(x)), np.full(8, 10.0, np.float32))
    assert compiler.compile_stats["misses"] == misses
    assert compiler.compile_stats["hits"] == hits + 1
    f_exe = next(f._jitted._calls.signatures()).run
    g_exe = next(g._jitted._calls.signatures()).run
    assert f_exe is not None and g_exe is not None
    assert f_exe.loaded is g_exe.loaded
