"""L-BFGS: BFGS whose inverse Hessian is the last ``history`` steps and
gradient changes (the two-loop recursion), run as one ``while_loop``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lamina_tracing_core import control_flow as lax_control
from lamina_tracing_core.api import value_and_grad

import lamina.numpy as jnp
from lamina.scipy.optimize._bfgs import OptimizeResults, backtracking_line_search

__all__ = ["minimize_lbfgs"]

Array = Any


def _direction(g: Array, steps: Array, changes: Array, rhos: Array, count: Array,
               history: int) -> Array:
    """``-H g`` for the inverse Hessian the stored pairs define (newest at
    slot ``(count - 1) % history``), scaled by the newest pair's ``s.y / y.y``."""
    q = g
    alphas = []
    for i in range(history):  # newest to oldest
        slot = jnp.mod(count - 1 - i, history)
        valid = i < count
        alpha = jnp.where(valid, rhos[slot] * jnp.vdot(steps[slot], q), 0)
        q = q - alpha * changes[slot]
        alphas.append(alpha)
    newest = jnp.mod(count - 1, history)
    yy = jnp.vdot(changes[newest], changes[newest])
    scale = jnp.where(count > 0, jnp.vdot(steps[newest], changes[newest])
                      / jnp.where(yy > 0, yy, 1), 1)
    r = scale * q
    for i in reversed(range(history)):  # oldest to newest
        slot = jnp.mod(count - 1 - i, history)
        valid = i < count
        beta = rhos[slot] * jnp.vdot(changes[slot], r)
        r = r + jnp.where(valid, alphas[i] - beta, 0) * steps[slot]
    return -r


def minimize_lbfgs(fun: Callable[[Array], Array], x0: Array, maxiter: int | None, gtol: float,
                   norm: float, history: int) -> OptimizeResults:
    """L-BFGS from ``x0`` until the gradient's ``norm`` is at most ``gtol``."""
    n = x0.shape[0]
    limit = n * 200 if maxiter is None else maxiter
    value_and_gradient = value_and_grad(fun)
    f0, g0 = value_and_gradient(x0)

    def not_done(state: tuple[Any, ...]) -> Any:
        return (state[-1] < 0) & (state[0] < limit)

    def body(state: tuple[Any, ...]) -> tuple[Any, ...]:
        k, x, f, g, steps, changes, rhos, count, evaluations, _ = state
        direction = _direction(g, steps, changes, rhos, count, history)
        search = backtracking_line_search(value_and_gradient, x, direction, f, g)
        s = search.step * direction
        y = search.g - g
        curvature = jnp.vdot(y, s)
        keep = (curvature > 0) & ~search.failed
        slot = jnp.mod(count, history)
        steps = jnp.where(keep, steps.at[slot].set(s), steps)
        changes = jnp.where(keep, changes.at[slot].set(y), changes)
        rhos = jnp.where(keep, rhos.at[slot].set(1 / jnp.where(keep, curvature, 1)), rhos)
        count = jnp.where(keep, count + 1, count)
        moved = ~search.failed
        x = jnp.where(moved, x + s, x)
        f = jnp.where(moved, search.f, f)
        g = jnp.where(moved, search.g, g)
        status = jnp.where(search.failed, 3,
                           jnp.where(jnp.linalg.norm(g, ord=norm) <= gtol, 0, -1))
        return (k + 1, x, f, g, steps, changes, rhos, count, evaluations + search.evaluations,
                status)

    zeros = jnp.zeros((history, n), x0.dtype)
    start = jnp.where(jnp.linalg.norm(g0, ord=norm) <= gtol, 0, -1)
    init = (jnp.asarray(0), x0, f0, g0, zeros, zeros, jnp.zeros((history,), x0.dtype),
            jnp.asarray(0), jnp.asarray(1), start)
    k, x, f, g, _, _, _, _, evaluations, status = lax_control.while_loop(not_done, body, init)
    status = jnp.where(status < 0, 1, status)
    return OptimizeResults(x=x, success=status == 0, status=status, fun=f, jac=g, hess_inv=None,
                           nfev=evaluations, njev=evaluations, nit=k)
