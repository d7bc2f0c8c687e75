"""Ordering and counting: ``sort``, ``argsort``, ``lexsort``, ``searchsorted``,
``digitize``, ``unique``, ``isin``, ``bincount``.

Sorting is stable and puts NaNs last (as NumPy). ``unique`` and ``bincount``
have value-dependent output sizes: they need concrete input, or under a
transformation ``size=`` / ``length=``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.sharding_in_types import ShardingTypeError

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.indexing import nonzero, take


def _check_sort_args(fun: str, kind: Any, order: Any) -> None:
    if order is not None:
        raise _util.UnsupportedArgumentError(
            f"lamina.numpy.{fun}: the order argument (structured arrays) is not supported")
    del kind  # sorting is always stable; the algorithm is XLA's choice


def _flat_or(fun: str, a: Any, axis: int | None) -> tuple[Any, int]:
    x = _util.operand(fun, a, "a")
    if axis is None:
        return lax.reshape(x, (math.prod(_util.shape_of(x)),)), 0
    return x, _util.canonicalize_axis(fun, axis, _util.ndim_of(x))


def sort(a: ArrayLike, axis: int | None = -1, *, kind: Any = None, order: Any = None,
         stable: bool = True, descending: bool = False) -> Array:
    """``a`` sorted along ``axis`` (flattened if None); NaNs sort last."""
    _check_sort_args("sort", kind, order)
    x, ax = _flat_or("sort", a, axis)
    if _util.ndim_of(x) == 0:
        raise ValueError("lamina.numpy.sort: cannot sort a 0-d array along an axis")
    out = lax.sort(x, dimension=ax, is_stable=stable)
    return lax.rev(out, (ax,)) if descending else out


def argsort(a: ArrayLike, axis: int | None = -1, *, kind: Any = None, order: Any = None,
            stable: bool = True, descending: bool = False, dtype: Any = None) -> Array:
    """The indices that sort ``a`` along ``axis`` (stable: ties keep their order),
    of ``dtype`` when given (as JAX, any dtype it accepts, floats included),
    else of the default integer dtype."""
    _check_sort_args("argsort", kind, order)
    x, ax = _flat_or("argsort", a, axis)
    shape = _util.shape_of(x)
    if not shape:
        raise ValueError("lamina.numpy.argsort: cannot sort a 0-d array along an axis")
    ints = _util.user_dtype("argsort", dtype) or dtypes.default_int_dtype()
    iota = lax.broadcasted_iota(ints, shape, ax)
    if not descending:
        _, idx = lax.sort((x, iota), dimension=ax, is_stable=stable, num_keys=1)
        return idx
    # Sorting the reversed array ascending and reversing the result gives a
    # descending order in which equal elements keep their original order.
    _, idx = lax.sort((lax.rev(x, (ax,)), iota), dimension=ax, is_stable=stable, num_keys=1)
    n = np.asarray(shape[ax] - 1, ints)
    return lax.sub(lax.full_like(idx, n), lax.rev(idx, (ax,)))


def lexsort(keys: Sequence[ArrayLike], axis: int = -1) -> Array:
    """The indices that sort by the last key, then the one before, ..."""
    ks = _util.operands("lexsort", *keys)
    if not ks:
        raise TypeError("lamina.numpy.lexsort: need at least one key")
    shape = _util.broadcast_shapes("lexsort", *(_util.shape_of(k) for k in ks))
    ks = [_util.broadcast_to("lexsort", k, shape) for k in ks]
    ax = _util.canonicalize_axis("lexsort", axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int_dtype(), shape, ax)
    out = lax.sort(tuple(reversed(ks)) + (iota,), dimension=ax, is_stable=True,
                   num_keys=len(ks))
    return out[-1]


# --- searching -----------------------------------------------------------------------------
def _total_lt(x: Any, y: Any) -> Any:
    """``x < y`` in sort order: NaN is greater than everything (NumPy's order)."""
    if not dtypes.is_inexact(get_aval(x).dtype):
        return lax.lt(x, y)
    if dtypes.is_complex(get_aval(x).dtype):
        rx, ry, ix, iy = lax.real(x), lax.real(y), lax.imag(x), lax.imag(y)
        return lax.bitwise_or(_total_lt(rx, ry), lax.bitwise_and(lax.eq(rx, ry), _total_lt(ix, iy)))
    x_nan, y_nan = lax.ne(x, x), lax.ne(y, y)
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))


_SEARCH_METHODS = ["compare_all", "scan", "scan_unrolled", "sort"]


def _check_search_method(fun: str, method: Any) -> None:
    """JAX's error for a ``method`` ``searchsorted`` does not have."""
    if method not in _SEARCH_METHODS:
        raise ValueError(f"{_util.qualified(fun)}: invalid argument method={method!r}, "
                         f"expected one of {_SEARCH_METHODS}")


def searchsorted(a: ArrayLike, v: ArrayLike, side: str = "left", sorter: ArrayLike | None = None,
                 *, method: str = "scan") -> Array:
    """Where ``v``'s elements would go in the sorted 1-D ``a`` to keep it sorted
    (a binary search of ``ceil(log2(len(a) + 1))`` steps)."""
    if side not in ("left", "right"):
        raise ValueError(f"lamina.numpy.searchsorted: side must be 'left' or 'right', got {side!r}")
    _check_search_method("searchsorted", method)
    sorted_a, values = _util.promote_dtypes("searchsorted", a, v)
    if _util.ndim_of(sorted_a) != 1:
        raise ValueError("lamina.numpy.searchsorted: a must be 1-D")
    if sorter is not None:
        sorted_a = take(sorted_a, sorter, mode="clip")
    n = _util.shape_of(sorted_a)[0]
    ints = dtypes.default_int_dtype()
    v_shape = _util.shape_of(values)
    lo = lax.full(v_shape, 0, ints)
    hi = lax.full(v_shape, n, ints)
    one = np.asarray(1, ints)
    for _ in range(max(1, math.ceil(math.log2(n + 1)))):
        mid = lax.div(lax.add(lo, hi), np.asarray(2, ints))
        probe = _gather_1d(sorted_a, lax.min(mid, np.asarray(max(n - 1, 0), ints)))
        # side='left': go right while a[mid] < v; side='right': while a[mid] <= v.
        go_right = _total_lt(probe, values) if side == "left" else \
            lax.bitwise_not(_total_lt(values, probe))
        active = lax.lt(lo, hi)
        lo = lax.select(lax.bitwise_and(active, go_right), lax.add(mid, one), lo)
        hi = lax.select(lax.bitwise_and(active, lax.bitwise_not(go_right)), mid, hi)
    return lo


def _gather_1d(a: Any, idx: Any) -> Any:
    """``a[idx]`` for a 1-D ``a`` and in-bounds ``idx`` of any shape."""
    if _util.shape_of(a)[0] == 0:
        return lax.full_like(idx, 0, get_aval(a).dtype)
    nd = _util.ndim_of(idx)
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(0,),
                                       start_index_map=(0,))
    return lax.gather(a, lax.expand_dims(idx, (nd,)), dnums, (1,),
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def digitize(x: ArrayLike, bins: ArrayLike, right: bool = False, *,
             method: str | None = None) -> Array:
    """The index of the bin each element of ``x`` falls in (monotonic ``bins``).
    ``method`` is ``searchsorted``'s (checked as there; every method gives the
    same indices)."""
    if method is not None:
        _check_search_method("digitize", method)
    xs, edges = _util.operands("digitize", x, bins)
    if _util.ndim_of(edges) != 1:
        raise ValueError("lamina.numpy.digitize: bins must be 1-D")
    n = _util.shape_of(edges)[0]
    if n == 0:
        return lax.full(_util.shape_of(xs), 0, dtypes.default_int_dtype())
    side = "left" if right else "right"
    rising = searchsorted(edges, xs, side=side)
    falling = lax.sub(np.asarray(n, dtypes.default_int_dtype()),
                      searchsorted(lax.rev(edges, (0,)), xs, side=side))
    first = lax.index_in_dim(edges, 0, keepdims=False)
    last = lax.index_in_dim(edges, n - 1, keepdims=False)
    increasing = lax.ge(*_util.promote_dtypes("digitize", last, first))
    return lax.select(lax.broadcast_in_dim(increasing, _util.shape_of(rising), ()), rising, falling)


# --- unique and counting ------------------------------------------------------------------------
def _place_numpy(value: np.ndarray[Any, Any]) -> Array:
    ints = dtypes.default_int_dtype()
    return asarray(value.astype(ints) if value.dtype.kind in "iu" else value)


def unique(ar: ArrayLike, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis: int | None = None, *, equal_nan: bool = True,
           size: int | None = None, fill_value: Any = None, sorted: bool = True) -> Any:
    """The sorted unique elements of ``ar`` (and optionally first indices,
    inverse and counts). Under a transformation ``size`` is required (the
    result is padded with ``fill_value``, default the smallest element)."""
    x = _util.operand("unique", ar, "ar")
    if size is None:
        if not _util.is_concrete(x):
            _util.concrete("unique", x, "the input (give the size argument to use unique "
                                        "under jit, vmap or grad)")
        values = np.asarray(_util.concrete("unique", x, "the input"))
        unique_fn: Any = np.unique
        results = unique_fn(values, return_index=return_index, return_inverse=return_inverse,
                            return_counts=return_counts, axis=axis, equal_nan=equal_nan)
        # The values keep the input's dtype and weak type (as JAX's); indices
        # and counts are default ints.
        aval = get_aval(x)
        weak = aval.weak_type and not dtypes.is_complex(aval.dtype)  # complex: strong, as JAX
        if isinstance(results, tuple):
            return (_util.host_array(np.asarray(results[0], aval.dtype), weak),
                    *(_place_numpy(np.asarray(r)) for r in results[1:]))
        return _util.host_array(np.asarray(results, aval.dtype), weak)
    if axis is not None:
        raise _util.UnsupportedArgumentError(
            "lamina.numpy.unique: axis= with size= is not supported; flatten first")
    return _unique_sized(x, size, fill_value, equal_nan, return_index, return_inverse,
                         return_counts)


def _unique_sized(x: Any, size: int, fill_value: Any, equal_nan: bool, return_index: bool,
                  return_inverse: bool, return_counts: bool) -> Any:
    shape = _util.shape_of(x)
    n = math.prod(shape)
    if n == 0:
        raise ValueError("lamina.numpy.unique: size= needs a non-empty input")
    flat = lax.reshape(x, (n,))
    ints = dtypes.default_int_dtype()
    perm = argsort(flat)
    ordered = take(flat, perm, mode="clip")
    head, tail = lax.slice_in_dim(ordered, 1, n, 1, 0), lax.slice_in_dim(ordered, 0, n - 1, 1, 0)
    differs = lax.ne(head, tail)
    if equal_nan and dtypes.is_inexact(get_aval(flat).dtype):
        differs = lax.bitwise_and(differs, lax.bitwise_not(
            lax.bitwise_and(lax.ne(head, head), lax.ne(tail, tail))))
    is_first = lax.concatenate([np.ones((1,), np.bool_), differs], 0)
    (starts,) = nonzero(is_first, size=size, fill_value=n)
    count = lax.reduce_sum(lax.convert_element_type(is_first, ints), (0,))
    valid = lax.lt(lax.iota(ints, size), count)
    values = take(ordered, starts, mode="clip")
    fill = lax.index_in_dim(ordered, 0, keepdims=False) if fill_value is None else \
        _util.convert(_util.operand("unique", fill_value, "fill_value"), get_aval(ordered).dtype)
    values = lax.select(valid, values, lax.broadcast_in_dim(fill, (size,), ()))
    results: list[Any] = [values]
    if return_index:
        first_index = take(perm, starts, mode="clip")
        # Padding entries repeat the first unique value's index, as JAX's.
        results.append(lax.select(valid, first_index, lax.broadcast_in_dim(
            lax.index_in_dim(first_index, 0, keepdims=False), (size,), ())))
    if return_inverse:
        group = lax.sub(lax.cumsum(lax.convert_element_type(is_first, ints), axis=0),
                        np.asarray(1, ints))
        dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                            scatter_dims_to_operand_dims=(0,))
        inverse = lax.scatter(lax.full((n,), 0, ints), lax.expand_dims(perm, (1,)), group, dnums,
                              indices_are_sorted=False, unique_indices=True)
        results.append(lax.reshape(inverse, shape))
    if return_counts:
        ends = lax.concatenate([lax.slice_in_dim(starts, 1, size, 1, 0),
                                np.asarray([n], ints)], 0)
        counts = lax.sub(lax.min(ends, lax.full_like(ends, n)), starts)
        results.append(lax.select(valid, counts, lax.full_like(counts, 0)))
    return results[0] if len(results) == 1 else tuple(results)


def isin(element: ArrayLike, test_elements: ArrayLike, assume_unique: bool = False,
         invert: bool = False, *, method: str = "auto") -> Array:
    """True where an element of ``element`` occurs in ``test_elements``."""
    x, tests = _util.promote_dtypes("isin", element, test_elements)
    flat = lax.reshape(tests, (math.prod(_util.shape_of(tests)),))
    nd = _util.ndim_of(x)
    shape = _util.shape_of(x) + _util.shape_of(flat)
    matches = lax.eq(lax.broadcast_in_dim(x, shape, tuple(range(nd))),
                     lax.broadcast_in_dim(flat, shape, (nd,)))
    found = lax.reduce_or(matches, (nd,))
    return lax.bitwise_not(found) if invert else found


def bincount(x: ArrayLike, weights: ArrayLike | None = None, minlength: int = 0, *,
             length: int | None = None, out_sharding: Any = None) -> Array:
    """Counts (or summed ``weights``) of each non-negative integer in ``x``;
    under a transformation ``length`` must be given (larger values are dropped).
    ``out_sharding`` may only be replicated (JAX's ShardingTypeError else)."""
    xs = _util.operand("bincount", x, "x")
    if not (dtypes.is_integer(get_aval(xs).dtype) or dtypes.is_boolean(get_aval(xs).dtype)):
        raise TypeError(f"lamina.numpy.bincount: x must be an integer array, got "
                        f"{get_aval(xs).dtype}")
    if _util.ndim_of(xs) != 1:
        raise ValueError("lamina.numpy.bincount: x must be 1-D")
    minlength = _util.concrete_int("bincount", minlength, "minlength")
    if length is None:
        values = _util.concrete("bincount", xs, "x (or give the length argument)")
        length = max(minlength, int(values.max()) + 1 if values.size else 0)
    else:
        length = _util.concrete_int("bincount", length, "length")
    if _util.out_sharding("bincount", out_sharding, (length,)) is not None:
        raise ShardingTypeError("out_sharding passed to `jnp.bincount` can only be fully "
                                "replicated or fully unreduced along all mesh axes (the "
                                "out_sharding of jnp.bincount)")
    if weights is None:
        w = lax.full(_util.shape_of(xs), 1, dtypes.default_int_dtype())
    else:
        w = _util.operand("bincount", weights, "weights")
        w = _util.broadcast_to("bincount", w, _util.shape_of(xs))
    ints = _util.convert(xs, dtypes.default_int_dtype())
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    out = lax.full((length,), 0, get_aval(w).dtype)
    return lax.scatter_add(out, lax.expand_dims(ints, (1,)), w, dnums,
                           mode=lax.GatherScatterMode.FILL_OR_DROP)
