"""Small API helpers: ``named_call`` and ``named_scope``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from lamina_tracing_core.source_info import extend_name_stack

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def named_scope(name: str) -> Iterator[None]:
    """Equations traced inside get ``name`` in their name stack (``jit(f)/name/mul``)."""
    if not isinstance(name, str):
        raise TypeError(f"named_scope: name must be a str, got {name!r}")
    with extend_name_stack(name):
        yield


def named_call(fun: F, *, name: str | None = None) -> F:
    """Wraps ``fun`` so its equations carry ``name`` (default: the function's name)."""
    scope = name if name is not None else getattr(fun, "__name__", "named_call")

    @functools.wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        with extend_name_stack(scope):
            return fun(*args, **kwargs)

    return named  # type: ignore[return-value]
