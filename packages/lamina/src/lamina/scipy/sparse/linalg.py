"""``lamina.scipy.sparse.linalg``: Krylov solvers of ``A x = b`` for a linear
operator ``A`` given as a matrix or a function (``cg``, ``bicgstab``,
``gmres``), with ``b`` an array or a pytree of arrays.

Each solver runs as a ``while_loop`` inside ``lax.custom_linear_solve``, so
derivatives come from solving the transposed system (implicit
differentiation), not from differentiating the iterations. The iterations
work on the flattened vector (``ravel_pytree``) of ``b``'s leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from lamina_linear_util import tree_util as tu
from lamina_tracing_core import control_flow as lax_control
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina import lax
from lamina.flatten_util import ravel_pytree

Array = Any
Operator = Callable[[Any], Any]

__all__ = ["bicgstab", "cg", "gmres"]


def _fun(name: str) -> str:
    return f"lamina.scipy.sparse.linalg.{name}"


def _operator(fun: str, a: Any, name: str) -> Operator:
    """``a`` as a function: a callable as is, a 2-D array as ``a @ x``."""
    if callable(a):
        return a  # type: ignore[no-any-return]
    m = jnp.asarray(_util.operand(_fun(fun), a, name))
    if m.ndim != 2:
        raise ValueError(f"{_fun(fun)}: the argument {name} must be a function or a 2-D "
                         f"matrix, got an array of shape {m.shape}")
    return lambda x: jnp.matmul(m, x, precision=lax.Precision.HIGHEST)


def _flat(op: Operator, unravel: Callable[[Array], Any]) -> Operator:
    """``op`` acting on flattened vectors."""
    return lambda v: ravel_pytree(op(unravel(v)))[0]


def _inner(x: Array, y: Array) -> Array:
    """``<x, y>`` conjugate-linear in ``x``."""
    return jnp.vdot(x, y, precision=lax.Precision.HIGHEST)


def _norm(x: Array) -> Array:
    return jnp.sqrt(jnp.real(_inner(x, x)))


def _prepare(fun: str, a: Any, b: Any, x0: Any, maxiter: Any, m: Any) -> tuple[
        Operator, Any, Any, int, Operator]:
    matvec = _operator(fun, a, "A")
    precondition = (lambda x: x) if m is None else _operator(fun, m, "M")
    b = tu.tree_map(jnp.asarray, b)
    x0 = tu.tree_map(jnp.zeros_like, b) if x0 is None else tu.tree_map(jnp.asarray, x0)
    if tu.tree_structure(x0) != tu.tree_structure(b):
        raise ValueError(f"{_fun(fun)}: x0 and b must have the same tree structure, got "
                         f"{tu.tree_structure(x0)} and {tu.tree_structure(b)}")
    shapes = [(np.shape(u), np.shape(v)) for u, v in zip(tu.tree_leaves(x0), tu.tree_leaves(b))]
    if any(s != t for s, t in shapes):
        raise ValueError(f"{_fun(fun)}: the arrays of x0 and b must have the same shapes, got "
                         f"{[s for s, _ in shapes]} and {[t for _, t in shapes]}")
    size = sum(int(np.size(leaf)) for leaf in tu.tree_leaves(b))
    steps = 10 * size if maxiter is None else _util.concrete_int(fun, maxiter,
                                                                   "the argument maxiter")
    return matvec, b, x0, steps, precondition


# --- conjugate gradients ----------------------------------------------------------------------
def _cg_flat(a: Operator, b: Array, x0: Array, tol: Any, atol: Any, maxiter: int,
             m: Operator) -> Array:
    target = jnp.maximum(jnp.square(tol) * jnp.real(_inner(b, b)), jnp.square(atol))
    r = b - a(x0)
    z = m(r)
    gamma = jnp.real(_inner(r, z)).astype(r.dtype)

    def going(state: tuple[Any, ...]) -> Any:
        _, r, _, _, _, k = state
        return (jnp.real(_inner(r, r)) > target) & (k < maxiter)

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        x, r, gamma, p, _, k = state
        ap = a(p)
        alpha = gamma / jnp.real(_inner(p, ap)).astype(gamma.dtype)
        x = x + alpha * p
        r = r - alpha * ap
        z = m(r)
        gamma_next = jnp.real(_inner(r, z)).astype(gamma.dtype)
        p = z + (gamma_next / gamma) * p
        return x, r, gamma_next, p, z, k + 1

    return lax_control.while_loop(going, step, (x0, r, gamma, z, z, 0))[0]


def cg(A: Any, b: Any, x0: Any = None, *, tol: Any = 1e-5, atol: Any = 0.0,  # noqa: N803
       maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """Conjugate gradients for a Hermitian positive definite ``A``: ``(x,
    None)``, stopping when ``norm(b - A x) <= max(tol * norm(b), atol)`` or
    after ``maxiter`` steps (default ``10 * size(b)``)."""
    return _solve("cg", _cg_flat, A, b, x0, tol, atol, maxiter, M, symmetric=True), None


# --- BiCGSTAB ---------------------------------------------------------------------------------
def _bicgstab_flat(a: Operator, b: Array, x0: Array, tol: Any, atol: Any, maxiter: int,
                   m: Operator) -> Array:
    target = jnp.maximum(jnp.square(tol) * jnp.real(_inner(b, b)), jnp.square(atol))
    r = b - a(x0)
    shadow = r
    one = jnp.ones((), r.dtype)
    zero = jnp.zeros_like(r)

    def going(state: tuple[Any, ...]) -> Any:
        _, r, *_, k, done = state
        return (jnp.real(_inner(r, r)) > target) & (k < maxiter) & ~done

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        x, r, rho, alpha, omega, p, v, k, _ = state
        rho_next = _inner(shadow, r)
        beta = (rho_next / rho) * (alpha / omega)
        p = r + beta * (p - omega * v)
        p_hat = m(p)
        v = a(p_hat)
        alpha = rho_next / _inner(shadow, v)
        s = r - alpha * v
        # a small s ends the solve with half a step
        half_done = jnp.real(_inner(s, s)) <= target
        s_hat = m(s)
        t = a(s_hat)
        omega = jnp.where(half_done, one, _inner(t, s) / _inner(t, t))
        x = x + alpha * p_hat + jnp.where(half_done, 0, omega) * s_hat
        r = jnp.where(half_done, s, s - omega * t)
        breakdown = (rho_next == 0) | (omega == 0)
        return x, r, rho_next, alpha, omega, p, v, k + 1, breakdown

    state = (x0, r, one, one, one, zero, zero, 0, jnp.asarray(False))
    return lax_control.while_loop(going, step, state)[0]


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: Any = 1e-5, atol: Any = 0.0,  # noqa: N803
             maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """BiCGSTAB (van der Vorst) for a general ``A``: ``(x, None)``, with
    ``cg``'s stopping rule."""
    return _solve("bicgstab", _bicgstab_flat, A, b, x0, tol, atol, maxiter, M), None


# --- GMRES ------------------------------------------------------------------------------------
def _unit(v: Array) -> tuple[Array, Array]:
    """``v / |v|`` and ``|v|``; below the dtype's eps the vector counts as 0."""
    n = _norm(v)
    tiny = np.finfo(np.dtype(n.dtype)).eps
    ok = n > tiny
    return jnp.where(ok, v / jnp.where(ok, n, 1).astype(v.dtype), 0), jnp.where(ok, n, 0)


def _arnoldi(a: Operator, m: Operator, basis: Array, h: Array, k: Any) -> tuple[Array, Array,
                                                                                  Array]:
    """Step ``k``: the next basis vector, orthogonalised against the previous
    ones by classical Gram-Schmidt applied twice, and column ``k`` of ``H``."""
    w = a(m(basis[k]))
    norm_w = _norm(w)
    coefficients = jnp.zeros(h.shape[0], w.dtype)
    for _ in range(2):
        c = jnp.matmul(jnp.conj(basis), w, precision=lax.Precision.HIGHEST)
        w = w - jnp.matmul(c, basis, precision=lax.Precision.HIGHEST)
        coefficients = coefficients + c
    w, w_norm = _unit(w)
    basis = basis.at[k + 1].set(w)
    column = coefficients.at[k + 1].set(w_norm.astype(w.dtype))
    h = h.at[:, k].set(column)
    breakdown = w_norm <= np.finfo(np.dtype(norm_w.dtype)).eps * norm_w
    return basis, h, breakdown


def _restart_batched(a: Operator, m: Operator, b: Array, x: Array, unit: Array, beta: Array,
                     restart: int, ptol: Any) -> tuple[Array, Array, Array]:
    """One restart cycle: ``restart`` Arnoldi steps, then the small least-squares
    problem ``min |beta e1 - H y|`` solved at once."""
    del ptol
    basis = jnp.zeros((restart + 1,) + unit.shape, unit.dtype).at[0].set(unit)
    h = jnp.zeros((restart + 1, restart), unit.dtype)

    def going(state: tuple[Any, ...]) -> Any:
        return (state[3] < restart) & ~state[2]

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        basis, h, _, k = state
        basis, h, breakdown = _arnoldi(a, m, basis, h, k)
        return basis, h, breakdown, k + 1

    basis, h, _, _ = lax_control.while_loop(going, step, (basis, h, jnp.asarray(False), 0))
    rhs = jnp.zeros(restart + 1, unit.dtype).at[0].set(beta.astype(unit.dtype))
    y = jnp.linalg.lstsq(h, rhs)[0]
    x = x + m(jnp.matmul(y, basis[:-1], precision=lax.Precision.HIGHEST))
    unit, beta = _unit(m(b - a(x)))
    return x, unit, beta


def _givens(a: Array, b: Array) -> tuple[Array, Array]:
    """``(c, s)`` with ``[[c, -s], [s, c]]^H`` taking ``(a, b)`` to ``(r, 0)``."""
    r = jnp.sqrt(jnp.abs(a) ** 2 + jnp.abs(b) ** 2)
    safe = jnp.where(r == 0, 1, r)
    c = jnp.where(r == 0, 1, a / safe)
    s = jnp.where(r == 0, 0, b / safe)
    return c, s


def _restart_incremental(a: Operator, m: Operator, b: Array, x: Array, unit: Array,
                         beta: Array, restart: int, ptol: Any) -> tuple[Array, Array, Array]:
    """One restart cycle keeping ``H``'s QR factorisation up to date with Givens
    rotations, so the cycle stops as soon as the residual estimate is below
    ``ptol``."""
    dtype = unit.dtype
    basis = jnp.zeros((restart + 1,) + unit.shape, dtype).at[0].set(unit)
    h = jnp.zeros((restart + 1, restart), dtype)
    cs = jnp.zeros(restart, dtype)
    sn = jnp.zeros(restart, dtype)
    g = jnp.zeros(restart + 1, dtype).at[0].set(beta.astype(dtype))

    def going(state: tuple[Any, ...]) -> Any:
        *_, g, k, breakdown = state
        return (k < restart) & ~breakdown & (jnp.abs(g[k]) > ptol)

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        basis, h, cs, sn, g, k, _ = state
        basis, h, breakdown = _arnoldi(a, m, basis, h, k)
        column = h[:, k]

        def rotate(i: Any, col: Array) -> Array:
            first = jnp.conj(cs[i]) * col[i] + jnp.conj(sn[i]) * col[i + 1]
            second = -sn[i] * col[i] + cs[i] * col[i + 1]
            return col.at[i].set(first).at[i + 1].set(second)

        column = lax_control.fori_loop(0, k, rotate, column)
        c, s = _givens(column[k], column[k + 1])
        column = column.at[k].set(jnp.conj(c) * column[k] + jnp.conj(s) * column[k + 1])
        column = column.at[k + 1].set(0)
        h = h.at[:, k].set(column)
        g = g.at[k + 1].set(-s * g[k]).at[k].set(jnp.conj(c) * g[k])
        return basis, h, cs.at[k].set(c), sn.at[k].set(s), g, k + 1, breakdown

    state = (basis, h, cs, sn, g, 0, jnp.asarray(False))
    basis, h, _, _, g, k, _ = lax_control.while_loop(going, step, state)
    # back substitution on the triangular R = H[:k, :k] (unused columns give y = 0)
    active = jnp.arange(restart) < k
    r = jnp.where(active[:, None] & active[None, :], h[:restart], jnp.eye(restart, dtype=dtype))
    y = jnp.where(active, jnp.linalg.solve(jnp.triu(r), jnp.where(active, g[:restart], 0)), 0)
    x = x + m(jnp.matmul(y, basis[:-1], precision=lax.Precision.HIGHEST))
    unit, beta = _unit(m(b - a(x)))
    return x, unit, beta


_RESTARTS = {"batched": _restart_batched, "incremental": _restart_incremental}


def gmres(A: Any, b: Any, x0: Any = None, *, tol: Any = 1e-5, atol: Any = 0.0,  # noqa: N803
          restart: int = 20, maxiter: int | None = None, M: Any = None,  # noqa: N803
          solve_method: str = "batched") -> tuple[Any, Array]:
    """Restarted GMRES for a general ``A`` (right-preconditioned by ``M``):
    ``(x, info)`` with ``info`` 0, or -1 when ``x`` came out NaN. Each of at
    most ``maxiter`` cycles searches a Krylov space of dimension ``restart``
    (``'batched'``: a least-squares solve per cycle; ``'incremental'``: Givens
    rotations, stopping within the cycle once converged)."""
    fun = "gmres"
    if solve_method not in _RESTARTS:
        raise ValueError(f"{_fun(fun)}: solve_method must be 'batched' or 'incremental', got "
                         f"{solve_method!r}")
    size = sum(int(np.size(leaf)) for leaf in tu.tree_leaves(b))
    cycles = None if maxiter is None else _util.concrete_int(fun, maxiter,
                                                             "the argument maxiter")
    dimension = min(_util.concrete_int(fun, restart, "the argument restart"), size)
    if dimension < 1:
        raise ValueError(f"{_fun(fun)}: the argument restart must be positive, got {restart}")
    cycle = _RESTARTS[solve_method]

    def flat_solve(a: Operator, bf: Array, x0f: Array, tol: Any, atol: Any, maxiter: int,
                   m: Operator) -> Array:
        b_norm = _norm(bf)
        tolerance = jnp.maximum(tol * b_norm, atol)
        ptol = _norm(m(bf)) * jnp.minimum(1.0, tolerance / b_norm)
        unit, beta = _unit(m(bf - a(x0f)))

        def going(state: tuple[Any, ...]) -> Any:
            return (state[1] < maxiter) & (state[3] > tolerance)

        def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
            x, k, unit, beta = state
            x, unit, beta = cycle(a, m, bf, x, unit, beta, dimension, ptol)
            return x, k + 1, unit, beta

        return lax_control.while_loop(going, step, (x0f, 0, unit, beta))[0]

    x = _solve(fun, flat_solve, A, b, x0, tol, atol, cycles, M)
    failed = jnp.isnan(_norm(ravel_pytree(x)[0]))
    return x, jnp.where(failed, -1, 0)


# --- the shared frame ---------------------------------------------------------------------------
def _solve(fun: str, flat_solver: Callable[..., Array], a: Any, b: Any, x0: Any, tol: Any,
           atol: Any, maxiter: Any, m: Any, symmetric: bool = False) -> Any:
    """``custom_linear_solve`` around ``flat_solver`` (for the system and for
    its transpose), on ``b``'s flattened leaves."""
    matvec, b, x0, steps, precondition = _prepare(fun, a, b, x0, maxiter, m)
    _, unravel = ravel_pytree(b)
    x0_flat = ravel_pytree(x0)[0]
    precondition_flat = _flat(precondition, unravel)

    def solve(op: Operator, rhs: Any) -> Any:
        rhs_flat = ravel_pytree(rhs)[0]
        x = flat_solver(_flat(op, unravel), rhs_flat, x0_flat, tol, atol, steps,
                        precondition_flat)
        return unravel(x)

    real = all(not jnp.iscomplexobj(leaf) for leaf in tu.tree_leaves(b))
    return lax.custom_linear_solve(matvec, b, solve=solve, transpose_solve=solve,
                                   symmetric=symmetric and real)
