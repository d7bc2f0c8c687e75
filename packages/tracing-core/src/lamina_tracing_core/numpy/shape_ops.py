"""Shape manipulation: reshape, transpose, axes moves, squeeze/expand,
broadcasting, joining (concatenate, stack, h/v/dstack), splitting, tiling,
repeating, flipping, rolling, rotating and padding.

Every size here is static (known at trace time), as XLA needs; only ``roll``
also accepts a traced shift.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.mesh import TypeSharding
from lamina_tracing_core.sharding_in_types import ShardingTypeError
from lamina_tracing_core.out_sharding import takes_out_sharding
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.indexing import take
from lamina_tracing_core.numpy.key_arrays import (PRNGKeyArray, is_key_array, key_arrays_of,
                                                   logical_axis)


def _operand(fun: str, a: Any, name: str = "a") -> Any:
    return _util.operand(fun, a, name)


# --- reshaping ------------------------------------------------------------------------------
def _check_order(order: Any) -> bool:
    """Whether ``order`` asks for Fortran order ('F'); 'C' (and 'A', 'K' or
    None, which mean C order for lamina's always C-ordered arrays) do not.
    Anything else is JAX's ValueError."""
    if order == "F":
        return True
    if order not in ("C", "A", "K", None):
        raise ValueError(f"Unexpected value for 'order' argument: {order}.")
    return False


def _fortran_reshape(x: Any, dims: tuple[int, ...], sharding: TypeSharding | None = None
                     ) -> Any:
    """``x`` reshaped to ``dims`` reading and writing elements in Fortran
    (first axis fastest) order: the C-order reshape of the reversed axes
    (``sharding``, the result's, reversed with them)."""
    nd = _util.ndim_of(x)
    flipped = lax.transpose(x, tuple(reversed(range(nd)))) if nd > 1 else x
    if sharding is not None:
        spec = sharding.spec + ((),) * (len(dims) - len(sharding.spec))
        sharding = TypeSharding(sharding.mesh, spec[::-1])
    out = lax.reshape(flipped, dims[::-1], out_sharding=sharding)
    return lax.transpose(out, tuple(reversed(range(len(dims))))) if len(dims) > 1 else out


def _new_shape(fun: str, shape: Any, size: int) -> tuple[int, ...]:
    """A target shape with at most one -1 resolved against ``size``."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = [_util.concrete_int(fun, d, "the new shape") for d in shape]
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"lamina.numpy.{fun}: can only specify one unknown dimension")
    if any(d < -1 for d in dims):
        raise ValueError(f"lamina.numpy.{fun}: invalid shape {tuple(dims)}")
    known = math.prod(d for d in dims if d != -1)
    if unknown:
        if known == 0 or size % known:
            raise TypeError(f"lamina.numpy.{fun}: cannot reshape array of size {size} into "
                            f"shape {tuple(dims)}")
        dims[unknown[0]] = size // known
    elif known != size:
        raise TypeError(f"lamina.numpy.{fun}: cannot reshape array of size {size} into shape "
                        f"{tuple(dims)}")
    return tuple(dims)


def reshape(a: ArrayLike, shape: Any = None, order: str = "C", *, newshape: Any = None,
            copy: bool | None = None, out_sharding: Any = None) -> Array:
    """``a`` with a new shape of the same size (one dimension may be -1);
    ``order='F'`` reads and places the elements in Fortran order;
    ``out_sharding`` splits the result."""
    fortran = _check_order(order)
    if shape is None:
        shape = newshape
    if shape is None:
        raise TypeError("lamina.numpy.reshape: missing the shape argument")
    if is_key_array(a):
        return a.reshape(shape, order=order)
    x = _operand("reshape", a)
    try:
        dims = _new_shape("reshape", shape, math.prod(_util.shape_of(x)))
    except TypeError as e:
        raise TypeError(_util.with_operands_note(str(e), [x])) from None
    sharding = _util.out_sharding("reshape", out_sharding, dims)
    if fortran:
        return _fortran_reshape(x, dims, sharding)
    return lax.reshape(x, dims, out_sharding=sharding)


def ravel(a: ArrayLike, order: str = "C", *, out_sharding: Any = None) -> Array:
    """The flattened (1-D) ``a`` (in Fortran order with ``order='F'``),
    split as ``out_sharding`` says."""
    if is_key_array(a):
        return a.ravel(order)
    fortran = _check_order(order)
    x = _operand("ravel", a)
    dims = (math.prod(_util.shape_of(x)),)
    sharding = _util.out_sharding("ravel", out_sharding, dims)
    if fortran:
        return _fortran_reshape(x, dims, sharding)
    return lax.reshape(x, dims, out_sharding=sharding)


def transpose(a: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """``a`` with its axes permuted (reversed by default)."""
    if is_key_array(a):
        return a.transpose(axes)
    x = _operand("transpose", a)
    nd = _util.ndim_of(x)
    if axes is None:
        perm = tuple(reversed(range(nd)))
    else:
        perm = tuple(_util.canonicalize_axis("transpose", ax, nd, "axes") for ax in axes)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"lamina.numpy.transpose: axes {tuple(axes)} is not a permutation "
                             f"of the {nd} axes")
    return lax.transpose(x, perm)


def permute_dims(a: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    """The array-API name of ``transpose``."""
    return transpose(a, axes)


def matrix_transpose(x: ArrayLike, /) -> Array:
    """``x`` with its last two axes swapped."""
    a = _operand("matrix_transpose", x, "x")
    nd = _util.ndim_of(a)
    if nd < 2:
        raise ValueError(f"lamina.numpy.matrix_transpose requires at least 2 dimensions, got {nd}")
    return lax.transpose(a, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def moveaxis(a: ArrayLike, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
    """``a`` with axes ``source`` moved to positions ``destination``."""
    if is_key_array(a):
        src_axes = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
        dst_axes = (destination,) if isinstance(destination, (int, np.integer)) \
            else tuple(destination)
        moved = moveaxis(
            a.base, [logical_axis("moveaxis", s, a.ndim, "source") for s in src_axes],
            [logical_axis("moveaxis", d, a.ndim, "destination") for d in dst_axes])
        return a.with_data(moved)
    x = _operand("moveaxis", a)
    nd = _util.ndim_of(x)
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError("lamina.numpy.moveaxis: source and destination must have the same "
                         "number of elements")
    src = tuple(_util.canonicalize_axis("moveaxis", s, nd, "source") for s in src)
    dst = tuple(_util.canonicalize_axis("moveaxis", d, nd, "destination") for d in dst)
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return lax.transpose(x, tuple(perm))


def swapaxes(a: ArrayLike, axis1: int, axis2: int) -> Array:
    """``a`` with two axes exchanged."""
    if is_key_array(a):
        return a.swapaxes(axis1, axis2)
    x = _operand("swapaxes", a)
    nd = _util.ndim_of(x)
    i = _util.canonicalize_axis("swapaxes", axis1, nd, "axis1")
    j = _util.canonicalize_axis("swapaxes", axis2, nd, "axis2")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(x, tuple(perm))


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Array:
    """Moves ``axis`` to before position ``start`` (prefer ``moveaxis``)."""
    x = _operand("rollaxis", a)
    nd = _util.ndim_of(x)
    ax = _util.canonicalize_axis("rollaxis", axis, nd)
    start = operator.index(start)
    start = start + nd if start < 0 else start
    if not 0 <= start <= nd:
        raise ValueError(f"lamina.numpy.rollaxis: start {start} out of range for {nd} dims")
    if ax < start:
        start -= 1
    return moveaxis(x, ax, start)


def squeeze(a: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``a`` without the size-1 axes ``axis`` (all of them by default)."""
    if is_key_array(a):
        return a.squeeze(axis)
    x = _operand("squeeze", a)
    shape = _util.shape_of(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = _util.canonicalize_axes("squeeze", axis, len(shape))
        for i in axes:
            if shape[i] != 1:
                raise ValueError(f"lamina.numpy.squeeze: cannot select an axis to squeeze out "
                                 f"which has size not equal to one, got shape={shape} and "
                                 f"axis={axis}")
    return lax.squeeze(x, axes) if axes else _util.as_array(x)


def expand_dims(a: ArrayLike, axis: int | Sequence[int]) -> Array:
    """``a`` with new size-1 axes at positions ``axis`` of the result."""
    items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if is_key_array(a):
        out_rank = a.ndim + len(items)
        return a.with_data(lax.expand_dims(a.base, tuple(
            logical_axis("expand_dims", i, out_rank) for i in items)))
    x = _operand("expand_dims", a)
    out_nd = _util.ndim_of(x) + len(items)
    axes = _util.canonicalize_axes("expand_dims", items, out_nd)
    return lax.expand_dims(x, axes)


# --- broadcasting ----------------------------------------------------------------------------
def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape NumPy broadcasting of ``shapes`` gives."""
    return _util.broadcast_shapes("broadcast_shapes",
                                  *((s,) if isinstance(s, int) else tuple(s) for s in shapes))


def broadcast_to(array: ArrayLike, shape: Any, *, out_sharding: Any = None) -> Array:
    """``array`` broadcast to ``shape``, split as ``out_sharding`` says."""
    items = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dims = tuple(_util.concrete_int("broadcast_to", d, "the shape") for d in items)
    if is_key_array(array):
        return array.with_data(_util.broadcast_to(
            "broadcast_to", array.base, dims + array.impl.key_shape))
    sharding = _util.out_sharding("broadcast_to", out_sharding, dims)
    return _util.broadcast_to("broadcast_to", _operand("broadcast_to", array, "array"), dims,
                              sharding)


def broadcast_arrays(*args: ArrayLike) -> list[Array]:
    """The arguments broadcast against each other."""
    xs = _util.operands("broadcast_arrays", *args)
    shape = _util.broadcast_shapes("broadcast_arrays", *(_util.shape_of(x) for x in xs))
    return [_util.as_array(_util.broadcast_to("broadcast_arrays", x, shape)) for x in xs]


def _atleast(fun: str, arys: tuple[Any, ...], nd: int) -> Any:
    out = []
    for i, a in enumerate(arys):
        x = _util.operand(fun, a, f"arys[{i}]")
        shape = _util.shape_of(x)
        if len(shape) < nd:
            if nd == 3 and len(shape) == 1:
                shape = (1,) + shape + (1,)
            elif nd == 3 and len(shape) == 2:
                shape = shape + (1,)
            else:
                shape = (1,) * (nd - len(shape)) + shape
            x = lax.reshape(x, shape)
        elif not _util.is_lamina_array(x):
            x = _as_array(x)
        out.append(x)
    return out[0] if len(out) == 1 else out


def _as_array(x: Any) -> Any:
    return asarray(x)


def atleast_1d(*arys: ArrayLike) -> Any:
    """Each argument with at least one dimension."""
    return _atleast("atleast_1d", arys, 1)


def atleast_2d(*arys: ArrayLike) -> Any:
    """Each argument with at least two dimensions (1-D ``(N,)`` becomes ``(1, N)``)."""
    return _atleast("atleast_2d", arys, 2)


def atleast_3d(*arys: ArrayLike) -> Any:
    """Each argument with at least three dimensions (``(N,)`` -> ``(1, N, 1)``,
    ``(M, N)`` -> ``(M, N, 1)``)."""
    return _atleast("atleast_3d", arys, 3)


# --- joining ---------------------------------------------------------------------------------
def _sequence(fun: str, arrays: Any) -> list[Any]:
    if _util.is_lamina_array(arrays) or isinstance(arrays, np.ndarray):
        return [arrays[i] for i in range(_util.shape_of(arrays)[0])]
    try:
        items = list(arrays)
    except TypeError:
        raise TypeError(f"lamina.numpy.{fun}: expected a sequence of arrays, got "
                        f"{type(arrays).__name__}") from None
    if not items:
        raise ValueError(f"lamina.numpy.{fun}: need at least one array")
    return [_util.operand(fun, a, f"arrays[{i}]") for i, a in enumerate(items)]


def _key_sequence(fun: str, arrays: Any) -> list[PRNGKeyArray] | None:
    """The key arrays to join, when ``arrays`` holds any (all must be keys of
    one implementation); None for ordinary arrays."""
    if is_key_array(arrays):
        return list(arrays)
    if not isinstance(arrays, (list, tuple)) or not any(is_key_array(a) for a in arrays):
        return None
    return key_arrays_of(f"lamina.numpy.{fun}", arrays,
                         [f"arrays[{i}]" for i in range(len(arrays))])


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Array:
    """The arrays joined along an existing ``axis`` (flattened first if None)."""
    keys = _key_sequence("concatenate", arrays)
    if keys is not None:
        if axis is None:
            keys = [k.ravel() for k in keys]
            axis = 0
        if keys[0].ndim == 0:
            raise ValueError("lamina.numpy.concatenate: zero-dimensional key arrays cannot be "
                             "concatenated")
        ax = logical_axis("lamina.numpy.concatenate", axis, keys[0].ndim)
        return keys[0].with_data(lax.concatenate([k.base for k in keys], ax))
    xs = _sequence("concatenate", arrays)
    if axis is None:
        xs = [ravel(x) for x in xs]
        axis = 0
    xs = _util.promote_dtypes("concatenate", *xs) if len(xs) > 1 else xs
    if dtype is not None:
        xs = [_util.convert(x, _util.user_dtype("concatenate", dtype)) for x in xs]
    nd = _util.ndim_of(xs[0])
    if nd == 0:
        raise ValueError("lamina.numpy.concatenate: zero-dimensional arrays cannot be "
                         "concatenated")
    for i, x in enumerate(xs):
        if _util.ndim_of(x) != nd:
            raise ValueError(f"lamina.numpy.concatenate: all the input arrays must have the same "
                             f"number of dimensions, but arrays[0] has {nd} and arrays[{i}] has "
                             f"{_util.ndim_of(x)}")
    ax = _util.canonicalize_axis("concatenate", axis, nd)
    if len(xs) == 1:
        return xs[0] if _util.is_lamina_array(xs[0]) else _as_array(xs[0])
    return lax.concatenate(xs, ax)


concat = concatenate


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Array:
    """The arrays (all of one shape) joined along a new ``axis``."""
    _util.check_out("stack", out)
    keys = _key_sequence("stack", arrays)
    if keys is not None:
        if len({k.shape for k in keys}) > 1:
            raise ValueError(f"lamina.numpy.stack: all input key arrays must have the same "
                             f"shape, got {sorted({k.shape for k in keys})}")
        ax = logical_axis("lamina.numpy.stack", axis, keys[0].ndim + 1)
        return keys[0].with_data(lax.concatenate(
            [lax.expand_dims(k.base, (ax,)) for k in keys], ax))
    xs = _sequence("stack", arrays)
    shapes = {_util.shape_of(x) for x in xs}
    if len(shapes) > 1:
        raise ValueError(f"lamina.numpy.stack: all input arrays must have the same shape, got "
                         f"{sorted(shapes)}")
    nd = _util.ndim_of(xs[0]) + 1
    ax = _util.canonicalize_axis("stack", axis, nd)
    return concatenate([lax.expand_dims(x, (ax,)) for x in xs], ax, dtype=dtype)


def unstack(x: ArrayLike, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The slices of ``x`` along ``axis``."""
    a = _operand("unstack", x, "x")
    ax = _util.canonicalize_axis("unstack", axis, _util.ndim_of(a))
    n = _util.shape_of(a)[ax]
    return tuple(lax.index_in_dim(a, i, ax, keepdims=False) for i in range(n))


def vstack(tup: Any, dtype: Any = None) -> Array:
    """Stacks along the first axis (1-D arrays become rows)."""
    return concatenate([atleast_2d(x) for x in _sequence("vstack", tup)], 0, dtype=dtype)


row_stack = vstack


def hstack(tup: Any, dtype: Any = None) -> Array:
    """Stacks along the second axis (the first for 1-D arrays)."""
    xs = [atleast_1d(x) for x in _sequence("hstack", tup)]
    return concatenate(xs, 0 if _util.ndim_of(xs[0]) == 1 else 1, dtype=dtype)


def dstack(tup: Any, dtype: Any = None) -> Array:
    """Stacks along the third axis."""
    return concatenate([atleast_3d(x) for x in _sequence("dstack", tup)], 2, dtype=dtype)


def column_stack(tup: Any) -> Array:
    """1-D arrays as the columns of a 2-D array (2-D arrays joined as they are)."""
    xs = []
    for x in _sequence("column_stack", tup):
        nd = _util.ndim_of(x)
        xs.append(lax.reshape(x, (_util.shape_of(x)[0], 1)) if nd == 1 else atleast_2d(x))
    return concatenate(xs, 1)


def append(arr: ArrayLike, values: ArrayLike, axis: int | None = None) -> Array:
    """``values`` appended to ``arr`` (both flattened when ``axis`` is None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


# --- splitting --------------------------------------------------------------------------------
def _split(fun: str, ary: Any, indices_or_sections: Any, axis: int, even: bool) -> list[Array]:
    x = _operand(fun, ary, "ary")
    shape = _util.shape_of(x)
    ax = _util.canonicalize_axis(fun, axis, len(shape))
    n = shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)) or np.ndim(indices_or_sections) == 0:
        sections = _util.concrete_int(fun, indices_or_sections, "the number of sections")
        if sections <= 0:
            raise ValueError(f"lamina.numpy.{fun}: number of sections must be larger than 0")
        if even and n % sections:
            raise ValueError(f"lamina.numpy.{fun}: array split does not result in an equal "
                             f"division: {n} elements into {sections} sections")
        base, extra = divmod(n, sections)
        sizes = [base + 1] * extra + [base] * (sections - extra)
        cuts = list(np.cumsum([0] + sizes))
    else:
        points = [_util.concrete_int(fun, i, "each split index")
                  for i in np.asarray(_util.concrete(fun, indices_or_sections, "the indices"))]
        cuts = [0] + [min(max(p + n if p < 0 else p, 0), n) for p in points] + [n]
    out = []
    for start, stop in zip(cuts[:-1], cuts[1:]):
        out.append(lax.slice_in_dim(x, int(start), int(max(start, stop)), 1, ax))
    return out


def split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """Splits into equal sections (an int) or at the given indices."""
    return _split("split", ary, indices_or_sections, axis, even=True)


def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Array]:
    """Like ``split``, allowing sections of unequal size."""
    return _split("array_split", ary, indices_or_sections, axis, even=False)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """Splits along the second axis (the first for 1-D arrays)."""
    x = _operand("hsplit", ary, "ary")
    return _split("hsplit", x, indices_or_sections, 0 if _util.ndim_of(x) == 1 else 1, True)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """Splits along the first axis (the array must be at least 2-D)."""
    x = _operand("vsplit", ary, "ary")
    if _util.ndim_of(x) < 2:
        raise ValueError("lamina.numpy.vsplit only works on arrays of 2 or more dimensions")
    return _split("vsplit", x, indices_or_sections, 0, True)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Array]:
    """Splits along the third axis (the array must be at least 3-D)."""
    x = _operand("dsplit", ary, "ary")
    if _util.ndim_of(x) < 3:
        raise ValueError("lamina.numpy.dsplit only works on arrays of 3 or more dimensions")
    return _split("dsplit", x, indices_or_sections, 2, True)


# --- repetition ----------------------------------------------------------------------------------
def tile(A: ArrayLike, reps: int | Sequence[int]) -> Array:
    """``A`` repeated ``reps`` times along each axis."""
    x = _operand("tile", A, "A")
    given = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    counts = tuple(_util.concrete_int("tile", r, "reps") for r in given)
    shape = _util.shape_of(x)
    nd = max(len(shape), len(counts))
    out_sharding = _tiled_sharding(get_aval(x), nd, (1,) * (nd - len(counts)) + counts, given)
    shape = (1,) * (nd - len(shape)) + shape
    counts = (1,) * (nd - len(counts)) + counts
    x = lax.reshape(x, shape)
    # Broadcast to (r0, s0, r1, s1, ...) and merge each pair.
    interleaved = tuple(v for pair in zip(counts, shape) for v in pair)
    x = lax.broadcast_in_dim(x, interleaved, tuple(range(1, 2 * nd, 2)))
    return lax.reshape(x, tuple(r * s for r, s in zip(counts, shape)), out_sharding=out_sharding)


def _tiled_sharding(aval: Any, nd: int, counts: tuple[int, ...],
                    reps: tuple[Any, ...]) -> TypeSharding | None:
    """A tiled operand's type sharding, its dimensions padded to ``nd``: only
    dimensions tiled once may be split (JAX's rule and message)."""
    if aval.sharding is None:
        return None
    spec = ((),) * (nd - aval.ndim) + tuple(aval.sharding.spec)
    for d, (count, axes) in enumerate(zip(counts, spec)):
        if count != 1 and axes:
            raise ShardingTypeError(
                f"Operand cannot be sharded on dimension {d} when the tiling is non-trivial. "
                f"Got input type: {aval} with reps: {reps}")
    return TypeSharding(aval.sharding.mesh, spec)


@takes_out_sharding("jnp.repeat")
def repeat(a: ArrayLike, repeats: Any, axis: int | None = None, *,
           total_repeat_length: int | None = None) -> Array:
    """Each element repeated ``repeats`` times along ``axis`` (flattened if None).

    ``repeats`` must be concrete (a per-element array of repeats too), unless
    ``total_repeat_length`` gives the output length. ``out_sharding`` lays
    out the result, computed with the mesh's Explicit axes made Auto (JAX's
    ``_auto_repeat``)."""
    x = _operand("repeat", a)
    if axis is None:
        x = ravel(x)
        axis = 0
    shape = _util.shape_of(x)
    ax = _util.canonicalize_axis("repeat", axis, len(shape))
    n = shape[ax]
    if _util.is_concrete(repeats):
        counts = np.asarray(_util.concrete("repeat", repeats, "repeats")).astype(np.int64)
        if counts.ndim == 0:
            r = int(counts)
            if r < 0:
                raise ValueError("lamina.numpy.repeat: repeats may not be negative")
            kept_dims = tuple(range(ax + 1)) + tuple(range(ax + 2, len(shape) + 1))
            expanded = lax.broadcast_in_dim(x, shape[:ax + 1] + (r,) + shape[ax + 1:], kept_dims)
            return lax.reshape(expanded, shape[:ax] + (n * r,) + shape[ax + 1:])
        if counts.shape != (n,):
            raise ValueError(f"lamina.numpy.repeat: repeats of shape {counts.shape} does not "
                             f"match the axis length {n}")
        if (counts < 0).any():
            raise ValueError("lamina.numpy.repeat: repeats may not be negative")
        index = np.repeat(np.arange(n), counts).astype(dtypes.default_int_dtype())
        return take(x, index, axis=ax)
    if total_repeat_length is None:
        _util.concrete("repeat", repeats, "repeats (or give total_repeat_length)")
    assert total_repeat_length is not None
    counts_arr = _util.convert(_operand("repeat", repeats, "repeats"), dtypes.default_int_dtype())
    counts_arr = _util.broadcast_to("repeat", counts_arr, (n,))
    # Output slot j takes the element whose cumulative end first exceeds j.
    ends = lax.cumsum(counts_arr, axis=0)
    slots = lax.iota(dtypes.default_int_dtype(), total_repeat_length)
    index = lax.reduce_sum(lax.convert_element_type(
        lax.le(lax.broadcast_in_dim(ends, (total_repeat_length, n), (1,)),
               lax.broadcast_in_dim(slots, (total_repeat_length, n), (0,))),
        dtypes.default_int_dtype()), (1,))
    index = lax.min(index, np.asarray(n - 1, dtypes.default_int_dtype()))
    return take(x, index, axis=ax)


# --- reordering --------------------------------------------------------------------------------
def flip(m: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    """``m`` reversed along ``axis`` (all axes by default)."""
    x = _operand("flip", m, "m")
    axes = _util.canonicalize_axes("flip", axis, _util.ndim_of(x))
    return lax.rev(x, axes) if axes else _util.as_array(x)


def fliplr(m: ArrayLike) -> Array:
    """``m`` reversed along axis 1."""
    x = _operand("fliplr", m, "m")
    if _util.ndim_of(x) < 2:
        raise ValueError("lamina.numpy.fliplr requires an array of at least 2 dimensions")
    return lax.rev(x, (1,))


def flipud(m: ArrayLike) -> Array:
    """``m`` reversed along axis 0."""
    x = _operand("flipud", m, "m")
    if _util.ndim_of(x) < 1:
        raise ValueError("lamina.numpy.flipud requires an array of at least 1 dimension")
    return lax.rev(x, (0,))


def _roll_axis(x: Any, shift: Any, axis: int) -> Any:
    n = _util.shape_of(x)[axis]
    if n == 0:
        return x
    if _util.is_concrete(shift):
        s = _util.concrete_int("roll", shift, "shift") % n
        if s == 0:
            return x
        return lax.concatenate([lax.slice_in_dim(x, n - s, n, 1, axis),
                                lax.slice_in_dim(x, 0, n - s, 1, axis)], axis)
    ints = get_aval(shift).dtype
    if not dtypes.is_integer(ints):
        raise TypeError("lamina.numpy.roll: shift must be an integer")
    size = np.asarray(n, ints)
    start = lax.rem(lax.sub(size, lax.rem(lax.rem(shift, size), size)), size)
    start = lax.rem(lax.add(start, size), size)
    doubled = lax.concatenate([x, x], axis)
    return lax.dynamic_slice_in_dim(doubled, start, n, axis)


def roll(a: ArrayLike, shift: Any, axis: int | Sequence[int] | None = None) -> Array:
    """Elements shifted by ``shift`` along ``axis`` (of the flat array if None),
    wrapping around; ``shift`` may be traced."""
    x = _operand("roll", a)
    if axis is None:
        shape = _util.shape_of(x)
        return lax.reshape(roll(ravel(x), shift, 0), shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = _util.ndim_of(x)
    if _util.is_concrete(shift):
        shifts = np.atleast_1d(_util.concrete("roll", shift, "shift"))
        shifts_list: list[Any] = list(np.broadcast_to(shifts, (max(len(axes), shifts.size),)))
        if len(axes) == 1 and len(shifts_list) > 1:
            axes = axes * len(shifts_list)
    else:
        if len(axes) != 1:
            raise ValueError("lamina.numpy.roll: a traced shift works with one axis")
        shifts_list = [shift]
    if len(shifts_list) != len(axes):
        raise ValueError("lamina.numpy.roll: shift and axis must have the same length")
    for s, ax in zip(shifts_list, axes):
        x = _roll_axis(x, s, _util.canonicalize_axis("roll", ax, nd))
    return x


def rot90(m: ArrayLike, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Array:
    """``m`` rotated by 90 degrees ``k`` times in the plane of ``axes``."""
    x = _operand("rot90", m, "m")
    nd = _util.ndim_of(x)
    if len(axes) != 2:
        raise ValueError("lamina.numpy.rot90: axes must be a pair")
    a0 = _util.canonicalize_axis("rot90", axes[0], nd, "axes")
    a1 = _util.canonicalize_axis("rot90", axes[1], nd, "axes")
    if a0 == a1:
        raise ValueError("lamina.numpy.rot90: axes must be different")
    k = _util.concrete_int("rot90", k, "k") % 4
    if k == 0:
        return x
    if k == 2:
        return lax.rev(x, (a0, a1))
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return lax.transpose(lax.rev(x, (a1,)), tuple(perm))
    return lax.rev(lax.transpose(x, tuple(perm)), (a1,))


# --- padding ---------------------------------------------------------------------------------
def _pad_widths(pad_width: Any, nd: int) -> list[tuple[int, int]]:
    widths = np.asarray(_util.concrete("pad", pad_width, "pad_width"))
    if not dtypes.is_integer(widths.dtype) and widths.size:
        if not np.all(np.equal(np.mod(widths, 1), 0)):
            raise TypeError("lamina.numpy.pad: pad_width must be integers")
    widths = np.broadcast_to(widths.astype(np.int64), (nd, 2)) if widths.size else np.zeros(
        (nd, 2), np.int64)
    if (widths < 0).any():
        raise ValueError("lamina.numpy.pad: pad widths must be non-negative")
    return [(int(b), int(a)) for b, a in widths]


def _edge_index(n: int, before: int, after: int) -> np.ndarray[Any, Any]:
    return np.clip(np.arange(-before, n + after), 0, n - 1)


def _wrap_index(n: int, before: int, after: int) -> np.ndarray[Any, Any]:
    return np.mod(np.arange(-before, n + after), n)


def _reflect_index(n: int, before: int, after: int) -> np.ndarray[Any, Any]:
    if n == 1:
        return np.zeros(n + before + after, np.int64)
    period = 2 * (n - 1)
    m = np.mod(np.arange(-before, n + after), period)
    return np.where(m < n, m, period - m)


def _symmetric_index(n: int, before: int, after: int) -> np.ndarray[Any, Any]:
    period = 2 * n
    m = np.mod(np.arange(-before, n + after), period)
    return np.where(m < n, m, period - 1 - m)


_INDEX_MODES = {"edge": _edge_index, "wrap": _wrap_index, "reflect": _reflect_index,
                "symmetric": _symmetric_index}
_PAD_MODES = ("constant", "empty") + tuple(_INDEX_MODES)


def pad(array: ArrayLike, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Array:
    """``array`` padded by ``pad_width`` (int, ``(before, after)`` or one pair per
    axis). Modes: constant (``constant_values``), empty, edge, wrap, reflect,
    symmetric."""
    x = _operand("pad", array, "array")
    shape = _util.shape_of(x)
    widths = _pad_widths(pad_width, len(shape))
    if callable(mode) or mode not in _PAD_MODES:
        raise _util.UnsupportedArgumentError(
            f"lamina.numpy.pad: mode {mode!r} is not supported; supported modes are "
            f"{', '.join(_PAD_MODES)}")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(f"lamina.numpy.pad: unsupported keyword arguments for mode {mode!r}: "
                         f"{sorted(unknown)}")
    if kwargs.get("reflect_type", "even") != "even":
        raise _util.UnsupportedArgumentError("lamina.numpy.pad: only reflect_type='even' is "
                                             "supported")
    if mode in ("constant", "empty"):
        return _pad_constant(x, widths, kwargs.get("constant_values", 0))
    for ax, (before, after) in enumerate(widths):
        if before == after == 0:
            continue
        if shape[ax] == 0:
            raise ValueError(f"lamina.numpy.pad: can't extend the empty axis {ax} with mode "
                             f"{mode!r}")
        index = _INDEX_MODES[mode](shape[ax], before, after).astype(dtypes.default_int_dtype())
        x = take(x, index, axis=ax)
    return x


def _pad_constant(x: Any, widths: list[tuple[int, int]], constant_values: Any) -> Any:
    dtype = get_aval(x).dtype
    values = np.asarray(_util.concrete("pad", constant_values, "constant_values")) \
        if _util.is_concrete(constant_values) else None
    if values is None or values.ndim == 0:
        fill = _util.convert(_util.operand("pad", constant_values if values is None else
                                           values[()], "constant_values"), dtype)
        if _util.ndim_of(fill):
            raise ValueError("lamina.numpy.pad: traced constant_values must be a scalar")
        return lax.pad(x, fill, [(b, a, 0) for b, a in widths])
    per_axis = np.broadcast_to(values, (len(widths), 2))
    for ax, ((before, after), (v_before, v_after)) in enumerate(zip(widths, per_axis)):
        config = [(0, 0, 0)] * len(widths)
        config[ax] = (before, 0, 0)
        x = lax.pad(x, np.asarray(v_before).astype(dtype), config)
        config[ax] = (0, after, 0)
        x = lax.pad(x, np.asarray(v_after).astype(dtype), config)
    return x
