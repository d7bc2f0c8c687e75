"""Windowed reductions (reduce_window_sum/max/min, the general reduce_window,
select_and_gather_add, select_and_scatter_add): values against loops written
here, derivatives (orders 1-2, forward and reverse), vmap, jaxprs and errors."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import window_fft_reference
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx

RNG = np.random.RandomState(7)


@pytest.fixture(autouse=True, scope="module")
def _reference_impls() -> Iterator[None]:
    with window_fft_reference.installed():
        yield


def distinct(*shape: int) -> np.ndarray[Any, Any]:
    """Distinct values, so the max/min of every window is unique."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(np.float32) / n + 0.25).reshape(shape)


def loop_reduce(x: np.ndarray[Any, Any], init: float, op: Callable[[Any, Any], Any],
                window: tuple[int, ...], strides: tuple[int, ...],
                pads: list[tuple[int, int]], base: tuple[int, ...],
                wdil: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """A windowed reduction by explicit loops over output and window positions."""
    nd = x.ndim
    dil_shape = [(d - 1) * b + 1 for d, b in zip(x.shape, base)]
    padded_shape = [d + lo + hi for d, (lo, hi) in zip(dil_shape, pads)]
    eff = [(w - 1) * r + 1 for w, r in zip(window, wdil)]
    out_shape = [max(0, (p - e) // s + 1) if p >= e else 0
                 for p, e, s in zip(padded_shape, eff, strides)]
    out = np.full(out_shape, init, x.dtype)
    for o in np.ndindex(*out_shape):
        acc = init
        for k in itertools.product(*(range(w) for w in window)):
            pos = [o[i] * strides[i] + k[i] * wdil[i] - pads[i][0] for i in range(nd)]
            if all(0 <= p < dil_shape[i] and p % base[i] == 0 for i, p in enumerate(pos)):
                acc = op(acc, x[tuple(p // base[i] for i, p in enumerate(pos))])
            else:
                acc = op(acc, init)
        out[o] = acc
    return out


CASES = [
    ((2, 2), (1, 1), "VALID", (1, 1), (1, 1)),
    ((3, 2), (2, 1), "SAME", (1, 1), (1, 1)),
    ((2, 2), (1, 2), [(1, 0), (0, 2)], (1, 1), (1, 1)),
    ((2, 2), (1, 1), [(1, 1), (0, 0)], (2, 1), (1, 2)),
    ((2, 3), (2, 1), [(0, -1), (2, 1)], (1, 2), (2, 1)),
]


@pytest.mark.parametrize("window,strides,padding,base,wdil", CASES)
@pytest.mark.parametrize("monoid", ["sum", "max", "min"])
def test_values_match_loops(window: Any, strides: Any, padding: Any, base: Any, wdil: Any,
                            monoid: str) -> None:
    x = distinct(5, 6)
    init, op, comp = {"sum": (0.0, np.add, lx.add), "max": (-np.inf, np.maximum, lx.max),
                      "min": (np.inf, np.minimum, lx.min)}[monoid]
    pads = padding if not isinstance(padding, str) else lx.window_padtype_to_pads(
        [(d - 1) * b + 1 for d, b in zip(x.shape, base)],
        [(w - 1) * r + 1 for w, r in zip(window, wdil)], strides, padding)
    expected = loop_reduce(x, init, op, window, strides, list(pads), base, wdil)
    got = lx.reduce_window(x, init, comp, window, strides, padding, base, wdil)
    assert_close(got, expected)
    assert got.shape == lx.reduce_window_shape_tuple(x.shape, window, strides, pads, base, wdil)


def test_monoids_are_recognized_and_others_are_general() -> None:
    x = distinct(4, 4)
    prims = lambda f: [e.primitive.name for e in api.make_jaxpr(f)(x).jaxpr.eqns]  # noqa: E731
    assert prims(lambda x: lx.reduce_window(x, 0.0, lx.add, (2, 2), (1, 1), "VALID")) == \
        ["reduce_window_sum"]
    assert prims(lambda x: lx.reduce_window(x, -np.inf, lx.max, (2, 2), (1, 1), "VALID")) == \
        ["reduce_window_max"]
    assert prims(lambda x: lx.reduce_window(x, np.inf, lx.min, (2, 2), (1, 1), "VALID")) == \
        ["reduce_window_min"]
    assert prims(lambda x: lx.reduce_window(x, 1.0, lx.add, (2, 2), (1, 1), "VALID")) == \
        ["reduce_window"]


def test_general_reduce_window_product_and_pytree() -> None:
    x = distinct(3, 4)
    y = distinct(3, 4)
    got = lx.reduce_window(x, 1.0, lx.mul, (2, 2), (1, 1), "VALID")
    assert_close(got, loop_reduce(x, 1.0, np.multiply, (2, 2), (1, 1), [(0, 0)] * 2,
                                  (1, 1), (1, 1)), rtol=1e-5)
    # two operands reduced together: the (max, sum) pair
    out = lx.reduce_window((x, y), (-np.inf, 0.0),
                           lambda a, b: (lx.max(a[0], b[0]), lx.add(a[1], b[1])),
                           (2, 1), (1, 1), "VALID")
    assert_close(out[0], loop_reduce(x, -np.inf, np.maximum, (2, 1), (1, 1), [(0, 0)] * 2,
                                     (1, 1), (1, 1)))
    assert_close(out[1], loop_reduce(y, 0.0, np.add, (2, 1), (1, 1), [(0, 0)] * 2, (1, 1),
                                     (1, 1)))
    check_jaxpr_roundtrip(lambda x: lx.reduce_window(x, 1.0, lx.mul, (2, 2), (1, 1), "SAME"),
                          [x], rtol=1e-5)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]])
@pytest.mark.parametrize("comp,init", [(lx.add, 0.0), (lx.max, -np.inf), (lx.min, np.inf)])
def test_grads_orders_1_2(case: Any, comp: Any, init: float) -> None:
    window, strides, padding, base, wdil = case
    x = distinct(4, 5)
    check_grads(lambda x: lx.reduce_window(x, init, comp, window, strides, padding, base,
                                           wdil), [x], order=2, modes=("fwd", "rev"),
                atol=2e-2, rtol=2e-2)


def test_general_reduce_window_grads() -> None:
    # JAX differentiates a general body forward only; here reverse mode works too
    x = distinct(3, 4) + 0.5
    check_grads(lambda x: lx.reduce_window(x, 1.0, lx.mul, (2, 2), (1, 1), "SAME",
                                           window_dilation=(1, 2)), [x],
                order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2)
    y = distinct(3, 4)

    def softmax_pair(x: Any, y: Any, init: Any) -> Any:
        # a (max, weighted sum) pair reduced together, with a traced init value
        return lx.reduce_window((x, y), (init, 0.0),
                                lambda a, b: (lx.max(a[0], b[0]), a[1] + b[1] * b[0]),
                                (2, 2), (1, 1), [(1, 0), (0, 1)])

    check_grads(softmax_pair, [x, y, np.float32(0.1)], order=1, modes=("fwd", "rev"),
                atol=2e-2, rtol=2e-2)


def test_max_pool_gradient_goes_to_the_argmax() -> None:
    x = np.array([[1.0, 5.0, 2.0], [4.0, 3.0, 0.0]], np.float32)
    g = api.grad(lambda x: lx.reduce_window(x, -np.inf, lx.max, (2, 2), (1, 1),
                                            "VALID").sum())(x)
    assert_close(g, np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]], np.float32))
    jaxpr = api.make_jaxpr(api.grad(lambda x: lx.reduce_window(
        x, -np.inf, lx.max, (2, 2), (1, 1), "VALID").sum()))(x)
    assert "select_and_scatter_add" in [e.primitive.name for e in jaxpr.jaxpr.eqns]


def test_select_and_gather_and_scatter_are_transposes() -> None:
    x, t = distinct(4, 5), distinct(4, 5)
    args = dict(window_dimensions=(2, 2), window_strides=(2, 1), padding=[(0, 0), (1, 0)])
    gathered = lx.select_and_gather_add(t, x, lx.ge_p, **args)
    s = distinct(*np.shape(gathered))
    scattered = lx.select_and_scatter_add(s, x, lx.ge_p, **args)
    # <gather(t), s> == <t, scatter(s)>
    lhs = float(np.sum(np.asarray(gathered) * s))
    rhs = float(np.sum(t * np.asarray(scattered)))
    assert abs(lhs - rhs) < 1e-4
    check_grads(lambda s: lx.select_and_scatter_add(s, x, lx.le_p, **args), [s], order=2,
                atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap(in_axis: int) -> None:
    x = distinct(4, 5)
    for comp, init in [(lx.add, 0.0), (lx.max, -np.inf), (lx.mul, 1.0)]:
        check_vmap(lambda x, init=init, comp=comp: lx.reduce_window(
            x, init, comp, (2, 2), (1, 2), "SAME"), [x], [in_axis])
    check_vmap(api.grad(lambda x: lx.reduce_window(x, -np.inf, lx.max, (2, 2), (1, 1),
                                                   "VALID").sum()), [x], [in_axis])


def test_errors_name_the_function_and_argument() -> None:
    x = distinct(3, 3)
    with pytest.raises(TypeError, match="reduce_window.*window_dimensions has 1 entries"):
        lx.reduce_window(x, 0.0, lx.add, (2,), (1, 1), "VALID")
    with pytest.raises(TypeError, match="window_strides must be positive|every entry of "
                       "window_strides"):
        lx.reduce_window(x, 0.0, lx.add, (2, 2), (0, 1), "VALID")
    with pytest.raises(ValueError, match="padding must be"):
        lx.reduce_window(x, 0.0, lx.add, (2, 2), (1, 1), "FULL")
    with pytest.raises(TypeError, match="padding must be"):
        lx.reduce_window(x, 0.0, lx.add, (2, 2), (1, 1), [1, 2])
    with pytest.raises(TypeError, match="same structure"):
        lx.reduce_window((x, x), 0.0, lx.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match="must return scalars"):
        lx.reduce_window(x, 1.0, lambda a, b: lx.convert_element_type(a * b, np.int32),
                         (2, 2), (1, 1), "VALID")


def test_every_primitive_has_its_rules() -> None:
    from lamina_tracing_core.primitives import (abstract_eval_rules, batching_rules,
                                                jvp_rules, transpose_rules)
    prims = [lx.reduce_window_sum_p, lx.reduce_window_max_p, lx.reduce_window_min_p,
             lx.reduce_window_p, lx.select_and_gather_add_p, lx.select_and_scatter_add_p,
             lx.fft_p]
    linear = {"reduce_window_sum", "select_and_gather_add", "select_and_scatter_add", "fft"}
    for p in prims:
        assert p in abstract_eval_rules and p in batching_rules and p in jvp_rules, p
        assert (p in transpose_rules) == (p.name in linear), p


def test_shape_tuple() -> None:
    assert lx.reduce_window_shape_tuple((2,), (3,), (1,), [(0, 0)]) == (0,)
    assert lx.reduce_window_shape_tuple((5, 6), (2, 3), (2, 1), [(1, 0), (0, 0)],
                                        (2, 1), (1, 2)) == (5, 2)
