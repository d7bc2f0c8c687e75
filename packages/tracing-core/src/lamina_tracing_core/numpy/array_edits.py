"""Functional versions of NumPy's array edits: ``insert``, ``delete``,
``put``, ``put_along_axis``, ``fill_diagonal``, ``resize`` and ``block``.

lamina arrays are immutable: the functions NumPy runs in place (``put``,
``put_along_axis``, ``fill_diagonal``) need ``inplace=False`` and return the
updated array."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import arange, array, asarray
from lamina_tracing_core.numpy.indexing import (
    diag_indices,
    getitem,
    index_update,
    nonzero,
    unravel_index,
)
from lamina_tracing_core.numpy.shape_ops import concatenate, moveaxis, ravel, reshape, tile
from lamina_tracing_core.numpy.sorting import argsort, sort

_IMMUTABLE = ("lamina.numpy.{fun} cannot modify arrays in place, because lamina arrays are "
              "immutable; pass inplace=False to get the updated array")


def _axis_index(axis: int, idx: Any) -> tuple[Any, ...]:
    return (slice(None),) * axis + (idx,)


def _tile_to_size(x: Any, size: int) -> Any:
    n = _util.shape_of(x)[0]
    if n == size:
        return x
    return lax.slice_in_dim(tile(x, -(-size // n)), 0, size, 1, 0)


# --- insert and delete -------------------------------------------------------------------------
def insert(arr: ArrayLike, obj: ArrayLike | slice, values: ArrayLike,
           axis: int | None = None) -> Array:
    """``arr`` with ``values`` inserted before the indices ``obj`` (an integer,
    a 1-D integer array or a slice) along ``axis`` (``None``: flattened)."""
    (a,) = _util.operands("insert", arr, names=("arr",))
    if axis is None:
        a = ravel(a)
        axis = 0
    ax = _util.canonicalize_axis("insert", axis, _util.ndim_of(a))
    n_input = _util.shape_of(a)[ax]
    if isinstance(obj, slice):
        idx = arange(*obj.indices(n_input))
    else:
        idx = _util.operand("insert", obj, "obj")
    if _util.ndim_of(idx) > 1:
        raise ValueError("lamina.numpy.insert: obj must be a slice, a one-dimensional array or "
                         f"a scalar; got shape {_util.shape_of(idx)}")
    idx_dt = get_aval(idx).dtype
    if not dtypes.is_integer(idx_dt):
        if math.prod(_util.shape_of(idx)) == 0 and not _util.is_lamina_array(obj):
            idx = _util.convert(idx, dtypes.default_int_dtype())
        else:
            raise ValueError(f"lamina.numpy.insert: the index array must be integer typed; "
                             f"got {idx_dt}")
    vals = array(_util.operand("insert", values, "values"), ndmin=_util.ndim_of(a),
                 dtype=get_aval(a).dtype, copy=False)
    if math.prod(_util.shape_of(idx)) == 1:
        index = lax.reshape(idx, ())
        if _util.ndim_of(idx) == 0:
            vals = moveaxis(vals, 0, ax)
        idx = lax.broadcast_in_dim(index, (_util.shape_of(vals)[ax],), ())
    idx = _util.convert(idx, dtypes.default_int_dtype())
    n_insert = _util.broadcast_shapes("insert", _util.shape_of(idx),
                                      (_util.shape_of(vals)[ax],))[0]
    idx = _util.broadcast_to("insert", idx, (n_insert,))
    out_shape = list(_util.shape_of(a))
    out_shape[ax] += n_insert
    ints = get_aval(idx).dtype
    size = np.asarray(n_input, ints)
    idx = lax.select(lax.lt(idx, lax.full_like(idx, 0)), lax.add(idx, size), idx)
    idx = lax.clamp(np.asarray(0, ints), idx, size)
    # Inserted values land at their index plus the number inserted before them.
    order = argsort(idx)
    values_at = index_update(idx, order, lax.iota(ints, n_insert), "add")
    keep = index_update(lax.full((n_input + n_insert,), True, np.bool_), values_at, False, "set")
    (arr_at,) = nonzero(keep, size=n_input)
    out = lax.full(tuple(out_shape), 0, get_aval(a).dtype)
    vshape = list(out_shape)
    vshape[ax] = n_insert
    vals = _util.broadcast_to("insert", vals, tuple(vshape))
    out = index_update(out, _axis_index(ax, values_at), vals, "set")
    return index_update(out, _axis_index(ax, arr_at), a, "set")


def delete(arr: ArrayLike, obj: ArrayLike | slice, axis: int | None = None, *,
           assume_unique_indices: bool = False) -> Array:
    """``arr`` without the entries ``obj`` (an integer, a slice, an integer or
    boolean array) along ``axis`` (``None``: flattened). Traced index arrays
    need ``assume_unique_indices=True``."""
    (a,) = _util.operands("delete", arr, names=("arr",))
    if axis is None:
        a = ravel(a)
        axis = 0
    ax = _util.canonicalize_axis("delete", axis, _util.ndim_of(a))
    n = _util.shape_of(a)[ax]
    if not isinstance(obj, slice) and not _util.is_lamina_array(obj) and \
            not isinstance(obj, (list, tuple, np.ndarray)):
        try:
            index = operator.index(obj)
        except TypeError:
            pass
        else:
            i = _util.canonicalize_axis("delete", index, n, "obj")
            pre = getitem(a, _axis_index(ax, slice(0, i)))
            post = getitem(a, _axis_index(ax, slice(i + 1, None)))
            return concatenate([pre, post], axis=ax)
    if isinstance(obj, slice):
        idx = arange(n)[obj]
        assume_unique_indices = True
    else:
        idx = _util.operand("delete", obj, "obj")
    idx_dt = get_aval(idx).dtype
    if dtypes.is_integer(idx_dt) and assume_unique_indices:
        flat = ravel(idx)
        ints = get_aval(flat).dtype
        size = np.asarray(n, ints)
        flat = lax.select(lax.lt(flat, lax.full_like(flat, 0)), lax.add(flat, size), flat)
        flat = sort(lax.clamp(np.asarray(0, ints), flat, size))
        k = _util.shape_of(flat)[0]
        shifted = lax.sub(flat, lax.iota(ints, k))
        kept = lax.iota(ints, n - k)
        # Each kept position moves past the deleted entries at or before it.
        past = lax.ge(lax.broadcast_in_dim(kept, (k, n - k), (1,)),
                      lax.broadcast_in_dim(shifted, (k, n - k), (0,)))
        kept = lax.add(kept, lax.reduce_sum(lax.convert_element_type(past, ints), (0,)))
        return getitem(a, _axis_index(ax, kept))
    what = "the obj array (give assume_unique_indices=True to delete traced indices)"
    value = _util.concrete("delete", idx, what)
    if dtypes.is_integer(value.dtype):
        mask = np.ones(n, dtype=bool)
        mask[value] = False
    elif value.dtype == np.bool_:
        if value.shape != (n,):
            raise ValueError("lamina.numpy.delete: boolean obj must be one-dimensional with "
                             f"the length of the axis ({n}), got shape {value.shape}")
        mask = ~value
    else:
        raise ValueError(f"lamina.numpy.delete: obj must be integer or bool, got {value.dtype}")
    return getitem(a, _axis_index(ax, np.flatnonzero(mask)))


# --- put, put_along_axis, fill_diagonal --------------------------------------------------------
def put(a: ArrayLike, ind: ArrayLike, v: ArrayLike, mode: str | None = None, *,
        inplace: bool = True) -> Array:
    """``a`` with the flat positions ``ind`` set to ``v`` (repeated as needed);
    ``mode`` ``"clip"`` clips out-of-range indices, ``"wrap"`` wraps them, None
    (JAX's default) clips them as ``unravel_index`` does."""
    if inplace:
        raise ValueError(_IMMUTABLE.format(fun="put"))
    x, i, vals = _util.operands("put", a, ind, v, names=("a", "ind", "v"))
    flat_i, flat_v = ravel(i), ravel(_util.convert(vals, get_aval(x).dtype))
    size = math.prod(_util.shape_of(x))
    if size == 0 or math.prod(_util.shape_of(flat_i)) == 0 or \
            math.prod(_util.shape_of(flat_v)) == 0:
        return x
    flat_v = _tile_to_size(flat_v, _util.shape_of(flat_i)[0])
    ints = get_aval(flat_i).dtype
    if mode is None:
        scatter_mode = "drop"
    elif mode == "clip":
        flat_i = lax.clamp(np.asarray(0, ints), flat_i, np.asarray(size - 1, ints))
        scatter_mode = "promise_in_bounds"
    elif mode == "wrap":
        s = np.asarray(size, ints)
        flat_i = lax.rem(lax.add(lax.rem(flat_i, s), s), s)
        scatter_mode = "promise_in_bounds"
    elif mode == "raise":
        raise _util.UnsupportedArgumentError(
            "lamina.numpy.put: mode='raise' is not supported (indices are not checked on "
            "device); use None, 'clip' or 'wrap'")
    else:
        raise ValueError(f"lamina.numpy.put: mode should be one of 'wrap' or 'clip'; got "
                         f"{mode!r}")
    # As JAX: the flat indices go through unravel_index (which clips them).
    where = unravel_index(flat_i, _util.shape_of(x))
    return index_update(x, tuple(where), flat_v, "set", mode=scatter_mode)


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None,
                   inplace: bool = True, *, mode: str | None = None) -> Array:
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the
    inverse of ``take_along_axis``)."""
    if inplace:
        raise ValueError(_IMMUTABLE.format(fun="put_along_axis"))
    x, idx, vals = _util.operands("put_along_axis", arr, indices, values,
                                  names=("arr", "indices", "values"))
    original_shape = _util.shape_of(x)
    if axis is None:
        x = ravel(x)
        axis = 0
    nd = _util.ndim_of(x)
    if _util.ndim_of(idx) != nd:
        raise ValueError("lamina.numpy.put_along_axis: arr and indices must have the same "
                         f"ndim, got {nd} and {_util.ndim_of(idx)}")
    ax = _util.canonicalize_axis("put_along_axis", axis, nd)
    ishape = _util.shape_of(idx)
    try:
        vals = _util.broadcast_to("put_along_axis", vals, ishape)
    except ValueError:
        raise ValueError("lamina.numpy.put_along_axis: values must be broadcastable to the "
                         f"indices' shape {ishape}, got {_util.shape_of(vals)}") from None
    ints = get_aval(idx).dtype
    where: list[Any] = []
    for d in range(nd):
        if d == ax:
            where.append(idx)
        elif ishape[d] == 1:
            where.append(lax.full(ishape, 0, ints))
        else:
            where.append(lax.broadcasted_iota(ints, ishape, d))
    out = index_update(x, tuple(where), vals, "set", mode=mode)
    return lax.reshape(out, original_shape) if axis is None or \
        _util.shape_of(out) != original_shape else out


def fill_diagonal(a: ArrayLike, val: ArrayLike, wrap: bool = False, *,
                  inplace: bool = True) -> Array:
    """``a`` with its main diagonal set to ``val`` (repeated as needed)."""
    if inplace:
        raise ValueError(_IMMUTABLE.format(fun="fill_diagonal"))
    if wrap:
        raise _util.UnsupportedArgumentError(
            "lamina.numpy.fill_diagonal: wrap=True is not supported")
    x, v = _util.operands("fill_diagonal", a, val, names=("a", "val"))
    shape = _util.shape_of(x)
    if len(shape) < 2:
        raise ValueError("lamina.numpy.fill_diagonal: array must be at least 2-d")
    if len(shape) > 2 and any(d != shape[0] for d in shape[1:]):
        raise ValueError("lamina.numpy.fill_diagonal: all dimensions of the input must have "
                         "equal length")
    n = min(shape)
    idx = diag_indices(n, len(shape))
    fill = v if _util.ndim_of(v) == 0 else _tile_to_size(ravel(v), n)
    return index_update(x, idx, fill, "set")


def diag_indices_from(arr: ArrayLike) -> tuple[Array, ...]:
    """The indices of the main diagonal of the square array ``arr``."""
    shape = _util.shape_of(_util.operand("diag_indices_from", arr, "arr"))
    if len(shape) < 2:
        raise ValueError("lamina.numpy.diag_indices_from: input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("lamina.numpy.diag_indices_from: all dimensions of the input must "
                         "have equal length")
    return diag_indices(shape[0], len(shape))


def resize(a: ArrayLike, new_shape: Any) -> Array:
    """``a`` flattened, repeated as needed and reshaped to ``new_shape``."""
    shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    shape = tuple(_util.concrete_int("resize", d, "new_shape") for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError("lamina.numpy.resize: all elements of new_shape must be non-negative")
    flat = ravel(_util.operand("resize", a, "a"))
    size = math.prod(shape)
    if _util.shape_of(flat)[0] == 0 or size == 0:
        return lax.full(shape, 0, get_aval(flat).dtype)
    return reshape(_tile_to_size(flat, size), shape)


# --- block -------------------------------------------------------------------------------------
def _block_depth(fun: str, arrays: Any, depth: int) -> tuple[int, int]:
    """The depth of the nested lists and the largest rank of a leaf."""
    if isinstance(arrays, tuple):
        raise ValueError(f"lamina.numpy.{fun}: arrays is a tuple; only lists can be used to "
                         "arrange blocks")
    if isinstance(arrays, list):
        if not arrays:
            raise ValueError(f"lamina.numpy.{fun}: list cannot be empty")
        parts = [_block_depth(fun, a, depth + 1) for a in arrays]
        if len({d for d, _ in parts}) != 1:
            raise ValueError(f"lamina.numpy.{fun}: mismatched list depths")
        return parts[0][0], max(r for _, r in parts)
    return depth, _util.ndim_of(asarray(arrays))


def _block(arrays: Any, depth: int, list_depth: int, rank: int) -> Any:
    if isinstance(arrays, list):
        pieces = [_block(a, depth + 1, list_depth, rank) for a in arrays]
        return concatenate(pieces, axis=-(list_depth - depth))
    return array(asarray(arrays), ndmin=rank, copy=False)


def block(arrays: Any) -> Array:
    """An array assembled from nested lists of blocks: the innermost lists
    concatenate along the last axis, the next ones along the one before..."""
    list_depth, leaf_rank = _block_depth("block", arrays, 0)
    return _block(arrays, 0, list_depth, max(list_depth, leaf_rank))
