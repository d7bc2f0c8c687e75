"""lamina.scipy.linalg, lamina.numpy.linalg's decompositions and lax.linalg run
through the LAPACK custom calls: values against SciPy/NumPy (float32,
complex64, float64 under x64), eagerly, under jit and vmap, derivatives, the
custom calls in the lowered text, NaNs for failed factorizations, and errors.
(The rules' second-order derivatives are checked in tracing-core's
test_tc_linalg_decompositions.py; here first order runs the compiled kernels.)"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import lamina
import lamina.numpy as jnp
import lamina.scipy.linalg as jsl
from lamina import lax
from lamina.test_util import check_grads

RNG = np.random.default_rng(21)
A = (RNG.standard_normal((4, 4)) + 3 * np.eye(4)).astype(np.float32)
_R = RNG.standard_normal((4, 4))
S = (_R @ _R.T + 4 * np.eye(4)).astype(np.float32)
B = RNG.standard_normal((4, 2)).astype(np.float32)
BATCH = (RNG.standard_normal((3, 4, 4)) + 3 * np.eye(4)).astype(np.float32)
GRAD = dict(atol=3e-2, rtol=3e-2, eps=1e-2)


def check(actual, expected, rtol=2e-4, atol=2e-5):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected.astype(actual.dtype), rtol=rtol, atol=atol)


def test_cholesky_family_eager_jit_vmap():
    for lower in (True, False):
        c = jsl.cho_factor(S, lower=lower)
        assert c[1] is lower
        check(jsl.cho_solve(c, B), sl.cho_solve(sl.cho_factor(S, lower=lower), B))
    check(jnp.linalg.cholesky(S), np.linalg.cholesky(S))
    check(jnp.linalg.cholesky(S, upper=True), np.linalg.cholesky(S).T)
    solve = lamina.jit(lambda s, b: jsl.cho_solve(jsl.cho_factor(s, lower=True), b))
    check(solve(S, B), np.linalg.solve(S, B))
    check(solve(S, B[:, 0]), np.linalg.solve(S, B[:, 0]))
    spd_batch = BATCH @ np.swapaxes(BATCH, 1, 2)
    check(lamina.vmap(jnp.linalg.cholesky)(spd_batch), np.linalg.cholesky(spd_batch),
          rtol=1e-3, atol=1e-4)
    check_grads(lambda s: jsl.cho_solve(jsl.cho_factor(s), B), (S,), 1, **GRAD)


@pytest.mark.parametrize("trans", [0, "T", 2])
def test_solve_triangular(trans):
    for lower in (True, False):
        check(jsl.solve_triangular(A, B, trans=trans, lower=lower),
              sl.solve_triangular(A, B, trans=trans, lower=lower))
    check(jsl.solve_triangular(A, B[:, 0], lower=True, unit_diagonal=True),
          sl.solve_triangular(A, B[:, 0], lower=True, unit_diagonal=True))


def test_lu_family():
    for a in (A, A[:, :3], A[:3]):
        for got, want in zip(jsl.lu(a), sl.lu(a)):
            check(got, want)
    lu_piv = jsl.lu_factor(A)
    ref = sl.lu_factor(A)
    check(lu_piv[0], ref[0])
    np.testing.assert_array_equal(np.asarray(lu_piv[1]), ref[1])
    for trans in (0, 1, 2):
        check(jsl.lu_solve(lu_piv, B, trans=trans), sl.lu_solve(ref, B, trans=trans))
    lu_, piv, perm = lamina.jit(lax.linalg.lu)(BATCH)
    for i in range(3):
        check(lu_[i], sl.lu_factor(BATCH[i])[0])
        check(np.asarray(jsl.lu(BATCH[i])[0]).T @ BATCH[i],
              BATCH[i][np.asarray(perm[i])])
    check(lamina.vmap(lambda a: jsl.lu_solve(jsl.lu_factor(a), B))(BATCH),
          np.linalg.solve(BATCH, B))


def test_numpy_solvers():
    check(jnp.linalg.solve(BATCH, B), np.linalg.solve(BATCH, B))
    check(jnp.linalg.inv(BATCH), np.linalg.inv(BATCH), rtol=1e-3, atol=1e-5)
    check(lamina.jit(jnp.linalg.det)(BATCH), np.linalg.det(BATCH), rtol=1e-4)
    sign, logdet = lamina.vmap(jnp.linalg.slogdet)(-BATCH)
    ref_sign, ref_logdet = np.linalg.slogdet(-BATCH)
    check(sign, ref_sign)
    check(logdet, ref_logdet)
    check(jsl.solve(A, B), sl.solve(A, B))
    check(jsl.solve(S, B, assume_a="pos"), sl.solve(S, B, assume_a="pos"))
    check(jsl.inv(A), sl.inv(A), rtol=1e-3)
    check(jsl.det(A), sl.det(A), rtol=1e-4)
    a3 = A[:3, :3] / 2
    for fun in (jnp.linalg.det, jnp.linalg.inv, lambda a: jnp.linalg.solve(a, B[:3])):
        check_grads(fun, (a3,), 1, **GRAD)


def test_singular_and_indefinite_give_nans_not_errors():
    assert np.isnan(np.asarray(jnp.linalg.cholesky(-S))).any()
    singular = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    assert float(jnp.linalg.det(singular)) == 0.0
    assert not np.isfinite(np.asarray(jnp.linalg.inv(singular))).all()


def test_eigh_qr_svd():
    w, v = jsl.eigh(S)
    check(w, sl.eigh(S, eigvals_only=True), rtol=1e-4, atol=1e-4)
    check(np.asarray(v) @ np.diag(np.asarray(w)) @ np.asarray(v).T, S, rtol=1e-3, atol=1e-3)
    check(lamina.vmap(jnp.linalg.eigvalsh)(np.stack([S, 2 * S])),
          np.linalg.eigvalsh(np.stack([S, 2 * S])), rtol=1e-4, atol=1e-4)
    check_grads(jnp.linalg.eigvalsh, (S,), 1, **GRAD)
    for a in (A[:, :3], A[:3]):
        for mode, smode in (("full", "full"), ("economic", "economic")):
            for got, want in zip(jsl.qr(a, mode=mode), sl.qr(a, mode=smode)):
                check(got, want, atol=1e-5)
    check_grads(lambda a: jnp.linalg.qr(a)[1], (A[:, :3],), 1, **GRAD)
    for a in (A, A[:, :3], A[:3]):
        check(jsl.svd(a, compute_uv=False), sl.svd(a, compute_uv=False))
        u, s, vh = jsl.svd(a, full_matrices=False)
        check((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a, atol=1e-5)
    check(lamina.jit(jnp.linalg.svdvals)(BATCH), np.linalg.svd(BATCH, compute_uv=False))
    check(jnp.linalg.pinv(A[:, :3]), np.linalg.pinv(A[:, :3]), atol=1e-5)
    check(jnp.linalg.norm(BATCH, 2, axis=(1, 2)), np.linalg.norm(BATCH, 2, axis=(1, 2)))
    check(jnp.linalg.norm(A, "nuc"), np.linalg.norm(A, "nuc"))
    check(jnp.linalg.cond(A), np.linalg.cond(A), rtol=1e-3)
    assert int(jnp.linalg.matrix_rank(A[:, :3] @ A[:3, :3][:, :1].repeat(3, 1).T)) == 1
    x, resid, rank, sv = jnp.linalg.lstsq(A[:, :3], B)
    rx, rres, rrank, rsv = np.linalg.lstsq(A[:, :3], B, rcond=None)
    check(x, rx, atol=1e-5)
    check(resid, rres, rtol=1e-3, atol=1e-4)
    check(sv, rsv)
    assert int(rank) == rrank


def test_eig_on_cpu():
    w, v = jnp.linalg.eig(BATCH)
    for i in range(3):
        check(np.sort_complex(np.asarray(w[i])), np.sort_complex(np.linalg.eigvals(BATCH[i])),
              rtol=1e-4, atol=1e-4)
        check(BATCH[i] @ np.asarray(v[i]), np.asarray(v[i]) * np.asarray(w[i]), atol=1e-4)
    w1, vl, vr = lax.linalg.eig(A)
    check(np.asarray(vl).conj().T @ A, np.asarray(w1)[:, None] * np.asarray(vl).conj().T,
          atol=1e-4)
    check(lamina.vmap(jnp.linalg.eigvals)(BATCH), w, atol=1e-5)
    check_grads(lambda a: jnp.sum(jnp.real(jnp.linalg.eigvals(a) ** 3)), (A,), 1, **GRAD)
    assert "@lapack_sgeev_ffi(" in lamina.jit(jnp.linalg.eigvals).lower(A).as_text()


def test_complex64_and_float64():
    z = (A + 1j * RNG.standard_normal((4, 4))).astype(np.complex64)
    h = (z @ z.conj().T + 4 * np.eye(4)).astype(np.complex64)
    check(jnp.linalg.cholesky(h), np.linalg.cholesky(h), rtol=1e-3, atol=1e-4)
    check(jnp.linalg.solve(z, B.astype(np.complex64)), np.linalg.solve(z, B), rtol=1e-3,
          atol=1e-4)
    check(jnp.linalg.eigvalsh(h), np.linalg.eigvalsh(h), rtol=1e-4, atol=1e-3)
    check(jnp.linalg.svdvals(z), np.linalg.svd(z, compute_uv=False), rtol=1e-4, atol=1e-4)
    check(jnp.linalg.det(z), np.linalg.det(z), rtol=1e-3)
    check(jsl.solve_triangular(z, B.astype(np.complex64), trans="C", lower=True),
          sl.solve_triangular(z, B, trans="C", lower=True), rtol=1e-3, atol=1e-4)
    with lamina.enable_x64(True):
        a64 = A.astype(np.float64)
        out = jnp.linalg.inv(a64)
        assert np.asarray(out).dtype == np.float64
        check(out, np.linalg.inv(a64), rtol=1e-10, atol=1e-12)
        check(jnp.linalg.eigvalsh(S.astype(np.float64)), np.linalg.eigvalsh(S), rtol=1e-10)


def test_lowering_uses_lapack_custom_calls():
    text = lamina.jit(lambda a, b: (jnp.linalg.cholesky(a), jnp.linalg.solve(a, b),
                                    jnp.linalg.eigh(a), jnp.linalg.qr(a),
                                    jnp.linalg.svd(a))).lower(BATCH, B).as_text()
    for target in ("lapack_spotrf_ffi", "lapack_sgetrf_ffi", "lapack_strsm_ffi",
                   "lapack_ssyevd_ffi", "lapack_sgeqrf_ffi", "lapack_sorgqr_ffi",
                   "lapack_sgesdd_ffi"):
        assert f"@{target}(" in text, target
    assert "num_batch_dims = \"1\"" in text
    assert "operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]" in text
    assert "uplo = 76 : ui8" in text


@pytest.mark.parametrize("platform,solver,short", [("cuda", "cusolver", "cu"),
                                                   ("rocm", "hipsolver", "hip")])
def test_gpu_lowering_from_this_host(platform, solver, short):
    def fun(a):
        return (jnp.linalg.cholesky(a), lax.linalg.lu(a), jnp.linalg.eigh(a), jnp.linalg.qr(a),
                jsl.solve_triangular(a, a, lower=True))

    text = lamina.jit(fun).trace(BATCH).lower(lowering_platforms=(platform,)).as_text()
    for target in (f"{solver}_potrf_ffi", f"{solver}_getrf_ffi",
                   f"{short}_lu_pivots_to_permutation", f"{solver}_syevd_ffi",
                   f"{solver}_geqrf_ffi", f"{solver}_orgqr_ffi"):
        assert f"@{target}(" in text, target
    assert "mhlo.backend_config = {lower = true}" in text
    assert "stablehlo.triangular_solve" in text
    tpu = lamina.jit(jnp.linalg.cholesky).trace(S).lower(lowering_platforms=("tpu",)).as_text()
    assert "stablehlo.cholesky" in tpu


def test_block_diag_and_toeplitz():
    check(jsl.block_diag(A[:2, :3], np.ones(2, np.float32), np.float32(5.0)),
          sl.block_diag(A[:2, :3], np.ones(2), 5.0))
    c, r = np.arange(3.0, dtype=np.float32), np.arange(5.0, dtype=np.float32) + 10
    check(jsl.toeplitz(c, r), sl.toeplitz(c, r))
    check(jsl.toeplitz(c), sl.toeplitz(c))


def test_errors_name_the_function_and_argument():
    with pytest.raises(ValueError, match="cho_factor: argument 'a' must be a"):
        jsl.cho_factor(A[:3])
    with pytest.raises(ValueError, match="solve_triangular: argument 'b' of shape"):
        jsl.solve_triangular(A, B[:3])
    with pytest.raises(ValueError, match="solve_triangular: invalid argument 'trans'"):
        jsl.solve_triangular(A, B, trans=3)
    with pytest.raises(TypeError, match="cho_solve: argument 'c_and_lower'"):
        jsl.cho_solve(A, B)
    with pytest.raises(ValueError, match="linalg.solve: argument 'b' of shape"):
        jnp.linalg.solve(A, B[:3])
    with pytest.raises(TypeError, match="cholesky: argument 'x' must have a floating"):
        lax.linalg.cholesky(np.eye(3, dtype=np.int32))
    with pytest.raises(ValueError, match="linalg.eigh: argument 'a' must be a"):
        jnp.linalg.eigh(A[:3])


def test_scipy_cholesky_reads_one_triangle_and_its_jvp_takes_the_tangent_as_given() -> None:
    """JAX's scipy.linalg.cholesky factors the triangle ``lower`` names and
    does not symmetrize (jnp.linalg.cholesky does), nor does the JVP
    symmetrize the tangent: the factor and its derivative are JAX 0.10.2's
    bits (recorded) for a matrix whose other triangle is not its mirror."""
    a = np.array([[4.0, 9.0, -7.0], [1.0, 3.0, 5.0], [0.5, -0.25, 2.0]], np.float32)
    t = np.array([[0.3, -1.0, 2.0], [0.7, 0.1, 0.4], [-0.2, 0.9, 0.05]], np.float32)

    def bits(x: object) -> list[int]:
        return np.asarray(x).ravel().view(np.uint32).tolist()

    factor = [1073741824, 0, 0, 1056964608, 1070875541, 0, 1048576000, 3194457995, 1068485938]
    tangent = [1033476506, 0, 0, 1051302298, 1030702985, 0, 3185573888, 1059680316, 3162546232]
    L, dL = lamina.jvp(lambda m: jsl.cholesky(m, lower=True), (a,), (t,))
    assert bits(L) == factor and bits(dL) == tangent
    U, dU = lamina.jvp(jsl.cholesky, (a.T,), (t.T,))
    assert bits(U) == bits(np.asarray(L).T) and bits(dU) == bits(np.asarray(dL).T)
    # jnp.linalg.cholesky symmetrizes: (a + a^T) / 2 is not positive definite
    assert np.isnan(np.asarray(lamina.jvp(jnp.linalg.cholesky, (a,), (t,))[1])[1, 0])
