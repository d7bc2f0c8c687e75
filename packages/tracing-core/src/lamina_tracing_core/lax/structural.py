"""Shape-changing primitives: iota, broadcast_in_dim, reshape, squeeze,
transpose, rev, pad, concatenate, slice, copy; and the functions over them
(``broadcast``, ``expand_dims``, ``full``, ``full_like``, ``slice_in_dim``...).

Each primitive is linear in its array operands; its transpose is the
"adjoint" shape change (slice <-> pad, broadcast <-> sum, ...).
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, check_shape_size, get_aval
from lamina_tracing_core.base_primitives import (  # re-exported: lax.broadcast_in_dim_p etc.
    broadcast_in_dim,
    broadcast_in_dim_p,
    deflinear,
    full,
    full_like,
    is_lamina_array,
    reduce_sum,
    reshape,
    reshape_p,
    transpose,
    transpose_p,
    zeros_like_array,
)
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax.common import ArrayLike, Shape
from lamina_tracing_core.lax.helpers import defvectorized
from lamina_tracing_core.primitives import Primitive, batching_rules
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.out_sharding import param_type_sharding, resolve_out_sharding

Array = Any


# --- iota ------------------------------------------------------------------------
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype: Any, shape: Shape, dimension: int,
                        sharding: Any) -> ShapedArray:
    dtype = np.dtype(dtype)
    if dtype not in common.NUM:
        raise TypeError(f"iota does not accept dtype {dtype.name}. Accepted dtypes are "
                        f"subtypes of {common.category_names(common.NUM)}.")
    if any(d < 0 for d in shape):
        raise TypeError(f"iota shape must have every element be nonnegative, got {shape}.")
    if not 0 <= dimension < len(shape):
        raise ValueError("iota dimension must be between 0 and len(shape), got "
                         f"dimension={dimension} for shape={shape}")
    check_shape_size(shape, dtype, "iota")
    # iota has no operand: its `sharding` parameter alone says how the result is split
    return ShapedArray(shape, dtype, False,
                       sharding=param_type_sharding(sharding, shape, "iota"))


def iota(dtype: Any, size: int, *, sharding: Any = None) -> Array:
    """``[0, 1, ..., size-1]`` of ``dtype``; ``sharding`` (lamina's; JAX's
    ``lax.iota`` has none) as ``broadcasted_iota``'s ``out_sharding``."""
    dtype = dtypes.canonicalize_dtype(dtype)
    size = operator.index(size)
    typed = resolve_out_sharding(sharding, (size,), "lax.iota", "sharding")
    return iota_p.bind(dtype=dtype, shape=(size,), dimension=0, sharding=typed)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int, *,
                     out_sharding: Any = None, sharding: Any = None) -> Array:
    """An array of ``shape`` whose values count along ``dimension``, split as
    ``out_sharding`` says (a ``PartitionSpec`` over the current mesh or a
    ``NamedSharding``; ``sharding`` is its older lamina name)."""
    shape = common.canonicalize_shape(shape, "broadcasted_iota")
    dimension = common.canonicalize_axis(dimension, len(shape), "dimension")
    given = out_sharding if out_sharding is not None else sharding
    typed = resolve_out_sharding(given, shape, "lax.broadcasted_iota",
                                 "out_sharding" if out_sharding is not None else "sharding")
    return iota_p.bind(dtype=dtypes.canonicalize_dtype(dtype), shape=shape,
                       dimension=dimension, sharding=typed)


# --- broadcast (on broadcast_in_dim) --------------------------------------------
def broadcast(operand: ArrayLike, sizes: Sequence[int], *, out_sharding: Any = None) -> Array:
    """``operand`` with new leading dimensions of ``sizes``."""
    sizes = tuple(sizes)
    if not sizes and out_sharding is None:
        return operand
    op_shape = get_aval(operand).shape
    n = len(sizes)
    return broadcast_in_dim(operand, sizes + op_shape, tuple(range(n, n + len(op_shape))),
                            out_sharding=out_sharding)


def broadcast_to_rank(x: ArrayLike, rank: int) -> Array:
    """``x`` with leading size-1 dimensions added up to ``rank``."""
    shape = get_aval(x).shape
    ndim = len(shape)
    if ndim >= rank:
        return x
    k = rank - ndim
    return broadcast_in_dim_p.bind(x, shape=(1,) * k + shape,
                                   broadcast_dimensions=tuple(range(k, rank)), sharding=None)



# --- squeeze / expand_dims ---------------------------------------------------------
squeeze_p = Primitive("squeeze")
sit.register(squeeze_p, sit.squeeze)


def _squeeze_shape(shape: Shape, dimensions: tuple[int, ...]) -> Shape:
    dims = set(dimensions)
    if len(dims) != len(dimensions):
        raise ValueError(f"squeeze: dimensions are not unique: {dimensions}")
    if not all(0 <= d < len(shape) for d in dims):
        raise ValueError(f"squeeze: dimensions outside range [0, ndim): {dimensions} for "
                         f"shape {shape}")
    if any(shape[d] != 1 for d in dims):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to "
                         f"one, got shape={shape} and dimensions={dimensions}")
    return tuple(s for i, s in enumerate(shape) if i not in dims)


@squeeze_p.def_abstract_eval
def _squeeze_abstract_eval(operand: ShapedArray, *, dimensions: tuple[int, ...]
                           ) -> ShapedArray:
    return ShapedArray(_squeeze_shape(operand.shape, dimensions), operand.dtype,
                       operand.weak_type)


def squeeze(array: ArrayLike, dimensions: Sequence[int]) -> Array:
    """``array`` without the (size-1) ``dimensions``."""
    ndim = len(get_aval(array).shape)
    dims = tuple(sorted(common.canonicalize_axis(d, ndim, "squeeze dimension")
                        for d in dimensions))
    if not dims and is_lamina_array(array):
        return array
    return squeeze_p.bind(array, dimensions=dims)


def expand_dims(array: ArrayLike, dimensions: Sequence[int]) -> Array:
    """``array`` with size-1 dimensions inserted at ``dimensions`` (positions in
    the result), as a ``broadcast_in_dim``."""
    dimensions = tuple(dimensions)
    if len(set(dimensions)) != len(dimensions):
        raise ValueError(f"repeated axis in lax.expand_dims: {dimensions}")
    shape = get_aval(array).shape
    ndim_out = len(shape) + len(dimensions)
    dims = [common.canonicalize_axis(i, ndim_out) for i in dimensions]
    if len(set(dims)) != len(dims):
        raise ValueError(f"repeated axis in lax.expand_dims: {tuple(dims)}")
    dims_set = frozenset(dims)
    result_shape = list(shape)
    for i in sorted(dims_set):
        result_shape.insert(i, 1)
    kept = tuple(i for i in range(ndim_out) if i not in dims_set)
    return broadcast_in_dim(array, tuple(result_shape), kept)


def _squeeze_transpose(ct: Any, operand: Any, *, dimensions: tuple[int, ...]) -> list[Any]:
    return [reshape(ct, operand.aval.shape)]


def _squeeze_batch(args: Any, dims: Any, *, dimensions: tuple[int, ...]) -> Any:
    (x,), (d,) = args, dims
    x = helpers.moveaxis(x, d, 0)
    return squeeze_p.bind(x, dimensions=tuple(i + 1 for i in dimensions)), 0


deflinear(squeeze_p, _squeeze_transpose)
batching_rules[squeeze_p] = _squeeze_batch


# --- rev ---------------------------------------------------------------------------
rev_p = Primitive("rev")
sit.register(rev_p, sit.same_as_first)


@rev_p.def_abstract_eval
def _rev_abstract_eval(operand: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    if len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev dimensions must be unique, got {dimensions}.")
    if any(not 0 <= d < len(operand.shape) for d in dimensions):
        raise TypeError("rev dimensions must all be in [0, operand ndim), got dimensions "
                        f"{dimensions} for operand ndim {len(operand.shape)}.")
    return operand


def rev(operand: ArrayLike, dimensions: Sequence[int]) -> Array:
    """``operand`` reversed along ``dimensions``."""
    return rev_p.bind(operand, dimensions=tuple(operator.index(d) for d in dimensions))


def _rev_transpose(ct: Any, operand: Any, *, dimensions: tuple[int, ...]) -> list[Any]:
    return [rev(ct, dimensions)]


def _rev_batch(args: Any, dims: Any, *, dimensions: tuple[int, ...]) -> Any:
    (x,), (d,) = args, dims
    return rev_p.bind(x, dimensions=tuple(i + 1 if i >= d else i for i in dimensions)), d


deflinear(rev_p, _rev_transpose)
batching_rules[rev_p] = _rev_batch


# --- pad ---------------------------------------------------------------------------
pad_p = Primitive("pad")
sit.register(pad_p, sit.varying_out_shape("padding"))
PaddingConfig = tuple[tuple[int, int, int], ...]


def _dilate(d: int, factor: int) -> int:
    return 0 if d == 0 else 1 + factor * (d - 1)


@pad_p.def_abstract_eval
def _pad_abstract_eval(operand: ShapedArray, padding_value: ShapedArray, *,
                       padding_config: PaddingConfig) -> ShapedArray:
    if padding_value.shape:
        raise ValueError(f"pad: padding_value must be a scalar; got shape {padding_value.shape}")
    common.check_same_dtypes("pad", operand, padding_value)
    if len(padding_config) != len(operand.shape):
        raise ValueError("length of padding_config must equal the number of axes of operand, "
                         f"got padding_config {padding_config} for operand shape "
                         f"{operand.shape}")
    if any(i < 0 for _, _, i in padding_config):
        raise ValueError("interior padding in padding_config must be nonnegative, got "
                         f"padding_config {padding_config}")
    shape = tuple(lo + hi + _dilate(d, i + 1)
                  for (lo, hi, i), d in zip(padding_config, operand.shape))
    if any(d < 0 for d in shape):
        raise ValueError(f"Dimension size after padding is not at least 0, got result shape "
                         f"{shape}, for padding_config {padding_config} and operand shape "
                         f"{operand.shape}")
    return ShapedArray(shape, operand.dtype, operand.weak_type and padding_value.weak_type)


def pad(operand: ArrayLike, padding_value: ArrayLike,
        padding_config: Sequence[tuple[int, int, int]]) -> Array:
    """Pads ``operand`` with ``padding_value``: ``(low, high, interior)`` per axis
    (negative low/high crop)."""
    config = tuple((operator.index(lo), operator.index(hi), operator.index(i))
                   for lo, hi, i in padding_config)
    return pad_p.bind(operand, padding_value, padding_config=config)


def _pad_transpose(ct: Any, operand: Any, padding_value: Any, *,
                   padding_config: PaddingConfig) -> list[Any]:
    ct_shape = get_aval(ct).shape
    unpad = tuple((-lo, -hi, 0) for lo, hi, _ in padding_config)
    unpadded = pad(ct, np.zeros((), get_aval(ct).dtype), unpad)
    strides = tuple(i + 1 for _, _, i in padding_config)
    t_operand = slice(unpadded, (0,) * len(ct_shape), get_aval(unpadded).shape, strides)
    outs: list[Any] = [t_operand if helpers.is_undefined_primal(operand) else None, None]
    if helpers.is_undefined_primal(padding_value):
        all_axes = tuple(range(len(ct_shape)))
        outs[1] = ew.sub(reduce_sum(ct, all_axes), reduce_sum(t_operand, all_axes))
    return outs


def _pad_batch(args: Any, dims: Any, *, padding_config: PaddingConfig) -> Any:
    operand, padding_value = args
    op_d, pv_d = dims
    if pv_d is None:
        config = list(padding_config)
        config.insert(op_d, (0, 0, 0))
        return pad_p.bind(operand, padding_value, padding_config=tuple(config)), op_d
    # A batched padding value: pad with zeros, then select the padding positions.
    size = helpers.batch_size(args, dims)
    operand = helpers.bdim_at_front(operand, op_d, size)
    batched_config = ((0, 0, 0),) + padding_config
    dtype = get_aval(operand).dtype
    padded = pad_p.bind(operand, np.zeros((), dtype), padding_config=batched_config)
    mask = pad_p.bind(full(get_aval(operand).shape, True, dtypes.bool_), np.array(False),
                      padding_config=batched_config)
    pv = broadcast_in_dim(padding_value, get_aval(padded).shape, (0,))
    return ew.select(mask, padded, pv), 0


deflinear(pad_p, _pad_transpose)
batching_rules[pad_p] = _pad_batch


# --- concatenate ----------------------------------------------------------------------
concatenate_p = Primitive("concatenate")
sit.register(concatenate_p, sit.concatenate)


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*operands: ShapedArray, dimension: int) -> ShapedArray:
    if not operands:
        raise TypeError("concatenate expects at least one operand, got 0.")
    first = operands[0]
    if len({len(o.shape) for o in operands}) != 1:
        raise TypeError("Cannot concatenate arrays with different numbers of dimensions: got "
                        f"{', '.join(str(o.shape) for o in operands)}.")
    if not 0 <= dimension < len(first.shape):
        raise TypeError(f"concatenate dimension out of bounds: dimension {dimension} for "
                        f"shapes {', '.join(str(o.shape) for o in operands)}.")
    rest = [o.shape[:dimension] + o.shape[dimension + 1:] for o in operands]
    if any(r != rest[0] for r in rest[1:]):
        raise TypeError("Cannot concatenate arrays with shapes that differ in dimensions "
                        f"other than the one being concatenated: concatenating along "
                        f"dimension {dimension} for shapes "
                        f"{', '.join(str(o.shape) for o in operands)}.")
    common.check_same_dtypes("concatenate", *operands)
    size = sum(o.shape[dimension] for o in operands)
    shape = first.shape[:dimension] + (size,) + first.shape[dimension + 1:]
    return ShapedArray(shape, first.dtype, all(o.weak_type for o in operands))


def concatenate(operands: Sequence[ArrayLike], dimension: int) -> Array:
    """``operands`` joined along ``dimension``."""
    operands = list(operands)
    if len(operands) == 0:
        raise ValueError("concatenate requires a non-empty sequences of arrays")
    if len(operands) == 1 and is_lamina_array(operands[0]):
        return operands[0]
    return concatenate_p.bind(*operands, dimension=operator.index(dimension))


def _concatenate_transpose(ct: Any, *operands: Any, dimension: int) -> list[Any]:
    outs: list[Any] = []
    start = 0
    ct_shape = get_aval(ct).shape
    for op in operands:
        size = op.aval.shape[dimension] if helpers.is_undefined_primal(op) \
            else get_aval(op).shape[dimension]
        if helpers.is_undefined_primal(op):
            starts = [0] * len(ct_shape)
            limits = list(ct_shape)
            starts[dimension], limits[dimension] = start, start + size
            outs.append(slice(ct, tuple(starts), tuple(limits)))
        else:
            outs.append(None)
        start += size
    return outs


def _concatenate_batch(args: Any, dims: Any, *, dimension: int) -> Any:
    size = helpers.batch_size(args, dims)
    moved = [helpers.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    return concatenate_p.bind(*moved, dimension=dimension + 1), 0


deflinear(concatenate_p, _concatenate_transpose)
batching_rules[concatenate_p] = _concatenate_batch


# --- slice -------------------------------------------------------------------------
slice_p = Primitive("slice")
sit.register(slice_p, sit.varying_out_shape("slicing"))


@slice_p.def_abstract_eval
def _slice_abstract_eval(operand: ShapedArray, *, start_indices: tuple[int, ...],
                         limit_indices: tuple[int, ...], strides: tuple[int, ...] | None
                         ) -> ShapedArray:
    shape = operand.shape
    nd = len(shape)
    if len(start_indices) != nd:
        raise TypeError(f"slice start_indices must have length equal to the number of "
                        f"dimensions of the operand, got indices {start_indices} for operand "
                        f"shape {shape}.")
    if len(limit_indices) != nd:
        raise TypeError(f"slice limit_indices must have the same length as start_indices, "
                        f"got start_indices {start_indices} and limit_indices "
                        f"{limit_indices}.")
    if any(lim > d for lim, d in zip(limit_indices, shape)):
        raise TypeError(f"slice limit_indices must be less than or equal to operand shape, "
                        f"got limit_indices {limit_indices} for operand shape {shape}.")
    if any(s < 0 for s in start_indices):
        raise TypeError(f"slice start_indices must be greater than or equal to zero, got "
                        f"start_indices of {start_indices}.")
    if any(lim < s for s, lim in zip(start_indices, limit_indices)):
        raise TypeError(f"slice limit_indices must be greater than or equal to start_indices,"
                        f" got start_indices {start_indices} and limit_indices "
                        f"{limit_indices}.")
    if strides is None:
        out = tuple(lim - s for s, lim in zip(start_indices, limit_indices))
    else:
        if len(strides) != nd:
            raise TypeError(f"slice strides must have length equal to the number of "
                            f"dimensions of the operand, got strides {strides} for operand "
                            f"shape {shape}.")
        if any(st <= 0 for st in strides):
            raise TypeError(f"slice strides must be positive, got {strides}")
        out = tuple((lim - s + st - 1) // st if lim > s else 0
                    for s, lim, st in zip(start_indices, limit_indices, strides))
    return ShapedArray(out, operand.dtype, operand.weak_type)


def slice(operand: ArrayLike, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Array:
    """``operand[start:limit:stride]`` along every axis, with static bounds."""
    starts = tuple(operator.index(i) for i in start_indices)
    limits = tuple(operator.index(i) for i in limit_indices)
    st = None if strides is None else tuple(operator.index(i) for i in strides)
    if st is not None and all(s == 1 for s in st):
        st = None
    if st is None and is_lamina_array(operand) and not any(starts) \
            and limits == operand.aval.shape:
        return operand
    return slice_p.bind(operand, start_indices=starts, limit_indices=limits, strides=st)


def slice_in_dim(operand: ArrayLike, start_index: int | None, limit_index: int | None,
                 stride: int = 1, axis: int = 0) -> Array:
    """``operand[..., start:limit:stride, ...]`` along ``axis`` (Python-style
    negative and ``None`` bounds)."""
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    start, limit, _ = builtins.slice(start_index, limit_index).indices(shape[axis])
    starts = [0] * len(shape)
    limits = list(shape)
    strides = [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, limit), stride
    return slice(operand, starts, limits, strides)


def index_in_dim(operand: ArrayLike, index: int, axis: int = 0, keepdims: bool = True) -> Array:
    """``operand[..., index, ...]`` along ``axis`` with a static index."""
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    index = operator.index(index)
    if not -shape[axis] <= index < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                         f"{shape[axis]}")
    index = index + shape[axis] if index < 0 else index
    result = slice_in_dim(operand, index, index + 1, 1, axis)
    return result if keepdims else squeeze(result, (axis,))


def _slice_transpose(ct: Any, operand: Any, *, start_indices: tuple[int, ...],
                     limit_indices: tuple[int, ...], strides: tuple[int, ...] | None
                     ) -> list[Any]:
    op_shape = operand.aval.shape
    ct_shape = get_aval(ct).shape
    if strides is None:
        config = tuple((s, d - lim, 0) for s, lim, d in zip(start_indices, limit_indices,
                                                            op_shape))
    else:
        real_limits = [s + (0 if n == 0 else 1 + (n - 1) * st)
                       for s, n, st in zip(start_indices, ct_shape, strides)]
        config = tuple((s, d - lim, st - 1) for s, lim, d, st in
                       zip(start_indices, real_limits, op_shape, strides))
    return [pad(ct, np.zeros((), get_aval(ct).dtype), config)]


def _slice_batch(args: Any, dims: Any, *, start_indices: tuple[int, ...],
                 limit_indices: tuple[int, ...], strides: tuple[int, ...] | None) -> Any:
    (x,), (d,) = args, dims
    starts, limits = list(start_indices), list(limit_indices)
    starts.insert(d, 0)
    limits.insert(d, get_aval(x).shape[d])
    st = None
    if strides is not None:
        st_list = list(strides)
        st_list.insert(d, 1)
        st = tuple(st_list)
    return slice_p.bind(x, start_indices=tuple(starts), limit_indices=tuple(limits),
                        strides=st), d


deflinear(slice_p, _slice_transpose)
batching_rules[slice_p] = _slice_batch


# --- copy ----------------------------------------------------------------------------
copy_p = Primitive("copy")
copy_p.def_abstract_eval(lambda x: x)
deflinear(copy_p, lambda ct, x: [copy_p.bind(ct)])
defvectorized(copy_p)


# --- functions over the primitives ------------------------------------------------------
def collapse(operand: ArrayLike, start_dimension: int, stop_dimension: int | None = None
             ) -> Array:
    """``operand`` with dimensions ``[start, stop)`` merged into one."""
    shape = get_aval(operand).shape
    lo = common.canonicalize_axis(start_dimension, len(shape) + 1)
    hi = len(shape) if stop_dimension is None else \
        common.canonicalize_axis(stop_dimension, len(shape) + 1)
    size = math.prod(shape[lo:hi])
    return reshape(operand, shape[:lo] + (size,) + shape[hi:])


__all__ = [
    "iota_p", "broadcast_in_dim_p", "reshape_p", "squeeze_p", "transpose_p", "rev_p", "pad_p",
    "concatenate_p", "slice_p", "copy_p", "iota", "broadcasted_iota", "broadcast_in_dim",
    "broadcast", "broadcast_to_rank", "reshape", "squeeze", "expand_dims", "transpose", "rev",
    "pad", "concatenate", "slice", "slice_in_dim", "index_in_dim", "full", "full_like",
    "zeros_like_array", "collapse"]
