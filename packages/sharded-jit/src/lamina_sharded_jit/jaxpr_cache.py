"""Memoization of functions of a jaxpr (by the jaxpr's identity).

The transformation rules of ``pjit_p`` turn the jaxpr in its params into new
jaxprs (JVP, partial evaluation, transposition, batching, DCE). The jaxpr
from the tracing cache is the same object on every call with the same
signature, so remembering each rule's result per (jaxpr, other arguments)
keeps the *result* jaxprs stable as well; that in turn lets the lowering and
compilation caches (keyed on the jaxpr they lower) hit, e.g. on every call of
``grad(jit(f))`` after the first.

Entries hold their jaxpr strongly (so its ``id`` cannot be reused while the
entry lives) and are evicted least-recently-used first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr

__all__ = ["JaxprMemo", "memoize_on_jaxpr", "clear_jaxpr_caches"]

R = TypeVar("R")

_all_memos: list[JaxprMemo[Any]] = []


class JaxprMemo(Generic[R]):
    """``memo(closed_jaxpr, *args)`` = ``fn(closed_jaxpr, *args)``, remembered
    per (jaxpr identity, consts identity, args); ``args`` must be hashable."""

    def __init__(self, fn: Callable[..., R], max_size: int) -> None:
        self._fn = fn
        self._max_size = max_size
        self._entries: OrderedDict[Hashable, tuple[Any, R]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        _all_memos.append(self)

    def __call__(self, closed: ClosedJaxpr | Jaxpr, *args: Any) -> R:
        inner = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
        consts = closed.consts if isinstance(closed, ClosedJaxpr) else ()
        key = (id(inner), tuple(id(c) for c in consts), args)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0][0] is inner:
                self._entries.move_to_end(key)
                self.hits += 1
                return hit[1]
            self.misses += 1
        value = self._fn(closed, *args)
        with self._lock:
            self._entries[key] = ((inner, consts), value)
            if len(self._entries) > self._max_size:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def memoize_on_jaxpr(fn: Callable[..., R], max_size: int = 1024) -> JaxprMemo[R]:
    """See :class:`JaxprMemo`."""
    return JaxprMemo(fn, max_size)


def clear_jaxpr_caches() -> None:
    """Empties every jaxpr memo (tests use it to start fresh)."""
    for memo in _all_memos:
        memo.clear()
