"""Concretization errors under vmap (issue 19): the message names the
arguments the batched value came from, as jit's does (``depends on the value
of the argument x``), and keeps the line where the batched value was created."""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc

f32 = np.float32
ONES = np.ones(3, f32)


def _here() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def test_the_batched_argument_is_named_with_the_line_it_was_made_on() -> None:
    def f(x: Any) -> Any:
        line = _here() + 1
        positive = T.t_sin(x) > 0  # type: ignore[operator]
        f.line = line  # type: ignore[attr-defined]
        return 1 if positive else 0

    with pytest.raises(tc.TracerBoolConversionError) as info:
        tc.vmap(f)(ONES)
    message = str(info.value)
    assert "for vmap" in message
    assert "depends on the value of the argument x." in message
    assert re.search(r"This BatchTracer was created on line:\n  .*test_tc_batching_errors\.py:"
                     rf"{f.line} \(f\)", message), message  # type: ignore[attr-defined]


def test_only_the_arguments_behind_the_value_are_named() -> None:
    def f(x: Any, y: Any, z: Any) -> Any:
        return 1 if T.t_mul(x["a"], z[0]) > 0 else 0  # type: ignore[operator]

    with pytest.raises(tc.TracerBoolConversionError,
                       match=r"depends on the values of the arguments x\['a'\] and z\[0\]\."):
        tc.vmap(f)({"a": ONES, "b": ONES}, ONES, [ONES])


def test_an_unbatched_argument_is_not_named() -> None:
    def f(x: Any, y: Any) -> Any:
        return 1 if T.t_add(x, y) > 0 else 0  # type: ignore[operator]

    with pytest.raises(tc.TracerBoolConversionError) as info:
        tc.vmap(f, in_axes=(None, 0))(f32(1.0), ONES)
    assert "depends on the value of the argument y." in str(info.value)


def test_the_argument_is_named_when_vmap_is_itself_traced() -> None:
    def f(x: Any, y: Any) -> Any:
        return 1 if T.t_sin(y) > 0 else 0  # type: ignore[operator]

    with pytest.raises(tc.TracerBoolConversionError) as info:
        tc.make_jaxpr(tc.vmap(f))(ONES, ONES)
    message = str(info.value)
    assert "depends on the value of the argument y." in message
    assert re.search(r"created on line:\n  .*test_tc_batching_errors\.py:\d+ \(f\)", message)


def test_float_of_a_batched_value_names_the_argument() -> None:
    with pytest.raises(tc.ConcretizationTypeError, match="the argument x"):
        tc.vmap(lambda x: float(T.t_sin(x)))(ONES)
