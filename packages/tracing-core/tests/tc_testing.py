"""Test utilities for lamina-tracing-core (imported by the tests via conftest).

- ``check_grads(f, args, order, modes)``: finite-difference checks of
  ``jvp`` (forward) and ``vjp`` (reverse), recursively up to ``order``.
- Tiny test-local primitives (``t_add_p``, ``t_mul_p``, ``t_sin_p``,
  ``t_cos_p``, ``t_neg_p``, ``t_sum_p``) with every rule, so the machinery can
  be tested independently of lax.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util as tu
from lamina_tracing_core import ad, ad_util, batching, dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.source_info import register_internal_directory
from lamina_tracing_core.primitives import (
    Primitive,
    abstract_eval_rules,
    batching_rules,
    jvp_rules,
    transpose_rules,
)

# The helpers here are not "the user's line" of an equation: the test is.
register_internal_directory(__file__)

# --- test-local primitives -----------------------------------------------------------------------
def _unop(name: str, fn: Callable[[Any], Any]) -> Primitive:
    p = Primitive(name)
    p.def_impl(lambda x: np.asarray(fn(np.asarray(x)), np.asarray(x).dtype))
    p.def_abstract_eval(lambda a: a)
    batching_rules[p] = lambda args, dims: (p.bind(args[0]), dims[0])
    return p


t_sin_p = _unop("t_sin", np.sin)
t_cos_p = _unop("t_cos", np.cos)
t_neg_p = _unop("t_neg", np.negative)


def _binop_abstract(a: ShapedArray, b: ShapedArray) -> ShapedArray:
    if a.shape != b.shape and a.shape and b.shape:
        raise TypeError(f"shapes must agree, got {a.str_short()} and {b.str_short()}")
    dtype, weak = dtypes.promote_types_weak((a.dtype, a.weak_type), (b.dtype, b.weak_type))
    return ShapedArray(a.shape or b.shape, dtype, weak)


def _binop(name: str, fn: Callable[[Any, Any], Any]) -> Primitive:
    p = Primitive(name)
    p.def_impl(lambda x, y: np.asarray(fn(np.asarray(x), np.asarray(y)), np.result_type(
        np.asarray(x), np.asarray(y))))
    p.def_abstract_eval(_binop_abstract)

    def batch(args: Sequence[Any], dims: Sequence[int | None]) -> tuple[Any, int]:
        x, y = args
        dx, dy = dims
        size = next(np.shape(a)[d] for a, d in zip(args, dims) if d is not None)
        shape_x = x.shape if hasattr(x, "shape") else np.shape(x)
        shape_y = y.shape if hasattr(y, "shape") else np.shape(y)
        if dx is None and not shape_x:
            return p.bind(x, y), dy  # type: ignore[return-value]
        if dy is None and not shape_y:
            return p.bind(x, y), dx  # type: ignore[return-value]
        x = batching.bdim_at_front(x, dx, size)
        y = batching.bdim_at_front(y, dy, size)
        sx, sy = _aval(x).shape, _aval(y).shape
        if sx != sy:  # a per-element scalar meets a per-element array
            from lamina_tracing_core.lax import structural
            if len(sx) < len(sy):
                x = structural.broadcast_in_dim(x, sy, (0,))
            else:
                y = structural.broadcast_in_dim(y, sx, (0,))
        return p.bind(x, y), 0

    batching_rules[p] = batch
    return p


t_add_p = _binop("t_add", np.add)
t_mul_p = _binop("t_mul", np.multiply)


def _t_sin_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = t_sin_p.bind(x)
    if type(t) is ad_util.Zero:
        return out, t
    return out, t_mul_p.bind(t, t_cos_p.bind(x))


def _t_cos_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = t_cos_p.bind(x)
    if type(t) is ad_util.Zero:
        return out, t
    return out, t_mul_p.bind(t, t_neg_p.bind(t_sin_p.bind(x)))


def _linear_unary_jvp(p: Primitive) -> Callable[..., Any]:
    def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        return p.bind(x), t if type(t) is ad_util.Zero else p.bind(t)
    return jvp


def _t_add_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    x, y = primals
    tx, ty = tangents
    out = t_add_p.bind(x, y)
    out_aval = ad_util.tangent_aval(_binop_abstract(_aval(x), _aval(y)))
    if type(tx) is ad_util.Zero and type(ty) is ad_util.Zero:
        return out, ad_util.Zero(out_aval)
    if type(tx) is ad_util.Zero:
        return out, _broadcast_to(ty, out_aval)
    if type(ty) is ad_util.Zero:
        return out, _broadcast_to(tx, out_aval)
    return out, t_add_p.bind(tx, ty)


def _aval(x: Any) -> ShapedArray:
    from lamina_tracing_core.avals import get_aval
    return get_aval(x)


def _broadcast_to(t: Any, aval: ShapedArray) -> Any:
    if _aval(t).shape == aval.shape:
        return t
    return t_add_p.bind(t, np.zeros(aval.shape, aval.dtype))


def _t_mul_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    x, y = primals
    tx, ty = tangents
    out = t_mul_p.bind(x, y)
    terms = []
    if type(tx) is not ad_util.Zero:
        terms.append(t_mul_p.bind(tx, y))
    if type(ty) is not ad_util.Zero:
        terms.append(t_mul_p.bind(x, ty))
    if not terms:
        return out, ad_util.Zero(ad_util.tangent_aval(_aval(out)))
    acc = terms[0]
    for t in terms[1:]:
        acc = t_add_p.bind(acc, t)
    return out, acc


def _unbroadcast(ct: Any, aval: ShapedArray) -> Any:
    if _aval(ct).shape == aval.shape:
        return ct
    return t_sum_p.bind(ct)


def _t_add_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    return [_unbroadcast(ct, x.aval) if ad.is_undefined_primal(x) else None,
            _unbroadcast(ct, y.aval) if ad.is_undefined_primal(y) else None]


def _t_mul_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    if ad.is_undefined_primal(x):
        return [_unbroadcast(t_mul_p.bind(ct, y), x.aval), None]
    return [None, _unbroadcast(t_mul_p.bind(x, ct), y.aval)]


def _t_neg_transpose(ct: Any, x: Any) -> list[Any]:
    return [t_neg_p.bind(ct)]


t_sum_p = Primitive("t_sum")
t_sum_p.def_impl(lambda x: np.asarray(np.sum(x), np.asarray(x).dtype))
t_sum_p.def_abstract_eval(lambda a: a.update(shape=()))


def _t_sum_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = t_sum_p.bind(x)
    return out, (ad_util.Zero(ad_util.tangent_aval(_aval(out))) if type(t) is ad_util.Zero
                 else t_sum_p.bind(t))


def _t_sum_transpose(ct: Any, x: Any) -> list[Any]:
    return [t_add_p.bind(np.zeros(x.aval.shape, x.aval.dtype), ct)]


def _t_sum_batch(args: Sequence[Any], dims: Sequence[int | None]) -> tuple[Any, int]:
    from lamina_tracing_core.lax import reductions
    (x,), (d,) = args, dims
    nd = len(np.shape(x)) if not hasattr(x, "shape") else len(x.shape)
    return reductions.reduce_sum(x, tuple(i for i in range(nd) if i != d)), 0


jvp_rules[t_sin_p] = _t_sin_jvp
jvp_rules[t_cos_p] = _t_cos_jvp
jvp_rules[t_neg_p] = _linear_unary_jvp(t_neg_p)
jvp_rules[t_add_p] = _t_add_jvp
jvp_rules[t_mul_p] = _t_mul_jvp
jvp_rules[t_sum_p] = _t_sum_jvp
transpose_rules[t_add_p] = _t_add_transpose
transpose_rules[t_mul_p] = _t_mul_transpose
transpose_rules[t_neg_p] = _t_neg_transpose
transpose_rules[t_sum_p] = _t_sum_transpose
batching_rules[t_sum_p] = _t_sum_batch
assert t_sum_p in abstract_eval_rules


def t_sin(x: Any) -> Any:
    return t_sin_p.bind(x)


def t_cos(x: Any) -> Any:
    return t_cos_p.bind(x)


def t_neg(x: Any) -> Any:
    return t_neg_p.bind(x)


def t_add(x: Any, y: Any) -> Any:
    return t_add_p.bind(x, y)


def t_mul(x: Any, y: Any) -> Any:
    return t_mul_p.bind(x, y)


def t_sum(x: Any) -> Any:
    return t_sum_p.bind(x)


# --- finite-difference gradient checks ------------------------------------------------------------
def _tolerance(dtype: Any, default: float) -> float:
    dt = np.dtype(dtype)
    if dt in (np.float16, dtypes.bfloat16):
        return 1e-1
    if dt in (np.float32, np.complex64):
        return max(default, 2e-2)
    return default


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    arr = np.asarray(x)
    if not np.issubdtype(arr.dtype, np.inexact):
        return np.zeros(arr.shape, dtypes.float0)
    out = rng.standard_normal(arr.shape)
    if np.issubdtype(arr.dtype, np.complexfloating):
        out = out + 1j * rng.standard_normal(arr.shape)
    return np.asarray(out, arr.dtype)


def _add_scaled(xs: Sequence[Any], ts: Sequence[Any], eps: float) -> list[Any]:
    out = []
    for x, t in zip(xs, ts):
        arr = np.asarray(x)
        if np.asarray(t).dtype == dtypes.float0:
            out.append(arr)
        else:
            out.append(np.asarray(arr + eps * np.asarray(t), arr.dtype))
    return out


def _vdot(xs: Sequence[Any], ys: Sequence[Any]) -> complex:
    total: complex = 0.0
    for x, y in zip(xs, ys):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        total += complex(np.sum(np.conj(x).astype(np.complex128) * y.astype(np.complex128)))
    return total


def _as_np_leaves(tree: Any) -> list[Any]:
    return [np.asarray(x) for x in tu.tree_leaves(tree)]


def _assert_close(a: Sequence[Any], b: Sequence[Any], atol: float, rtol: float,
                  what: str) -> None:
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        np.testing.assert_allclose(x.astype(np.complex128), y.astype(np.complex128),
                                   atol=atol, rtol=rtol, err_msg=what)


def check_jvp(f: Callable[..., Any], args: Sequence[Any], *, atol: float | None = None,
              rtol: float | None = None, eps: float = 1e-3, seed: int = 0) -> None:
    """Compares ``jvp(f)`` with central finite differences along a random tangent."""
    from lamina_tracing_core import api
    rng = np.random.RandomState(seed)
    tangents = [_rand_like(rng, a) for a in args]
    out, tan_out = api.jvp(f, tuple(args), tuple(tangents))
    f_plus = f(*_add_scaled(args, tangents, eps))
    f_minus = f(*_add_scaled(args, tangents, -eps))
    fd = [(np.asarray(p, np.float64 if not np.iscomplexobj(p) else np.complex128)
           - np.asarray(m, np.float64 if not np.iscomplexobj(m) else np.complex128)) / (2 * eps)
          for p, m in zip(_as_np_leaves(f_plus), _as_np_leaves(f_minus))]
    dtype = np.result_type(*[np.asarray(a).dtype for a in args]) if args else np.float64
    tol = _tolerance(dtype, 1e-4)
    _assert_close(_as_np_leaves(tan_out), fd, atol or tol, rtol or tol, "jvp vs finite diff")
    _assert_close(_as_np_leaves(out), _as_np_leaves(f(*args)), atol or tol, rtol or tol,
                  "jvp primal output")


def check_vjp(f: Callable[..., Any], args: Sequence[Any], *, atol: float | None = None,
              rtol: float | None = None, eps: float = 1e-3, seed: int = 0) -> None:
    """Checks ``<vjp(ct), t> == <ct, jvp(t)>`` with the JVP from finite differences."""
    from lamina_tracing_core import api
    rng = np.random.RandomState(seed + 1)
    out, vjp_fn = api.vjp(f, *args)
    out_leaves, out_tree = tu.tree_flatten(out)
    cts = [_rand_like(rng, o) for o in out_leaves]
    arg_cts = vjp_fn(tu.tree_unflatten(out_tree, cts))
    tangents = [_rand_like(rng, a) for a in args]
    lhs = _vdot(_as_np_leaves(arg_cts), tangents)
    f_plus = _as_np_leaves(f(*_add_scaled(args, tangents, eps)))
    f_minus = _as_np_leaves(f(*_add_scaled(args, tangents, -eps)))
    fd = [(p.astype(np.complex128) - m.astype(np.complex128)) / (2 * eps)
          for p, m in zip(f_plus, f_minus)]
    rhs = _vdot(cts, fd)
    dtype = np.result_type(*[np.asarray(a).dtype for a in args]) if args else np.float64
    tol = _tolerance(dtype, 1e-4)
    np.testing.assert_allclose(lhs, rhs, atol=atol or tol, rtol=rtol or tol,
                               err_msg="vjp vs finite diff")


def check_grads(f: Callable[..., Any], args: Sequence[Any], order: int,
                modes: Sequence[str] = ("fwd", "rev"), *, atol: float | None = None,
                rtol: float | None = None, eps: float = 1e-3) -> None:
    """Finite-difference checks of ``f``'s derivatives up to ``order`` in the
    given modes ("fwd": jvp, "rev": vjp). Order 2 checks the derivatives of
    the derivative functions (forward-over-forward, reverse-over-reverse)."""
    args = list(args)

    def check(fn: Callable[..., Any], fn_args: Sequence[Any], remaining: int) -> None:
        if remaining == 0:
            return
        if "fwd" in modes:
            check_jvp(fn, fn_args, atol=atol, rtol=rtol, eps=eps)
            if remaining > 1:
                from lamina_tracing_core import api
                rng = np.random.RandomState(7)
                tangents = [_rand_like(rng, a) for a in fn_args]

                def f_jvp(*primals: Any) -> Any:
                    return api.jvp(fn, tuple(primals), tuple(tangents))[1]

                check(f_jvp, fn_args, remaining - 1)
        if "rev" in modes:
            check_vjp(fn, fn_args, atol=atol, rtol=rtol, eps=eps)
            if remaining > 1:
                from lamina_tracing_core import api
                rng = np.random.RandomState(11)
                out = fn(*fn_args)
                out_leaves, out_tree = tu.tree_flatten(out)
                cts = tu.tree_unflatten(out_tree, [_rand_like(rng, o) for o in out_leaves])

                def f_vjp(*primals: Any) -> Any:
                    return api.vjp(fn, *primals)[1](cts)

                check(f_vjp, fn_args, remaining - 1)

    check(f, args, order)


def rand_args(shapes: Sequence[tuple[int, ...]], dtype: Any = np.float32,
              seed: int = 0) -> list[np.ndarray[Any, Any]]:
    rng = np.random.RandomState(seed)
    return [np.asarray(rng.standard_normal(s), dtype) for s in shapes]

