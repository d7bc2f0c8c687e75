"""``no_execution``: JAX's ``jax_no_execution`` option.

While it is on, running any compiled program (a jitted function, an eager
operation, a pmap) is JAX's ``RuntimeError`` naming the program; tracing,
lowering and compiling still work (``jit(f).lower(x).compile()``,
``eval_shape``). The value is also a jaxlib config in the C++ jit path's cache
key, so programs cached in C++ before the option was set go back to Python,
which refuses them. Environment variable ``LAMINA_NO_EXECUTION`` gives the
initial value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lamina_interpreters_pxla._jaxlib import _jax

__all__ = ["check_execution_allowed", "execution_disallowed", "no_execution_scope",
           "set_no_execution"]

_IN_CPP_KEY: Any = _jax.config.Config(
    "lamina_no_execution",
    os.environ.get("LAMINA_NO_EXECUTION", "").strip().lower() in ("1", "true", "yes", "on"),
    include_in_jit_key=True)


class _State:
    """The value, as a plain attribute for the hot paths."""

    __slots__ = ("disallowed",)

    def __init__(self) -> None:
        self.disallowed = bool(_IN_CPP_KEY.value)


state = _State()


def execution_disallowed() -> bool:
    """True while ``no_execution`` is on."""
    return state.disallowed


def set_no_execution(value: Any) -> None:
    """Turns ``no_execution`` on or off for the whole process."""
    if not isinstance(value, (bool, int)):
        raise TypeError(f"no_execution: the value must be a bool, got "
                        f"{type(value).__name__}: {value!r}")
    state.disallowed = bool(value)
    _IN_CPP_KEY.set_global(state.disallowed)


@contextmanager
def no_execution_scope(value: bool = True) -> Iterator[None]:
    """``no_execution`` set for a block, restored on exit."""
    previous = state.disallowed
    set_no_execution(value)
    try:
        yield
    finally:
        set_no_execution(previous)


def check_execution_allowed(name: str) -> None:
    """Called before program ``name`` (``jit(f)``) runs: with ``no_execution``
    on, JAX's ``RuntimeError``."""
    if state.disallowed:
        raise RuntimeError(f"JAX tried to execute function {name}, but the no_execution "
                           "config option is set")
