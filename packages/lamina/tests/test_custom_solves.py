"""lax.custom_linear_solve and lax.custom_root: values, jit, vmap and
implicit differentiation (forward and reverse, through solvers written with
while_loop, which cannot be differentiated in reverse themselves), has_aux,
symmetric, and the errors; jnp.linalg.solve is built on custom_linear_solve,
as JAX's."""

from __future__ import annotations

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina import lax
from lamina.test_util import check_grads

RNG = np.random.default_rng(3)
_M = RNG.standard_normal((3, 3))
SPD = (_M @ _M.T + 3 * np.eye(3)).astype(np.float32)
A = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)


def close(actual, expected, atol=1e-4):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=atol, rtol=1e-4)


def conjugate_gradient(matvec, b):
    """A few CG steps in a while_loop: exact for 3x3 SPD systems."""
    def cond(state):
        return state[3] < 6

    def body(state):
        x, r, p, i = state
        ap = matvec(p)
        rr = r @ r
        alpha = rr / jnp.maximum(p @ ap, 1e-30)
        x, r_new = x + alpha * p, r - alpha * ap
        beta = (r_new @ r_new) / jnp.maximum(rr, 1e-30)
        return x, r_new, r_new + beta * p, i + 1

    x0 = jnp.zeros_like(b)
    return lax.while_loop(cond, body, (x0, b, b, 0))[0]


def cg_solve(a, b):
    return lax.custom_linear_solve(lambda x: a @ x, b,
                                   solve=lambda mv, x: conjugate_gradient(mv, x), symmetric=True)


def lu_solve(a, b):
    return lax.custom_linear_solve(lambda x: a @ x, b,
                                   solve=lambda _, x: jnp.linalg.solve(a, x),
                                   transpose_solve=lambda _, x: jnp.linalg.solve(a.T, x))


def test_values_jit_vmap():
    close(lamina.jit(cg_solve)(SPD, B), np.linalg.solve(SPD, B))
    close(lamina.jit(lu_solve)(A, B), np.linalg.solve(A, B))
    bs = np.stack([B, 2 * B])
    close(lamina.vmap(cg_solve, (None, 0))(SPD, bs), np.linalg.solve(SPD, bs.T).T)
    close(lamina.vmap(lu_solve, (0, None))(np.stack([A, 2 * A]), B),
          [np.linalg.solve(A, B), np.linalg.solve(2 * A, B)])


def test_implicit_derivatives_through_a_while_loop_solver():
    inv = np.linalg.inv(SPD)
    close(lamina.jacrev(cg_solve, 1)(SPD, B), inv)
    close(lamina.jacfwd(cg_solve, 1)(SPD, B), inv)
    x = np.linalg.solve(SPD, B)
    # d/dA sum(A^-1 b) = -A^-T 1 x^T (A's consts are differentiated implicitly)
    close(lamina.grad(lambda a: cg_solve(a, B).sum())(SPD), -np.outer(inv.T @ np.ones(3), x),
          atol=1e-3)
    check_grads(lu_solve, (A.astype(np.float64), B.astype(np.float64)), order=2,
                atol=2e-2, rtol=2e-2, eps=1e-2)


def test_has_aux_and_pytrees():
    def solve_with_count(matvec, b):
        return {"x": b["x"] / 2.0}, jnp.int32(7)

    x, aux = lax.custom_linear_solve(lambda v: {"x": 2.0 * v["x"]}, {"x": B}, solve_with_count,
                                     symmetric=True, has_aux=True)
    close(x["x"], B / 2)
    assert int(aux) == 7
    g = lamina.grad(lambda b: lax.custom_linear_solve(
        lambda v: {"x": 2.0 * v["x"]}, b, solve_with_count, symmetric=True,
        has_aux=True)[0]["x"].sum())({"x": B})
    close(g["x"], np.full(3, 0.5))


def test_errors():
    def solve_only(a, b):
        return lax.custom_linear_solve(lambda x: a @ x, b, lambda _, x: jnp.linalg.solve(a, x))

    close(lamina.jacfwd(solve_only, 1)(A, B), np.linalg.inv(A))
    with pytest.raises(TypeError, match="transpose_solve required for backwards mode"):
        lamina.grad(lambda b: solve_only(A, b).sum())(B)
    with pytest.raises(TypeError, match="custom_linear_solve: matvec must return the structure"):
        lax.custom_linear_solve(lambda x: x[:2], B, lambda _, x: x)


def newton_sqrt(a):
    def f(x):
        return x * x - a

    def solve(f, x0):
        return lax.while_loop(lambda x: jnp.abs(f(x)) > 1e-6, lambda x: x - f(x) / (2 * x), x0)

    return lax.custom_root(f, 1.0, solve, lambda g, y: y / g(1.0))


def test_custom_root_implicit_derivatives():
    close(newton_sqrt(2.0), np.sqrt(2.0))
    close(lamina.grad(newton_sqrt)(2.0), 0.5 / np.sqrt(2.0))
    close(lamina.jit(lamina.grad(newton_sqrt))(4.0), 0.25)
    close(lamina.vmap(lamina.grad(newton_sqrt))(jnp.array([2.0, 4.0])),
          [0.5 / np.sqrt(2.0), 0.25])
    close(lamina.grad(lamina.grad(newton_sqrt))(2.0), -0.25 * 2.0 ** -1.5)
    close(lamina.jvp(newton_sqrt, (2.0,), (1.0,))[1], 0.5 / np.sqrt(2.0))


def test_custom_root_has_aux():
    def f(x):
        return x - 3.0

    root, steps = lax.custom_root(f, 0.0, lambda f, x: (x - f(x), 1), lambda g, y: y / g(1.0),
                                  has_aux=True)
    close(root, 3.0)
    assert int(steps) == 1
