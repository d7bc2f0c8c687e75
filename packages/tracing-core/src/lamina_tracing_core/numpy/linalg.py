"""``lamina.numpy.linalg``: norms, the products the array API puts here, and the
decompositions and solvers built on ``lax.linalg`` (``cholesky``, ``qr``,
``svd``, ``eigh``, ``inv``, ``solve``, ``det``, ``slogdet``, ``lstsq``,
``pinv``, ...), with JAX's custom JVPs for ``det``, ``slogdet``, ``solve``
and ``pinv``; ``eig``/``eigvals`` run on CPU only. Singular or
non-positive-definite input gives NaNs/infs as JAX does, never an exception.
"""

from __future__ import annotations

import math
import string
import operator
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core import api as tc_api
from lamina_tracing_core.lax.contractions import Precision
from lamina_tracing_core.numpy.einsum import einsum
from lamina_tracing_core.control_flow.solves import custom_linear_solve
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.lax.helpers import operand_origin

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy import reductions as red
from lamina_tracing_core.numpy import products, ufuncs
from lamina_tracing_core.numpy.products import matmul, tensordot, vecdot
from lamina_tracing_core.numpy.reductions import trace as _trace
from lamina_tracing_core.numpy.shape_ops import matrix_transpose

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult", "cholesky", "cond",
           "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "multi_dot",
           "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot",
           "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm"]


# --- the array API's forms: matrices in the last two axes, vectors in one ---------------------
def diagonal(x: ArrayLike, /, *, offset: int = 0) -> Array:
    """The ``offset`` diagonal of each matrix in the last two axes of ``x``."""
    if _util.ndim_of(x) < 2:
        raise ValueError(f"lamina.numpy.linalg.diagonal: argument 'x' must have at least 2 "
                         f"dimensions, got shape {_util.shape_of(x)}")
    return products.diagonal(x, offset, axis1=-2, axis2=-1)


def trace(x: ArrayLike, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """The sum of the ``offset`` diagonal of each matrix in the last two axes."""
    if _util.ndim_of(x) < 2:
        raise ValueError(f"lamina.numpy.linalg.trace: argument 'x' must have at least 2 "
                         f"dimensions, got shape {_util.shape_of(x)}")
    return _trace(x, offset, axis1=-2, axis2=-1, dtype=dtype)


def outer(x1: ArrayLike, x2: ArrayLike, /) -> Array:
    """The outer product of two vectors (no other rank is accepted)."""
    for name, v in (("x1", x1), ("x2", x2)):
        if _util.ndim_of(v) != 1:
            raise ValueError(f"lamina.numpy.linalg.outer: argument {name!r} must be "
                             f"one-dimensional, got shape {_util.shape_of(v)}")
    return products.outer(x1, x2)


def cross(x1: ArrayLike, x2: ArrayLike, /, *, axis: int = -1) -> Array:
    """The cross product of 3-vectors along ``axis`` of both arguments (the
    other axes broadcast)."""
    for name, v in (("x1", x1), ("x2", x2)):
        shape = _util.shape_of(v)
        ax = _util.canonicalize_axis("linalg.cross", axis, len(shape))
        if shape[ax] != 3:
            raise ValueError(f"lamina.numpy.linalg.cross: argument {name!r} must have size 3 "
                             f"along axis {axis}, got shape {shape}")
    return products.cross(x1, x2, axis=axis)


class EigResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


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
        moved = lax.transpose(x, (*[i for i in range(_util.ndim_of(x)) if i not in axes],
                                  row, col))
        s = svdvals(moved)
        out = (red.sum(s, axis=-1) if ord == "nuc" else
               red.max(s, axis=-1) if ord == 2 else red.min(s, axis=-1))
        if keepdims:
            return lax.expand_dims(out, tuple(sorted(axes)))
        return out
    raise ValueError(f"lamina.numpy.linalg.norm: invalid norm order {ord!r} for matrices")


def norm(x: ArrayLike, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Array:
    """Vector norms (one axis: ord None/2, 1, inf, -inf, 0, any p) and matrix
    norms (two axes: None/'fro', 1, -1, inf, -inf, 2, -2, 'nuc'); without ``axis`` a 1-D
    or 2-D ``x`` picks accordingly, and ``ord=None`` is the 2-norm of the
    flattened ``x``. Eagerly, one compiled program, as JAX's (its bits)."""
    (a,) = _util.promote_dtypes_inexact("norm", x)
    a = _util.strip_weak(a)  # a norm is a reduction: strongly typed, as JAX's
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = tuple(axis)
    return _norm_compiled(a, ord, axis, keepdims)


def _norm(a: Any, ord: Any, axis: Any, keepdims: bool) -> Any:
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


_norm_compiled = tc_api.compiled_when_eager(_norm, static_argnums=(1, 2, 3))


def vector_norm(x: ArrayLike, /, *, axis: Any = None, keepdims: bool = False,
                ord: Any = 2) -> Array:
    """The array-API vector norm over ``axis`` (all axes, flattened, if None);
    eagerly, one compiled program, as JAX's."""
    (a,) = _util.promote_dtypes_inexact("vector_norm", x)
    a = _util.strip_weak(a)  # a norm is a reduction: strongly typed, as JAX's
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = tuple(axis)
    return _vector_norm_compiled(a, axis, keepdims, ord)


def _vector_norm_of(a: Any, axis: Any, keepdims: bool, ord: Any) -> Any:
    if axis is None:
        shape = _util.shape_of(a)
        out = _vector_norm(lax.reshape(a, (math.prod(shape),)), ord, (0,), False)
        return lax.reshape(out, (1,) * len(shape)) if keepdims else out
    axes = _util.canonicalize_axes("vector_norm", axis, _util.ndim_of(a))
    return _vector_norm(a, ord, axes, keepdims)


_vector_norm_compiled = tc_api.compiled_when_eager(_vector_norm_of, static_argnums=(1, 2, 3))


def matrix_norm(x: ArrayLike, /, *, keepdims: bool = False, ord: Any = "fro") -> Array:
    """The array-API matrix norm over the last two axes; eagerly, one compiled
    program, as JAX's."""
    (a,) = _util.promote_dtypes_inexact("matrix_norm", x)
    a = _util.strip_weak(a)  # a norm is a reduction: strongly typed, as JAX's
    nd = _util.ndim_of(a)
    if nd < 2:
        raise ValueError("lamina.numpy.linalg.matrix_norm requires at least 2 dimensions")
    return _norm_compiled(a, ord, (nd - 2, nd - 1), keepdims)


# --- decompositions and solvers -----------------------------------------------------------

class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


def _H(x: Any) -> Any:
    nd = _util.ndim_of(x)
    t = lax.transpose(x, (*range(nd - 2), nd - 1, nd - 2))
    return lax.conj(t) if dtypes.is_complex(get_aval(x).dtype) else t


def _matrix(fun: str, x: ArrayLike, *, square: bool = False, name: str = "a") -> Any:
    """``x`` promoted to an inexact dtype, checked to be a (batch of) matrices."""
    (a,) = _util.promote_dtypes_inexact(fun, x)
    shape = _util.shape_of(a)
    if len(shape) < 2:
        raise ValueError(f"{_util.qualified(fun)}: argument {name!r} must have at least two "
                         f"dimensions, got shape {shape}{operand_origin(x)}")
    if square and shape[-1] != shape[-2]:
        raise ValueError(f"{_util.qualified(fun)}: argument {name!r} must be a (batch of) "
                         f"square matrices, got shape {shape}{operand_origin(x)}")
    return a


def cholesky(a: ArrayLike, *, upper: bool = False, symmetrize_input: bool = True) -> Array:
    """The Cholesky factor of each (Hermitian positive-definite) trailing
    matrix: lower (``a = L @ L^H``), or upper with ``upper=True``; NaNs where
    ``a`` is not positive definite."""
    x = _matrix("linalg.cholesky", a, square=True)
    L = lax.linalg.cholesky(x, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def qr(a: ArrayLike, mode: str = "reduced") -> Any:
    """The QR decomposition: ``mode`` 'reduced' (``Q`` m x k), 'complete'
    (``Q`` m x m), 'r' (only ``R``) or 'raw' (LAPACK's ``(h, tau)``)."""
    x = _matrix("linalg.qr", a)
    if mode == "raw":
        h, taus = lax.linalg.geqrf(x)
        return _H(h), taus
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"lamina.numpy.linalg.qr: unsupported mode {mode!r}; expected "
                         "'reduced', 'complete', 'r' or 'raw'")
    q, r = lax.linalg.qr(x, full_matrices=mode == "complete")
    if mode == "r":
        return r
    return QRResult(q, r)


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True,
        hermitian: bool = False, subset_by_index: tuple[int, int] | None = None) -> Any:
    """The singular value decomposition ``a = U @ diag(S) @ Vh`` (``S``
    descending); only ``S`` with ``compute_uv=False``."""
    x = _matrix("linalg.svd", a)
    if hermitian:
        w, v = eigh(x)
        s = lax.abs(w)
        order = lax.sort_key_val(lax.neg(s), lax.broadcasted_iota(
            dtypes.int32, _util.shape_of(s), _util.ndim_of(s) - 1))[1]
        s = lax.take_along_axis(s, order, _util.ndim_of(s) - 1)
        if not compute_uv:
            return s
        nd = _util.ndim_of(v)
        cols = lax.broadcast_in_dim(order, _util.shape_of(v), (*range(nd - 2), nd - 1))
        u = lax.take_along_axis(v, cols, nd - 1)
        signs = lax.sign(lax.take_along_axis(w, order, _util.ndim_of(w) - 1))
        vh = _H(lax.mul(u, lax.broadcast_in_dim(lax.convert_element_type(
            signs, get_aval(u).dtype), _util.shape_of(u), (*range(nd - 2), nd - 1))))
        return SVDResult(u, s, vh)
    out = lax.linalg.svd(x, full_matrices=full_matrices, compute_uv=compute_uv,
                         subset_by_index=subset_by_index)
    if compute_uv:
        u, s, vh = out
        return SVDResult(u, s, vh)
    return out


def svdvals(x: ArrayLike, /) -> Array:
    """The singular values of each trailing matrix, descending."""
    return svd(x, compute_uv=False)


def eigh(a: ArrayLike, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors (columns) of each Hermitian
    trailing matrix; ``UPLO`` ('L' or 'U') picks the triangle read when
    ``symmetrize_input`` is False."""
    x = _matrix("linalg.eigh", a, square=True)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"lamina.numpy.linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax.linalg.eigh(x, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eig(a: ArrayLike) -> EigResult:
    """The complex eigenvalues and right eigenvectors (unit-norm columns) of
    each square trailing matrix (CPU only; only the eigenvalues are
    differentiable, as in JAX)."""
    x = _matrix("linalg.eig", a, square=True)
    w, v = lax.linalg.eig(x, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: ArrayLike) -> Array:
    """The complex eigenvalues of each square trailing matrix (CPU only)."""
    x = _matrix("linalg.eigvals", a, square=True)
    return lax.linalg.eig(x, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def eigvalsh(a: ArrayLike, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Array:
    """The eigenvalues (ascending) of each Hermitian trailing matrix."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def _lu_solve(lu_: Any, perm: Any, b: Any, trans: int = 0) -> Any:
    """``a^-1 b`` (``trans`` 1: ``a^-T b``, 2: ``a^-H b``) for ``b`` of shape
    ``(..., m, k)`` from ``a``'s LU factors."""
    nd = _util.ndim_of(b)
    tri = lax.linalg.triangular_solve
    if trans == 0:
        idx = lax.broadcast_in_dim(perm, _util.shape_of(b), (*range(nd - 2), nd - 2))
        x = lax.take_along_axis(b, idx, nd - 2)
        x = tri(lu_, x, left_side=True, lower=True, unit_diagonal=True)
        return tri(lu_, x, left_side=True, lower=False)
    conj = trans == 2
    x = tri(lu_, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conj)
    x = tri(lu_, x, left_side=True, lower=True, transpose_a=True, conjugate_a=conj,
            unit_diagonal=True)
    inv_perm = lax.sort_key_val(perm, lax.broadcasted_iota(
        dtypes.int32, _util.shape_of(perm), _util.ndim_of(perm) - 1))[1]
    idx = lax.broadcast_in_dim(inv_perm, _util.shape_of(x), (*range(nd - 2), nd - 2))
    return lax.take_along_axis(x, idx, nd - 2)


def _broadcast_batch(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` (..., m, m) and ``b`` (..., m, k) broadcast to common batch dims."""
    sa, sb = _util.shape_of(a), _util.shape_of(b)
    batch = _util.broadcast_shapes("linalg.solve", sa[:-2], sb[:-2])
    return (lax.broadcast_in_dim(a, (*batch, *sa[-2:]),
                                 tuple(range(len(batch) - len(sa) + 2, len(batch) + 2))),
            lax.broadcast_in_dim(b, (*batch, *sb[-2:]),
                                 tuple(range(len(batch) - len(sb) + 2, len(batch) + 2))))


def _solve(a: Any, b: Any) -> Any:
    """``a^-1 b`` for ``b`` of shape ``(..., m, k)``, by one LU factorization
    that the derivatives reuse: a ``custom_linear_solve`` of ``x -> a @ x``,
    differentiated implicitly (as JAX's)."""
    lu_, _, perm = lax.linalg.lu(lax.stop_gradient(a))
    return custom_linear_solve(partial(matmul, a), b,
                               solve=lambda _, x: _lu_solve(lu_, perm, x),
                               transpose_solve=lambda _, x: _lu_solve(lu_, perm, x, trans=1))


def solve(a: ArrayLike, b: ArrayLike) -> Array:
    """``x`` with ``a @ x = b``; a 1-D ``b`` is a vector, otherwise ``b`` is a
    (batch of) matrices whose batch dims broadcast against ``a``'s."""
    x = _matrix("linalg.solve", a, square=True)
    (x, bb) = _util.promote_dtypes_inexact("linalg.solve", x, b)
    bshape = _util.shape_of(bb)
    m = _util.shape_of(x)[-1]
    if len(bshape) == 1:
        if bshape[0] != m:
            raise ValueError(f"lamina.numpy.linalg.solve: argument 'b' of shape {bshape} does "
                             f"not match argument 'a' of shape {_util.shape_of(x)}"
                             f"{operand_origin(a, b)}")
        out = solve(x, lax.reshape(bb, (m, 1)))
        return lax.reshape(out, _util.shape_of(out)[:-1])
    if len(bshape) < 2 or bshape[-2] != m:
        raise ValueError(f"lamina.numpy.linalg.solve: argument 'b' of shape {bshape} does not "
                         f"match argument 'a' of shape {_util.shape_of(x)} (b.shape[-2] must "
                         f"be {m}){operand_origin(a, b)}")
    a2, b2 = _broadcast_batch(x, bb)
    return _solve(a2, b2)


def inv(a: ArrayLike) -> Array:
    """The inverse of each square trailing matrix (infs/NaNs where singular)."""
    x = _matrix("linalg.inv", a, square=True)
    shape = _util.shape_of(x)
    n = shape[-1]
    eye = lax.broadcast_in_dim(np.eye(n, dtype=get_aval(x).dtype), shape,
                               (len(shape) - 2, len(shape) - 1))
    return solve(x, eye)


def _slogdet_lu(a: Any) -> tuple[Any, Any]:
    dtype = get_aval(a).dtype
    lu_, pivots, _ = lax.linalg.lu(a)
    nd = _util.ndim_of(a)
    diag = products.diagonal(lu_, axis1=-2, axis2=-1)
    is_zero = red.any(lax.eq(diag, lax.full_like(diag, 0)), axis=-1)
    iota = lax.broadcasted_iota(dtypes.int32, _util.shape_of(pivots), nd - 2)
    parity = red.count_nonzero(lax.ne(pivots, iota), axis=-1)
    real = get_aval(lax.abs(diag)).dtype
    if dtypes.is_complex(dtype):
        sign = red.prod(lax.div(diag, lax.convert_element_type(lax.abs(diag), dtype)), axis=-1)
    else:
        sign = red.prod(lax.sign(diag), axis=-1)
    flip = lax.convert_element_type(lax.rem(parity, lax.full_like(parity, 2)), dtype)
    sign = lax.mul(sign, lax.sub(lax.full_like(flip, 1), lax.mul(lax.full_like(flip, 2),
                                                                   flip)))
    logdet = red.sum(lax.log(lax.abs(diag)), axis=-1)
    sign = lax.select(is_zero, lax.full_like(sign, 0), sign)
    logdet = lax.select(is_zero, lax.full_like(logdet, -np.inf), logdet)
    _ = real
    return sign, logdet


@custom_jvp
def _slogdet(a: Any) -> tuple[Any, Any]:
    return _slogdet_lu(a)


@_slogdet.defjvp
def _slogdet_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (g,) = primals, tangents
    sign, ans = _slogdet(x)
    ans_dot = _trace(solve(x, g), axis1=-1, axis2=-2)
    if dtypes.is_complex(get_aval(x).dtype):
        real = lax.convert_element_type(lax.real(ans_dot), get_aval(ans_dot).dtype)
        sign_dot = lax.mul(lax.sub(ans_dot, real), sign)
        ans_dot = lax.real(ans_dot)
    else:
        sign_dot = lax.full_like(sign, 0)
    return (sign, ans), (sign_dot, ans_dot)


def slogdet(a: ArrayLike, *, method: str | None = None) -> SlogdetResult:
    """``(sign, log|det|)`` of each square trailing matrix (``(0, -inf)``
    where singular)."""
    x = _matrix("linalg.slogdet", a, square=True)
    if method not in (None, "lu"):
        raise ValueError(f"lamina.numpy.linalg.slogdet: unsupported method {method!r}; "
                         "expected 'lu'")
    sign, logdet = _slogdet(x)
    return SlogdetResult(sign, logdet)


@custom_jvp
def _det(a: Any) -> Any:
    sign, logdet = _slogdet_lu(a)
    return lax.mul(sign, lax.convert_element_type(lax.exp(logdet), get_aval(sign).dtype))


@_det.defjvp
def _det_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (g,) = primals, tangents
    y = _det(x)
    z = _trace(solve(x, g), axis1=-1, axis2=-2)
    return y, lax.mul(y, z)


def det(a: ArrayLike) -> Array:
    """The determinant of each square trailing matrix: for 2x2 and 3x3 the
    expansion by products of entries, otherwise from the LU factorization (as
    JAX computes it); eagerly, one compiled program, as JAX's."""
    return _det_compiled(_matrix("linalg.det", a, square=True))


def _det_by_size(a: Any) -> Any:
    n = _util.shape_of(a)[-1]
    if n not in (2, 3):
        return _det(a)

    def entry(i: int, j: int) -> Any:
        nd = _util.ndim_of(a)
        row = lax.index_in_dim(a, i, nd - 2, keepdims=False)
        return lax.index_in_dim(row, j, nd - 2, keepdims=False)

    if n == 2:
        return lax.sub(lax.mul(entry(0, 0), entry(1, 1)), lax.mul(entry(0, 1), entry(1, 0)))

    def term(p: tuple[int, int, int]) -> Any:
        return lax.mul(lax.mul(entry(0, p[0]), entry(1, p[1])), entry(2, p[2]))

    # Leibniz's formula, summed in JAX's order: the even permutations, then the odd.
    out = term((0, 1, 2))
    out = lax.add(out, term((1, 2, 0)))
    out = lax.add(out, term((2, 0, 1)))
    out = lax.sub(out, term((2, 1, 0)))
    out = lax.sub(out, term((0, 2, 1)))
    return lax.sub(out, term((1, 0, 2)))


_det_compiled = tc_api.compiled_when_eager(_det_by_size)


def _default_rtol(x: Any) -> Any:
    m, n = _util.shape_of(x)[-2:]
    return float(np.finfo(get_aval(lax.abs(x)).dtype).eps) * max(m, n)


def matrix_rank(M: ArrayLike, rtol: ArrayLike | None = None, *, hermitian: bool = False,
                tol: ArrayLike | None = None) -> Array:
    """The number of singular values above a cutoff: ``rtol`` (or its older
    name ``tol``) itself, as JAX 0.10.2 uses it, else ``max(s) * max(M.shape)
    * eps``; a batched cutoff broadcasts against the batch. ``hermitian``:
    ``M`` is taken to be Hermitian, its singular values the absolute values
    of its eigenvalues (``eigvalsh``), as JAX's."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (a,) = _util.promote_dtypes_inexact("linalg.matrix_rank", M)
    if _util.ndim_of(a) < 2:
        return lax.convert_element_type(red.any(lax.ne(a, lax.full_like(a, 0))),
                                        dtypes.int32)
    s = lax.abs(eigvalsh(a)) if hermitian else svdvals(a)
    real = get_aval(s).dtype
    if rtol is None:  # JAX's order: max(s) * max(M.shape) * eps
        m, n = _util.shape_of(a)[-2:]
        cutoff = lax.mul(lax.mul(red.max(s, axis=-1), _util.convert(max(m, n), real)),
                         _util.convert(float(np.finfo(real).eps), real))
    else:
        cutoff = _util.convert(_util.operand("linalg.matrix_rank", rtol, "rtol"), real)
    cutoff = lax.expand_dims(cutoff, (_util.ndim_of(cutoff),))
    return red.sum(ufuncs.greater(s, cutoff), axis=-1)


def _pinv_impl(a: Any, rtol: Any) -> Any:
    u, s, vh = svd(a, full_matrices=False)
    real = get_aval(s).dtype
    smax = red.max(s, axis=-1, keepdims=True)
    cutoff = lax.mul(lax.full_like(smax, rtol), smax)
    cut = lax.broadcast_in_dim(cutoff, _util.shape_of(s),
                               tuple(range(_util.ndim_of(s))))
    keep = lax.gt(s, cut)
    safe = lax.select(keep, s, lax.full_like(s, 1))
    s_inv = lax.select(keep, lax.div(lax.full_like(s, 1), safe), lax.full_like(s, 0))
    dtype = get_aval(a).dtype
    nd = _util.ndim_of(u)
    scaled = lax.mul(_H(u), lax.broadcast_in_dim(lax.convert_element_type(s_inv, dtype),
                                                 _util.shape_of(_H(u)),
                                                 (*range(nd - 2), nd - 2)))
    _ = real
    return matmul(_H(vh), scaled)


@partial(custom_jvp, nondiff_argnums=(1,))
def _pinv(a: Any, rtol: float) -> Any:
    return _pinv_impl(a, rtol)


@_pinv.defjvp
def _pinv_jvp(rtol: float, primals: Any, tangents: Any) -> Any:
    (a,), (a_dot,) = primals, tangents
    p = _pinv(a, rtol)
    m, n = _util.shape_of(a)[-2:]
    dtype = get_aval(a).dtype
    shape_a = _util.shape_of(a)

    def eye(k: int, batch: tuple[int, ...]) -> Any:
        return lax.broadcast_in_dim(np.eye(k, dtype=dtype), (*batch, k, k),
                                    (len(batch), len(batch) + 1))

    batch = shape_a[:-2]
    p_dot = lax.neg(matmul(matmul(p, a_dot), p))
    p_dot = lax.add(p_dot, matmul(matmul(matmul(p, _H(p)), _H(a_dot)),
                                  lax.sub(eye(m, batch), matmul(a, p))))
    p_dot = lax.add(p_dot, matmul(matmul(lax.sub(eye(n, batch), matmul(p, a)), _H(a_dot)),
                                  matmul(_H(p), p)))
    return p, p_dot


def pinv(a: ArrayLike, rtol: ArrayLike | None = None, hermitian: bool = False, *,
         rcond: ArrayLike | None = None) -> Array:
    """The Moore-Penrose pseudo-inverse (singular values at or below
    ``rtol * max(s)`` treated as zero)."""
    x = _matrix("linalg.pinv", a)
    if rcond is not None:
        rtol = rcond
    r = float(10 * _default_rtol(x)) if rtol is None else float(rtol)
    return _pinv(x, r)


def lstsq(a: ArrayLike, b: ArrayLike, rcond: float | None = None, *,
          numpy_resid: bool = False) -> tuple[Array, Array, Array, Array]:
    """``(x, residuals, rank, s)``: the least-squares solution of ``a @ x = b``
    for a 2-D ``a`` and 1-D or 2-D ``b``, via the SVD; eagerly, one compiled
    program, as JAX's."""
    x = _matrix("linalg.lstsq", a)
    x, bb = _util.promote_dtypes_inexact("linalg.lstsq", x, b)
    if _util.ndim_of(x) != 2:
        raise ValueError(f"lamina.numpy.linalg.lstsq: argument 'a' must be 2-D, got shape "
                         f"{_util.shape_of(x)}")
    m, n = _util.shape_of(x)
    if _util.ndim_of(bb) not in (1, 2) or _util.shape_of(bb)[0] != m:
        raise ValueError(f"lamina.numpy.linalg.lstsq: argument 'b' of shape "
                         f"{_util.shape_of(bb)} does not match 'a' of shape {(m, n)}")
    if min(m, n) == 0:
        raise ValueError("lamina.numpy.linalg.lstsq: argument 'a' is empty")
    eps = float(np.finfo(get_aval(lax.abs(x)).dtype).eps)
    rc = eps * max(m, n) if rcond is None else float(rcond)
    # A negative rcond means machine precision (JAX's reading).
    sol, resid, rank, s = _lstsq_compiled(x, bb, eps if rc < 0 else rc, bool(numpy_resid))
    return sol, resid, rank, s


def _lstsq(x: Any, bb: Any, rc: float, numpy_resid: bool) -> tuple[Array, Array, Array, Array]:
    m, n = _util.shape_of(x)
    vec = _util.ndim_of(bb) == 1
    b2 = lax.reshape(bb, (m, 1)) if vec else bb
    dtype = get_aval(x).dtype
    u, s, vt = svd(x, full_matrices=False)
    k = min(m, n)
    s0 = lax.slice(s, (0,), (1,))
    mask = lax.bitwise_and(
        lax.gt(s, lax.full_like(s, 0)),
        lax.ge(s, lax.broadcast_in_dim(lax.mul(s0, lax.full_like(s0, rc)), (k,), (0,))))
    rank = red.sum(mask, dtype=dtypes.int32)
    safe = lax.select(mask, s, lax.full_like(s, 1))
    s_inv = lax.select(mask, lax.div(lax.full_like(s, 1), safe), lax.full_like(s, 0))
    # JAX asks for the highest precision in these products (on accelerators
    # the default may round through bfloat16).
    highest = Precision.HIGHEST
    uTb = matmul(_H(u), b2, precision=highest)
    scaled = lax.mul(lax.broadcast_in_dim(lax.convert_element_type(s_inv, dtype),
                                          _util.shape_of(uTb), (0,)), uTb)
    sol = matmul(_H(vt), scaled, precision=highest)
    # JAX squares the residual norms (not the plain sum of squares: other bits)
    resid_full = lax.square(norm(lax.sub(b2, matmul(x, sol, precision=highest)), axis=0))
    if numpy_resid:
        full_rank = lax.eq(rank, lax.full_like(rank, n))
        if m > n:
            resid = lax.select(lax.broadcast_in_dim(full_rank, _util.shape_of(resid_full), ()),
                               resid_full, lax.full_like(resid_full, 0))
        else:
            resid = lax.slice(resid_full, (0,), (0,))
    else:
        resid = resid_full
    if vec:
        sol = lax.reshape(sol, (n,))
    return sol, resid, rank, s


_lstsq_compiled = tc_api.compiled_when_eager(_lstsq, static_argnums=(2, 3))


def cond(x: ArrayLike, p: Any = None) -> Array:
    """The condition number of each trailing matrix in norm ``p`` (None: the
    2-norm ratio of the largest to the smallest singular value); eagerly, one
    compiled program, as JAX's."""
    return _cond_compiled(_matrix("linalg.cond", x), p)


def _cond(a: Any, p: Any) -> Array:
    if p is None or p == 2:
        s = svdvals(a)
        return lax.div(red.max(s, axis=-1), red.min(s, axis=-1))
    if p == -2:
        s = svdvals(a)
        return lax.div(red.min(s, axis=-1), red.max(s, axis=-1))
    r = lax.mul(norm(a, ord=p, axis=(-2, -1)), norm(inv(a), ord=p, axis=(-2, -1)))
    # infinite where singular (numpy's behaviour), as JAX
    return lax.select(lax.is_finite(r), r, lax.full_like(r, np.inf))


_cond_compiled = tc_api.compiled_when_eager(_cond, static_argnums=(1,))


def matrix_power(a: ArrayLike, n: int) -> Array:
    """``a`` raised to the integer power ``n`` (by repeated squaring; the
    inverse first for negative ``n``); eagerly, one compiled program, as JAX's."""
    (x,) = _util.promote_dtypes("linalg.matrix_power", a)
    shape = _util.shape_of(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"lamina.numpy.linalg.matrix_power: argument 'a' must be a (batch "
                         f"of) square matrices, got shape {shape}")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError(f"lamina.numpy.linalg.matrix_power: argument 'n' must be an integer, "
                        f"got {n!r}") from e
    return _matrix_power_compiled(x, n)


def _matrix_power(x: Any, n: int) -> Array:
    shape = _util.shape_of(x)
    if n == 0:
        eye = np.eye(shape[-1], dtype=get_aval(x).dtype)
        return lax.broadcast_in_dim(eye, shape, (len(shape) - 2, len(shape) - 1))
    if n < 0:
        x = inv(x)
        n = -n
    if n == 3:  # JAX's grouping for the cube: (a @ a) @ a
        return matmul(matmul(x, x), x)
    result: Any = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


_matrix_power_compiled = tc_api.compiled_when_eager(_matrix_power, static_argnums=(1,))


def multi_dot(arrays: Any, *, precision: Any = None) -> Array:
    """The product of ``arrays`` (the first and last may be 1-D), contracted in
    the cheapest order (``einsum``'s 'auto' path, as JAX's)."""
    arrs = [_util.operand("linalg.multi_dot", a, "arrays") for a in arrays]
    if len(arrs) < 2:
        raise ValueError("lamina.numpy.linalg.multi_dot: argument 'arrays' needs at least two "
                         "arrays")
    shapes = [_util.shape_of(a) for a in arrs]
    if (len(shapes[0]) not in (1, 2) or len(shapes[-1]) not in (1, 2)
            or any(len(sh) != 2 for sh in shapes[1:-1])):
        raise ValueError("lamina.numpy.linalg.multi_dot: argument 'arrays' must be 2-D but for "
                         f"the first and last (1-D or 2-D); got shapes {shapes}")
    if any(a[-1] != b[0] for a, b in zip(shapes[:-1], shapes[1:])):
        raise ValueError("lamina.numpy.linalg.multi_dot: the last axis of each array must "
                         f"match the first of the next; got shapes {shapes}")
    if len(arrs) >= len(string.ascii_letters):  # beyond einsum's letters: left to right
        out = arrs[0]
        for b in arrs[1:]:
            out = matmul(out, b, precision=precision)
        return out
    # Array i spans letters i and i + 1; a 1-D end keeps only its inner one.
    letters = string.ascii_letters
    terms = [letters[i:i + 2] for i in range(len(arrs))]
    if len(shapes[0]) == 1:
        terms[0] = terms[0][1:]
    if len(shapes[-1]) == 1:
        terms[-1] = terms[-1][:1]
    result = (letters[0] if len(shapes[0]) == 2 else "") + \
        (letters[len(arrs)] if len(shapes[-1]) == 2 else "")
    return einsum(f"{','.join(terms)}->{result}", *arrs, optimize="auto", precision=precision)


def tensorinv(a: ArrayLike, ind: int = 2) -> Array:
    """The inverse of ``a`` seen as a matrix from its first ``ind`` axes to the rest."""
    (x,) = _util.promote_dtypes_inexact("linalg.tensorinv", a)
    shape = _util.shape_of(x)
    if ind <= 0:
        raise ValueError(f"lamina.numpy.linalg.tensorinv: argument 'ind' must be positive, "
                         f"got {ind}")
    rows, cols = math.prod(shape[:ind]), math.prod(shape[ind:])
    if rows != cols:
        raise ValueError(f"lamina.numpy.linalg.tensorinv: prod(a.shape[:ind]) ({rows}) must "
                         f"equal prod(a.shape[ind:]) ({cols})")
    out = inv(lax.reshape(x, (rows, cols)))
    return lax.reshape(out, (*shape[ind:], *shape[:ind]))


def tensorsolve(a: ArrayLike, b: ArrayLike, axes: tuple[int, ...] | None = None) -> Array:
    """``x`` with ``tensordot(a, x, x.ndim) = b``."""
    x, bb = _util.promote_dtypes_inexact("linalg.tensorsolve", a, b)
    if axes is not None:
        nd = _util.ndim_of(x)
        axs = [i % nd for i in axes]
        rest = [i for i in range(nd) if i not in axs]
        x = lax.transpose(x, (*rest, *axs))
    shape = _util.shape_of(x)
    bn = _util.ndim_of(bb)
    out_shape = shape[bn:]
    rows = math.prod(shape[:bn])
    cols = math.prod(out_shape)
    if rows != cols:
        raise ValueError(f"lamina.numpy.linalg.tensorsolve: argument 'a' of shape {shape} is "
                         f"not square for 'b' of shape {_util.shape_of(bb)}")
    sol = solve(lax.reshape(x, (rows, cols)), lax.reshape(bb, (rows,)))
    return lax.reshape(sol, out_shape)
