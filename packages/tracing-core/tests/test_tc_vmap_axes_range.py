"""vmap's out_axes (and in_axes) out of range raise JAX's error instead of
being taken modulo the rank of the result."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lamina_tracing_core import api

X = np.ones(3, np.float32)


@pytest.mark.parametrize("fun,out_axes,message", [
    (lambda x: x, 2, "axis 2 is out of bounds for array of dimension 1"),
    (lambda x: x, 1, "axis 1 is out of bounds for array of dimension 1"),
    (lambda x: x, -2, "axis -2 is out of bounds for array of dimension 1"),
    (lambda x: x, -3, "axis -3 is out of bounds for array of dimension 1"),
    (lambda x: (x, x), (0, 2), "axis 2 is out of bounds for array of dimension 1"),
    (lambda x: (x, [x, x]), (0, 1), "axis 1 is out of bounds for array of dimension 1"),
    (lambda x: {"a": x, "b": x}, {"a": 0, "b": -2},
     "axis -2 is out of bounds for array of dimension 1"),
    (lambda x: x * np.ones((4,), np.float32)[:, None], 3,
     "axis 3 is out of bounds for array of dimension 3"),
    # an unbatched output is broadcast first; its axis is checked the same way
    (lambda x: np.ones(2, np.float32), 2, "axis 2 is out of bounds for array of dimension 2"),
])
def test_out_axes_out_of_range(fun: Any, out_axes: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        api.vmap(fun, out_axes=out_axes)(X)
    # JAX's text, then the output and the function it belongs to
    assert str(info.value).startswith(message + " (out_axes of "), info.value
    assert " of the function <lambda> at " in str(info.value) and "for vmap)" in str(info.value)


def test_out_axes_with_none_entries_and_axis_name() -> None:
    f = api.vmap(lambda x, y: (x, y), in_axes=(None, 0), out_axes=(None, 3))
    with pytest.raises(ValueError, match=r"^axis 3 is out of bounds for array of dimension 1 "
                                         r"\(out_axes of output component \[1\] of the "
                                         r"function <lambda> at "):
        f(np.ones(2, np.float32), X)
    g = api.vmap(lambda x: x, out_axes=2, axis_name="i")
    with pytest.raises(ValueError, match=r"^axis 2 is out of bounds for array of dimension 1 "
                                         r"\(out_axes of the result of the function "
                                         r"<lambda> at "):
        g(X)


def test_out_axes_in_range_still_move_the_axis() -> None:
    m = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert api.vmap(lambda x: x, out_axes=-1)(m).shape == (4, 3)
    assert api.vmap(lambda x: x, out_axes=1)(m).shape == (4, 3)
    assert api.vmap(lambda x: x, out_axes=-2)(m).shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(api.vmap(lambda x: x, out_axes=1)(m)), m.T)
    assert api.vmap(lambda x: np.ones(2, np.float32), out_axes=-2)(X).shape == (3, 2)


@pytest.mark.parametrize("in_axes", [1, -2])
def test_in_axes_out_of_range(in_axes: int) -> None:
    with pytest.raises(ValueError, match=f"^vmap was requested to map its argument along axis "
                                         f"{in_axes}, which implies that its rank should be at "
                                         f"least 2, but is only 1"):
        api.vmap(lambda x: x, in_axes=in_axes)(X)
