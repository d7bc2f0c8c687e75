"""Monitoring: named events, durations, time spans and scalars, sent to listeners.

Code records (:func:`record_event`, :func:`record_event_duration_secs`,
:func:`record_event_time_span`, :func:`record_scalar`); whoever wants the
numbers registers a listener of the matching kind. With no listener a record
costs a loop over an empty list. Keyword arguments are metadata passed to
the listeners as they are.

lamina records JAX's events under JAX's names where it does the same work:

- ``/jax/core/compile/jaxpr_trace_duration`` (jit tracing a function),
  ``/jax/core/compile/jaxpr_to_mlir_module_duration`` (lowering it) and
  ``/jax/core/compile/backend_compile_duration`` (XLA compiling it), each
  with ``fun_name=`` metadata, as a scalar (the start time) when it starts
  and a duration and a time span when it ends (:func:`timed_event`);
- the persistent compilation cache's ``/jax/compilation_cache/...`` events:
  ``tasks_using_cache`` or ``task_disabled_cache`` (once per process),
  ``compile_requests_use_cache``, ``cache_hits``, ``cache_misses`` and the
  duration ``cache_retrieval_time_sec``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "BACKEND_COMPILE_EVENT", "JAXPR_TO_MLIR_MODULE_EVENT", "JAXPR_TRACE_EVENT",
    "clear_event_listeners", "get_event_duration_listeners", "get_event_listeners",
    "get_event_time_span_listeners", "get_scalar_listeners", "record_event",
    "record_event_duration_secs", "record_event_time_span", "record_scalar",
    "register_event_duration_secs_listener", "register_event_listener",
    "register_event_time_span_listener", "register_scalar_listener", "timed_event",
    "unregister_event_duration_listener", "unregister_event_listener",
    "unregister_event_time_span_listener", "unregister_scalar_listener",
]

JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
JAXPR_TO_MLIR_MODULE_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

EventListener = Callable[..., None]

# Lists, replaced (not mutated) on change, so that a record running on another
# thread iterates over a consistent snapshot.
_event_listeners: list[EventListener] = []
_duration_listeners: list[EventListener] = []
_time_span_listeners: list[EventListener] = []
_scalar_listeners: list[EventListener] = []


def record_event(event: str, **kwargs: str | int) -> None:
    """Tells every event listener ``listener(event, **kwargs)``."""
    for listener in _event_listeners:
        listener(event, **kwargs)


def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Tells every duration listener ``listener(event, duration, **kwargs)``."""
    for listener in _duration_listeners:
        listener(event, duration, **kwargs)


def record_event_time_span(event: str, start_time: float, end_time: float,
                           **kwargs: str | int) -> None:
    """Tells every time-span listener ``listener(event, start_time, end_time,
    **kwargs)`` (times in seconds since the epoch)."""
    for listener in _time_span_listeners:
        listener(event, start_time, end_time, **kwargs)


def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Tells every scalar listener ``listener(event, value, **kwargs)``."""
    for listener in _scalar_listeners:
        listener(event, value, **kwargs)


@contextmanager
def timed_event(event: str, fun_name: str) -> Iterator[None]:
    """Records ``event`` around the enclosed work as JAX does: the start time
    as a scalar on entry; the duration and the time span on a normal exit."""
    if not (_scalar_listeners or _duration_listeners or _time_span_listeners):
        yield  # nobody listens: no clock reads
        return
    start = time.time()
    record_scalar(event, start, fun_name=fun_name)
    yield
    end = time.time()
    record_event_duration_secs(event, end - start, fun_name=fun_name)
    record_event_time_span(event, start, end, fun_name=fun_name)


def _check_callable(api: str, listener: Any) -> None:
    if not callable(listener):
        raise TypeError(f"{api}: the listener must be callable, got {listener!r}")


def register_event_listener(listener: EventListener) -> None:
    """Calls ``listener(event, **kwargs)`` at every :func:`record_event`."""
    global _event_listeners
    _check_callable("register_event_listener", listener)
    _event_listeners = [*_event_listeners, listener]


def register_event_duration_secs_listener(listener: EventListener) -> None:
    """Calls ``listener(event, duration, **kwargs)`` at every
    :func:`record_event_duration_secs`."""
    global _duration_listeners
    _check_callable("register_event_duration_secs_listener", listener)
    _duration_listeners = [*_duration_listeners, listener]


def register_event_time_span_listener(listener: EventListener) -> None:
    """Calls ``listener(event, start_time, end_time, **kwargs)`` at every
    :func:`record_event_time_span`."""
    global _time_span_listeners
    _check_callable("register_event_time_span_listener", listener)
    _time_span_listeners = [*_time_span_listeners, listener]


def register_scalar_listener(listener: EventListener) -> None:
    """Calls ``listener(event, value, **kwargs)`` at every :func:`record_scalar`."""
    global _scalar_listeners
    _check_callable("register_scalar_listener", listener)
    _scalar_listeners = [*_scalar_listeners, listener]


def _without(api: str, listeners: list[EventListener], listener: EventListener
             ) -> list[EventListener]:
    if listener not in listeners:
        raise ValueError(f"{api}: {listener!r} is not a registered listener")
    kept = list(listeners)
    kept.remove(listener)
    return kept


def unregister_event_listener(listener: EventListener) -> None:
    """Removes an event listener; ``ValueError`` if it is not registered."""
    global _event_listeners
    _event_listeners = _without("unregister_event_listener", _event_listeners, listener)


def unregister_event_duration_listener(listener: EventListener) -> None:
    """Removes a duration listener; ``ValueError`` if it is not registered."""
    global _duration_listeners
    _duration_listeners = _without("unregister_event_duration_listener",
                                   _duration_listeners, listener)


def unregister_event_time_span_listener(listener: EventListener) -> None:
    """Removes a time-span listener; ``ValueError`` if it is not registered."""
    global _time_span_listeners
    _time_span_listeners = _without("unregister_event_time_span_listener",
                                    _time_span_listeners, listener)


def unregister_scalar_listener(listener: EventListener) -> None:
    """Removes a scalar listener; ``ValueError`` if it is not registered."""
    global _scalar_listeners
    _scalar_listeners = _without("unregister_scalar_listener", _scalar_listeners, listener)


def clear_event_listeners() -> None:
    """Removes every listener, of every kind."""
    global _event_listeners, _duration_listeners, _time_span_listeners, _scalar_listeners
    _event_listeners, _duration_listeners, _time_span_listeners, _scalar_listeners = \
        [], [], [], []


def get_event_listeners() -> list[EventListener]:
    """The event listeners (a copy)."""
    return list(_event_listeners)


def get_event_duration_listeners() -> list[EventListener]:
    """The duration listeners (a copy)."""
    return list(_duration_listeners)


def get_event_time_span_listeners() -> list[EventListener]:
    """The time-span listeners (a copy)."""
    return list(_time_span_listeners)


def get_scalar_listeners() -> list[EventListener]:
    """The scalar listeners (a copy)."""
    return list(_scalar_listeners)
