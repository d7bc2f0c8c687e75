"""scatter-mul's derivative with respect to its updates, for repeated
indices too (it used to raise NotImplementedError unless unique_indices):
finite differences up to second order, zero updates, windows, vmap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core.lax import ScatterDimensionNumbers as SDN

RNG = np.random.RandomState(18)
ROWS = SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
POINTS = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
REPEATED_ROWS = np.array([[2], [0], [2], [2]], np.int32)


def vec(*values: float) -> np.ndarray[Any, Any]:
    return np.array(values, np.float32)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("unique", [False, True])
def test_finite_differences_with_windows(unique: bool) -> None:
    idx = np.array([[2], [0], [3], [1]], np.int32) if unique else REPEATED_ROWS
    x, u = f32(4, 3), f32(4, 3)
    check_grads(lambda a, b: lx.scatter_mul(a, idx, b, ROWS, unique_indices=unique), [x, u], 2,
                rtol=2e-2, atol=2e-2)


def test_zero_updates_on_repeated_indices() -> None:
    # out = [x0 u0 u1 u2, x1, x2 u3]; d out0/du_k = x0 times the other two
    x = np.array([2., 5., 3.], np.float32)
    idx = np.array([[0], [0], [0], [2]], np.int32)

    def grads(u: np.ndarray[Any, Any]) -> Any:
        return api.grad(lambda u: lx.scatter_mul(x, idx, u, POINTS).sum())(u)

    assert_close(grads(vec(1., 2., 3., 4.)), vec(12., 6., 4., 3.))
    assert_close(grads(vec(0., 2., 3., 4.)), vec(12., 0., 0., 3.))
    assert_close(grads(vec(0., 0., 3., 4.)), vec(0., 0., 0., 3.))
    assert_close(grads(vec(0., 0., 0., 4.)), vec(0., 0., 0., 3.))


def test_out_of_bounds_updates_are_dropped_from_the_derivative() -> None:
    x = np.array([2., 5., 3.], np.float32)
    idx = np.array([[0], [7], [0]], np.int32)
    u = np.array([3., 4., 5.], np.float32)
    g = api.grad(lambda u: lx.scatter_mul(x, idx, u, POINTS, mode="drop").sum())(u)
    assert_close(g, vec(10., 0., 6.))


def test_vmap_of_the_derivative() -> None:
    x, u = f32(4, 3), f32(4, 3)

    def grad_u(a: Any, i: Any, b: Any) -> Any:
        return api.grad(lambda b: lx.scatter_mul(a, i, b, ROWS).sum())(b)

    check_vmap(grad_u, [x, REPEATED_ROWS, u], [0, None, 0])
    check_vmap(grad_u, [x, REPEATED_ROWS, u], [None, 0, 1])
