"""lamina.scipy.linalg's matrix functions (expm, expm_frechet, sqrtm, funm,
polar, schur, rsf2csf, solve_sylvester), the decomposition wrappers added
beside them (cholesky, hessenberg, eigh_tridiagonal, qr_multiply) and the
structured matrices, against SciPy: eagerly, under jit and vmap where JAX
batches, with expm's derivatives (its Fréchet derivative)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import lamina
import lamina.numpy as jnp
import lamina.scipy.linalg as jsl
from lamina.test_util import check_grads

RNG = np.random.default_rng(11)
A = (0.8 * RNG.standard_normal((4, 4))).astype(np.float32)
E = RNG.standard_normal((4, 4)).astype(np.float32)
SPD = (A @ A.T + np.eye(4)).astype(np.float32)
EYE = np.eye(4, dtype=np.float32)


def close(actual, expected, atol=1e-4):
    np.testing.assert_allclose(np.asarray(actual), expected, atol=atol, rtol=1e-3)


EXPM = lamina.jit(jsl.expm)


def test_expm_values_batches_and_padé_degrees():
    for scale in (0.05, 0.5, 1.0, 8.0):  # every Padé degree, then squaring
        close(EXPM(scale * A), sl.expm(scale * A), atol=1e-4 * max(1.0, scale ** 4))
    close(EXPM(np.stack([A, 2 * A])), np.stack([sl.expm(A), sl.expm(2 * A)]), atol=1e-3)
    close(lamina.jit(lamina.vmap(jsl.expm))(np.stack([A, -A])),
          np.stack([sl.expm(A), sl.expm(-A)]))
    close(lamina.jit(lambda a: jsl.expm(a, upper_triangular=True))(np.triu(A)),
          sl.expm(np.triu(A)))
    assert np.isnan(np.asarray(lamina.jit(lambda a: jsl.expm(a, max_squarings=2))(1e6 * A))).all()


def test_expm_frechet_and_derivatives():
    expm_a, frechet = lamina.jit(jsl.expm_frechet)(A, E)
    close(expm_a, sl.expm(A))
    close(frechet, sl.expm_frechet(A, E)[1], atol=1e-3)
    close(lamina.jit(lambda a, e: jsl.expm_frechet(a, e, compute_expm=False))(A, E),
          sl.expm_frechet(A, E)[1], atol=1e-3)
    close(lamina.jvp(EXPM, (A,), (E,))[1], sl.expm_frechet(A, E)[1], atol=1e-3)
    check_grads(EXPM, (0.3 * A,), order=1, atol=3e-2, rtol=3e-2, eps=1e-2)


def test_sqrtm_and_funm():
    root = lamina.jit(jsl.sqrtm)(SPD)
    assert root.dtype == np.complex64
    close(root, sl.sqrtm(SPD))
    close(jsl.sqrtm(A + 3 * EYE), sl.sqrtm(A + 3 * EYE), atol=1e-3)
    close(lamina.jit(lambda a: jsl.funm(a, jnp.exp))(A), sl.expm(A), atol=1e-3)
    f, err = lamina.jit(lambda a: jsl.funm(a, jnp.sin, disp=False))(A)
    close(f, sl.funm(A, np.sin), atol=1e-3)
    assert 0 < float(err) < 1e-5
    with pytest.raises(ValueError, match="sqrtm: argument 'A' must be a square matrix"):
        jsl.sqrtm(A[:3])


@pytest.mark.parametrize("blocksize", [2, 3, 7])
def test_sqrtm_by_blocks(blocksize):
    # Blocks of 2 (some of 3), of 3 (one of 4) and a single block.
    m = RNG.standard_normal((7, 7)).astype(np.float32) + 4 * np.eye(7, dtype=np.float32)
    root = lamina.jit(lambda a: jsl.sqrtm(a, blocksize=blocksize))(m)
    close(root, sl.sqrtm(m.astype(np.float64)), atol=2e-4)
    close(np.asarray(root) @ np.asarray(root), m, atol=2e-4)


def test_schur_forms():
    t, z = jsl.schur(A)
    close(np.asarray(z) @ np.asarray(t) @ np.asarray(z).T, A)
    tc, zc = jsl.schur(A, output="complex")
    assert tc.dtype == np.complex64 and np.abs(np.tril(tc, -1)).max() < 1e-5
    tr, zr = (np.asarray(v) for v in jsl.rsf2csf(t, z))
    assert np.abs(np.tril(tr, -1)).max() < 1e-5
    close(zr @ tr @ zr.conj().T, A)
    close(np.sort_complex(np.diag(tr)), np.sort_complex(np.linalg.eigvals(A)), atol=1e-3)


@pytest.mark.parametrize("method", ["qdwh", "svd"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_polar(method, side):
    polar = lamina.jit(lambda a: jsl.polar(a, side, method=method))
    for a in (RNG.standard_normal((5, 3)).astype(np.float32),):
        u, p = polar(a)
        u_ref, p_ref = sl.polar(a, side)
        close(u, u_ref, atol=1e-3)
        close(p, p_ref, atol=1e-3)


def test_solve_sylvester():
    b = RNG.standard_normal((3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32)
    c = RNG.standard_normal((4, 3)).astype(np.float32)
    x = jsl.solve_sylvester(A + 3 * EYE, b, c)
    assert x.dtype == np.float32
    close(x, sl.solve_sylvester(A + 3 * EYE, b, c))
    with pytest.raises(ValueError, match="solve_sylvester: argument 'C' must have shape"):
        jsl.solve_sylvester(A, b, c.T)


def test_decomposition_wrappers():
    close(jsl.cholesky(SPD), sl.cholesky(SPD))
    close(jsl.cholesky(SPD, lower=True), sl.cholesky(SPD, lower=True))
    h, q = jsl.hessenberg(A, calc_q=True)
    close(h, sl.hessenberg(A))
    close(q, sl.hessenberg(A, calc_q=True)[1])
    d, e = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    close(jsl.eigh_tridiagonal(d, e, eigvals_only=True), sl.eigh_tridiagonal(d, e, True))
    close(jsl.eigh_tridiagonal(d, e, eigvals_only=True, select="i", select_range=(1, 3)),
          sl.eigh_tridiagonal(d, e, True, select="i", select_range=(1, 3)))
    w, v = (np.asarray(x) for x in jsl.eigh_tridiagonal(d, e))
    tri = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    close(tri @ v, v * w[None, :], atol=1e-4)
    tall, c = RNG.standard_normal((5, 3)).astype(np.float32), RNG.standard_normal((2, 5))
    close(jsl.qr_multiply(tall, c.astype(np.float32))[0], sl.qr_multiply(tall, c)[0])
    close(jsl.qr_multiply(tall, c.T[:3], mode="left")[0],
          sl.qr_multiply(tall, c.T[:3], mode="left")[0])


V, R = np.array([1.0, 2, 3], np.float32), np.array([1.0, 5, 6, 7], np.float32)


@pytest.mark.parametrize("name,args", [
    ("circulant", (V,)), ("companion", (V,)), ("convolution_matrix", (V, 4)),
    ("convolution_matrix", (V, 5, "same")), ("convolution_matrix", (V, 5, "valid")),
    ("dft", (3,)), ("dft", (4, "sqrtn")), ("fiedler", (V,)), ("fiedler_companion", (R,)),
    ("hadamard", (4,)), ("hankel", (V, R)), ("hankel", (V,)), ("helmert", (4,)),
    ("helmert", (4, True)), ("hilbert", (3,)), ("invhilbert", (4,)), ("invpascal", (4,)),
    ("invpascal", (4, "upper")), ("leslie", (V, V[:2])), ("pascal", (4,)),
    ("pascal", (4, "lower"))])
def test_special_matrices(name, args):
    close(getattr(jsl, name)(*args), getattr(sl, name)(*args), atol=1e-3)


def test_special_matrices_trace_and_batch():
    close(lamina.jit(jsl.circulant)(V), sl.circulant(V))
    close(jsl.circulant(np.stack([V, 2 * V])), np.stack([sl.circulant(V), sl.circulant(2 * V)]))
    with pytest.raises(ValueError, match="hadamard: argument 'n' must be a positive power"):
        jsl.hadamard(3)
    with pytest.raises(ValueError, match="leslie: argument 's' must have length"):
        jsl.leslie(V, V)
