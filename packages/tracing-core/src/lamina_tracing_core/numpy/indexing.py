"""Selecting elements: ``take``, ``take_along_axis``, ``where``, ``select``,
``choose``, ``nonzero``, ``argwhere``, ``flatnonzero``, ``compress``,
``extract``; index arithmetic: ``unravel_index``, ``ravel_multi_index``,
``ix_``, ``diag_indices``; and NumPy indexing itself: ``x[idx]``
(``getitem``), ``x.at[idx].set/add/...`` (``index_update``) and iteration.

XLA needs static shapes, so functions whose output size depends on the
*values* (``nonzero``, one-argument ``where``, ``compress``...) work on
concrete inputs, and under a transformation need ``size=`` (the result is
then padded with ``fill_value`` or truncated), as in JAX.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import core, dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax import common as lax_common
from lamina_tracing_core.lax.convert import convert_element_type_internal
from lamina_tracing_core.out_sharding import takes_out_sharding

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy import ufuncs
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray, is_key_array, key_arrays_of

_MODES = {None: lax.GatherScatterMode.FILL_OR_DROP, "fill": lax.GatherScatterMode.FILL_OR_DROP,
          "clip": lax.GatherScatterMode.CLIP,
          "promise_in_bounds": lax.GatherScatterMode.PROMISE_IN_BOUNDS}


def _index_operand(fun: str, indices: Any, name: str = "indices") -> Any:
    idx = _util.operand(fun, indices, name)
    dt = get_aval(idx).dtype
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
    n = np.asarray(size, get_aval(idx).dtype)
    if wrap:
        if size == 0:
            return idx
        r = lax.rem(idx, n)
        return lax.select(lax.lt(r, lax.full_like(r, 0)), lax.add(r, lax.full_like(r, n)), r)
    if dtypes.issubdtype(get_aval(idx).dtype, np.unsignedinteger):
        return idx
    return lax.select(lax.lt(idx, lax.full_like(idx, 0)), lax.add(idx, lax.full_like(idx, n)), idx)


def take(a: ArrayLike, indices: ArrayLike, axis: int | None = None, out: None = None,
         mode: str | None = None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value: Any = None) -> Array:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flat ``a`` if None).

    Out-of-bound indices give ``fill_value`` (NaN for floats) in the default
    'fill' mode; 'clip' clamps and 'wrap' wraps them."""
    _util.check_out("take", out)
    if is_key_array(a):
        return a.take(indices, axis)
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
        # JAX's check and words, in every mode
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    out_shape = shape[:ax] + _util.shape_of(idx) + shape[ax + 1:]
    if math.prod(out_shape) == 0:
        return _empty_result(x, out_shape)
    return lax.gather(x, lax.expand_dims(idx, (idx_nd,)), dnums, slice_sizes,
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=gather_mode, fill_value=fill_value)


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1,
                    mode: str | None = None, fill_value: Any = None, *,
                    wrap_negative_indices: bool | None = None) -> Array:
    """``arr`` gathered at ``indices`` along ``axis``; the other axes of
    ``arr`` and ``indices`` broadcast against each other. Negative indices
    count from the end when ``wrap_negative_indices`` (by default, unless
    ``mode='promise_in_bounds'``, as JAX's); else they are out of bounds."""
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
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    if wrap_negative_indices or mode == "wrap":
        idx = _normalize(idx, x_shape[ax], wrap=mode == "wrap")
    out_shape = batch[:ax] + (i_shape[ax],) + batch[ax + 1:]
    if math.prod(out_shape) == 0:
        return _empty_result(x, out_shape)
    others = tuple(i for i in range(nd) if i != ax)
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(ax,),
                                       start_index_map=(ax,), operand_batching_dims=others,
                                       start_indices_batching_dims=others)
    return lax.gather(x, lax.expand_dims(idx, (nd,)), dnums, (1,) * nd, mode=gather_mode,
                      fill_value=fill_value)


# --- where and select ------------------------------------------------------------------------
def _as_bool(fun: str, x: Any) -> Any:
    c = _util.operand(fun, x, "condition")
    return c if dtypes.is_boolean(get_aval(c).dtype) else lax.ne(c, lax.full_like(c, 0))


def _where3(fun: str, condition: Any, x: Any, y: Any) -> Array:
    cond = _as_bool(fun, condition)
    a, b = _util.promote_dtypes(fun, x, y)
    try:
        shape = _util.broadcast_shapes(fun, *(_util.shape_of(v) for v in (cond, a, b)))
    except ValueError as e:  # NumPy's class, as JAX raises for where
        raise ValueError(_util.with_operands_note(str(e), (cond, a, b))) from None
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
    if is_key_array(x) or is_key_array(y):
        return _where_keys(condition, *key_arrays_of("lamina.numpy.where", (x, y), ("x", "y")))
    return _where3("where", condition, x, y)


def _where_keys(condition: ArrayLike, x: PRNGKeyArray, y: PRNGKeyArray) -> PRNGKeyArray:
    """``where`` over key arrays: the condition chooses whole keys."""
    cond = _util.operand("lamina.numpy.where", condition, "condition")
    shape = _util.broadcast_shapes("lamina.numpy.where", _util.shape_of(cond), x.shape, y.shape)
    key_shape = x.impl.key_shape
    cond = lax.reshape(_util.broadcast_to("lamina.numpy.where", cond, shape),
                       shape + (1,) * len(key_shape))
    x_data, y_data = (_util.broadcast_to("lamina.numpy.where", k.base, shape + key_shape)
                      for k in (x, y))
    return x.with_data(_where3("where", cond, x_data, y_data))


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
        if not dtypes.is_boolean(get_aval(c).dtype):
            raise TypeError(f"lamina.numpy.select: condlist entries must be boolean, got "
                            f"{get_aval(c).dtype}")
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
        idx = lax.clamp(np.asarray(0, get_aval(idx).dtype), idx,
                        np.asarray(n - 1, get_aval(idx).dtype))
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
                         get_aval(picked).dtype)
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
    dt = get_aval(idx).dtype
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
                      order: str = "C", *, dtype: Any = None) -> Array:
    """Flat indices of the coordinate arrays ``multi_index`` in an array of
    shape ``dims`` (``mode`` 'raise' needs concrete indices; 'wrap' or 'clip'),
    of ``dtype``: by default the coordinates' integer dtype (a Python int's is
    the default one), as JAX's. JAX's ValueError for a dtype that is not an
    integer one or cannot hold the largest flat index."""
    if order != "C":
        raise _util.UnsupportedArgumentError("lamina.numpy.ravel_multi_index: only order='C' is "
                                             "supported")
    shape = tuple(_util.concrete_int("ravel_multi_index", d, "dims") for d in dims)
    coords = [_index_operand("ravel_multi_index", c, "multi_index") for c in multi_index]
    if len(coords) != len(shape):
        raise ValueError(f"lamina.numpy.ravel_multi_index: {len(coords)} coordinate arrays for "
                         f"{len(shape)} dimensions")
    result_dtype = _flat_index_dtype(coords, shape, dtype)
    coords = _util.promote_args("ravel_multi_index", *coords)
    out_shape = _util.broadcast_shapes("ravel_multi_index", *(_util.shape_of(c) for c in coords))
    coords = [_util.broadcast_to("ravel_multi_index", c, out_shape) for c in coords]
    fixed = [_util.convert(_fixed_coordinate(c, d, mode), result_dtype)
             for c, d in zip(coords, shape)]
    flat = lax.full(out_shape, 0, result_dtype)
    stride = 1
    for c, d in zip(reversed(fixed), reversed(shape)):
        flat = lax.add(flat, lax.mul(c, np.asarray(stride, result_dtype)))
        stride *= d
    return flat


def _flat_index_dtype(coords: Sequence[Any], shape: tuple[int, ...], dtype: Any) -> Any:
    """``ravel_multi_index``'s result dtype, checked as JAX checks it."""
    given = _util.user_dtype("ravel_multi_index", dtype)
    if given is None:
        given = dtypes.result_type(*coords, 0)
    if not dtypes.issubdtype(given, np.integer):
        raise ValueError(f"lamina.numpy.ravel_multi_index: dtype={given!r} is not an integer "
                         "type.")
    if math.prod(shape) - 1 > np.iinfo(given).max:
        raise ValueError(
            f"jnp.ravel_multi_index: dtype={given!r} not large enough to hold flattened index "
            f"for dims={shape}. Use the dtype argument to pass a suitable dtype (e.g. "
            "dtype=np.min_scalar_type(prod(dims))).")
    return given


def _fixed_coordinate(c: Any, d: int, mode: str) -> Any:
    """One coordinate array made valid for a dimension of size ``d`` by ``mode``."""
    dt = get_aval(c).dtype
    if mode == "raise":
        values = _util.concrete("ravel_multi_index", c,
                                "multi_index (with mode='raise'; use 'clip' or 'wrap')")
        if values.size and (values.min() < 0 or values.max() >= d):
            raise ValueError("lamina.numpy.ravel_multi_index: invalid entry in coordinates "
                             "array")
        return c
    if mode == "wrap":
        return _normalize(c, d, wrap=True)
    if mode == "clip":
        return lax.clamp(np.asarray(0, dt), c, np.asarray(max(d - 1, 0), dt))
    raise ValueError(f"lamina.numpy.ravel_multi_index: invalid mode {mode!r}")


def ix_(*args: ArrayLike) -> tuple[Array, ...]:
    """Open-mesh index arrays from 1-D sequences: ``x[ix_(rows, cols)]`` is the
    cross product selection."""
    out = []
    n = len(args)
    for i, a in enumerate(args):
        v = _util.operand("ix_", a, f"args[{i}]")
        if _util.ndim_of(v) != 1:
            raise ValueError("lamina.numpy.ix_: arguments must be 1-D")
        if dtypes.is_boolean(get_aval(v).dtype):
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


# --- x[idx], x.at[idx] and iteration ----------------------------------------------------
class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask used as an index has a traced (unknown) value, so the
    shape of the result is unknown."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        origin = ""
        describe = getattr(tracer, "_origin_message", None)
        if describe is not None:
            try:
                origin = "\n" + str(describe())
            except Exception:  # the error message must never itself fail
                origin = ""
        super().__init__(
            "Array boolean indices must be concrete; got "
            f"{get_aval(tracer).str_short()}. The shape of x[mask] depends on the values in "
            "mask, which are not known while tracing; use lax.numpy.where(mask, x, 0) or "
            "x.at[...] with a fixed-size index instead." + origin)


def _is_int_scalar(e: Any) -> bool:
    return isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))


def _is_index_array(e: Any) -> bool:
    """An array-valued (or traced scalar) index, as opposed to int/slice/None."""
    if isinstance(e, (slice, type(None), type(Ellipsis))) or _is_int_scalar(e):
        return False
    if isinstance(e, (bool, np.bool_)):
        return False
    return True


def _expand_index(shape: tuple[int, ...], idx: Any) -> list[Any]:
    """``idx`` as a list with Ellipsis expanded, lists/tuples of ints as arrays,
    and boolean masks as integer arrays (one per masked axis)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out: list[Any] = []
    for e in idx:
        if isinstance(e, np.ndarray) and e.ndim == 0 and e.dtype.kind in "iu":
            e = int(e)
        if isinstance(e, (list, tuple)) and not isinstance(e, str):
            e = np.asarray(e)
            if e.dtype == object or e.dtype.kind not in "biu":
                if e.size == 0:
                    e = e.astype(np.int32)
                else:
                    raise IndexError(f"Using a non-integer sequence as an index is not "
                                     f"supported: {idx!r}")
        out.append(e)
    n_ellipsis = sum(1 for e in out if e is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = 0
    for e in out:
        if e is None or e is Ellipsis:
            continue
        if isinstance(e, (bool, np.bool_)):
            continue
        if _is_index_array(e) and get_aval(e).dtype == dtypes.bool_:
            consumed += len(get_aval(e).shape)
        else:
            consumed += 1
    if consumed > len(shape):
        raise IndexError(f"Too many indices for array: {consumed} non-None/Ellipsis indices "
                         f"for dim {len(shape)}.")
    if n_ellipsis:
        i = out.index(Ellipsis)
        out[i:i + 1] = [slice(None)] * (len(shape) - consumed)
    else:
        out.extend([slice(None)] * (len(shape) - consumed))
    return _masks_as_positions(shape, out)


def _masks_as_positions(shape: tuple[int, ...], entries: list[Any]) -> list[Any]:
    """Boolean masks replaced by integer index arrays (one per masked axis);
    a mask's values must be known and its shape must equal the axes it
    covers (an IndexError otherwise, as NumPy and JAX)."""
    expanded: list[Any] = []
    dim = 0  # the axis of ``shape`` the entry indexes
    for position, e in enumerate(entries):
        if e is None or isinstance(e, (bool, np.bool_)):
            expanded.append(e)
            continue
        if not (_is_index_array(e) and get_aval(e).dtype == dtypes.bool_):
            expanded.append(e)
            dim += 1
            continue
        mask_shape = get_aval(e).shape
        if not mask_shape:
            raise IndexError("a scalar boolean array index is not supported; use "
                             "x[None] or an empty slice")
        covered = shape[dim:dim + len(mask_shape)]
        if mask_shape != covered:
            raise IndexError(f"boolean index did not match shape of indexed array in index "
                             f"{position}: got {mask_shape}, expected {list(covered)}")
        val = _concrete_value(e)
        if val is None:
            raise NonConcreteBooleanIndexError(e)
        expanded.extend(np.nonzero(val))
        dim += len(mask_shape)
    return expanded


def _concrete_value(x: Any) -> Any:
    """The numpy value of ``x``, or None when ``x`` is traced."""
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        return None if val is None else np.asarray(val)
    return np.asarray(x)


def _dtype(x: Any) -> np.dtype[Any]:
    return get_aval(x).dtype


def _check_index_dtype(e: Any) -> None:
    dtype = get_aval(e).dtype
    if dtype not in lax_common.INT:
        # a TypeError, as JAX; a Python float is named by its own type (float64)
        named = np.asarray(e).dtype if isinstance(e, (float, complex)) else dtype
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{named.name}")


def _normalize_index(i: Any, size: int) -> Any:
    """A (traced) integer index with negative values counted from the end."""
    dtype = get_aval(i).dtype
    if dtype in lax_common.UNSIGNED:
        return i
    if size > np.iinfo(dtype).max:
        i = lax.convert_element_type(i, dtypes.int64 if dtypes.x64_enabled() else dtypes.int32)
        dtype = get_aval(i).dtype
    return lax.select(lax.lt(i, lax_common.const(dtype, 0)), lax.add(i, lax_common.const(dtype, size)), i)


def _static_slice(x: Any, axis: int, s: slice) -> Any:
    size = get_aval(x).shape[axis]
    start, stop, step = s.indices(size)
    if step > 0:
        if start == 0 and stop >= size and step == 1:
            return x
        return lax.slice_in_dim(x, start, max(start, stop), step, axis)
    # A negative step: take the forward slice of the same elements, then reverse.
    n = len(range(start, stop, step))
    if n == 0:
        return lax.slice_in_dim(x, 0, 0, 1, axis)
    first = start + (n - 1) * step
    fwd = lax.slice_in_dim(x, first, start + 1, -step, axis)
    return lax.rev(fwd, (axis,))


def _static_index(x: Any, entries: list[Any]) -> Any:
    """``x`` indexed by static ints and slices only: as JAX, one ``slice`` of
    every axis, a ``rev`` of the axes with negative steps, and a ``squeeze``
    of the int-indexed axes (each only when needed)."""
    shape = get_aval(x).shape
    starts, limits, strides = [], [], []
    rev_axes, int_axes = [], []
    for axis, e in enumerate(entries):
        size = shape[axis]
        if isinstance(e, slice):
            start, stop, step = e.indices(size)
            if step > 0:
                starts.append(start)
                limits.append(max(start, stop))
                strides.append(step)
                continue
            # a negative step: the forward slice of the same elements, reversed
            n = len(range(start, stop, step))
            if n == 0:
                starts.append(0)
                limits.append(0)
                strides.append(1)
                continue
            starts.append(start + (n - 1) * step)
            limits.append(start + 1)
            strides.append(-step)
            rev_axes.append(axis)
            continue
        i = _clamped_static_index(operator.index(e), axis, size)
        starts.append(i)
        limits.append(i + 1)
        strides.append(1)
        int_axes.append(axis)
    if any(starts) or tuple(limits) != shape or any(s != 1 for s in strides):
        x = lax.slice(x, starts, limits,
                     None if all(s == 1 for s in strides) else strides)
    if rev_axes:
        x = lax.rev(x, tuple(rev_axes))
    return lax.squeeze(x, tuple(int_axes)) if int_axes else x


_EMPTY = object()  # a False scalar index: a new axis of size 0


def _getitem_core(x: Any, idx: Any, mode: Any = None, fill_value: Any = None) -> Any:
    shape = get_aval(x).shape
    entries = _expand_index(shape, idx)
    # None (and Python bools, which index like a new axis of size 1 for True,
    # 0 for False): insert a size-1 axis and index it with a full slice.
    new_axes = [i for i, e in enumerate(entries) if e is None or isinstance(e, (bool, np.bool_))]
    if new_axes:
        x = lax.expand_dims(x, tuple(new_axes))
        entries = [slice(None) if e is None or (isinstance(e, (bool, np.bool_)) and e)
                   else slice(0, 0) if isinstance(e, (bool, np.bool_)) else e
                   for e in entries]
    has_array_nd = any(_is_index_array(e) and get_aval(e).shape for e in entries)
    has_scalar_array = any(_is_index_array(e) for e in entries)
    if mode == lax.GatherScatterMode.FILL_OR_DROP:
        # Static ints too are gathered, so out-of-range ones read the fill value.
        has_scalar_array = has_scalar_array or any(_is_int_scalar(e) for e in entries)
    if not has_array_nd and not has_scalar_array:
        return _static_index(x, entries)
    # Static slices first (they keep their axes).
    for axis, e in enumerate(entries):
        if isinstance(e, slice):
            x = _static_slice(x, axis, e)
    shape = get_aval(x).shape
    if has_array_nd or (has_scalar_array and mode == lax.GatherScatterMode.FILL_OR_DROP):
        return _advanced_gather(x, entries, mode, fill_value)
    # Scalar (possibly traced) ints: a dynamic slice, clamped into range.
    starts: list[Any] = []
    sizes = list(shape)
    squeeze_axes = []
    for axis, e in enumerate(entries):
        if isinstance(e, slice):
            starts.append(0)
            continue
        squeeze_axes.append(axis)
        sizes[axis] = 1
        if _is_int_scalar(e):
            starts.append(_clamped_static_index(operator.index(e), axis, shape[axis]))
        else:
            _check_index_dtype(e)
            starts.append(e)
    idx_dtype = next((get_aval(s).dtype for s in starts if not isinstance(s, int)), dtypes.int32)
    starts = [np.array(s, idx_dtype) if isinstance(s, int) else s for s in starts]
    out = lax.dynamic_slice(x, starts, sizes)
    return lax.squeeze(out, tuple(squeeze_axes))


def _advanced_gather(x: Any, entries: list[Any], mode: Any, fill_value: Any) -> Any:
    """NumPy advanced indexing (arrays, with ints as 0-d arrays) after all
    slices are full: one gather."""
    shape = get_aval(x).shape
    adv_pos = [i for i, e in enumerate(entries) if not isinstance(e, slice)]
    arrays = []
    for i in adv_pos:
        e = entries[i]
        if _is_int_scalar(e):
            e = np.array(e, dtypes.int32 if -2 ** 31 <= e < 2 ** 31 else dtypes.int64)
        elif isinstance(e, np.ndarray) and e.dtype.kind in "iu":
            e = e.astype(dtypes.canonicalize_dtype(e.dtype))
        _check_index_dtype(e)
        arrays.append(_normalize_index(e, shape[i]))
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    adv_shape = _util.broadcast_shapes("indexing", *(get_aval(a).shape for a in arrays))
    arrays = _util.promote_dtypes("indexing", *arrays)
    arrays = [_util.broadcast_to("indexing", a, adv_shape) for a in arrays]
    nb = len(adv_shape)
    indices = lax.concatenate([lax.expand_dims(a, (nb,)) for a in arrays], nb) \
        if len(arrays) > 1 else lax.expand_dims(arrays[0], (nb,))
    rest = [i for i in range(len(shape)) if i not in adv_pos]
    first = adv_pos[0] if contiguous else 0
    # Output: rest dims before `first`, the advanced block, then the other rest dims.
    n_before = sum(1 for r in rest if r < first) if contiguous else 0
    offset_dims = tuple(list(range(n_before)) +
                        list(range(n_before + nb, n_before + nb + len(rest) - n_before)))
    dnums = lax.GatherDimensionNumbers(offset_dims=offset_dims,
                                      collapsed_slice_dims=tuple(sorted(adv_pos)),
                                      start_index_map=tuple(adv_pos))
    slice_sizes = tuple(1 if i in adv_pos else d for i, d in enumerate(shape))
    out_shape = tuple(shape[r] for r in rest[:n_before]) + tuple(adv_shape) + \
        tuple(shape[r] for r in rest[n_before:])
    if math.prod(out_shape) == 0:
        return _empty_result(x, out_shape)
    return lax.gather(x, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value)


def _empty_result(x: Any, out_shape: tuple[int, ...]) -> Any:
    """An indexing result with no elements, made without a gather: as in JAX,
    ``zeros((0, 3))[array([], int32)]`` is an empty array (a gather would need
    a slice of size 1 from the empty axis and is refused)."""
    return lax.full_like(x, 0, shape=out_shape)


def getitem(x: Any, idx: Any) -> Array:
    """``x[idx]`` with NumPy semantics (ints, slices, None, Ellipsis, integer and
    boolean arrays); traced integer indices are clamped into range."""
    if isinstance(idx, int) and not isinstance(idx, bool) and _fast_int_ok(x):
        return _getitem_int(x, idx)
    return _getitem_core(x, idx, mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _fast_int_ok(x: Any) -> bool:
    return len(get_aval(x).shape) >= 1


def _getitem_int(x: Any, i: int) -> Any:
    i = _clamped_static_index(i, 0, get_aval(x).shape[0])
    return lax.squeeze(lax.slice_in_dim(x, i, i + 1, 1, 0), (0,))


def _clamped_static_index(i: int, axis: int, size: int) -> int:
    """A static integer index as a position in ``range(size)``: negative ones
    count from the end, and out-of-range ones are clamped into range, as JAX's
    indexing does (NumPy would raise); an empty axis has no position at all."""
    if size == 0:
        raise IndexError(f"index {i} is out of bounds for axis {axis} with size 0")
    if i < 0:
        i += size
    return min(max(i, 0), size - 1)


_SCATTERS: dict[str, Callable[..., Any]] = {
    "set": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul, "min": lax.scatter_min,
    "max": lax.scatter_max}


def index_update(x: Any, idx: Any, values: ArrayLike, op: str, *,
                 indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None) -> Array:
    """``x`` with ``x[idx]`` combined with ``values`` by ``op`` ('set', 'add',
    'mul', 'min', 'max'); out-of-bounds updates are dropped unless
    ``mode='clip'``.

    The positions are found by indexing a flat iota of ``x``'s size with
    ``idx`` (so every NumPy index form works), then one 1-D scatter updates
    the flattened ``x``.
    """
    dtype = _dtype(x)
    if type(values) is int and dtype.kind in "iu" and dtypes.python_int_fits(values, dtype):
        # As JAX: a Python int that fits the array's type is taken as it is
        # (`at[0].set(2**32 - 1)` on uint32), even beyond the default integer type.
        values = np.asarray(values, dtype)
    values = _util.operand(f"at[...].{op}", values, "values")
    shape = get_aval(x).shape
    box = _static_box(shape, idx)
    if box is not None:
        return _box_update(x, box, values, op)
    size = math.prod(shape)
    pos_dtype = dtypes.int32 if size < 2 ** 31 else dtypes.int64
    iota = lax.reshape(lax.iota(pos_dtype, size), shape) if shape else \
        np.zeros((), pos_dtype)
    parsed = lax.GatherScatterMode.from_any(mode)
    if parsed == lax.GatherScatterMode.CLIP:
        positions = _getitem_core(iota, idx, mode=lax.GatherScatterMode.CLIP)
    else:
        # Out-of-bounds windows read as `size`, which the scatter then drops.
        positions = _getitem_core(iota, idx, mode=lax.GatherScatterMode.FILL_OR_DROP,
                                  fill_value=size)
    pos_shape = get_aval(positions).shape
    values = convert_element_type_internal(values, dtype, get_aval(x).weak_type)
    values = _util.broadcast_to(f"at[...].{op}", values, pos_shape)
    if math.prod(pos_shape) == 0:
        return x  # nothing selected, nothing updated (a scatter of no elements)
    flat = lax.reshape(x, (size,))
    n = len(pos_shape)
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
    # As JAX: without an advanced index no element is selected twice.
    unique = unique_indices or not _has_advanced_index(idx)
    out = _SCATTERS[op](flat, lax.expand_dims(positions, (n,)), values, dnums,
                        indices_are_sorted=indices_are_sorted, unique_indices=unique,
                        mode=lax.GatherScatterMode.FILL_OR_DROP
                        if parsed != lax.GatherScatterMode.CLIP else parsed)
    return lax.reshape(out, shape)


def _has_advanced_index(idx: Any) -> bool:
    """Whether ``idx`` (already checked by indexing with it) has an array or
    sequence entry of rank above zero: NumPy's advanced indexing, the only
    kind that can select an element more than once."""
    for e in idx if isinstance(idx, tuple) else (idx,):
        if isinstance(e, (list, tuple)) or (_is_index_array(e) and get_aval(e).ndim > 0):
            return True
    return False


_BOX_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: lax.bitwise_or(a, b) if _dtype(a) == dtypes.bool_ else lax.add(a, b),
    "mul": lambda a, b: lax.bitwise_and(a, b) if _dtype(a) == dtypes.bool_ else lax.mul(a, b),
    "min": lax.min, "max": lax.max}


def _static_box(shape: tuple[int, ...], idx: Any) -> tuple[list[int], list[int], list[int]] | None:
    """For an index of in-range static ints and unit-step slices (and
    Ellipsis): the box it selects as (starts, sizes, int axes); else None."""
    entries = idx if isinstance(idx, tuple) else (idx,)
    if any(e is Ellipsis for e in entries):
        if sum(1 for e in entries if e is Ellipsis) > 1:
            return None
        i = entries.index(Ellipsis)
        entries = entries[:i] + (slice(None),) * (len(shape) - len(entries) + 1) + \
            entries[i + 1:]
    if len(entries) > len(shape):
        return None
    entries = entries + (slice(None),) * (len(shape) - len(entries))
    starts, sizes, int_axes = [], [], []
    for axis, (e, d) in enumerate(zip(entries, shape)):
        if _is_int_scalar(e):
            i = operator.index(e)
            if not -d <= i < d:
                return None
            starts.append(i + d if i < 0 else i)
            sizes.append(1)
            int_axes.append(axis)
        elif isinstance(e, slice) and e.step in (None, 1):
            start, stop, _ = e.indices(d)
            starts.append(start)
            sizes.append(max(stop - start, 0))
        else:
            return None
    return starts, sizes, int_axes


def _box_update(x: Any, box: tuple[list[int], list[int], list[int]], values: ArrayLike,
                op: str) -> Array:
    """A static-box index update as slice/combine/dynamic_update_slice."""
    starts, sizes, int_axes = box
    shape = get_aval(x).shape
    if 0 in sizes:
        return x
    view_shape = tuple(s for i, s in enumerate(sizes) if i not in int_axes)
    values = convert_element_type_internal(values, _dtype(x), get_aval(x).weak_type)
    values = lax.reshape(_util.broadcast_to(f"at[...].{op}", values, view_shape),
                         tuple(sizes))
    if op != "set":
        current = lax.slice(x, starts, [s + n for s, n in zip(starts, sizes)])
        values = _BOX_OPS[op](current, values)
    if tuple(sizes) == shape:
        return values
    idx_starts = [np.array(s, dtypes.int32) for s in starts]
    return lax.dynamic_update_slice(x, values, idx_starts)


def _at_get(array: Any, index: Any, mode: Any, fill_value: Any) -> Array:
    """``x.at[index].get(mode=, fill_value=)``."""
    if mode is None:
        return getitem(array, index)
    return _getitem_core(array, index, lax.GatherScatterMode.from_any(mode), fill_value)


_at_get_resharded: Callable[..., Array] = takes_out_sharding("x.at[...].get")(_at_get)


class IndexUpdateRef:
    """``x.at[idx]``: the functional counterpart of ``x[idx] = ...``."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, fill_value: Any = None, out_sharding: Any = None) -> Array:
        """``x[idx]`` (gathered with ``mode`` and ``fill_value`` when given);
        ``out_sharding`` lays out the result, the gather running with the
        mesh's Explicit axes made Auto, as JAX's ``rewriting_take``."""
        if out_sharding is None:
            return _at_get(self.array, self.index, mode, fill_value)
        return _at_get_resharded(self.array, self.index, mode, fill_value,
                                 out_sharding=out_sharding)

    def set(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "set",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def add(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "add",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def subtract(self, values: ArrayLike, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None) -> Array:
        return self.add(ufuncs.negative(values), indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)

    def mul(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "mul",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    multiply = mul

    def divide(self, values: ArrayLike, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None) -> Array:
        if _dtype(self.array) not in lax_common.INEXACT:
            raise TypeError("x.at[...].divide requires an inexact (float or complex) array")
        recip = ufuncs.true_divide(lax_common.const(self.array, 1), values)
        return self.mul(recip, indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)

    def min(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "min",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def max(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "max",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)


class IndexUpdateHelper:
    """The object ``x.at`` returns; ``x.at[idx]`` is an ``IndexUpdateRef``."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"IndexUpdateHelper({self.array!r})"


def iterate(x: Any) -> Any:
    """``iter(x)``: the sub-arrays along the first axis."""
    shape = get_aval(x).shape
    if not shape:
        raise TypeError("iteration over a 0-d array")
    return (_getitem_int(x, i) for i in range(shape[0]))
