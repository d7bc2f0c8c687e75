"""check_grads (orders 1 and 2, forward and reverse) for the differentiable
functions of scipy.linalg, jax.image and the convolution helpers whose own
tests check values only (and JAX's symmetrization in scipy.linalg.eigh)."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.numpy as jnp
import lamina.scipy.linalg as jsl
from lamina import image, lax
from lamina.test_util import check_grads

RNG = np.random.default_rng(5)
GRAD = dict(atol=5e-2, rtol=5e-2, eps=1e-2)
M = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
SPD = (M @ M.T).astype(np.float32)
B = RNG.standard_normal((3, 2)).astype(np.float32)

LINALG = {
    "solve_triangular": (lambda a, b: jsl.solve_triangular(jnp.triu(a), b), (M, B)),
    "lu_factor/lu_solve": (lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b), (M, B)),
    "lu": (lambda a: jsl.lu(a)[2], (M,)),
    "inv": (jsl.inv, (M,)),
    "det": (jsl.det, (M,)),
    "solve": (jsl.solve, (M, B)),
    "solve(assume_a='pos')": (lambda a, b: jsl.solve(a, b, assume_a="pos"), (SPD, B)),
    # the solver reads one triangle and the rule assumes a symmetric tangent (JAX's), so the
    # perturbations check_grads makes are symmetrized first, as JAX's own tests do
    "cholesky": (lambda a: jsl.cholesky((a + a.T) / 2), (SPD,)),
    "eigh(values)": (lambda a: jsl.eigh(a, eigvals_only=True), (SPD,)),
    "svd(values)": (lambda a: jsl.svd(a, compute_uv=False), (M,)),
    "qr(r)": (lambda a: jsl.qr(a)[1], (M,)),
    "expm": (lambda a: jsl.expm(0.3 * a), (M,)),
    "polar(p)": (lambda a: jsl.polar(a, method="svd")[1], (M,)),
    "block_diag": (lambda a, b: jsl.block_diag(a, b), (M, B)),
    "toeplitz": (jsl.toeplitz, (B[:, 0], M[0])),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_scipy_linalg_derivatives(name):
    fun, args = LINALG[name]
    check_grads(fun, args, 2, **GRAD)


def test_scipy_eigh_reads_the_hermitian_part_as_jax():
    # JAX symmetrizes the input (a non-symmetric one too) before the solver.
    np.testing.assert_allclose(jsl.eigh(M, eigvals_only=True),
                               np.linalg.eigvalsh((M + M.T) / 2), rtol=1e-5)


def test_image_resize_derivatives():
    img = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    for method in ("linear", "cubic"):
        check_grads(lambda x, m=method: image.resize(x, (5, 3, 2), m), (img,), 2, **GRAD)


def test_conv_transpose_and_patches_derivatives():
    x = RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 2, 3)).astype(np.float32)

    def up(x, w):
        return lax.conv_transpose(x, w, (2, 2), "SAME",
                                  dimension_numbers=("NHWC", "HWIO", "NHWC"))

    check_grads(up, (x, w), 2, **GRAD)
    patches = lambda x: lax.conv_general_dilated_patches(  # noqa: E731
        x, (2, 2), (1, 1), "VALID", dimension_numbers=("NHWC", "OIHW", "NHWC"))
    check_grads(patches, (x,), 2, **GRAD)
