"""dynamic_slice, dynamic_update_slice, gather and the scatter family:
numerics (XLA semantics incl. out-of-bounds modes), abstract-eval errors,
JVP/VJP against finite differences, vmap against a loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.lax import GatherDimensionNumbers as GDN
from lamina_tracing_core.lax import GatherScatterMode as Mode
from lamina_tracing_core.lax import ScatterDimensionNumbers as SDN
from lamina_tracing_core.primitives import abstract_eval


RNG = np.random.RandomState(2)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


def test_dynamic_slice() -> None:
    x = f32(4, 5)
    fun = lambda a, i, j: lx.dynamic_slice(a, (i, j), (2, 3))  # noqa: E731
    i, j = np.int32(1), np.int32(-2)
    out = check_jaxpr_roundtrip(fun, [x, i, j])
    assert_close(out, x[1:3, 2:5])
    # Out-of-range starts are clamped so the slice fits.
    assert_close(lx.dynamic_slice(x, (np.int32(3), np.int32(4)), (2, 3)), x[2:4, 2:5])
    check_grads(lambda a: fun(a, i, j), [x], 2)
    check_vmap(fun, [x, i, j], [0, None, None])
    check_vmap(fun, [x, i, j], [None, 0, None])
    check_vmap(fun, [x, i, j], [1, 0, 0])
    assert_close(lx.dynamic_index_in_dim(x, np.int32(2), 1, keepdims=False), x[:, 2])
    assert_close(lx.dynamic_slice_in_dim(x, np.int32(1), 2, 0), x[1:3])


def test_dynamic_update_slice() -> None:
    x, u = f32(4, 5), f32(2, 3)
    fun = lambda a, b, i, j: lx.dynamic_update_slice(a, b, (i, j))  # noqa: E731
    i, j = np.int32(1), np.int32(3)
    out = check_jaxpr_roundtrip(fun, [x, u, i, j])
    expected = x.copy()
    expected[1:3, 2:5] = u  # start 3 is clamped to 2
    assert_close(out, expected)
    check_grads(lambda a, b: fun(a, b, i, j), [x, u], 2)
    check_vmap(fun, [x, u, i, j], [0, None, None, None])
    check_vmap(fun, [x, u, i, j], [None, 0, None, None])
    check_vmap(fun, [x, u, i, j], [1, 2, 0, None])
    upd = lx.dynamic_update_index_in_dim(x, f32(5), np.int32(0), 0)
    assert np.asarray(upd).shape == (4, 5)


GATHERS: list[tuple[str, Any, Any, GDN, tuple[int, ...]]] = [
    # x[idx] along axis 0 (like x[[2, 0, 1]])
    ("rows", f32(4, 3), np.array([[2], [0], [1]], np.int32),
     GDN(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 3)),
    # windows of size 2 along axis 1
    ("windows", f32(3, 5), np.array([[0], [3]], np.int32),
     GDN(offset_dims=(0, 2), collapsed_slice_dims=(), start_index_map=(1,)), (3, 2)),
    # point gather of 2-d indices
    ("points", f32(3, 4), np.array([[0, 1], [2, 3], [1, 0]], np.int32),
     GDN(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1)), (1, 1)),
    # batching dims: take_along_axis style
    ("batched", f32(3, 4), np.array([[[1], [0]], [[3], [3]], [[2], [1]]], np.int32),
     GDN(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
         operand_batching_dims=(0,), start_indices_batching_dims=(0,)), (1, 1)),
]


@pytest.mark.parametrize("name,x,idx,dnums,sizes", GATHERS, ids=[g[0] for g in GATHERS])
def test_gather(name: str, x: Any, idx: Any, dnums: GDN, sizes: tuple[int, ...]) -> None:
    fun = lambda a, i: lx.gather(a, i, dnums, sizes)  # noqa: E731
    out = check_jaxpr_roundtrip(fun, [x, idx])
    if name == "rows":
        assert_close(out, x[[2, 0, 1]])
    if name == "points":
        assert_close(out, x[[0, 2, 1], [1, 3, 0]])
    if name == "batched":
        assert_close(out, np.take_along_axis(x, idx[..., 0], 1))
    check_grads(lambda a: fun(a, idx), [x], 2)
    check_vmap(fun, [x, idx], [0, None])
    check_vmap(fun, [x, idx], [None, 0])
    check_vmap(fun, [x, idx], [1, 1])


def test_gather_modes() -> None:
    x = np.arange(5, dtype=np.float32)
    dn = GDN(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,))
    idx = np.array([[1], [7], [-1]], np.int32)
    assert_close(lx.gather(x, idx, dn, (1,), mode="clip"), np.array([1, 4, 0], np.float32))
    filled = lx.gather(x, idx, dn, (1,), mode="fill", fill_value=-1.0)
    assert_close(filled, np.array([1, -1, -1], np.float32))
    default_fill = np.asarray(lx.gather(x, idx, dn, (1,), mode=Mode.FILL_OR_DROP))
    assert np.isnan(default_fill[1])
    eqn = api.make_jaxpr(lambda a: lx.gather(a, idx, dn, (1,)))(x).eqns[0]
    assert eqn.params["mode"] is Mode.PROMISE_IN_BOUNDS and eqn.params["fill_value"] is None
    assert set(eqn.params) == {"dimension_numbers", "slice_sizes", "unique_indices",
                               "indices_are_sorted", "mode", "fill_value"}


SCATTER_DN = SDN(update_window_dims=(1,), inserted_window_dims=(0,),
                 scatter_dims_to_operand_dims=(0,))
SCATTER_IDX = np.array([[2], [0], [2]], np.int32)  # repeated row 2
SCATTER_UNIQUE = np.array([[2], [0], [3]], np.int32)


@pytest.mark.parametrize("name,ref", [("scatter_add", np.add), ("scatter_mul", np.multiply),
                                      ("scatter_min", np.minimum), ("scatter_max", np.maximum),
                                      ("scatter_sub", np.subtract)])
def test_scatter_combiners(name: str, ref: Any) -> None:
    fun = getattr(lx, name)
    x, u = f32(4, 3), f32(3, 3)
    out = check_jaxpr_roundtrip(lambda a, b: fun(a, SCATTER_IDX, b, SCATTER_DN), [x, u])
    expected = x.copy()
    for k, row in enumerate(SCATTER_IDX[:, 0]):
        expected[row] = ref(expected[row], u[k])
    assert_close(out, expected, rtol=1e-6)
    idx = SCATTER_UNIQUE if name == "scatter_mul" else SCATTER_IDX
    g = lambda a, b: fun(a, idx, b, SCATTER_DN, unique_indices=name == "scatter_mul")  # noqa
    check_grads(g, [x, u], 1)
    check_vmap(lambda a, i, b: fun(a, i, b, SCATTER_DN), [x, SCATTER_IDX, u], [0, None, 0])
    check_vmap(lambda a, i, b: fun(a, i, b, SCATTER_DN), [x, SCATTER_IDX, u], [None, 0, 1])
    check_vmap(lambda a, i, b: fun(a, i, b, SCATTER_DN), [x, SCATTER_IDX, u], [1, 0, None])
    update_jaxpr = api.make_jaxpr(lambda a: fun(a, SCATTER_IDX, u, SCATTER_DN))(x).eqns[0]
    assert update_jaxpr.params["update_jaxpr"] is not None


def test_scatter_set() -> None:
    x, u = f32(4, 3), f32(3, 3)
    fun = lambda a, b: lx.scatter(a, SCATTER_UNIQUE, b, SCATTER_DN)  # noqa: E731
    out = check_jaxpr_roundtrip(fun, [x, u])
    expected = x.copy()
    expected[[2, 0, 3]] = u
    assert_close(out, expected)
    check_grads(lambda a, b: lx.scatter(a, SCATTER_UNIQUE, b, SCATTER_DN, unique_indices=True),
                [x, u], 2)
    # Repeated indices: the JVP masks out the overwritten values.
    check_grads(lambda a, b: lx.scatter(a, SCATTER_UNIQUE, b, SCATTER_DN), [x, u], 1,
                modes=("fwd",))
    check_vmap(fun, [x, u], [0, None])
    eqn = api.make_jaxpr(fun)(x, u).eqns[0]
    assert eqn.params["update_jaxpr"] is None and eqn.params["update_consts"] == ()
    assert eqn.params["mode"] is Mode.FILL_OR_DROP


def test_scatter_out_of_bounds_dropped_or_clipped() -> None:
    x = np.zeros(4, np.float32)
    dn = SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    idx = np.array([[1], [9]], np.int32)
    u = np.array([1.0, 2.0], np.float32)
    assert_close(lx.scatter_add(x, idx, u, dn), np.array([0, 1, 0, 0], np.float32))
    assert_close(lx.scatter_add(x, idx, u, dn, mode="clip"), np.array([0, 1, 0, 2], np.float32))


def test_take_along_axis_helper() -> None:
    x = f32(3, 4)
    idx = np.array([[3, 0, 1, 1], [2, 2, 0, 1], [0, 1, 2, 3]], np.int32)
    out = check_jaxpr_roundtrip(lambda a: lx.indexing.take_along_axis(a, idx, 1), [x])
    assert_close(out, np.take_along_axis(x, idx, 1))


ERRORS: list[tuple[str, Callable[[], Any], str]] = [
    ("gather idx dtype", lambda: abstract_eval(lx.gather_p, [
        ShapedArray((3,), np.float32), ShapedArray((2, 1), np.float32)],
        dict(dimension_numbers=GATHERS[0][3], slice_sizes=(1,), unique_indices=False,
             indices_are_sorted=False, mode=Mode.CLIP, fill_value=None)),
     "indices must have an integer type"),
    ("gather index vector", lambda: abstract_eval(lx.gather_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((2, 2), np.int32)],
        dict(dimension_numbers=GATHERS[0][3], slice_sizes=(1, 3), unique_indices=False,
             indices_are_sorted=False, mode=Mode.CLIP, fill_value=None)),
     "start_index_map"),
    ("gather slice size", lambda: abstract_eval(lx.gather_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((2, 1), np.int32)],
        dict(dimension_numbers=GATHERS[0][3], slice_sizes=(1, 4), unique_indices=False,
             indices_are_sorted=False, mode=Mode.CLIP, fill_value=None)),
     "out of range"),
    ("gather offset sorted", lambda: abstract_eval(lx.gather_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((2, 1), np.int32)],
        dict(dimension_numbers=GDN((2, 1), (), (0,)), slice_sizes=(1, 3),
             unique_indices=False, indices_are_sorted=False, mode=Mode.CLIP,
             fill_value=None)), "sorted"),
    ("scatter updates rank", lambda: abstract_eval(lx.scatter_add_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((3, 1), np.int32),
        ShapedArray((3,), np.float32)],
        dict(update_jaxpr=None, update_consts=(), dimension_numbers=SCATTER_DN,
             indices_are_sorted=False, unique_indices=False, mode=Mode.CLIP)),
     "updates must be of rank 2"),
    ("scatter dtype", lambda: abstract_eval(lx.scatter_add_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((3, 1), np.int32),
        ShapedArray((3, 3), np.int32)],
        dict(update_jaxpr=None, update_consts=(), dimension_numbers=SCATTER_DN,
             indices_are_sorted=False, unique_indices=False, mode=Mode.CLIP)),
     "same dtypes"),
    ("scatter window", lambda: abstract_eval(lx.scatter_add_p, [
        ShapedArray((4, 3), np.float32), ShapedArray((3, 1), np.int32),
        ShapedArray((3, 5), np.float32)],
        dict(update_jaxpr=None, update_consts=(), dimension_numbers=SCATTER_DN,
             indices_are_sorted=False, unique_indices=False, mode=Mode.CLIP)),
     "must not exceed"),
    ("dynamic_slice sizes", lambda: abstract_eval(lx.dynamic_slice_p, [
        ShapedArray((4,), np.float32), ShapedArray((), np.int32)], dict(slice_sizes=(5,))),
     "slice_sizes must be between"),
    ("dynamic_slice index dtypes", lambda: abstract_eval(lx.dynamic_slice_p, [
        ShapedArray((4, 4), np.float32), ShapedArray((), np.int32),
        ShapedArray((), np.uint8)], dict(slice_sizes=(1, 1))),
     "integers of the same type"),
    ("dynamic_update_slice rank", lambda: abstract_eval(lx.dynamic_update_slice_p, [
        ShapedArray((4, 4), np.float32), ShapedArray((4,), np.float32),
        ShapedArray((), np.int32), ShapedArray((), np.int32)], {}), "same rank"),
]


@pytest.mark.parametrize("what,thunk,match", ERRORS, ids=[e[0] for e in ERRORS])
def test_abstract_eval_errors(what: str, thunk: Callable[[], Any], match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        thunk()


def test_user_function_errors() -> None:
    with pytest.raises(ValueError, match="Length of slice indices"):
        lx.dynamic_slice(f32(3, 3), (np.int32(0),), (1, 1))
    with pytest.raises(ValueError, match="Unknown gather mode"):
        lx.gather(f32(3), np.zeros((1, 1), np.int32), GATHERS[0][3], (1,), mode="bogus")
    with pytest.raises(TypeError, match="GatherDimensionNumbers"):
        lx.gather(f32(3), np.zeros((1, 1), np.int32), ((0,), (), (0,)), (1,))
