"""Memoization of functions of a ``WrappedFun``: :func:`cache`.

``cache(fn)`` returns a callable ``memoized(wrapped_fun, *args)`` that calls
``fn(wrapped_fun, *args)`` once per distinct key and returns the remembered
result afterwards. The key is the WrappedFun's transformations, params, input
type and debug info, the extra ``args``, and (optionally) a context value, all
held strongly; the user function ``wrapped_fun.f`` is held *weakly*: when it is
garbage collected, its entries go away. The table is a bounded LRU shared by
all functions, and safe to use from several threads (``fn`` itself runs
outside the lock, so it may re-enter the cache).

On a hit, the transformation stores of the caller's WrappedFun are filled from
the stores saved with the entry, so thunks such as ``out_tree()`` work as if
the function had run.

Explaining misses: with ``set_explain_cache_misses(True)`` (or the environment
variable ``LAMINA_EXPLAIN_CACHE_MISSES=1``) every miss logs, at WARNING level
on the ``lamina.cache`` logger, which part of the key differs from the closest
cached entry of the same function, e.g.::

    explain: cache miss for f at x.py:3: argument y['hi'] changed from float32[3] to float32[4]

The text after the location comes from :func:`describe_key_difference`;
higher layers can install a richer one with :func:`set_describe_key_difference`
or per cache (``cache(fn, describe_key_difference=...)``).
"""

from __future__ import annotations

import functools
import logging
import os
import reprlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from lamina_linear_util._fun_info import fun_name
from lamina_linear_util.linear_util import Store, WrappedFun

__all__ = [
    "CacheInfo",
    "CacheKey",
    "CachedFunction",
    "DescribeKeyDifference",
    "cache",
    "clear_all_caches",
    "describe_key_difference",
    "explain_cache_misses_enabled",
    "set_describe_key_difference",
    "set_explain_cache_misses",
]

R = TypeVar("R")

logger = logging.getLogger("lamina.cache")

_TRUTHY = frozenset({"1", "true", "yes", "on"})


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


_explain_misses: bool = _env_flag("LAMINA_EXPLAIN_CACHE_MISSES")


def set_explain_cache_misses(enabled: bool) -> bool:
    """Turn miss explanations on or off; returns the previous setting."""
    global _explain_misses
    previous = _explain_misses
    _explain_misses = bool(enabled)
    return previous


def explain_cache_misses_enabled() -> bool:
    """Whether misses are explained (see :func:`set_explain_cache_misses`)."""
    return _explain_misses


class CacheKey:
    """The key of one cache entry, minus the (weakly held) user function.

    Parts, in the order misses are explained: ``transforms``, ``params``,
    ``in_type``, ``debug_info``, ``args`` (the extra arguments, a tuple) and
    ``context``. The hash is computed once.
    """

    __slots__ = ("transforms", "params", "in_type", "debug_info", "args", "context", "_hash")

    PARTS = ("transforms", "params", "in_type", "debug_info", "args", "context")

    def __init__(self, fun: WrappedFun, args: tuple[Any, ...], context: Any) -> None:
        self.transforms = fun.transforms
        self.params = fun.params
        self.in_type = fun.in_type
        self.debug_info = fun.debug_info
        self.args = args
        self.context = context
        try:
            self._hash = hash((self.transforms, self.params, self.in_type, self.debug_info,
                               args, context))
        except TypeError as e:
            raise TypeError(f"cache: the key for {fun.__name__} is not hashable: "
                            f"{self._unhashable_part()} ({e})") from None

    def _unhashable_part(self) -> str:
        for part in self.PARTS:
            value = getattr(self, part)
            try:
                hash(value)
            except TypeError:
                if part == "args":
                    for i, arg in enumerate(value):
                        try:
                            hash(arg)
                        except TypeError:
                            return f"extra argument {i} of type {type(arg).__name__}"
                return f"its {part}"
        return "one of its parts"

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CacheKey):
            return NotImplemented
        if self is other:
            return True
        return (self._hash == other._hash and self.args == other.args
                and self.transforms == other.transforms and self.params == other.params
                and self.in_type == other.in_type and self.debug_info == other.debug_info
                and self.context == other.context)

    def __repr__(self) -> str:
        fields = ", ".join(f"{p}={getattr(self, p)!r}" for p in self.PARTS)
        return f"CacheKey({fields})"


DescribeKeyDifference: TypeAlias = Callable[[WrappedFun, CacheKey, CacheKey], str]
"""``hook(fun, cached_key, new_key) -> text`` explaining why ``new_key`` missed."""

_short_repr = reprlib.Repr()
_short_repr.maxstring = 80
_short_repr.maxother = 80


def _show(value: Any) -> str:
    # str() gives the readable form of avals ("float32[3]"); keep it short.
    try:
        text = str(value)
    except Exception:
        text = _short_repr.repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _differs(a: Any, b: Any) -> bool:
    try:
        return a is not b and not bool(a == b)
    except Exception:
        return True


def _describe_sequence_change(what: str, old: Sequence[Any], new: Sequence[Any],
                              names: tuple[str | None, ...] | None) -> list[str]:
    if len(old) != len(new):
        return [f"{what} changed from {len(old)} to {len(new)} entries"]
    out = []
    for j, (a, b) in enumerate(zip(old, new)):
        if _differs(a, b):
            name = names[j] if names is not None and len(names) == len(new) else None
            where = f"argument {name}" if name else f"{what} element {j}"
            out.append(f"{where} changed from {_show(a)} to {_show(b)}")
    return out


def _transform_names(transforms: Sequence[Any]) -> list[str]:
    return [fun_name(gen) for gen, _ in transforms]


def describe_key_difference(fun: WrappedFun, old: CacheKey, new: CacheKey) -> str:
    """The default explanation of why ``new`` missed the cached ``old`` key.

    Names the parts that differ. Extra arguments are opaque: they are compared
    element-wise, and an argument that is a sequence as long as the debug
    info's ``arg_names`` (e.g. the flat input types) is reported per entry by
    argument name (``argument y['hi'] changed from float32[3] to float32[4]``).
    """
    names = new.debug_info.arg_names if new.debug_info is not None else None
    reasons: list[str] = []
    if _differs(old.transforms, new.transforms):
        old_gens, new_gens = _transform_names(old.transforms), _transform_names(new.transforms)
        if old_gens != new_gens:
            reasons.append(f"the transformations changed from {old_gens} to {new_gens}")
        else:
            for (gen, a), (_, b) in zip(old.transforms, new.transforms):
                if _differs(a, b):
                    reasons.append(f"the static arguments of transformation {fun_name(gen)} "
                                   f"changed from {_show(a)} to {_show(b)}")
    if _differs(old.params, new.params):
        reasons.append(f"the params changed from {_show(dict(old.params))} to "
                       f"{_show(dict(new.params))}")
    if _differs(old.in_type, new.in_type):
        if old.in_type is not None and new.in_type is not None:
            reasons += _describe_sequence_change("input type", old.in_type, new.in_type, names)
        else:
            reasons.append(f"the input type changed from {_show(old.in_type)} to "
                           f"{_show(new.in_type)}")
    if _differs(old.debug_info, new.debug_info):
        reasons += _describe_debug_info_change(old, new)
    if len(old.args) != len(new.args):
        reasons.append(f"the number of extra arguments changed from {len(old.args)} to "
                       f"{len(new.args)}")
    else:
        for i, (a, b) in enumerate(zip(old.args, new.args)):
            if not _differs(a, b):
                continue
            if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
                reasons += _describe_sequence_change(f"extra argument {i}", a, b, names)
            else:
                reasons.append(f"extra argument {i} changed from {_show(a)} to {_show(b)}")
    if _differs(old.context, new.context):
        reasons.append(f"the context changed from {_show(old.context)} to "
                       f"{_show(new.context)}")
    return "; ".join(reasons) or "no part of the key differs (an unequal but alike value?)"


def _describe_debug_info_change(old: CacheKey, new: CacheKey) -> list[str]:
    a, b = old.debug_info, new.debug_info
    if a is None or b is None:
        return [f"the debug info changed from {a!r} to {b!r}"]
    out = []
    for field in ("traced_for", "func_src_info", "arg_names", "result_paths"):
        va, vb = getattr(a, field), getattr(b, field)
        if callable(va) and callable(vb):
            continue  # pending thunks are alike
        if _differs(va, vb):
            out.append(f"the debug info's {field} changed from {_show(va)} to {_show(vb)}")
    return out


_describer: DescribeKeyDifference = describe_key_difference


def set_describe_key_difference(hook: DescribeKeyDifference | None) -> DescribeKeyDifference:
    """Install the explanation hook used by caches without their own
    (``None`` restores the default); returns the previous hook."""
    global _describer
    previous = _describer
    _describer = describe_key_difference if hook is None else hook
    return previous


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int
    maxsize: int | None


class _StrongRef:
    """Used in place of a weak reference for functions that cannot be weakly
    referenced (some builtins); such entries live until evicted."""

    __slots__ = ("_obj", "_hash")

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._hash = hash(obj)

    def __call__(self) -> Any:
        return self._obj

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StrongRef) and bool(self._obj == other._obj)


_FunRef: TypeAlias = "weakref.ref[Any] | _StrongRef"


class _FunSlot:
    """The cache's bookkeeping for one live user function."""

    __slots__ = ("ref", "keys")

    def __init__(self, ref: _FunRef) -> None:
        self.ref = ref
        self.keys: dict[CacheKey, None] = {}  # insertion order = age


class _Entry:
    __slots__ = ("value", "stores")

    def __init__(self, value: Any, stores: tuple[Store | None, ...]) -> None:
        self.value = value
        self.stores = stores


def _probe(f: Any) -> _FunRef:
    try:
        return weakref.ref(f)
    except TypeError:
        return _StrongRef(f)


_all_caches: weakref.WeakSet[CachedFunction[Any]] = weakref.WeakSet()


class CachedFunction(Generic[R]):
    """The memoized form of ``fn(wrapped_fun, *args)``; see :func:`cache`."""

    def __init__(self, fn: Callable[..., R], max_size: int | None,
                 context: Callable[[], Hashable] | None,
                 describe: DescribeKeyDifference | None) -> None:
        if max_size is not None and max_size < 1:
            raise ValueError(f"cache: max_size must be a positive int or None, got {max_size}")
        self._fn = fn
        self._max_size = max_size
        self._context = context
        self._describe = describe
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[_FunRef, CacheKey], _Entry] = OrderedDict()
        self._slots: dict[_FunRef, _FunSlot] = {}
        self._pending: list[_FunRef] = []  # collected functions to purge
        self._hits = 0
        self._misses = 0
        functools.update_wrapper(self, fn)
        _all_caches.add(self)

    # -- the call ---------------------------------------------------------------

    def __call__(self, fun: WrappedFun, *args: Any) -> R:
        if not isinstance(fun, WrappedFun):
            raise TypeError(f"{fun_name(self._fn)} (cached): the first argument must be a "
                            f"WrappedFun, got {type(fun).__name__}")
        context = self._context() if self._context is not None else None
        key = CacheKey(fun, args, context)
        try:
            probe = _probe(fun.f)
            hash(probe)
        except TypeError:
            raise TypeError(f"cache: the function {fun.f!r} is not hashable, so it cannot "
                            f"key the cache of {fun_name(self._fn)}") from None
        with self._lock:
            self._purge_pending()
            entry = self._entries.get((probe, key))
            if entry is not None:
                self._entries.move_to_end((probe, key))
                self._hits += 1
            else:
                self._misses += 1
        if entry is not None:
            fun.populate_stores(entry.stores)
            value: R = entry.value
            return value
        if _explain_misses:
            self._explain_miss(fun, probe, key)
        value = self._fn(fun, *args)
        with self._lock:
            self._insert(fun.f, probe, key, _Entry(value, fun.stores))
        return value

    # -- table maintenance (call with the lock held) ---------------------------------

    def _insert(self, f: Any, probe: _FunRef, key: CacheKey, entry: _Entry) -> None:
        slot = self._slots.get(probe)
        if slot is None:
            ref: _FunRef
            try:
                ref = weakref.ref(f, self._on_collected)
            except TypeError:
                ref = probe
            slot = _FunSlot(ref)
            self._slots[ref] = slot
        self._entries[(slot.ref, key)] = entry
        self._entries.move_to_end((slot.ref, key))
        slot.keys[key] = None
        while self._max_size is not None and len(self._entries) > self._max_size:
            (old_ref, old_key), _ = self._entries.popitem(last=False)
            old_slot = self._slots.get(old_ref)
            if old_slot is not None:
                old_slot.keys.pop(old_key, None)
                if not old_slot.keys:
                    del self._slots[old_ref]

    def _remove_function(self, ref: _FunRef) -> None:
        slot = self._slots.pop(ref, None)
        if slot is None:
            return
        for key in slot.keys:
            self._entries.pop((slot.ref, key), None)

    def _purge_pending(self) -> None:
        while self._pending:
            self._remove_function(self._pending.pop())

    def _on_collected(self, ref: weakref.ref[Any]) -> None:
        # Runs whenever the user function dies, possibly in another thread or
        # in the middle of one of our own table updates; purge now only if the
        # table is free, otherwise leave it to the next operation.
        if self._lock.acquire(blocking=False):
            try:
                self._remove_function(ref)
                self._purge_pending()
            finally:
                self._lock.release()
        else:
            self._pending.append(ref)

    # -- explaining misses -----------------------------------------------------------

    def _explain_miss(self, fun: WrappedFun, probe: _FunRef, key: CacheKey) -> None:
        dbg = fun.debug_info
        where = dbg.func_src_info if dbg is not None and dbg.func_src_info else fun.__name__
        with self._lock:
            slot = self._slots.get(probe)
            candidates = list(slot.keys) if slot is not None else []
        if not candidates:
            logger.warning("explain: cache miss for %s: never seen this function before "
                           "(or its entries were evicted), in %s", where, fun_name(self._fn))
            return
        closest = min(reversed(candidates), key=lambda old: _count_differences(old, key))
        describe = self._describe or _describer
        try:
            text = describe(fun, closest, key)
        except Exception as e:  # a faulty hook must not break caching
            text = f"(describe_key_difference failed: {e!r})"
        logger.warning("explain: cache miss for %s: %s", where, text)

    # -- management ------------------------------------------------------------

    def cache_clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()
            self._slots.clear()
            self._pending.clear()

    def cache_info(self) -> CacheInfo:
        """Hits, misses, current and maximum size."""
        with self._lock:
            self._purge_pending()
            return CacheInfo(self._hits, self._misses, len(self._entries), self._max_size)

    def evict_function(self, f: Callable[..., Any]) -> None:
        """Drop every entry of the user function ``f``."""
        with self._lock:
            self._remove_function(_probe(f))

    def set_max_size(self, max_size: int | None) -> None:
        """Change the bound (evicting the oldest entries if needed)."""
        if max_size is not None and max_size < 1:
            raise ValueError(f"cache: max_size must be a positive int or None, got {max_size}")
        with self._lock:
            self._max_size = max_size
            while max_size is not None and len(self._entries) > max_size:
                (old_ref, old_key), _ = self._entries.popitem(last=False)
                old_slot = self._slots.get(old_ref)
                if old_slot is not None:
                    old_slot.keys.pop(old_key, None)
                    if not old_slot.keys:
                        del self._slots[old_ref]

    def __repr__(self) -> str:
        return f"<cached {fun_name(self._fn)} {self.cache_info()}>"


def _count_differences(old: CacheKey, new: CacheKey) -> int:
    count = sum(_differs(getattr(old, p), getattr(new, p)) for p in CacheKey.PARTS if p != "args")
    if len(old.args) != len(new.args):
        return count + len(new.args) + 1
    return count + sum(_differs(a, b) for a, b in zip(old.args, new.args))


def cache(fn: Callable[..., R], max_size: int | None = 4096, *,
          context: Callable[[], Hashable] | None = None,
          describe_key_difference: DescribeKeyDifference | None = None) -> CachedFunction[R]:
    """Memoize ``fn(wrapped_fun, *args)`` (see the module docstring).

    Args:
      fn: takes a WrappedFun first, then hashable extra arguments.
      max_size: the LRU bound over all functions (``None``: unbounded).
      context: called on every lookup; its (hashable) result joins the key,
        e.g. the higher layers' configuration that affects tracing.
      describe_key_difference: this cache's explanation hook (overrides the
        module-wide one).
    """
    return CachedFunction(fn, max_size, context, describe_key_difference)


def clear_all_caches() -> None:
    """Empty every cache made by :func:`cache` (e.g. between tests)."""
    for cached in list(_all_caches):
        cached.cache_clear()
