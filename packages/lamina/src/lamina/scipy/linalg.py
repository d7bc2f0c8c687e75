"""``lamina.scipy.linalg``: JAX's ``jax.scipy.linalg`` on ``lax.linalg``.

``cho_factor``/``cho_solve``, ``solve_triangular``, ``lu``/``lu_factor``/
``lu_solve``, ``qr``, ``qr_multiply``, ``svd``, ``eigh``, ``eigh_tridiagonal``,
``cholesky``, ``hessenberg``, ``inv``, ``det``, ``solve``, ``block_diag`` and
``toeplitz`` here; the matrix functions (``expm``, ``expm_frechet``,
``sqrtm``, ``funm``, ``polar``, ``schur``, ``rsf2csf``, ``solve_sylvester``)
and the structured matrices (``circulant`` ... ``pascal``) in their own
modules. As in JAX, the factors are returned with
zeros outside their triangle (SciPy leaves whatever LAPACK wrote there), and
``overwrite_*``/``check_finite`` are accepted and ignored.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes
from lamina_tracing_core import lax
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax.helpers import operand_origin
from lamina_tracing_core.numpy import _util

from lamina.scipy._matrix_functions import (
    expm,
    expm_frechet,
    funm,
    polar,
    rsf2csf,
    schur,
    solve_sylvester,
    sqrtm,
)
from lamina.scipy._tridiagonal import eigh_tridiagonal
from lamina.scipy._special_matrices import (
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "det", "dft", "eigh", "eigh_tridiagonal", "expm",
           "expm_frechet", "fiedler", "fiedler_companion", "funm", "hadamard", "hankel",
           "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur",
           "solve", "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]

Array = Any


def _inexact(fun: str, *args: Any) -> list[Any]:
    return _util.promote_dtypes_inexact(f"scipy.linalg.{fun}", *args)


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(get_aval(x).shape)


def _check_matrix(fun: str, name: str, x: Any, square: bool = True) -> tuple[int, int]:
    shape = _shape(x)
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        what = "a (batch of) square matrices" if square else "at least two-dimensional"
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument {name!r} must be {what}, got "
                         f"shape {shape}{operand_origin(x)}")
    return shape[-2], shape[-1]


def _H(x: Any) -> Any:
    nd = len(_shape(x))
    t = lax.transpose(x, (*range(nd - 2), nd - 1, nd - 2))
    return lax.conj(t) if dtypes.is_complex(get_aval(x).dtype) else t


def _as_matrix_rhs(fun: str, a: Any, b: Any) -> tuple[Any, Any, bool]:
    """``(a, b, vector)``: ``b`` as (..., m, k), batch dims broadcast with
    ``a``'s; ``vector`` when ``b`` had one dim less than ``a``."""
    sa, sb = _shape(a), _shape(b)
    m = sa[-1]
    vector = len(sb) == len(sa) - 1
    if vector:
        b = lax.expand_dims(b, (len(sb),))
        sb = _shape(b)
    if len(sb) < 2 or sb[-2] != m:
        raise ValueError(f"lamina.scipy.linalg.{fun}: argument 'b' of shape {_shape(b)} does "
                         f"not match argument 'a' of shape {sa}")
    batch = _util.broadcast_shapes(f"scipy.linalg.{fun}", sa[:-2], sb[:-2])
    a = lax.broadcast_in_dim(a, (*batch, *sa[-2:]),
                             tuple(range(len(batch) - len(sa) + 2, len(batch) + 2)))
    b = lax.broadcast_in_dim(b, (*batch, *sb[-2:]),
                             tuple(range(len(batch) - len(sb) + 2, len(batch) + 2)))
    return a, b, vector


def _unvector(x: Any, vector: bool) -> Any:
    return lax.squeeze(x, (len(_shape(x)) - 1,)) if vector else x


_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False,
                     unit_diagonal: bool = False, overwrite_b: bool = False,
                     debug: Any = None, check_finite: bool = True) -> Array:
    """``x`` with ``op(a) @ x = b`` for triangular ``a`` (``trans`` 0/'N',
    1/'T' transpose, 2/'C' conjugate transpose)."""
    del overwrite_b, debug, check_finite
    if trans not in _TRANS:
        raise ValueError(f"lamina.scipy.linalg.solve_triangular: invalid argument 'trans' "
                         f"{trans!r}; expected 0, 1, 2, 'N', 'T' or 'C'")
    transpose_a, conjugate_a = _TRANS[trans]
    a, b = _inexact("solve_triangular", a, b)
    _check_matrix("solve_triangular", "a", a)
    a, b, vector = _as_matrix_rhs("solve_triangular", a, b)
    out = lax.linalg.triangular_solve(a, b, left_side=True, lower=lower,
                                      transpose_a=transpose_a, conjugate_a=conjugate_a,
                                      unit_diagonal=unit_diagonal)
    return _unvector(out, vector)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> tuple[Array, bool]:
    """``(c, lower)``: the Cholesky factor (lower, or upper ``c = L^H``) and
    which triangle it is, for ``cho_solve``."""
    del overwrite_a, check_finite
    (a,) = _inexact("cho_factor", a)
    _check_matrix("cho_factor", "a", a)
    L = lax.linalg.cholesky(a)
    return (L if lower else _H(L)), bool(lower)


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False,
              check_finite: bool = True) -> Array:
    """``x`` with ``a @ x = b`` from ``cho_factor(a)``."""
    del overwrite_b, check_finite
    try:
        c, lower = c_and_lower
    except (TypeError, ValueError) as e:
        raise TypeError("lamina.scipy.linalg.cho_solve: argument 'c_and_lower' must be the "
                        "pair (c, lower) that cho_factor returns") from e
    c, b = _inexact("cho_solve", c, b)
    _check_matrix("cho_solve", "c", c)
    c, b, vector = _as_matrix_rhs("cho_solve", c, b)
    tri = lax.linalg.triangular_solve
    b = tri(c, b, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    b = tri(c, b, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
    return _unvector(b, vector)


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True
              ) -> tuple[Array, Array]:
    """``(lu, piv)``: the packed LU factors and LAPACK's (0-based) pivots."""
    del overwrite_a, check_finite
    (a,) = _inexact("lu_factor", a)
    _check_matrix("lu_factor", "a", a, square=False)
    lu_, pivots, _ = lax.linalg.lu(a)
    return lu_, pivots


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0,
             overwrite_b: bool = False, check_finite: bool = True) -> Array:
    """``x`` with ``op(a) @ x = b`` from ``lu_factor(a)`` (``trans`` 0, 1
    transpose, 2 conjugate transpose)."""
    del overwrite_b, check_finite
    try:
        lu_, piv = lu_and_piv
    except (TypeError, ValueError) as e:
        raise TypeError("lamina.scipy.linalg.lu_solve: argument 'lu_and_piv' must be the "
                        "pair (lu, piv) that lu_factor returns") from e
    if trans not in (0, 1, 2):
        raise ValueError(f"lamina.scipy.linalg.lu_solve: invalid argument 'trans' {trans!r}; "
                         "expected 0, 1 or 2")
    lu_, b = _inexact("lu_solve", lu_, b)
    m, _ = _check_matrix("lu_solve", "lu", lu_)
    perm = lax.linalg.lu_pivots_to_permutation(piv, m)
    lu_b, b2, vector = _as_matrix_rhs("lu_solve", lu_, b)
    batch = _shape(lu_b)[:-2]
    perm = lax.broadcast_in_dim(perm, (*batch, m),
                                tuple(range(len(batch) + 1 - len(_shape(perm)), len(batch) + 1)))
    x = jnp.linalg._lu_solve(lu_b, perm, b2, trans)
    return _unvector(x, vector)


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False,
       check_finite: bool = True) -> tuple[Array, ...]:
    """``(p, l, u)`` with ``a = p @ l @ u`` (``(p @ l, u)`` with ``permute_l``)."""
    del overwrite_a, check_finite
    (a,) = _inexact("lu", a)
    m, n = _check_matrix("lu", "a", a, square=False)
    lu_, _, perm = lax.linalg.lu(a)
    k = min(m, n)
    dtype = get_aval(a).dtype
    shape = _shape(a)
    nd = len(shape)
    batch = shape[:-2]
    l_part = lax.slice(lu_, (0,) * nd, (*batch, m, k))
    eye_mk = lax.broadcast_in_dim(np.eye(m, k, dtype=dtype), (*batch, m, k), (nd - 2, nd - 1))
    low = jnp.add(jnp.tril(l_part, -1), eye_mk)
    up = jnp.triu(lax.slice(lu_, (0,) * nd, (*batch, k, n)))
    # p[perm[i], i] = 1: row i of l @ u is row perm[i] of a.
    iota = lax.broadcasted_iota(dtypes.int32, (*batch, m, m), nd - 2)
    p = lax.convert_element_type(
        lax.eq(iota, lax.broadcast_in_dim(perm, (*batch, m, m), (*range(nd - 2), nd - 1))),
        dtype)
    if permute_l:
        return jnp.matmul(p, low), up
    return p, low, up


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full",
       pivoting: bool = False, check_finite: bool = True) -> tuple[Array, ...]:
    """``(q, r)`` (``mode`` 'full' or 'economic'), or ``(r,)`` for 'r'."""
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise ValueError("lamina.scipy.linalg.qr: pivoting=True is not supported")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"lamina.scipy.linalg.qr: unsupported mode {mode!r}; expected "
                         "'full', 'economic' or 'r'")
    (a,) = _inexact("qr", a)
    _check_matrix("qr", "a", a, square=False)
    q, r = lax.linalg.qr(a, full_matrices=mode == "full")
    if mode == "r":
        return (r,)
    return q, r


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
        overwrite_a: bool = False, check_finite: bool = True,
        lapack_driver: str = "gesdd") -> Any:
    """``(u, s, vh)`` with ``a = u @ diag(s) @ vh``, or ``s``."""
    del overwrite_a, check_finite, lapack_driver
    (a,) = _inexact("svd", a)
    _check_matrix("svd", "a", a, square=False)
    out = lax.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False,
         overwrite_a: bool = False, overwrite_b: bool = False, type: int = 1,  # noqa: A002
         check_finite: bool = True, subset_by_index: Any = None, subset_by_value: Any = None,
         driver: Any = None) -> Any:
    """``(w, v)``: ascending eigenvalues and eigenvectors of the Hermitian
    part ``(a + a^H) / 2`` of ``a`` (only ``w`` with ``eigvals_only``), as
    JAX computes them; the generalized problem (``b``) is not supported."""
    del overwrite_a, overwrite_b, check_finite, driver
    if b is not None:
        raise ValueError("lamina.scipy.linalg.eigh: argument 'b' (the generalized problem) "
                         "is not supported")
    if type != 1 or subset_by_value is not None:
        raise ValueError("lamina.scipy.linalg.eigh: only type=1 without subset_by_value is "
                         "supported")
    (a,) = _inexact("eigh", a)
    _check_matrix("eigh", "a", a)
    # As JAX does, the input is symmetrized ((a + a^H) / 2) before the solver
    # reads its ``lower`` triangle, which is also what makes its derivative
    # the symmetric one.
    v, w = lax.linalg.eigh(a, lower=lower, subset_by_index=subset_by_index)
    return w if eigvals_only else (w, v)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The inverse of each square trailing matrix."""
    del overwrite_a, check_finite
    return jnp.linalg.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Array:
    """The determinant of each square trailing matrix."""
    del overwrite_a, check_finite
    return jnp.linalg.det(a)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False,
          overwrite_b: bool = False, debug: bool = False, check_finite: bool = True,
          assume_a: str = "gen") -> Array:
    """``x`` with ``a @ x = b``; ``assume_a='pos'`` solves by Cholesky
    (reading the ``lower`` or upper triangle)."""
    del overwrite_a, overwrite_b, debug, check_finite
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"lamina.scipy.linalg.solve: unsupported assume_a {assume_a!r}; "
                         "expected 'gen', 'sym', 'her' or 'pos'")
    a, b = _inexact("solve", a, b)
    _check_matrix("solve", "a", a)
    if assume_a != "pos":
        a2, b2, vector = _as_matrix_rhs("solve", a, b)
        return _unvector(jnp.linalg.solve(a2, b2), vector)
    full = jnp.add(jnp.tril(a), _H(jnp.tril(a, -1))) if lower else \
        jnp.add(jnp.triu(a), _H(jnp.triu(a, 1)))
    return cho_solve(cho_factor(full, lower=True), b)


def block_diag(*arrs: Any) -> Array:
    """The block-diagonal matrix of ``arrs`` (scalars and 1-D arrays are
    1 x n blocks)."""
    if not arrs:
        return jnp.zeros((1, 0))
    blocks = [jnp.atleast_2d(jnp.asarray(x)) for x in arrs]
    for i, blk in enumerate(blocks):
        if len(_shape(blk)) != 2:
            raise ValueError(f"lamina.scipy.linalg.block_diag: argument {i} has more than two "
                             f"dimensions (shape {_shape(blk)})")
    dtype = jnp.result_type(*blocks)
    total_cols = sum(_shape(blk)[1] for blk in blocks)
    rows = []
    col = 0
    for blk in blocks:
        r, c = _shape(blk)
        rows.append(lax.pad(lax.convert_element_type(blk, dtype), np.array(0, dtype),
                            [(0, 0, 0), (col, total_cols - col - c, 0)]))
        col += c
    return lax.concatenate(rows, 0)


def toeplitz(c: Any, r: Any = None) -> Array:
    """The Toeplitz matrix with first column ``c`` and first row ``r``
    (``r`` defaults to ``conj(c)``; ``r[0]`` is ignored)."""
    if r is None:
        (c,) = _util.promote_dtypes("scipy.linalg.toeplitz", c)
        r = jnp.conjugate(c)
    else:
        c, r = _util.promote_dtypes("scipy.linalg.toeplitz", c, r)
    c = jnp.ravel(c)
    r = jnp.ravel(r)
    nc, nr = _shape(c)[0], _shape(r)[0]
    # values: reversed c followed by r[1:]; entry (i, j) is values[nc - 1 - i + j].
    values = lax.concatenate([lax.rev(c, (0,)), lax.slice(r, (1,), (nr,))], 0)
    i = lax.broadcasted_iota(dtypes.int32, (nc, nr), 0)
    j = lax.broadcasted_iota(dtypes.int32, (nc, nr), 1)
    idx = lax.add(lax.sub(j, i), lax.full((nc, nr), operator.index(nc - 1), dtypes.int32))
    return jnp.take(values, idx)


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Array:
    """The Cholesky factor of each Hermitian positive-definite trailing
    matrix: upper ``U`` (``a = U^H U``) unless ``lower``; NaNs where ``a``
    is not positive definite."""
    del overwrite_a, check_finite
    (a,) = _inexact("cholesky", a)
    _check_matrix("cholesky", "a", a)
    # the triangle named by ``lower`` is read; no symmetrization (JAX's)
    factor = lax.linalg.cholesky(a if lower else _H(a), symmetrize_input=False)
    return factor if lower else _H(factor)


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> Array | tuple[Array, Array]:
    """The upper Hessenberg form ``h`` of a square matrix, with the unitary
    ``q`` (``a = q @ h @ q^H``) under ``calc_q`` (LAPACK's ``gehrd``; CPU)."""
    del overwrite_a, check_finite
    (a,) = _inexact("hessenberg", a)
    n, _ = _check_matrix("hessenberg", "a", a)
    packed, taus = lax.linalg.hessenberg(a)
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    # Reflector i starts at row i + 1: drop the first row and the last column.
    q_tail = lax.linalg.householder_product(packed[..., 1:, :-1], taus)
    nd = len(_shape(a))
    q = lax.pad(q_tail, np.array(0, get_aval(q_tail).dtype),
                [(0, 0, 0)] * (nd - 2) + [(1, 0, 0), (1, 0, 0)])
    first = (lax.broadcasted_iota(dtypes.int32, _shape(q), nd - 2) == 0) & \
        (lax.broadcasted_iota(dtypes.int32, _shape(q), nd - 1) == 0)
    return h, jnp.where(first, jnp.ones_like(q), q) if n else q


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False,
                conjugate: bool = False, overwrite_a: bool = False,
                overwrite_c: bool = False) -> tuple[Array, Array]:
    """``(c @ q, r)`` (``mode='right'``, ``c`` with ``m`` columns) or
    ``(q @ c, r)`` (``'left'``, ``c`` with ``min(m, n)`` rows) for the
    economic QR decomposition ``a = q @ r`` of an ``m x n`` ``a`` (``q``
    conjugated under ``conjugate``); a 1-D ``c`` is a row (right) or a
    column (left)."""
    del overwrite_a, overwrite_c
    if mode not in ("left", "right"):
        raise ValueError(f"lamina.scipy.linalg.qr_multiply: argument 'mode' must be 'left' or "
                         f"'right', got {mode!r}")
    if pivoting:
        raise ValueError("lamina.scipy.linalg.qr_multiply: pivoting=True is not supported")
    a, c = _inexact("qr_multiply", a, c)
    _check_matrix("qr_multiply", "a", a, square=False)
    q, r = lax.linalg.qr(a, full_matrices=False)
    q = jnp.conj(q) if conjugate else q
    vector = len(_shape(c)) == 1
    c2 = (c[None, :] if mode == "right" else c[:, None]) if vector else c
    m, k = _shape(q)
    if (_shape(c2)[-1] if mode == "right" else _shape(c2)[0]) != (m if mode == "right" else k):
        raise ValueError(f"lamina.scipy.linalg.qr_multiply: argument 'c' of shape {_shape(c)} "
                         f"does not match q of shape {_shape(q)} with mode={mode!r}")
    out = jnp.matmul(c2, q) if mode == "right" else jnp.matmul(q, c2)
    if vector:
        out = out[0] if mode == "right" else out[:, 0]
    return out, r
