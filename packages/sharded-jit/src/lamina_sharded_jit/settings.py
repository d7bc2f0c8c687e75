"""jit's settings: ``disable_jit`` and the persistent trace cache's switches.

``config.disable_jit`` (environment variable ``LAMINA_DISABLE_JIT``) makes
every ``jit``-decorated function run its Python body op by op instead of
compiling it, which is handy with a debugger or ``print``. It can be set for
the whole process (``config.update('disable_jit', True)``, also reachable as
``lamina.config.update('jax_disable_jit', True)``) or for a block::

    with disable_jit():
        f(x)          # f's body runs eagerly

The block form is per thread and nests; it wins over the process-wide value.

``persistent_trace_cache`` (``LAMINA_PERSISTENT_TRACE_CACHE``, default off)
stores traced and lowered programs beside the persistent compilation cache
(see :mod:`lamina_sharded_jit.persistent_trace`); ``jit(f, cache_trace=...)``
decides per function. ``persistent_trace_cache_verify``
(``LAMINA_PERSISTENT_TRACE_CACHE_VERIFY``) traces anyway on a hit and warns
when the stored program differs from the fresh one.

``use_shardy_partitioner`` (``LAMINA_USE_SHARDY_PARTITIONER``, default on)
chooses how programs over several devices are annotated and partitioned:
Shardy (``sdy.mesh``, ``sdy.sharding``, ``sdy.manual_computation``) or, off,
GSPMD (``mhlo.sharding`` strings and the ``SPMDFullToShardShape`` /
``SPMDShardToFullShape`` custom calls). Programs lowered afterwards use it.

``no_tracing`` (``LAMINA_NO_TRACING``, default off; JAX's ``jax_no_tracing``)
makes a call that would trace a function for ``jit`` (a cache miss) a
``RuntimeError`` naming the function; calls whose trace is cached still run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lamina_interpreters_pxla._jaxlib import _jax

__all__ = ["JitConfig", "check_tracing_allowed", "config", "disable_jit", "jit_disabled",
           "sharding_format"]

_TRUTHY = frozenset({"1", "true", "yes", "on"})

def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUTHY


#: The value lives in a jaxlib config (process-wide value, per-thread
#: override) that is part of the C++ jit path's cache key, so turning
#: disable_jit on sends every cached call back to Python, which then runs the
#: body eagerly.
_DISABLE_JIT: Any = _jax.config.Config(
    "lamina_disable_jit",
    os.environ.get("LAMINA_DISABLE_JIT", "").strip().lower() in _TRUTHY,
    include_in_jit_key=True)


class JitConfig:
    """The settings of this layer; one process-wide instance, :data:`config`."""

    def __init__(self) -> None:
        self.persistent_trace_cache = _env_flag("LAMINA_PERSISTENT_TRACE_CACHE")
        self.persistent_trace_cache_verify = _env_flag("LAMINA_PERSISTENT_TRACE_CACHE_VERIFY")
        self.use_shardy_partitioner = os.environ.get(
            "LAMINA_USE_SHARDY_PARTITIONER", "1").strip().lower() in _TRUTHY
        self.no_tracing = _env_flag("LAMINA_NO_TRACING")

    @property
    def disable_jit(self) -> bool:
        """True while jitted functions run eagerly (thread value, else global)."""
        return bool(_DISABLE_JIT.value)

    def update(self, name: str, value: Any) -> None:
        """Sets a setting for the whole process."""
        if name not in _NAMES:
            raise AttributeError(f"lamina_sharded_jit.config: unknown setting {name!r}; "
                                 f"known: {list(_NAMES)}")
        if not isinstance(value, (bool, int)):
            raise TypeError(f"config.update({name!r}, ...) takes a bool, got "
                            f"{type(value).__name__}: {value!r}")
        if name == "disable_jit":
            _DISABLE_JIT.set_global(bool(value))
        else:
            setattr(self, name, bool(value))

    def __repr__(self) -> str:
        return f"JitConfig(disable_jit={self.disable_jit})"


_NAMES = ("disable_jit", "persistent_trace_cache", "persistent_trace_cache_verify",
          "use_shardy_partitioner", "no_tracing")
config = JitConfig()


def sharding_format() -> str:
    """The lowering's sharding format for new programs: ``'shardy'`` or ``'gspmd'``."""
    return "shardy" if config.use_shardy_partitioner else "gspmd"


def jit_disabled() -> bool:
    """``config.disable_jit`` (a function, for the hot path)."""
    return bool(_DISABLE_JIT.value)


@contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Within the block, jitted functions run their Python body eagerly
    (``disable=False`` re-enables jit inside an outer ``disable_jit()``)."""
    previous = _DISABLE_JIT.swap_local(bool(disable))
    try:
        yield
    finally:
        _DISABLE_JIT.set_local(previous)


def check_tracing_allowed(fun_sourceinfo: str | None) -> None:
    """Called before jit traces a function: with ``no_tracing`` on, JAX's
    ``RuntimeError`` naming the function (``"<name> at <file>:<line>"``)."""
    if config.no_tracing:
        raise RuntimeError(f"re-tracing function {fun_sourceinfo} for `jit`, but 'no_tracing' "
                           "is set")
