"""Rich locations: columns from the code objects' position tables and, with
``include_full_tracebacks_in_locations``, call-site chains of user frames."""

from __future__ import annotations

import sys
from typing import Any

from lamina_tracing_core.source_info import (
    Frame,
    NameStack,
    SourceInfo,
    frame_position,
    raw_frame_position,
)

import lamina_mlir_lowering as ml
from lamina_mlir_lowering.locations import LocationCache


def _caller() -> tuple[Any, int, int]:
    """The calling frame's code object, bytecode offset and line."""
    frame = sys._getframe(1)
    return frame.f_code, frame.f_lasti, frame.f_lineno


def _line_of(marker: str) -> tuple[int, str]:
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if marker in text and "_line_of" not in text:
                return number, text
    raise AssertionError(marker)


def _inner() -> tuple[Any, int, int]:
    return _caller()  # marker: inner call


def _inner_and_outer() -> tuple[tuple[Any, int, int], tuple[Any, int, int]]:
    """The raw frames of ``_inner``'s call in ``_outer`` and ``_outer``'s."""
    frame = sys._getframe(1)
    inner, outer = frame, frame.f_back
    assert outer is not None
    return ((inner.f_code, inner.f_lasti, inner.f_lineno),
            (outer.f_code, outer.f_lasti, outer.f_lineno))


def _inner_capturing() -> tuple[tuple[Any, int, int], tuple[Any, int, int]]:
    return _inner_and_outer()  # marker: inner call of the chain


def _outer() -> tuple[tuple[Any, int, int], tuple[Any, int, int]]:
    return _inner_capturing()  # marker: outer call


def test_position_of_a_known_call_has_start_and_end_columns() -> None:
    code, lasti, line = _inner()
    expected_line, text = _line_of("marker: inner call")
    start = text.index("_caller()")
    assert line == expected_line
    assert raw_frame_position(code, lasti) == (
        expected_line, expected_line, start, start + len("_caller()"))


def test_frame_without_code_keeps_its_line_and_column() -> None:
    assert frame_position(Frame("u.py", 7, "f", 3)) == (7, 7, 3, 3)


def _captured_info(name_stack: NameStack = NameStack()) -> tuple[SourceInfo, int, str]:
    (code, lasti, line), (outer_code, outer_lasti, _) = _outer()
    frame = Frame(code.co_filename, line, code.co_name, 0, code, lasti,
                  ((outer_code, outer_lasti),))
    _, text = _line_of("marker: inner call of the chain")
    return SourceInfo(frame, name_stack), line, text


def test_location_without_tracebacks_is_fused_file_line_start_column() -> None:
    info, line, text = _captured_info(NameStack(("jvp(g)",)))
    with ml.default_context():
        loc = LocationCache(full_tracebacks=False).for_equation("jit(f)", info, "sin")
        assert str(loc) == (f'loc(fused["{__file__}":{line}:{text.index("_inner_and_outer()")}, '
                            f'"jit(f)/jvp(g)/sin"])')


def test_location_with_tracebacks_is_a_call_site_chain_with_ranges() -> None:
    info, line, text = _captured_info()
    outer_line, outer_text = _line_of("marker: outer call")
    start = text.index("_inner_and_outer()")
    outer_start = outer_text.index("_inner_capturing()")
    with ml.default_context():
        loc = LocationCache(full_tracebacks=True).for_equation("jit(f)", info, "sin")
        assert str(loc) == (
            f'loc("jit(f)/sin"(callsite("_inner_capturing"("{__file__}":{line}:{start} to '
            f':{start + len("_inner_and_outer()")}) at "_outer"("{__file__}":{outer_line}:{outer_start}'
            f' to :{outer_start + len("_inner_capturing()")}))))')


def test_location_with_tracebacks_of_a_single_frame_has_no_callsite() -> None:
    code, lasti, line = _inner()
    info = SourceInfo(Frame(code.co_filename, line, code.co_name, 0, code, lasti))
    with ml.default_context():
        loc = str(LocationCache(full_tracebacks=True).for_equation("", info, "sin"))
    assert loc.startswith(f'loc("sin"("_inner"("{__file__}":{line}:') and "callsite" not in loc


def test_locations_of_equal_sources_are_shared() -> None:
    info, _, _ = _captured_info()
    again = SourceInfo(info.frame, info.name_stack)
    with ml.default_context():
        cache = LocationCache(full_tracebacks=True)
        first = cache.for_equation("jit(f)", info, "sin")
        assert cache.for_equation("jit(f)", again, "sin") is first
        assert cache.origin_of(first) is None
