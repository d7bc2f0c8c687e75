"""Smaller ``jax.numpy`` names: ``matvec``, ``vecmat``, ``bitwise_count``,
``partition``, ``argpartition``, ``sort_complex``, ``trim_zeros``,
``unwrap``, ``mask_indices``, ``place``, ``iterable`` and
``ComplexWarning``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.api import vmap
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util, ufuncs
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.calculus import diff
from lamina_tracing_core.numpy.creation import asarray, ones
from lamina_tracing_core.numpy.indexing import getitem, index_update, nonzero
from lamina_tracing_core.numpy.products import matmul
from lamina_tracing_core.numpy.reductions import cumsum
from lamina_tracing_core.numpy.shape_ops import ravel, swapaxes
from lamina_tracing_core.numpy.vectorize import vectorize

ComplexWarning = np.exceptions.ComplexWarning


def iterable(y: Any) -> bool:
    """Whether ``iter(y)`` works."""
    try:
        iter(y)
    except TypeError:
        return False
    return True


def matvec(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Batched matrix-vector products ``x1 @ x2`` (signature ``(n,m),(m)->(n)``)."""
    a, b = _util.operands("matvec", x1, x2, names=("x1", "x2"))
    return vectorize(matmul, signature="(n,m),(m)->(n)")(a, b)


def vecmat(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """Batched vector-matrix products ``conj(x1) @ x2`` (signature ``(n),(n,m)->(m)``)."""
    a, b = _util.operands("vecmat", x1, x2, names=("x1", "x2"))
    return vectorize(lambda u, m: matmul(ufuncs.conj(u), m),
                     signature="(n),(n,m)->(m)")(a, b)


def bitwise_count(x: ArrayLike, /) -> Array:
    """The number of set bits in ``|x|``, as uint8."""
    (v,) = _util.promote_args_numeric("bitwise_count", x)
    dt = get_aval(v).dtype
    if not (dtypes.is_integer(dt) or dtypes.is_boolean(dt)):
        raise TypeError(f"lamina.numpy.bitwise_count: x must be an integer array, got {dt}")
    if dtypes.is_boolean(dt):
        return lax.convert_element_type(v, np.uint8)
    return lax.convert_element_type(lax.population_count(ufuncs.abs(v)), np.uint8)


# --- partitions --------------------------------------------------------------------------------
def _partition_operand(fun: str, a: ArrayLike, kth: int, axis: int) -> tuple[Any, int, int]:
    (x,) = _util.operands(fun, a, names=("a",))
    if dtypes.is_complex(get_aval(x).dtype):
        raise TypeError(f"lamina.numpy.{fun}: complex input is not supported")
    ax = _util.canonicalize_axis(fun, axis, _util.ndim_of(x))
    k = _util.canonicalize_axis(fun, _util.concrete_int(fun, kth, "kth"),
                                _util.shape_of(x)[ax], "kth")
    return swapaxes(x, ax, -1), ax, k


def _negated(x: Any) -> Any:
    """``-x``, shifted by one for unsigned types (whose negation wraps) so it
    still reverses their order."""
    if get_aval(x).dtype.kind == "u":
        return lax.neg(lax.add(x, lax.full_like(x, 1)))
    return lax.neg(x)


def partition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """``a`` reordered along ``axis`` so the ``kth`` element is where sorting
    would put it, the smaller ones before it and the larger ones after."""
    x, ax, k = _partition_operand("partition", a, kth, axis)
    n = _util.shape_of(x)[-1]
    dt = get_aval(x).dtype
    low = lax.neg(lax.top_k(_negated(x), k + 1)[0])
    if dt.kind == "u":
        low = lax.sub(low, lax.full_like(low, 1))
    high = lax.top_k(x, n - k - 1)[0]
    return swapaxes(lax.concatenate([low, high], _util.ndim_of(x) - 1), -1, ax)


def argpartition(a: ArrayLike, kth: int, axis: int = -1) -> Array:
    """The indices that ``partition`` would move to each position."""
    x, ax, k = _partition_operand("argpartition", a, kth, axis)
    n = _util.shape_of(x)[-1]
    low_idx = lax.top_k(_negated(x), k + 1)[1]
    # The remaining positions, in index order: mark the chosen ones and take
    # the unmarked ones with top_k over a 0/1 proxy (stable on ties).
    def mark(proxy: Any, idx: Any) -> Any:
        return index_update(proxy, idx, 0.0, "set")

    marker: Callable[..., Any] = mark
    for _ in range(_util.ndim_of(x) - 1):
        marker = vmap(marker)
    proxy = marker(lax.full(_util.shape_of(x), 1.0, np.float32), low_idx)
    high_idx = lax.top_k(proxy, n - k - 1)[1]
    return swapaxes(lax.concatenate([low_idx, high_idx], _util.ndim_of(x) - 1), -1, ax)


def sort_complex(a: ArrayLike) -> Array:
    """``a`` sorted along its last axis (real part, then imaginary), as a
    strongly typed complex array (complex128 from float64/complex128 inputs,
    else complex64, as JAX); ``a`` must have at least one axis."""
    (x,) = _util.operands("sort_complex", a, names=("a",))
    if _util.ndim_of(x) == 0:
        raise ValueError("lamina.numpy.sort_complex: argument a must have at least one "
                         "dimension to sort along, got a scalar")
    out = lax.sort(x, dimension=_util.ndim_of(x) - 1)
    real = dtypes.to_inexact_dtype(get_aval(x).dtype)
    target = dtypes.complex128 if real in (dtypes.float64, dtypes.complex128) else dtypes.complex64
    return lax.convert_element_type(out, target)


def trim_zeros(filt: ArrayLike, trim: str = "fb", axis: Any = None) -> Array:
    """``filt`` without its leading (``"f"``) and/or trailing (``"b"``) zeros
    along ``axis`` (default every axis); needs concrete input."""
    (x,) = _util.operands("trim_zeros", filt, names=("filt",))
    x = _util.as_array(x)  # a NumPy argument gives an array, as JAX's
    values = _util.concrete("trim_zeros", x, "the filt argument")
    nd = values.ndim
    axes = set(range(nd)) if axis is None else set(_util.canonicalize_axes("trim_zeros", axis,
                                                                           nd))
    mode = trim.lower()
    if not axes or ("f" not in mode and "b" not in mode):
        return x
    index = []
    for ax in range(nd):
        if ax not in axes:
            index.append(slice(None))
            continue
        mask = np.any(values != 0, axis=tuple(i for i in range(nd) if i != ax))
        if not mask.any():
            index.append(slice(0, 0))
            continue
        start = int(mask.argmax()) if "f" in mode else None
        stop = values.shape[ax] - int(mask[::-1].argmax()) if "b" in mode else None
        index.append(slice(start, stop))
    return getitem(x, tuple(index))


def unwrap(p: ArrayLike, discont: ArrayLike | None = None, axis: int = -1,
           period: ArrayLike = 2 * np.pi) -> Array:
    """``p`` with jumps larger than ``discont`` (default ``period / 2``)
    between neighbours along ``axis`` replaced by their complement modulo
    ``period``."""
    x, per = _util.promote_dtypes("unwrap", p, period)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError("lamina.numpy.unwrap does not support complex inputs")
    ax = _unwrap_axis(axis, _util.ndim_of(x))
    if _util.shape_of(x)[ax] == 0:
        return x
    if dtypes.is_integer(get_aval(x).dtype):
        interval = ufuncs.floor_divide(per, 2)
    else:
        interval = ufuncs.divide(per, 2)
    limit = ufuncs.divide(per, 2) if discont is None else discont
    dd = diff(x, axis=ax)
    ddmod = ufuncs.subtract(ufuncs.mod(ufuncs.add(dd, interval), per), interval)
    at_edge = ufuncs.logical_and(ufuncs.equal(ddmod, ufuncs.negative(interval)),
                                 ufuncs.greater(dd, 0))
    ddmod = _where(at_edge, interval, ddmod)
    correction = _where(ufuncs.less(ufuncs.abs(dd), limit), 0, ufuncs.subtract(ddmod, dd))
    n = _util.shape_of(x)[ax]
    head = lax.slice_in_dim(x, 0, 1, 1, ax)
    tail = ufuncs.add(lax.slice_in_dim(x, 1, n, 1, ax), cumsum(correction, axis=ax))
    tail = _util.convert(tail, get_aval(x).dtype)
    return lax.concatenate([head, tail], ax)


def _unwrap_axis(axis: int, ndim: int) -> int:
    """``axis`` of an ``ndim``-dimensional array, counted from 0; out of range
    (a scalar has no axis) is an IndexError, as JAX's ``p.shape[axis]`` gives."""
    if not -ndim <= axis < ndim:
        raise IndexError(f"lamina.numpy.unwrap: axis {axis} is out of range for an array of "
                         f"dimension {ndim}")
    return axis % ndim


def _where(cond: Any, x: Any, y: Any) -> Any:
    xb, yb = _util.promote_args("where", x, y)
    shape = _util.broadcast_shapes("where", _util.shape_of(cond), _util.shape_of(xb),
                                   _util.shape_of(yb))
    return lax.select(_util.broadcast_to("where", cond, shape),
                      _util.broadcast_to("where", xb, shape),
                      _util.broadcast_to("where", yb, shape))


# --- index helpers -----------------------------------------------------------------------------
def mask_indices(n: int, mask_func: Callable[..., Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Array, Array]:
    """The indices where ``mask_func(ones((n, n)), k)`` is non-zero (e.g. ``triu``)."""
    m = _util.concrete_int("mask_indices", n, "n")
    mask = mask_func(ones((m, m), dtype=np.int32), k)
    rows, cols = nonzero(asarray(mask), size=size)
    return rows, cols


def place(arr: ArrayLike, mask: ArrayLike, vals: ArrayLike, *, inplace: bool = True) -> Array:
    """``arr`` with the places where ``mask`` is true set to ``vals`` in order
    (repeated as needed); needs ``inplace=False``."""
    if inplace:
        raise ValueError("lamina.numpy.place cannot modify arrays in place, because lamina "
                         "arrays are immutable; pass inplace=False to get the updated array")
    x, m, v = _util.operands("place", arr, mask, vals, names=("arr", "mask", "vals"))
    flat = ravel(x)
    n = _util.shape_of(flat)[0]
    flat_mask = lax.convert_element_type(ravel(_util.broadcast_to("place", m, _util.shape_of(x))),
                                         bool)
    values = ravel(_util.convert(v, get_aval(x).dtype))
    count = _util.shape_of(values)[0]
    if count == 0 or n == 0:
        return x
    ints = dtypes.default_int_dtype()
    # Each true position takes the next value, cycling through vals.
    order = lax.sub(cumsum(lax.convert_element_type(flat_mask, ints)), np.asarray(1, ints))
    picked = getitem(values, lax.rem(lax.max(order, lax.full_like(order, 0)),
                                     lax.full_like(order, count)))
    return lax.reshape(lax.select(flat_mask, picked, flat), _util.shape_of(x))


def spacing(x: ArrayLike, /) -> Array:
    """The distance from ``x`` to the next representable value away from zero."""
    (v,) = _util.promote_args_inexact("spacing", x)
    dt = get_aval(v).dtype
    if dtypes.is_complex(dt):
        raise ValueError("lamina.numpy.spacing is not defined for complex inputs")
    inf = lax.full_like(v, np.inf)
    if dt == np.float16:
        return ufuncs.subtract(ufuncs.nextafter(v, inf), v)
    result = ufuncs.subtract(ufuncs.nextafter(v, ufuncs.copysign(inf, v)), v)
    # A strongly typed smallest subnormal: the result is strongly typed, as JAX's.
    tiny = ufuncs.copysign(np.asarray(dtypes.finfo(dt).smallest_subnormal, dt), v)
    return _where(lax.eq(result, lax.full_like(result, 0)), tiny, result)


# --- bits and buffers --------------------------------------------------------------------------
def _bitorder(fun: str, bitorder: str) -> None:
    if bitorder not in ("little", "big"):
        raise ValueError(f"lamina.numpy.{fun}: bitorder must be either 'little' or 'big', got "
                         f"{bitorder!r}")


def packbits(a: ArrayLike, axis: int | None = None, bitorder: str = "big") -> Array:
    """The truth values of ``a`` packed eight to a uint8 along ``axis``
    (``None``: flattened), padded with zero bits."""
    (x,) = _util.operands("packbits", a, names=("a",))
    dt = get_aval(x).dtype
    if not (dtypes.is_integer(dt) or dtypes.is_boolean(dt)):
        raise TypeError("lamina.numpy.packbits: expected an input array of integer or boolean "
                        f"data type, got {dt}")
    _bitorder("packbits", bitorder)
    bits = lax.convert_element_type(lax.ne(x, lax.full_like(x, 0)), np.uint8)
    if axis is None:
        bits = ravel(bits)
        axis = 0
    ax = _util.canonicalize_axis("packbits", axis, _util.ndim_of(bits))
    bits = swapaxes(bits, ax, -1)
    shape = _util.shape_of(bits)
    extra = -shape[-1] % 8
    if extra:
        bits = lax.pad(bits, np.uint8(0), [(0, 0, 0)] * (len(shape) - 1) + [(0, extra, 0)])
    groups = (shape[-1] + extra) // 8
    bits = lax.reshape(bits, shape[:-1] + (groups, 8))
    shifts = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        shifts = shifts[::-1].copy()
    weights = lax.broadcast_in_dim(shifts, _util.shape_of(bits), (len(shape),))
    packed = lax.reduce_sum(lax.shift_left(bits, weights), (len(shape),))
    return swapaxes(lax.convert_element_type(packed, np.uint8), -1, ax)


def unpackbits(a: ArrayLike, axis: int | None = None, count: int | None = None,
               bitorder: str = "big") -> Array:
    """The bits of the uint8 array ``a`` as a uint8 array of 0s and 1s along
    ``axis`` (``None``: flattened), cut or zero-padded to ``count``."""
    (x,) = _util.operands("unpackbits", a, names=("a",))
    if get_aval(x).dtype != np.uint8:
        raise TypeError("lamina.numpy.unpackbits: expected an input array of unsigned byte "
                        f"data type, got {get_aval(x).dtype}")
    _bitorder("unpackbits", bitorder)
    if axis is None:
        x = ravel(x)
        axis = 0
    ax = _util.canonicalize_axis("unpackbits", axis, _util.ndim_of(x))
    x = swapaxes(x, ax, -1)
    shape = _util.shape_of(x)
    masks = (np.uint8(1) << np.arange(8, dtype=np.uint8)).astype(np.uint8)
    if bitorder == "big":
        masks = masks[::-1].copy()
    full = shape + (8,)
    spread = lax.broadcast_in_dim(x, full, tuple(range(len(shape))))
    picked = lax.bitwise_and(spread, lax.broadcast_in_dim(masks, full, (len(shape),)))
    out = lax.convert_element_type(lax.gt(picked, lax.full_like(picked, 0)), np.uint8)
    out = lax.reshape(out, shape[:-1] + (shape[-1] * 8,))
    if count is not None:
        n = _util.concrete_int("unpackbits", count, "count")
        have = shape[-1] * 8
        if n > have:
            out = lax.pad(out, np.uint8(0), [(0, 0, 0)] * (len(shape) - 1) + [(0, n - have, 0)])
        else:
            out = lax.slice_in_dim(out, 0, n, 1, len(shape) - 1)
    return swapaxes(out, -1, ax)


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0) -> Array:
    """An array from the bytes of ``buffer`` (read on the host, as NumPy)."""
    return asarray(np.frombuffer(buffer, dtype=dtype, count=count, offset=offset))


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str) -> Array:
    """An array from the text ``string`` of numbers separated by ``sep``."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


# NumPy's writers take lamina arrays as they are (through ``__array__``).
save = np.save
savez = np.savez


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """``numpy.load``, with a loaded array placed as a lamina array (bfloat16
    arrays, which NumPy writes as two-byte voids, come back as bfloat16)."""
    out = np.load(file, *args, **kwargs)
    if isinstance(out, np.ndarray):
        if out.dtype == np.dtype("V2"):
            out = out.view(dtypes.bfloat16)
        if dtypes.is_valid_array_dtype(out.dtype):
            return asarray(out)
    return out
