"""``loc(...)`` attributes for operations, built once per distinct source.

An operation lowered from an equation gets
``loc(fused["user.py":12:4, "jit(f)/jvp(g)/mul"])``: the user's file, line and
column fused with a name location holding the op's name path (the module's
name stack, the equation's own name stack, the primitive's name). XLA turns
exactly this form into ``op_name`` plus ``source_file``/``source_line``
metadata on the HLO instruction (a name wrapped around the file location
would give only a stack-frame id). The column is the start of the user's
expression, from the code object's position table.

With ``include_full_tracebacks_in_locations`` on, the location is JAX's
richer form instead: the name path wrapped around the call-site chain of the
user frames, innermost first, each a function name around a column range,
``loc("jit(f)/sin"(callsite("g"("u.py":3:11 to :21) at "f"("u.py":5:8 to :12))))``.
Only the raw frames (code object and bytecode offset) are recorded while
tracing; the positions are looked up here, once per code object and offset.

Many operations share a location (every op of one user line under the same
name path), so ``LocationCache`` returns the same attribute for the same key
and records which equation first used it, so a verifier error can name it.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir import ir
from lamina_tracing_core.source_info import (
    Frame,
    RawFrame,
    SourceInfo,
    frame_position,
    include_full_tracebacks_in_locations,
    raw_frame_position,
)

__all__ = ["LocationCache", "op_name_path"]

_Key = tuple[Any, ...]


def op_name_path(prefix: str, source_info: SourceInfo | None, op_name: str) -> str:
    """``prefix/name/stack/op_name`` with empty parts left out."""
    parts = [prefix] if prefix else []
    if source_info is not None and source_info.name_stack.stack:
        parts.append(str(source_info.name_stack))
    if op_name:
        parts.append(op_name)
    return "/".join(parts)


class LocationCache:
    """Locations of one lowering, keyed by (name path, file, line, column).

    Equations are looked up first by the identity of their ``SourceInfo``
    (many equations share one object, and comparing equal-but-distinct ones
    costs far more than a dictionary hit), then by its value. The identity
    tables keep the ``SourceInfo`` alive, so an id is never reused while its
    entry exists."""

    __slots__ = ("_locs", "_origin", "_tables", "_by_value", "_file_locs", "full_tracebacks",
                 "_frame_locs", "_chains")

    def __init__(self, full_tracebacks: bool | None = None) -> None:
        #: whether ops get call-site chains (the config switch when created)
        self.full_tracebacks = (include_full_tracebacks_in_locations()
                                if full_tracebacks is None else full_tracebacks)
        self._frame_locs: dict[tuple[Any, ...], ir.Location] = {}
        self._chains: dict[tuple[Any, ...], ir.Location] = {}
        self._locs: dict[_Key, ir.Location] = {}
        self._origin: dict[_Key, Any] = {}
        self._tables: dict[str, dict[tuple[int, str], tuple[Any, ir.Location]]] = {}
        self._by_value: dict[tuple[str, SourceInfo | None, str], ir.Location] = {}
        self._file_locs: dict[tuple[str, int, int], ir.Location] = {}

    def table(self, prefix: str) -> dict[tuple[int, str], tuple[Any, ir.Location]]:
        """The ``(id(source_info), op_name) -> (source_info, location)`` cache
        under ``prefix``: read it directly on hot paths, checking that the
        entry's ``source_info`` *is* the equation's (``for_equation`` fills it)."""
        table = self._tables.get(prefix)
        if table is None:
            table = self._tables[prefix] = {}
        return table

    def for_equation(self, prefix: str, source_info: SourceInfo | None, op_name: str,
                     origin: Any = None) -> ir.Location:
        """The location of an op lowered from an equation (``origin``, kept
        for error messages) with ``source_info``, under name path ``prefix``."""
        table = self.table(prefix)
        id_key = (id(source_info), op_name)
        hit = table.get(id_key)
        if hit is not None and hit[0] is source_info:
            return hit[1]
        key = (prefix, source_info, op_name)
        loc = self._by_value.get(key)
        if loc is None:
            name = op_name_path(prefix, source_info, op_name)
            frame = source_info.frame if source_info is not None else None
            if frame is None:
                loc = self.named(name, None, 0, 0, origin)
            elif self.full_tracebacks:
                loc = self.with_traceback(name, frame, origin)
            else:
                line, _, column, _ = frame_position(frame)
                loc = self.named(name, frame.file_name, line, column, origin)
            self._by_value[key] = loc
        table[id_key] = (source_info, loc)
        return loc

    def named(self, name: str, file: str | None = None, line: int = 0, column: int = 0,
              origin: Any = None) -> ir.Location:
        """``loc(fused["file":line:column, "name"])``, or ``loc("name")`` without a file."""
        key = (name, file, line, column)
        loc = self._locs.get(key)
        if loc is None:
            if file is None:
                loc = ir.Location.name(name)
            else:
                loc = ir.Location.fused([self.file(file, line, column), ir.Location.name(name)])
            self._locs[key] = loc
            self._origin[key] = origin
        return loc

    def with_traceback(self, name: str, frame: Frame, origin: Any = None) -> ir.Location:
        """``loc("name"(callsite(...)))``: ``name`` around the call-site chain
        of ``frame`` and its recorded callers."""
        chain = self.traceback(frame)
        key = ("traceback", name, chain)
        loc = self._locs.get(key)
        if loc is None:
            loc = ir.Location.name(name, childLoc=chain)
            self._locs[key] = loc
            self._origin[key] = origin
        return loc

    def traceback(self, frame: Frame) -> ir.Location:
        """The call-site chain of ``frame`` (innermost) and its callers."""
        key = (frame.file_name, frame.function_name, frame_position(frame), frame.callers)
        chain = self._chains.get(key)
        if chain is None:
            chain = self._frame_loc(frame.file_name, frame.function_name, key[2])
            if frame.callers:
                chain = ir.Location.callsite(chain, [self._raw_frame_loc(raw)
                                                     for raw in frame.callers])
            self._chains[key] = chain
        return chain

    def _raw_frame_loc(self, raw: RawFrame) -> ir.Location:
        code, lasti = raw
        return self._frame_loc(code.co_filename, code.co_name, raw_frame_position(code, lasti))

    def _frame_loc(self, file: str, function: str,
                   position: tuple[int, int, int, int]) -> ir.Location:
        key = (file, function, position)
        loc = self._frame_locs.get(key)
        if loc is None:
            line, end_line, column, end_column = position
            loc = self._frame_locs[key] = ir.Location.name(
                function, childLoc=ir.Location.file(file, line, column, end_line, end_column))
        return loc

    def file(self, file: str, line: int, column: int) -> ir.Location:
        key = (file, line, column)
        loc = self._file_locs.get(key)
        if loc is None:
            loc = self._file_locs[key] = ir.Location.file(file, line, column)
        return loc

    def origin_of(self, location: ir.Location) -> Any:
        """The equation that first used ``location`` (None if unknown); slow,
        meant for error reporting only."""
        text = str(location)
        for key, loc in self._locs.items():
            if str(loc) == text:
                return self._origin.get(key)
        return None
