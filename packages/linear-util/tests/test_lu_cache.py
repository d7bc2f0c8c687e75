"""cache(): memoization keyed on a WrappedFun, weak on the user function."""

import gc
import logging
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lamina_linear_util import (
    CacheKey,
    TracingDebugInfo,
    WrappedFun,
    annotate,
    cache,
    clear_all_caches,
    flatten_fun,
    set_describe_key_difference,
    set_explain_cache_misses,
    transformation,
    tree_flatten,
    wrap_init,
)
import lamina_linear_util.cache  # noqa: F401  (the submodule, for its private state)
cache_module = sys.modules["lamina_linear_util.cache"]


class Result:
    """A cached value we can hold a weak reference to."""

    def __init__(self, value: Any) -> None:
        self.value = value


def make_counting_cache(max_size: int | None = 4096, **kwargs: Any
                        ) -> tuple[Any, list[tuple[Any, ...]]]:
    calls: list[tuple[Any, ...]] = []

    def trace(fun: WrappedFun, *args: Any) -> Result:
        calls.append(args)
        return Result(fun.call_wrapped(*args[:1]))  # the other args only key the cache

    return cache(trace, max_size, **kwargs), calls


def double(x: float) -> float:
    return 2 * x


def negate(inner: Callable[..., Any], *args: Any) -> Any:
    return -inner(*args)


@pytest.fixture(autouse=True)
def _explain_off() -> Iterator[None]:
    previous = set_explain_cache_misses(False)
    yield
    set_explain_cache_misses(previous)


def test_hits_on_equal_keys() -> None:
    cached, calls = make_counting_cache()
    first = cached(wrap_init(double), 3)
    second = cached(wrap_init(double), 3)
    assert first is second and first.value == 6
    assert calls == [(3,)]
    info = cached.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 1, 1)


@pytest.mark.parametrize("make_fun, args", [
    (lambda: wrap_init(double), (4,)),                                # extra args
    (lambda: wrap_init(abs), (3,)),                                   # function
    (lambda: transformation(negate, wrap_init(double)), (3,)),         # transforms
    (lambda: wrap_init(lambda x, p: x, {"p": 1}), (3,)),              # params
    (lambda: annotate(wrap_init(double), ("f32[]",)), (3,)),          # input type
    (lambda: wrap_init(double, debug_info=TracingDebugInfo("jit", None, ("x",))), (3,)),
])
def test_misses_on_different_keys(make_fun: Callable[[], WrappedFun], args: tuple[Any, ...]
                                  ) -> None:
    cached, calls = make_counting_cache()
    cached(wrap_init(double), 3)
    cached(make_fun(), *args)
    assert len(calls) == 2


def test_context_joins_the_key() -> None:
    state = {"x64": False}
    cached, calls = make_counting_cache(context=lambda: state["x64"])
    cached(wrap_init(double), 1)
    cached(wrap_init(double), 1)
    state["x64"] = True
    cached(wrap_init(double), 1)
    assert len(calls) == 2


def test_hit_repopulates_the_stores() -> None:
    def trace(fun: WrappedFun, n: int) -> Any:
        return fun.call_wrapped(*range(n))

    cached = cache(trace)
    _, in_tree = tree_flatten(((1, 2), {}))

    def f(a: int, b: int) -> dict[str, Any]:
        return {"s": a + b, "p": (a, b)}

    wf1, out_tree1 = flatten_fun(wrap_init(f), in_tree)
    assert cached(wf1, 2) == [(0), 1, 1]
    wf2, out_tree2 = flatten_fun(wrap_init(f), in_tree)
    assert cached(wf2, 2) == [0, 1, 1]
    assert out_tree2() == out_tree1()
    assert cached.cache_info().hits == 1


def test_entry_freed_when_the_function_is_collected() -> None:
    cached, calls = make_counting_cache()

    def make_and_cache() -> tuple[weakref.ref[Any], weakref.ref[Any]]:
        def local(x: float) -> float:
            return x + 1

        result = cached(wrap_init(local), 1)
        return weakref.ref(local), weakref.ref(result)

    fun_ref, result_ref = make_and_cache()
    gc.collect()
    assert fun_ref() is None
    assert result_ref() is None  # the cached value was released with the entry
    assert cached.cache_info().currsize == 0


def test_lru_bound_evicts_the_least_recently_used() -> None:
    cached, calls = make_counting_cache(max_size=2)
    cached(wrap_init(double), 1)
    cached(wrap_init(double), 2)
    cached(wrap_init(double), 1)          # refresh 1
    cached(wrap_init(double), 3)          # evicts 2
    assert cached.cache_info().currsize == 2
    cached(wrap_init(double), 1)
    assert len(calls) == 3
    cached(wrap_init(double), 2)
    assert len(calls) == 4
    cached.set_max_size(1)
    assert cached.cache_info().currsize == 1
    with pytest.raises(ValueError, match="max_size must be a positive int"):
        cache(double, 0)


def test_eight_threads_get_correct_results() -> None:
    cached, calls = make_counting_cache(max_size=64)
    funs = [wrap_init(double), wrap_init(abs), transformation(negate, wrap_init(double))]
    expected = {(i, n): funs[i].call_wrapped(n) for i in range(3) for n in range(20)}
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        try:
            barrier.wait()
            for step in range(400):
                i, n = (seed + step) % 3, (seed * 7 + step) % 20
                fresh = [wrap_init(double), wrap_init(abs),
                         transformation(negate, wrap_init(double))][i]
                assert cached(fresh, n).value == expected[(i, n)]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    info = cached.cache_info()
    assert info.currsize == 60
    assert info.hits + info.misses == 8 * 400
    assert 60 <= len(calls) <= 60 + 8  # a racing miss may compute a key twice


def test_reentrant_use_does_not_deadlock() -> None:
    def trace(fun: WrappedFun, depth: int) -> int:
        if depth == 0:
            return 0
        return 1 + cached(wrap_init(double), depth - 1)

    cached = cache(trace)
    assert cached(wrap_init(double), 5) == 5


def test_unweakrefable_and_unhashable_inputs() -> None:
    class SlotCallable:
        __slots__ = ()

        def __call__(self, x: float) -> float:
            return x

        def __hash__(self) -> int:
            return 1

        def __eq__(self, other: object) -> bool:
            return isinstance(other, SlotCallable)

    cached, calls = make_counting_cache()
    cached(wrap_init(SlotCallable()), 1)
    cached(wrap_init(SlotCallable()), 1)
    assert len(calls) == 1
    with pytest.raises(TypeError, match="extra argument 0 of type list"):
        cached(wrap_init(double), [1])
    with pytest.raises(TypeError, match="first argument must be a WrappedFun"):
        cached(double, 1)


def test_evict_and_clear() -> None:
    cached, calls = make_counting_cache()
    cached(wrap_init(double), 1)
    cached(wrap_init(abs), 1)
    cached.evict_function(double)
    assert cached.cache_info().currsize == 1
    clear_all_caches()
    assert cached.cache_info().currsize == 0


# -- explaining misses -------------------------------------------------------------------

DBG = TracingDebugInfo("jit", "f at x.py:3", ("x", "y['hi']"), None)


def test_explain_names_the_argument_by_its_path(caplog: pytest.LogCaptureFixture) -> None:
    cached, _ = make_counting_cache()
    set_explain_cache_misses(True)
    def f(*args: Any) -> Any:
        return args

    with caplog.at_level(logging.WARNING, logger="lamina.cache"):
        cached(wrap_init(f, debug_info=DBG), ("float32[]", "float32[3]"))
        cached(wrap_init(f, debug_info=DBG), ("float32[]", "float32[3]"))
        cached(wrap_init(f, debug_info=DBG), ("float32[]", "float32[4]"))
    messages = [r.getMessage() for r in caplog.records if r.name == "lamina.cache"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert len(messages) == 2
    assert messages[0].startswith("explain: cache miss for f at x.py:3: never seen")
    assert messages[1] == ("explain: cache miss for f at x.py:3: argument y['hi'] changed "
                           "from float32[3] to float32[4]")


def test_explain_names_other_parts(caplog: pytest.LogCaptureFixture) -> None:
    cached, _ = make_counting_cache()
    set_explain_cache_misses(True)
    with caplog.at_level(logging.WARNING, logger="lamina.cache"):
        cached(wrap_init(double), 1, "a")
        cached(wrap_init(double), 1, "b")
        cached(transformation(negate, wrap_init(double)), 1, "b")
        cached(annotate(wrap_init(double), ("i32",)), 1, "b")
        cached(wrap_init(double, debug_info=DBG), 1, "b")
    messages = [r.getMessage() for r in caplog.records][1:]
    assert messages[0] == ("explain: cache miss for double: extra argument 1 changed from "
                           "a to b")
    assert "the transformations changed from [] to ['negate']" in messages[1]
    assert "the input type changed from None to ('i32',)" in messages[2]
    assert "the debug info changed from None to" in messages[3]


def test_explain_is_silent_when_off(caplog: pytest.LogCaptureFixture) -> None:
    cached, _ = make_counting_cache()
    with caplog.at_level(logging.WARNING, logger="lamina.cache"):
        cached(wrap_init(double), 1)
        cached(wrap_init(double), 2)
    assert not caplog.records


def test_describe_hooks(caplog: pytest.LogCaptureFixture) -> None:
    def hook(fun: WrappedFun, old: CacheKey, new: CacheKey) -> str:
        return f"custom {old.args} -> {new.args}"

    set_explain_cache_misses(True)
    previous = set_describe_key_difference(hook)
    try:
        cached, _ = make_counting_cache()
        own, _ = make_counting_cache(describe_key_difference=lambda f, o, n: "own hook")
        with caplog.at_level(logging.WARNING, logger="lamina.cache"):
            cached(wrap_init(double), 1)
            cached(wrap_init(double), 2)
            own(wrap_init(double), 1)
            own(wrap_init(double), 2)
    finally:
        set_describe_key_difference(previous)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[1] == "explain: cache miss for double: custom (1,) -> (2,)"
    assert messages[3] == "explain: cache miss for double: own hook"
    assert cache_module._describer is cache_module.describe_key_difference


def test_environment_variable_turns_explanations_on() -> None:
    code = ("from lamina_linear_util.cache import explain_cache_misses_enabled as on; "
            "print(on())")
    env = dict(os.environ, LAMINA_EXPLAIN_CACHE_MISSES="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "True"
    env["LAMINA_EXPLAIN_CACHE_MISSES"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"
