"""Where an equation came from: the user's frame and the name stack."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

#: Files under these directories are lamina's own, never "the user's line".
_internal_dirs: list[str] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


def register_internal_directory(path: str) -> None:
    """Each lamina package registers its source directory, so frames from it
    are skipped when looking for the user's line."""
    path = os.path.abspath(path)
    if path not in _internal_dirs:
        _internal_dirs.append(path)
        _internal_file_cache.clear()


class Frame:
    """A user source line: file, line, function (an immutable value)."""

    __slots__ = ("file_name", "line", "function_name", "column")

    def __init__(self, file_name: str, line: int, function_name: str, column: int = 0):
        self.file_name = file_name
        self.line = line
        self.function_name = function_name
        self.column = column

    def _key(self) -> tuple[str, int, str, int]:
        return (self.file_name, self.line, self.function_name, self.column)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frame) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Frame(file_name={self.file_name!r}, line={self.line}, "
                f"function_name={self.function_name!r})")


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


class SourceInfo:
    """The user frame and name stack of one equation (an immutable value)."""

    __slots__ = ("frame", "name_stack")

    def __init__(self, frame: Frame | None, name_stack: NameStack | None = None):
        self.frame = frame
        self.name_stack = _EMPTY_NAME_STACK if name_stack is None else name_stack

    def replace_name_stack(self, name_stack: NameStack) -> SourceInfo:
        return SourceInfo(self.frame, name_stack)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SourceInfo) and self.frame == other.frame
                and self.name_stack == other.name_stack)

    def __hash__(self) -> int:
        return hash((self.frame, self.name_stack))

    def __repr__(self) -> str:
        return f"SourceInfo({self.frame!r}, {self.name_stack!r})"

    def __str__(self) -> str:
        if self.frame is None:
            return "<unknown>"
        return f"{self.frame.file_name}:{self.frame.line} ({self.frame.function_name})"


_EMPTY_NAME_STACK = NameStack()


class _NameStackState(threading.local):
    def __init__(self) -> None:
        self.name_stack = NameStack()
        # While a jaxpr is re-traced (eval_jaxpr), the equation being replayed
        # provides the user frame: the line that wrote it originally.
        self.frame_override: Frame | None = None


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
    frame: Any = sys._getframe(1)
    cache = _internal_file_cache
    while frame is not None:
        code = frame.f_code
        file_name = code.co_filename
        internal = cache.get(file_name)
        if internal is None:
            internal = _is_internal(file_name)
        if not internal:
            return Frame(file_name, frame.f_lineno, code.co_name)
        frame = frame.f_back
    return None


def current_source_info() -> SourceInfo:
    """The source info a new equation gets: the user's frame (or, while a jaxpr
    is replayed, the frame of the equation being replayed) and the name stack."""
    override = _state.frame_override
    if override is not None:
        return SourceInfo(override, _state.name_stack)
    return SourceInfo(user_frame(), _state.name_stack)


def set_frame_override(frame: Frame | None) -> Frame | None:
    """Sets the frame new equations get (``None`` to walk the stack again);
    returns the previous one so the caller can restore it."""
    previous = _state.frame_override
    _state.frame_override = frame
    return previous


def set_name_stack(stack: NameStack) -> NameStack:
    """Sets the current name stack; returns the previous one."""
    previous = _state.name_stack
    _state.name_stack = stack
    return previous
