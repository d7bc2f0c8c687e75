"""``jax._src.traceback_util`` under the alias: which frames a library hides.

JAX trims its own and registered libraries' frames from the tracebacks of
errors raised through its API. lamina does not rewrite tracebacks: errors
carry every frame. What libraries rely on is kept: ``register_exclusion``
records a path, ``include_frame(frame)`` says whether a frame's file is
outside every recorded path (equinox filters its own error messages with it),
and ``api_boundary`` marks a function as an API entry point, returning it
unchanged (there is no trimming to delimit).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TypeVar

__all__ = ["api_boundary", "include_frame", "register_exclusion"]

F = TypeVar("F", bound=Callable[..., object])

#: The recorded paths (a list, as in JAX: libraries add and remove entries).
_exclude_paths: list[str] = []


def register_exclusion(path: str) -> None:
    """Records ``path`` (a file or a directory) as a library's own."""
    if path not in _exclude_paths:
        _exclude_paths.append(path)


def include_frame(f: types.FrameType) -> bool:
    """Whether frame ``f`` is the user's: its file is under no recorded path."""
    return not any(f.f_code.co_filename.startswith(p) for p in _exclude_paths)


def api_boundary(fun: F) -> F:
    """Marks ``fun`` as an API entry point; returns it unchanged (lamina keeps
    every frame of a traceback, so there is nothing to trim at the boundary)."""
    return fun
