"""The jax.numpy names added for issue 20: index tricks, set operations, ufunc
objects, array edits, vectorize and friends, histograms, polynomials, window
functions and the integer/float helpers. Expected values are JAX 0.10.2's
(where NumPy agrees with it, NumPy computes them); "traced" checks run the
function staged (make_jaxpr, then the jaxpr) as jit would."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_tracing_core as tc
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.errors import ConcretizationTypeError


def staged(fun: Any, *args: Any) -> Any:
    """``fun(*args)`` run as a staged jaxpr (what jit compiles)."""
    closed = tc.make_jaxpr(fun)(*args)
    out = tc.core.jaxpr_as_fun(closed)(*args)
    return out[0] if len(out) == 1 else tuple(out)


def check(actual: Any, expected: Any, dtype: Any = None, rtol: float = 0.0) -> None:
    if rtol:
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(np.asarray(actual), expected)
    if dtype is not None:
        assert np.asarray(actual).dtype == np.dtype(dtype)


def out_avals(fun: Any, *args: Any) -> list[Any]:
    """The result types of ``fun`` traced (shapes, dtypes and weak types)."""
    return list(tc.make_jaxpr(fun)(*args).out_avals)


# --- index tricks ------------------------------------------------------------------------------
def test_mgrid_ogrid() -> None:
    check(jnp.mgrid[0:3, 0:2], np.mgrid[0:3, 0:2], np.int32)
    check(jnp.mgrid[0:1:5j], [0.0, 0.25, 0.5, 0.75, 1.0], np.float32)
    check(jnp.mgrid[0.0:1.0:0.5], [0.0, 0.5], np.float32)
    grids = jnp.ogrid[0:3, 0:2]
    assert isinstance(grids, list) and len(grids) == 2
    check(grids[0], [[0], [1], [2]], np.int32)
    check(grids[1], [[0, 1]], np.int32)
    check(jnp.ogrid[0:3], [0, 1, 2], np.int32)
    with pytest.raises(TypeError, match="mgrid: indices must be slices"):
        jnp.mgrid[1]  # noqa: B018 - the indexing is the call under test


def test_r_c_s_index_exp() -> None:
    check(jnp.r_[1, 2, jnp.array([3, 4])], [1, 2, 3, 4], np.int32)
    check(jnp.r_[0:4, 1.5], [0, 1, 2, 3, 1.5], np.float32)
    assert out_avals(lambda a: jnp.r_[0:4, a], 1.5)[0].weak_type
    check(jnp.r_["0,2", [1, 2], [3, 4]], [[1, 2], [3, 4]])
    check(jnp.r_["0,2,0", [1, 2], [3, 4]], [[1], [2], [3], [4]])
    check(jnp.r_["-1", [[1, 2]], [[3, 4]]], [[1, 2, 3, 4]])
    check(jnp.r_["r", [1, 2]], [[1, 2]])
    check(jnp.r_[0:1:3j], [0.0, 0.5, 1.0], np.float32)
    check(jnp.c_[jnp.array([1, 2, 3]), jnp.array([4, 5, 6])], [[1, 4], [2, 5], [3, 6]])
    assert jnp.s_[1:2, ::3] == (slice(1, 2), slice(None, None, 3))
    assert jnp.s_[3] == 3 and jnp.index_exp[1] == (1,)
    with pytest.raises(ValueError, match="could not understand directive 'x'"):
        jnp.r_["x", [1]]
    with pytest.raises(ValueError, match="string directive must come first"):
        jnp.r_[[1], "0"]


# --- set operations ----------------------------------------------------------------------------
A = np.array([3, 1, 2, 2, 5], np.int8)
B = np.array([2, 7, 3], np.int8)


@pytest.mark.parametrize("name, exact, size6, size2, filled", [
    ("union1d", [1, 2, 3, 5, 7], [1, 2, 3, 5, 7, 1], [1, 2], [1, 2, 3, 5, 7, -1]),
    ("setdiff1d", [1, 5], [1, 5, 0, 0, 0, 0], [1, 5], [1, 5, -1, -1, -1, -1]),
    ("setxor1d", [1, 5, 7], [1, 5, 7, 1, 1, 1], [1, 5], [1, 5, 7, -1, -1, -1]),
    ("intersect1d", [2, 3], [2, 3, 2, 2, 2, 2], [2, 3], [2, 3, -1, -1, -1, -1]),
])
def test_set_operations(name: str, exact: list[int], size6: list[int], size2: list[int],
                        filled: list[int]) -> None:
    fun = getattr(jnp, name)
    check(fun(A, B), exact, np.int8)
    check(fun(A, B, size=2), size2, np.int8)
    check(fun(A, B, size=6, fill_value=-1), filled, np.int8)
    check(staged(lambda a, b: fun(a, b, size=6), A, B), size6, np.int8)
    with pytest.raises(ConcretizationTypeError, match=f"{name}.*give the size argument"):
        tc.make_jaxpr(fun)(A, B)


def test_intersect1d_indices_and_vmap() -> None:
    values, i1, i2 = jnp.intersect1d(A, B, return_indices=True)
    check(values, [2, 3], np.int8)
    check(i1, [2, 0], np.int32)
    check(i2, [0, 2], np.int32)
    values, i1, i2 = staged(lambda a, b: jnp.intersect1d(a, b, return_indices=True, size=4),
                            A, B)
    check(values, [2, 3, 2, 2])
    check(i1, [2, 0, 5, 5])
    check(i2, [0, 2, 3, 3])
    rows = np.array([[1, 2, 3], [3, 4, 4]], np.int32)
    check(tc.vmap(lambda r: jnp.union1d(r, np.array([4], np.int32), size=4))(rows),
          [[1, 2, 3, 4], [3, 4, 3, 3]])


def test_unique_functions() -> None:
    res = jnp.unique_all(A)
    check(res.values, [1, 2, 3, 5], np.int8)
    check(res.indices, [1, 2, 0, 4], np.int32)
    check(res.inverse_indices, [2, 0, 1, 1, 3], np.int32)
    check(res.counts, [1, 2, 1, 1], np.int32)
    sized = staged(lambda a: tuple(jnp.unique_all(a, size=6)), A)
    check(sized[0], [1, 2, 3, 5, 1, 1])
    check(sized[1], [1, 2, 0, 4, 1, 1])
    check(sized[2], [2, 0, 1, 1, 3])
    check(sized[3], [1, 2, 1, 1, 0, 0])
    counts = jnp.unique_counts(A)
    check(counts.values, [1, 2, 3, 5])
    check(counts.counts, [1, 2, 1, 1])
    inverse = jnp.unique_inverse(np.array([[1, 2], [2, 3]], np.int32))
    check(inverse.inverse_indices, [[0, 1], [1, 2]])
    check(jnp.unique_values(A), [1, 2, 3, 5], np.int8)
    check(jnp.union1d(np.array([1.0, np.nan], np.float32), np.array([np.nan], np.float32)),
          [1.0, np.nan])


# --- ufunc objects -----------------------------------------------------------------------------
X = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_ufunc_objects_attributes() -> None:
    assert isinstance(jnp.add, jnp.ufunc) and repr(jnp.add) == "<jnp.ufunc 'add'>"
    assert (jnp.add.nin, jnp.add.nout, jnp.add.identity) == (2, 1, 0)
    assert jnp.multiply.identity == 1 and jnp.maximum.identity is None
    assert jnp.bitwise_and.identity == -1 and jnp.logaddexp.identity == -np.inf
    assert jnp.negative.nin == 1
    check(jnp.add(1, 2), 3, np.int32)
    assert out_avals(lambda: jnp.add(1, 2))[0].weak_type
    with pytest.raises(jnp.UnsupportedArgumentError, match="out argument"):
        jnp.add(1, 2, out=np.zeros(()))


def test_ufunc_reduce() -> None:
    check(jnp.add.reduce(X), [3, 5, 7])
    check(jnp.add.reduce(X, axis=None), 15.0)
    check(jnp.add.reduce(X, axis=(0, 1)), 15.0)
    check(jnp.multiply.reduce(X, axis=1, keepdims=True), [[0.0], [60.0]])
    check(jnp.maximum.reduce(X, axis=1), [2, 5])
    check(jnp.subtract.reduce(np.arange(4, dtype=np.float32)), -6.0)
    check(jnp.logaddexp.reduce(X, axis=1), [2.407606, 5.407606], rtol=1e-6)
    check(jnp.add.reduce(np.arange(3), initial=10, where=np.array([True, False, True])), 12)
    check(jnp.add.reduce(np.array([1, 2], np.int8)), 3, np.int32)
    check(jnp.bitwise_or.reduce(np.array([1, 2, 4], np.int32)), 7)
    check(jnp.logical_and.reduce(np.array([True, False])), False)
    with pytest.raises(ValueError, match="reduce only supported for binary ufuncs"):
        jnp.negative.reduce(X)
    with pytest.raises(ValueError, match="zero-size array to reduction operation max which"):
        jnp.maximum.reduce(np.zeros((0,), np.float32))
    with pytest.raises(ValueError, match="has no identity; give initial="):
        jnp.subtract.reduce(X, where=np.ones((2, 3), bool))
    check(staged(lambda x: jnp.subtract.reduce(x, axis=1), X), [-3.0, -6.0])


def test_ufunc_accumulate_outer_at_reduceat() -> None:
    check(jnp.add.accumulate(X, axis=1), [[0, 1, 3], [3, 7, 12]])
    check(jnp.add.accumulate(np.arange(4), dtype="float32"), [0, 1, 3, 6], np.float32)
    check(jnp.maximum.accumulate(np.array([1, 3, 2, 5], np.int32)), [1, 3, 3, 5])
    check(jnp.logaddexp.accumulate(np.arange(4, dtype=np.float32)),
          [0.0, 1.3132617, 2.4076061, 3.4401898], rtol=1e-6)
    check(staged(jnp.subtract.accumulate, np.arange(4, dtype=np.float32)), [0, -1, -3, -6])
    check(jnp.add.outer(np.arange(2), np.arange(3)), [[0, 1, 2], [1, 2, 3]])
    check(jnp.multiply.outer(np.arange(2.0), np.ones((2, 2))).shape, (2, 2, 2))
    with pytest.raises(jnp.UnsupportedArgumentError, match="inplace=False"):
        jnp.add.at(np.zeros(3), np.array([0, 0, 2]), 1.0)
    check(jnp.add.at(np.zeros(3, np.float32), np.array([0, 0, 2]), 1.0, inplace=False),
          [2, 0, 1])
    check(jnp.minimum.at(np.ones(3, np.float32), 1, 0.0, inplace=False), [1, 0, 1])
    check(jnp.logaddexp.at(np.ones(3, np.float32), np.array([1, 1]), 0.0, inplace=False),
          [1.0, 1.5514448, 1.0], rtol=1e-6)
    check(jnp.add.reduceat(np.arange(8.0, dtype=np.float32), np.array([0, 4, 1, 5])),
          [6, 4, 10, 18])
    check(jnp.subtract.reduceat(np.arange(6.0, dtype=np.float32), np.array([0, 3])),
          np.subtract.reduceat(np.arange(6.0), [0, 3]))


def test_ufunc_transformations() -> None:
    g = tc.grad(lambda x: jnp.multiply.reduce(x))(np.array([2.0, 3.0, 4.0], np.float32))
    check(g, [12.0, 8.0, 6.0])
    g = tc.grad(lambda x: jnp.logaddexp.reduce(x))(np.zeros(2, np.float32))
    check(g, [0.5, 0.5], rtol=1e-6)
    check(tc.vmap(lambda r: jnp.subtract.accumulate(r))(X), [[0, -1, -3], [3, -1, -6]])
    my = jnp.frompyfunc(lambda a, b: a * 2 + b, 2, 1, identity=0)
    assert isinstance(my, jnp.ufunc)
    check(my.reduce(np.array([1.0, 2.0, 3.0], np.float32)), 11.0)


# --- array edits -------------------------------------------------------------------------------
M = np.arange(6, dtype=np.int32).reshape(2, 3)


def test_insert() -> None:
    for obj, values, axis in [(1, 9, None), (1, 9, 1), (np.array([0, 2]), np.array([7, 8]), 1),
                              (3, np.array([[1], [2]]), 1), (slice(0, 2), 7, None),
                              (np.array([1, 1]), np.array([7, 8]), None)]:
        check(jnp.insert(M, obj, values, axis=axis), np.insert(M, obj, values, axis=axis),
              np.int32)
    check(jnp.insert(np.arange(3.0, dtype=np.float32), 1, 5), [0, 5, 1, 2], np.float32)
    check(staged(lambda x: jnp.insert(x, 1, 9.0), np.arange(3, dtype=np.float32)),
          [0, 9, 1, 2])
    with pytest.raises(ValueError, match="insert: the index array must be integer"):
        jnp.insert(M, np.array([1.0]), 0)


def test_delete() -> None:
    for obj, axis in [(1, None), (0, 1), (np.array([0, 2]), 1), (slice(0, 2), 1), (-1, 0)]:
        check(jnp.delete(M, obj, axis=axis), np.delete(M, obj, axis=axis), np.int32)
    check(jnp.delete(np.arange(5), np.array([True, False, True, False, False])), [1, 3, 4])
    check(staged(lambda i: jnp.delete(np.arange(5), i, assume_unique_indices=True),
                 np.array([1, 3])), [0, 2, 4])
    with pytest.raises(ConcretizationTypeError, match="assume_unique_indices=True"):
        tc.make_jaxpr(lambda i: jnp.delete(np.arange(5), i))(np.array([1]))


def test_put_put_along_axis_fill_diagonal_resize_block() -> None:
    with pytest.raises(ValueError, match="put cannot modify arrays in place"):
        jnp.put(np.arange(5), 1, 9)
    check(jnp.put(np.arange(5), np.array([1, 7]), np.array([9, 8]), inplace=False),
          [0, 9, 2, 3, 8])
    check(jnp.put(np.arange(5), np.array([1, 7]), np.array([9, 8]), mode="wrap",
                  inplace=False), [0, 9, 8, 3, 4])
    check(jnp.put(M, np.array([-1, 9]), 7, inplace=False), [[0, 1, 2], [3, 4, 7]])
    check(jnp.put_along_axis(M, np.array([[0], [2]]), 9, axis=1, inplace=False),
          [[9, 1, 2], [3, 4, 9]])
    check(staged(lambda v: jnp.put_along_axis(M, np.array([[1], [0]]), v, axis=1,
                                              inplace=False), np.int32(5)),
          [[0, 5, 2], [5, 4, 5]])
    check(jnp.fill_diagonal(np.zeros((3, 3), np.float32), 2.0, inplace=False), np.eye(3) * 2)
    check(jnp.diag_indices_from(np.zeros((2, 2)))[0], [0, 1])
    check(jnp.resize(np.arange(3), (2, 4)), np.resize(np.arange(3), (2, 4)))
    blocks = [[np.ones((1, 2), np.float32), np.zeros((1, 1), np.float32)],
              [np.zeros((1, 3), np.float32)]]
    check(jnp.block(blocks), np.block(blocks))
    check(jnp.block([1, 2]), [1, 2], np.int32)
    assert out_avals(lambda a: jnp.block([a, a]), 1)[0].weak_type
    check(jnp.block(3.0), 3.0)
    with pytest.raises(ValueError, match="mismatched list depths"):
        jnp.block([[1], 2])


# --- vectorize and friends ---------------------------------------------------------------------
def test_vectorize_signature_and_excluded() -> None:
    matvec = jnp.vectorize(lambda a, b: a @ b, signature="(n,m),(m)->(n)")
    assert matvec(np.ones((4, 2, 3), np.float32), np.arange(3.0)).shape == (4, 2)
    assert matvec(np.ones((2, 3), np.float32), np.ones((5, 3))).shape == (5, 2)
    power = jnp.vectorize(lambda x, p: x ** p, excluded={1})
    check(power(np.arange(3.0, dtype=np.float32), 2), [0, 1, 4])
    stats = jnp.vectorize(lambda x: (x.sum(), x.max()), signature="(n)->(),()")
    total, top = stats(X)
    check(total, [3, 12])
    check(top, [2, 5])
    check(jnp.vectorize(lambda x, y: x + y)(np.ones((2, 1)), np.arange(3.0)),
          np.ones((2, 1)) + np.arange(3.0))
    with pytest.raises(ValueError, match="fewer dimensions than its core dimensions"):
        jnp.vectorize(lambda x: x, signature="(n)->(n)")(np.float32(1))
    with pytest.raises(ValueError, match="does not match its core dimensions"):
        jnp.vectorize(lambda x: x.sum(), signature="(n)->(n)")(np.ones(3))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(lambda x: x, signature="n->n")
    g = tc.grad(lambda x: jnp.vectorize(lambda v: v ** 3)(x).sum())(np.ones(3, np.float32))
    check(g, [3, 3, 3])


def test_apply_along_over_axes_piecewise() -> None:
    check(jnp.apply_along_axis(lambda r: r.sum(), 1, X), [3, 12])
    check(jnp.apply_along_axis(lambda r: jnp.stack([r.min(), r.max()]), 0, X),
          [[0, 1, 2], [3, 4, 5]])
    cube = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    check(jnp.apply_over_axes(jnp.sum, cube, [0, 2]), np.apply_over_axes(np.sum, cube, [0, 2]))
    x = np.linspace(-2, 2, 5).astype(np.float32)
    check(jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2]),
          [2, 1, 0, 1, 4])
    check(jnp.piecewise(x, [x < -1, x > 1], [-1, 1, lambda v: v * 10]), [-1, -10, 0, 10, 1])
    check(jnp.piecewise(np.arange(4), [np.arange(4) > 1], [lambda v: v * 2]), [0, 0, 4, 6])
    g = tc.grad(lambda v: jnp.piecewise(v, [v < 0], [lambda t: -t, lambda t: t ** 2]))
    check(g(np.float32(3.0)), 6.0)
    with pytest.raises(ValueError, match="piecewise: with 2 condition"):
        jnp.piecewise(x, [x < 0, x > 0], [1, 2, 3, 4])


# --- histograms --------------------------------------------------------------------------------
H = np.array([0.1, 0.5, 0.5, 0.9, 1.0, 2.0, -1.0], np.float32)


def test_histogram() -> None:
    counts, edges = jnp.histogram(H, 4)
    check(counts, [1, 1, 4, 1], np.float32)
    check(edges, [-1.0, -0.25, 0.5, 1.25, 2.0], np.float32)
    counts, _ = jnp.histogram(H, 3, range=(0.0, 1.0), density=True)
    check(counts, [0.6, 1.2, 1.2], rtol=1e-6)
    counts, _ = jnp.histogram(H, np.array([0.0, 0.5, 1.0]), weights=np.arange(7.0))
    check(counts, [0, 10])
    counts, edges = jnp.histogram(np.array([3, 3, 3]), 2)
    check(counts, [0, 3])
    check(edges, [2.5, 3.0, 3.5], np.float32)
    check(jnp.histogram_bin_edges(np.arange(5), 4), [0, 1, 2, 3, 4], np.float32)
    counts, _ = staged(lambda d: jnp.histogram(d, 4), H)
    check(counts, [1, 1, 4, 1])
    with pytest.raises(jnp.UnsupportedArgumentError, match="string values for bins"):
        jnp.histogram(H, "auto")


def test_histogram2d_dd() -> None:
    hist, ex, ey = jnp.histogram2d(np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.0, 0.2]), bins=2)
    check(hist, [[0, 1], [2, 0]], np.int32)
    check(ex, [0, 0.5, 1])
    check(ey, [0, 0.5, 1])
    hist, _, ey = jnp.histogram2d(np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.0, 0.2]),
                                  bins=[2, 3], density=True)
    check(hist, [[0, 0, 2], [4, 0, 0]], rtol=1e-6)
    hist, edges = jnp.histogramdd(np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 0.0]]), bins=2,
                                  weights=np.array([2.0, 3.0]))
    check(hist, [[[0, 0], [0, 2]], [[0, 0], [3, 0]]], np.float32)
    check(edges[1], [0.5, 1.0, 1.5])
    g = tc.grad(lambda w: jnp.histogram(H, 2, weights=w)[0][1])(np.ones(7, np.float32))
    check(g, [0, 1, 1, 1, 1, 1, 0])


# --- polynomials -------------------------------------------------------------------------------
def test_polynomial_arithmetic() -> None:
    i = np.array([1, 2, 3], np.int32)
    f = np.array([1.0, 0.5], np.float32)
    check(jnp.polyadd(i, np.array([1, 1], np.int32)), [1, 3, 4], np.int32)
    check(jnp.polyadd(i, f), [1, 3, 3.5], np.float32)
    check(jnp.polysub(f, i), [-1, -1, -2.5], np.float32)
    check(jnp.polymul(i, np.array([1, 1])), [1, 3, 5, 3], np.float32)
    check(jnp.polymul(np.array([0.0, 1.0]), f, trim_leading_zeros=True), [1, 0.5])
    check(jnp.polyder(i), [2, 2], np.float32)
    check(jnp.polyder(np.array([1.0, 2, 3, 4]), 2), [6, 4])
    check(jnp.polyder(i, 5), np.zeros(0))
    check(jnp.polyint(i), [1 / 3, 1, 3, 0], rtol=1e-7)
    check(jnp.polyint(i, 2, k=np.array([1, 2])), [1 / 12, 1 / 3, 1.5, 1, 2], rtol=1e-7)
    check(jnp.polyint(f, k=3), [0.5, 0.5, 3])
    q, r = jnp.polydiv(np.array([1.0, 3, 2]), np.array([1.0, 1]))
    check(q, [1, 2])
    check(r, [0, 0, 0])
    q, r = jnp.polydiv(i, np.array([2, 1]))
    check(q, [0.5, 0.75])
    check(r, [0, 0, 2.25])
    check(jnp.poly(np.array([1.0, 2.0])), [1, -3, 2], np.float32)
    check(jnp.poly(2.0), [1, -2])
    check(jnp.poly(np.array([[1.0, 2], [3, 4]], np.float32)), [1, -5, -2], np.complex64,
          rtol=1e-6)
    g = tc.grad(lambda c: jnp.polyval(jnp.polyder(c), 2.0))(np.array([1.0, 1, 1], np.float32))
    check(g, [4, 1, 0])


def test_polyfit_traces() -> None:
    # polyfit runs on linalg.lstsq (an SVD kernel, which the reference
    # interpreter of these tests does not evaluate): check what it stages.
    x = np.arange(5.0, dtype=np.float32)
    (c,) = out_avals(lambda a, b: jnp.polyfit(a, b, 2), x, x ** 2)
    assert (c.shape, c.dtype) == ((3,), np.float32)
    c, resid, rank, s, rcond = out_avals(lambda a, b: jnp.polyfit(a, b, 1, full=True), x, x)
    assert (resid.shape, rank.dtype, s.shape, rcond.shape) == ((1,), np.int32, (2,), ())
    assert rcond.weak_type
    c, cov = out_avals(lambda a, b: jnp.polyfit(a, b, 1, cov=True), x, x)
    assert cov.shape == (2, 2)
    (c,) = out_avals(lambda a, b: jnp.polyfit(a, b, 1, w=np.arange(5.0)), x, np.ones((5, 3)))
    assert c.shape == (2, 3)
    with pytest.raises(TypeError, match="polyfit: expected x and y to have the same length"):
        jnp.polyfit(x, np.ones(4), 1)
    with pytest.raises(ValueError, match="polyfit: expected deg >= 0"):
        jnp.polyfit(x, x, -1)


# --- windows, geomspace, fromfunction, gcd/lcm, frexp, i0 --------------------------------------
@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows(name: str) -> None:
    fun = getattr(jnp, name)
    check(fun(7), getattr(np, name)(7), np.float32, rtol=1e-6)
    check(fun(1), [1.0])
    check(fun(0), np.zeros(0))


def test_kaiser_i0_trace() -> None:
    # i0 is exp(|x|) * bessel_i0e(x), a kernel the reference interpreter of
    # these tests does not evaluate: check the staged program and types.
    (w,) = out_avals(lambda: jnp.kaiser(5, 2.0))
    assert (w.shape, w.dtype) == ((5,), np.float32)
    check(jnp.kaiser(1, 3.0), [1.0])
    (v,) = out_avals(lambda: jnp.i0(1))
    assert v.weak_type and v.dtype == np.float32
    closed = tc.make_jaxpr(tc.grad(jnp.i0))(np.float32(1.0))
    names = {e.primitive.name for e in closed.jaxpr.eqns}
    assert "bessel_i1e" in str(closed) or "bessel_i1e" in names
    with pytest.raises(ValueError, match="i0: complex input is not supported"):
        jnp.i0(np.ones(2, np.complex64))


def test_geomspace_fromfunction() -> None:
    check(jnp.geomspace(1, 1000, 4), [1, 10, 100, 1000], np.float32, rtol=1e-6)
    check(jnp.geomspace(-1, -100, 3), [-1, -10, -100], rtol=1e-6)
    check(jnp.geomspace(1, 16, 5, endpoint=False), np.geomspace(1, 16, 5, endpoint=False),
          rtol=1e-6)
    check(jnp.geomspace(np.array([1.0, 2.0]), np.array([4.0, 8.0]), 3, axis=1),
          [[1, 2, 4], [2, 4, 8]], rtol=1e-6)
    check(jnp.fromfunction(lambda i, j: i + j, (2, 3)), [[0, 1, 2], [1, 2, 3]], np.float32)
    check(jnp.fromfunction(lambda i: i, (3,), dtype=int), [0, 1, 2], np.int32)


def test_gcd_lcm_frexp() -> None:
    check(jnp.gcd(np.array([12, 18, -4]), 8), [4, 2, 4], np.int32)
    check(jnp.lcm(np.array([4, 6, 0]), 6), [12, 6, 0], np.int32)
    check(jnp.gcd(np.int8(12), np.int8(18)), 6, np.int8)
    check(staged(jnp.gcd, np.array([12, 7]), np.array([18, 0])), [6, 7])
    check(tc.vmap(jnp.lcm)(np.array([4, 3]), np.array([6, 5])), [12, 15])
    with pytest.raises(ValueError, match="gcd: arguments must be integers"):
        jnp.gcd(1.0, 2.0)
    mantissa, exponent = jnp.frexp(np.array([8.0, 0.3, 0.0, -5.0, np.inf, np.nan], np.float32))
    check(mantissa, [0.5, 0.6, 0.0, -0.625, np.inf, np.nan], np.float32, rtol=1e-7)
    check(exponent, [4, -1, 0, 3, 0, 0], np.int32)
    mantissa, exponent = jnp.frexp(np.array([1.0], np.float16))
    check(mantissa, [0.5], np.float16)
    mantissa, exponent = jnp.frexp(3)
    check(mantissa, 0.75, np.float32)
    check(exponent, 2, np.int32)
    check(jnp.ldexp(*jnp.frexp(np.array([3.5, -0.1], np.float32))),
          np.array([3.5, -0.1], np.float32))


# --- printing and dtype names ------------------------------------------------------------------
def test_printoptions_and_narrow_dtype_names() -> None:
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
        assert jnp.array_str(np.array([1.23456])) == "[1.23]"
    assert jnp.array_repr(np.array([1, 2], np.int32)) == "array([1, 2], dtype=int32)"
    import ml_dtypes  # noqa: PLC0415 - only this test needs the dtype objects themselves

    assert jnp.float8_e4m3fn.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    assert jnp.int4.dtype == np.dtype(ml_dtypes.int4)
    assert jnp.dtype(jnp.float8_e5m2) == np.dtype(ml_dtypes.float8_e5m2)
    assert jnp.finfo(jnp.float8_e5m2).max == 57344
    assert jnp.iinfo(jnp.int4).max == 7


# --- the smaller names -------------------------------------------------------------------------
def test_matvec_vecmat_bitwise_count_sort_complex() -> None:
    m = np.array([[1.0, 2], [3, 4]], np.float32)
    v = np.ones(2, np.float32)
    check(jnp.matvec(m, v), [3, 7], np.float32)
    check(jnp.vecmat(v, m), [4, 6], np.float32)
    check(jnp.matvec(np.stack([m, m]), v), [[3, 7], [3, 7]])
    check(jnp.bitwise_count(np.array([7, -1, 0], np.int8)), [3, 1, 0], np.uint8)
    check(jnp.bitwise_count(np.array([255], np.uint8)), [8], np.uint8)
    check(jnp.sort_complex(np.array([3, 1 + 2j, 1 - 1j], np.complex64)), [1 - 1j, 1 + 2j, 3],
          np.complex64)
    check(jnp.sort_complex(np.array([3, 1], np.int32)), [1, 3], np.complex64)


def test_partition_argpartition() -> None:
    a = np.array([3, 1, 2, 5, 4], np.int32)
    check(jnp.partition(a, 2), [1, 2, 3, 5, 4], np.int32)
    check(jnp.argpartition(a, 2), [1, 2, 0, 3, 4], np.int32)
    check(jnp.partition(np.array([[3, 1, 2], [0, 9, 4]], np.uint8), 1), [[1, 2, 3], [0, 4, 9]])
    check(jnp.argpartition(np.array([[3, 1, 2], [0, 9, 4]], np.int32), 0, axis=0),
          [[1, 0, 0], [0, 1, 1]])
    check(tc.vmap(lambda r: jnp.partition(r, 0))(np.array([[3, 1, 2], [0, 9, 4]], np.int32)),
          [[1, 3, 2], [0, 9, 4]])


def test_trim_zeros_unwrap_mask_indices_place_iterable() -> None:
    check(jnp.trim_zeros(np.array([0, 0, 1, 2, 0])), [1, 2])
    check(jnp.trim_zeros(np.array([0, 0, 1, 2, 0]), "f"), [1, 2, 0])
    check(jnp.unwrap(np.array([0.0, 3.0, 6.5, 0.2], np.float32)),
          [0.0, 3.0, 0.216815, 0.20000048], rtol=1e-6)
    check(jnp.unwrap(np.array([0, 5, 9, 2]), period=8), np.unwrap([0, 5, 9, 2], period=8))
    g = tc.grad(lambda p: jnp.unwrap(p).sum())(np.array([0.0, 3.0, 6.5], np.float32))
    check(g, [1, 1, 1])
    rows, cols = jnp.mask_indices(3, jnp.triu)
    check(rows, [0, 0, 0, 1, 1, 2])
    check(cols, [0, 1, 2, 1, 2, 2])
    check(jnp.place(np.arange(5), np.arange(5) > 0, np.array([9, 8]), inplace=False),
          [0, 9, 8, 9, 8])
    check(staged(lambda m: jnp.place(np.arange(5), m, np.array([9, 8]), inplace=False),
                 np.arange(5) > 2), [0, 1, 2, 9, 8])
    with pytest.raises(ValueError, match="place cannot modify arrays in place"):
        jnp.place(np.arange(3), np.ones(3, bool), 1)
    assert jnp.iterable([1]) and not jnp.iterable(3)
    assert jnp.ComplexWarning is np.exceptions.ComplexWarning


def test_nanquantile_nanpercentile_and_nearest() -> None:
    a = np.array([[1.0, np.nan, 3.0, 7.0], [2, 4, 6, 8], [np.nan] * 4], np.float32)
    expected = {"linear": [[2.2, 3.8, np.nan], [3, 5, np.nan]],
                "lower": [[1, 2, np.nan], [3, 4, np.nan]],
                "higher": [[3, 4, np.nan], [3, 6, np.nan]],
                "nearest": [[3, 4, np.nan], [3, 4, np.nan]],
                "midpoint": [[2, 3, np.nan], [3, 5, np.nan]]}
    for method, values in expected.items():
        check(jnp.nanquantile(a, np.array([0.3, 0.5]), axis=1, method=method), values,
              rtol=1e-6)
    check(jnp.nanpercentile(a[0], 50), 3.0)
    assert jnp.nanquantile(a, 0.5, axis=1, keepdims=True).shape == (3, 1)
    check(staged(lambda x: jnp.nanquantile(x, 0.25), a[:2]), 2.5, rtol=1e-6)
    # JAX's "nearest" takes the lower neighbour at an exact half (NumPy rounds to even).
    check(jnp.quantile(np.array([2.0, 4, 6, 8], np.float32), np.array([0.5, 0.1, 0.9]),
                       method="nearest"), [4, 2, 8])


def test_spacing_packbits_unpackbits_buffers() -> None:
    check(jnp.spacing(np.array([1.0, -2.0], np.float32)),
          np.array([2.0 ** -23, -(2.0 ** -22)], np.float32), np.float32)
    check(jnp.spacing(np.array([1.0], np.float16)), [0.000977], np.float16, rtol=1e-3)
    check(jnp.packbits(np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], np.uint8)), [177, 128], np.uint8)
    check(jnp.packbits(np.array([[1, 0, 1], [0, 1, 1]]), axis=1, bitorder="little"),
          [[5], [6]])
    check(jnp.unpackbits(np.array([177, 3], np.uint8)),
          [1, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1], np.uint8)
    check(jnp.unpackbits(np.array([[177], [3]], np.uint8), axis=1, count=4, bitorder="little"),
          [[1, 0, 0, 0], [1, 1, 0, 0]])
    check(jnp.unpackbits(np.array([1], np.uint8), count=10), [0] * 7 + [1, 0, 0])
    check(staged(jnp.packbits, np.array([True, False, True])), [160])
    with pytest.raises(TypeError, match="unpackbits: expected an input array of unsigned byte"):
        jnp.unpackbits(np.array([1], np.int32))
    check(jnp.frombuffer(b"\x01\x02", dtype="uint8"), [1, 2], np.uint8)
    check(jnp.fromstring("1 2", dtype=int, sep=" "), [1, 2], np.int32)


def test_roots_traces_and_save_load(tmp_path: Any) -> None:
    # roots runs on linalg.eigvals (a kernel the reference interpreter of these
    # tests does not evaluate): check the staged types and the errors.
    (r,) = out_avals(lambda p: jnp.roots(p, strip_zeros=False), np.array([0.0, 1, -3, 2]))
    assert (r.shape, r.dtype) == ((3,), np.complex64)
    check(jnp.roots(np.array([3.0], np.float32)), np.zeros(0, np.complex64), np.complex64)
    with pytest.raises(ConcretizationTypeError, match="roots.*strip_zeros=False"):
        tc.make_jaxpr(jnp.roots)(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="roots: input must be a rank-1 array"):
        jnp.roots(np.ones((2, 2)))
    path = tmp_path / "a.npy"
    jnp.save(path, jnp.asarray(np.arange(3, dtype=np.int32)))
    check(jnp.load(path), [0, 1, 2], np.int32)
