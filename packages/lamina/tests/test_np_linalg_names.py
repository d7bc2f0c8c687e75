"""jnp.linalg names the decomposition tests leave out: the array-API
functions (outer, cross, matrix_transpose, vecdot, diagonal, trace,
vector_norm, matrix_norm) and lstsq, matrix_power, multi_dot, tensorinv,
tensorsolve, cond: NumPy's values on batched random input eagerly, under
jit and vmap, and check_grads to order 2 in both modes."""

from __future__ import annotations

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina.test_util import check_grads

RNG = np.random.default_rng(21)
GRAD = dict(atol=3e-2, rtol=3e-2, eps=1e-2)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def well(*shape):
    """Well-conditioned square matrices (the last two dimensions)."""
    n = shape[-1]
    return (rand(*shape) + 3 * np.eye(n, dtype=np.float32)).astype(np.float32)


def agree(fun, reference, *args, atol=1e-4):
    """``fun`` matches ``reference`` eagerly and under jit on ``args``, and
    under vmap over a batch of two of them (each argument stacked)."""
    want = reference(*args)
    np.testing.assert_allclose(fun(*args), want, atol=atol, rtol=1e-4)
    np.testing.assert_allclose(lamina.jit(fun)(*args), want, atol=atol, rtol=1e-4)
    other = [a * np.float32(0.5) + np.float32(0.1) for a in args]
    batched = lamina.vmap(fun)(*[np.stack([a, b]) for a, b in zip(args, other)])
    np.testing.assert_allclose(batched, np.stack([want, reference(*other)]), atol=atol,
                               rtol=1e-4)


ARRAY_API = {
    "outer": (lambda a, b: jnp.linalg.outer(a, b), np.linalg.outer, (rand(3), rand(4))),
    "cross": (lambda a, b: jnp.linalg.cross(a, b), np.linalg.cross, (rand(2, 3), rand(2, 3))),
    "matrix_transpose": (jnp.linalg.matrix_transpose, np.linalg.matrix_transpose,
                         (rand(2, 3, 4),)),
    "vecdot": (lambda a, b: jnp.linalg.vecdot(a, b, axis=0),
               lambda a, b: np.linalg.vecdot(a, b, axis=0), (rand(3, 2), rand(3, 2))),
    "diagonal": (lambda a: jnp.linalg.diagonal(a, offset=1),
                 lambda a: np.linalg.diagonal(a, offset=1), (rand(2, 3, 4),)),
    "trace": (lambda a: jnp.linalg.trace(a, offset=-1),
              lambda a: np.linalg.trace(a, offset=-1), (rand(2, 4, 3),)),
    "vector_norm": (lambda a: jnp.linalg.vector_norm(a, ord=3, axis=-1),
                    lambda a: np.linalg.vector_norm(a, ord=3, axis=-1), (rand(2, 5),)),
    "matrix_norm": (lambda a: jnp.linalg.matrix_norm(a, ord="fro"),
                    lambda a: np.linalg.matrix_norm(a, ord="fro"), (rand(2, 3, 4),)),
}


@pytest.mark.parametrize("name", list(ARRAY_API))
def test_array_api_names(name):
    fun, reference, args = ARRAY_API[name]
    agree(fun, reference, *args)
    check_grads(fun, args, 2, **GRAD)


def test_lstsq_values_and_derivatives():
    a, b = rand(4, 2), rand(4, 1)

    def solution(a, b):
        return jnp.linalg.lstsq(a, b)[0]

    agree(solution, lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], a, b)
    x, resid, rank, sv = jnp.linalg.lstsq(a, b)
    want = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(resid, want[1], rtol=1e-3)
    assert int(rank) == want[2]
    np.testing.assert_allclose(sv, want[3], rtol=1e-4)
    check_grads(solution, (a, b), 2, **GRAD)


@pytest.mark.parametrize("n", [3, -2])
def test_matrix_power(n):
    fun = lambda a: jnp.linalg.matrix_power(a, n)  # noqa: E731
    agree(fun, lambda a: np.linalg.matrix_power(a, n), well(2, 3, 3), atol=1e-3)
    check_grads(fun, (well(3, 3),), 2, **GRAD)


def test_multi_dot():
    args = (rand(2, 3), rand(3, 4), rand(4, 2), rand(2))
    agree(lambda *m: jnp.linalg.multi_dot(m), lambda *m: np.linalg.multi_dot(m), *args)
    check_grads(lambda *m: jnp.linalg.multi_dot(m), args, 2, **GRAD)


def test_tensorinv_and_tensorsolve():
    t = well(4, 4).reshape(2, 2, 4)
    rhs = rand(2, 2)
    inv = lambda t: jnp.linalg.tensorinv(t, 2)  # noqa: E731
    agree(inv, lambda t: np.linalg.tensorinv(t, 2), t, atol=1e-3)
    agree(jnp.linalg.tensorsolve, np.linalg.tensorsolve, t, rhs, atol=1e-3)
    check_grads(inv, (t,), 2, **GRAD)
    check_grads(jnp.linalg.tensorsolve, (t, rhs), 2, **GRAD)


@pytest.mark.parametrize("p", [None, 1, "fro"])
def test_cond(p):
    fun = lambda a: jnp.linalg.cond(a, p)  # noqa: E731
    agree(fun, lambda a: np.linalg.cond(a, p), well(3, 3), atol=1e-3)
    check_grads(fun, (well(3, 3),), 1, **GRAD)


def test_array_api_forms_refuse_other_shapes():
    with pytest.raises(ValueError, match="linalg.outer: argument 'x2' must be one-dimensional"):
        jnp.linalg.outer(rand(3), rand(2, 2))
    with pytest.raises(ValueError, match="linalg.cross: argument 'x1' must have size 3 along "
                                         "axis -1, got shape \\(2,\\)"):
        jnp.linalg.cross(rand(2), rand(3))
    with pytest.raises(ValueError, match="linalg.diagonal: argument 'x' must have at least 2"):
        jnp.linalg.diagonal(rand(3))
    with pytest.raises(ValueError, match="linalg.trace: argument 'x' must have at least 2"):
        jnp.linalg.trace(rand(3))
