"""Where an equation came from: the user's frame and the name stack.

The name stack is the ``/``-separated path of scopes an equation was traced
under, relative to the jaxpr that holds it: named scopes (``named_scope``,
``named_call``) and transformations, written ``transform(function name)``:
``jvp(f)`` for the forward pass of ``grad(f)``/``jvp(f)``/``linearize(f)``,
``transpose(jvp(f))`` for its backward pass (``transpose`` wraps the first
element of the transposed equation's stack), ``vmap(f)`` under ``vmap``.
Every new jaxpr (``trace_to_jaxpr_dynamic``: ``make_jaxpr``, ``jit``, control
flow bodies, ``checkpoint``) starts from an empty stack, so the equations of
an inner jaxpr carry only what happened inside it; the lowering prefixes the
path of the enclosing equations (``jit(f)/jvp(f)/cond/branch_0_fun/sin``).

The user frame is captured raw at trace time: its code object and bytecode
offset (``f_lasti``), plus, while ``include_full_tracebacks_in_locations`` is
on, the same pair for each enclosing user frame (innermost first, at most
``TRACEBACK_IN_LOCATIONS_LIMIT`` frames). Columns and call-site chains are
computed from them only when a location is built (``frame_position``).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import lamina_linear_util

#: Files under these directories are library code, never "the user's line".
#: (Modules of the packages ``lamina``, ``lamina_*`` and ``jaxlib`` are
#: recognized by name too, so every layer is skipped without registering.)
_internal_dirs: list[str] = [
    os.path.dirname(os.path.abspath(f)) + os.sep for f in (__file__, lamina_linear_util.__file__)]


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


#: Whether locations carry the chain of enclosing user frames
#: (``callsite("g"(...) at "f"(...))``) and column ranges; off, an op's
#: location is its innermost user line and start column, which XLA turns into
#: ``source_file``/``source_line`` metadata. ``LAMINA_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS``
#: gives the initial value.
_full_tracebacks: bool = _env_flag("LAMINA_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", False)

#: At most this many user frames are recorded per equation.
TRACEBACK_IN_LOCATIONS_LIMIT = 10


def include_full_tracebacks_in_locations() -> bool:
    return _full_tracebacks


def set_include_full_tracebacks_in_locations(on: bool) -> None:
    """Equations traced afterwards record their enclosing user frames, and
    lowerings afterwards emit call-site chains."""
    global _full_tracebacks
    _full_tracebacks = bool(on)


def register_internal_directory(path: str) -> None:
    """Each lamina package registers its source directory, so frames from it
    are skipped when looking for the user's line."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        path += os.sep
    if path not in _internal_dirs:
        _internal_dirs.append(path)
        _internal_file_cache.clear()


#: A raw frame: its code object and bytecode offset.
RawFrame = tuple[Any, int]


class Frame:
    """A user source line: file, line, function (an immutable value).

    A frame captured while tracing also holds its raw form: ``code`` and
    ``lasti`` (its column range is derived from them on demand, see
    ``frame_position``) and ``callers``, the raw enclosing user frames,
    innermost first (empty unless full tracebacks were on)."""

    __slots__ = ("file_name", "line", "function_name", "column", "code", "lasti", "callers")

    def __init__(self, file_name: str, line: int, function_name: str, column: int = 0,
                 code: Any = None, lasti: int = -1, callers: tuple[RawFrame, ...] = ()):
        self.file_name = file_name
        self.line = line
        self.function_name = function_name
        self.column = column
        self.code = code
        self.lasti = lasti
        self.callers = callers

    def _key(self) -> tuple[Any, ...]:
        return (self.file_name, self.line, self.function_name, self.column, self.lasti,
                self.callers)

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
        """Records that everything below happened under ``transform``:
        ``jvp(f)/scope`` becomes ``transpose(jvp(f))/scope``. An empty stack
        stays empty (an equation of an inner jaxpr: the enclosing equation
        carries the transformation)."""
        if not self.stack:
            return self
        return NameStack((f"{transform}({self.stack[0]})",) + self.stack[1:])

    def __str__(self) -> str:
        return "/".join(self.stack)


class SourceInfo:
    """The user frame and name stack of one equation (an immutable value)."""

    __slots__ = ("frame", "name_stack", "_hash")

    def __init__(self, frame: Frame | None, name_stack: NameStack | None = None):
        self.frame = frame
        self.name_stack = _EMPTY_NAME_STACK if name_stack is None else name_stack
        self._hash: int | None = None

    def replace_name_stack(self, name_stack: NameStack) -> SourceInfo:
        return SourceInfo(self.frame, name_stack)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, SourceInfo) and self.frame == other.frame
                                 and self.name_stack == other.name_stack)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self.frame, self.name_stack))
        return h

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


#: lamina modules that are user code (examples): their lines are reported.
_user_modules: set[str] = {"lamina.demo", "__main__"}


def _is_lamina_module(module_name: object) -> bool:
    if not isinstance(module_name, str) or module_name in _user_modules:
        return False
    top = module_name.partition(".")[0]
    return top in ("lamina", "jaxlib") or top.startswith("lamina_")


def _is_internal(file_name: str, module_name: object = None) -> bool:
    known = _internal_file_cache.get(file_name)
    if known is None:
        known = (any(file_name.startswith(d) for d in _internal_dirs)
                 or _is_lamina_module(module_name))
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
            internal = _is_internal(file_name, frame.f_globals.get("__name__"))
        if not internal:
            return Frame(file_name, frame.f_lineno, code.co_name, 0, code, frame.f_lasti)
        frame = frame.f_back
    return None


def _user_callers(frame: Any) -> tuple[RawFrame, ...]:
    """The raw user frames enclosing ``frame`` (innermost first, limited)."""
    out: list[RawFrame] = []
    cache = _internal_file_cache
    limit = TRACEBACK_IN_LOCATIONS_LIMIT - 1
    frame = frame.f_back
    while frame is not None and len(out) < limit:
        code = frame.f_code
        internal = cache.get(code.co_filename)
        if internal is None:
            internal = _is_internal(code.co_filename, frame.f_globals.get("__name__"))
        if not internal:
            out.append((code, frame.f_lasti))
        frame = frame.f_back
    return tuple(out)


#: id(code object) -> (the code object, its positions, one per code unit).
_positions: dict[int, tuple[Any, list[tuple[int | None, int | None, int | None, int | None]]]] = {}


def raw_frame_position(code: Any, lasti: int, line: int = 0) -> tuple[int, int, int, int]:
    """``(line, end_line, column, end_column)`` of the instruction at ``lasti``
    in ``code`` (columns 0-based, the end exclusive), from the code object's
    position table; missing parts fall back to ``line`` and column 0."""
    known = _positions.get(id(code))
    if known is None or known[0] is not code:
        known = _positions[id(code)] = (code, list(code.co_positions()))
    table = known[1]
    index = lasti // 2
    if 0 <= index < len(table):
        start, end, col, end_col = table[index]
    else:
        start = end = col = end_col = None
    start = line if start is None else start
    end = start if end is None else end
    col = 0 if col is None else col
    end_col = col if end_col is None else end_col
    return start, end, col, end_col


def frame_position(frame: Frame) -> tuple[int, int, int, int]:
    """``(line, end_line, column, end_column)`` of a frame: from its code
    object when captured while tracing, else its line and column."""
    if frame.code is None or frame.lasti < 0:
        return frame.line, frame.line, frame.column, frame.column
    return raw_frame_position(frame.code, frame.lasti, frame.line)


#: (id of a code object, bytecode offset) -> (the code object, name stack,
#: SourceInfo): the SourceInfo last made for that call site under that name
#: stack (every equation of one call site shares it; holding the code object
#: keeps its id unique while the entry lives).
_source_infos: dict[tuple[int, int], tuple[Any, NameStack, SourceInfo]] = {}
#: The same, with full tracebacks on: the entry also holds the enclosing user
#: frames, which must match too (one line reached through different callers
#: gets different chains).
_traceback_source_infos: dict[
    tuple[int, int], tuple[Any, NameStack, SourceInfo, tuple[RawFrame, ...]]] = {}
_MAX_SOURCE_INFOS = 4096


def current_source_info() -> SourceInfo:
    """The source info a new equation gets: the user's frame (or, while a jaxpr
    is replayed, the frame of the equation being replayed) and the name stack."""
    state = _state
    override = state.frame_override
    if override is not None:
        return SourceInfo(override, state.name_stack)
    frame: Any = sys._getframe(1)
    cache = _internal_file_cache
    while frame is not None:
        code = frame.f_code
        internal = cache.get(code.co_filename)
        if internal is None:
            internal = _is_internal(code.co_filename, frame.f_globals.get("__name__"))
        if not internal:
            break
        frame = frame.f_back
    name_stack = state.name_stack
    if frame is None:
        return SourceInfo(None, name_stack)
    if _full_tracebacks:
        return _source_info_with_callers(frame, code, name_stack)
    # keyed by the bytecode offset: cheaper to read than the line number
    key = (id(code), frame.f_lasti)
    known = _source_infos.get(key)
    if known is not None and known[0] is code and known[1] is name_stack:
        return known[2]
    info = SourceInfo(Frame(code.co_filename, frame.f_lineno, code.co_name, 0, code,
                            frame.f_lasti), name_stack)
    if len(_source_infos) >= _MAX_SOURCE_INFOS:
        _source_infos.clear()
    _source_infos[key] = (code, name_stack, info)
    return info


def _source_info_with_callers(frame: Any, code: Any, name_stack: NameStack) -> SourceInfo:
    """``current_source_info`` with full tracebacks on: the user frame also
    records its enclosing user frames."""
    lasti = frame.f_lasti
    key = (id(code), lasti)
    callers = _user_callers(frame)
    known = _traceback_source_infos.get(key)
    if (known is not None and known[0] is code and known[1] is name_stack
            and known[3] == callers):
        return known[2]
    info = SourceInfo(Frame(code.co_filename, frame.f_lineno, code.co_name, 0, code, lasti,
                            callers), name_stack)
    if len(_traceback_source_infos) >= _MAX_SOURCE_INFOS:
        _traceback_source_infos.clear()
    _traceback_source_infos[key] = (code, name_stack, info, callers)
    return info


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


def function_name(debug_info: Any) -> str:
    """The function name in a ``TracingDebugInfo``/``JaxprDebugInfo``
    (``f`` of ``f at x.py:3``), or ``""`` when unknown."""
    src = getattr(debug_info, "func_src_info", None) if debug_info is not None else None
    if not src:
        return ""
    return str(src).partition(" at ")[0]


def transform_name(transform: str, debug_info: Any) -> str:
    """The name-stack entry of ``transform`` applied to the function
    ``debug_info`` describes: ``jvp(f)`` (``jvp()`` for an unnamed one)."""
    return f"{transform}({function_name(debug_info)})"


@contextmanager
def transform_name_stack(transform: str, debug_info: Any) -> Iterator[NameStack]:
    """``with transform_name_stack('jvp', dbg)``: equations traced inside get
    ``jvp(f)`` in their name stack (see the module docstring)."""
    previous = _state.name_stack
    _state.name_stack = previous.extend(transform_name(transform, debug_info))
    try:
        yield _state.name_stack
    finally:
        _state.name_stack = previous


def wrap_func_src(src: str | None, transform: str) -> str:
    """The ``func_src_info`` of a function transformed by ``transform``:
    ``"f at file.py:3"`` becomes ``"jvp(f) at file.py:3"``."""
    if not src:
        return f"{transform}(<unknown>)"
    fun, sep, where = src.partition(" at ")
    return f"{transform}({fun}){sep}{where}"
