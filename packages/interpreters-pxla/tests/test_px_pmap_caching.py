"""pmap traces a function once per signature, dispatches cached calls without
retracing or relowering, and explain-mode says why a call missed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import pmap_execution
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_config import chunked_shards_scope
from lamina_interpreters_pxla.sharding import NamedSharding, PmapSharding
from lamina_linear_util.cache import set_explain_cache_misses
from lamina_tracing_core import lax

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N,
                                reason="needs 8 devices: run with XLA_FLAGS="
                                       "--xla_force_host_platform_device_count=8")

X = np.arange(N * 3, dtype=np.float32).reshape(N, 3)


@pytest.fixture
def explain(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    previous = set_explain_cache_misses(True)
    caplog.set_level(logging.WARNING, logger="lamina.cache")
    try:
        yield caplog
    finally:
        set_explain_cache_misses(previous)


def counting(traces: list[Any]) -> Any:
    def body(x: Any) -> Any:
        traces.append(x.shape)
        return lax.psum(x, "i") * x

    return body


def test_traced_once_per_signature() -> None:
    traces: list[Any] = []
    body = counting(traces)
    f = pmap(body, axis_name="i")
    a = f(X)
    f(X)
    f(a)  # an Array of the same type: same signature
    assert traces == [(3,)]
    f(np.ones((N, 4), np.float32))
    assert traces == [(3,), (4,)]
    f(X)
    assert traces == [(3,), (4,)]


def test_a_new_pmap_of_the_same_function_reuses_the_trace() -> None:
    traces: list[Any] = []
    body = counting(traces)
    pmap(body, axis_name="i")(X)
    pmap(body, axis_name="i")(X)
    assert traces == [(3,)]


def test_cached_dispatch_does_not_retrace_or_relower() -> None:
    traces: list[Any] = []
    f = pmap(counting(traces), axis_name="i")
    a = f(f(X))  # numpy, then Array arguments: two dispatch signatures, one trace
    last_lowering = pmap_execution.recent_lowerings[-1]
    lookups = pmap_execution.cache_info()
    for _ in range(5):
        a = f(a) / 100.0
    assert traces == [(3,)]
    assert pmap_execution.recent_lowerings[-1] is last_lowering
    after = pmap_execution.cache_info()
    assert (after.hits, after.misses) == (lookups.hits, lookups.misses)


def test_cached_dispatch_places_numpy_and_moved_arguments(layout_both: bool) -> None:
    f = pmap(lambda x, y: x + y)
    single = px.device_put(X, px.devices()[0])
    for _ in range(2):
        np.testing.assert_allclose(np.asarray(f(X, single)), X + X)
    out = f(X, X)
    np.testing.assert_allclose(np.asarray(f(out, X)), 3 * X)


@pytest.fixture(params=[True, False], ids=["chunked", "classic"])
def layout_both(request: Any) -> Any:
    with chunked_shards_scope(request.param):
        yield request.param


def test_static_arguments_key_the_cache() -> None:
    traces: list[Any] = []

    def body(x: Any, k: Any) -> Any:
        traces.append(k)
        return x * k

    f = pmap(body, static_broadcasted_argnums=1)
    f(X, 2)
    f(X, 2)
    f(X, 3)
    f(X, 2.0)  # a float is another static value than the int 2
    assert traces == [2, 3, 2.0]


def test_the_layout_setting_keys_the_cache() -> None:
    f = pmap(lambda x: x + 1)
    with chunked_shards_scope(True):
        assert isinstance(f(X).sharding, NamedSharding)
    with chunked_shards_scope(False):
        assert isinstance(f(X).sharding, PmapSharding)
    with chunked_shards_scope(True):
        assert isinstance(f(X).sharding, NamedSharding)


def test_new_function_object_with_the_same_code_is_a_reported_miss(
        explain: pytest.LogCaptureFixture) -> None:
    def make() -> Any:
        return lambda x: x * 2

    pmap(make())(X)
    explain.clear()
    pmap(make())(X)
    messages = [r.getMessage() for r in explain.records if r.name == "lamina.cache"]
    assert any("cache miss for" in m and "never seen this function before" in m
               for m in messages), messages


def test_a_new_argument_type_is_a_miss_naming_the_argument(
        explain: pytest.LogCaptureFixture) -> None:
    def scale(x: Any, y: Any) -> Any:
        return x * y.sum()

    f = pmap(scale)
    f(X, X)
    explain.clear()
    f(X, np.ones((N, 4), np.float32))
    messages = [r.getMessage() for r in explain.records if r.name == "lamina.cache"]
    assert any("cache miss for scale" in m and "argument y changed from" in m
               for m in messages), messages


def test_a_hit_is_silent(explain: pytest.LogCaptureFixture) -> None:
    def double(x: Any) -> Any:
        return x * 2

    pmap(double)(X)
    explain.clear()
    pmap(double)(X)
    assert not [r for r in explain.records if r.name == "lamina.cache"]


# --- the C++ dispatch path in front of pmap -------------------------------------------------
@pytest.fixture
def python_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pmap calls that reach lamina's Python path."""
    from lamina_interpreters_pxla.pmap import PmapFunction
    count = [0]
    original = PmapFunction._call

    def counting_call(self: Any, args: Any, kwargs: Any) -> Any:
        count[0] += 1
        return original(self, args, kwargs)

    monkeypatch.setattr(PmapFunction, "_call", counting_call)
    return count


def test_cached_calls_stay_in_cpp(python_calls: list[int]) -> None:
    f = pmap(lambda x, t: {"s": lax.psum(x, "i") + t["a"]}, axis_name="i")
    a = f(X, {"a": X})["s"]
    assert python_calls[0] == 1
    f(a, {"a": a})  # Arrays: a new signature, placed as the program wants
    assert python_calls[0] == 2
    for _ in range(4):
        out = f(a, {"a": a})
    assert python_calls[0] == 2
    first = X.sum(0) + X
    np.testing.assert_allclose(np.asarray(out["s"]), first.sum(0) + first)
    assert isinstance(out["s"], px.Array)


def test_layout_switch_after_a_fastpath() -> None:
    f = pmap(lambda x: x * 2)
    with chunked_shards_scope(True):
        a = f(X)
        assert isinstance(f(a).sharding, NamedSharding)
        assert isinstance(f(a).sharding, NamedSharding)
    with chunked_shards_scope(False):
        assert isinstance(f(a).sharding, PmapSharding)
        assert isinstance(f(a).sharding, PmapSharding)


def test_concrete_pmap_call_under_a_staging_trace_is_staged() -> None:
    from lamina_tracing_core import api
    f = pmap(lambda x: x + 1)
    a = f(X)
    f(a)
    f(a)
    assert "pmap" in str(api.make_jaxpr(lambda: f(a))())


def test_deleted_argument_after_a_fastpath() -> None:
    f = pmap(lambda x: x + 1)
    a = f(X)
    f(a)
    f(a)
    a.delete()
    with pytest.raises(px.DeletedArrayError, match="deleted"):
        f(a)


def test_equivalent_input_sharding_is_not_moved(python_calls: list[int]) -> None:
    """A result of another pmap (mesh axis '_pmap', not 'i') has the same
    devices and tiling: no copy, and cached calls stay in C++."""
    a = pmap(lambda x: x)(X)
    f = pmap(lambda x: x + lax.psum(x, "i"), axis_name="i")
    f(a)
    for _ in range(3):
        out = f(a)
    assert python_calls[0] == 2  # the identity pmap and f's first call
    np.testing.assert_allclose(np.asarray(out), X + X.sum(0))
