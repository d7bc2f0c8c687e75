"""``minimize``: the front of the optimizers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp
from lamina.scipy.optimize._bfgs import OptimizeResults, minimize_bfgs
from lamina.scipy.optimize._lbfgs import minimize_lbfgs

__all__ = ["minimize"]

_METHODS = ("bfgs", "l-bfgs-experimental-do-not-rely-on-this")


def minimize(fun: Callable[..., Any], x0: Any, args: tuple[Any, ...] = (), *, method: str,
             tol: float | None = None, options: Mapping[str, Any] | None = None
             ) -> OptimizeResults:
    """The minimum of ``fun(x, *args)`` (a scalar function of a 1-D ``x``)
    from ``x0`` by ``method``: ``'BFGS'`` or JAX's limited-memory
    ``'l-bfgs-experimental-do-not-rely-on-this'``. ``tol`` (or
    ``options['gtol']``, default 1e-5) bounds the gradient's norm
    (``options['norm']``, default inf) at the answer; ``options['maxiter']``
    caps the iterations (``maxcor``: L-BFGS's history length)."""
    if not isinstance(args, tuple):
        raise TypeError(f"lamina.scipy.optimize.minimize: args must be a tuple, got "
                        f"{type(args).__name__}")
    chosen = method.lower()
    if chosen not in _METHODS:
        raise ValueError(f"lamina.scipy.optimize.minimize: method must be 'BFGS' or "
                         f"'l-bfgs-experimental-do-not-rely-on-this', got {method!r}")
    opts = dict(options or {})
    (x,) = _util.promote_dtypes_inexact("lamina.scipy.optimize.minimize",
                                        _util.operand("lamina.scipy.optimize.minimize", x0,
                                                      "x0"))
    x = jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"lamina.scipy.optimize.minimize: x0 must be 1-D, got shape {x.shape}")
    gtol = float(opts.pop("gtol", 1e-5 if tol is None else tol))
    norm = float(opts.pop("norm", float("inf")))
    maxiter = opts.pop("maxiter", None)
    history = int(opts.pop("maxcor", 10)) if chosen != "bfgs" else 0
    # A line search of fixed length (see _bfgs) takes the place of JAX's.
    opts.pop("line_search_maxiter", None)
    if opts:
        raise TypeError(f"lamina.scipy.optimize.minimize: unknown options {sorted(opts)}")

    def objective(v: Any) -> Any:
        return fun(v, *args)

    if chosen == "bfgs":
        return minimize_bfgs(objective, x, maxiter, gtol, norm)
    return minimize_lbfgs(objective, x, maxiter, gtol, norm, history)
