"""jit's settings: ``disable_jit``.

``config.disable_jit`` (environment variable ``LAMINA_DISABLE_JIT``) makes
every ``jit``-decorated function run its Python body op by op instead of
compiling it, which is handy with a debugger or ``print``. It can be set for
the whole process (``config.update('disable_jit', True)``, also reachable as
``lamina.config.update('jax_disable_jit', True)``) or for a block::

    with disable_jit():
        f(x)          # f's body runs eagerly

The block form is per thread and nests; it wins over the process-wide value.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["JitConfig", "config", "disable_jit", "jit_disabled"]

_TRUTHY = frozenset({"1", "true", "yes", "on"})


class _Local(threading.local):
    def __init__(self) -> None:
        self.disable_jit: bool | None = None  # None: use the process-wide value


class JitConfig:
    """The settings of this layer; one process-wide instance, :data:`config`."""

    def __init__(self) -> None:
        self._global_disable_jit = (
            os.environ.get("LAMINA_DISABLE_JIT", "").strip().lower() in _TRUTHY)
        self._local = _Local()

    @property
    def disable_jit(self) -> bool:
        """True while jitted functions run eagerly (thread value, else global)."""
        local = self._local.disable_jit
        return self._global_disable_jit if local is None else local

    def update(self, name: str, value: Any) -> None:
        """Sets a setting for the whole process; only ``disable_jit`` exists."""
        if name != "disable_jit":
            raise AttributeError(f"lamina_sharded_jit.config: unknown setting {name!r}; "
                                 "known: ['disable_jit']")
        if not isinstance(value, (bool, int)):
            raise TypeError(f"config.update('disable_jit', ...) takes a bool, got "
                            f"{type(value).__name__}: {value!r}")
        self._global_disable_jit = bool(value)

    def __repr__(self) -> str:
        return f"JitConfig(disable_jit={self.disable_jit})"


config = JitConfig()


def jit_disabled() -> bool:
    """``config.disable_jit`` (a function, for the hot path)."""
    local = config._local.disable_jit
    return config._global_disable_jit if local is None else local


@contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions run their Python body eagerly
    (``disable=False`` re-enables jit inside an outer ``disable_jit()``)."""
    state = config._local
    previous = state.disable_jit
    state.disable_jit = bool(disable)
    try:
        yield
    finally:
        state.disable_jit = previous
