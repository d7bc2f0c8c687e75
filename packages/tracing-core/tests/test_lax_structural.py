"""Shape-changing lax primitives (iota, broadcast_in_dim, reshape, squeeze,
expand_dims, transpose, rev, pad, concatenate, slice) and the functions over
them: numerics, abstract-eval errors, transposes (via VJP checks), vmap."""

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


RNG = np.random.RandomState(1)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


CASES: list[tuple[str, Callable[..., Any], list[Any], Callable[..., Any], list[list[Any]]]] = [
    ("broadcast_in_dim", lambda x: lx.broadcast_in_dim(x, (4, 2, 3), (1, 2)), [f32(2, 3)],
     lambda x: np.broadcast_to(x, (4, 2, 3)), [[0], [1]]),
    ("broadcast_in_dim_unit", lambda x: lx.broadcast_in_dim(x, (2, 3), (0, 1)), [f32(2, 1)],
     lambda x: np.broadcast_to(x, (2, 3)), [[0], [1]]),
    ("broadcast", lambda x: lx.broadcast(x, (2,)), [f32(3)],
     lambda x: np.broadcast_to(x, (2, 3)), [[0]]),
    ("reshape", lambda x: lx.reshape(x, (3, 2)), [f32(2, 3)], lambda x: x.reshape(3, 2),
     [[0], [1]]),
    ("reshape_dims", lambda x: lx.reshape(x, (6,), (1, 0)), [f32(2, 3)],
     lambda x: x.T.reshape(6), [[0], [2]]),
    ("squeeze", lambda x: lx.squeeze(x, (1,)), [f32(2, 1, 3)], lambda x: x[:, 0],
     [[0], [2]]),
    ("expand_dims", lambda x: lx.expand_dims(x, (0, 2)), [f32(2, 3)],
     lambda x: x[None, :, None], [[0], [1]]),
    ("transpose", lambda x: lx.transpose(x, (2, 0, 1)), [f32(2, 3, 4)],
     lambda x: np.transpose(x, (2, 0, 1)), [[0], [1], [3]]),
    ("rev", lambda x: lx.rev(x, (0, 2)), [f32(2, 3, 4)], lambda x: x[::-1, :, ::-1],
     [[0], [2]]),
    ("pad", lambda x: lx.pad(x, np.float32(0.5), ((1, 2, 1), (0, -1, 0))), [f32(2, 3)],
     None, [[0], [1]]),
    ("pad_value", lambda x, v: lx.pad(x, v, ((1, 0, 0), (2, 1, 1))), [f32(2, 3), np.float32(2)],
     None, [[0, None], [None, 0], [1, 0]]),
    ("concatenate", lambda x, y: lx.concatenate([x, y], 1), [f32(2, 3), f32(2, 2)],
     lambda x, y: np.concatenate([x, y], 1), [[0, 0], [None, 1], [1, None]]),
    ("slice", lambda x: lx.slice(x, (0, 1), (2, 3)), [f32(3, 4)], lambda x: x[0:2, 1:3],
     [[0], [1]]),
    ("slice_strided", lambda x: lx.slice(x, (0, 1), (3, 4), (2, 2)), [f32(3, 4)],
     lambda x: x[0:3:2, 1:4:2], [[0], [2]]),
    ("slice_in_dim", lambda x: lx.slice_in_dim(x, 1, None, 2, axis=1), [f32(2, 5)],
     lambda x: x[:, 1::2], [[0]]),
    ("index_in_dim", lambda x: lx.index_in_dim(x, -1, 1, keepdims=False), [f32(2, 5)],
     lambda x: x[:, -1], [[1]]),
    ("collapse", lambda x: lx.collapse(x, 1, 3), [f32(2, 3, 4)],
     lambda x: x.reshape(2, 12), [[2]]),
]


@pytest.mark.parametrize("name,fun,args,ref,axes", CASES, ids=[c[0] for c in CASES])
def test_structural(name: str, fun: Callable[..., Any], args: list[Any],
                    ref: Callable[..., Any] | None, axes: list[list[Any]]) -> None:
    out = check_jaxpr_roundtrip(fun, args)
    if ref is not None:
        assert_close(out, ref(*args))
    check_grads(fun, args, 2)
    for in_axes in axes:
        check_vmap(fun, args, in_axes)


def test_pad_numerics() -> None:
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    out = lx.pad(x, np.float32(0), ((1, 0, 1), (0, -1, 0)))
    expected = np.array([[0, 0], [1, 2], [0, 0], [4, 5]], np.float32)
    assert_close(out, expected)


def test_iota() -> None:
    assert_close(lx.iota(np.int32, 4), np.arange(4, dtype=np.int32))
    out = check_jaxpr_roundtrip(lambda: lx.broadcasted_iota(np.float32, (2, 3), 1), [])
    assert_close(out, np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    eqn = api.make_jaxpr(lambda: lx.iota(np.int32, 4))().eqns[0]
    assert eqn.params == {"dtype": np.dtype(np.int32), "shape": (4,), "dimension": 0,
                          "sharding": None}


def test_full_and_friends() -> None:
    assert_close(lx.full((2, 3), 1.5), np.full((2, 3), 1.5, np.float32))
    assert_close(lx.full((2,), 1, np.int8), np.full((2,), 1, np.int8))
    x = np.ones((2, 2), np.int32)
    assert_close(lx.full_like(x, 3), np.full((2, 2), 3, np.int32))
    assert_close(lx.zeros_like_array(x), np.zeros((2, 2), np.int32))
    closed = api.make_jaxpr(lambda: lx.full((2,), 1.0))()
    assert closed.out_avals[0] == ShapedArray((2,), np.float32, True)
    closed = api.make_jaxpr(lambda: lx.full((2,), 1.0, np.float32))()
    assert closed.out_avals[0] == ShapedArray((2,), np.float32, False)
    with pytest.raises(TypeError, match="scalar fill_value"):
        lx.full((2,), np.ones(2))


def test_identity_shape_ops_add_no_equations() -> None:
    x = f32(2, 3)
    jaxpr = api.make_jaxpr(lambda a: lx.transpose(lx.reshape(lx.squeeze(a, ()), (2, 3)),
                                                  (0, 1)))(x)
    assert not jaxpr.eqns
    jaxpr = api.make_jaxpr(lambda a: (lx.broadcast_in_dim(a, (2, 3), (0, 1)),
                                      lx.slice(a, (0, 0), (2, 3)),
                                      lx.concatenate([a], 0)))(x)
    assert not jaxpr.eqns


ABSTRACT_ERRORS = [
    ("bid rank", broadcast := lx.broadcast_in_dim_p,
     [ShapedArray((2, 3), np.float32)], {"shape": (2, 3), "broadcast_dimensions": (0,),
                                          "sharding": None},
     "must have length equal to operand ndim"),
    ("bid size", broadcast, [ShapedArray((2, 3), np.float32)],
     {"shape": (2, 4), "broadcast_dimensions": (0, 1), "sharding": None},
     "must either be 1, or be equal"),
    ("bid order", broadcast, [ShapedArray((2, 2), np.float32)],
     {"shape": (2, 2), "broadcast_dimensions": (1, 0), "sharding": None}, "strictly increasing"),
    ("reshape size", lx.reshape_p, [ShapedArray((2, 3), np.float32)],
     {"new_sizes": (4,), "dimensions": None, "sharding": None}, "total size must be unchanged"),
    ("reshape dims", lx.reshape_p, [ShapedArray((2, 3), np.float32)],
     {"new_sizes": (6,), "dimensions": (0, 0), "sharding": None}, "must be a permutation"),
    ("squeeze size", lx.squeeze_p, [ShapedArray((2, 3), np.float32)], {"dimensions": (0,)},
     "size not equal to one"),
    ("transpose perm", lx.transpose_p, [ShapedArray((2, 3), np.float32)],
     {"permutation": (0, 0)}, "isn't a permutation"),
    ("rev dims", lx.rev_p, [ShapedArray((2, 3), np.float32)], {"dimensions": (2,)},
     "rev dimensions must all be"),
    ("pad config", lx.pad_p, [ShapedArray((2, 3), np.float32), ShapedArray((), np.float32)],
     {"padding_config": ((0, 0, 0),)}, "length of padding_config"),
    ("pad neg", lx.pad_p, [ShapedArray((2,), np.float32), ShapedArray((), np.float32)],
     {"padding_config": ((-3, 0, 0),)}, "not at least 0"),
    ("pad value", lx.pad_p, [ShapedArray((2,), np.float32), ShapedArray((1,), np.float32)],
     {"padding_config": ((0, 0, 0),)}, "must be a scalar"),
    ("pad dtype", lx.pad_p, [ShapedArray((2,), np.float32), ShapedArray((), np.int32)],
     {"padding_config": ((0, 0, 0),)}, "same dtypes"),
    ("concat shapes", lx.concatenate_p, [ShapedArray((2, 3), np.float32),
                                         ShapedArray((3, 3), np.float32)], {"dimension": 1},
     "differ in dimensions other than"),
    ("concat dim", lx.concatenate_p, [ShapedArray((2, 3), np.float32)], {"dimension": 2},
     "out of bounds"),
    ("slice limit", lx.slice_p, [ShapedArray((2, 3), np.float32)],
     {"start_indices": (0, 0), "limit_indices": (3, 3), "strides": None}, "less than or equal"),
    ("slice stride", lx.slice_p, [ShapedArray((2, 3), np.float32)],
     {"start_indices": (0, 0), "limit_indices": (2, 3), "strides": (0, 1)}, "positive"),
    ("iota dim", lx.iota_p, [], {"dtype": np.dtype(np.int32), "shape": (2,), "dimension": 1,
                                 "sharding": None}, "iota dimension must be"),
    ("iota dtype", lx.iota_p, [], {"dtype": np.dtype(bool), "shape": (2,), "dimension": 0,
                                   "sharding": None}, "iota does not accept dtype bool"),
]


@pytest.mark.parametrize("what,prim,avals,params,match", ABSTRACT_ERRORS,
                         ids=[e[0] for e in ABSTRACT_ERRORS])
def test_abstract_eval_errors(what: str, prim: Any, avals: list[ShapedArray],
                              params: dict[str, Any], match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        abstract_eval(prim, avals, params)


def test_user_function_errors() -> None:
    with pytest.raises(ValueError, match="repeated axis"):
        lx.expand_dims(f32(2), (0, 0))
    with pytest.raises(ValueError, match="out of bounds"):
        lx.squeeze(f32(1, 2), (3,))
    with pytest.raises(IndexError, match="out of bounds"):
        lx.index_in_dim(f32(2, 3), 5, 1)
    with pytest.raises(TypeError, match="shapes must be"):
        lx.reshape(f32(2), ("a",))


def test_weak_types_preserved() -> None:
    out = api.make_jaxpr(lambda x: lx.reshape(lx.broadcast(x, (2,)), (2, 1)))(1.0)
    assert out.out_avals[0] == ShapedArray((2, 1), np.float32, True)
