"""lax.linalg's condensed forms and helpers: hessenberg, schur, tridiagonal,
tridiagonal_solve, ormqr, symmetric_product and cholesky_update, against
SciPy/NumPy (eagerly, under jit and vmap), their derivatives, the traced
implementations other platforms lower to, and the cuSOLVER/cuSPARSE targets
in the text lowered for cuda/rocm from this host (the targets and attributes
JAX 0.10.2 emits for the same calls)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.linalg as sl

import lamina
from lamina import lax
from lamina.test_util import check_grads
from lamina_mlir_lowering.lax_rules import linalg as lowering_rules

L = lax.linalg
RNG = np.random.default_rng(7)
SQ = RNG.standard_normal((3, 5, 5)).astype(np.float32)
SYM = SQ + np.swapaxes(SQ, -1, -2)
DL, D, DU = RNG.standard_normal((3, 6)).astype(np.float32)
D = D + 5
RHS = RNG.standard_normal((2, 6, 2)).astype(np.float32)
TRI = np.diag(D) + np.diag(DL[1:], -1) + np.diag(DU[:-1], 1)


def close(actual, expected, atol=1e-4):
    np.testing.assert_allclose(np.asarray(actual), expected, atol=atol, rtol=1e-4)


def test_hessenberg_matches_scipy_batched():
    h, taus = L.hessenberg(SQ)
    assert taus.shape == (3, 4)
    for i in range(3):
        close(np.triu(np.asarray(h)[i], -1), sl.hessenberg(SQ[i]))
    h_jit, _ = lamina.jit(L.hessenberg)(SQ)
    close(h_jit, h)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_schur_reconstructs_and_is_triangular(dtype):
    x = (SQ + 1j * SQ[::-1]).astype(dtype) if dtype == np.complex64 else SQ
    t, z = (np.asarray(v) for v in lamina.vmap(L.schur)(x))
    close(z @ t @ np.conj(np.swapaxes(z, -1, -2)), x)
    below = np.tril(t, -1) if dtype == np.complex64 else np.tril(t, -2)
    assert np.abs(below).max() < 1e-5
    t_only, = L.schur(x[0], compute_schur_vectors=False)
    close(np.sort_complex(np.diag(sl.schur(x[0].astype(np.complex64), output="complex")[0])),
          np.sort_complex(np.linalg.eigvals(np.asarray(t_only))), atol=1e-3)
    with pytest.raises(ValueError, match="schur: sort_eig_vals=True is not supported"):
        L.schur(x[0], sort_eig_vals=True)


@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_keeps_the_spectrum(lower):
    _, d, e, taus = L.tridiagonal(SYM, lower=lower)
    assert taus.shape == (3, 4) and d.dtype == np.float32
    d, e = np.asarray(d), np.asarray(e)
    for i in range(3):
        t = np.diag(d[i]) + np.diag(e[i], 1) + np.diag(e[i], -1)
        close(np.linalg.eigvalsh(t), np.linalg.eigvalsh(SYM[i]), atol=1e-3)


def test_tridiagonal_solve_values_jit_vmap_and_traced_form():
    expected = np.linalg.solve(TRI, RHS)
    close(L.tridiagonal_solve(DL, D, DU, RHS[0]), expected[0])
    close(lamina.jit(L.tridiagonal_solve)(DL, D, DU, RHS[0]), expected[0])
    close(lamina.vmap(L.tridiagonal_solve, (None, None, None, 0))(DL, D, DU, RHS), expected)
    stacked = [np.stack([v, v]) for v in (DL, D, DU)]
    close(lamina.vmap(L.tridiagonal_solve)(*stacked, RHS), expected)
    # the Thomas-algorithm form lowered on platforms without a kernel
    close(lamina.jit(lowering_rules._tridiagonal_solve_impl)(DL, D, DU, RHS[0]), expected[0])
    perturbed = L.tridiagonal_solve(DL, D, DU, RHS[0], perturb_singular=True)
    close(perturbed, expected[0])


def test_tridiagonal_solve_derivatives():
    def f(dl, d, du, b):
        return L.tridiagonal_solve(dl, d, du, b)

    check_grads(f, (DL.astype(np.float64), D.astype(np.float64), DU.astype(np.float64),
                    RHS[0].astype(np.float64)), order=1, modes=("fwd", "rev"),
                atol=5e-2, rtol=5e-2, eps=1e-2)
    grad_b = lamina.grad(lambda b: f(DL, D, DU, b).sum())(RHS[0])
    close(grad_b, np.linalg.inv(TRI).T @ np.ones((6, 2)))


def test_tridiagonal_solve_errors_name_the_argument():
    with pytest.raises(TypeError, match="tridiagonal_solve: argument 'b' must have shape"):
        L.tridiagonal_solve(DL, D, DU, RHS[0, :5])
    with pytest.raises(TypeError, match="tridiagonal_solve: argument 'dl' must have a floating"):
        L.tridiagonal_solve(DL.astype(np.int32), D, DU, RHS[0])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_applies_q_without_forming_it(left, transpose):
    m = RNG.standard_normal((5, 3)).astype(np.float32)
    c = RNG.standard_normal((5, 4)).astype(np.float32)
    a, taus = L.geqrf(m)
    q = sl.qr(m)[0]
    q = q.T if transpose else q
    operand, expected = (c, q @ c) if left else (c.T, c.T @ q)
    close(L.ormqr(a, taus, operand, left=left, transpose=transpose), expected)
    traced = lamina.jit(lambda *xs: L.ormqr_traceable(*xs, left, transpose))
    close(traced(a, taus, operand), expected)


def test_symmetric_product_and_its_derivative():
    a, c = SQ[0], SYM[0]
    out = L.symmetric_product(a, c, alpha=2.0, beta=3.0, symmetrize_output=True)
    close(out, 2 * a @ a.T + 3 * c, atol=1e-3)
    check_grads(lambda a_, c_: L.symmetric_product(a_, c_, alpha=0.5, beta=2.0),
                (a.astype(np.float64), c.astype(np.float64)), order=2, atol=1e-2, rtol=1e-2)


def test_cholesky_update_is_the_rank_one_update():
    r = np.linalg.cholesky(SYM[0] @ SYM[0].T + np.eye(5)).T.astype(np.float32)
    w = RNG.standard_normal(5).astype(np.float32)
    for updated in (L.cholesky_update(r, w),
                    lamina.vmap(L.cholesky_update)(np.stack([r, r]), np.stack([w, w]))[1]):
        updated = np.asarray(updated)
        close(updated.T @ updated, r.T @ r + np.outer(w, w), atol=1e-3)
        assert np.abs(np.tril(updated, -1)).max() < 1e-5


def _custom_calls(fun, *args, platform):
    text = lamina.jit(fun).trace(*args).lower(lowering_platforms=(platform,)).as_text()
    return text, re.findall(r"stablehlo.custom_call @(\w+)\(", text)


@pytest.mark.parametrize("platform,solver,short", [("cuda", "cusolver", "cu"),
                                                   ("rocm", "hipsolver", "hip")])
def test_gpu_targets_from_this_host(platform, solver, short):
    def fun(x, sq, d, b):
        return (L.svd(x, full_matrices=False), L.svd(x, compute_uv=False), L.eig(sq),
                L.tridiagonal(sq), L.tridiagonal_solve(d, d, d, b),
                L.ormqr(sq, d[:4], sq))

    args = (np.ones((2, 5, 3), np.float32), np.ones((4, 4), np.float32),
            np.ones(4, np.float32), np.ones((4, 2), np.float32))
    text, calls = _custom_calls(fun, *args, platform=platform)
    assert calls == [f"{solver}_gesvdj_ffi", f"{solver}_gesvdj_ffi",
                     f"{short}hybrid_eig_real", f"{solver}_sytrd_ffi",
                     f"{short}sparse_gtsv2_ffi", f"{solver}_ormqr_ffi"]
    assert "mhlo.backend_config = {compute_uv = false, full_matrices = true}" in text
    assert 'mhlo.backend_config = {left = true, magma = "auto", right = true}' in text
    large = np.ones((1100, 4), np.float32)
    text, calls = _custom_calls(lambda x: L.svd(x, full_matrices=False), large,
                                platform=platform)
    assert calls == [f"{solver}_gesvd_ffi"] and "transposed = false" in text
    _, calls = _custom_calls(lambda a, c: (L.symmetric_product(a, c), L.cholesky_update(a, c[0])),
                             args[1], args[1], platform="cuda")
    assert calls == ["cusolver_syrk_ffi", "cu_cholesky_update_ffi"]


def test_tpu_custom_calls_as_jax_emits_them():
    sq = np.ones((2, 4, 4), np.float32)
    text, calls = _custom_calls(
        lambda a: (L.lu(a), L.qr(a, full_matrices=False), L.eigh(a),
                   L.eigh(a, lower=False, sort_eigenvalues=False), L.cholesky(a)),
        sq, platform="tpu")
    assert calls == ["LuDecomposition", "Qr", "ProductOfElementaryHouseholderReflectors", "Eigh",
                     "Eigh"]
    assert "@LuDecomposition(%arg0) {api_version = 2 : i32" in text
    assert 'backend_config = "1,1,100,1e-6"' in text and 'backend_config = "0,0,100,1e-6"' in text
    assert "stablehlo.cholesky" in text


def test_tpu_lowers_the_traced_forms():
    sq, d, b = np.ones((4, 4), np.float32), np.ones(4, np.float32), np.ones((4, 2), np.float32)
    text, calls = _custom_calls(
        lambda sq, d, b: (L.tridiagonal_solve(d, d, d, b), L.ormqr(sq, d, sq),
                          L.symmetric_product(sq, sq), L.cholesky_update(sq, d)),
        sq, d, b, platform="tpu")
    assert calls == [] and "stablehlo.while" in text


def test_bad_input_errors_name_the_traced_arguments():
    non_square = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"linalg.inv: argument 'a' must be a \(batch of\) "
                       r"square matrices, got shape \(3, 4\) \(traced operand: float32\[3,4\] "
                       r"\(from params\['w'\]\) while tracing"):
        lamina.jit(lambda params: lamina.numpy.linalg.inv(params["w"]))({"w": non_square})
    with pytest.raises(ValueError, match=r"linalg.solve: argument 'b' .* \(traced operands: "
                       r"float32\[3,3\] \(from a\) and float32\[4,2\] \(from b\)"):
        lamina.jit(lambda a, b: lamina.numpy.linalg.solve(a, b))(
            np.eye(3, dtype=np.float32), np.ones((4, 2), np.float32))
    with pytest.raises(TypeError, match=r"cholesky: argument 'x' must have a floating or complex "
                       r"dtype, got int32 \(traced operand: int32\[3,3\] \(from m\)"):
        lamina.vmap(lambda m: L.cholesky(m))(np.ones((2, 3, 3), np.int32))
    with pytest.raises(TypeError, match=r"reduce_window: window_dimensions has 2 entries but the "
                       r"operand has rank 3 .* \(traced operand: float32\[4,4,3\] \(from img\)"):
        lamina.jit(lambda img: lax.reduce_window(img, 0.0, lax.add, (2, 2), (1, 1), "VALID"))(
            np.ones((4, 4, 3), np.float32))
    # singular / not positive definite: NaNs (or infs), never an exception, as JAX
    assert not np.isfinite(np.asarray(lamina.numpy.linalg.inv(np.zeros((2, 2), np.float32)))).all()
    assert np.isnan(np.asarray(L.cholesky(-np.eye(2, dtype=np.float32)))).any()


@pytest.mark.parametrize("shape,dtype", [((6, 3), np.float32), ((4, 4), np.complex64)])
def test_qdwh_is_the_polar_decomposition(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    if dtype == np.complex64:
        x = (x + 1j * RNG.standard_normal(shape)).astype(dtype)
    u, h, steps, converged = lamina.jit(L.qdwh)(x)
    u_ref, h_ref = sl.polar(x)
    close(u, u_ref, atol=1e-5)
    close(h, h_ref, atol=1e-5)
    assert bool(converged) and 0 < int(steps) < 10
    with pytest.raises(ValueError, match="qdwh: argument 'x' must be a matrix with at least"):
        L.qdwh(x.T[:2])


@pytest.mark.parametrize("shape,full", [((5, 3), True), ((2, 3, 4), False)])
def test_svd_through_the_polar_decomposition(shape, full):
    # what svd lowers to on tpu, run here on CPU
    x = RNG.standard_normal(shape).astype(np.float32)
    s, u, vt = (np.asarray(v) for v in lamina.jit(
        lambda a: lowering_rules._svd_by_polar(a, full, True))(x))
    close(s, np.linalg.svd(x, compute_uv=False))
    k = s.shape[-1]
    close((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], x, atol=1e-5)
    gram = np.swapaxes(u, -1, -2) @ u
    close(gram, np.broadcast_to(np.eye(u.shape[-1]), gram.shape), atol=1e-5)
    _, calls = _custom_calls(lambda a: L.svd(a, full_matrices=full), x, platform="tpu")
    assert {"Qr", "ProductOfElementaryHouseholderReflectors", "Eigh"} == set(calls)
