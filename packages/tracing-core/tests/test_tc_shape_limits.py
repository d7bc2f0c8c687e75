"""Shapes too large for an XLA array are refused while tracing, with an error
that names the function and its argument (XLA itself aborts the process on
them), and shapes that fit, empty ones included, are still accepted."""

from __future__ import annotations

import numpy as np
import pytest

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core import numpy as tnp
from lamina_tracing_core.avals import (
    MAX_ARRAY_BYTES,
    ShapedArray,
    ShapeTooLargeError,
    check_shape_size,
)

HUGE = (2 ** 33, 2 ** 33)  # 2**66 elements


def test_the_limit_is_bytes_of_a_signed_64_bit_count() -> None:
    assert MAX_ARRAY_BYTES == 2 ** 63 - 1
    check_shape_size((2 ** 63 - 1,), np.int8, "f")
    check_shape_size((2 ** 61 - 1,), np.int32, "f")
    with pytest.raises(ShapeTooLargeError, match=r"2\*\*61 elements \(2\*\*63 bytes\)"):
        check_shape_size((2 ** 61,), np.int32, "f")
    # every leading run of dimensions counts, so a trailing zero does not help
    check_shape_size((0, 2 ** 62, 2 ** 62), np.int8, "f")
    with pytest.raises(ShapeTooLargeError, match=r"leading dimensions \(4611686018427387904, "
                                                 r"4611686018427387904\) make 2\*\*124"):
        check_shape_size((2 ** 62, 2 ** 62, 0), np.int8, "f")


def test_message_names_function_argument_and_counts() -> None:
    with pytest.raises(ShapeTooLargeError) as info:
        check_shape_size(HUGE, np.int8, "lamina.numpy.zeros")
    assert str(info.value) == (
        "lamina.numpy.zeros: shape (8589934592, 8589934592) of int8: 2**66 elements "
        "(2**66 bytes), more than an array can hold (at most 2**63 - 1 bytes)")
    assert isinstance(info.value, ValueError)


def test_shaped_array_refuses_too_large_shapes_for_its_dtype() -> None:
    with pytest.raises(ShapeTooLargeError, match=r"^ShapedArray: shape \(8589934592, "):
        ShapedArray(HUGE, np.int8)
    # A shape that fits one dtype is not remembered as fitting a wider one.
    assert ShapedArray((2 ** 62,), np.int8).shape == (2 ** 62,)
    with pytest.raises(ShapeTooLargeError, match=r"of float32: 2\*\*62 elements \(2\*\*64"):
        ShapedArray((2 ** 62,), np.float32)
    assert ShapedArray((0, 2 ** 62, 2 ** 62), np.float32).size == 0


@pytest.mark.parametrize("fun,message", [
    (lambda: tnp.zeros(HUGE, np.int8), r"^lamina\.numpy\.zeros: shape \(8589934592, 8589934592\) "
                                       r"of int8: 2\*\*66 elements"),
    (lambda: tnp.ones((2 ** 62,)), r"^lamina\.numpy\.ones: shape \(4611686018427387904,\) of "
                                   r"float32: 2\*\*62 elements \(2\*\*64 bytes\)"),
    (lambda: tnp.empty(HUGE), r"^lamina\.numpy\.empty: shape"),
    (lambda: tnp.full(HUGE, 1.0), r"^lamina\.numpy\.full: shape"),
    (lambda: tnp.zeros_like(np.ones(3, np.float32), shape=(2 ** 62, 2)),
     r"^lamina\.numpy\.zeros_like: shape \(4611686018427387904, 2\) of float32: its leading"),
    (lambda: lx.full(HUGE, 1.0), r"^full: shape \(8589934592, 8589934592\) of float32"),
    (lambda: lx.broadcast_in_dim(np.float32(1), HUGE, ()), r"^broadcast_in_dim: shape "),
    (lambda: lx.broadcast(np.ones(3, np.float32), (2 ** 31, 2 ** 31)),
     r"^broadcast_in_dim: shape \(2147483648, 2147483648, 3\)"),
    (lambda: lx.reshape(np.ones(0, np.float32), (2 ** 62, 2 ** 62, 0)),
     r"^reshape: new_sizes \(4611686018427387904, 4611686018427387904, 0\)"),
    (lambda: lx.iota(np.int32, 2 ** 64), r"^iota: shape \(18446744073709551616,\) of int32"),
    (lambda: lx.broadcasted_iota(np.int32, HUGE, 0), r"^iota: shape \(8589934592, 8589934592\)"),
])
def test_too_large_shapes_are_refused_while_tracing(fun, message) -> None:
    with pytest.raises(ShapeTooLargeError, match=message):
        api.make_jaxpr(fun)()


def test_shapes_that_fit_still_trace() -> None:
    jaxpr = api.make_jaxpr(lambda: tnp.zeros((2 ** 40,), np.int8))()
    assert jaxpr.out_avals[0].shape == (2 ** 40,)
    empty = api.make_jaxpr(lambda: tnp.zeros((0, 2 ** 62, 2 ** 62), np.int8))()
    assert empty.out_avals[0].shape == (0, 2 ** 62, 2 ** 62)


def test_iota_negative_size_is_a_type_error_naming_iota() -> None:
    # as JAX's message (it used to reach XLA and come back as an MLIRError)
    with pytest.raises(TypeError, match=r"^iota shape must have every element be nonnegative, "
                                        r"got \(-1,\)\.$"):
        lx.iota(np.float32, -1)
    with pytest.raises(TypeError, match="iota shape must have every element be nonnegative"):
        api.make_jaxpr(lambda: lx.iota(np.int32, -3))()
