"""Products and diagonals: ``dot``, ``matmul``, ``vdot``, ``vecdot``, ``inner``,
``outer``, ``tensordot``, ``kron``, ``cross``, ``trace``, ``diagonal``.

Contractions become one ``dot_general`` after dtype promotion; diagonals are
strided slices of the flattened matrix axes (no gather).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import arange, diagonal_mask
from lamina_tracing_core.numpy.indexing import getitem
from lamina_tracing_core.numpy.shape_ops import moveaxis
from lamina_tracing_core.numpy.ufuncs import multiply, subtract


def dot_general(a: Any, b: Any, contract: tuple[tuple[int, ...], tuple[int, ...]],
                 batch: tuple[tuple[int, ...], tuple[int, ...]], precision: Any,
                 preferred_element_type: Any, out_sharding: Any = None) -> Any:
    preferred = _util.user_dtype("dot", preferred_element_type)
    if dtypes.is_boolean(get_aval(a).dtype):
        # XLA has no boolean dot: count in int32 and test for non-zero.
        a32, b32 = (lax.convert_element_type(v, dtypes.int32) for v in (a, b))
        out = lax.dot_general(a32, b32, (contract, batch), precision)
        return lax.ne(out, lax.full_like(out, 0))
    if preferred is None:
        # as JAX's: the product accumulates in the (promoted) operand dtype,
        # and the equation says so
        preferred = get_aval(a).dtype
    return lax.dot_general(a, b, (contract, batch), precision, preferred,
                           out_sharding=out_sharding)


def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """NumPy's ``dot``: scalars multiply; otherwise the last axis of ``a``
    contracts with the last (1-D) or second-to-last axis of ``b``. The
    product is split as ``out_sharding`` says (a ``PartitionSpec`` or
    ``NamedSharding``; needed when both contracted axes are split)."""
    x, y = _util.promote_dtypes("dot", a, b)
    nx, ny = _util.ndim_of(x), _util.ndim_of(y)
    if nx == 0 or ny == 0:
        # as JAX's: a product with a scalar ignores out_sharding
        return multiply(x, y)
    contract_b = 0 if ny == 1 else ny - 2
    _check_contract("dot", _util.shape_of(x), nx - 1, _util.shape_of(y), contract_b, (a, b))
    sy = _util.shape_of(y)
    out_shape = _util.shape_of(x)[:-1] + sy[:contract_b] + sy[contract_b + 1:]
    return dot_general(x, y, ((nx - 1,), (contract_b,)), ((), ()), precision,
                       preferred_element_type, _util.out_sharding("dot", out_sharding, out_shape,
                                                          keep_replicated=True))


def _check_contract(fun: str, sa: tuple[int, ...], ia: int, sb: tuple[int, ...], ib: int,
                    operands: Sequence[Any] = ()) -> None:
    if sa[ia] != sb[ib]:
        # a TypeError with JAX's words, as its dot_general raises (code matches on it)
        raise TypeError(_util.with_operands_note(
            f"lamina.numpy.{fun}: dot_general requires contracting dimensions to have the same "
            f"shape, got {(sa[ia],)} and {(sb[ib],)}: shapes {sa} and {sb} are not aligned "
            f"({sa[ia]} (dim {ia}) != {sb[ib]} (dim {ib}))", operands))


def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
           preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """``a @ b``: matrix products over the last two axes, broadcasting the
    leading (batch) axes; 1-D operands are treated as vectors. ``out_sharding``
    (a ``PartitionSpec``) is the result's sharding over Explicit mesh axes."""
    x, y = _util.promote_dtypes("matmul", a, b)
    nx, ny = _util.ndim_of(x), _util.ndim_of(y)
    if nx == 0 or ny == 0:
        raise ValueError("lamina.numpy.matmul: operands must not be scalars (use multiply or *)")
    if out_sharding is not None:
        out_sharding = _util.out_sharding("matmul", out_sharding, _matmul_shape(x, y),
                                         keep_replicated=True)
    if nx <= 2 and ny <= 2:
        # no batch axes: one dot_general contracts a vector's only axis
        # directly, as JAX's does (no expand_dims/squeeze around it)
        y_axis = 0 if ny == 1 else ny - 2
        _check_contract("matmul", _util.shape_of(x), nx - 1, _util.shape_of(y), y_axis, (a, b))
        return dot_general(x, y, ((nx - 1,), (y_axis,)), ((), ()), precision,
                           preferred_element_type, out_sharding)
    if nx == 1:
        x = lax.expand_dims(x, (0,))
    if ny == 1:
        y = lax.expand_dims(y, (1,))
    sx, sy = _util.shape_of(x), _util.shape_of(y)
    _check_contract("matmul", sx, len(sx) - 1, sy, len(sy) - 2, (a, b))
    batch = _util.broadcast_shapes("matmul", sx[:-2], sy[:-2])
    x = _util.broadcast_to("matmul", x, batch + sx[-2:])
    y = _util.broadcast_to("matmul", y, batch + sy[-2:])
    nb = len(batch)
    out = dot_general(x, y, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))),
                       precision, preferred_element_type, out_sharding)
    squeeze = ([nb] if nx == 1 else []) + ([nb + 1] if ny == 1 else [])
    return lax.squeeze(out, tuple(squeeze)) if squeeze else out


def _matmul_shape(x: Any, y: Any) -> tuple[int, ...]:
    """The shape of ``x @ y`` (shapes already checked to fit)."""
    sx, sy = _util.shape_of(x), _util.shape_of(y)
    batch = _util.broadcast_shapes("matmul", sx[:-2], sy[:-2])
    rows = sx[-2:-1]
    cols = sy[-1:] if len(sy) > 1 else ()
    return batch + rows + cols


def vdot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
         preferred_element_type: Any = None) -> Array:
    """The dot product of the flattened arrays, conjugating ``a``."""
    x, y = _util.promote_dtypes("vdot", a, b)
    if dtypes.is_complex(get_aval(x).dtype):
        x = lax.conj(x)
    flat_x = lax.reshape(x, (math.prod(_util.shape_of(x)),))
    flat_y = lax.reshape(y, (math.prod(_util.shape_of(y)),))
    return dot(flat_x, flat_y, precision=precision, preferred_element_type=preferred_element_type)


def vecdot(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1, precision: Any = None,
           preferred_element_type: Any = None) -> Array:
    """``sum(conj(x1) * x2, axis)`` with broadcasting of the other axes."""
    x, y = _util.promote_args("vecdot", x1, x2)
    nd = max(_util.ndim_of(x), _util.ndim_of(y))
    ax = _util.canonicalize_axis("vecdot", axis, nd)
    shape = _util.broadcast_shapes("vecdot", _util.shape_of(x), _util.shape_of(y))
    x, y = _util.broadcast_to("vecdot", x, shape), _util.broadcast_to("vecdot", y, shape)
    if dtypes.is_complex(get_aval(x).dtype):
        x = lax.conj(x)
    batch = tuple(i for i in range(nd) if i != ax)
    return dot_general(x, y, ((ax,), (ax,)), (batch, batch), precision, preferred_element_type)


def inner(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
          preferred_element_type: Any = None) -> Array:
    """The sum product over the last axes of ``a`` and ``b``."""
    x, y = _util.promote_dtypes("inner", a, b)
    nx, ny = _util.ndim_of(x), _util.ndim_of(y)
    if nx == 0 or ny == 0:
        return multiply(x, y)
    _check_contract("inner", _util.shape_of(x), nx - 1, _util.shape_of(y), ny - 1, (a, b))
    return dot_general(x, y, ((nx - 1,), (ny - 1,)), ((), ()), precision,
                        preferred_element_type)


def outer(a: ArrayLike, b: ArrayLike, out: None = None) -> Array:
    """``a[i] * b[j]`` for the flattened ``a`` and ``b``."""
    _util.check_out("outer", out)
    x, y = _util.promote_dtypes("outer", a, b)
    flat_x = lax.reshape(x, (math.prod(_util.shape_of(x)), 1))
    flat_y = lax.reshape(y, (1, math.prod(_util.shape_of(y))))
    return multiply(flat_x, flat_y)


def tensordot(a: ArrayLike, b: ArrayLike, axes: int | Sequence[Any] = 2, *,
              precision: Any = None, preferred_element_type: Any = None,
              out_sharding: Any = None) -> Array:
    """Sum products over the last ``axes`` axes of ``a`` and the first of
    ``b``, or over the axis lists ``axes = (a_axes, b_axes)``; the result is
    split as ``out_sharding`` says."""
    x, y = _util.promote_dtypes("tensordot", a, b)
    nx, ny = _util.ndim_of(x), _util.ndim_of(y)
    if isinstance(axes, int) or (not isinstance(axes, (list, tuple)) and _util.ndim_of(axes) == 0):
        n = operator.index(axes)  # type: ignore[arg-type]
        if n < 0 or n > min(nx, ny):
            raise ValueError(f"lamina.numpy.tensordot: axes={n} is out of range for operands "
                             f"of rank {nx} and {ny}")
        ax_a, ax_b = tuple(range(nx - n, nx)), tuple(range(n))
    else:
        if len(axes) != 2:
            raise TypeError("lamina.numpy.tensordot: axes must be an int or a pair of axis lists")
        first, second = axes
        first = (first,) if isinstance(first, int) else tuple(first)
        second = (second,) if isinstance(second, int) else tuple(second)
        if len(first) != len(second):
            raise TypeError("lamina.numpy.tensordot: the axis lists must have equal lengths")
        ax_a = tuple(_util.canonicalize_axis("tensordot", i, nx, "axes") for i in first)
        ax_b = tuple(_util.canonicalize_axis("tensordot", i, ny, "axes") for i in second)
    for i, j in zip(ax_a, ax_b):
        _check_contract("tensordot", _util.shape_of(x), i, _util.shape_of(y), j, (a, b))
    sx, sy = _util.shape_of(x), _util.shape_of(y)
    out_shape = tuple(d for i, d in enumerate(sx) if i not in ax_a) + \
        tuple(d for i, d in enumerate(sy) if i not in ax_b)
    return dot_general(x, y, (ax_a, ax_b), ((), ()), precision, preferred_element_type,
                       _util.out_sharding("tensordot", out_sharding, out_shape,
                                          keep_replicated=True))


def kron(a: ArrayLike, b: ArrayLike) -> Array:
    """The Kronecker product: blocks ``a[i, j] * b``."""
    x, y = _util.promote_dtypes("kron", a, b)
    nd = max(_util.ndim_of(x), _util.ndim_of(y))
    sx = (1,) * (nd - _util.ndim_of(x)) + _util.shape_of(x)
    sy = (1,) * (nd - _util.ndim_of(y)) + _util.shape_of(y)
    x = lax.reshape(x, tuple(v for d in sx for v in (d, 1)))
    y = lax.reshape(y, tuple(v for d in sy for v in (1, d)))
    return lax.reshape(multiply(x, y), tuple(p * q for p, q in zip(sx, sy)))


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Array:
    """The cross product of 2- or 3-vectors along the given axes (broadcast);
    eagerly, one compiled program, as JAX's."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _util.promote_dtypes("cross", a, b)
    return _cross_compiled(x, y, axisa, axisb, axisc)


def _cross(x: Any, y: Any, axisa: int, axisb: int, axisc: int) -> Array:
    x, y = moveaxis(x, axisa, -1), moveaxis(y, axisb, -1)
    nx, ny = _util.shape_of(x)[-1], _util.shape_of(y)[-1]
    if nx not in (2, 3) or ny not in (2, 3):
        raise ValueError("lamina.numpy.cross: incompatible dimensions for cross product "
                         "(dimension must be 2 or 3)")

    def part(v: Any, i: int) -> Any:
        return lax.index_in_dim(v, i, _util.ndim_of(v) - 1, keepdims=False)

    def component(v: Any, n: int, i: int) -> Any:
        return part(v, i) if i < n else lax.full_like(part(v, 0), 0)

    x0, x1, x2 = (component(x, nx, i) for i in range(3))
    y0, y1, y2 = (component(y, ny, i) for i in range(3))
    c2 = subtract(multiply(x0, y1), multiply(x1, y0))
    if nx == 2 and ny == 2:
        return c2
    c0 = subtract(multiply(x1, y2), multiply(x2, y1))
    c1 = subtract(multiply(x2, y0), multiply(x0, y2))
    parts = _util.promote_shapes("cross", c0, c1, c2)
    shape = _util.broadcast_shapes("cross", *(_util.shape_of(p) for p in parts))
    stacked = lax.concatenate([lax.expand_dims(_util.broadcast_to("cross", p, shape), (len(shape),))
                               for p in parts], len(shape))
    return moveaxis(stacked, -1, axisc)


_cross_compiled = tc_api.compiled_when_eager(_cross, static_argnums=(2, 3, 4))


# --- diagonals --------------------------------------------------------------------------------
def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Array:
    """The ``offset`` diagonal of the ``(axis1, axis2)`` planes, as a last axis."""
    x = _util.operand("diagonal", a, "a")
    nd = _util.ndim_of(x)
    if nd < 2:
        raise ValueError("lamina.numpy.diagonal requires an array of at least two dimensions")
    i = _util.canonicalize_axis("diagonal", axis1, nd, "axis1")
    j = _util.canonicalize_axis("diagonal", axis2, nd, "axis2")
    if i == j:
        raise ValueError("lamina.numpy.diagonal: axis1 and axis2 cannot be the same")
    offset = _util.concrete_int("diagonal", offset, "offset")
    x = moveaxis(x, (i, j), (-2, -1))
    shape = _util.shape_of(x)
    n, m = shape[-2], shape[-1]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    # A gather of the (r, r + offset) elements, as JAX does: its transpose is a
    # scatter-add, which XLA folds into the sum of the other cotangents the
    # way it does for JAX, so gradients agree to the last bit.
    rows = arange(length)
    cols = arange(abs(offset), abs(offset) + length)
    if offset < 0:
        rows, cols = cols, rows
    return getitem(x, (Ellipsis, rows, cols))

def diag(v: Any, k: int = 0) -> Array:
    """A 1-D ``v`` as a 2-D array with ``v`` on the ``k``-th diagonal, or the
    ``k``-th diagonal of a 2-D ``v``."""
    x = _util.operand("diag", v, "v")
    k = _util.concrete_int("diag", k, "k")
    shape = _util.shape_of(x)
    if len(shape) == 2:
        return diagonal(x, offset=k)
    if len(shape) != 1:
        raise ValueError(f"lamina.numpy.diag: v must be 1-D or 2-D, got shape {shape}")
    n = shape[0] + abs(k)
    # Pad v to length n so that row i (k >= 0) or column j (k < 0) reads v[i] / v[j].
    padded = lax.pad(x, _util.convert(0, get_aval(x).dtype), [(0, abs(k), 0)])
    mask = diagonal_mask(n, n, k, lax.eq)
    along = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
    return lax.select(mask, along, lax.full_like(along, 0))


def diagflat(v: Any, k: int = 0) -> Array:
    """``diag`` of the flattened ``v``."""
    x = _util.operand("diagflat", v, "v")
    return diag(lax.reshape(x, (math.prod(_util.shape_of(x)),)), k)
