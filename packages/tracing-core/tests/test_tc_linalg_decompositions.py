"""lax.linalg (cholesky, triangular_solve, lu, lu_pivots_to_permutation, eigh,
qr, svd) and the jnp.linalg functions built on them, with NumPy/SciPy
reference impls for the eager values: the JVP, transpose and batching rules
(check_grads orders 1-2, vmap against a loop), jaxprs, and the errors."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import scipy.linalg as sla
from numpy_reference import assert_close, check_jaxpr_roundtrip, check_vmap
from tc_testing import check_grads

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core import numpy as tnp
from lamina_tracing_core.lax import linalg as la
from lamina_tracing_core.primitives import impl_rules

RNG = np.random.RandomState(21)
GRAD_TOL = dict(atol=3e-2, rtol=3e-2, eps=1e-2)


def _per_matrix(fn: Callable[..., Any], *arrays: Any) -> Any:
    """``fn`` applied to each trailing matrix (all arrays share the batch dims)."""
    arrays = tuple(np.asarray(a) for a in arrays)
    batch = arrays[0].shape[:-2] if arrays[0].ndim >= 2 else arrays[0].shape[:-1]
    outs = [fn(*(a[idx] for a in arrays)) for idx in np.ndindex(*batch)]
    if not batch:
        return outs[0]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[i] for o in outs]).reshape(*batch, *outs[0][i].shape)
                     for i in range(len(outs[0])))
    return np.stack(outs).reshape(*batch, *outs[0].shape)


def _perm_of(piv: Any, m: int) -> Any:
    perm = np.arange(m, dtype=np.int32)
    for i, j in enumerate(piv):
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _ref_cholesky(x: Any) -> Any:
    def one(a: Any) -> Any:
        try:
            return np.linalg.cholesky(a).astype(a.dtype)
        except np.linalg.LinAlgError:
            return np.full_like(a, np.nan)
    return _per_matrix(one, x)


def _ref_trsm(a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool,
              conjugate_a: bool, unit_diagonal: bool) -> Any:
    def one(am: Any, bm: Any) -> Any:
        op = np.tril(am) if lower else np.triu(am)
        if unit_diagonal:
            op = op - np.diag(np.diag(op)) + np.eye(len(op), dtype=op.dtype)
        if transpose_a:
            op = op.T
        if conjugate_a:
            op = op.conj()
        x = np.linalg.solve(op, bm) if left_side else np.linalg.solve(op.T, bm.T).T
        return x.astype(bm.dtype)
    return _per_matrix(one, a, b)


def _ref_lu(x: Any) -> Any:
    m = np.asarray(x).shape[-2]

    def one(a: Any) -> Any:
        with warnings.catch_warnings():  # singular input is a case under test
            warnings.simplefilter("ignore", sla.LinAlgWarning)
            lu_, piv = sla.lu_factor(a)
        piv = piv.astype(np.int32)
        return lu_.astype(a.dtype), piv, _perm_of(piv, m)
    return list(_per_matrix(one, x))


def _ref_pivots(p: Any, *, permutation_size: int) -> Any:
    p = np.asarray(p)
    out = [_perm_of(p[idx], permutation_size) for idx in np.ndindex(*p.shape[:-1])]
    return np.stack(out).reshape(*p.shape[:-1], permutation_size)


def _ref_eigh(x: Any, *, lower: bool, sort_eigenvalues: bool, subset_by_index: Any) -> Any:
    w, v = np.linalg.eigh(np.asarray(x), UPLO="L" if lower else "U")
    return [v.astype(x.dtype), w.astype(np.abs(x).dtype)]


def _ref_qr(x: Any, *, pivoting: bool, full_matrices: bool, use_magma: Any) -> Any:
    q, r = np.linalg.qr(np.asarray(x), mode="complete" if full_matrices else "reduced")
    return [q.astype(x.dtype), r.astype(x.dtype)]


def _ref_svd(x: Any, *, full_matrices: bool, compute_uv: bool, subset_by_index: Any,
             algorithm: Any) -> Any:
    a = np.asarray(x)
    if not compute_uv:
        return [np.linalg.svd(a, compute_uv=False).astype(np.abs(a).dtype)]
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return [s.astype(np.abs(a).dtype), u.astype(a.dtype), vh.astype(a.dtype)]


def _ref_eig(x: Any, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
             enable_eigvec_derivs: bool) -> Any:
    a = np.asarray(x)
    cdtype = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    w, vr = np.linalg.eig(a)
    outs = [w.astype(cdtype)]
    if compute_left_eigenvectors:
        outs.append(np.linalg.inv(vr).conj().swapaxes(-1, -2).astype(cdtype))
    if compute_right_eigenvectors:
        outs.append(vr.astype(cdtype))
    return outs


IMPLS = {la.eig_p: _ref_eig, la.cholesky_p: _ref_cholesky, la.triangular_solve_p: _ref_trsm, la.lu_p: _ref_lu,
         la.lu_pivots_to_permutation_p: _ref_pivots, la.eigh_p: _ref_eigh, la.qr_p: _ref_qr,
         la.svd_p: _ref_svd}


@contextlib.contextmanager
def _installed() -> Iterator[None]:
    saved = dict(impl_rules)
    impl_rules.update(IMPLS)
    try:
        yield
    finally:
        impl_rules.clear()
        impl_rules.update(saved)


@pytest.fixture(autouse=True, scope="module")
def _reference_impls() -> Iterator[None]:
    with _installed():
        yield


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


def spd(*shape: int) -> np.ndarray[Any, Any]:
    a = f32(*shape)
    n = shape[-1]
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


def well(*shape: int) -> np.ndarray[Any, Any]:
    """A well-conditioned square matrix."""
    return (f32(*shape) + 3 * np.eye(shape[-1], dtype=np.float32)).astype(np.float32)


def distinct_spd(n: int) -> np.ndarray[Any, Any]:
    """A symmetric positive-definite matrix with well-separated eigenvalues."""
    q, _ = np.linalg.qr(f32(n, n))
    return (q @ np.diag(np.arange(1, n + 1) * 2.0) @ q.T).astype(np.float32)


def full_rank(m: int, n: int) -> np.ndarray[Any, Any]:
    """An ``m x n`` matrix whose leading ``min(m, n)`` block is well conditioned."""
    out = f32(m, n)
    k = min(m, n)
    out[:k, :k] += 3 * np.eye(k, dtype=np.float32)
    return out


# --- cholesky / triangular_solve ---------------------------------------------------------

def test_cholesky_values_grads_vmap() -> None:
    s = spd(3, 3)
    out = check_jaxpr_roundtrip(lx.linalg.cholesky, [s])
    assert_close(out, np.linalg.cholesky(s), rtol=1e-5, atol=1e-5)
    check_grads(lambda x: la.cholesky(x), [s], 2, **GRAD_TOL)
    check_vmap(la.cholesky, [spd(2, 3, 3)], [1], atol=1e-5)
    bad = np.asarray(la.cholesky(-np.eye(2, dtype=np.float32)))
    assert np.isnan(bad[np.tril_indices(2)]).all() and bad[0, 1] == 0  # NaNs, as in JAX


@pytest.mark.parametrize("left_side,lower,transpose_a", [
    (True, True, False), (False, False, True), (True, False, True)])
def test_triangular_solve(left_side: bool, lower: bool, transpose_a: bool) -> None:
    a = well(3, 3)
    b = f32(3, 2) if left_side else f32(2, 3)

    def fun(x: Any, y: Any) -> Any:
        return la.triangular_solve(x, y, left_side=left_side, lower=lower,
                                   transpose_a=transpose_a)

    op = np.tril(a) if lower else np.triu(a)
    op = op.T if transpose_a else op
    expected = np.linalg.solve(op, b) if left_side else b @ np.linalg.inv(op)
    assert_close(fun(a, b), expected, rtol=1e-4, atol=1e-5)
    check_grads(fun, [a, b], 2, **GRAD_TOL)
    check_vmap(fun, [a, b], [0, None], atol=1e-4, rtol=1e-4)
    check_vmap(fun, [a, b], [None, 1], atol=1e-4, rtol=1e-4)


def test_triangular_solve_transposes_in_b() -> None:
    a, b, w = well(3, 3), f32(3, 2), f32(3, 2)
    _, pullback = api.vjp(lambda y: la.triangular_solve(a, y, left_side=True, lower=True), b)
    (ct,) = pullback(w)
    assert_close(ct, np.linalg.solve(np.tril(a).T, w), rtol=1e-4, atol=1e-5)


def test_cholesky_and_solve_errors() -> None:
    with pytest.raises(ValueError, match="cholesky: argument 'x' must be a batch of square"):
        la.cholesky(f32(2, 3))
    with pytest.raises(TypeError, match="cholesky: argument 'x' must have a floating"):
        la.cholesky(np.eye(2, dtype=np.int32))
    with pytest.raises(ValueError, match="triangular_solve: b.shape\\[-2\\]"):
        la.triangular_solve(well(3, 3), f32(2, 2), left_side=True)
    with pytest.raises(ValueError, match="linalg.solve: argument 'b' of shape"):
        tnp.linalg.solve(well(3, 3), f32(2))
    with pytest.raises(ValueError, match="linalg.inv: argument 'a' must be a"):
        tnp.linalg.inv(f32(2, 3))
    with pytest.raises(ValueError, match="linalg.det: argument 'a' must have at least two"):
        tnp.linalg.det(f32(3))


# --- LU and what is built on it --------------------------------------------------------

def test_lu_and_permutation() -> None:
    a = f32(2, 4, 3)
    lu_, piv, perm = check_jaxpr_roundtrip(la.lu, [a])
    for i in range(2):
        ref_lu, ref_piv = sla.lu_factor(a[i])
        assert_close(lu_[i], ref_lu, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(piv[i]), ref_piv)
    np.testing.assert_array_equal(np.asarray(la.lu_pivots_to_permutation(piv, 4)),
                                  np.asarray(perm))
    check_grads(lambda x: la.lu(x)[0], [well(3, 3)], 2, **GRAD_TOL)
    check_grads(lambda x: la.lu(x)[0], [f32(4, 3)], 1, **GRAD_TOL)
    check_vmap(lambda x: la.lu(x), [f32(2, 3, 3)], [2])


@pytest.mark.parametrize("name,fun,make", [
    ("solve", lambda a, b: tnp.linalg.solve(a, b), lambda: [well(3, 3), f32(3, 2)]),
    ("solve_vec", lambda a, b: tnp.linalg.solve(a, b), lambda: [well(3, 3), f32(3)]),
    ("inv", lambda a: tnp.linalg.inv(a), lambda: [well(3, 3)]),
    ("det", lambda a: tnp.linalg.det(a), lambda: [well(3, 3)]),
    ("slogdet", lambda a: tnp.linalg.slogdet(a)[1], lambda: [well(3, 3)]),
])
def test_lu_based(name: str, fun: Any, make: Any) -> None:
    args = make()
    refs = {"solve": np.linalg.solve, "solve_vec": np.linalg.solve, "inv": np.linalg.inv,
            "det": np.linalg.det, "slogdet": lambda a: np.linalg.slogdet(a)[1]}
    assert_close(fun(*args), refs[name](*args), rtol=1e-4, atol=1e-5)
    check_grads(fun, args, 2, **GRAD_TOL)
    check_vmap(fun, args, [0] + [None] * (len(args) - 1), atol=1e-4, rtol=1e-4)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")
def test_det_slogdet_singular_and_sign() -> None:
    sing = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    assert float(tnp.linalg.det(sing)) == 0.0
    sign, logdet = tnp.linalg.slogdet(sing)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    a = well(3, 3)
    sign, logdet = tnp.linalg.slogdet(-a)
    ref = np.linalg.slogdet(-a)
    assert float(sign) == ref[0]
    assert_close(logdet, ref[1], rtol=1e-5)


# --- eigh, qr, svd and what is built on them ----------------------------------------------

def test_eigh() -> None:
    s = distinct_spd(3)
    w, v = tnp.linalg.eigh(s)
    assert_close(w, np.linalg.eigvalsh(s), rtol=1e-4, atol=1e-4)
    assert_close(np.asarray(v) @ np.diag(np.asarray(w)) @ np.asarray(v).T, s, atol=1e-4)
    check_grads(lambda x: tnp.linalg.eigvalsh(x), [s], 2, **GRAD_TOL)
    # eigenvectors up to sign: differentiate a sign-invariant function of them.
    check_grads(lambda x: tnp.linalg.eigh(x)[1] ** 2, [s], 1, **GRAD_TOL)
    check_vmap(lambda x: tnp.linalg.eigvalsh(x), [distinct_spd(3)], [0], atol=1e-4)


def test_eig_eigenvalues_and_their_derivative() -> None:
    a = well(3, 3)
    w, v = tnp.linalg.eig(a)
    assert np.asarray(w).dtype == np.complex64
    assert_close(np.sort_complex(np.asarray(w)), np.sort_complex(np.linalg.eigvals(a)).astype(np.complex64),
                 rtol=1e-4, atol=1e-4)
    # a symmetric function of the eigenvalues: the order LAPACK returns does not matter.
    check_grads(lambda x: tnp.sum(tnp.real(tnp.linalg.eigvals(x) ** 3)), [a], 1, **GRAD_TOL)
    check_vmap(tnp.linalg.eigvals, [a], [0], atol=1e-4)
    with pytest.raises(ValueError, match="eig: derivatives of non-symmetric eigenvectors"):
        api.jvp(lambda x: tnp.linalg.eig(x)[1], (a,), (a,))
    # with the opt-in, the eigenvectors' derivative, through v diag(w) v^H (free of
    # the eigenvectors' order and phases).
    sym = distinct_spd(3)

    def vecs(x: Any) -> Any:
        w, v = la.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)
        return tnp.real(tnp.matmul(v * w[None, :], tnp.conj(v).T))

    check_grads(vecs, [sym], 1, modes=("fwd",), **GRAD_TOL)


@pytest.mark.parametrize("shape,mode", [((4, 3), "reduced"), ((3, 3), "complete"),
                                        ((3, 4), "reduced")])
def test_qr(shape: tuple[int, int], mode: str) -> None:
    a = full_rank(*shape)
    q, r = tnp.linalg.qr(a, mode=mode)
    rq, rr = np.linalg.qr(a, mode=mode)
    assert_close(q, rq, atol=1e-5)
    assert_close(r, rr, atol=1e-5)
    check_grads(lambda x: tnp.linalg.qr(x, mode=mode)[1], [a], 2, **GRAD_TOL)
    check_grads(lambda x: tnp.linalg.qr(x, mode=mode)[0], [a], 1, **GRAD_TOL)
    check_vmap(lambda x: tnp.linalg.qr(x, mode=mode), [a], [0], atol=1e-4)


def test_qr_derivative_of_full_tall_is_refused() -> None:
    with pytest.raises(ValueError, match="qr: the derivative of the full_matrices=True"):
        api.jvp(lambda x: la.qr(x, full_matrices=True), (f32(4, 3),), (f32(4, 3),))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4)])
def test_svd(shape: tuple[int, int]) -> None:
    a = full_rank(*shape)
    u, s, vh = tnp.linalg.svd(a, full_matrices=False)
    assert_close(s, np.linalg.svd(a, compute_uv=False), rtol=1e-5, atol=1e-5)
    assert_close((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a, atol=1e-5)
    check_grads(tnp.linalg.svdvals, [a], 2, **GRAD_TOL)
    # singular vectors up to sign: u * vh^T's columns products are sign-free.
    check_grads(lambda x: (lambda u, s, vh: u @ vh)(*tnp.linalg.svd(x, full_matrices=False)),
                [a], 1, **GRAD_TOL)
    check_vmap(tnp.linalg.svdvals, [a], [0], atol=1e-4)


def test_svd_based() -> None:
    a = full_rank(4, 3)
    assert_close(tnp.linalg.pinv(a), np.linalg.pinv(a), atol=1e-5)
    check_grads(tnp.linalg.pinv, [a], 2, **GRAD_TOL)
    assert int(tnp.linalg.matrix_rank(a)) == 3
    low = (f32(4, 1) @ f32(1, 3)).astype(np.float32)
    assert int(tnp.linalg.matrix_rank(low)) == 1
    for ord_ in (2, -2, "nuc"):
        assert_close(tnp.linalg.norm(a, ord_), np.linalg.norm(a, ord_), rtol=1e-5)
    check_grads(lambda x: tnp.linalg.norm(x, "nuc"), [a], 1, **GRAD_TOL)
    sq = well(3, 3)
    assert_close(tnp.linalg.cond(sq), np.linalg.cond(sq), rtol=1e-4)
    assert_close(tnp.linalg.cond(sq, 1), np.linalg.cond(sq, 1), rtol=1e-4)
    b = f32(4)
    x, resid, rank, sv = tnp.linalg.lstsq(a, b)
    rx, rres, rrank, rsv = np.linalg.lstsq(a, b, rcond=None)
    assert_close(x, rx, atol=1e-5)
    assert_close(resid, rres, rtol=1e-4, atol=1e-5)
    assert int(rank) == rrank


def test_matrix_power_and_friends() -> None:
    a = well(3, 3)
    for n in (0, 1, 3, -2):
        assert_close(tnp.linalg.matrix_power(a, n), np.linalg.matrix_power(a, n),
                     rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="matrix_power: argument 'n' must be an integer"):
        tnp.linalg.matrix_power(a, 1.5)
    b, c = f32(3, 2), f32(2)
    assert_close(tnp.linalg.multi_dot([a, b, c]), a @ b @ c, rtol=1e-5, atol=1e-5)
    t = well(6, 6).reshape(2, 3, 6)
    assert_close(tnp.linalg.tensorinv(t, 2), np.linalg.tensorinv(t, 2), rtol=1e-4, atol=1e-4)
    rhs = f32(2, 3)
    assert_close(tnp.linalg.tensorsolve(t, rhs), np.linalg.tensorsolve(t, rhs), rtol=1e-4,
                 atol=1e-4)
