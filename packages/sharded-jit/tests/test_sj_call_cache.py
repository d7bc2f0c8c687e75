"""The jit caches: each function's call cache (bounds, placements, what it
keeps), the tracing cache's weakness on the user function, and results that
close over tracers, which no cache keeps."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_sharded_jit.call_cache import MAX_PER_STRUCTURE, MAX_STRUCTURES
from lamina_sharded_jit.tracing import trace_cache
from lamina_tracing_core import api, core, lax


def _traces() -> int:
    """How many entries the tracing cache holds (once dead functions are gone)."""
    gc.collect()
    return trace_cache.cache_info().currsize


def test_a_signature_is_remembered_once_with_its_params_and_program() -> None:
    jf = sj.jit(lambda x: x * 2)
    x = px.device_put(np.ones(3, np.float32))
    jf(x)
    jf(x)
    calls = jf._jitted._calls
    assert len(calls) == 1 and calls.num_runs() == 1
    (sig,) = calls.signatures()
    assert sig.params.args_flat == () and sig.run is not None
    assert sig.avals == (core.get_aval(x),)


def test_signatures_per_structure_are_bounded_newest_first() -> None:
    count = [0]

    def f(x: Any) -> Any:
        count[0] += 1
        return lax.sin(x)

    jf = sj.jit(f)
    g = api.grad(lambda x: jf(x).sum())
    n = MAX_PER_STRUCTURE + 3
    for size in range(1, n + 1):
        g(np.ones(size, np.float32))
    calls = jf._jitted._calls
    assert len(calls) == MAX_PER_STRUCTURE
    assert [s.avals[0].shape for s in calls.signatures()] == \
        [(size,) for size in range(n, n - MAX_PER_STRUCTURE, -1)]
    traced = count[0]
    g(np.ones(n, np.float32))  # remembered: no new trace, no new entry
    g(np.ones(1, np.float32))  # pushed out of the call cache, still in the tracing cache
    assert count[0] == traced and len(calls) == MAX_PER_STRUCTURE


def test_structures_per_function_are_bounded() -> None:
    jf = sj.jit(lambda *xs: xs[0])
    for n in range(1, MAX_STRUCTURES + 6):
        jf(*([1.0] * n))
    by_structure = jf._jitted._calls.by_structure
    assert len(by_structure) == MAX_STRUCTURES
    assert min(t.num_leaves for t in by_structure) == 6  # the oldest went first


def test_two_placements_of_one_signature_share_its_params(devices8: list[Any]) -> None:
    count = [0]

    def f(x: Any) -> Any:
        count[0] += 1
        return x + 1

    jf = sj.jit(f)
    a = px.device_put(np.ones(2, np.float32), devices8[0])
    b = px.device_put(np.ones(2, np.float32), devices8[1])
    assert jf(a).sharding == px.SingleDeviceSharding(devices8[0])
    assert jf(b).sharding == px.SingleDeviceSharding(devices8[1])
    sigs = list(jf._jitted._calls.signatures())
    assert count[0] == 1 and len(sigs) == 2 and sigs[0].params is sigs[1].params
    assert sigs[0].run is not sigs[1].run and jf._cache_size() == 2


def _use_in_every_cached_way(f: Any) -> None:
    jf = sj.jit(f)
    x = np.ones(3, np.float32)
    jf(x)
    jf(px.device_put(x))
    api.grad(lambda v: jf(v).sum())(x)
    sj.eval_shape(f, x)
    api.make_jaxpr(jf)(x)


def test_caches_are_weak_on_the_user_function() -> None:
    def f(x: Any) -> Any:
        return lax.sin(x) * 2

    ref = weakref.ref(f)
    before = _traces()
    _use_in_every_cached_way(f)
    assert _traces() == before + 1  # all of them share one trace
    del f
    gc.collect()
    assert ref() is None  # nothing jit cached keeps the function alive
    assert _traces() == before  # and its traces went with it


def test_clear_cache_forgets_signatures_and_traces() -> None:
    def f(x: Any) -> Any:
        return x - 1

    before = _traces()
    jf = sj.jit(f)
    jf(1.0)
    assert len(jf._jitted._calls) == 1 and _traces() == before + 1
    jf.clear_cache()
    assert len(jf._jitted._calls) == 0 and _traces() == before


def test_a_body_closing_over_tracers_is_traced_each_time_and_never_kept() -> None:
    count = [0]

    def outer(x: Any) -> Any:
        def inner(y: Any) -> Any:
            count[0] += 1
            return y * x  # closes over the grad tracer x

        inner_jit = sj.jit(inner)
        out = inner_jit(2.0) + inner_jit(2.0)
        assert len(inner_jit._jitted._calls) == 0
        assert _traces() == before  # evicted as soon as it was returned
        return out

    before = _traces()
    grad = api.grad(outer)
    assert float(grad(3.0)) == 4.0
    assert float(grad(5.0)) == 4.0
    assert count[0] == 4  # one trace per call: the results hold tracers


def test_an_unhashable_static_argument_never_reaches_the_call_cache() -> None:
    jf = sj.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(1.0, {"a": 1})
    assert len(jf._calls) == 0  # static arguments keep jit on the Python side
