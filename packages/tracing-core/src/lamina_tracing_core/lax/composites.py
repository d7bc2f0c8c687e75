"""``lax`` functions built from the other primitives (JAX's names):
``split``, ``tile``, ``stack``, ``unstack``, ``empty``, ``broadcast_shapes``,
``broadcast_like``, ``mulhi``; the convolution and window shape helpers
(``conv_shape_tuple``, ``conv_general_shape_tuple``,
``conv_transpose_shape_tuple``, ``reduce_window_shape_tuple``); the
``optimization_barrier`` primitive; and the type names of JAX's signatures
(``DotDimensionNumbers``, ``ConvGeneralDilatedDimensionNumbers``,
``PrecisionLike``, ``RandomAlgorithm``).

The composite functions get their differentiation and batching from the
primitives they are made of.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax import common
from lamina_tracing_core.lax import convert as cv
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import contractions
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules

Array = Any

DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]],
                            tuple[Sequence[int], Sequence[int]]]
"""``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``."""

ConvGeneralDilatedDimensionNumbers = (
    tuple[str, str, str] | contractions.ConvDimensionNumbers | None)
"""What ``conv_general_dilated`` takes as ``dimension_numbers``."""

PrecisionLike = (str | contractions.Precision | tuple[str, str]
                 | tuple[contractions.Precision, contractions.Precision] | None)
"""What the contractions take as ``precision``."""


class RandomAlgorithm(enum.IntEnum):
    """XLA's random bit generator algorithms (``lax.rng_bit_generator``'s
    ``algorithm``)."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


# --------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------

def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The NumPy broadcast of ``shapes`` (aligned at their last dimension; a
    dimension of 1 stretches). Incompatible shapes are a ``ValueError``."""
    tuples = [tuple(int(d) for d in s) for s in shapes]
    if not tuples:
        return ()
    ndim = max(len(s) for s in tuples)
    padded = [(1,) * (ndim - len(s)) + s for s in tuples]
    out = []
    for sizes in zip(*padded):
        grown = {d for d in sizes if d != 1}
        if len(grown) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={tuples}")
        out.append(grown.pop() if grown else 1)
    return tuple(out)


def _stride_dim(size: int, window: int, stride: int) -> int:
    return 0 if size < window else (size - window) // stride + 1


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                     strides: Sequence[int], pads: str | Sequence[tuple[int, int]],
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution in the canonical layout (batch,
    feature, spatial...), with ``pads`` explicit or 'VALID'/'SAME'/'SAME_LOWER'."""
    if isinstance(pads, str):
        pads = contractions.padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    explicit = [(int(lo), int(hi)) for lo, hi in pads]
    lhs = [int(d) for d in lhs_shape]
    rhs = [int(d) for d in rhs_shape]
    if batch_group_count > 1 and lhs[0] % batch_group_count:
        raise ValueError(f"conv_shape_tuple: batch size {lhs[0]} is not a multiple of "
                         f"batch_group_count={batch_group_count}")
    return contractions._conv_shape_tuple(lhs, rhs, [int(s) for s in strides], explicit,
                                    batch_group_count)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                             window_strides: Sequence[int],
                             padding: str | Sequence[tuple[int, int]],
                             dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of ``conv_general_dilated`` with string layouts
    ``dimension_numbers`` (e.g. ``('NHWC', 'HWIO', 'NHWC')``)."""
    lhs_perm, rhs_perm, out_perm = contractions.conv_general_permutations(dimension_numbers)
    lhs = [int(lhs_shape[i]) for i in lhs_perm]
    rhs = [int(rhs_shape[i]) for i in rhs_perm]
    canonical = conv_shape_tuple(lhs, rhs, window_strides, padding)
    return tuple(canonical[int(i)] for i in np.argsort(out_perm))


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                               window_strides: Sequence[int],
                               padding: str | Sequence[tuple[int, int]],
                               dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of ``conv_transpose`` with string layouts."""
    lhs_perm, rhs_perm, out_perm = contractions.conv_general_permutations(dimension_numbers)
    lhs = [int(lhs_shape[i]) for i in lhs_perm]
    rhs = [int(rhs_shape[i]) for i in rhs_perm]
    strides = [int(s) for s in window_strides]
    if isinstance(padding, str):
        pairs = [contractions._conv_transpose_padding(k, s, padding)
                 for k, s in zip(rhs[2:], strides)]
    else:
        pairs = [(int(lo), int(hi)) for lo, hi in padding]
    space = [(i - 1) * s - k + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], strides, pairs)]
    canonical = (lhs[0], rhs[0], *space)
    return tuple(canonical[int(i)] for i in np.argsort(out_perm))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int],
                              padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None
                              ) -> tuple[int, ...]:
    """The output shape of a window reduction with explicit ``padding``."""
    operand = [int(d) for d in operand_shape]
    window = [int(d) for d in window_dimensions]
    if base_dilation is not None:
        operand = list(contractions._dilate_shape(operand, base_dilation))
    if window_dilation is not None:
        window = list(contractions._dilate_shape(window, window_dilation))
    padded = [d + int(lo) + int(hi) for d, (lo, hi) in zip(operand, padding)]
    return tuple(_stride_dim(p, w, int(s)) for p, w, s in zip(padded, window, window_strides))


# --------------------------------------------------------------------------
# Structural functions
# --------------------------------------------------------------------------

def split(operand: ArrayLike, sizes: Sequence[int], axis: int = 0) -> list[Array]:
    """``operand`` cut along ``axis`` into pieces of ``sizes`` (which must add
    up to that dimension)."""
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    sizes = [int(s) for s in sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis]:
        raise ValueError(f"split: sizes must be nonnegative and sum to the size of axis "
                         f"{axis} of the operand of shape {shape}, got sizes={tuple(sizes)}")
    pieces = []
    start = 0
    for size in sizes:
        pieces.append(st.slice_in_dim(operand, start, start + size, axis=axis))
        start += size
    return pieces


def tile(operand: ArrayLike, reps: Sequence[int]) -> Array:
    """``operand`` repeated ``reps[i]`` times along each axis ``i``
    (``len(reps)`` must be ``operand.ndim``)."""
    shape = get_aval(operand).shape
    reps = tuple(int(r) for r in reps)
    if len(reps) != len(shape):
        raise TypeError(f"reps length must be equal to the ndim of x, got "
                        f"len(reps)={len(reps)} and x.ndim={len(shape)}.")
    interleaved = tuple(n for r, d in zip(reps, shape) for n in (r, d))
    grown = st.broadcast_in_dim(operand, interleaved, tuple(range(1, 2 * len(shape), 2)))
    return st.reshape(grown, tuple(r * d for r, d in zip(reps, shape)))


def stack(operands: Sequence[ArrayLike], axis: int = 0) -> Array:
    """The operands (all of one shape) stacked along a new axis ``axis``."""
    operands = list(operands)
    if not operands:
        raise ValueError("stack: need at least one operand")
    ndim = len(get_aval(operands[0]).shape)
    axis = common.canonicalize_axis(axis, ndim + 1)
    return st.concatenate([st.expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x: ArrayLike, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``, that axis removed."""
    shape = get_aval(x).shape
    axis = common.canonicalize_axis(axis, len(shape))
    return tuple(st.index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def empty(shape: Sequence[int], dtype: Any, *, out_sharding: Any = None) -> Array:
    """An array of ``shape`` and ``dtype`` whose contents are not to be relied
    on (lamina fills it with zeros)."""
    return st.full(tuple(shape), 0, dtypes.canonicalize_dtype(np.dtype(dtype)))


def broadcast_like(arr: ArrayLike, like_arr: ArrayLike) -> Array:
    """``arr`` broadcast (NumPy-style, trailing dimensions aligned) to the
    shape of ``like_arr``; it keeps its own dtype."""
    shape = get_aval(arr).shape
    target = get_aval(like_arr).shape
    out = broadcast_shapes(shape, target)
    if out != tuple(target):
        raise ValueError(f"broadcast_like: an array of shape {shape} does not broadcast to "
                         f"the shape {target}")
    return st.broadcast_in_dim(arr, target, tuple(range(len(target) - len(shape),
                                                        len(target))))


# --------------------------------------------------------------------------
# mulhi
# --------------------------------------------------------------------------

_UNSIGNED_OF: dict[int, np.dtype[Any]] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
                64: np.dtype(np.uint64)}


def mulhi(x: ArrayLike, y: ArrayLike, /) -> Array:
    """The high half of the double-width product of the integers ``x`` and
    ``y`` (``(x * y) >> bits``, rounding down, for signed types)."""
    x_aval, y_aval = get_aval(x), get_aval(y)
    for pos, a in enumerate((x_aval, y_aval)):
        if a.dtype.kind not in "iu":
            raise TypeError(f"mulhi does not accept dtype {a.dtype} at position {pos}. "
                            f"Accepted dtypes at position {pos} are subtypes of integer.")
    if x_aval.dtype != y_aval.dtype:
        raise TypeError(f"mulhi requires arguments to have the same dtypes, got "
                        f"{x_aval.dtype}, {y_aval.dtype}.")
    dtype = np.dtype(x_aval.dtype)
    bits = dtype.itemsize * 8
    udt = _UNSIGNED_OF[bits]
    signed = dtype.kind == "i"
    xu = cv.bitcast_convert_type(x, udt) if signed else x
    yu = cv.bitcast_convert_type(y, udt) if signed else y
    half = bits // 2
    h = np.array(half, udt)
    mask = np.array((1 << half) - 1, udt)
    x_lo, x_hi = ew.bitwise_and(xu, mask), ew.shift_right_logical(xu, h)
    y_lo, y_hi = ew.bitwise_and(yu, mask), ew.shift_right_logical(yu, h)
    lo_lo = ew.mul(x_lo, y_lo)
    lo_hi = ew.mul(x_lo, y_hi)
    hi_lo = ew.mul(x_hi, y_lo)
    # Each term below a half-word, so the sum cannot overflow.
    middle = ew.add(ew.add(ew.shift_right_logical(lo_lo, h), ew.bitwise_and(lo_hi, mask)),
                    ew.bitwise_and(hi_lo, mask))
    high = ew.add(ew.add(ew.mul(x_hi, y_hi), ew.shift_right_logical(lo_hi, h)),
                  ew.add(ew.shift_right_logical(hi_lo, h), ew.shift_right_logical(middle, h)))
    if not signed:
        return high
    # Two's complement: x = xu - 2**bits when x < 0, so the high half of the
    # signed product loses y (and, for y < 0, x), modulo 2**bits.
    zero = np.array(0, udt)
    zero_s = np.array(0, dtype)
    high = ew.sub(high, ew.select(ew.lt(x, zero_s), yu, st.full_like(yu, zero)))
    high = ew.sub(high, ew.select(ew.lt(y, zero_s), xu, st.full_like(xu, zero)))
    return cv.bitcast_convert_type(high, dtype)


# --------------------------------------------------------------------------
# optimization_barrier
# --------------------------------------------------------------------------

optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
optimization_barrier_p.def_abstract_eval(lambda *avals: list(avals))


def optimization_barrier(operand: Any, /) -> Any:
    """``operand`` (any pytree of arrays) unchanged, with the guarantee that
    the compiler moves no computation across this point: everything the
    operands depend on is computed before anything that uses the results."""
    leaves, treedef = tree_util.tree_flatten(operand)
    for leaf in leaves:
        get_aval(leaf)  # only arrays (and scalars) may pass
    return treedef.unflatten(optimization_barrier_p.bind(*leaves))


def _barrier_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    # The tangents are an identity of the tangents in: they pass unchanged
    # (and so transpose as the identity); the primals keep their barrier.
    return optimization_barrier_p.bind(*primals), list(tangents)


def _barrier_batch(args: Sequence[Any], dims: Sequence[int | None]) -> Any:
    return optimization_barrier_p.bind(*args), list(dims)


jvp_rules[optimization_barrier_p] = _barrier_jvp
batching_rules[optimization_barrier_p] = _barrier_batch


__all__ = [
    "ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "PrecisionLike",
    "RandomAlgorithm", "broadcast_like", "broadcast_shapes", "conv_general_shape_tuple",
    "conv_shape_tuple", "conv_transpose_shape_tuple", "empty", "mulhi", "optimization_barrier",
    "optimization_barrier_p", "reduce_window_shape_tuple", "split", "stack", "tile", "unstack",
]
