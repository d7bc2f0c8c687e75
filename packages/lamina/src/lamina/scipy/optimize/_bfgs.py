"""BFGS: quasi-Newton minimization with an inverse-Hessian estimate, run as
one ``while_loop`` (so it works under ``jit`` and ``vmap``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from lamina_tracing_core import control_flow as lax_control

import lamina.numpy as jnp
from lamina_tracing_core.api import value_and_grad

Array = Any

#: Armijo's sufficient-decrease constant and the backtracking steps tried.
_ARMIJO_C1 = 1e-4
_BACKTRACK_STEPS = 30


class OptimizeResults(NamedTuple):
    """What ``minimize`` returns (JAX's fields): the minimizer ``x``, whether
    it converged (``success``; ``status`` 0 converged, 1 out of iterations,
    3 no step decreased the function), the value ``fun`` and gradient ``jac``
    there, the inverse-Hessian estimate ``hess_inv`` (None for L-BFGS), the
    function and gradient evaluation counts and the iteration count."""

    x: Array
    success: Array
    status: Array
    fun: Array
    jac: Array
    hess_inv: Array | None
    nfev: Array
    njev: Array
    nit: Array


class _LineSearch(NamedTuple):
    step: Array
    f: Array
    g: Array
    evaluations: Array
    failed: Array


def backtracking_line_search(value_and_gradient: Callable[[Array], tuple[Array, Array]],
                             x: Array, direction: Array, f: Array, g: Array) -> _LineSearch:
    """The largest of ``1, 1/2, 1/4, ...`` that decreases ``f`` enough
    (Armijo's condition ``f(x + t d) <= f(x) + c1 t g.d``)."""
    slope = jnp.vdot(g, direction)
    dtype = f.dtype

    def not_done(state: tuple[Any, ...]) -> Any:
        i, _, f_new, _, accepted = state
        return (~accepted) & (i < _BACKTRACK_STEPS)

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        i, step, _, _, _ = state
        step = jnp.where(i == 0, jnp.asarray(1.0, dtype), step * 0.5)
        f_new, g_new = value_and_gradient(x + step * direction)
        accepted = jnp.isfinite(f_new) & (f_new <= f + _ARMIJO_C1 * step * slope)
        return i + 1, step, f_new, g_new, accepted

    init = (jnp.asarray(0), jnp.asarray(1.0, dtype), f, g, jnp.asarray(False))
    i, step, f_new, g_new, accepted = lax_control.while_loop(not_done, body, init)
    return _LineSearch(step, f_new, g_new, i, ~accepted)


def minimize_bfgs(fun: Callable[[Array], Array], x0: Array, maxiter: int | None,
                  gtol: float, norm: float) -> OptimizeResults:
    """BFGS from ``x0`` until the gradient's ``norm`` is at most ``gtol``."""
    n = x0.shape[0]
    limit = n * 200 if maxiter is None else maxiter
    value_and_gradient = value_and_grad(fun)
    f0, g0 = value_and_gradient(x0)
    identity = jnp.eye(n, dtype=x0.dtype)

    def grad_norm(g: Array) -> Array:
        return jnp.linalg.norm(g, ord=norm)

    def not_done(state: tuple[Any, ...]) -> Any:
        k, _, _, _, _, _, status = state
        return (status < 0) & (k < limit)

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        k, x, f, g, h, evaluations, _ = state
        direction = -(h @ g)
        search = backtracking_line_search(value_and_gradient, x, direction, f, g)
        s = search.step * direction
        y = search.g - g
        curvature = jnp.vdot(y, s)
        rho = jnp.where(curvature > 0, 1 / jnp.where(curvature > 0, curvature, 1), 0)
        left = identity - rho * jnp.outer(s, y)
        updated = left @ h @ left.T + rho * jnp.outer(s, s)
        # Without positive curvature the update would lose definiteness: keep h.
        h_new = jnp.where(curvature > 0, updated, h)
        moved = ~search.failed
        x_new = jnp.where(moved, x + s, x)
        f_new = jnp.where(moved, search.f, f)
        g_new = jnp.where(moved, search.g, g)
        status = jnp.where(search.failed, 3, jnp.where(grad_norm(g_new) <= gtol, 0, -1))
        return k + 1, x_new, f_new, g_new, jnp.where(moved, h_new, h), \
            evaluations + search.evaluations, status

    start_status = jnp.where(grad_norm(g0) <= gtol, 0, -1)
    init = (jnp.asarray(0), x0, f0, g0, identity, jnp.asarray(1), start_status)
    k, x, f, g, h, evaluations, status = lax_control.while_loop(not_done, body, init)
    status = jnp.where(status < 0, 1, status)
    return OptimizeResults(x=x, success=status == 0, status=status, fun=f, jac=g, hess_inv=h,
                           nfev=evaluations, njev=evaluations, nit=k)


__all__ = ["OptimizeResults", "backtracking_line_search", "minimize_bfgs"]
