"""Reductions, argmin/argmax, cumulative reductions, sort and top_k."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from lamina_tracing_core.lax import cumulative as cu
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import reductions as rd
from lamina_tracing_core.lax import sorting as so
from ml_build import JaxprBuilder, aval, local_prim
from ml_runner import lower_run, run

import lamina_mlir_lowering as ml
from lamina_mlir_lowering.lax_rules.reductions import reduce_lowering

F32 = np.float32
RNG = np.random.default_rng(2)

MONOIDS: list[tuple[str, Any, Callable[..., Any]]] = [
    ("reduce_sum", F32, np.sum), ("reduce_prod", F32, np.prod), ("reduce_max", F32, np.max),
    ("reduce_min", F32, np.min), ("reduce_max", np.int32, np.max),
    ("reduce_min", np.uint32, np.min), ("reduce_and", np.bool_, np.all),
    ("reduce_or", np.bool_, np.any), ("reduce_xor", np.int32, np.bitwise_xor.reduce),
    ("reduce_and", np.int32, np.bitwise_and.reduce), ("reduce_max", np.bool_, np.any),
]


@pytest.mark.parametrize("name,dtype,ref", MONOIDS, ids=[f"{m[0]}-{np.dtype(m[1])}"
                                                        for m in MONOIDS])
def test_monoid_reductions(name: str, dtype: Any, ref: Callable[..., Any]) -> None:
    if np.dtype(dtype) == np.bool_:
        x = RNG.integers(0, 2, (3, 4, 5)).astype(bool)
    elif np.dtype(dtype).kind in "iu":
        x = RNG.integers(0, 50, (3, 4, 5)).astype(dtype)
    else:
        x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(dtype)
    out, = lower_run(getattr(rd, f"{name}_p"), x, axes=(0, 2))
    np.testing.assert_allclose(out, ref(x, axis=(0, 2)), rtol=1e-5)


def test_argmax_argmin_nan_and_ties() -> None:
    x = np.array([[1.0, 3.0, 3.0, 0.0], [np.nan, 2.0, np.nan, 5.0], [-1.0, -1.0, -5.0, -5.0]],
                 F32)
    amax, = lower_run(rd.argmax_p, x, axes=(1,), index_dtype=np.dtype(np.int32))
    np.testing.assert_array_equal(amax, [1, 0, 0])   # first max; NaN wins
    amin, = lower_run(rd.argmin_p, x, axes=(1,), index_dtype=np.dtype(np.int32))
    np.testing.assert_array_equal(amin, [3, 0, 2])
    xi = RNG.integers(-9, 9, (4, 6)).astype(np.int32)
    out, = lower_run(rd.argmax_p, xi, axes=(0,), index_dtype=np.dtype(np.int32))
    np.testing.assert_array_equal(out, np.argmax(xi, axis=0))


CUMULATIVE = [("cumsum", np.cumsum), ("cumprod", np.cumprod),
              ("cummax", np.maximum.accumulate), ("cummin", np.minimum.accumulate),
              ("cumlogsumexp", np.logaddexp.accumulate)]


@pytest.mark.parametrize("name,ref", CUMULATIVE, ids=[c[0] for c in CUMULATIVE])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(name: str, ref: Callable[..., Any], reverse: bool) -> None:
    x = RNG.uniform(0.5, 1.5, (3, 5)).astype(F32)
    out, = lower_run(getattr(cu, f"{name}_p"), x, axis=1, reverse=reverse)
    expected = ref(x[:, ::-1], axis=1)[:, ::-1] if reverse else ref(x, axis=1)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_sort_single_operand_total_order() -> None:
    x = np.array([3.0, -0.0, np.nan, -np.inf, 0.0, 1.0, np.inf, -2.0], F32)
    out, = lower_run(so.sort_p, x, dimension=0, is_stable=True, num_keys=1)
    np.testing.assert_array_equal(out[:-1], np.sort(x)[:-1])
    assert np.isnan(out[-1])


def test_sort_multi_operand_keys_and_stability() -> None:
    keys = np.array([[2, 1, 2, 1, 0], [5, 5, 5, 5, 5]], np.int32)
    second = np.array([[9, 8, 7, 6, 5], [1, 0, 3, 2, 4]], np.int32)
    payload = np.arange(10, dtype=F32).reshape(2, 5)
    # One key: ties keep their order (stable); payload follows.
    k, s, p = lower_run(so.sort_p, keys, second, payload, dimension=1, is_stable=True,
                        num_keys=1)
    order = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(k, np.take_along_axis(keys, order, 1))
    np.testing.assert_array_equal(p, np.take_along_axis(payload, order, 1))
    # Two keys: lexicographic.
    k2, s2, p2 = lower_run(so.sort_p, keys, second, payload, dimension=1, is_stable=False,
                           num_keys=2)
    order2 = np.lexsort((second, keys), axis=1)
    np.testing.assert_array_equal(s2, np.take_along_axis(second, order2, 1))
    np.testing.assert_array_equal(p2, np.take_along_axis(payload, order2, 1))
    # Unsigned keys >= 2**31 sort as unsigned.
    u = np.array([2**31 + 1, 3, 2**32 - 1, 0], np.uint32)
    out, = lower_run(so.sort_p, u, dimension=0, is_stable=True, num_keys=1)
    np.testing.assert_array_equal(out, np.sort(u))


def test_top_k_last_and_inner_axis() -> None:
    x = RNG.permutation(24).astype(F32).reshape(4, 6)
    vals, idx = lower_run(so.top_k_p, x, k=2, axis=1)
    order = np.argsort(-x, axis=1)[:, :2]
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(vals, np.take_along_axis(x, order, 1))
    vals0, idx0 = lower_run(so.top_k_p, x, k=3, axis=0)
    order0 = np.argsort(-x, axis=0)[:3]
    np.testing.assert_array_equal(idx0, order0)
    np.testing.assert_array_equal(vals0, np.take_along_axis(x, order0, 0))


def test_generic_variadic_reduce_with_body_region() -> None:
    # reduce((x, y), (0, 1), lambda a, b: (a0 + b0, a1 * b1)) over axis 0.
    body = JaxprBuilder("reducer")
    a0 = body.arg((), F32)
    a1 = body.arg((), F32)
    b0 = body.arg((), F32)
    b1 = body.arg((), F32)
    s = body.eqn(ew.add_p, a0, b0)
    m = body.eqn(ew.mul_p, a1, b1)
    closed_body = body.build([s, m], [None, None])
    reduce_p = local_prim("reduce", reduce_lowering, multiple_results=True)
    b = JaxprBuilder("f")
    x = b.arg((4, 3), F32, "x")
    y = b.arg((4, 3), F32, "y")
    z0 = b.arg((), F32, "z0")
    z1 = b.arg((), F32, "z1")
    outs = b.eqn(reduce_p, x, y, z0, z1, out_avals=[aval((3,), F32), aval((3,), F32)],
                 computation=None, jaxpr=closed_body, dimensions=(0,))
    result = ml.lower_jaxpr_to_module("jit_f", b.build(outs))
    xv = RNG.uniform(1, 2, (4, 3)).astype(F32)
    yv = RNG.uniform(1, 2, (4, 3)).astype(F32)
    s_out, p_out = run(result, xv, yv, np.array(0, F32), np.array(1, F32))
    np.testing.assert_allclose(s_out, xv.sum(0), rtol=1e-6)
    np.testing.assert_allclose(p_out, yv.prod(0), rtol=1e-6)
