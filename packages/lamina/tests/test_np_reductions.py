"""lamina.numpy reductions against NumPy: axis/keepdims/where/dtype/initial, dtypes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lamina.numpy as jnp
from lamina.numpy import UnsupportedArgumentError

A = np.array([[1.5, -2.0, 3.0, 0.5], [4.0, 0.0, -1.0, 2.5], [2.0, 2.0, -3.5, 1.0]], np.float32)
MASK = np.array([[True, False, True, True], [False, True, True, False],
                 [True, True, False, True]])
I = np.arange(12, dtype=np.int32).reshape(3, 4) - 5


def check(actual, expected, dtype=None, rtol=1e-5, atol=1e-6):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    np.testing.assert_allclose(actual_np, expected.astype(actual_np.dtype), rtol=rtol,
                               atol=atol, equal_nan=True)


AXES = [None, 0, 1, -1, (0, 1)]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std", "ptp"])
@pytest.mark.parametrize("axis", AXES, ids=str)
def test_reductions_match_numpy(name, axis):
    for keepdims in (False, True):
        expected = getattr(np, name)(A, axis=axis, keepdims=keepdims)
        check(getattr(jnp, name)(A, axis=axis, keepdims=keepdims), expected, np.float32)


@pytest.mark.parametrize("axis", [None, 1])
def test_all_any_count_nonzero(axis):
    for name in ("all", "any"):
        check(getattr(jnp, name)(I, axis=axis), getattr(np, name)(I, axis=axis), np.bool_)
    check(jnp.count_nonzero(I, axis=axis), np.count_nonzero(I, axis=axis), np.int32)
    check(jnp.all(MASK, axis=axis, keepdims=True), np.all(MASK, axis=axis, keepdims=True))


def test_where_and_initial():
    check(jnp.sum(A, axis=1, where=MASK), np.sum(A, axis=1, where=MASK))
    check(jnp.prod(A, where=MASK), np.prod(A, where=MASK))
    check(jnp.mean(A, axis=0, where=MASK), np.mean(A, axis=0, where=MASK))
    check(jnp.var(A, axis=1, where=MASK), np.var(A, axis=1, where=MASK))
    check(jnp.max(A, axis=1, where=MASK, initial=-10), np.max(A, axis=1, where=MASK, initial=-10))
    check(jnp.min(A, where=MASK, initial=10), np.min(A, where=MASK, initial=10))
    check(jnp.sum(np.arange(4), initial=10), 16)
    check(jnp.max(np.arange(4), initial=10), 10)
    check(jnp.all(I, where=MASK), np.all(I, where=MASK))
    check(jnp.any(I > 5, axis=1, where=MASK), np.any(I > 5, axis=1, where=MASK))
    with pytest.raises(ValueError, match="specify 'initial'"):
        jnp.max(A, where=MASK)
    with pytest.raises(ValueError, match="zero-size array"):
        jnp.max(np.zeros((0,)))


def test_result_dtypes():
    for dt, summed in [(np.int8, np.int32), (np.uint8, np.uint32), (np.bool_, np.int32),
                       (np.int16, np.int32), (np.float16, np.float16), (np.uint32, np.uint32)]:
        x = np.ones(3, dt)
        assert jnp.sum(x).dtype == summed, dt
        assert jnp.prod(x).dtype == summed, dt
        assert jnp.max(x).dtype == dt
        assert jnp.mean(x).dtype == (np.float16 if dt == np.float16 else np.float32)
        assert jnp.var(x).dtype == (np.float16 if dt == np.float16 else np.float32)
    assert jnp.cumsum(np.ones(3, np.int8)).dtype == np.int8
    assert jnp.cumsum(np.ones(3, np.bool_)).dtype == np.int32
    assert jnp.sum(np.ones(3), dtype=jnp.int8).dtype == np.int8
    assert jnp.sum(np.ones(3, np.int8), promote_integers=False).dtype == np.int8
    assert not jnp.sum(1.0).weak_type and not jnp.max(1.0).weak_type
    assert jnp.argmax(A).dtype == np.int32
    assert jnp.var(np.array([1 + 1j, 2], np.complex64)).dtype == np.float32
    # float16 sums accumulate in float32 (no overflow at 65504)
    check(jnp.sum(np.full(8, 10000, np.float16)), np.float16(np.inf))


def test_float16_accumulates_in_float32():
    x = np.full(1000, 0.1, np.float16)
    check(jnp.sum(x), np.float16(np.sum(x.astype(np.float32))), np.float16, rtol=1e-3)
    check(jnp.mean(x), np.float16(0.1), np.float16, rtol=1e-3)


def test_statistics():
    check(jnp.var(A, ddof=1), np.var(A, ddof=1))
    check(jnp.std(A, axis=0, ddof=1), np.std(A, axis=0, ddof=1))
    check(jnp.var(np.arange(4), ddof=1), np.var(np.arange(4), ddof=1), np.float32)
    check(jnp.var(A, correction=1), np.var(A, ddof=1))
    check(jnp.average(A), np.average(A))
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    check(jnp.average(A, axis=1, weights=w), np.average(A, axis=1, weights=w))
    avg, total = jnp.average(A, axis=0, weights=A * 0 + 2, returned=True)
    eavg, etotal = np.average(A, axis=0, weights=A * 0 + 2, returned=True)
    check(avg, eavg)
    check(total, etotal)
    check(jnp.ptp(I, axis=0), np.ptp(I, axis=0), np.int32)
    z = np.array([1 + 1j, 2 - 1j, 0.5j], np.complex64)
    check(jnp.var(z), np.var(z), np.float32)


def test_arg_reductions():
    for axis in (None, 0, 1):
        check(jnp.argmax(A, axis=axis), np.argmax(A, axis=axis), np.int32)
        check(jnp.argmin(A, axis=axis), np.argmin(A, axis=axis), np.int32)
        check(jnp.argmax(A, axis=axis, keepdims=True), np.argmax(A, axis=axis, keepdims=True))
    check(jnp.argmax(np.array([1.0, np.nan, 3.0], np.float32)), 1)
    check(jnp.argmax(np.array([2, 7, 7, 1])), 1)
    with pytest.raises(ValueError, match="empty sequence"):
        jnp.argmin(np.zeros(0))


def test_cumulative():
    for axis in (None, 0, 1):
        check(jnp.cumsum(A, axis=axis), np.cumsum(A, axis=axis))
        check(jnp.cumprod(A, axis=axis), np.cumprod(A, axis=axis))
    check(jnp.cumsum(np.array([True, True, False])), [1, 2, 2], np.int32)
    check(jnp.cumsum(I, axis=1, dtype=jnp.float32), np.cumsum(I, axis=1), np.float32)
    check(jnp.cumulative_sum(I, axis=0), np.cumsum(I, axis=0))


def test_nan_reductions():
    n = A.copy()
    n[0, 1] = np.nan
    n[2, :] = np.nan
    for name in ("nansum", "nanprod", "nanmean", "nanvar", "nanstd"):
        for axis in (None, 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                expected = getattr(np, name)(n, axis=axis)
            check(getattr(jnp, name)(n, axis=axis), expected)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(jnp.nanmax(n, axis=1), np.nanmax(n, axis=1))
        check(jnp.nanmin(n, axis=1), np.nanmin(n, axis=1))
        check(jnp.nanmedian(n, axis=1), np.nanmedian(n, axis=1))
    check(jnp.nanmax(np.arange(4)), 3)


def test_order_statistics():
    for axis in (None, 0, 1, (0, 1)):
        check(jnp.median(A, axis=axis), np.median(A, axis=axis))
        check(jnp.median(A, axis=axis, keepdims=True), np.median(A, axis=axis, keepdims=True))
    check(jnp.median(np.arange(4)), 1.5, np.float32)
    check(jnp.median(np.array([1.0, np.nan, 2.0])), np.nan)
    q = np.array([0.0, 0.25, 0.6, 1.0], np.float32)
    for method in ("linear", "lower", "higher", "nearest", "midpoint"):
        check(jnp.quantile(A, q, axis=1, method=method), np.quantile(A, q, axis=1, method=method))
    check(jnp.quantile(A, 0.3), np.quantile(A, 0.3))
    check(jnp.percentile(A, 75, axis=0, keepdims=True),
          np.percentile(A, 75, axis=0, keepdims=True))


def test_unsupported_arguments_raise():
    with pytest.raises(UnsupportedArgumentError, match="'out' argument"):
        jnp.sum(A, out=np.zeros(()))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.sum(A, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.sum(A, axis=(0, 0))


def test_nan_arg_and_cumulative_reductions():
    n = np.array([[np.nan, np.nan, 1.0], [1.0, np.nan, 3.0]], np.float32)
    check(jnp.nanargmax(n, axis=1), [2, 2])
    check(jnp.nanargmin(n), 2)
    check(jnp.nanargmax(np.array([[np.nan, np.nan], [1.0, np.nan]], np.float32), axis=1),
          [-1, 0])  # JAX's value for an all-NaN slice
    check(jnp.nancumsum(n, axis=1), np.nancumsum(n, axis=1))
    check(jnp.nancumprod(n), np.nancumprod(n))


def test_cov_corrcoef():
    x = np.array([[1.0, 2.0, 4.0], [0.0, 1.0, 0.5]], np.float32)
    check(jnp.cov(x), np.cov(x))
    check(jnp.cov(x, rowvar=False, bias=True), np.cov(x, rowvar=False, bias=True))
    check(jnp.cov(x[0]), np.cov(x[0]))
    check(jnp.cov(x[0], x[1], ddof=0), np.cov(x[0], x[1], ddof=0))
    check(jnp.corrcoef(x), np.corrcoef(x))
    check(jnp.corrcoef(x[0], x[1]), np.corrcoef(x[0], x[1]))
