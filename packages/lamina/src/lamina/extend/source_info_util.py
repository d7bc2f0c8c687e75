"""``lamina.extend.source_info_util``: the source line and name path of the
equations being traced (JAX's ``jax.extend.source_info_util``).

Every equation lamina records carries a ``SourceInfo``: the user's frame
(file, line, function; frames inside lamina and inside paths given to
:func:`register_exclusion` are skipped) and a ``NameStack`` (the
``jit(f)/jvp(g)/scope`` path). Lowering turns both into the MLIR location of
the equation's operations. These are tracing-core's objects.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lamina_tracing_core import source_info as _si
from lamina_tracing_core.source_info import Frame as Frame
from lamina_tracing_core.source_info import NameStack as NameStack
from lamina_tracing_core.source_info import SourceInfo as SourceInfo
from lamina_tracing_core.source_info import current_name_stack as current_name_stack
from lamina_tracing_core.source_info import extend_name_stack as extend_name_stack
from lamina_tracing_core.source_info import reset_name_stack as reset_name_stack

__all__ = [
    "Frame", "NameStack", "SourceInfo", "current", "current_name_stack", "extend_name_stack",
    "new_name_stack", "new_source_info", "register_exclusion", "reset_name_stack",
    "set_name_stack", "summarize", "transform_name_stack", "user_context",
]


def current() -> SourceInfo:
    """The source info an equation recorded now would get."""
    return _si.current_source_info()


def new_name_stack(name: str = "") -> NameStack:
    """A name stack holding ``name`` (empty for ``''``)."""
    return NameStack((name,)) if name else NameStack()


def new_source_info() -> SourceInfo:
    """A source info with no frame and an empty name stack."""
    return SourceInfo(None)


def register_exclusion(path: str) -> None:
    """Frames from files under ``path`` (a file or a directory) are not the
    user's: equations traced from them take the line of their caller."""
    _si.register_internal_directory(path)


def summarize(source_info: SourceInfo) -> str:
    """``file.py:12 (f)``, or ``<unknown>`` without a frame."""
    return str(source_info)


@contextmanager
def set_name_stack(name_stack: NameStack) -> Iterator[None]:
    """Equations traced in the block get ``name_stack`` as their path."""
    previous = _si.set_name_stack(name_stack)
    try:
        yield
    finally:
        _si.set_name_stack(previous)


@contextmanager
def transform_name_stack(name: str) -> Iterator[NameStack]:
    """Equations traced in the block get ``name`` appended to their path
    (JAX marks a transformation this way; lamina's own transformations name
    the function too, as ``jvp(f)``)."""
    with extend_name_stack(name) as stack:
        yield stack


@contextmanager
def user_context(c: SourceInfo | Frame | None, *,
                 name_stack: NameStack | None = None) -> Iterator[None]:
    """Equations traced in the block are attributed to ``c``'s user line (a
    ``SourceInfo`` or ``Frame``; ``None`` keeps the current one) and, if
    given, to ``name_stack``: a rule that traces on a user's behalf (a
    ``lower_fun`` body, a derivative rule) keeps the user's line this way."""
    frame = c.frame if isinstance(c, SourceInfo) else c
    previous_frame = _si.set_frame_override(frame) if c is not None else None
    previous_stack = _si.set_name_stack(name_stack) if name_stack is not None else None
    try:
        yield
    finally:
        if c is not None:
            _si.set_frame_override(previous_frame)
        if previous_stack is not None:
            _si.set_name_stack(previous_stack)
