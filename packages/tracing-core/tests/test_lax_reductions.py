"""Reductions (reduce_*, argmax/argmin, lax.reduce), cumulative reductions and
sorting (sort, top_k): numerics, errors, derivatives and vmap."""

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
from lamina_tracing_core.primitives import abstract_eval


RNG = np.random.RandomState(3)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    # Distinct values: max/min/sort derivatives are then well defined.
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float32) / n + RNG.uniform(0.5, 1.0, n).astype(
        np.float32) * 0.01).reshape(shape) + 0.5


REDUCTIONS: list[tuple[str, Callable[..., Any], Callable[..., Any], int]] = [
    ("reduce_sum", lx.reduce_sum, np.sum, 2),
    ("reduce_prod", lx.reduce_prod, np.prod, 2),
    ("reduce_max", lx.reduce_max, np.max, 1),
    ("reduce_min", lx.reduce_min, np.min, 1),
]


@pytest.mark.parametrize("name,fun,ref,order", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("axes", [(0,), (1, 2), (), (0, 1, 2)])
def test_reductions(name: str, fun: Callable[..., Any], ref: Callable[..., Any], order: int,
                    axes: tuple[int, ...]) -> None:
    x = f32(2, 3, 2)
    g = lambda a: fun(a, axes)  # noqa: E731
    out = check_jaxpr_roundtrip(g, [x])
    assert_close(out, ref(x, axis=axes).astype(np.float32), rtol=1e-5)
    check_grads(g, [x], order)
    check_vmap(g, [x], [1])


def test_reduce_prod_with_zeros() -> None:
    x = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 1.0], [1.0, 2.0, 4.0]], np.float32)
    g = api.grad(lambda a: lx.reduce_prod(a, (1,)).sum())(x)
    assert_close(g, np.array([[0, 6, 0], [0, 0, 0], [8, 4, 2]], np.float32))


def test_reduce_max_ties_share_gradient() -> None:
    x = np.array([1.0, 3.0, 3.0], np.float32)
    g = api.grad(lambda a: lx.reduce_max(a, (0,)))(x)
    assert_close(g, np.array([0, 0.5, 0.5], np.float32))


@pytest.mark.parametrize("name,ref", [("reduce_and", np.all), ("reduce_or", np.any)])
def test_logical_reductions(name: str, ref: Callable[..., Any]) -> None:
    fun = getattr(lx, name)
    b = RNG.rand(3, 4) > 0.5
    out = check_jaxpr_roundtrip(lambda a: fun(a, (1,)), [b])
    assert_close(out, ref(b, axis=1))
    check_vmap(lambda a: fun(a, (0,)), [b], [1])
    i = RNG.randint(0, 16, (3, 4)).astype(np.int32)
    int_ref = np.bitwise_and.reduce if name == "reduce_and" else np.bitwise_or.reduce
    assert_close(fun(i, (1,)), int_ref(i, axis=1))


def test_reduce_xor() -> None:
    i = RNG.randint(0, 16, (3, 4)).astype(np.int32)
    assert_close(lx.reduce_xor(i, (0,)), np.bitwise_xor.reduce(i, axis=0))
    b = RNG.rand(3, 4) > 0.5
    assert_close(lx.reduce_xor(b, (1,)), np.bitwise_xor.reduce(b.astype(np.uint8), 1) == 1)


@pytest.mark.parametrize("name,ref", [("argmax", np.argmax), ("argmin", np.argmin)])
def test_argminmax(name: str, ref: Callable[..., Any]) -> None:
    fun = getattr(lx, name)
    x = f32(3, 4)
    out = check_jaxpr_roundtrip(lambda a: fun(a, 1, np.int32), [x])
    assert_close(out, ref(x, axis=1).astype(np.int32))
    check_vmap(lambda a: fun(a, 0, np.int32), [x], [1])
    check_vmap(lambda a: fun(a, 1, np.int32), [x], [0])
    eqn = api.make_jaxpr(lambda a: fun(a, -1, np.int32))(x).eqns[0]
    assert eqn.params == {"axes": (1,), "index_dtype": np.dtype(np.int32)}
    _, t = api.jvp(lambda a: fun(a, 0, np.int32), (x,), (np.ones_like(x),))


def test_reduce_monoids() -> None:
    x = f32(3, 4)
    assert_close(lx.reduce(x, np.float32(0), lx.add, (1,)), x.sum(1), rtol=1e-6)
    assert_close(lx.reduce(x, np.float32(-np.inf), lx.max, (0,)), x.max(0))
    assert_close(lx.reduce(x, np.float32(1), lx.add, (1,)), x.sum(1) + 1, rtol=1e-6)
    with pytest.raises(TypeError, match="not a recognized monoid"):
        lx.reduce(x, 0.0, lambda a, b: a + b, (0,))


def test_reduction_errors() -> None:
    with pytest.raises(ValueError, match="duplicate value"):
        abstract_eval(lx.reduce_sum_p, [ShapedArray((2, 3), np.float32)],
                      {"axes": (0, 0), "out_sharding": None})
    with pytest.raises(ValueError, match="out-of-bounds"):
        abstract_eval(lx.reduce_max_p, [ShapedArray((2, 3), np.float32)], {"axes": (2,)})
    with pytest.raises(TypeError, match="reduce_or does not accept dtype float32"):
        abstract_eval(lx.reduce_or_p, [ShapedArray((2,), np.float32)], {"axes": (0,)})
    with pytest.raises(ValueError, match="non-empty reduced dimension"):
        abstract_eval(lx.argmax_p, [ShapedArray((0, 3), np.float32)],
                      {"axes": (0,), "index_dtype": np.dtype(np.int32)})
    with pytest.raises(TypeError, match="index_dtype must be an integer"):
        abstract_eval(lx.argmax_p, [ShapedArray((2, 3), np.float32)],
                      {"axes": (0,), "index_dtype": np.dtype(np.float32)})


CUMULATIVE = [("cumsum", lx.cumsum, np.cumsum, 2),
              ("cumprod", lx.cumprod, np.cumprod, 2),
              ("cummax", lx.cummax, lambda x, axis: np.maximum.accumulate(x, axis=axis), 1),
              ("cummin", lx.cummin, lambda x, axis: np.minimum.accumulate(x, axis=axis), 1),
              ("cumlogsumexp", lx.cumlogsumexp,
               lambda x, axis: np.logaddexp.accumulate(x, axis=axis), 1)]


@pytest.mark.parametrize("name,fun,ref,order", CUMULATIVE, ids=[c[0] for c in CUMULATIVE])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(name: str, fun: Callable[..., Any], ref: Callable[..., Any], order: int,
                    reverse: bool) -> None:
    x = f32(3, 5)
    g = lambda a: fun(a, axis=1, reverse=reverse)  # noqa: E731
    out = check_jaxpr_roundtrip(g, [x])
    expected = np.flip(ref(np.flip(x, 1), axis=1), 1) if reverse else ref(x, axis=1)
    assert_close(out, expected.astype(np.float32), rtol=1e-5)
    check_grads(g, [x], order)
    check_vmap(g, [x], [1])
    check_vmap(lambda a: fun(a, axis=0, reverse=reverse), [x], [0])


def test_associative_scan() -> None:
    x = f32(7)
    out, = lx.associative_scan(lambda a, b: [lx.add(a[0], b[0])], [x])
    assert_close(out, np.cumsum(x), rtol=1e-5)
    out, = lx.associative_scan(lambda a, b: [lx.add(a[0], b[0])], [x], reverse=True)
    assert_close(out, np.cumsum(x[::-1])[::-1], rtol=1e-5)


def test_sort() -> None:
    x = f32(3, 5)
    out = check_jaxpr_roundtrip(lambda a: lx.sort(a, 1), [x])
    assert_close(out, np.sort(x, 1))
    check_grads(lambda a: lx.sort(a, 0), [x], 2)
    check_vmap(lambda a: lx.sort(a, 1), [x], [1])
    keys = np.array([3, 1, 3, 2], np.int32)
    vals = f32(4)
    k, v = lx.sort((keys, vals), num_keys=1)
    order = np.argsort(keys, kind="stable")
    assert_close(k, keys[order])
    assert_close(v, vals[order])
    check_grads(lambda a: lx.sort((keys, a), num_keys=1)[1], [vals], 1)
    check_vmap(lambda a, b: lx.sort((a, b), num_keys=1), [keys, vals], [None, 0])
    k2, v2 = lx.sort_key_val(keys, vals)
    assert_close(v2, vals[order])
    nan = np.array([2.0, np.nan, 1.0], np.float32)
    assert_close(lx.sort(nan), np.array([1.0, 2.0, np.nan], np.float32))
    eqn = api.make_jaxpr(lambda a: lx.sort(a))(x).eqns[0]
    assert eqn.params == {"dimension": 1, "is_stable": True, "num_keys": 1}


def test_sort_errors() -> None:
    with pytest.raises(TypeError, match="equal shapes"):
        abstract_eval(lx.sort_p, [ShapedArray((2,), np.float32), ShapedArray((3,), np.float32)],
                      {"dimension": 0, "is_stable": True, "num_keys": 1})
    with pytest.raises(ValueError, match="num_keys"):
        lx.sort((np.zeros(2, np.float32),), num_keys=2)
    with pytest.raises(ValueError, match="no larger than size"):
        api.make_jaxpr(lambda a: lx.top_k(a, 3))(np.zeros(2, np.float32))


def test_top_k() -> None:
    x = f32(3, 6)
    vals, idx = check_jaxpr_roundtrip(lambda a: lx.top_k(a, 2), [x])
    expected = -np.sort(-x, 1)[:, :2]
    assert_close(vals, expected)
    assert_close(np.take_along_axis(x, np.asarray(idx), 1), expected)
    check_grads(lambda a: lx.top_k(a, 3)[0], [x], 2)
    check_vmap(lambda a: lx.top_k(a, 2), [x], [1])
    vals0, _ = lx.top_k(x, 2, axis=0)
    assert_close(vals0, -np.sort(-x, 0)[:2])
    eqn = api.make_jaxpr(lambda a: lx.top_k(a, 2))(x).eqns[0]
    assert eqn.params == {"k": 2, "axis": 1}
