"""``lamina.monitoring``: listeners, and the events lamina records under JAX's
names (the sequences recorded from JAX 0.10.2 for the same programs)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import lamina as lx
import lamina.numpy as jnp
import pytest
from lamina import config, monitoring
from lamina_interpreters_pxla import persistent_cache

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_COMPILE = "/jax/core/compile/backend_compile_duration"


@pytest.fixture
def log() -> Iterator[list[tuple[Any, ...]]]:
    seen: list[tuple[Any, ...]] = []
    monitoring.register_event_listener(lambda e, **kw: seen.append(("event", e, kw)))
    monitoring.register_event_duration_secs_listener(
        lambda e, d, **kw: seen.append(("duration", e, kw)))
    monitoring.register_event_time_span_listener(
        lambda e, s, t, **kw: seen.append(("span", e, kw)))
    monitoring.register_scalar_listener(lambda e, v, **kw: seen.append(("scalar", e, kw)))
    yield seen
    monitoring.clear_event_listeners()


def test_user_records_reach_listeners(log: list[tuple[Any, ...]]) -> None:
    values: list[Any] = []
    monitoring.register_event_duration_secs_listener(lambda e, d, **kw: values.append(d))
    monitoring.record_event("/my/event", step=3)
    monitoring.record_event_duration_secs("/my/duration", 0.5, phase="a")
    monitoring.record_event_time_span("/my/span", 1.0, 2.0)
    monitoring.record_scalar("/my/scalar", 7)
    assert log == [("event", "/my/event", {"step": 3}),
                   ("duration", "/my/duration", {"phase": "a"}),
                   ("span", "/my/span", {}),
                   ("scalar", "/my/scalar", {})]
    assert values == [0.5]


def test_unregister_and_clear() -> None:
    seen: list[str] = []

    def listener(event: str, **_: Any) -> None:
        seen.append(event)

    monitoring.register_event_listener(listener)
    assert monitoring.get_event_listeners() == [listener]
    monitoring.record_event("/a")
    monitoring.unregister_event_listener(listener)
    monitoring.record_event("/b")
    assert seen == ["/a"]
    with pytest.raises(ValueError, match="not a registered listener"):
        monitoring.unregister_event_listener(listener)
    with pytest.raises(TypeError, match="must be callable"):
        monitoring.register_scalar_listener(3)  # type: ignore[arg-type]
    scalar = lambda e, v: None  # noqa: E731
    monitoring.register_scalar_listener(scalar)
    monitoring.unregister_scalar_listener(scalar)
    for register in (monitoring.register_event_listener,
                     monitoring.register_event_duration_secs_listener,
                     monitoring.register_event_time_span_listener,
                     monitoring.register_scalar_listener):
        register(listener)
    monitoring.clear_event_listeners()
    assert not (monitoring.get_event_listeners() or monitoring.get_event_duration_listeners()
                or monitoring.get_event_time_span_listeners()
                or monitoring.get_scalar_listeners())


def _compile_events(fun_name: str) -> list[tuple[Any, ...]]:
    """What JAX 0.10.2 records for one jit compile without a persistent cache
    (its cache events aside): each phase as scalar, duration, time span."""
    out: list[tuple[Any, ...]] = []
    for event, name in ((_TRACE, fun_name), (_LOWER, f"jit({fun_name})"),
                        (_COMPILE, f"jit({fun_name})")):
        out += [(kind, event, {"fun_name": name}) for kind in ("scalar", "duration", "span")]
    return out


def test_jit_records_jax_compile_events(log: list[tuple[Any, ...]]) -> None:
    def affine(x: Any) -> Any:
        return x * 2 + 1

    f = lx.jit(affine)
    x = jnp.ones(3)
    log.clear()
    f(x)
    assert [entry for entry in log if entry[0] != "event"] == _compile_events("affine")
    log.clear()
    f(x)  # cached: nothing recorded
    assert log == []


def test_eager_primitive_compiles_record_lowering_and_compile(
        log: list[tuple[Any, ...]]) -> None:
    jnp.sin(jnp.float32(0.25))
    kinds = [(kind, event, kw) for kind, event, kw in log if kind != "event"]
    assert kinds[:6] == [(kind, event, {"fun_name": "jit(sin)"})
                         for event in (_LOWER, _COMPILE)
                         for kind in ("scalar", "duration", "span")]


@pytest.fixture
def cache_dir(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    config.update("jax_compilation_cache_dir", str(tmp_path))
    config.update("jax_persistent_cache_min_compile_time_secs", 0)
    persistent_cache.reset_cache()
    yield tmp_path
    config.update("jax_compilation_cache_dir", None)
    config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    persistent_cache.reset_cache()


def test_persistent_cache_events(cache_dir: pathlib.Path,
                                 log: list[tuple[Any, ...]]) -> None:
    def shifted(x: Any) -> Any:
        return x - 3

    x = jnp.ones(3)
    log.clear()
    lx.jit(shifted)(x)
    events = [e for kind, e, _ in log if kind == "event"]
    assert events == ["/jax/compilation_cache/tasks_using_cache",
                      "/jax/compilation_cache/compile_requests_use_cache",
                      "/jax/compilation_cache/cache_misses"]
    lx.clear_caches()
    log.clear()
    lx.jit(shifted)(x)
    events = [e for kind, e, _ in log if kind == "event"]
    assert events == ["/jax/compilation_cache/compile_requests_use_cache",
                      "/jax/compilation_cache/cache_hits"]
    durations = [e for kind, e, _ in log if kind == "duration"]
    assert "/jax/compilation_cache/cache_retrieval_time_sec" in durations
    assert durations[-1] == _COMPILE  # the compile phase ends after the cache lookup


def test_disabled_cache_is_recorded_once(log: list[tuple[Any, ...]]) -> None:
    persistent_cache.reset_cache()
    lx.jit(lambda x: x / 7)(jnp.ones(2))
    lx.jit(lambda x: x / 9)(jnp.ones(2))
    events = [e for kind, e, _ in log if kind == "event"]
    assert events == ["/jax/compilation_cache/task_disabled_cache"]


def test_alias_names() -> None:
    assert lx.monitoring is monitoring
    jax_names = {  # dir(jax.monitoring) in JAX 0.10.2, public names
        "clear_event_listeners", "record_event", "record_event_duration_secs",
        "record_event_time_span", "record_scalar", "register_event_duration_secs_listener",
        "register_event_listener", "register_event_time_span_listener",
        "register_scalar_listener", "unregister_event_duration_listener",
        "unregister_event_listener", "unregister_event_time_span_listener",
        "unregister_scalar_listener"}
    assert jax_names <= set(dir(monitoring))
