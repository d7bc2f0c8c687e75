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

from lamina_interpreters_pxla.guard_levels import GuardSetting, guard_lib

_GUARD = GuardSetting("garbage_collect_array", {
    "allow": guard_lib.GarbageCollectionGuardLevel.ALLOW,
    "log": guard_lib.GarbageCollectionGuardLevel.LOG,
    "fatal": guard_lib.GarbageCollectionGuardLevel.FATAL,
})

#: the levels, in JAX's order
LEVELS: tuple[str, ...] = _GUARD.levels

check_level = _GUARD.check_level
global_level = _GUARD.global_level
set_global_level = _GUARD.set_global_level
current_level = _GUARD.current_level


def array_garbage_collection_guard(level: str | None) -> contextlib.AbstractContextManager[None]:
    """Sets this thread's level inside the ``with`` block."""
    return _GUARD.scope(level)
