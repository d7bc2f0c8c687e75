"""The thread guard: multi-process operations from one thread only.

Processes of a multi-process program must launch their collective programs
in the same order; a program launched from another thread can reorder them,
and the processes then wait on each other forever. Inside
``with thread_guard(True):`` jaxlib records the entering thread and refuses
(``JaxRuntimeError``, naming both threads) any multi-process operation a
different thread starts, and refuses a second guard entered in another thread
meanwhile. As in JAX, the setting acts through this context manager, per
thread; ``config.update("jax_thread_guard", ...)`` only changes what
``config.jax_thread_guard`` reads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from lamina_interpreters_pxla.guard_levels import guard_lib

__all__ = ["current", "set_global", "thread_guard"]

_global = [False]
_local = threading.local()


def current() -> bool:
    """This thread's setting: the innermost ``thread_guard`` block's, else the global one."""
    stack: list[bool] = getattr(_local, "stack", [])
    return stack[-1] if stack else _global[0]


def set_global(value: bool) -> None:
    _global[0] = bool(value)


@contextlib.contextmanager
def thread_guard(enabled: bool | None) -> Iterator[None]:
    """Guards multi-process operations to this thread inside the ``with`` block
    (``None`` or ``False``: no guard); the previous setting comes back after it."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    stack: list[bool] = _local.stack
    guard_lib.update_thread_guard_global_state(bool(enabled))  # refuses a second thread's
    stack.append(bool(enabled))
    try:
        yield
    finally:
        stack.pop()
        guard_lib.update_thread_guard_global_state(stack[-1] if stack else False)
