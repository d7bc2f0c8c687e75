"""Selecting elements: ``take``, ``take_along_axis``, ``where``, ``select``,
``choose``, ``nonzero``, ``argwhere``, ``flatnonzero``, ``compress``,
``extract``; index arithmetic: ``unravel_index``, ``ravel_multi_index``,
``ix_``, ``diag_indices``.

XLA needs static shapes, so functions whose output size depends on the
*values* (``nonzero``, one-argument ``where``, ``compress``...) work on
concrete inputs, and under a transformation need ``size=`` (the result is
then padded with ``fill_value`` or truncated), as in JAX.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax

from lamina.numpy import _util
from lamina.numpy._util import Array, ArrayLike

_MODES = {None: lax.GatherScatterMode.FILL_OR_DROP, "fill": lax.GatherScatterMode.FILL_OR_DROP,
          "clip": lax.GatherScatterMode.CLIP,
          "promise_in_bounds": lax.GatherScatterMode.PROMISE_IN_BOUNDS}


def _index_operand(fun: str, indices: Any, name: str = "indices") -> Any:
    idx = _util.operand(fun, indices, name)
    dt = _util.dtype_of(idx)
    if not dtypes.is_integer(dt):
        raise TypeError(f"lamina.numpy.{fun}: {name} must be an integer array, got {dt}")
    return idx


def _gather_mode(fun: str, mode: Any) -> Any:
    if mode == "raise":
        raise _util.UnsupportedArgumentError(
            f"lamina.numpy.{fun}: mode='raise' is not supported (out-of-bound indices cannot "
            "raise inside compiled code); use 'fill', 'clip' or 'wrap'")
    if mode not in _MODES and mode != "wrap":
        raise ValueError(f"lamina.numpy.{fun}: invalid mode {mode!r}; expected one of "
                         "'fill', 'clip', 'wrap', 'promise_in_bounds'")
    return _MODES.get(mode, lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _normalize(idx: Any, size: int, wrap: bool) -> Any:
    """Negative indices count from the end (all indices wrap if ``wrap``)."""
    n = np.asarray(size, _util.dtype_of(idx))
    if wrap:
        if size == 0:
            return idx
        r = lax.rem(idx, n)
        return lax.select(lax.lt(r, lax.full_like(r, 0)), lax.add(r, lax.full_like(r, n)), r)
    if dtypes.issubdtype(_util.dtype_of(idx), np.unsignedinteger):
        return idx
    return lax.select(lax.lt(idx, lax.full_like(idx, 0)), lax.add(idx, lax.full_like(idx, n)), idx)


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None) -> Array:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flat ``a`` if None).

    Out-of-bound indices give ``fill_value`` (NaN for floats) in the default
    'fill' mode; 'clip' clamps and 'wrap' wraps them."""
    _util.check_out("take", out)
    x = _util.operand("take", a, "a")
    idx = _index_operand("take", indices)
    if axis is None:
        x = lax.reshape(x, (math.prod(_util.shape_of(x)),))
        axis = 0
    shape = _util.shape_of(x)
    ax = _util.canonicalize_axis("take", axis, len(shape))
    gather_mode = _gather_mode("take", mode)
    idx = _normalize(idx, shape[ax], wrap=mode == "wrap")
    idx_nd = _util.ndim_of(idx)
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(ax)) + tuple(range(ax + idx_nd, len(shape) - 1 + idx_nd)),
        collapsed_slice_dims=(ax,), start_index_map=(ax,))
    slice_sizes = tuple(1 if i == ax else d for i, d in enumerate(shape))
    if shape[ax] == 0 and math.prod(_util.shape_of(idx)) > 0:
        if gather_mode != lax.GatherScatterMode.FILL_OR_DROP:
            raise IndexError("lamina.numpy.take: cannot do a non-empty take from an empty axis")
    return lax.gather(x, lax.expand_dims(idx, (idx_nd,)), dnums, slice_sizes,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=gather_mode, fill_value=fill_value)


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None, mode: str | None = None,
                    fill_value: Any = None) -> Array:
    """``arr`` gathered at ``indices`` along ``axis``; the other axes of
    ``arr`` and ``indices`` broadcast against each other."""
    x = _util.operand("take_along_axis", arr, "arr")
    idx = _index_operand("take_along_axis", indices)
    if axis is None:
        x = lax.reshape(x, (math.prod(_util.shape_of(x)),))
        idx = lax.reshape(idx, (math.prod(_util.shape_of(idx)),))
        axis = 0
    nd = _util.ndim_of(x)
    if _util.ndim_of(idx) != nd:
        raise ValueError(f"lamina.numpy.take_along_axis: indices and arr must have the same "
                         f"number of dimensions; {_util.ndim_of(idx)} vs {nd}")
    ax = _util.canonicalize_axis("take_along_axis", axis, nd)
    x_shape, i_shape = _util.shape_of(x), _util.shape_of(idx)
    batch = _util.broadcast_shapes("take_along_axis", x_shape[:ax] + (1,) + x_shape[ax + 1:],
                                   i_shape[:ax] + (1,) + i_shape[ax + 1:])
    x = _util.broadcast_to("take_along_axis", x, batch[:ax] + (x_shape[ax],) + batch[ax + 1:])
    idx = _util.broadcast_to("take_along_axis", idx, batch[:ax] + (i_shape[ax],) + batch[ax + 1:])
    gather_mode = _gather_mode("take_along_axis", mode)
    idx = _normalize(idx, x_shape[ax], wrap=mode == "wrap")
    others = tuple(i for i in range(nd) if i != ax)
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(ax,),
                                       start_index_map=(ax,), operand_batching_dims=others,
                                       start_indices_batching_dims=others)
    return lax.gather(x, lax.expand_dims(idx, (nd,)), dnums, (1,) * nd, mode=gather_mode,
                      fill_value=fill_value)


# --- where and select ------------------------------------------------------------------------
def _as_bool(fun: str, x: Any) -> Any:
    c = _util.operand(fun, x, "condition")
    return c if dtypes.is_boolean(_util.dtype_of(c)) else lax.ne(c, lax.full_like(c, 0))


def _where3(fun: str, condition: Any, x: Any, y: Any) -> Array:
    cond = _as_bool(fun, condition)
    a, b = _util.promote_dtypes(fun, x, y)
    shape = _util.broadcast_shapes(fun, *(_util.shape_of(v) for v in (cond, a, b)))
    cond, a, b = (_util.broadcast_to(fun, v, shape) for v in (cond, a, b))
    return lax.select(cond, a, b)


def where(condition: ArrayLike, x: ArrayLike | None = None, y: ArrayLike | None = None, /, *,
          size: int | None = None, fill_value: Any = None) -> Any:
    """``x`` where ``condition`` holds, else ``y`` (broadcast together); with
    only ``condition``, the same as ``nonzero(condition)``."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("lamina.numpy.where: either both or neither of x and y must be given")
    if size is not None or fill_value is not None:
        raise ValueError("lamina.numpy.where: size and fill_value only apply to the "
                         "one-argument form")
    return _where3("where", condition, x, y)


def select(condlist: Sequence[ArrayLike], choicelist: Sequence[ArrayLike],
           default: ArrayLike = 0) -> Array:
    """From ``choicelist``, the element of the first choice whose condition holds
    (``default`` where none holds)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"lamina.numpy.select: condlist has {len(condlist)} entries and "
                         f"choicelist {len(choicelist)}; they must match")
    if not condlist:
        raise ValueError("lamina.numpy.select: condlist must be non-empty")
    choices = _util.promote_dtypes("select", default, *choicelist)
    out = choices[0]
    for cond, choice in reversed(list(zip(condlist, choices[1:]))):
        c = _util.operand("select", cond, "condlist entry")
        if not dtypes.is_boolean(_util.dtype_of(c)):
            raise TypeError(f"lamina.numpy.select: condlist entries must be boolean, got "
                            f"{_util.dtype_of(c)}")
        out = _where3("select", c, choice, out)
    return out


def choose(a: ArrayLike, choices: Sequence[ArrayLike], out: None = None,
           mode: str = "raise") -> Array:
    """``choices[a[i]][i]`` elementwise (``mode`` 'clip' or 'wrap' for
    out-of-range ``a``; the default 'raise' needs concrete ``a``)."""
    _util.check_out("choose", out)
    idx = _index_operand("choose", a, "a")
    n = len(choices)
    if mode == "raise":
        values = _util.concrete("choose", idx, "a (with mode='raise'; use 'clip' or 'wrap')")
        if values.size and (values.min() < 0 or values.max() >= n):
            raise ValueError("lamina.numpy.choose: invalid entry in choice array")
    elif mode == "wrap":
        idx = _normalize(idx, n, wrap=True)
    elif mode == "clip":
        idx = lax.clamp(np.asarray(0, _util.dtype_of(idx)), idx,
                        np.asarray(n - 1, _util.dtype_of(idx)))
    else:
        raise ValueError(f"lamina.numpy.choose: invalid mode {mode!r}")
    opts = _util.promote_dtypes("choose", *choices)
    shape = _util.broadcast_shapes("choose", _util.shape_of(idx),
                                   *(_util.shape_of(c) for c in opts))
    idx = _util.broadcast_to("choose", idx, shape)
    return lax.select_n(lax.convert_element_type(idx, np.int32),
                        *(_util.broadcast_to("choose", c, shape) for c in opts))


# --- positions of non-zero elements -------------------------------------------------------------
def _nonzero_flat(fun: str, mask: Any, size: int) -> Any:
    """The first ``size`` flat positions where ``mask`` is True; positions past
    the last True are ``mask.size``."""
    n = math.prod(_util.shape_of(mask))
    ints = dtypes.default_int_dtype()
    flat = lax.reshape(mask, (n,))
    positions = lax.select(flat, lax.iota(ints, n), lax.full((n,), n, ints))
    ordered = lax.sort(positions, dimension=0) if n else positions
    if size <= n:
        return lax.slice_in_dim(ordered, 0, size, 1, 0)
    return lax.pad(ordered, np.asarray(n, ints), [(0, size - n, 0)])


def nonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> tuple[Array, ...]:
    """The indices of the non-zero elements, one array per dimension.

    Under a transformation ``size`` must be given: the result then has that
    length, padded with ``fill_value`` (default 0) or truncated."""
    x = _util.operand("nonzero", a, "a")
    shape = _util.shape_of(x)
    if not shape:
        raise ValueError("lamina.numpy.nonzero: calling nonzero on 0d arrays is not allowed; "
                         "use atleast_1d first")
    mask = _as_bool("nonzero", x)
    ints = dtypes.default_int_dtype()
    if size is None:
        if not _util.is_concrete(mask):
            _util.concrete("nonzero", mask, "the input (or give the size argument)")
        values = np.asarray(_util.concrete("nonzero", mask, "the input"))
        from lamina.numpy.creation import asarray
        return tuple(asarray(np.asarray(i, ints)) for i in np.nonzero(values))
    size = _util.concrete_int("nonzero", size, "size")
    n = math.prod(shape)
    flat = _nonzero_flat("nonzero", mask, size)
    valid = lax.lt(flat, np.asarray(n, ints))
    out = []
    stride = n
    for d in shape:
        stride //= d if d else 1
        coord = lax.rem(lax.div(flat, np.asarray(max(stride, 1), ints)),
                        np.asarray(max(d, 1), ints))
        out.append(coord)
    fills = _fill_values("nonzero", fill_value, len(shape))
    return tuple(lax.select(valid, c, lax.full_like(c, f)) for c, f in zip(out, fills))


def _fill_values(fun: str, fill_value: Any, count: int) -> list[Any]:
    if fill_value is None:
        return [0] * count
    values = np.asarray(_util.concrete(fun, fill_value, "fill_value"))
    if values.ndim == 0:
        return [values[()]] * count
    if values.shape != (count,):
        raise ValueError(f"lamina.numpy.{fun}: fill_value must be a scalar or have one entry "
                         f"per dimension ({count})")
    return list(values)


def flatnonzero(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Array:
    """The indices of the non-zero elements of the flattened ``a``."""
    x = _util.operand("flatnonzero", a, "a")
    return nonzero(lax.reshape(x, (math.prod(_util.shape_of(x)),)), size=size,
                   fill_value=fill_value)[0]


def argwhere(a: ArrayLike, *, size: int | None = None, fill_value: Any = None) -> Array:
    """The indices of the non-zero elements as rows of a ``(count, ndim)`` array."""
    x = _util.operand("argwhere", a, "a")
    nd = _util.ndim_of(x)
    coords = nonzero(x if nd else lax.reshape(x, (1,)), size=size, fill_value=fill_value)
    if nd == 0:
        return lax.full((_util.shape_of(coords[0])[0], 0), 0, dtypes.default_int_dtype())
    return lax.concatenate([lax.expand_dims(c, (1,)) for c in coords], 1)


def compress(condition: ArrayLike, a: ArrayLike, axis: int | None = None, *,
             size: int | None = None, fill_value: Any = 0, out: None = None) -> Array:
    """The slices of ``a`` along ``axis`` where the 1-D ``condition`` holds."""
    _util.check_out("compress", out)
    cond = _as_bool("compress", condition)
    if _util.ndim_of(cond) != 1:
        raise ValueError("lamina.numpy.compress: condition must be a 1-D array")
    x = _util.operand("compress", a, "a")
    if axis is None:
        x = lax.reshape(x, (math.prod(_util.shape_of(x)),))
        axis = 0
    ax = _util.canonicalize_axis("compress", axis, _util.ndim_of(x))
    n = _util.shape_of(x)[ax]
    c_len = _util.shape_of(cond)[0]
    if c_len > n:
        raise ValueError("lamina.numpy.compress: condition is longer than the axis")
    if c_len < n:
        cond = lax.pad(cond, np.asarray(False), [(0, n - c_len, 0)])
    (idx,) = nonzero(cond, size=size)
    if size is None:
        return take(x, idx, axis=ax)
    count = lax.reduce_sum(lax.convert_element_type(cond, dtypes.default_int_dtype()), (0,))
    picked = take(x, idx, axis=ax)
    valid = lax.lt(lax.iota(dtypes.default_int_dtype(), size), count)
    shape = _util.shape_of(picked)
    mask = lax.broadcast_in_dim(valid, shape, (ax,))
    fill = _util.convert(_util.operand("compress", fill_value, "fill_value"),
                         _util.dtype_of(picked))
    return lax.select(mask, picked, lax.full_like(picked, fill))


def extract(condition: ArrayLike, arr: ArrayLike, *, size: int | None = None,
            fill_value: Any = 0) -> Array:
    """The elements of ``arr`` where ``condition`` holds (both flattened)."""
    c = _util.operand("extract", condition, "condition")
    x = _util.operand("extract", arr, "arr")
    return compress(lax.reshape(c, (math.prod(_util.shape_of(c)),)),
                    lax.reshape(x, (math.prod(_util.shape_of(x)),)), size=size,
                    fill_value=fill_value)


# --- index arithmetic ---------------------------------------------------------------------------
def unravel_index(indices: ArrayLike, shape: Any) -> tuple[Array, ...]:
    """The coordinates in an array of ``shape`` of flat ``indices``; negative
    indices count from the end and out-of-range ones are clipped (as JAX)."""
    idx = _index_operand("unravel_index", indices)
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dims = tuple(_util.concrete_int("unravel_index", d, "shape") for d in dims)
    total = math.prod(dims)
    dt = _util.dtype_of(idx)
    idx = lax.select(lax.lt(idx, lax.full_like(idx, 0)), lax.add(idx, lax.full_like(idx, total)),
                     idx)
    idx = lax.clamp(np.asarray(0, dt), idx, np.asarray(max(total - 1, 0), dt))
    out = []
    for d in reversed(dims):
        size = np.asarray(max(d, 1), dt)
        out.append(lax.rem(idx, size))
        idx = lax.div(idx, size)
    return tuple(reversed(out))


def ravel_multi_index(multi_index: Any, dims: Any, mode: str = "raise",
                      order: str = "C") -> Array:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of
    shape ``dims`` (``mode`` 'raise' needs concrete indices; 'wrap' or 'clip')."""
    if order != "C":
        raise _util.UnsupportedArgumentError("lamina.numpy.ravel_multi_index: only order='C' is "
                                             "supported")
    shape = tuple(_util.concrete_int("ravel_multi_index", d, "dims") for d in dims)
    coords = [_index_operand("ravel_multi_index", c, "multi_index") for c in multi_index]
    if len(coords) != len(shape):
        raise ValueError(f"lamina.numpy.ravel_multi_index: {len(coords)} coordinate arrays for "
                         f"{len(shape)} dimensions")
    coords = _util.promote_args("ravel_multi_index", *coords)
    out_shape = _util.broadcast_shapes("ravel_multi_index", *(_util.shape_of(c) for c in coords))
    coords = [_util.broadcast_to("ravel_multi_index", c, out_shape) for c in coords]
    fixed = []
    for c, d in zip(coords, shape):
        dt = _util.dtype_of(c)
        if mode == "raise":
            values = _util.concrete("ravel_multi_index", c,
                                    "multi_index (with mode='raise'; use 'clip' or 'wrap')")
            if values.size and (values.min() < 0 or values.max() >= d):
                raise ValueError("lamina.numpy.ravel_multi_index: invalid entry in coordinates "
                                 "array")
        elif mode == "wrap":
            c = _normalize(c, d, wrap=True)
        elif mode == "clip":
            c = lax.clamp(np.asarray(0, dt), c, np.asarray(max(d - 1, 0), dt))
        else:
            raise ValueError(f"lamina.numpy.ravel_multi_index: invalid mode {mode!r}")
        fixed.append(c)
    flat = lax.full(out_shape, 0, _util.dtype_of(fixed[0]))
    stride = 1
    for c, d in zip(reversed(fixed), reversed(shape)):
        flat = lax.add(flat, lax.mul(c, np.asarray(stride, _util.dtype_of(c))))
        stride *= d
    return flat


def ix_(*args: ArrayLike) -> tuple[Array, ...]:
    """Open-mesh index arrays from 1-D sequences: ``x[ix_(rows, cols)]`` is the
    cross product selection."""
    out = []
    n = len(args)
    for i, a in enumerate(args):
        v = _util.operand("ix_", a, f"args[{i}]")
        if _util.ndim_of(v) != 1:
            raise ValueError("lamina.numpy.ix_: arguments must be 1-D")
        if dtypes.is_boolean(_util.dtype_of(v)):
            raise TypeError("lamina.numpy.ix_: boolean arguments are not supported (their "
                            "nonzero size is value-dependent)")
        shape = tuple(_util.shape_of(v)[0] if j == i else 1 for j in range(n))
        out.append(lax.reshape(v, shape))
    return tuple(out)


def diag_indices(n: int, ndim: int = 2) -> tuple[Array, ...]:
    """The indices of the main diagonal of an ``n``-sided ``ndim``-dimensional array."""
    size = _util.concrete_int("diag_indices", n, "n")
    idx = lax.iota(dtypes.default_int_dtype(), size)
    return (idx,) * _util.concrete_int("diag_indices", ndim, "ndim")

