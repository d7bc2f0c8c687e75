"""The array garbage-collection guard: flagging arrays freed by the cycle collector.

An array caught in a reference cycle keeps its device memory until Python's
garbage collector runs, long after the program stopped using it. jaxlib's
guard (``guard_lib``) checks every array the collector frees, at a level:
``allow`` (nothing), ``log`` (logs an error with the array's creation
traceback) or ``fatal`` (aborts the process). The level is process-wide
(:func:`set_global_level`, what ``config.update(
"jax_array_garbage_collection_guard", ...)`` does) or per thread inside
:func:`array_garbage_collection_guard`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from lamina_interpreters_pxla._jaxlib import _jax

_guard_lib: Any = _jax.guard_lib

#: the levels, in JAX's order
LEVELS: tuple[str, ...] = ("allow", "log", "fatal")

_LEVEL_ENUMS: dict[str, Any] = {
    "allow": _guard_lib.GarbageCollectionGuardLevel.ALLOW,
    "log": _guard_lib.GarbageCollectionGuardLevel.LOG,
    "fatal": _guard_lib.GarbageCollectionGuardLevel.FATAL,
}
_LEVEL_NAMES: dict[Any, str] = {enum: name for name, enum in _LEVEL_ENUMS.items()}
_FIELD = "garbage_collect_array"


def check_level(level: Any) -> str | None:
    """``level`` if it is one of :data:`LEVELS` or None; else ``ValueError``
    (JAX's wording)."""
    if level is None or (isinstance(level, str) and level in _LEVEL_ENUMS):
        return level
    raise ValueError(f"new enum value must be None or in {list(LEVELS)}, "
                     f"got {level} of type {type(level)}.")


def _to_enum(level: str | None) -> Any:
    return None if level is None else _LEVEL_ENUMS[level]


def _to_name(enum: Any) -> str | None:
    return None if enum is None else _LEVEL_NAMES[enum]


def global_level() -> str | None:
    """The process-wide level (None: jaxlib's default, allow)."""
    return _to_name(getattr(_guard_lib.global_state(), _FIELD))


def set_global_level(level: str | None) -> None:
    """Sets the process-wide level; None restores the default."""
    setattr(_guard_lib.global_state(), _FIELD, _to_enum(check_level(level)))


def current_level() -> str | None:
    """This thread's level: the innermost context manager's, else the process's."""
    local = getattr(_guard_lib.thread_local_state(), _FIELD)
    return _to_name(local) if local is not None else global_level()


@contextlib.contextmanager
def array_garbage_collection_guard(level: str | None) -> Iterator[None]:
    """Sets this thread's level inside the ``with`` block."""
    enum = _to_enum(check_level(level))
    state = _guard_lib.thread_local_state()
    previous = getattr(state, _FIELD)
    setattr(state, _FIELD, enum)
    try:
        yield
    finally:
        setattr(state, _FIELD, previous)
