"""Set operations on flattened arrays: ``union1d``, ``intersect1d``,
``setdiff1d``, ``setxor1d`` and the array-API ``unique_all``,
``unique_counts``, ``unique_inverse``, ``unique_values``.

Their output sizes depend on the values: with concrete input they compute the
exact result; under ``jit``/``vmap``/``grad`` give ``size=`` (the result is
truncated or padded with ``fill_value``)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.indexing import nonzero, take
from lamina_tracing_core.numpy.sorting import argsort, isin, searchsorted, unique


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _flat(fun: str, x: ArrayLike, name: str) -> Any:
    (v,) = _util.operands(fun, x, names=(name,))
    return lax.reshape(v, (math.prod(_util.shape_of(v)),))


def _pair(fun: str, ar1: ArrayLike, ar2: ArrayLike) -> tuple[Any, Any]:
    a, b = _util.promote_dtypes(fun, _flat(fun, ar1, "ar1"), _flat(fun, ar2, "ar2"))
    return _util.strip_weak(a), _util.strip_weak(b)


def _result_weakness(fun: str, ar1: ArrayLike, ar2: ArrayLike) -> bool:
    """Whether JAX 0.10.2's (concrete) result of a two-array set operation is
    weakly typed: when the promoted dtype is, except for complex values."""
    dtype, weak = dtypes.result_type(*_util.operands(fun, ar1, ar2), return_weak_type_flag=True)
    return bool(weak) and not dtypes.is_complex(dtype)


def _values(values: np.ndarray[Any, Any], dtype: Any, weak: bool) -> Array:
    return _util.host_array(np.asarray(values).astype(dtype), weak)


def _size(fun: str, size: Any) -> int | None:
    if size is None:
        return None
    n = _util.concrete_int(fun, size, "size")
    if n < 0:
        raise ValueError(f"lamina.numpy.{fun}: size must be non-negative, got {n}")
    return n


def _concrete_pair(fun: str, a: Any, b: Any) -> tuple[np.ndarray[Any, Any], ...]:
    what = "the inputs (give the size argument to use it under jit, vmap or grad)"
    return _util.concrete(fun, a, what), _util.concrete(fun, b, what)


def _ints() -> np.dtype[Any]:
    return dtypes.default_int_dtype()


def _sorted_first(x: Any) -> tuple[Any, Any, Any]:
    """``x`` sorted, the sort permutation, and a mask of each value's first
    occurrence (NaNs equal)."""
    n = _util.shape_of(x)[0]
    perm = argsort(x)
    ordered = take(x, perm, mode="clip")
    if n == 0:
        return ordered, perm, lax.full((0,), True, np.bool_)
    head, tail = lax.slice_in_dim(ordered, 1, n, 1, 0), lax.slice_in_dim(ordered, 0, n - 1, 1, 0)
    differs = lax.ne(head, tail)
    if dtypes.is_inexact(get_aval(x).dtype):
        differs = lax.bitwise_and(differs, lax.bitwise_not(
            lax.bitwise_and(lax.ne(head, head), lax.ne(tail, tail))))
    first = lax.concatenate([np.ones((1,), np.bool_), differs], 0)
    return ordered, perm, first


def _gather_kept(fun: str, values: Any, keep: Any, size: int, fill_value: Any,
                 default_fill: str) -> Any:
    """The entries of ``values`` where ``keep``, in order, cut or padded to ``size``."""
    n = _util.shape_of(values)[0]
    dt = get_aval(values).dtype
    if n == 0:
        fill = 0 if fill_value is None else fill_value
        return lax.full((size,), fill, dt)
    (where,) = nonzero(keep, size=size, fill_value=0)
    picked = take(values, where, mode="clip")
    count = lax.reduce_sum(lax.convert_element_type(keep, _ints()), (0,))
    valid = lax.lt(lax.iota(_ints(), size), count)
    if fill_value is not None:
        fill = _util.convert(_util.operand(fun, fill_value, "fill_value"), dt)
    elif default_fill == "zero" or size == 0:
        fill = lax.full((), 0, dt)
    else:
        fill = lax.index_in_dim(picked, 0, keepdims=False)
    return lax.select(valid, picked, lax.broadcast_in_dim(fill, (size,), ()))


# --- the binary set operations -----------------------------------------------------------------
def union1d(ar1: ArrayLike, ar2: ArrayLike, *, size: int | None = None,
            fill_value: ArrayLike | None = None) -> Array:
    """The sorted unique values found in either array."""
    a, b = _pair("union1d", ar1, ar2)
    n = _size("union1d", size)
    if n is None:
        va, vb = _concrete_pair("union1d", a, b)
        return _values(np.union1d(va, vb), va.dtype, _result_weakness("union1d", ar1, ar2))
    return unique(lax.concatenate([a, b], 0), size=n, fill_value=fill_value)


def setdiff1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
              size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """The sorted unique values of ``ar1`` that are not in ``ar2`` (padding: 0)."""
    a, b = _pair("setdiff1d", ar1, ar2)
    n = _size("setdiff1d", size)
    if n is None:
        va, vb = _concrete_pair("setdiff1d", a, b)
        # As JAX: ar1's dtype and weak type; ar2 only takes part in the comparison.
        first = get_aval(_util.operand("setdiff1d", ar1, "ar1"))
        return _values(np.setdiff1d(va, vb, assume_unique=assume_unique), first.dtype,
                       first.weak_type)
    ordered, _, first = _sorted_first(a)
    keep = first if not assume_unique else lax.full_like(first, True)
    keep = lax.bitwise_and(keep, isin(ordered, b, invert=True))
    return _gather_kept("setdiff1d", ordered, keep, n, fill_value, "zero")


def setxor1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False, *,
             size: int | None = None, fill_value: ArrayLike | None = None) -> Array:
    """The sorted values found in exactly one of the two arrays (padding: the
    smallest such value)."""
    a, b = _pair("setxor1d", ar1, ar2)
    n = _size("setxor1d", size)
    if n is None:
        va, vb = _concrete_pair("setxor1d", a, b)
        return _values(np.setxor1d(va, vb, assume_unique=assume_unique), va.dtype,
                       _result_weakness("setxor1d", ar1, ar2))
    ordered, _, first = _sorted_first(lax.concatenate([a, b], 0))
    keep = lax.bitwise_and(first, lax.ne(isin(ordered, a), isin(ordered, b)))
    return _gather_kept("setxor1d", ordered, keep, n, fill_value, "smallest")


def intersect1d(ar1: ArrayLike, ar2: ArrayLike, assume_unique: bool = False,
                return_indices: bool = False, *, size: int | None = None,
                fill_value: ArrayLike | None = None) -> Any:
    """The sorted unique values found in both arrays; with ``return_indices``
    also the index of each one's first occurrence in ``ar1`` and ``ar2``
    (padded with the arrays' lengths)."""
    a, b = _pair("intersect1d", ar1, ar2)
    n = _size("intersect1d", size)
    if n is None:
        va, vb = _concrete_pair("intersect1d", a, b)
        if not return_indices:
            return _values(np.intersect1d(va, vb, assume_unique=assume_unique), va.dtype,
                           _result_weakness("intersect1d", ar1, ar2))
        values, i1, i2 = np.intersect1d(va, vb, assume_unique=assume_unique,
                                        return_indices=True)
        return (asarray(values.astype(va.dtype)), asarray(i1.astype(_ints())),
                asarray(i2.astype(_ints())))
    na, nb = _util.shape_of(a)[0], _util.shape_of(b)[0]
    ordered, perm, first = _sorted_first(a)
    keep = lax.bitwise_and(first, isin(ordered, b))
    values = _gather_kept("intersect1d", ordered, keep, n, fill_value, "smallest")
    if not return_indices:
        return values
    if na == 0 or nb == 0:
        return values, lax.full((n,), na, _ints()), lax.full((n,), nb, _ints())
    (where,) = nonzero(keep, size=n, fill_value=na)
    valid = lax.lt(where, np.asarray(na, where.dtype))
    # The first occurrence in ar1 is the smallest original index of its run:
    # the sort is stable, so it is the permutation entry at the run's start.
    idx1 = lax.select(valid, _util.convert(take(perm, where, mode="clip"), _ints()),
                      lax.full((n,), na, _ints()))
    ordered_b, perm_b, _ = _sorted_first(b)
    found = take(ordered, where, mode="clip")
    pos = searchsorted(ordered_b, found, side="left")
    idx2 = lax.select(valid, _util.convert(take(perm_b, pos, mode="clip"), _ints()),
                      lax.full((n,), nb, _ints()))
    return values, idx1, idx2


# --- the array-API unique functions ------------------------------------------------------------
def unique_all(x: ArrayLike, /, *, size: int | None = None,
               fill_value: ArrayLike | None = None) -> UniqueAllResult:
    """The unique values of ``x`` with first indices, inverse indices (shaped
    as ``x``) and counts."""
    values, indices, inverse, counts = unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, size=size,
                                              fill_value=fill_value)
    return UniqueAllResult(values, indices, _inverse_shaped(x, inverse), counts)


def unique_counts(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> UniqueCountsResult:
    """The unique values of ``x`` and how often each occurs."""
    values, counts = unique(x, return_counts=True, size=size, fill_value=fill_value)
    return UniqueCountsResult(values, counts)


def unique_inverse(x: ArrayLike, /, *, size: int | None = None,
                   fill_value: ArrayLike | None = None) -> UniqueInverseResult:
    """The unique values of ``x`` and, for each element of ``x``, the index of
    its value among them (shaped as ``x``)."""
    values, inverse = unique(x, return_inverse=True, size=size, fill_value=fill_value)
    return UniqueInverseResult(values, _inverse_shaped(x, inverse))


def unique_values(x: ArrayLike, /, *, size: int | None = None,
                  fill_value: ArrayLike | None = None) -> Array:
    """The sorted unique values of ``x``."""
    return unique(x, size=size, fill_value=fill_value)


def _inverse_shaped(x: ArrayLike, inverse: Any) -> Any:
    shape = _util.shape_of(_util.operand("unique_inverse", x, "x"))
    return lax.reshape(inverse, shape) if _util.shape_of(inverse) != shape else inverse
