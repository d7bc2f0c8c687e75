"""dot_general and conv_general_dilated: numerics, dimension-number errors,
transposes (lhs and rhs, via VJP checks) and batching."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api, dtypes
from lamina_tracing_core import lax as lx
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.primitives import abstract_eval


RNG = np.random.RandomState(4)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


DOTS = [
    ("matmul", (2, 3), (3, 4), (((1,), (0,)), ((), ())), lambda a, b: a @ b),
    ("matvec", (2, 3), (3,), (((1,), (0,)), ((), ())), lambda a, b: a @ b),
    ("outer", (2,), (3,), (((), ()), ((), ())), np.outer),
    ("batched", (5, 2, 3), (5, 3, 4), (((2,), (1,)), ((0,), (0,))), lambda a, b: a @ b),
    ("contract2", (2, 3, 4), (4, 3), (((1, 2), (1, 0)), ((), ())),
     lambda a, b: np.einsum("ijk,kj->i", a, b)),
    ("batch_middle", (3, 5, 2), (2, 5), (((2,), (0,)), ((1,), (1,))),
     lambda a, b: np.einsum("imk,km->mi", a, b)),
]


@pytest.mark.parametrize("name,ls,rs,dn,ref", DOTS, ids=[d[0] for d in DOTS])
def test_dot_general(name: str, ls: tuple[int, ...], rs: tuple[int, ...], dn: Any,
                     ref: Any) -> None:
    a, b = f32(*ls), f32(*rs)
    fun = lambda x, y: lx.dot_general(x, y, dn)  # noqa: E731
    out = check_jaxpr_roundtrip(fun, [a, b], rtol=1e-5, atol=1e-5)
    assert_close(out, ref(a, b).astype(np.float32), rtol=1e-5, atol=1e-5)
    check_grads(fun, [a, b], 2)
    check_vmap(fun, [a, b], [0, 0], atol=1e-5)
    check_vmap(fun, [a, b], [None, len(rs)], atol=1e-5)
    check_vmap(fun, [a, b], [len(ls), None], atol=1e-5)


def test_dot_general_dtypes_and_params() -> None:
    a = np.ones((2, 3), np.int8)
    out = lx.dot_general(a, a, (((1,), (1,)), ((), ())), preferred_element_type=np.int32)
    assert_close(out, np.full((2, 2), 3, np.int32))
    closed = api.make_jaxpr(lambda x, y: lx.dot_general(x, y, (([1], [0]), ([], [])),
                                                        precision="highest"))(f32(2, 3), f32(3))
    params = closed.eqns[0].params
    assert params == {"dimension_numbers": (((1,), (0,)), ((), ())),
                      "precision": (lx.Precision.HIGHEST, lx.Precision.HIGHEST),
                      "preferred_element_type": None, "out_sharding": None}
    mixed = abstract_eval(lx.dot_general_p, [ShapedArray((2,), np.float32),
                                             ShapedArray((2,), np.float16)],
                          dict(dimension_numbers=(((0,), (0,)), ((), ())), precision=None,
                               preferred_element_type=None, out_sharding=None))
    assert mixed == [ShapedArray((), np.float32)]
    # As XLA (and JAX): the type with the larger exponent range wins a mix.
    mixed = abstract_eval(lx.dot_general_p, [ShapedArray((2,), np.float16),
                                             ShapedArray((2,), dtypes.bfloat16)],
                          dict(dimension_numbers=(((0,), (0,)), ((), ())), precision=None,
                               preferred_element_type=None, out_sharding=None))
    assert mixed == [ShapedArray((), dtypes.bfloat16)]
    assert_close(lx.dot(f32(2, 3), np.ones((3,), np.float32)).shape, (2,))
    x, y = f32(4, 2, 3), f32(4, 3, 5)
    assert_close(lx.batch_matmul(x, y), x @ y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dn,match", [
    ((((1,), (1,)), ((), ())), "contracting dimensions to have the same shape"),
    ((((3,), (0,)), ((), ())), "less than the number of axes of the lhs"),
    ((((1,), (0,)), ((0,), ())), "equal numbers of lhs_batch and rhs_batch"),
    ((((0,), (0,)), ((0,), (1,))), "disjoint"),
])
def test_dot_general_errors(dn: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        abstract_eval(lx.dot_general_p, [ShapedArray((3, 3), np.float32),
                                         ShapedArray((3, 4), np.float32)],
                      dict(dimension_numbers=dn, precision=None, preferred_element_type=None,
                           out_sharding=None))
    with pytest.raises(TypeError, match="must not be narrower"):
        abstract_eval(lx.dot_general_p, [ShapedArray((3,), np.int32),
                                         ShapedArray((3,), np.int32)],
                      dict(dimension_numbers=(((0,), (0,)), ((), ())), precision=None,
                           preferred_element_type=np.dtype(np.int8), out_sharding=None))
    with pytest.raises(ValueError, match="Precision argument"):
        lx.dot_general(f32(2), f32(2), (((0,), (0,)), ((), ())), precision="bogus")


CONVS = [
    # name, lhs shape, rhs shape, kwargs
    ("basic", (2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="VALID")),
    ("same_strided", (2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(2, 1), padding="SAME")),
    ("explicit_pad", (1, 2, 5, 5), (3, 2, 2, 2),
     dict(window_strides=(1, 2), padding=((1, 0), (2, 1)))),
    ("lhs_dilation", (1, 2, 4, 4), (2, 2, 2, 2),
     dict(window_strides=(1, 1), padding=((1, 1), (0, 0)), lhs_dilation=(2, 1))),
    ("rhs_dilation", (1, 2, 6, 6), (2, 2, 2, 2),
     dict(window_strides=(1, 1), padding="VALID", rhs_dilation=(2, 2))),
    ("feature_groups", (2, 4, 5, 5), (6, 2, 2, 2),
     dict(window_strides=(1, 1), padding="VALID", feature_group_count=2)),
    ("batch_groups", (4, 2, 5, 5), (6, 2, 2, 2),
     dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ("nhwc", (2, 5, 6, 3), (2, 3, 3, 4),
     dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("1d", (2, 3, 7), (4, 3, 3), dict(window_strides=(2,), padding="SAME")),
]


def _np_conv(lhs: Any, rhs: Any, window_strides: Any, padding: Any, lhs_dilation: Any = None,
             rhs_dilation: Any = None, dimension_numbers: Any = None, feature_group_count: int = 1,
             batch_group_count: int = 1) -> Any:
    """Independent reference: an explicit sum over the window (NCHW only)."""
    n, c, *sp = lhs.shape
    o, i, *ks = rhs.shape
    assert feature_group_count == batch_group_count == 1 and dimension_numbers is None
    assert lhs_dilation is None and rhs_dilation is None
    pads = lx.padtype_to_pads(sp, ks, window_strides, padding) if isinstance(padding, str) \
        else padding
    x = np.pad(lhs, [(0, 0), (0, 0)] + [tuple(p) for p in pads])
    out_sp = [(x.shape[2 + d] - ks[d]) // window_strides[d] + 1 for d in range(len(sp))]
    out = np.zeros((n, o, *out_sp), np.float64)
    for pos in np.ndindex(*out_sp):
        sl = tuple(slice(p * s, p * s + k) for p, s, k in zip(pos, window_strides, ks))
        patch = x[(slice(None), slice(None)) + sl]
        out[(slice(None), slice(None)) + pos] = np.tensordot(
            patch, rhs, axes=(list(range(1, patch.ndim)), list(range(1, rhs.ndim))))
    return out.astype(np.float32)


@pytest.mark.parametrize("name,ls,rs,kw", CONVS, ids=[c[0] for c in CONVS])
def test_conv_general_dilated(name: str, ls: tuple[int, ...], rs: tuple[int, ...],
                              kw: dict[str, Any]) -> None:
    a, b = f32(*ls), f32(*rs)
    fun = lambda x, y: lx.conv_general_dilated(x, y, **kw)  # noqa: E731
    out = check_jaxpr_roundtrip(fun, [a, b], rtol=1e-4, atol=1e-5)
    if name in ("basic", "same_strided", "explicit_pad", "1d"):
        assert_close(out, _np_conv(a, b, **kw), rtol=1e-4, atol=1e-5)
    check_grads(fun, [a, b], 1)
    check_vmap(fun, [a, b], [0, None], atol=1e-4)
    check_vmap(fun, [a, b], [None, 0], atol=1e-4)
    check_vmap(fun, [a, b], [1, 2], atol=1e-4)


def test_conv_params_and_errors() -> None:
    a, b = f32(1, 2, 4, 4), f32(3, 2, 2, 2)
    eqn = api.make_jaxpr(lambda x, y: lx.conv_general_dilated(x, y, (1, 1), "SAME"))(a, b).eqns[0]
    assert eqn.params["padding"] == ((0, 1), (0, 1))
    assert eqn.params["dimension_numbers"] == lx.ConvDimensionNumbers((0, 1, 2, 3),
                                                                      (0, 1, 2, 3),
                                                                      (0, 1, 2, 3))
    assert set(eqn.params) == {"window_strides", "padding", "lhs_dilation", "rhs_dilation",
                               "dimension_numbers", "feature_group_count",
                               "batch_group_count", "precision", "preferred_element_type",
                               "out_sharding"}
    with pytest.raises(ValueError, match="feature_group_count must divide"):
        api.make_jaxpr(lambda x, y: lx.conv_general_dilated(x, y, (1, 1), "SAME",
                                                            feature_group_count=3))(a, b)
    with pytest.raises(ValueError, match="must equal the rhs input feature"):
        api.make_jaxpr(lambda x, y: lx.conv_general_dilated(x, y, (1, 1), "SAME"))(
            a, f32(3, 3, 2, 2))
    with pytest.raises(TypeError, match="must contain the characters"):
        lx.conv_dimension_numbers((1, 2, 3), (1, 2, 3), ("NCW", "OIW", "NXW"))


def test_conv_transpose() -> None:
    x, k = f32(1, 5, 5, 2), f32(3, 3, 2, 4)
    out = lx.conv_transpose(x, k, (2, 2), "SAME")
    assert np.asarray(out).shape == (1, 10, 10, 4)
    out = lx.conv_transpose(x, k, (1, 1), "VALID")
    assert np.asarray(out).shape == (1, 7, 7, 4)
