"""Matrix decompositions, JAX's ``lax.linalg``: ``cholesky``,
``triangular_solve``, ``lu`` (with ``lu_pivots_to_permutation``), ``eig``
(CPU), ``eigh``,
``qr`` (``geqrf`` + ``householder_product``) and ``svd``.

Every primitive works on the trailing two axes of its operands; leading axes
are batch axes (batching moves the vmapped axis to the front). Singular or
non-positive-definite input gives NaNs where LAPACK reports failure, as JAX
does, never an exception. The JVPs are the ones JAX defines; the
decompositions are differentiated through them, ``triangular_solve`` is
linear (and transposable) in its right-hand side.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.lax import common, helpers, indexing
from lamina_tracing_core.lax import contractions as ct
from lamina_tracing_core.lax import convert as cv
from lamina_tracing_core.lax import elementwise as el
from lamina_tracing_core.lax import reductions as red
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules

Array = Any

# --- small matrix helpers (trailing two axes) -------------------------------------


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(get_aval(x).shape)


def _dtype(x: Any) -> np.dtype[Any]:
    return get_aval(x).dtype


def _is_complex(x: Any) -> bool:
    return _dtype(x) in common.COMPLEX


def _T(x: Any) -> Any:
    """``x`` with its last two axes swapped."""
    nd = len(_shape(x))
    return st.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def _H(x: Any) -> Any:
    """The conjugate transpose of the trailing matrices of ``x``."""
    return el.conj(_T(x)) if _is_complex(x) else _T(x)


def _conj(x: Any) -> Any:
    return el.conj(x) if _is_complex(x) else x


def _mm(a: Any, b: Any) -> Any:
    """Batched ``a @ b`` over equal leading axes, at HIGHEST precision."""
    nd = len(_shape(a))
    batch = tuple(range(nd - 2))
    return ct.dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)),
                          precision=(ct.Precision.HIGHEST, ct.Precision.HIGHEST))


def _scalar(x: Any, value: Any) -> Any:
    """``value`` broadcast to ``x``'s shape and dtype."""
    return st.full(_shape(x), np.array(value, _dtype(x)), _dtype(x))


def _band_mask(shape: tuple[int, ...], k: int, lower: bool) -> Any:
    rows = st.broadcasted_iota(dtypes.int32, shape, len(shape) - 2)
    cols = st.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    shifted = el.add(rows, st.full(shape, np.int32(k), dtypes.int32))
    return el.ge(shifted, cols) if lower else el.le(shifted, cols)


def _tril(x: Any, k: int = 0) -> Any:
    """The entries of ``x`` on and below diagonal ``k``, zeros elsewhere."""
    return el.select(_band_mask(_shape(x), k, True), x, _scalar(x, 0))


def _triu(x: Any, k: int = 0) -> Any:
    """The entries of ``x`` on and above diagonal ``k``, zeros elsewhere."""
    return el.select(_band_mask(_shape(x), -k, False), x, _scalar(x, 0))


def _eye(shape: tuple[int, ...], dtype: Any) -> Any:
    rows = st.broadcasted_iota(dtypes.int32, shape, len(shape) - 2)
    cols = st.broadcasted_iota(dtypes.int32, shape, len(shape) - 1)
    return cv.convert_element_type(el.eq(rows, cols), dtype)


def _diag(x: Any) -> Any:
    """The main diagonal of each trailing matrix (``(..., min(m, n))``)."""
    shape = _shape(x)
    m, n = shape[-2:]
    k = min(m, n)
    sq = st.slice(x, (0,) * len(shape), (*shape[:-2], k, k))
    masked = el.mul(sq, _eye(_shape(sq), _dtype(x)))
    return red.reduce_sum(masked, (len(shape) - 1,))


def _broadcast_vec(v: Any, shape: tuple[int, ...], axis: int) -> Any:
    """A ``(..., k)`` array broadcast to the matrix ``shape`` along ``axis``
    (-1: ``v[..., None, :]``, -2: ``v[..., :, None]``)."""
    nd = len(shape)
    keep = tuple(range(nd - 2)) + ((nd - 1,) if axis == -1 else (nd - 2,))
    return st.broadcast_in_dim(v, shape, keep)


def _check_matrix(name: str, arg: str, x: Any, *, square: bool = False,
                  inexact: bool = True) -> tuple[int, int]:
    """Checks ``x`` (a value, or the aval of one) is a (batch of) matrices,
    square or inexact as asked; errors name ``name``, ``arg`` and, for a
    traced value, the user's arguments it comes from."""
    aval = x if isinstance(x, ShapedArray) else get_aval(x)
    where = "" if isinstance(x, ShapedArray) else helpers.operand_origin(x)
    if aval.ndim < 2:
        raise ValueError(f"{name}: argument {arg!r} must have at least two dimensions, "
                         f"got shape {aval.shape}{where}")
    m, n = aval.shape[-2:]
    if square and m != n:
        raise ValueError(f"{name}: argument {arg!r} must be a batch of square matrices, "
                         f"got shape {aval.shape}{where}")
    if inexact and aval.dtype not in common.INEXACT:
        raise TypeError(f"{name}: argument {arg!r} must have a floating or complex dtype, "
                        f"got {aval.dtype}{where}")
    return m, n


def _front_batch(prim: Primitive, args: Sequence[Any], dims: Sequence[int | None]) -> list[Any]:
    size = helpers.batch_size(args, dims)
    return [helpers.bdim_at_front(a, d, size) for a, d in zip(args, dims)]


def _unary_batch(prim: Primitive) -> None:
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> Any:
        (x,) = _front_batch(prim, args, dims)
        out = prim.bind(x, **params)
        if prim.multiple_results:
            return out, [0] * len(out)
        return out, 0

    batching_rules[prim] = rule


# --- algorithm choices -------------------------------------------------------------


class EigImplementation(enum.Enum):
    """Which library computes ``eig`` on a GPU; on CPU it is always LAPACK."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """The ``eigh`` algorithm: ``QR`` (LAPACK/cuSOLVER ``syevd``, the CPU and
    GPU default), ``JACOBI`` (cuSOLVER ``syevj``, GPU), ``QDWH`` (TPU)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


class SvdAlgorithm(enum.Enum):
    """The ``svd`` algorithm: on CPU ``DEFAULT``/``DIVIDE_AND_CONQUER`` are
    LAPACK ``gesdd`` and ``QR`` is ``gesvd``; on GPU ``DEFAULT`` is Jacobi
    (``gesvdj``) up to 1024x1024 and ``gesvd`` beyond."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


# --- cholesky ----------------------------------------------------------------------

cholesky_p = Primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(x: ShapedArray) -> ShapedArray:
    _check_matrix("cholesky", "x", x, square=True)
    return ShapedArray(x.shape, x.dtype)


def cholesky(x: ArrayLike, *, symmetrize_input: bool = True) -> Array:
    """The lower Cholesky factor ``L`` (``x = L @ L^H``) of each trailing matrix;
    NaNs where ``x`` is not positive definite. With ``symmetrize_input``,
    ``(x + x^H) / 2`` is factored."""
    _check_matrix("cholesky", "x", x, square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return _tril(cholesky_p.bind(x))


def symmetrize(x: ArrayLike) -> Array:
    """``(x + x^H) / 2``."""
    return el.div(el.add(x, _H(x)), _scalar(x, 2))


def _cholesky_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (g,) = primals, tangents
    L = _tril(cholesky_p.bind(x))
    if helpers.is_zero(g):
        return L, helpers.zero_from_primal(L)
    # phi(L^-1 g L^-H): the lower triangle with half the diagonal. g is taken
    # as it is, as JAX does: cholesky(symmetrize_input=True) has symmetrized
    # it already, and scipy's cholesky (symmetrize_input=False) must not.
    tmp = triangular_solve(L, g, left_side=False, transpose_a=True, conjugate_a=True,
                           lower=True)
    inner = triangular_solve(L, tmp, left_side=True, transpose_a=False, lower=True)
    half = el.mul(_eye(_shape(inner), _dtype(inner)), _scalar(inner, 0.5))
    phi = el.mul(_tril(inner), el.sub(_scalar(inner, 1), half))
    return L, _mm(L, phi)


jvp_rules[cholesky_p] = _cholesky_jvp
_unary_batch(cholesky_p)

# --- triangular_solve ----------------------------------------------------------------

triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a: ShapedArray, b: ShapedArray, *, left_side: bool,
                                    lower: bool, transpose_a: bool, conjugate_a: bool,
                                    unit_diagonal: bool) -> ShapedArray:
    m, _ = _check_matrix("triangular_solve", "a", a, square=True)
    _check_matrix("triangular_solve", "b", b)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: arguments 'a' and 'b' must have the same dtype, "
                        f"got {a.dtype} and {b.dtype}")
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"triangular_solve: arguments 'a' and 'b' must have the same batch "
                         f"dimensions, got shapes {a.shape} and {b.shape}")
    common_dim = b.shape[-2] if left_side else b.shape[-1]
    if common_dim != m:
        side = "b.shape[-2]" if left_side else "b.shape[-1]"
        raise ValueError(f"triangular_solve: {side} must equal a.shape[-1] ({m}) with "
                         f"left_side={left_side}, got shapes a {a.shape} and b {b.shape}")
    return ShapedArray(b.shape, b.dtype)


def triangular_solve(a: ArrayLike, b: ArrayLike, *, left_side: bool = False,
                     lower: bool = False, transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False) -> Array:
    """Solves ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for ``x``,
    ``a`` triangular (``lower`` or upper; only that triangle is read), ``op``
    transposing and/or conjugating it as asked. A ``b`` of one dimension
    less than ``a`` is a vector (a column with ``left_side``, else a row);
    batch dims of ``a`` and ``b`` must agree."""
    a_aval = get_aval(a)
    conj = bool(conjugate_a) and a_aval.dtype in common.COMPLEX
    vector = len(_shape(b)) == a_aval.ndim - 1
    if vector:
        b = st.expand_dims(b, (len(_shape(b)) if left_side else len(_shape(b)) - 1,))
    out = triangular_solve_p.bind(
        a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
        conjugate_a=conj, unit_diagonal=bool(unit_diagonal))
    if vector:
        nd = len(_shape(out))
        out = st.squeeze(out, (nd - 1,) if left_side else (nd - 2,))
    return out


def _triangular_solve_jvp(primals: Any, tangents: Any, *, left_side: bool, lower: bool,
                          transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Any:
    a, b = primals
    ga, gb = tangents
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    ans = triangular_solve_p.bind(a, b, **params)
    terms = []
    if not helpers.is_zero(gb):
        terms.append(triangular_solve_p.bind(a, gb, **params))
    if not helpers.is_zero(ga):
        m, n = _shape(b)[-2:]
        k = 1 if unit_diagonal else 0
        g = _tril(ga, -k) if lower else _triu(ga, k)
        g = el.neg(g)
        g = _T(g) if transpose_a else g
        g = el.conj(g) if conjugate_a else g

        def a_inverse(rhs: Any) -> Any:
            return triangular_solve_p.bind(a, rhs, **params)

        if left_side:
            terms.append(a_inverse(_mm(g, ans)) if m > n else _mm(a_inverse(g), ans))
        else:
            terms.append(a_inverse(_mm(ans, g)) if m < n else _mm(ans, a_inverse(g)))
    if not terms:
        return ans, helpers.zero_from_primal(ans)
    out = terms[0]
    for t in terms[1:]:
        out = el.add(out, t)
    return ans, out


def _triangular_solve_transpose(cot: Any, a: Any, b: Any, *, left_side: bool, lower: bool,
                                transpose_a: bool, conjugate_a: bool,
                                unit_diagonal: bool) -> list[Any]:
    if helpers.is_undefined_primal(a):
        raise ValueError("triangular_solve is linear only in its right-hand side 'b'; it "
                         "cannot be transposed with respect to 'a'")
    if type(cot) is helpers.Zero:
        return [None, helpers.Zero(b.aval)]
    ct_b = triangular_solve_p.bind(a, cot, left_side=left_side, lower=lower,
                                   transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                   unit_diagonal=unit_diagonal)
    return [None, ct_b]


def _triangular_solve_batch(args: Sequence[Any], dims: Sequence[int | None],
                            **params: Any) -> Any:
    a, b = _front_batch(triangular_solve_p, args, dims)
    return triangular_solve_p.bind(a, b, **params), 0


jvp_rules[triangular_solve_p] = _triangular_solve_jvp
transpose_rules[triangular_solve_p] = _triangular_solve_transpose
batching_rules[triangular_solve_p] = _triangular_solve_batch

# --- LU ----------------------------------------------------------------------------------

lu_p = Primitive("lu", multiple_results=True)


@lu_p.def_abstract_eval
def _lu_abstract_eval(x: ShapedArray) -> list[ShapedArray]:
    m, n = _check_matrix("lu", "x", x)
    batch = tuple(x.shape[:-2])
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*batch, min(m, n)), dtypes.int32),
            ShapedArray((*batch, m), dtypes.int32)]


def lu(x: ArrayLike) -> tuple[Array, Array, Array]:
    """``(lu, pivots, permutation)``: the LU decomposition with partial
    pivoting, ``x[..., permutation, :] = L @ U`` with ``L`` unit lower
    (strictly lower part of ``lu``) and ``U`` upper (upper part of ``lu``);
    ``pivots`` are LAPACK's row swaps (0-based). NaNs where the
    factorization fails (not where it is merely singular, as LAPACK)."""
    _check_matrix("lu", "x", x)
    out = lu_p.bind(x)
    return out[0], out[1], out[2]


def _lu_jvp(primals: Any, tangents: Any) -> Any:
    (a,), (g,) = primals, tangents
    lu_, pivots, perm = lu_p.bind(a)
    zeros = [helpers.zero_from_primal(pivots), helpers.zero_from_primal(perm)]
    if helpers.is_zero(g):
        return [lu_, pivots, perm], [helpers.zero_from_primal(lu_), *zeros]
    shape = _shape(a)
    nd = len(shape)
    m, n = shape[-2:]
    k = min(m, n)
    dtype = _dtype(a)
    batch = shape[:-2]
    x = indexing.take_along_axis(g, st.broadcast_in_dim(perm, shape, (*range(nd - 2), nd - 2)),
                                 nd - 2)
    zero = np.array(0, dtype)
    l_pad = [(0, 0, 0)] * nd
    l_pad[-1] = (0, m - k, 0)
    lk = st.slice(lu_, (0,) * nd, (*batch, m, k))
    l_ = el.add(st.pad(_tril(lk, -1), zero, l_pad), _eye((*batch, m, m), dtype))
    u_pad = [(0, 0, 0)] * nd
    u_pad[-2] = (0, n - k, 0)
    uk = st.slice(lu_, (0,) * nd, (*batch, k, n))
    u_eye = st.pad(_eye((*batch, n - k, n - k), dtype), zero,
                   [(0, 0, 0)] * (nd - 2) + [(k, 0, 0), (k, 0, 0)])
    u_ = el.add(st.pad(_triu(uk), zero, u_pad), u_eye)
    la = triangular_solve(l_, x, left_side=True, transpose_a=False, lower=True,
                          unit_diagonal=True)
    lau = triangular_solve(u_, la, left_side=False, transpose_a=False, lower=False)
    l_dot = _mm(l_, _tril(lau, -1))
    u_dot = _mm(_triu(lau), u_)
    lu_dot = el.add(l_dot, u_dot)
    if (m, n) != _shape(lu_dot)[-2:]:
        lu_dot = st.slice(lu_dot, (0,) * nd, shape)
    return [lu_, pivots, perm], [lu_dot, *zeros]


jvp_rules[lu_p] = _lu_jvp
_unary_batch(lu_p)

lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation")


@lu_pivots_to_permutation_p.def_abstract_eval
def _pivots_abstract_eval(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    if pivots.ndim < 1 or pivots.dtype != dtypes.int32:
        raise TypeError(f"lu_pivots_to_permutation: argument 'pivots' must be an int32 array "
                        f"of rank >= 1, got {pivots.dtype}{list(pivots.shape)}")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"lu_pivots_to_permutation: permutation_size ({permutation_size}) "
                         f"must be at least pivots.shape[-1] ({pivots.shape[-1]})")
    return ShapedArray((*pivots.shape[:-1], permutation_size), dtypes.int32)


def lu_pivots_to_permutation(pivots: ArrayLike, permutation_size: int) -> Array:
    """The row permutation that LAPACK's sequence of swaps ``pivots``
    (row ``i`` swapped with row ``pivots[i]``) applies to ``permutation_size``
    rows."""
    return lu_pivots_to_permutation_p.bind(
        pivots, permutation_size=operator.index(permutation_size))


helpers.defjvp_zero(lu_pivots_to_permutation_p)
_unary_batch(lu_pivots_to_permutation_p)

# --- eigh ----------------------------------------------------------------------------------

eigh_p = Primitive("eigh", multiple_results=True)


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(x: ShapedArray, *, lower: bool, sort_eigenvalues: bool,
                        subset_by_index: tuple[int, int] | None) -> list[ShapedArray]:
    n, _ = _check_matrix("eigh", "x", x, square=True)
    if subset_by_index is not None and tuple(subset_by_index) != (0, n):
        raise ValueError("eigh: subset_by_index other than (0, n) is not supported on CPU, "
                         f"got {subset_by_index}")
    real = common.real_dtype(x.dtype)
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*x.shape[:-1],), real)]


def eigh(x: ArrayLike, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True,
         subset_by_index: tuple[int, int] | None = None,
         implementation: EighImplementation | None = None) -> tuple[Array, Array]:
    """``(v, w)``: eigenvectors (columns of ``v``) and ascending eigenvalues of
    each Hermitian trailing matrix; only the ``lower`` (or upper) triangle is
    read unless ``symmetrize_input``. ``implementation`` must be ``None`` or
    ``EighImplementation.QR`` (LAPACK/cuSOLVER ``syevd``)."""
    _check_matrix("eigh", "x", x, square=True)
    if implementation not in (None, EighImplementation.QR):
        raise ValueError(f"eigh: implementation={implementation} is not supported; lamina "
                         "uses syevd (implementation=None or EighImplementation.QR)")
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues),
                       subset_by_index=None if subset_by_index is None
                       else tuple(int(i) for i in subset_by_index))
    return v, w


def _eigh_jvp(primals: Any, tangents: Any, *, lower: bool, sort_eigenvalues: bool,
              subset_by_index: Any) -> Any:
    (a,), (g,) = primals, tangents
    v, w_real = eigh_p.bind(symmetrize(a), lower=lower, sort_eigenvalues=sort_eigenvalues,
                            subset_by_index=subset_by_index)
    if helpers.is_zero(g):
        return [v, w_real], [helpers.zero_from_primal(v), helpers.zero_from_primal(w_real)]
    dtype = _dtype(a)
    shape = _shape(a)
    w = cv.convert_element_type(w_real, dtype)
    # F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it.
    eye = _eye(shape, dtype)
    diff = el.sub(_broadcast_vec(w, shape, -1), _broadcast_vec(w, shape, -2))
    F = el.sub(el.div(_scalar(diff, 1), el.add(eye, diff)), eye)
    vdag_adot_v = _mm(_mm(_H(v), g), v)
    dv = _mm(v, el.mul(F, vdag_adot_v))
    dw = el.real(_diag(vdag_adot_v)) if dtype in common.COMPLEX else _diag(vdag_adot_v)
    return [v, w_real], [dv, dw]


jvp_rules[eigh_p] = _eigh_jvp
_unary_batch(eigh_p)

# --- eig (general, CPU) -----------------------------------------------------------------

eig_p = Primitive("eig", multiple_results=True)


@eig_p.def_abstract_eval
def _eig_abstract_eval(x: ShapedArray, *, compute_left_eigenvectors: bool,
                       compute_right_eigenvectors: bool,
                       enable_eigvec_derivs: bool) -> list[ShapedArray]:
    _check_matrix("eig", "x", x, square=True)
    cdtype = common.complex_dtype(x.dtype) if x.dtype in common.FLOAT else x.dtype
    outs = [ShapedArray(tuple(x.shape[:-1]), cdtype)]
    if compute_left_eigenvectors:
        outs.append(ShapedArray(x.shape, cdtype))
    if compute_right_eigenvectors:
        outs.append(ShapedArray(x.shape, cdtype))
    return outs


def eig(x: ArrayLike, *, compute_left_eigenvectors: bool = True,
        compute_right_eigenvectors: bool = True, enable_eigvec_derivs: bool = False,
        implementation: EigImplementation | None = None,
        use_magma: bool | None = None) -> list[Array]:
    """``[w, vl, vr]`` (those asked for): the complex eigenvalues and left/right
    eigenvectors (unit-norm columns) of each square trailing matrix; CPU only
    (LAPACK ``geev``). Eigenvalues are differentiable; eigenvectors only with
    ``enable_eigvec_derivs`` (valid for distinct eigenvalues), as in JAX.
    ``implementation`` must be ``None`` or ``EigImplementation.LAPACK``:
    lamina lowers ``eig`` with LAPACK on the host CPU."""
    _check_matrix("eig", "x", x, square=True)
    if use_magma:
        implementation = EigImplementation.MAGMA
    if implementation not in (None, EigImplementation.LAPACK):
        raise ValueError(f"eig: implementation={implementation} is not supported; lamina "
                         "computes eig with LAPACK (implementation=None or "
                         "EigImplementation.LAPACK)")
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors),
                           enable_eigvec_derivs=bool(enable_eigvec_derivs)))


def _solve_square(a: Any, b: Any) -> Any:
    """``a^-1 b`` for square ``a`` by LU with partial pivoting."""
    lu_, _, perm = lu(a)
    nd = len(_shape(b))
    x = indexing.take_along_axis(
        b, st.broadcast_in_dim(perm, _shape(b), (*range(nd - 2), nd - 2)), nd - 2)
    x = triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, x, left_side=True, lower=False)


def _eig_vec_jvp(w: Any, v: Any, da: Any) -> tuple[Any, Any]:
    """The eigenvalue and eigenvector tangents, eigenvectors kept unit-norm
    with the phase of their largest entry fixed (JAX's normalization)."""
    shape = _shape(v)
    nd = len(shape)
    eye = _eye(shape, _dtype(v))
    diff = el.sub(_broadcast_vec(w, shape, -1), _broadcast_vec(w, shape, -2))
    F = el.sub(el.div(_scalar(diff, 1), el.add(eye, diff)), eye)
    P = _mm(_solve_square(v, da), v)
    dw = _diag(P)
    U = _mm(v, el.mul(F, P))
    k = red.argmax(el.abs(v), nd - 2, dtypes.int32)
    rows = st.broadcasted_iota(dtypes.int32, shape, nd - 2)
    mask = cv.convert_element_type(
        el.eq(rows, st.broadcast_in_dim(k, shape, (*range(nd - 2), nd - 1))), _dtype(v))
    re = el.neg(el.real(red.reduce_sum(el.mul(el.conj(v), U), (nd - 2,))))
    im = el.div(el.neg(el.imag(red.reduce_sum(el.mul(mask, U), (nd - 2,)))),
                el.real(red.reduce_sum(el.mul(mask, v), (nd - 2,))))
    c = el.complex(re, im)
    return dw, el.add(U, el.mul(v, _broadcast_vec(c, shape, -1)))


def _eig_jvp(primals: Any, tangents: Any, *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool) -> Any:
    (a,), (da,) = primals, tangents
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise ValueError(
            "eig: derivatives of non-symmetric eigenvectors are valid only for distinct "
            "eigenvalues, which lamina cannot check; pass enable_eigvec_derivs=True to "
            "lax.linalg.eig to opt in (as in JAX), or differentiate only the eigenvalues")
    outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors,
                      compute_right_eigenvectors=True,
                      enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    da = cv.convert_element_type(helpers.instantiate(da), _dtype(vr))
    if not vectors:
        return [w], [red.reduce_sum(el.mul(_solve_square(vr, da), _T(vr)),
                                    (len(_shape(vr)) - 1,))]
    dw, dvr = _eig_vec_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:
        _, dvl = _eig_vec_jvp(el.conj(w), outs[1], _H(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


jvp_rules[eig_p] = _eig_jvp
_unary_batch(eig_p)

# --- QR ------------------------------------------------------------------------------------

geqrf_p = Primitive("geqrf", multiple_results=True)


@geqrf_p.def_abstract_eval
def _geqrf_abstract_eval(x: ShapedArray) -> list[ShapedArray]:
    m, n = _check_matrix("geqrf", "x", x)
    return [ShapedArray(x.shape, x.dtype), ShapedArray((*x.shape[:-2], min(m, n)), x.dtype)]


def geqrf(x: ArrayLike) -> tuple[Array, Array]:
    """LAPACK's QR in Householder form: ``(a, taus)`` with ``R`` in the upper
    triangle of ``a`` and the reflectors below it. Not differentiable (as in
    JAX); ``qr`` is."""
    a, taus = geqrf_p.bind(x)
    return a, taus


_unary_batch(geqrf_p)

householder_product_p = Primitive("householder_product")


@householder_product_p.def_abstract_eval
def _householder_abstract_eval(a: ShapedArray, taus: ShapedArray) -> ShapedArray:
    m, n = _check_matrix("householder_product", "a", a)
    if taus.dtype != a.dtype or taus.shape[:-1] != a.shape[:-2] or taus.ndim != a.ndim - 1:
        raise ValueError(f"householder_product: argument 'taus' must have shape "
                         f"{(*a.shape[:-2], 'k')} and dtype {a.dtype}, got "
                         f"{taus.dtype}{list(taus.shape)}")
    if m < n or taus.shape[-1] > n:
        raise ValueError(f"householder_product: need m >= n >= k for a of shape {a.shape} "
                         f"and taus of shape {taus.shape}")
    return ShapedArray(a.shape, a.dtype)


def householder_product(a: ArrayLike, taus: ArrayLike) -> Array:
    """The product of the Householder reflectors stored in ``a``/``taus``
    (LAPACK's ``orgqr``/``ungqr``): the first ``n`` columns of ``Q``."""
    return householder_product_p.bind(a, taus)


def _householder_batch(args: Sequence[Any], dims: Sequence[int | None]) -> Any:
    a, taus = _front_batch(householder_product_p, args, dims)
    return householder_product_p.bind(a, taus), 0


batching_rules[householder_product_p] = _householder_batch

qr_p = Primitive("qr", multiple_results=True)


@qr_p.def_abstract_eval
def _qr_abstract_eval(x: ShapedArray, *, pivoting: bool, full_matrices: bool,
                      use_magma: Any) -> list[ShapedArray]:
    m, n = _check_matrix("qr", "x", x)
    if pivoting:
        raise ValueError("qr: pivoting=True is not supported")
    batch = tuple(x.shape[:-2])
    k = m if full_matrices else min(m, n)
    return [ShapedArray((*batch, m, k), x.dtype), ShapedArray((*batch, k, n), x.dtype)]


def qr(x: ArrayLike, *, pivoting: bool = False, full_matrices: bool = True,
       use_magma: bool | None = None) -> tuple[Array, Array]:
    """``(q, r)`` with ``x = q @ r``, ``q`` orthonormal columns and ``r`` upper
    triangular; ``full_matrices`` gives the square ``q`` (``m x m``)."""
    _check_matrix("qr", "x", x)
    q, r = qr_p.bind(x, pivoting=bool(pivoting), full_matrices=bool(full_matrices),
                     use_magma=use_magma)
    return q, r


def _qr_impl_traceable(x: Any, full_matrices: bool) -> tuple[Any, Any]:
    """QR from the LAPACK building blocks (what the lowering inlines)."""
    shape = _shape(x)
    nd = len(shape)
    m, n = shape[-2:]
    batch = shape[:-2]
    a, taus = geqrf(x)
    if m < n:
        q = householder_product(st.slice(a, (0,) * nd, (*batch, m, m)), taus)
    elif full_matrices:
        padded = st.pad(a, np.array(0, _dtype(a)), [(0, 0, 0)] * (nd - 1) + [(0, m - n, 0)])
        q = householder_product(padded, taus)
    else:
        q = householder_product(a, taus)
    r = a
    if not full_matrices and m > n:
        r = st.slice(a, (0,) * nd, (*batch, n, n))
    return q, _triu(r)


def _thin_qr_jvp(q: Any, r: Any, dx: Any) -> tuple[Any, Any]:
    """The JVP of the QR decomposition of an ``m x n`` matrix, ``m >= n``."""
    dx_rinv = triangular_solve(r, dx)  # right side, upper
    qt_dx_rinv = _mm(_H(q), dx_rinv)
    qt_dx_rinv_lower = _tril(qt_dx_rinv, -1)
    do = el.sub(qt_dx_rinv_lower, _H(qt_dx_rinv_lower))  # skew-symmetric
    if _is_complex(qt_dx_rinv):
        # the imaginary part of the diagonal is free: take it from qt_dx_rinv.
        real_part = cv.convert_element_type(el.real(qt_dx_rinv), _dtype(qt_dx_rinv))
        eye = _eye(_shape(do), _dtype(do))
        do = el.add(do, el.mul(eye, el.sub(qt_dx_rinv, real_part)))
    dq = el.add(_mm(q, el.sub(do, qt_dx_rinv)), dx_rinv)
    dr = _mm(el.sub(qt_dx_rinv, do), r)
    return dq, dr


def _qr_jvp(primals: Any, tangents: Any, *, pivoting: bool, full_matrices: bool,
            use_magma: Any) -> Any:
    (x,), (dx,) = primals, tangents
    q, r = qr_p.bind(x, pivoting=pivoting, full_matrices=full_matrices, use_magma=use_magma)
    dx = helpers.instantiate(dx)
    shape = _shape(x)
    nd = len(shape)
    m, n = shape[-2:]
    batch = shape[:-2]
    if m < n:
        # x = [x1 x2] = q [r1 r2]: x1's QR is square, r2 = q^H x2.
        x2 = st.slice(x, (0,) * (nd - 1) + (m,), shape)
        dx1 = st.slice(dx, (0,) * nd, (*batch, m, m))
        dx2 = st.slice(dx, (0,) * (nd - 1) + (m,), shape)
        r1 = st.slice(r, (0,) * nd, (*batch, m, m))
        dq, dr1 = _thin_qr_jvp(q, r1, dx1)
        dr2 = el.add(_mm(_H(dq), x2), _mm(_H(q), dx2))
        return [q, r], [dq, st.concatenate([dr1, dr2], nd - 1)]
    if full_matrices and m != n:
        raise ValueError(
            "qr: the derivative of the full_matrices=True decomposition of a tall matrix is "
            f"not supported, got shape {shape}; use full_matrices=False (mode='reduced')")
    dq, dr = _thin_qr_jvp(q, r, dx)
    return [q, r], [dq, dr]


jvp_rules[qr_p] = _qr_jvp
_unary_batch(qr_p)

# --- SVD -----------------------------------------------------------------------------------

svd_p = Primitive("svd", multiple_results=True)


@svd_p.def_abstract_eval
def _svd_abstract_eval(x: ShapedArray, *, full_matrices: bool, compute_uv: bool,
                       subset_by_index: Any, algorithm: Any) -> list[ShapedArray]:
    m, n = _check_matrix("svd", "x", x)
    if algorithm is not None and not isinstance(algorithm, SvdAlgorithm):
        raise TypeError(f"svd: argument 'algorithm' must be None or a lax.linalg.SvdAlgorithm, "
                        f"got {algorithm!r}")
    if subset_by_index is not None and tuple(subset_by_index) != (0, min(m, n)):
        raise ValueError(f"svd: subset_by_index other than (0, min(m, n)) is not supported, "
                         f"got {subset_by_index}")
    batch = tuple(x.shape[:-2])
    k = min(m, n)
    s = ShapedArray((*batch, k), common.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    ku, kv = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray((*batch, m, ku), x.dtype), ShapedArray((*batch, kv, n), x.dtype)]


def svd(x: ArrayLike, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple[int, int] | None = None, algorithm: Any = None) -> Any:
    """The singular values (descending) of each trailing matrix, and with
    ``compute_uv`` the ``(u, s, vh)`` of ``x = u @ diag(s) @ vh``."""
    _check_matrix("svd", "x", x)
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                      subset_by_index=None if subset_by_index is None
                      else tuple(int(i) for i in subset_by_index), algorithm=algorithm)
    if compute_uv:
        s, u, vh = outs
        return u, s, vh
    return outs[0]


def _svd_jvp(primals: Any, tangents: Any, *, full_matrices: bool, compute_uv: bool,
             subset_by_index: Any, algorithm: Any) -> Any:
    (A,), (dA,) = primals, tangents
    m, n = _shape(A)[-2:]
    if compute_uv and full_matrices and m != n:
        raise ValueError(
            "svd: the derivative with full_matrices=True of a non-square matrix is not "
            f"defined (as in JAX), got shape {_shape(A)}; use full_matrices=False")
    s, U, Vt = svd_p.bind(A, full_matrices=False, compute_uv=True,
                          subset_by_index=subset_by_index, algorithm=algorithm)
    if helpers.is_zero(dA):
        dA = helpers.instantiate(dA)
    dtype = _dtype(A)
    Ut, V = _H(U), _H(Vt)
    k = _shape(s)[-1]
    sq_shape = (*_shape(s), k)
    dS = _mm(_mm(Ut, dA), V)
    ds = _diag(el.real(dS)) if dtype in common.COMPLEX else _diag(dS)
    if not compute_uv:
        return [s], [ds]
    s_row = _broadcast_vec(s, sq_shape, -1)  # s[..., None, :]
    s_col = _T(s_row)
    s_diffs = el.mul(el.add(s_row, s_col), el.sub(s_row, s_col))
    eye_s = _eye(sq_shape, _dtype(s))
    F = el.sub(el.div(_scalar(s_diffs, 1), el.add(s_diffs, eye_s)), eye_s)
    Fc = cv.convert_element_type(F, dtype)
    s_row_c = cv.convert_element_type(s_row, dtype)
    dSS = el.mul(s_row_c, dS)  # dS @ diag(s)
    SdS = el.mul(_T(s_row_c), dS)  # diag(s) @ dS
    s_zeros = cv.convert_element_type(el.eq(s, _scalar(s, 0)), _dtype(s))
    s_inv = el.sub(el.div(_scalar(s, 1), el.add(s, s_zeros)), s_zeros)
    s_inv_mat = el.mul(_broadcast_vec(s_inv, sq_shape, -1), eye_s)
    dUdV_diag = el.mul(el.mul(el.sub(dS, _H(dS)), cv.convert_element_type(s_inv_mat, dtype)),
                       _scalar(dS, 0.5))
    dU = _mm(U, el.add(el.mul(Fc, el.add(dSS, _H(dSS))), dUdV_diag))
    dV = _mm(V, el.mul(Fc, el.add(SdS, _H(SdS))))
    if m > n:
        dAV = _mm(dA, V)
        resid = el.sub(dAV, _mm(U, _mm(Ut, dAV)))
        dU = el.add(dU, el.div(resid, _broadcast_vec(cv.convert_element_type(s, dtype),
                                                     _shape(resid), -1)))
    if n > m:
        dAHU = _mm(_H(dA), U)
        resid = el.sub(dAHU, _mm(V, _mm(Vt, dAHU)))
        dV = el.add(dV, el.div(resid, _broadcast_vec(cv.convert_element_type(s, dtype),
                                                     _shape(resid), -1)))
    return [s, U, Vt], [ds, dU, _H(dV)]


jvp_rules[svd_p] = _svd_jvp
_unary_batch(svd_p)

# --- hessenberg (CPU) ------------------------------------------------------------------------

hessenberg_p = Primitive("hessenberg", multiple_results=True)


@hessenberg_p.def_abstract_eval
def _hessenberg_abstract_eval(a: ShapedArray) -> list[ShapedArray]:
    n, _ = _check_matrix("hessenberg", "a", a, square=True)
    return [ShapedArray(a.shape, a.dtype), ShapedArray((*a.shape[:-2], max(n - 1, 0)), a.dtype)]


def hessenberg(a: ArrayLike) -> tuple[Array, Array]:
    """``(a, taus)``: the upper Hessenberg form of each square trailing matrix
    in the upper triangle and first subdiagonal of ``a``, the Householder
    reflectors below it with their scale factors ``taus`` (LAPACK's
    ``gehrd``; CPU only, as in JAX). Not differentiable."""
    _check_matrix("hessenberg", "a", a, square=True)
    h, taus = hessenberg_p.bind(a)
    return h, taus


_unary_batch(hessenberg_p)

# --- schur (CPU) -------------------------------------------------------------------------------

schur_p = Primitive("schur", multiple_results=True)


@schur_p.def_abstract_eval
def _schur_abstract_eval(x: ShapedArray, *, compute_schur_vectors: bool, sort_eig_vals: bool,
                         select_callable: Any) -> list[ShapedArray]:
    _check_matrix("schur", "x", x, square=True)
    out = ShapedArray(x.shape, x.dtype)
    return [out, out] if compute_schur_vectors else [out]


def schur(x: ArrayLike, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Any = None) -> list[Array]:
    """``[t, z]`` (``[t]`` without ``compute_schur_vectors``): the Schur form
    ``x = z @ t @ z^H`` of each square trailing matrix, ``t`` quasi-upper
    triangular for real input (2x2 blocks for complex eigenvalue pairs) and
    upper triangular for complex input, ``z`` unitary (LAPACK's ``gees``;
    CPU only, as in JAX). Eigenvalue sorting is not offered (JAX's lowering
    refuses it too). Not differentiable."""
    _check_matrix("schur", "x", x, square=True)
    if sort_eig_vals:
        raise ValueError("schur: sort_eig_vals=True is not supported (LAPACK's gees sorting is "
                         "not exposed by jaxlib's kernel, as in JAX)")
    return list(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors),
                             sort_eig_vals=False, select_callable=select_callable))


_unary_batch(schur_p)

# --- tridiagonal reduction ------------------------------------------------------------------------

tridiagonal_p = Primitive("tridiagonal", multiple_results=True)


@tridiagonal_p.def_abstract_eval
def _tridiagonal_abstract_eval(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    n, _ = _check_matrix("tridiagonal", "a", a, square=True)
    if n == 0:
        raise ValueError(f"tridiagonal: argument 'a' must be a non-empty square matrix, got "
                         f"shape {a.shape}")
    batch = tuple(a.shape[:-2])
    real = common.real_dtype(a.dtype)
    return [ShapedArray(a.shape, a.dtype), ShapedArray((*batch, n), real),
            ShapedArray((*batch, n - 1), real), ShapedArray((*batch, n - 1), a.dtype)]


def tridiagonal(a: ArrayLike, *, lower: bool = True) -> tuple[Array, Array, Array, Array]:
    """``(a, d, e, taus)``: the reduction of each symmetric/Hermitian trailing
    matrix to a real tridiagonal ``T = Q^H a Q`` with diagonal ``d`` and
    off-diagonal ``e``; ``a`` keeps ``T`` and the reflectors of ``Q`` in its
    ``lower`` (or upper) triangle, ``taus`` their scale factors (LAPACK's
    ``sytrd``/``hetrd``). Only that triangle of the input is read."""
    _check_matrix("tridiagonal", "a", a, square=True)
    arr, d, e, taus = tridiagonal_p.bind(a, lower=bool(lower))
    return arr, d, e, taus


_unary_batch(tridiagonal_p)

# --- tridiagonal_solve -----------------------------------------------------------------------------

tridiagonal_solve_p = Primitive("tridiagonal_solve")


@tridiagonal_solve_p.def_abstract_eval
def _tridiagonal_solve_abstract_eval(dl: ShapedArray, d: ShapedArray, du: ShapedArray,
                                     b: ShapedArray, *, perturb_singular: bool) -> ShapedArray:
    for name, aval in (("dl", dl), ("d", d), ("du", du), ("b", b)):
        if aval.dtype not in common.INEXACT:
            raise TypeError(f"tridiagonal_solve: argument {name!r} must have a floating or "
                            f"complex dtype, got {aval.dtype}")
        if aval.dtype != b.dtype:
            raise TypeError(f"tridiagonal_solve: arguments {name!r} and 'b' must have the same "
                            f"dtype, got {aval.dtype} and {b.dtype}")
    if dl.shape != d.shape or du.shape != d.shape:
        raise TypeError(f"tridiagonal_solve: arguments 'dl', 'd' and 'du' must have the same "
                        f"shape, got {dl.shape}, {d.shape} and {du.shape}")
    if b.ndim < 2 or tuple(b.shape[:-1]) != tuple(d.shape):
        raise TypeError(f"tridiagonal_solve: argument 'b' must have shape d.shape + (k,) = "
                        f"{(*d.shape, 'k')}, got {b.shape}")
    return ShapedArray(b.shape, b.dtype)


def tridiagonal_solve(dl: ArrayLike, d: ArrayLike, du: ArrayLike, b: ArrayLike, *,
                      perturb_singular: bool = False) -> Array:
    """Solves ``A @ x = b`` for the tridiagonal ``A`` with sub-diagonal ``dl``
    (``dl[..., 0]`` is ignored), diagonal ``d`` and super-diagonal ``du``
    (``du[..., -1]`` is ignored); ``b`` is ``(..., m, k)``. A singular system
    gives NaNs unless ``perturb_singular``, which perturbs tiny pivots to
    keep the result finite (as LAPACK-based JAX does)."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


def _shift_rows(x: Any, down: bool) -> Any:
    """``x[..., i - 1, :]`` (``down``) or ``x[..., i + 1, :]`` at row ``i``,
    zero where that row does not exist."""
    shape = _shape(x)
    nd = len(shape)
    pad = [(0, 0, 0)] * nd
    pad[-2] = (1, -1, 0) if down else (-1, 1, 0)
    return st.pad(x, np.array(0, _dtype(x)), pad)


def tridiagonal_product(dl: Any, d: Any, du: Any, x: Any) -> Any:
    """``A @ x`` for the tridiagonal ``A`` of ``tridiagonal_solve``."""
    shape = _shape(x)

    def col(v: Any) -> Any:
        return _broadcast_vec(v, shape, -2)

    out = el.mul(col(d), x)
    out = el.add(out, el.mul(col(dl), _shift_rows(x, down=True)))
    return el.add(out, el.mul(col(du), _shift_rows(x, down=False)))


def _tridiagonal_solve_jvp(primals: Any, tangents: Any, *, perturb_singular: bool) -> Any:
    dl, d, du, b = primals
    *diag_dots, b_dot = tangents
    ans = tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
    rhs = b_dot
    if not all(helpers.is_zero(t) for t in diag_dots):
        dl_dot, d_dot, du_dot = (helpers.instantiate(t) for t in diag_dots)
        product = tridiagonal_product(dl_dot, d_dot, du_dot, ans)
        rhs = el.neg(product) if helpers.is_zero(b_dot) else el.sub(b_dot, product)
    if helpers.is_zero(rhs):
        return ans, helpers.zero_from_primal(ans)
    return ans, tridiagonal_solve_p.bind(dl, d, du, rhs, perturb_singular=perturb_singular)


def _tridiagonal_solve_transpose(cot: Any, dl: Any, d: Any, du: Any, b: Any, *,
                                 perturb_singular: bool) -> list[Any]:
    if any(helpers.is_undefined_primal(x) for x in (dl, d, du)):
        raise ValueError("tridiagonal_solve is linear only in its right-hand side 'b'; it "
                         "cannot be transposed with respect to the diagonals")
    if type(cot) is helpers.Zero:
        return [None, None, None, helpers.Zero(b.aval)]
    nd = len(_shape(d))
    m = _shape(d)[-1]
    zero = np.array(0, _dtype(d))
    # A^T's sub-diagonal is A's super-diagonal moved down one row, and back.
    dl_t = st.pad(st.slice_in_dim(du, 0, m - 1, axis=nd - 1), zero,
                  [(0, 0, 0)] * (nd - 1) + [(1, 0, 0)])
    du_t = st.pad(st.slice_in_dim(dl, 1, m, axis=nd - 1), zero,
                  [(0, 0, 0)] * (nd - 1) + [(0, 1, 0)])
    return [None, None, None,
            tridiagonal_solve_p.bind(dl_t, d, du_t, cot, perturb_singular=perturb_singular)]


def _tridiagonal_solve_batch(args: Sequence[Any], dims: Sequence[int | None],
                             **params: Any) -> Any:
    return tridiagonal_solve_p.bind(*_front_batch(tridiagonal_solve_p, args, dims),
                                    **params), 0


jvp_rules[tridiagonal_solve_p] = _tridiagonal_solve_jvp
transpose_rules[tridiagonal_solve_p] = _tridiagonal_solve_transpose
batching_rules[tridiagonal_solve_p] = _tridiagonal_solve_batch

# --- ormqr ----------------------------------------------------------------------------------------

ormqr_p = Primitive("ormqr")


@ormqr_p.def_abstract_eval
def _ormqr_abstract_eval(a: ShapedArray, taus: ShapedArray, c: ShapedArray, *, left: bool,
                         transpose: bool) -> ShapedArray:
    m, n = _check_matrix("ormqr", "a", a)
    _check_matrix("ormqr", "c", c)
    if taus.dtype != a.dtype or c.dtype != a.dtype:
        raise TypeError(f"ormqr: arguments 'a', 'taus' and 'c' must have the same dtype, got "
                        f"{a.dtype}, {taus.dtype} and {c.dtype}")
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > min(m, n):
        raise ValueError(f"ormqr: argument 'taus' must have shape {(*a.shape[:-2], 'k')} with "
                         f"k <= {min(m, n)}, got {taus.shape}")
    if c.shape[:-2] != a.shape[:-2]:
        raise ValueError(f"ormqr: arguments 'a' and 'c' must have the same batch dimensions, "
                         f"got shapes {a.shape} and {c.shape}")
    rows = c.shape[-2] if left else c.shape[-1]
    if rows != m:
        side = "rows" if left else "columns"
        raise ValueError(f"ormqr: with left={left}, argument 'c' must have {m} {side} (the rows "
                         f"of 'a'), got shapes a {a.shape} and c {c.shape}")
    return ShapedArray(c.shape, c.dtype)


def ormqr(a: ArrayLike, taus: ArrayLike, c: ArrayLike, *, left: bool = True,
          transpose: bool = False) -> Array:
    """``Q @ c`` (``left``) or ``c @ Q``, with ``Q^H`` instead of ``Q`` under
    ``transpose``, for the ``Q`` of the Householder reflectors in
    ``a``/``taus`` (``geqrf``'s), without forming ``Q`` (LAPACK's
    ``ormqr``/``unmqr``)."""
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


def ormqr_traceable(a: Any, taus: Any, c: Any, left: bool, transpose: bool) -> Any:
    """``ormqr`` by applying the reflectors one by one (the lowering off the
    LAPACK/cuSOLVER platforms)."""
    a_shape = _shape(a)
    nd = len(a_shape)
    m = a_shape[-2]
    k = _shape(taus)[-1]
    batch = a_shape[:-2]
    dtype = _dtype(a)
    complex_ = dtype in common.COMPLEX
    head = st.slice(a, (0,) * nd, (*batch, m, k))
    v_all = el.add(_tril(head, -1), _eye((*batch, m, k), dtype))
    taus_eff = el.conj(taus) if transpose and complex_ else taus
    reverse = left != transpose
    for step in range(k):
        i = k - 1 - step if reverse else step
        v = st.squeeze(st.slice_in_dim(v_all, i, i + 1, axis=nd - 1), (nd - 1,))
        tau = st.squeeze(st.slice_in_dim(taus_eff, i, i + 1, axis=nd - 2), (nd - 2,))
        cshape = _shape(c)
        if left:  # c - tau v (v^H c)
            vhc = red.reduce_sum(el.mul(_broadcast_vec(_conj(v), cshape, -2), c), (nd - 2,))
            update = el.mul(_broadcast_vec(v, cshape, -2), _broadcast_vec(vhc, cshape, -1))
        else:  # c - tau (c v) v^H
            cv_ = red.reduce_sum(el.mul(c, _broadcast_vec(v, cshape, -1)), (nd - 1,))
            update = el.mul(_broadcast_vec(cv_, cshape, -2),
                            _broadcast_vec(_conj(v), cshape, -1))
        c = el.sub(c, el.mul(st.broadcast_in_dim(tau, cshape, tuple(range(nd - 2))), update))
    return c


def _ormqr_batch(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> Any:
    return ormqr_p.bind(*_front_batch(ormqr_p, args, dims), **params), 0


batching_rules[ormqr_p] = _ormqr_batch

# --- symmetric_product ------------------------------------------------------------------------------

symmetric_product_p = Primitive("symmetric_product")


@symmetric_product_p.def_abstract_eval
def _symmetric_product_abstract_eval(a: ShapedArray, c: ShapedArray, *, alpha: Any,
                                     beta: Any) -> ShapedArray:
    m, _ = _check_matrix("symmetric_product", "a_matrix", a)
    _check_matrix("symmetric_product", "c_matrix", c, square=True)
    if c.shape[-1] != m or a.shape[:-2] != c.shape[:-2] or a.dtype != c.dtype:
        raise ValueError(f"symmetric_product: argument 'c_matrix' must have shape "
                         f"{(*a.shape[:-2], m, m)} and dtype {a.dtype} for 'a_matrix' of shape "
                         f"{a.shape}, got {c.dtype}{list(c.shape)}")
    return ShapedArray(c.shape, c.dtype)


def symmetric_product(a_matrix: ArrayLike, c_matrix: ArrayLike, *, alpha: float = 1.,
                      beta: float = 0., symmetrize_output: bool = False) -> Array:
    """``alpha * a @ a^T + beta * c`` for symmetric ``c``; only the lower
    triangle is guaranteed (cuBLAS ``syrk`` fills only that), unless
    ``symmetrize_output`` mirrors it into the upper one."""
    out = symmetric_product_p.bind(a_matrix, c_matrix, alpha=alpha, beta=beta)
    if symmetrize_output:
        out = el.add(_tril(out), _T(_tril(out, -1)))
    return out


def symmetric_product_traceable(a: Any, c: Any, alpha: Any, beta: Any) -> Any:
    """The product computed with a matmul (the lowering off cuda)."""
    return el.add(el.mul(_scalar(c, alpha), _mm(a, _T(a))), el.mul(_scalar(c, beta), c))


def _symmetric_product_jvp(primals: Any, tangents: Any, *, alpha: Any, beta: Any) -> Any:
    (a, c), (da, dc) = primals, tangents
    out = symmetric_product_p.bind(a, c, alpha=alpha, beta=beta)
    terms = []
    if not helpers.is_zero(da):
        ada = _mm(a, _T(da))
        terms.append(el.mul(_scalar(out, alpha), el.add(ada, _T(ada))))
    if not helpers.is_zero(dc):
        terms.append(el.mul(_scalar(out, beta), dc))
    if not terms:
        return out, helpers.zero_from_primal(out)
    return out, terms[0] if len(terms) == 1 else el.add(terms[0], terms[1])


def _symmetric_product_batch(args: Sequence[Any], dims: Sequence[int | None],
                             **params: Any) -> Any:
    return symmetric_product_p.bind(*_front_batch(symmetric_product_p, args, dims),
                                    **params), 0


jvp_rules[symmetric_product_p] = _symmetric_product_jvp
batching_rules[symmetric_product_p] = _symmetric_product_batch

# --- cholesky_update -----------------------------------------------------------------------------

cholesky_update_p = Primitive("cholesky_update")


@cholesky_update_p.def_abstract_eval
def _cholesky_update_abstract_eval(r: ShapedArray, w: ShapedArray) -> ShapedArray:
    n, _ = _check_matrix("cholesky_update", "r_matrix", r, square=True)
    if r.dtype not in common.FLOAT:
        raise TypeError(f"cholesky_update: argument 'r_matrix' must have a real floating "
                        f"dtype, got {r.dtype}")
    if w.dtype != r.dtype or tuple(w.shape) != (*r.shape[:-2], n):
        raise ValueError(f"cholesky_update: argument 'w_vector' must have shape "
                         f"{(*r.shape[:-2], n)} and dtype {r.dtype}, got "
                         f"{w.dtype}{list(w.shape)}")
    return ShapedArray(r.shape, r.dtype)


def cholesky_update(r_matrix: ArrayLike, w_vector: ArrayLike) -> Array:
    """The upper Cholesky factor of ``r^T r + w w^T`` from the upper factor
    ``r`` of ``r^T r``, by ``n`` Givens rotations (``O(n^2)``)."""
    return cholesky_update_p.bind(r_matrix, w_vector)


def cholesky_update_traceable(r: Any, w: Any) -> Any:
    """The rank-1 update as a sequence of Givens rotations, one per row (the
    lowering off cuda)."""
    shape = _shape(r)
    nd = len(shape)
    n = shape[-1]
    rows = []
    for k in range(n):
        row = st.squeeze(st.slice_in_dim(r, k, k + 1, axis=nd - 2), (nd - 2,))
        x = st.squeeze(st.slice_in_dim(row, k, k + 1, axis=nd - 2), (nd - 2,))
        y = st.squeeze(st.slice_in_dim(w, k, k + 1, axis=nd - 2), (nd - 2,))
        # c, s of the rotation zeroing y against x, scaled to avoid overflow.
        zero_y = el.eq(y, _scalar(y, 0))
        scale = el.max(el.abs(x), el.abs(y))
        scale = el.select(zero_y, _scalar(y, 1), scale)
        xs, ys = el.div(x, scale), el.div(y, scale)
        rh = el.rsqrt(el.add(el.mul(xs, xs), el.mul(ys, ys)))
        c = el.select(zero_y, _scalar(x, 1), el.mul(xs, rh))
        s = el.select(zero_y, _scalar(y, 0), el.neg(el.mul(ys, rh)))
        cb = st.broadcast_in_dim(c, _shape(row), tuple(range(nd - 2)))
        sb = st.broadcast_in_dim(s, _shape(row), tuple(range(nd - 2)))
        rows.append(el.sub(el.mul(cb, row), el.mul(sb, w)))
        w = el.add(el.mul(cb, w), el.mul(sb, row))
    return st.concatenate([st.expand_dims(row, (nd - 2,)) for row in rows], nd - 2)


def _cholesky_update_batch(args: Sequence[Any], dims: Sequence[int | None]) -> Any:
    return cholesky_update_p.bind(*_front_batch(cholesky_update_p, args, dims)), 0


batching_rules[cholesky_update_p] = _cholesky_update_batch

# --- qdwh (the polar decomposition) ------------------------------------------------------------


def _fro_norm(x: Any) -> Any:
    """The Frobenius norm of a matrix, in its real dtype."""
    sq = el.real(el.mul(x, el.conj(x))) if _is_complex(x) else el.mul(x, x)
    return el.sqrt(red.reduce_sum(sq, tuple(range(len(_shape(x))))))


def _real_scalar(value: Any, dtype: Any) -> Any:
    return st.full((), np.array(value, dtype), dtype)


def qdwh(x: ArrayLike, *, is_hermitian: bool = False, max_iterations: int | None = None,
         eps: float | None = None,
         dynamic_shape: tuple[int, int] | None = None) -> tuple[Array, Array, Array, Array]:
    """``(u, h, num_iters, is_converged)``: the polar decomposition
    ``x = u @ h`` of an ``m x n`` matrix (``m >= n``), ``u`` with orthonormal
    columns and ``h`` Hermitian positive semi-definite, by the QR-based
    dynamically weighted Halley iteration (Nakatsukasa, Bai and Gygi 2010).

    The iteration is unrolled ``max_iterations`` times (default 10); once
    the iterate stops moving (relative change below ``eps ** (1/3)``, the
    iteration converges cubically) and the lower singular-value bound has
    reached 1, later steps leave it unchanged, and ``num_iters`` counts the
    steps taken. ``is_hermitian`` is accepted for JAX's signature (the QR
    form needs no symmetry)."""
    del is_hermitian
    m, n = _check_matrix("qdwh", "x", x)
    if len(_shape(x)) != 2 or m < n:
        raise ValueError(f"qdwh: argument 'x' must be a matrix with at least as many rows as "
                         f"columns, got shape {_shape(x)}{helpers.operand_origin(x)}")
    if dynamic_shape is not None:
        raise ValueError("qdwh: dynamic_shape is not supported")
    dtype = _dtype(x)
    real = common.real_dtype(dtype)
    eps_ = float(np.finfo(real).eps) if eps is None else float(eps)
    tol = _real_scalar(eps_ ** (1 / 3), real)
    one = _real_scalar(1, real)
    alpha = _fro_norm(x)  # bounds the largest singular value from above
    alpha = el.select(el.eq(alpha, _real_scalar(0, real)), one, alpha)
    u = el.div(x, st.broadcast_in_dim(cv.convert_element_type(alpha, dtype), (m, n), ()))
    lower = _real_scalar(eps_, real)
    done = st.full((), np.array(False), np.dtype(bool))
    steps = st.full((), np.int32(0), dtypes.int32)
    eye = _eye((n, n), dtype)
    for _ in range(10 if max_iterations is None else int(max_iterations)):
        l2 = el.mul(lower, lower)
        d = el.cbrt(el.div(el.mul(_real_scalar(4, real), el.sub(one, l2)), el.mul(l2, l2)))
        sqd = el.sqrt(el.add(one, d))
        a = el.add(sqd, el.mul(_real_scalar(0.5, real), el.sqrt(
            el.add(el.sub(_real_scalar(8, real), el.mul(_real_scalar(4, real), d)),
                   el.div(el.mul(_real_scalar(8, real), el.sub(_real_scalar(2, real), l2)),
                          el.mul(l2, sqd))))))
        b = el.div(el.mul(el.sub(a, one), el.sub(a, one)), _real_scalar(4, real))
        c = el.sub(el.add(a, b), one)

        def as_dtype(v: Any) -> Any:
            return cv.convert_element_type(v, dtype)

        stacked = st.concatenate([el.mul(st.broadcast_in_dim(as_dtype(el.sqrt(c)), (m, n), ()),
                                         u), eye], 0)
        q, _ = qr(stacked, full_matrices=False)
        q1 = st.slice(q, (0, 0), (m, n))
        q2 = st.slice(q, (m, 0), (m + n, n))
        coeff_u = as_dtype(el.div(b, c))
        coeff_q = as_dtype(el.div(el.sub(a, el.div(b, c)), el.sqrt(c)))
        new_u = el.add(el.mul(st.broadcast_in_dim(coeff_u, (m, n), ()), u),
                       el.mul(st.broadcast_in_dim(coeff_q, (m, n), ()), _mm(q1, _H(q2))))
        new_lower = el.min(one, el.div(el.mul(lower, el.add(a, el.mul(b, l2))),
                                       el.add(one, el.mul(c, l2))))
        change = _fro_norm(el.sub(new_u, u))
        active = el.bitwise_not(done)
        u = el.select(st.broadcast_in_dim(active, (m, n), ()), new_u, u)
        lower = el.select(active, new_lower, lower)
        steps = el.add(steps, cv.convert_element_type(active, dtypes.int32))
        done = el.bitwise_or(done, el.bitwise_and(el.le(change, tol),
                                    el.le(el.abs(el.sub(one, new_lower)), tol)))
    h = _mm(_H(u), x)
    h = el.div(el.add(h, _H(h)), _scalar(h, 2))
    return u, h, steps, done


__all__ = [
    "cholesky_p", "triangular_solve_p", "lu_p", "lu_pivots_to_permutation_p", "eig_p", "eigh_p",
    "geqrf_p", "householder_product_p", "qr_p", "svd_p", "hessenberg_p", "schur_p",
    "tridiagonal_p", "tridiagonal_solve_p", "ormqr_p", "symmetric_product_p", "cholesky_update_p",
    "EigImplementation", "EighImplementation", "SvdAlgorithm",
    "cholesky", "triangular_solve", "lu", "lu_pivots_to_permutation", "eig", "eigh", "geqrf",
    "householder_product", "qr", "svd", "symmetrize", "hessenberg", "schur", "tridiagonal",
    "tridiagonal_solve", "ormqr", "symmetric_product", "cholesky_update", "qdwh",
]
