"""``eigh_tridiagonal``: eigenvalues of a symmetric (Hermitian) tridiagonal
matrix by bisection on Sturm sequence counts, as JAX computes them (LAPACK's
``xSTEBZ`` scheme: all wanted eigenvalues bisected in parallel from the
Gershgorin interval until they are known to ``tol``), eigenvectors from the
symmetric eigensolver on the assembled matrix.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
from lamina_tracing_core import core, lax
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.control_flow import fori_loop, while_loop
from lamina_tracing_core.numpy import _util

__all__ = ["eigh_tridiagonal"]

Array = Any
_NAME = "lamina.scipy.linalg.eigh_tridiagonal"

# LAPACK's widening of the Gershgorin interval (xSTEBZ's FUDGE).
_FUDGE = 2.1


def _sturm_counts(alpha: Any, beta_sq: Any, pivmin: Any, first_pivot: Any, x: Any) -> Any:
    """How many eigenvalues of the tridiagonal matrix lie below each ``x``:
    the negative pivots of the LDL^T factorization of ``T - x I``, pivots
    tiny enough to overflow the recurrence replaced by ``-pivmin``."""
    n = _util.shape_of(alpha)[0]
    q = alpha[0] - x
    count = (q < 0).astype(np.int32)
    q = jnp.where(q == 0, first_pivot, q)

    def step(i: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        q, count = state
        q = alpha[i] - beta_sq[i - 1] / q - x
        negative = q <= pivmin
        return jnp.where(negative, jnp.minimum(q, -pivmin), q), count + negative

    return fori_loop(1, n, step, (q, count))[1]


class _Spectrum:
    """What bisection needs to know of the matrix: real diagonal ``alpha``,
    squared off-diagonal moduli ``beta_sq``, the smallest pivot, the
    Gershgorin interval and the tolerance reachable in its dtype."""

    def __init__(self, d: Any, e: Any, tol: float | None):
        self.alpha = jnp.real(d)
        beta_abs = jnp.abs(e)
        self.beta_sq = jnp.square(beta_abs)
        dtype = get_aval(self.alpha).dtype
        info = np.finfo(dtype)
        self.mantissa_bits = int(info.nmant)
        n = _util.shape_of(d)[0]
        radius = jnp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]])
        low, high = jnp.min(self.alpha - radius), jnp.max(self.alpha + radius)
        norm = jnp.maximum(jnp.abs(low), jnp.abs(high))
        safemin = np.maximum(1 / info.max, (1 + info.eps) * info.tiny).astype(dtype)
        self.pivmin = safemin * jnp.maximum(1, jnp.max(self.beta_sq))
        self.first_pivot = jnp.square(info.eps * beta_abs[0])
        self.abs_tol = info.eps * norm if tol is None else jnp.maximum(tol, info.eps * norm)
        slack = n * _FUDGE * info.eps * norm
        self.low = low - slack - 2 * _FUDGE * self.pivmin
        self.high = high + slack + _FUDGE * self.pivmin

    def counts(self, x: Any) -> Any:
        return _sturm_counts(self.alpha, self.beta_sq, self.pivmin, self.first_pivot, x)

    def bisect(self, first: int, last: int) -> Any:
        """Eigenvalues ``first .. last`` (ascending order, inclusive)."""
        target = jnp.arange(first, last + 1, dtype=np.int32)
        lower = jnp.broadcast_to(self.low, target.shape)
        upper = jnp.broadcast_to(self.high, target.shape)

        def unsettled(state: tuple[Any, Any, Any]) -> Any:
            i, lower, upper = state
            return (i < self.mantissa_bits + 1) & (jnp.max(upper - lower) > self.abs_tol)

        def halve(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
            i, lower, upper = state
            mid = 0.5 * (lower + upper)
            above = self.counts(mid) > target
            return i + 1, jnp.where(above, lower, mid), jnp.where(above, mid, upper)

        _, lower, upper = while_loop(unsettled, halve, (0, lower, upper))
        return 0.5 * (lower + upper)


def _concrete(fun_arg: str, x: Any) -> None:
    if isinstance(x, core.Tracer):
        raise ValueError(f"{_NAME}: select='v' returns as many eigenvalues as lie in "
                         f"'select_range', a number that depends on the values of argument "
                         f"{fun_arg!r}; it needs concrete arrays (outside jit), or use "
                         f"select='i'")


def _index_range(spectrum: _Spectrum, n: int, select: str, select_range: Any,
                 d: Any, e: Any) -> tuple[int, int]:
    if select == "a":
        return 0, n - 1
    if select not in ("i", "v"):
        raise ValueError(f"{_NAME}: argument 'select' must be 'a', 'i' or 'v', got {select!r}")
    if select_range is None or len(select_range) != 2:
        raise ValueError(f"{_NAME}: select={select!r} needs select_range=(low, high), got "
                         f"{select_range!r}")
    if select == "i":
        first, last = (operator.index(i) for i in select_range)
        if not 0 <= first <= last < n:
            raise ValueError(f"{_NAME}: argument 'select_range' must satisfy 0 <= first <= "
                             f"last < {n} for select='i', got {tuple(select_range)}")
        return first, last
    _concrete("d", d)
    _concrete("e", e)
    low, high = (float(v) for v in select_range)
    if not low < high:
        raise ValueError(f"{_NAME}: argument 'select_range' must be an interval (low, high] "
                         f"with low < high for select='v', got {tuple(select_range)}")
    dtype = get_aval(spectrum.alpha).dtype
    below = np.asarray(spectrum.counts(jnp.asarray([low, high], dtype)))
    return int(below[0]), int(below[1]) - 1


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[Any, Any] | None = None, tol: float | None = None,
                     key: Any = None) -> Array | tuple[Array, Array]:
    """The ascending eigenvalues (and with ``eigvals_only=False`` the
    eigenvectors, as columns) of the Hermitian tridiagonal matrix with
    diagonal ``d`` (its real part is used) and off-diagonal ``e``.

    ``select='a'`` gives all of them; ``'i'`` those with index in
    ``select_range`` (inclusive); ``'v'`` those in the half-open interval
    ``(low, high]`` (SciPy's; its count depends on the values, so ``d`` and
    ``e`` must be concrete). The eigenvalues are bisected until known to
    ``max(tol, eps * ||T||)``, as in JAX; the eigenvectors come from the
    symmetric eigensolver (``key``, JAX's seed for its inverse iteration,
    is accepted and unused)."""
    del key
    d, e = (jnp.asarray(x) for x in
            _util.promote_dtypes_inexact("scipy.linalg.eigh_tridiagonal", d, e))
    n = _util.shape_of(d)[0] if _util.ndim_of(d) == 1 else -1
    if n < 0 or _util.shape_of(e) != (max(n - 1, 0),):
        raise ValueError(f"{_NAME}: arguments 'd' and 'e' must be vectors of lengths n and "
                         f"n - 1, got shapes {_util.shape_of(d)} and {_util.shape_of(e)}")
    dtype = get_aval(d).dtype
    if n <= 1:
        values = jnp.real(d)
        return values if eigvals_only else (values, jnp.eye(n, dtype=dtype))
    spectrum = _Spectrum(d, e, tol)
    first, last = _index_range(spectrum, n, select, select_range, d, e)
    if last < first:
        real = get_aval(spectrum.alpha).dtype
        empty = jnp.zeros((0,), real)
        return empty if eigvals_only else (empty, jnp.zeros((n, 0), dtype))
    values = spectrum.bisect(first, last)
    if eigvals_only:
        return values
    mat = jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(jnp.conj(e), -1)
    vectors, _ = lax.linalg.eigh(mat, symmetrize_input=False)
    return values, vectors[:, first:last + 1]

