"""lamina.numpy products, einsum, norms, differences, convolution against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)
T = RNG.standard_normal((2, 3, 4)).astype(np.float32)
U = RNG.standard_normal((2, 4, 5)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)
W = RNG.standard_normal(4).astype(np.float32)


def check(actual, expected, dtype=None, rtol=2e-5, atol=2e-5):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    np.testing.assert_allclose(actual_np, expected.astype(actual_np.dtype), rtol=rtol, atol=atol)


def test_dot_family():
    check(jnp.dot(A, B), A @ B, np.float32)
    check(jnp.dot(V, W), V @ W)
    check(jnp.dot(A, V), A @ V)
    check(jnp.dot(T, B), np.dot(T, B))
    check(jnp.dot(T, U), np.dot(T, U))
    check(jnp.dot(2.0, A), 2 * A)
    check(jnp.dot(np.arange(3), np.arange(3)), 5, np.int32)
    check(jnp.dot(np.array([True, False]), np.array([True, True])), True, np.bool_)
    check(jnp.vdot(A, A), np.vdot(A, A))
    z = (A + 1j * A).astype(np.complex64)
    check(jnp.vdot(z, z), np.vdot(z, z), rtol=1e-4)
    check(jnp.inner(A, A), np.inner(A, A))
    check(jnp.inner(V, 3.0), V * 3)
    check(jnp.outer(V, np.arange(3)), np.outer(V, np.arange(3)))
    check(jnp.vecdot(T, np.ones(4, np.float32)), T.sum(-1))
    check(jnp.kron(np.eye(2), A), np.kron(np.eye(2), A))
    check(jnp.kron(V, np.ones((2, 1))), np.kron(V, np.ones((2, 1))))
    with pytest.raises(TypeError, match="not aligned"):
        jnp.dot(A, A)


def test_matmul_broadcasting():
    check(jnp.matmul(A, B), A @ B)
    check(jnp.matmul(T, U), T @ U)
    check(jnp.matmul(T, B), T @ B)
    check(jnp.matmul(V, B), V @ B)
    check(jnp.matmul(A, V), A @ V)
    check(jnp.matmul(V, W), V @ W)
    check(jnp.matmul(np.ones((3, 1, 2, 4), np.float32), U), np.ones((3, 1, 2, 4)) @ U)
    check(jnp.matmul(A, B, preferred_element_type=jnp.float32), A @ B)
    x = jnp.asarray(A)
    check(x @ B, A @ B)
    with pytest.raises(ValueError, match="scalars"):
        jnp.matmul(1.0, A)


def test_tensordot_trace_diagonal_cross():
    check(jnp.tensordot(T, U, axes=([2], [1])), np.tensordot(T, U, axes=([2], [1])))
    check(jnp.tensordot(A, B, 1), np.tensordot(A, B, 1))
    check(jnp.tensordot(T, T, 3), np.tensordot(T, T, 3))
    check(jnp.tensordot(A, A, 0), np.tensordot(A, A, 0))
    for k in (-2, -1, 0, 1, 3, 5):
        check(jnp.diagonal(A, k), np.diagonal(A, k))
        check(jnp.trace(A, k), np.trace(A, k))
    check(jnp.diagonal(T, 0, 0, 2), np.diagonal(T, 0, 0, 2))
    check(jnp.diagonal(T, 1, 2, 1), np.diagonal(T, 1, 2, 1))
    check(jnp.trace(np.arange(9).reshape(3, 3)), 12, np.int32)
    a3, b3 = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    check(jnp.cross(a3, b3), np.cross(a3, b3))
    # NumPy deprecates 2-vectors; their cross product is the z component (or the
    # 3-vector with a zero third entry for the first operand).
    a2, b2 = a3[:, :2], b3[:, :2]
    check(jnp.cross(a2, b2), a2[:, 0] * b2[:, 1] - a2[:, 1] * b2[:, 0])
    check(jnp.cross(a2, b3), np.cross(np.pad(a2, ((0, 0), (0, 1))), b3))
    check(jnp.cross(a3.T, b3.T, axisa=0, axisb=0, axisc=0), np.cross(a3.T, b3.T, axisa=0,
                                                                    axisb=0, axisc=0))


EINSUMS = [
    ("ij,jk->ik", (A, B)), ("ij,jk", (A, B)), ("bij,bjk->bik", (T, U)), ("ii->i", (A[:, :3],)),
    ("ii", (A[:, :3],)), ("ij->ji", (A,)), ("ij->", (A,)), ("i,i->", (V, W)), ("i,j->ij", (V, W)),
    ("...ij,...jk->...ik", (T, U)), ("bij,jk->bik", (T, B)), ("ij,ij->i", (A, A)),
    ("i,jk,k->ij", (V, B, RNG.standard_normal(5).astype(np.float32))),
    ("ab,bc,cd->ad", (A, B, RNG.standard_normal((5, 2)).astype(np.float32))),
    ("iij->j", (RNG.standard_normal((3, 3, 2)).astype(np.float32),)),
    ("bii->b", (RNG.standard_normal((2, 3, 3)).astype(np.float32),)),
    ("...i,...i", (T, np.ones((3, 4), np.float32))), ("ijk", (T,)), ("kji", (T,)),
    ("i...->...", (T,)), ("ij,kl->ijkl", (A[:2, :2], A[:2, :2])),
    ("ij,j->i", (A, V)), ("...,...", (A, A)),
]


@pytest.mark.parametrize("spec,operands", EINSUMS, ids=[s for s, _ in EINSUMS])
def test_einsum_matches_numpy(spec, operands):
    check(jnp.einsum(spec, *operands), np.einsum(spec, *operands), rtol=1e-4, atol=1e-4)


def test_einsum_options_and_forms():
    ops = (A, B, RNG.standard_normal((5, 2)).astype(np.float32))
    want = np.einsum("ab,bc,cd->ad", *ops)
    for optimize in (False, True, "greedy", "optimal"):
        check(jnp.einsum("ab,bc,cd->ad", *ops, optimize=optimize), want, rtol=1e-4, atol=1e-4)
    path, text = jnp.einsum_path("ab,bc,cd->ad", *ops)
    assert path[0] == "einsum_path" and "Complete contraction" in text
    check(jnp.einsum("ab,bc,cd->ad", *ops, optimize=path), want, rtol=1e-4, atol=1e-4)
    check(jnp.einsum(A, [0, 1], B, [1, 2], [0, 2]), A @ B, rtol=1e-4)
    check(jnp.einsum(T, [Ellipsis, 1], [Ellipsis]), T.sum(-1), rtol=1e-5)
    check(jnp.einsum("ij,jk->ik", np.arange(6).reshape(2, 3), np.arange(3)[:, None]),
          np.arange(6).reshape(2, 3) @ np.arange(3)[:, None], np.int32)
    check(jnp.einsum("ij,jk->ik", A, B, preferred_element_type=jnp.float32), A @ B, rtol=1e-4)
    check(jnp.einsum("i,i->i", np.ones(1, np.float32), V), V)  # broadcast of a size-1 axis
    with pytest.raises(ValueError, match="operands"):
        jnp.einsum("ij,jk->ik", A)
    with pytest.raises(ValueError, match="size of label"):
        jnp.einsum("ij,jk->ik", A, A)
    with pytest.raises(ValueError, match="do not appear"):
        jnp.einsum("ij->k", A)


def test_norms():
    for ord_ in (None, 1, 2, np.inf, -np.inf, 0, 3, 0.5):
        check(jnp.linalg.norm(V, ord_), np.linalg.norm(V, ord_), rtol=1e-5)
        check(jnp.linalg.norm(T, ord_, axis=1), np.linalg.norm(T, ord_, axis=1), rtol=1e-5)
    for ord_ in (None, "fro", 1, -1, np.inf, -np.inf):
        check(jnp.linalg.norm(A, ord_), np.linalg.norm(A, ord_), rtol=1e-5)
        check(jnp.linalg.norm(T, ord_, axis=(2, 1), keepdims=True),
              np.linalg.norm(T, ord_, axis=(2, 1), keepdims=True), rtol=1e-5)
    check(jnp.linalg.norm(T), np.linalg.norm(T), rtol=1e-5)
    check(jnp.linalg.norm(T, keepdims=True), np.linalg.norm(T, keepdims=True), rtol=1e-5)
    check(jnp.linalg.norm(np.arange(3)), np.linalg.norm(np.arange(3)), np.float32)
    check(jnp.linalg.vector_norm(T, ord=1), np.abs(T).sum())
    check(jnp.linalg.matrix_norm(T), np.linalg.norm(T, axis=(1, 2)), rtol=1e-5)
    check(jnp.linalg.norm((A + 2j * A).astype(np.complex64)),
          np.linalg.norm(A + 2j * A), rtol=1e-5)
    check(jnp.linalg.norm(A, 2), np.linalg.norm(A, 2), rtol=1e-5)
    check(jnp.linalg.norm(A, "nuc"), np.linalg.norm(A, "nuc"), rtol=1e-5)
    check(jnp.linalg.matmul(A, B), A @ B)


def test_differences_and_integration():
    x = np.array([1.0, 4.0, 9.0, 16.0, 25.0], np.float32)
    check(jnp.diff(x), np.diff(x))
    check(jnp.diff(x, n=2), np.diff(x, n=2))
    check(jnp.diff(A, axis=0), np.diff(A, axis=0))
    check(jnp.diff(x, prepend=0.0, append=np.array([30.0])), np.diff(x, prepend=0.0,
                                                                     append=[30.0]))
    check(jnp.diff(np.array([True, False, False])), np.diff(np.array([True, False, False])))
    check(jnp.ediff1d(x, to_begin=-1.0, to_end=[7, 8]), np.ediff1d(x, to_begin=-1, to_end=[7, 8]))
    check(jnp.gradient(x), np.gradient(x))
    for got, want in zip(jnp.gradient(A, 2.0), np.gradient(A, 2.0)):
        check(got, want)
    check(jnp.trapezoid(x), np.trapezoid(x))
    check(jnp.trapezoid(A, dx=0.5, axis=0), np.trapezoid(A, dx=0.5, axis=0))
    check(jnp.trapezoid(x, x=np.arange(5.0) ** 2), np.trapezoid(x, x=np.arange(5.0) ** 2))


def test_interp():
    xp = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    fp = np.array([1.0, 3.0, -1.0, 0.0], np.float32)
    x = np.array([-1.0, 0.0, 0.5, 2.5, 3.0, 5.0], np.float32)
    check(jnp.interp(x, xp, fp), np.interp(x, xp, fp))
    check(jnp.interp(x, xp, fp, left=-9.0, right=9.0), np.interp(x, xp, fp, left=-9, right=9))
    check(jnp.interp(x, xp, fp, period=3.0), np.interp(x, xp, fp, period=3.0), rtol=1e-5)
    check(jnp.interp(2.0, xp, fp), np.interp(2.0, xp, fp))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate(mode):
    a = np.array([1.0, 2.0, -1.0, 0.5, 3.0], np.float32)
    v = np.array([0.5, -2.0, 1.0], np.float32)
    check(jnp.convolve(a, v, mode), np.convolve(a, v, mode))
    check(jnp.convolve(v, a, mode), np.convolve(v, a, mode))
    check(jnp.correlate(a, v, mode), np.correlate(a, v, mode))
    check(jnp.correlate(v, a, mode), np.correlate(v, a, mode))
    z = (a + 1j * a[::-1]).astype(np.complex64)
    check(jnp.correlate(z, v + 1j, mode), np.correlate(z, v + 1j, mode), rtol=1e-4)
    check(jnp.convolve(np.arange(4), np.arange(3), mode),
          np.convolve(np.arange(4), np.arange(3), mode), np.float32)


def test_polynomials():
    check(jnp.polyval(np.array([1, 2, 3]), 2), 11, np.int32)
    check(jnp.polyval(np.array([1.0, 2.0]), np.array([1.0, 2.0])), [3.0, 4.0])
    check(jnp.vander(np.array([1, 2, 3])), np.vander(np.array([1, 2, 3])))
    check(jnp.vander(np.array([1.0, 2.0]), 3, increasing=True),
          np.vander(np.array([1.0, 2.0]), 3, increasing=True))


def test_norms_eagerly_have_jax_compiled_bits():
    # JAX jits its norms, so eager calls get XLA's fused reduction; JAX 0.10.2's
    # values for this matrix (optax's nnls test reads the Frobenius norm).
    a = lx.random.normal(lx.random.split(lx.random.key(0), 2)[0], (10, 21), dtype=jnp.float32)
    q = a.mT @ a
    assert float(jnp.linalg.matrix_norm(q, ord="fro")) == 99.3718032836914
    assert float(jnp.linalg.norm(q)) == 99.3718032836914
    assert float(jnp.linalg.matrix_norm(q, ord=1)) == 102.97130584716797
    for f in (jnp.linalg.norm, jnp.linalg.vector_norm, jnp.linalg.matrix_norm):
        assert float(f(q)) == float(lx.jit(f)(q))
    np.testing.assert_array_equal(jnp.linalg.norm(q, axis=[0]), lx.jit(
        lambda v: jnp.linalg.norm(v, axis=0))(q))
