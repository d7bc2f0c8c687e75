"""Where an equation came from: the user's frame and the name stack."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Files under these directories are lamina's own, never "the user's line".
_internal_dirs: list[str] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


def register_internal_directory(path: str) -> None:
    """Each lamina package registers its source directory, so frames from it
    are skipped when looking for the user's line."""
    path = os.path.abspath(path)
    if path not in _internal_dirs:
        _internal_dirs.append(path)
        _internal_file_cache.clear()


@dataclass(frozen=True)
class Frame:
    file_name: str
    line: int
    function_name: str
    column: int = 0


@dataclass(frozen=True)
class NameStack:
    """The ``jit(f)/jvp(g)/mul``-style path of transformations and scopes."""

    stack: tuple[str, ...] = ()

    def extend(self, name: str) -> NameStack:
        return NameStack(self.stack + (name,))

    def wrap(self, transform: str) -> NameStack:
        """Records that everything below happened under ``transform`` (``jvp``)."""
        if not self.stack:
            return self
        return NameStack((f"{transform}({self.stack[0]})",) + self.stack[1:])

    def __str__(self) -> str:
        return "/".join(self.stack)


@dataclass(frozen=True)
class SourceInfo:
    """The user frame and name stack of one equation."""

    frame: Frame | None
    name_stack: NameStack = field(default_factory=NameStack)

    def replace_name_stack(self, name_stack: NameStack) -> SourceInfo:
        return SourceInfo(self.frame, name_stack)

    def __str__(self) -> str:
        if self.frame is None:
            return "<unknown>"
        return f"{self.frame.file_name}:{self.frame.line} ({self.frame.function_name})"


class _NameStackState(threading.local):
    def __init__(self) -> None:
        self.name_stack = NameStack()


_state = _NameStackState()


def current_name_stack() -> NameStack:
    return _state.name_stack


@contextmanager
def extend_name_stack(name: str) -> Iterator[NameStack]:
    """``with extend_name_stack('jit(f)')``: equations traced inside get it."""
    previous = _state.name_stack
    _state.name_stack = previous.extend(name)
    try:
        yield _state.name_stack
    finally:
        _state.name_stack = previous


@contextmanager
def reset_name_stack(stack: NameStack | None = None) -> Iterator[None]:
    previous = _state.name_stack
    _state.name_stack = stack if stack is not None else NameStack()
    try:
        yield
    finally:
        _state.name_stack = previous


_internal_file_cache: dict[str, bool] = {}


def _is_internal(file_name: str) -> bool:
    known = _internal_file_cache.get(file_name)
    if known is None:
        known = any(file_name.startswith(d) for d in _internal_dirs)
        _internal_file_cache[file_name] = known
    return known


def user_frame() -> Frame | None:
    """The innermost frame on the Python stack that is not lamina's own code."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code.co_filename):
            return Frame(code.co_filename, frame.f_lineno, code.co_name)
        frame = frame.f_back  # type: ignore[assignment]
    return None


def current_source_info() -> SourceInfo:
    return SourceInfo(user_frame(), _state.name_stack)
