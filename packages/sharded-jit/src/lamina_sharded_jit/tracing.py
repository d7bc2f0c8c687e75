"""jit's tracing cache: a function to a closed jaxpr, once per signature.

``trace_pjit(fun, in_shardings)`` traces the flat ``WrappedFun`` ``fun``
(its ``in_type`` annotation holds the argument avals, weak types included)
to a ``ClosedJaxpr`` through linear-util's :func:`cache`. The key is the
user function (held weakly), its transformations (static arguments baked in
by ``argnums_partial``, the argument tree by ``flatten_fun``), its debug info
(argument names), the avals, the explicit input shardings, and a context
(the x64 flag, the named axes bound around the call, the current mesh,
``sharded_jit`` scope and ``include_full_tracebacks_in_locations``: with it on,
equations record their callers' frames, so a jaxpr traced with the other
setting lowers to other locations). ``jit`` calls, ``jit(f).trace``, ``eval_shape`` and
inner ``jit``s met while tracing an outer function all go through it, so an
inner function is traced once however often its caller is retraced.

Tracing happens with a fresh name stack: the jaxpr does not depend on where
it was first traced. A function that closes over tracers of an enclosing
transformation gets them as leading arguments (``TraceResult.consts``); such
a result belongs to that one transformation and is evicted from the cache
as soon as it is returned (:func:`trace_pjit`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lamina_interpreters_pxla.monitoring import JAXPR_TRACE_EVENT, timed_event
from lamina_interpreters_pxla.sharding import get_current_mesh
from lamina_linear_util.cache import cache
from lamina_linear_util.linear_util import WrappedFun
from lamina_tracing_core import core, dtypes, trace_settings
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.source_info import (
    NameStack, include_full_tracebacks_in_locations, set_name_stack)

from lamina_sharded_jit.explain import describe_trace_miss, log_cost
from lamina_sharded_jit.settings import check_tracing_allowed

__all__ = ["TraceResult", "trace_pjit", "fresh_tracing", "register_context_part",
           "trace_cache", "tracing_context"]


@dataclass(frozen=True)
class TraceResult:
    """A traced jit body: ``jaxpr`` takes ``[*consts, *args]`` where
    ``consts`` are tracers of enclosing transformations (usually none; their
    names in the debug info are ``None``)."""

    jaxpr: ClosedJaxpr
    out_avals: tuple[ShapedArray, ...]
    consts: tuple[Any, ...] = ()


class _Mode(threading.local):
    def __init__(self) -> None:
        self.fresh = False


_mode = _Mode()


@contextmanager
def fresh_tracing() -> Iterator[None]:
    """Traces in the block start from an empty transformation stack (for
    ``jit(f).trace``: the stage must not capture outer tracers)."""
    previous = _mode.fresh
    _mode.fresh = True
    try:
        yield
    finally:
        _mode.fresh = previous


#: Extra parts of the tracing context (the sharded_jit scope registers one).
_context_parts: list[Callable[[], Hashable]] = []


def register_context_part(part: Callable[[], Hashable]) -> None:
    """Adds a value to every tracing-cache key (e.g. a scope that changes
    what tracing produces)."""
    _context_parts.append(part)


def tracing_context() -> Hashable:
    """What, besides the function and its arguments, a trace depends on."""
    names = core.bound_axis_names()
    axes = tuple((n, core.axis_size(n)) for n in names) if names else ()
    extra = tuple(part() for part in _context_parts)
    return (dtypes.x64_enabled(), axes, get_current_mesh(), extra,
            include_full_tracebacks_in_locations(), trace_settings.state.key)


#: how many functions jit traced in this process (tests of the caches read it)
trace_stats = {"traces": 0}


def _trace(fun: WrappedFun, in_shardings: tuple[Any, ...]) -> TraceResult:
    """The cached function (runs on a miss only)."""
    del in_shardings  # part of the key: a call with other shardings is another signature
    dbg = fun.debug_info
    check_tracing_allowed(dbg.func_src_info if dbg is not None else fun.__name__)
    trace_stats["traces"] += 1
    in_avals = list(fun.in_type or ())
    start = time.perf_counter()
    fresh, _mode.fresh = _mode.fresh, False  # only the outermost trace starts afresh
    outer_stack = set_name_stack(NameStack())
    try:
        with timed_event(JAXPR_TRACE_EVENT, fun.__name__):
            if fresh:
                jaxpr, out_avals, consts = pe.trace_to_jaxpr_final(fun, in_avals)
            else:
                jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(fun, in_avals)
    finally:
        set_name_stack(outer_stack)
        _mode.fresh = fresh
    dbg = fun.debug_info
    log_cost("tracing", dbg.func_src_info if dbg is not None and dbg.func_src_info
             else fun.__name__, time.perf_counter() - start)
    if any(isinstance(c, core.Tracer) for c in consts):
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
        return TraceResult(closed, tuple(out_avals), tuple(consts))
    return TraceResult(ClosedJaxpr(jaxpr, consts), tuple(out_avals), ())


trace_cache = cache(_trace, max_size=4096, context=tracing_context,
                    describe_key_difference=describe_trace_miss)


def trace_pjit(fun: WrappedFun, in_shardings: tuple[Any, ...]) -> TraceResult:
    """The traced jaxpr of flat ``fun`` (annotated with its input avals).

    A result that closes over tracers belongs to the one transformation that
    is tracing now: it is dropped from the cache as soon as it is returned
    (with the function's other entries: a function that reaches a
    transformation's values is, in practice, made afresh for each trace of
    its caller), so the cache never keeps tracers alive."""
    result = trace_cache(fun, in_shardings)
    if result.consts:
        trace_cache.evict_function(fun.f)
    return result
