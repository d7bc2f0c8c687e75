"""``lamina.numpy.linalg``: norms, and the products the array API puts here.

Decompositions (``inv``, ``det``, ``solve``, ``svd``, ``eigh``, ``cholesky``,
``qr``...) need linear-algebra primitives lamina's lax does not have yet;
asking for one raises an AttributeError that says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy import reductions as red
from lamina_tracing_core.numpy.products import cross, diagonal, matmul, outer, tensordot, vecdot
from lamina_tracing_core.numpy.reductions import trace
from lamina_tracing_core.numpy.shape_ops import matrix_transpose

__all__ = ["cross", "diagonal", "matmul", "matrix_norm", "matrix_transpose", "norm", "outer",
           "tensordot", "trace", "vecdot", "vector_norm"]

_NEEDS_DECOMPOSITION = frozenset({
    "inv", "pinv", "det", "slogdet", "solve", "lstsq", "svd", "svdvals", "eig", "eigh",
    "eigvals", "eigvalsh", "cholesky", "qr", "matrix_rank", "matrix_power", "cond",
    "tensorinv", "tensorsolve", "multi_dot"})


def __getattr__(name: str) -> Any:
    if name in _NEEDS_DECOMPOSITION:
        raise AttributeError(
            f"lamina.numpy.linalg.{name} is not available: it needs matrix decomposition "
            "primitives (LU, Cholesky, QR, SVD, eigendecomposition) that lamina's lax does not "
            "provide yet")
    raise AttributeError(f"module 'lamina.numpy.linalg' has no attribute {name!r}")


def _abs_real(x: Any) -> Any:
    """``|x|`` as a real array (the modulus for complex)."""
    out = lax.abs(x)
    return out


def _squares(x: Any) -> Any:
    if dtypes.is_complex(get_aval(x).dtype):
        return lax.real(lax.mul(x, lax.conj(x)))
    return lax.mul(x, x)


def _vector_norm(x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if ord is None or ord == 2:
        return lax.sqrt(red.sum(_squares(x), axis=axes, keepdims=keepdims))
    if ord == np.inf:
        return red.max(_abs_real(x), axis=axes, keepdims=keepdims)
    if ord == -np.inf:
        return red.min(_abs_real(x), axis=axes, keepdims=keepdims)
    if ord == 0:
        nonzero = lax.ne(x, lax.full_like(x, 0))
        real = get_aval(lax.abs(x)).dtype
        return red.sum(nonzero, axis=axes, keepdims=keepdims, dtype=real)
    if ord == 1:
        return red.sum(_abs_real(x), axis=axes, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"lamina.numpy.linalg.norm: invalid order {ord!r} for a vector norm")
    magnitudes = _abs_real(x)
    real = get_aval(magnitudes).dtype
    total = red.sum(lax.pow(magnitudes, np.asarray(ord, real)), axis=axes, keepdims=keepdims)
    return lax.pow(total, np.asarray(1.0 / float(ord), real))


def _matrix_norm(x: Any, ord: Any, axes: tuple[int, int], keepdims: bool) -> Any:
    row, col = axes
    if ord is None or ord == "fro":
        return lax.sqrt(red.sum(_squares(x), axis=axes, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        # 1: the largest column sum (sum over rows); inf: the largest row sum.
        summed_axis, reduced_axis = (row, col) if ord in (1, -1) else (col, row)
        sums = red.sum(_abs_real(x), axis=summed_axis, keepdims=True)
        pick = red.max if ord in (1, np.inf) else red.min
        out = pick(sums, axis=reduced_axis, keepdims=True)
        if keepdims:
            return out
        return lax.squeeze(out, tuple(sorted(axes)))
    if ord in (2, -2, "nuc"):
        raise _util.UnsupportedArgumentError(
            f"lamina.numpy.linalg.norm: ord={ord!r} for matrices needs singular values (an "
            "SVD), which lamina does not provide yet")
    raise ValueError(f"lamina.numpy.linalg.norm: invalid norm order {ord!r} for matrices")


def norm(x: ArrayLike, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:
    """Vector norms (one axis: ord None/2, 1, inf, -inf, 0, any p) and matrix
    norms (two axes: None/'fro', 1, -1, inf, -inf); without ``axis`` a 1-D
    or 2-D ``x`` picks accordingly, and ``ord=None`` is the 2-norm of the
    flattened ``x``."""
    (a,) = _util.promote_dtypes_inexact("norm", x)
    nd = _util.ndim_of(a)
    if axis is None:
        if ord is None:
            axes = tuple(range(nd))
            out = lax.sqrt(lax.reduce_sum(_squares(a), axes))
            return lax.reshape(out, (1,) * nd) if keepdims else out
        if nd not in (1, 2):
            raise ValueError("lamina.numpy.linalg.norm: improper number of dimensions to norm "
                             f"({nd}); give axis")
        axes = tuple(range(nd))
    else:
        items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(_util.canonicalize_axis("norm", i, nd) for i in items)
        if len(set(axes)) != len(axes):
            raise ValueError("lamina.numpy.linalg.norm: duplicate axes")
    if len(axes) == 1:
        return _vector_norm(a, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(a, ord, (axes[0], axes[1]), keepdims)
    raise ValueError("lamina.numpy.linalg.norm: improper number of axes (1 or 2 are allowed)")


def vector_norm(x: ArrayLike, /, *, axis: Any = None, keepdims: bool = False,
                ord: Any = 2) -> Array:
    """The array-API vector norm over ``axis`` (all axes, flattened, if None)."""
    (a,) = _util.promote_dtypes_inexact("vector_norm", x)
    if axis is None:
        shape = _util.shape_of(a)
        out = _vector_norm(lax.reshape(a, (math.prod(shape),)), ord, (0,), False)
        return lax.reshape(out, (1,) * len(shape)) if keepdims else out
    axes = _util.canonicalize_axes("vector_norm", axis, _util.ndim_of(a))
    return _vector_norm(a, ord, axes, keepdims)


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Array:
    """The array-API matrix norm over the last two axes."""
    (a,) = _util.promote_dtypes_inexact("matrix_norm", x)
    nd = _util.ndim_of(a)
    if nd < 2:
        raise ValueError("lamina.numpy.linalg.matrix_norm requires at least 2 dimensions")
    return _matrix_norm(a, ord, (nd - 2, nd - 1), keepdims)
