"""lamina.scipy.linalg.eigh_tridiagonal: bisection eigenvalues as JAX computes
them (``tol`` included), every ``select``, Hermitian input, jit and vmap."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl

import lamina
from lamina.scipy.linalg import eigh_tridiagonal

RNG = np.random.default_rng(3)
D = RNG.standard_normal(12).astype(np.float32)
E = RNG.standard_normal(11).astype(np.float32)
TRI = np.diag(D) + np.diag(E, 1) + np.diag(E, -1)

# jax.scipy.linalg.eigh_tridiagonal(D, E, eigvals_only=True, tol=0.5) with
# JAX 0.10.2: bisection stops once every interval is narrower than tol.
JAX_TOL_HALF = [-2.8489113, -2.5864706, -1.274266, -1.0118252, -1.0118252, -0.7493843,
                0.0379383, 0.0379383, 0.3003792, 1.0877019, 2.1374655, 3.9745517]


def test_values_and_vectors_agree_with_scipy():
    want = sl.eigh_tridiagonal(D.astype(np.float64), E.astype(np.float64), eigvals_only=True)
    np.testing.assert_allclose(eigh_tridiagonal(D, E, eigvals_only=True), want, atol=2e-6)
    w, v = (np.asarray(x) for x in lamina.jit(eigh_tridiagonal)(D, E))
    np.testing.assert_allclose(w, want, atol=2e-6)
    np.testing.assert_allclose(TRI @ v, v * w, atol=5e-6)
    np.testing.assert_allclose(v.T @ v, np.eye(12), atol=5e-6)


def test_select_index_and_value_ranges():
    some = lamina.jit(lambda d, e: eigh_tridiagonal(d, e, eigvals_only=True, select="i",
                                                    select_range=(2, 5)))(D, E)
    np.testing.assert_allclose(some, np.linalg.eigvalsh(TRI)[2:6], atol=2e-6)
    w, v = eigh_tridiagonal(D, E, select="v", select_range=(-1.0, 1.0))
    want = sl.eigh_tridiagonal(D, E, eigvals_only=True, select="v", select_range=(-1.0, 1.0))
    np.testing.assert_allclose(w, want, atol=2e-6)
    assert np.asarray(v).shape == (12, len(want))
    none = eigh_tridiagonal(D, E, eigvals_only=True, select="v", select_range=(10.0, 11.0))
    assert np.asarray(none).shape == (0,)


def test_tol_stops_the_bisection_as_in_jax():
    np.testing.assert_allclose(eigh_tridiagonal(D, E, eigvals_only=True, tol=0.5),
                               JAX_TOL_HALF, atol=1e-6)


def test_hermitian_batched_and_small():
    ec = (E + 1j * RNG.standard_normal(11)).astype(np.complex64)
    herm = np.diag(D) + np.diag(ec, 1) + np.diag(ec.conj(), -1)
    w, v = (np.asarray(x) for x in eigh_tridiagonal(D.astype(np.complex64), ec))
    assert w.dtype == np.float32 and v.dtype == np.complex64
    np.testing.assert_allclose(w, np.linalg.eigvalsh(herm), atol=3e-6)
    np.testing.assert_allclose(herm @ v, v * w, atol=5e-6)
    ds, es = RNG.standard_normal((3, 6)), RNG.standard_normal((3, 5))
    got = lamina.jit(lamina.vmap(lambda d, e: eigh_tridiagonal(d, e, eigvals_only=True)))(
        ds.astype(np.float32), es.astype(np.float32))
    want = [sl.eigh_tridiagonal(d, e, eigvals_only=True) for d, e in zip(ds, es)]
    np.testing.assert_allclose(got, want, atol=3e-6)
    w1, v1 = eigh_tridiagonal(D[:1], E[:0])
    np.testing.assert_allclose(w1, D[:1])
    np.testing.assert_allclose(v1, [[1.0]])


def test_bad_input():
    with pytest.raises(ValueError, match="eigh_tridiagonal: arguments 'd' and 'e' must be "
                                         "vectors of lengths n and n - 1"):
        eigh_tridiagonal(D, E[:5])
    with pytest.raises(ValueError, match="argument 'select' must be 'a', 'i' or 'v'"):
        eigh_tridiagonal(D, E, select="x")
    with pytest.raises(ValueError, match="argument 'select_range' must satisfy"):
        eigh_tridiagonal(D, E, select="i", select_range=(3, 12))
    with pytest.raises(ValueError, match="select='v' needs|needs select_range"):
        eigh_tridiagonal(D, E, select="v")
    with pytest.raises(ValueError, match="depends on the values of argument 'd'"):
        lamina.jit(lambda d, e: eigh_tridiagonal(d, e, select="v", select_range=(0.0, 1.0)))(
            D, E)
