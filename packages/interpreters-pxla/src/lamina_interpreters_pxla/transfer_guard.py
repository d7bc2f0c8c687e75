"""Transfer guards: refusing (or logging) transfers a program did not ask for.

A transfer is *implicit* when lamina moves data on its own (a NumPy array
passed to a jitted function or to a ``lamina.numpy`` function is sent to the
device; an array committed to one device used where another is expected)
and *explicit* when the user asked for it (``device_put``, ``device_get``).
Each direction -- ``host_to_device``, ``device_to_host``,
``device_to_device`` -- has a level:

===================  =====================  =====================
level                implicit transfers     explicit transfers
===================  =====================  =====================
``allow``            allowed                allowed
``log``              logged                 allowed
``disallow``         raise                  allowed
``log_explicit``     logged                 logged
``disallow_explicit``  raise                raise
===================  =====================  =====================

The guard itself is jaxlib's (``guard_lib``): its C++ checks every transfer
it makes (``batched_device_put``, cross-device copies, the jit fast path,
copies to NumPy) against the thread's level, falling back to the process's.
A refused transfer raises jaxlib's ``JaxRuntimeError`` ("Disallowed
host-to-device transfer: ..."), as in JAX. As in JAX, CPU arrays are read by
NumPy without a copy, so ``device_to_host`` never fires on the CPU backend.

This module sets those levels: :func:`set_global_level` (what
``config.update("jax_transfer_guard_host_to_device", ...)`` does), the
thread-local context managers :func:`transfer_guard` and its per-direction
forms, and the scopes that mark ``device_put``/``device_get`` as explicit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lamina_interpreters_pxla.guard_levels import GuardSetting, guard_lib

#: the directions a level is set for
DIRECTIONS: tuple[str, ...] = ("host_to_device", "device_to_device", "device_to_host")

_LEVEL_ENUMS = {
    "allow": guard_lib.TransferGuardLevel.ALLOW,
    "log": guard_lib.TransferGuardLevel.LOG,
    "disallow": guard_lib.TransferGuardLevel.DISALLOW,
    "log_explicit": guard_lib.TransferGuardLevel.LOG_EXPLICIT,
    "disallow_explicit": guard_lib.TransferGuardLevel.DISALLOW_EXPLICIT,
}
_GUARDS = {direction: GuardSetting(direction, _LEVEL_ENUMS) for direction in DIRECTIONS}

#: the levels, in JAX's order
LEVELS: tuple[str, ...] = tuple(_LEVEL_ENUMS)

check_level = _GUARDS["host_to_device"].check_level  # the same levels in every direction


def _guard(direction: str) -> GuardSetting:
    guard = _GUARDS.get(direction)
    if guard is None:
        raise ValueError(f"transfer guard: unknown direction {direction!r}; "
                         f"expected one of {list(DIRECTIONS)}")
    return guard


def global_level(direction: str) -> str | None:
    """The process-wide level for ``direction`` (None: jaxlib's default, allow)."""
    return _guard(direction).global_level()


def set_global_level(direction: str, level: str | None) -> None:
    """Sets the process-wide level for ``direction``; None restores the default."""
    _guard(direction).set_global_level(level)


def current_level(direction: str) -> str | None:
    """The level in force for ``direction`` on this thread: the innermost
    context manager's, else the process-wide one."""
    return _guard(direction).current_level()


def direction_guard(direction: str, level: str | None) -> contextlib.AbstractContextManager[None]:
    """Sets this thread's level for ``direction`` inside the ``with`` block."""
    return _guard(direction).scope(level)


@contextlib.contextmanager
def transfer_guard(level: str | None) -> Iterator[None]:
    """Sets this thread's level for every direction inside the ``with`` block."""
    check_level(level)
    with contextlib.ExitStack() as stack:
        for direction in DIRECTIONS:
            stack.enter_context(direction_guard(direction, level))
        yield


def transfer_guard_host_to_device(level: str | None) -> contextlib.AbstractContextManager[None]:
    """Sets this thread's host-to-device level inside the ``with`` block."""
    return direction_guard("host_to_device", level)


def transfer_guard_device_to_device(level: str | None) -> contextlib.AbstractContextManager[None]:
    """Sets this thread's device-to-device level inside the ``with`` block."""
    return direction_guard("device_to_device", level)


def transfer_guard_device_to_host(level: str | None) -> contextlib.AbstractContextManager[None]:
    """Sets this thread's device-to-host level inside the ``with`` block."""
    return direction_guard("device_to_host", level)


class _Explicit:
    """Sets one of jaxlib's per-thread "explicit transfer" flags inside a ``with``
    block (a class, not a generator: ``device_put`` enters one on every call)."""

    __slots__ = ("_flag", "_state", "_previous")

    def __init__(self, flag: str) -> None:
        self._flag = flag

    def __enter__(self) -> None:
        self._state = guard_lib.thread_local_state()
        self._previous = getattr(self._state, self._flag)
        setattr(self._state, self._flag, True)

    def __exit__(self, *exc: object) -> None:
        setattr(self._state, self._flag, self._previous)


def explicit_device_put() -> contextlib.AbstractContextManager[None]:
    """Marks the transfers made inside as asked for by ``device_put``."""
    return _Explicit("explicit_device_put")


def explicit_device_get() -> contextlib.AbstractContextManager[None]:
    """Marks the transfers made inside as asked for by ``device_get``."""
    return _Explicit("explicit_device_get")
