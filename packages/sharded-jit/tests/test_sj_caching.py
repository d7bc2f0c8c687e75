"""Tracing caches: each signature is traced once; eval_shape, make_jaxpr and
jit share the cache; misses are explained by argument path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_tracing_core import api, lax


def counted() -> tuple[list[int], Any]:
    count = [0]

    def f(x: Any, y: Any) -> Any:
        count[0] += 1
        return lax.sin(x) * y

    return count, f


def test_repeated_calls_trace_once_and_use_the_fast_path() -> None:
    count, f = counted()
    jf = sj.jit(f)
    x = px.device_put(np.ones(3, np.float32))
    for _ in range(5):
        np.testing.assert_allclose(np.asarray(jf(x, x)), np.sin(1.0), rtol=1e-6)
    assert count[0] == 1
    assert jf._cache_size() == 1


def test_inner_jits_are_not_retraced_by_later_outer_traces() -> None:
    count, inner = counted()
    jinner = sj.jit(inner)
    outer_count = [0]

    def outer(x: Any) -> Any:
        outer_count[0] += 1
        return jinner(x, 2.0) + jinner(x + 1.0, 2.0)

    np.asarray(sj.jit(outer)(np.ones(3, np.float32)))
    api.make_jaxpr(outer)(np.ones(3, np.float32))
    api.grad(lambda x: outer(x).sum())(np.ones(3, np.float32))
    sj.eval_shape(outer, np.ones(3, np.float32))  # shares jit(outer)'s trace
    assert outer_count[0] == 3
    assert count[0] == 1  # the inner function's signature never changed


def test_eval_shape_then_jit_traces_once() -> None:
    count, f = counted()
    x = np.ones((2, 3), np.float32)
    out = sj.eval_shape(f, x, 2.0)
    assert (out.shape, out.dtype) == ((2, 3), np.float32)
    assert isinstance(out, sj.ShapeDtypeStruct) and out.sharding is None
    sj.jit(f)(x, 2.0)
    sj.jit(f).lower(x, 2.0)
    assert count[0] == 1


def test_make_jaxpr_of_jit_shares_the_cache() -> None:
    count, f = counted()
    jf = sj.jit(f)
    api.make_jaxpr(jf)(1.0, 2.0)
    api.make_jaxpr(jf)(1.0, 2.0)
    jf(1.0, 2.0)
    assert count[0] == 1


def test_python_scalars_share_a_trace_strong_float32_traces_again() -> None:
    count, f = counted()
    jf = sj.jit(f)
    jf(1.0, 2.0)
    jf(3.0, 4.0)
    jf(5.0, np.float32(6.0))
    assert count[0] == 1 + 1
    out = jf(1.0, 2.0)
    assert out.weak_type
    assert not jf(1.0, np.float32(2.0)).weak_type


def test_non_array_arguments_do_not_retrace() -> None:
    count, f = counted()
    jf = sj.jit(f)
    a = np.ones(4, np.float32)
    for v in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(np.asarray(jf(a, v)), np.sin(1.0) * v, rtol=1e-6)
    assert count[0] == 1 and jf._cache_size() == 1


def test_static_argument_change_retraces_and_is_explained(explain: Any) -> None:
    count = [0]

    def f(x: Any, n: int) -> Any:
        count[0] += 1
        return x * n

    jf = sj.jit(f, static_argnums=1)
    jf(np.ones(2, np.float32), 2)
    jf(np.ones(2, np.float32), 2)
    assert count[0] == 1
    explain.clear()
    jf(np.ones(2, np.float32), 3)
    assert count[0] == 2
    assert "static argument n changed from 2 to 3" in explain.text
    assert re.search(r"explain: tracing f at .* took [\d.]+ ms", explain.text)
    assert "lowering cache miss for jit(f)" in explain.text
    assert re.search(r"compiling jit_f took [\d.]+ ms", explain.text)
    # static argnames as well
    g = sj.jit(f, static_argnames="n")
    g(np.ones(2, np.float32), n=2)
    explain.clear()
    g(np.ones(2, np.float32), n=5)
    assert "static argument n changed from 2 to 5" in explain.text


def test_shape_change_is_explained_by_argument_path(explain: Any) -> None:
    def h(x: Any, y: Any) -> Any:
        return y["hi"] * 2

    jh = sj.jit(h)
    jh(1.0, {"hi": np.ones(3, np.float32)})
    explain.clear()
    jh(1.0, {"hi": np.ones(4, np.float32)})
    assert "argument y['hi'] changed from float32[3] to float32[4]" in explain.text


def test_unhashable_static_argument_is_a_clear_error() -> None:
    jf = sj.jit(lambda x, n: x, static_argnums=1)
    with pytest.raises(ValueError, match="Non-hashable static arguments"):
        jf(1.0, [1, 2])


def test_disable_jit_runs_the_python_body() -> None:
    calls = []

    def f(x: Any) -> Any:
        calls.append(type(x))
        return x + 1

    jf = sj.jit(f)
    with sj.disable_jit():
        np.testing.assert_allclose(np.asarray(jf(np.ones(2, np.float32))), 2.0)
    assert calls == [np.ndarray]
    sj.config.update("disable_jit", True)
    try:
        assert sj.config.disable_jit is True
        jf(np.ones(2, np.float32))
        assert calls[-1] is np.ndarray
        with sj.disable_jit(False):  # the block wins over the process-wide value
            jf(np.ones(2, np.float32))
            assert calls[-1] is not np.ndarray
    finally:
        sj.config.update("disable_jit", False)
    jf(np.ones(2, np.float32))
    assert calls[-1] is not np.ndarray  # traced again


def test_clear_cache_retraces() -> None:
    count, f = counted()
    jf = sj.jit(f)
    jf(1.0, 2.0)
    jf.clear_cache()
    jf(1.0, 2.0)
    assert count[0] == 2


import re  # noqa: E402


def test_clear_caches_forgets_every_trace_and_program() -> None:
    from lamina_interpreters_pxla.pmap import pmap
    from lamina_sharded_jit.execution import stats
    from lamina_tracing_core import lax

    traces: list[str] = []

    def f(x: Any) -> Any:
        traces.append("jit")
        return x * 2

    def g(x: Any) -> Any:
        traces.append("pmap")
        return lax.psum(x, "i")

    jf = sj.jit(f)
    pg = pmap(g, axis_name="i")
    x = np.ones(3, np.float32)
    xs = np.ones((px.device_count(), 2), np.float32)
    a = jf(px.device_put(x))
    jf(a)
    jf(a)
    pg(xs)
    pg(xs)
    assert traces == ["jit", "pmap"]
    compiled = stats["compilations"]
    sj.clear_caches()
    np.testing.assert_allclose(np.asarray(jf(a)), 4.0)
    np.testing.assert_allclose(np.asarray(pg(xs))[0], px.device_count())
    assert traces == ["jit", "pmap", "jit", "pmap"]
    assert stats["compilations"] > compiled
    assert jf._cache_size() == 1
