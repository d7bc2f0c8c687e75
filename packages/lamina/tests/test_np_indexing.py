"""lamina.numpy selection, sorting, searching and counting against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from lamina_tracing_core import api, core

import lamina.numpy as jnp
from lamina.numpy import UnsupportedArgumentError

M = np.array([[3.0, 1.0, 2.0, 1.0], [0.5, -1.0, 4.0, 2.0], [2.0, 2.0, -3.0, 0.0]], np.float32)
V = np.array([4.0, -1.0, 2.5, 2.5, 0.0, 7.0], np.float32)


def check(actual, expected, dtype=None):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    np.testing.assert_allclose(actual_np, expected.astype(actual_np.dtype), rtol=1e-6,
                               equal_nan=True)


def run_traced(f, *args):
    """``f`` traced to a jaxpr with ``args`` abstract, then evaluated."""
    closed = api.make_jaxpr(f)(*args)
    out = core.eval_jaxpr(closed.jaxpr, closed.consts, *args)
    return out[0] if len(out) == 1 else out


def test_take():
    idx = np.array([[0, 2], [3, -1]], np.int32)
    check(jnp.take(V, idx), np.take(V, idx))
    check(jnp.take(M, np.array([2, 0]), axis=1), np.take(M, [2, 0], axis=1))
    check(jnp.take(M, 1, axis=0), np.take(M, 1, axis=0))
    check(jnp.take(M, np.array([5])), np.take(M, [5]))
    check(jnp.take(V, np.array([0, 9])), [4.0, np.nan])
    check(jnp.take(V, np.array([0, 9]), mode="clip"), [4.0, 7.0])
    check(jnp.take(V, np.array([7, -8]), mode="wrap"), np.take(V, [7, -8], mode="wrap"))
    check(jnp.take(np.arange(3), np.array([5])), [np.iinfo(np.int32).min])
    check(jnp.take(V, np.array([9]), fill_value=-1.0), [-1.0])
    with pytest.raises(UnsupportedArgumentError, match="mode='raise'"):
        jnp.take(V, np.array([0]), mode="raise")
    with pytest.raises(TypeError, match="integer array"):
        jnp.take(V, np.array([0.0]))


def test_take_along_axis():
    idx = np.argsort(M, axis=1)
    check(jnp.take_along_axis(M, idx, axis=1), np.take_along_axis(M, idx, axis=1))
    idx0 = np.argsort(M, axis=0)
    check(jnp.take_along_axis(M, idx0, axis=0), np.take_along_axis(M, idx0, axis=0))
    check(jnp.take_along_axis(M, np.array([[0], [3], [1]]), axis=1),
          np.take_along_axis(M, np.array([[0], [3], [1]]), axis=1))
    check(jnp.take_along_axis(M, np.array([[-1]]), axis=1), M[:, -1:])
    check(jnp.take_along_axis(V, np.array([5, 0]), axis=None), [7.0, 4.0])


def test_where_select_choose():
    cond = M > 1
    check(jnp.where(cond, M, -M), np.where(cond, M, -M))
    check(jnp.where(cond, 1, 0), np.where(cond, 1, 0), np.int32)
    check(jnp.where(V > 0, V, 0.5), np.where(V > 0, V, 0.5), np.float32)
    assert jnp.where(True, 1.0, 2.0).weak_type
    check(jnp.where(np.array([1, 0, 2]), 1.0, 2.0), [1.0, 2.0, 1.0])
    check(jnp.select([V < 0, V > 3], [V * 10, V * 100], default=-5),
          np.select([V < 0, V > 3], [V * 10, V * 100], default=-5))
    choices = [np.arange(4), np.arange(4) * 10, np.arange(4) * 100]
    check(jnp.choose(np.array([0, 2, 1, 0]), choices),
          np.choose(np.array([0, 2, 1, 0]), choices))
    check(jnp.choose(np.array([0, 5, -1, 0]), choices, mode="clip"),
          np.choose(np.array([0, 5, -1, 0]), choices, mode="clip"))
    check(jnp.choose(np.array([0, 5, -1, 0]), choices, mode="wrap"),
          np.choose(np.array([0, 5, -1, 0]), choices, mode="wrap"))
    with pytest.raises(ValueError, match="both or neither"):
        jnp.where(cond, M)


def test_nonzero_family():
    for got, want in zip(jnp.nonzero(M > 1), np.nonzero(M > 1)):
        check(got, want, np.int32)
    for got, want in zip(jnp.where(M > 1), np.nonzero(M > 1)):
        check(got, want)
    check(jnp.argwhere(M > 1), np.argwhere(M > 1))
    check(jnp.flatnonzero(V), np.flatnonzero(V))
    check(jnp.compress(np.array([True, False, True]), M, axis=0),
          np.compress([True, False, True], M, axis=0))
    check(jnp.extract(M > 1, M), np.extract(M > 1, M))
    assert jnp.argwhere(3).shape == (1, 0) and jnp.argwhere(0).shape == (0, 0)
    with pytest.raises(ValueError, match="0d"):
        jnp.nonzero(1.0)


def test_nonzero_under_tracing_needs_size():
    with pytest.raises(core.ConcretizationTypeError, match="nonzero"):
        api.make_jaxpr(jnp.nonzero)(V)

    def f(x):
        return jnp.nonzero(x > 1, size=8, fill_value=-1)

    rows, cols = run_traced(f, M)
    want_rows, want_cols = np.nonzero(M > 1)
    check(rows, np.concatenate([want_rows, [-1, -1]]))
    check(cols, np.concatenate([want_cols, [-1, -1]]))
    check(run_traced(lambda x: jnp.nonzero(x > 1, size=3)[1], M), want_cols[:3])
    check(run_traced(lambda x: jnp.nonzero(x, size=2)[0], V), [0, 1])
    check(run_traced(lambda x: jnp.argwhere(x > 2, size=3), V), [[0], [2], [3]])
    check(run_traced(lambda x: jnp.compress(x > 2, x, size=4, fill_value=9), V),
          [4.0, 2.5, 2.5, 7.0])


def test_sort_and_argsort():
    for axis in (-1, 0, None):
        check(jnp.sort(M, axis=axis), np.sort(M, axis=axis))
        check(jnp.argsort(M, axis=axis, stable=True),
              np.argsort(M, axis=axis, kind="stable"), np.int32)
    check(jnp.sort(V, descending=True), np.sort(V)[::-1])
    check(jnp.argsort(V, descending=True), [5, 0, 2, 3, 4, 1])
    check(jnp.sort(np.array([np.nan, 1.0, -np.inf], np.float32)), [-np.inf, 1.0, np.nan])
    check(jnp.lexsort([np.array([1, 0, 1, 0]), np.array([2, 2, 1, 1])]),
          np.lexsort([np.array([1, 0, 1, 0]), np.array([2, 2, 1, 1])]))
    with pytest.raises(UnsupportedArgumentError, match="order"):
        jnp.sort(V, order="x")


def test_searchsorted_and_digitize():
    a = np.array([0.0, 1.0, 1.0, 2.5, 4.0, np.nan], np.float32)
    v = np.array([-1.0, 0.0, 1.0, 1.5, 4.0, 9.0, np.nan], np.float32)
    for side in ("left", "right"):
        check(jnp.searchsorted(a, v, side=side), np.searchsorted(a, v, side=side), np.int32)
    check(jnp.searchsorted(np.arange(10), 3), 3)
    check(jnp.searchsorted(np.array([3.0, 1.0, 2.0]), 2.5, sorter=np.array([1, 2, 0])), 2)
    check(jnp.searchsorted(np.zeros(0, np.float32), v), np.zeros(7))
    bins = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    for right in (False, True):
        check(jnp.digitize(v[:-1], bins, right=right), np.digitize(v[:-1], bins, right=right))
        check(jnp.digitize(v[:-1], bins[::-1], right=right),
              np.digitize(v[:-1], bins[::-1], right=right))


def test_unique():
    x = np.array([3, 1, 2, 3, 1, 5], np.int32)
    check(jnp.unique(x), np.unique(x))
    got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want):
        check(g, w)
    check(jnp.unique(M, axis=0), np.unique(M, axis=0))
    with pytest.raises(core.ConcretizationTypeError, match="size"):
        api.make_jaxpr(jnp.unique)(x)

    def f(v):
        return jnp.unique(v, return_index=True, return_inverse=True, return_counts=True,
                          size=6, fill_value=0)

    values, index, inverse, counts = run_traced(f, x)
    check(values, [1, 2, 3, 5, 0, 0])
    check(np.asarray(index)[:4], [1, 2, 0, 5])  # the padding entries are unspecified
    check(inverse, want[2])
    check(counts, [2, 1, 2, 1, 0, 0])
    nan_values = run_traced(lambda v: jnp.unique(v, size=3), np.array([np.nan, 1.0, np.nan]))
    check(nan_values, [1.0, np.nan, 1.0])


def test_bincount():
    x = np.array([0, 1, 1, 3, 2, 1, 7], np.int32)
    check(jnp.bincount(x), np.bincount(x), np.int32)
    check(jnp.bincount(x, minlength=10), np.bincount(x, minlength=10))
    w = np.linspace(0, 1, 7).astype(np.float32)
    check(jnp.bincount(x, weights=w), np.bincount(x, weights=w), np.float32)
    check(run_traced(lambda v: jnp.bincount(v, length=4), x), [1, 3, 1, 1])
    with pytest.raises(core.ConcretizationTypeError):
        api.make_jaxpr(jnp.bincount)(x)


def test_at_updates_via_ndarray():
    x = jnp.zeros(5)
    check(x.at[1].set(3.0), [0, 3, 0, 0, 0])
    check(x.at[np.array([1, 1, 4])].add(1.0), [0, 2, 0, 0, 1])
    check(jnp.ndarray.at.__get__(x)[2].set(7.0), [0, 0, 7, 0, 0])
    check(jnp.ones(3).at[0].mul(5.0), [5, 1, 1])
    check(jnp.ones(3).at[:2].min(0.5), [0.5, 0.5, 1])
    check(jnp.ones(3).at[2].max(4.0), [1, 1, 4])
    check(jnp.arange(4).at[2].get(), 2)


def test_index_arithmetic():
    rows, cols = jnp.unravel_index(np.array([5, -1, 100, 3]), (2, 3))
    check(rows, [1, 1, 1, 1])
    check(cols, [2, 2, 2, 0])
    check(jnp.ravel_multi_index((np.array([1, 0]), np.array([2, 1])), (2, 3)), [5, 1])
    check(jnp.ravel_multi_index((np.array([3, -1]), np.array([2, 1])), (2, 3), mode="clip"),
          [5, 1])
    check(jnp.ravel_multi_index((np.array([3, -1]), np.array([2, 1])), (2, 3), mode="wrap"),
          [5, 4])
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index((np.array([3]), np.array([0])), (2, 3))
    r, c = jnp.ix_(np.array([0, 2]), np.array([1, 3]))
    check(jnp.asarray(M)[r, c], M[np.ix_([0, 2], [1, 3])])
    for got, want in zip(jnp.diag_indices(3), np.diag_indices(3)):
        check(got, want)
    for got, want in zip(jnp.tril_indices_from(M, 1), np.tril_indices_from(M, 1)):
        check(got, want)
    for got, want in zip(jnp.triu_indices_from(M), np.triu_indices_from(M)):
        check(got, want)


def test_isin():
    check(jnp.isin(np.array([1, 2, 3]), np.array([2, 5])), [False, True, False])
    check(jnp.isin(M, np.array([1.0, 2.0]), invert=True), np.isin(M, [1.0, 2.0], invert=True))


def test_float_indexers_are_type_errors_as_in_jax() -> None:
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type, got "
                       "indexer with type float64"):
        jnp.arange(3)[1.0]
    with pytest.raises(TypeError, match="got indexer with type float32"):
        jnp.arange(3)[jnp.array([1.0], jnp.float32)]
