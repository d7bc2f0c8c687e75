"""``lamina.monitoring``: listening to what lamina records (JAX's
``jax.monitoring``).

Register a listener for events (``listener(event, **metadata)``), durations
(``listener(event, seconds, **metadata)``), time spans
(``listener(event, start, end, **metadata)``) or scalars
(``listener(event, value, **metadata)``); lamina records JAX's compile-time
and compilation-cache events under JAX's names (listed in
``lamina_interpreters_pxla.monitoring``), and programs may record their own.
"""

from __future__ import annotations

from lamina_interpreters_pxla.monitoring import (
    clear_event_listeners,
    get_event_duration_listeners,
    get_event_listeners,
    get_event_time_span_listeners,
    get_scalar_listeners,
    record_event,
    record_event_duration_secs,
    record_event_time_span,
    record_scalar,
    register_event_duration_secs_listener,
    register_event_listener,
    register_event_time_span_listener,
    register_scalar_listener,
    unregister_event_duration_listener,
    unregister_event_listener,
    unregister_event_time_span_listener,
    unregister_scalar_listener,
)

__all__ = [
    "clear_event_listeners", "get_event_duration_listeners", "get_event_listeners",
    "get_event_time_span_listeners", "get_scalar_listeners", "record_event",
    "record_event_duration_secs", "record_event_time_span", "record_scalar",
    "register_event_duration_secs_listener", "register_event_listener",
    "register_event_time_span_listener", "register_scalar_listener",
    "unregister_event_duration_listener", "unregister_event_listener",
    "unregister_event_time_span_listener", "unregister_scalar_listener",
]
