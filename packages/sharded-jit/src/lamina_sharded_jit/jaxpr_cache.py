"""Memoization of functions of a jaxpr (by the jaxpr's identity).

The transformation rules of ``pjit_p`` turn the jaxpr in its params into new
jaxprs (JVP, partial evaluation, transposition, batching, DCE). The jaxpr
from the tracing cache is the same object on every call with the same
signature, so remembering each rule's result per (jaxpr, other arguments)
keeps the *result* jaxprs stable as well; that in turn lets the lowering and
compilation caches (keyed on the jaxpr they lower) hit, e.g. on every call of
``grad(jit(f))`` after the first.

Entries live on the jaxpr they belong to (:func:`jaxpr_store`), not in a
module-level table: a jaxpr the program no longer reaches (its function was
dropped, and with it the tracing-cache entry) takes its memoized results with
it, even where a result refers back to the jaxpr (the cycle is collected).
Clearing bumps a generation number instead of visiting every jaxpr.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr

__all__ = ["JaxprMemo", "memoize_on_jaxpr", "clear_jaxpr_caches", "jaxpr_store"]

R = TypeVar("R")

_all_memos: list[JaxprMemo[Any]] = []

#: The attribute of a Jaxpr that holds its memoized results (see the module
#: docstring); a plain instance attribute, so ``Jaxpr.replace`` (which copies
#: fields only) starts the new jaxpr with none.
_STORE_ATTR = "_lamina_memo_store"


def jaxpr_store(jaxpr: Jaxpr) -> dict[Any, Any]:
    """The memo table that lives and dies with ``jaxpr``: keys are owned by
    their caches (each starts its keys with an object of its own)."""
    store: dict[Any, Any] | None = jaxpr.__dict__.get(_STORE_ATTR)
    if store is None:
        store = jaxpr.__dict__.setdefault(_STORE_ATTR, {})
    return store


class JaxprMemo(Generic[R]):
    """``memo(closed_jaxpr, *args)`` = ``fn(closed_jaxpr, *args)``, remembered
    per (jaxpr identity, consts identity, args); ``args`` must be hashable.
    The entries are kept on the jaxpr (:func:`jaxpr_store`)."""

    def __init__(self, fn: Callable[..., R], max_size: int) -> None:
        self._fn = fn
        self._max_size = max_size  # per jaxpr: past it, that jaxpr's entries start over
        self._generation = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        _all_memos.append(self)

    def __call__(self, closed: ClosedJaxpr | Jaxpr, *args: Any) -> R:
        inner = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
        consts = closed.consts if isinstance(closed, ClosedJaxpr) else ()
        store = jaxpr_store(inner)
        key = (self, self._generation, tuple(id(c) for c in consts), args)
        hit = store.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], consts)):
            self.hits += 1
            return hit[1]  # type: ignore[no-any-return]
        self.misses += 1
        value = self._fn(closed, *args)
        with self._lock:
            gen = self._generation
            mine = [k for k in store if k[0] is self]
            full = len(mine) >= self._max_size
            for k in mine:
                if full or k[1] != gen:  # over the bound, or left from before a clear
                    store.pop(k, None)
            store[key] = (tuple(consts), value)
        return value

    def entries(self, jaxpr: Jaxpr) -> int:
        """How many results of this memo ``jaxpr`` holds now."""
        gen = self._generation
        return sum(1 for k in jaxpr_store(jaxpr) if k[0] is self and k[1] == gen)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1


def memoize_on_jaxpr(fn: Callable[..., R], max_size: int = 1024) -> JaxprMemo[R]:
    """See :class:`JaxprMemo`."""
    return JaxprMemo(fn, max_size)


def clear_jaxpr_caches() -> None:
    """Forgets every jaxpr memo's results (tests use it to start fresh)."""
    for memo in _all_memos:
        memo.clear()
