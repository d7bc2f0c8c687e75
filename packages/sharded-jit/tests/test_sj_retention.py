"""Caches die with the functions they belong to (issue 18): a dropped jitted
function's jaxprs, lowerings and executables are collected, while a live
function keeps hitting every cache."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np

import lamina_sharded_jit
from lamina_interpreters_pxla import compiler
from lamina_sharded_jit import execution
from lamina_tracing_core import api
from lamina_tracing_core.jaxpr import Jaxpr


def _new_jaxprs(before: set[int]) -> list[weakref.ref[Jaxpr]]:
    return [weakref.ref(o) for o in gc.get_objects()
            if isinstance(o, Jaxpr) and id(o) not in before]


def _live_jaxpr_ids() -> set[int]:
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, Jaxpr)}


#: Functions made and dropped per test; a few of the last ones' jaxprs may
#: stay reachable from small fixed-size records of recent work, never more.
_DROPPED = 40
_FEW = 12


def _drop_and_collect(make: Any) -> list[weakref.ref[Jaxpr]]:
    before = _live_jaxpr_ids()
    refs: dict[int, weakref.ref[Jaxpr]] = {}
    for i in range(_DROPPED):
        f = make(i)  # its jaxprs are looked for while it lives: they go with it
        for r in _new_jaxprs(before):
            before.add(id(r()))
            refs[id(r)] = r
        del f
    gc.collect()
    return list(refs.values())


def test_dropped_jit_functions_free_their_jaxprs() -> None:
    x = np.ones(4, np.float32)

    def make(i: int) -> Any:
        f = lamina_sharded_jit.jit(lambda x, i=i: x + i)
        assert float(f(x)[0]) == 1.0 + i
        return f

    refs = _drop_and_collect(make)
    assert refs, "the calls traced no jaxpr"
    assert len([r for r in refs if r() is not None]) <= _FEW


def test_dropped_functions_free_their_executables() -> None:
    x = np.ones(4, np.float32)
    lamina_sharded_jit.jit(lambda x: x * 3)(x)  # a program the next ones do not reuse
    gc.collect()
    start = len(compiler._compile_cache)
    for i in range(_DROPPED):
        lamina_sharded_jit.jit(lambda x, i=i: x - i)(x)
    gc.collect()
    assert len(compiler._compile_cache) <= start + _FEW


def test_live_functions_still_hit_every_cache() -> None:
    x = np.ones(4, np.float32)
    f = lamina_sharded_jit.jit(lambda x: x * 7)
    g = lamina_sharded_jit.jit(lambda x: (x * 7).sum())
    f(x)
    api.grad(g)(x)
    gc.collect()
    lowerings = execution.stats["lowerings"]
    misses = compiler.compile_stats["misses"]
    for _ in range(3):
        gc.collect()
        f(x)
        api.grad(g)(x)
    assert execution.stats["lowerings"] == lowerings
    assert compiler.compile_stats["misses"] == misses
