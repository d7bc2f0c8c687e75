"""``lamina.test_util``: numerical checks of derivatives (JAX's ``jax.test_util``).

``check_grads(f, args, order)`` compares lamina's forward-mode (``jvp``) and
reverse-mode (``vjp``) derivatives of ``f`` at ``args`` with central finite
differences, recursively up to ``order``. The directions are drawn from
``np.random.RandomState(0)`` as JAX does, and the finite differences are taken
in NumPy at each argument's dtype. Tolerances default per dtype (``float32``:
``2e-3``); ``atol``/``rtol`` may be a number or a ``{dtype: tol}`` dict.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes
from lamina_tracing_core.api import jvp, vjp

from lamina import tree_util

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

_GRADIENT_TOLERANCE: dict[np.dtype[Any], float] = {
    np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-5,
    np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5, dtypes.bfloat16: 1e-1,
}

_PYTHON_SCALAR_DTYPES: dict[type, np.dtype[Any]] = {
    bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
    complex: np.dtype(np.complex128)}


def _dtype(x: Any) -> np.dtype[Any]:
    if hasattr(x, "dtype"):
        dtype: np.dtype[Any] = np.dtype(x.dtype)
        return dtype
    if type(x) in _PYTHON_SCALAR_DTYPES:
        return _PYTHON_SCALAR_DTYPES[type(x)]
    return np.dtype(np.asarray(x).dtype)


def _tolerance(dtype: np.dtype[Any], tol: Any) -> float:
    if tol is not None and not isinstance(tol, dict):
        return float(tol)
    table = dict(_GRADIENT_TOLERANCE)
    if tol:
        table.update({np.dtype(k): v for k, v in tol.items()})
    canonical = dtypes.canonicalize_dtype(dtype)
    return float(table.get(canonical, 0.0 if not dtypes.is_inexact(canonical) else 1e-6))


def _host(x: Any) -> np.ndarray[Any, Any]:
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype == dtypes.bfloat16 else a


def _assert_close(x: Any, y: Any, atol: Any, rtol: Any, err_msg: str) -> None:
    dtype = _dtype(x)
    if dtype == dtypes.float0:
        return
    np.testing.assert_allclose(_host(x), _host(y), atol=_tolerance(dtype, atol),
                               rtol=_tolerance(dtype, rtol), err_msg=err_msg)


def _check_close(xs: Any, ys: Any, atol: Any, rtol: Any, err_msg: str) -> None:
    tree_util.tree_map(functools.partial(_assert_close, atol=atol, rtol=rtol, err_msg=err_msg),
                       xs, ys)


def _check_dtypes_match(xs: Any, ys: Any) -> None:
    def check(x: Any, y: Any) -> None:
        dx, dy = dtypes.canonicalize_dtype(_dtype(x)), dtypes.canonicalize_dtype(_dtype(y))
        if dx != dy and not (dy == dtypes.float0 and not dtypes.is_inexact(dx)):
            raise AssertionError(f"{dx} != {dy}")
    tree_util.tree_map(check, xs, ys)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    shape, dtype = np.shape(x), _dtype(x)
    if dtypes.is_complex(dtype):
        return (np.asarray(rng.randn(*shape), dtype) + 1j * np.asarray(rng.randn(*shape), dtype)
                ).astype(dtype)
    return np.asarray(rng.randn(*shape), dtype=dtype)


def _add(xs: Any, ys: Any) -> Any:
    return tree_util.tree_map(lambda x, y: np.add(x, y, dtype=_dtype(x)), xs, ys)


def _sub(xs: Any, ys: Any) -> Any:
    def sub(x: Any, y: Any) -> Any:
        if _dtype(x) == dtypes.float0:
            return x
        return np.subtract(x, y, dtype=_dtype(x))
    return tree_util.tree_map(sub, xs, ys)


def _scale(xs: Any, s: float) -> Any:
    return tree_util.tree_map(lambda x: np.multiply(x, s, dtype=_dtype(x)), xs)


def _conj(xs: Any) -> Any:
    return tree_util.tree_map(lambda x: np.conjugate(x, dtype=_dtype(x)), xs)


def _inner(xs: Any, ys: Any) -> Any:
    def contract(x: Any, y: Any) -> Any:
        return np.real(np.dot(np.conj(_host(x)).reshape(-1), _host(y).reshape(-1)))
    return tree_util.tree_reduce(np.add, tree_util.tree_map(contract, xs, ys))


def numerical_jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
                  eps: float = EPS) -> Any:
    """``(f(x + eps t) - f(x - eps t)) / (2 eps)``, computed in NumPy."""
    delta = _scale(tangents, eps)
    f_pos = f(*_add(primals, delta))
    f_neg = f(*_sub(primals, delta))
    return _scale(_sub(tree_util.tree_map(np.asarray, f_pos),
                       tree_util.tree_map(np.asarray, f_neg)), 0.5 / eps)


def check_jvp(f: Callable[..., Any], f_jvp: Callable[..., Any], args: Sequence[Any],
              atol: Any = None, rtol: Any = None, eps: float = EPS, err_msg: str = "") -> None:
    """Checks ``f_jvp(args, tangents)`` against ``f`` and finite differences."""
    rng = np.random.RandomState(0)
    tangent = tree_util.tree_map(functools.partial(_rand_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_expected = f(*args)
    _check_dtypes_match(v_out, v_expected)
    t_expected = numerical_jvp(f, args, tangent, eps=eps)
    _check_close(v_out, v_expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    _check_close(t_out, t_expected, atol, rtol, f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f: Callable[..., Any], f_vjp: Callable[..., Any], args: Sequence[Any],
              atol: Any = None, rtol: Any = None, eps: float = EPS, err_msg: str = "") -> None:
    """Checks ``f_vjp(*args) -> (out, vjp_fn)`` by the inner-product identity
    ``<t, vjp(c)> == <jvp(t), c>`` with a finite-difference ``jvp``."""
    rng = np.random.RandomState(0)
    v_out, vjp_fn = f_vjp(*args)
    v_expected = f(*args)
    _check_close(v_out, v_expected, atol, rtol, f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_util.tree_map(functools.partial(_rand_like, rng), args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_util.tree_map(functools.partial(_rand_like, rng), v_out)
    cotangent_out = _conj(vjp_fn(_conj(cotangent)))
    ip = _inner(tangent, cotangent_out)
    ip_expected = _inner(tangent_out, cotangent)
    _check_close(ip, ip_expected, atol, rtol,
                 f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int,
                modes: Sequence[str] = ("fwd", "rev"), atol: Any = None, rtol: Any = None,
                eps: float | None = None) -> None:
    """Checks ``f``'s derivatives at ``args`` up to ``order`` in the given
    ``modes`` (``"fwd"``: ``jvp``, ``"rev"``: ``vjp``); raises ``AssertionError``
    on a mismatch."""
    unknown = set(modes) - {"fwd", "rev"}
    if unknown:
        raise ValueError(f"check_grads: unknown modes {sorted(unknown)}; use 'fwd' and/or 'rev'")
    args = tuple(args)
    step = eps or EPS

    def check(fun: Callable[..., Any], fun_args: tuple[Any, ...], n: int, msg: str) -> None:
        if "fwd" in modes:
            fwd_msg = f"JVP of {msg}" if msg else "JVP"
            check_jvp(fun, functools.partial(jvp, fun), fun_args, atol, rtol, step, fwd_msg)
            if n > 1:
                check(functools.partial(jvp, fun), (fun_args, fun_args), n - 1, fwd_msg)
        if "rev" in modes:
            rev_msg = f"VJP of {msg}" if msg else "VJP"
            check_vjp(fun, functools.partial(vjp, fun), fun_args, atol, rtol, step, rev_msg)
            if n > 1:
                def f_vjp(*a: Any) -> Any:
                    out, pullback = vjp(fun, *a)
                    return pullback(out)
                check(f_vjp, fun_args, n - 1, rev_msg)

    check(f, args, order, "")
