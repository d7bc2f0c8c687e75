"""Test utilities for lamina-tracing-core (imported by the tests via conftest).

- ``install_numpy_impls()``: numpy reference ``impl_rules`` for the lax
  primitives the tests use (the runtime layer registers real ones later; these
  are only installed where none is registered).
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
    impl_rules,
    jvp_rules,
    transpose_rules,
)

# The helpers here are not "the user's line" of an equation: the test is.
register_internal_directory(__file__)

# --- numpy reference impls of lax primitives ------------------------------------------------


def _np_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                    preferred_element_type: Any = None, **_: Any) -> Any:
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    l_free = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    r_free = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    l_sub = [""] * lhs.ndim
    r_sub = [""] * rhs.ndim
    for i, j in zip(lb, rb):
        l_sub[i] = r_sub[j] = next(letters)
    for i, j in zip(lc, rc):
        l_sub[i] = r_sub[j] = next(letters)
    for i in l_free:
        l_sub[i] = next(letters)
    for j in r_free:
        r_sub[j] = next(letters)
    out = "".join(l_sub[i] for i in lb) + "".join(l_sub[i] for i in l_free) + "".join(
        r_sub[j] for j in r_free)
    res = np.einsum(f"{''.join(l_sub)},{''.join(r_sub)}->{out}", lhs, rhs)
    dt = preferred_element_type or np.result_type(lhs.dtype, rhs.dtype)
    return np.asarray(res, dtype=dt)


def _np_broadcast_in_dim(x: Any, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                         **_: Any) -> Any:
    x = np.asarray(x)
    expanded = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        expanded[dst] = x.shape[src]
    return np.broadcast_to(x.reshape(expanded), tuple(shape)).copy()


def _np_select_n(which: Any, *cases: Any) -> Any:
    which = np.asarray(which)
    if which.dtype == np.bool_:
        return np.where(which, cases[1], cases[0])
    return np.choose(which, cases)


def _np_convert(x: Any, *, new_dtype: Any, **_: Any) -> Any:
    return np.asarray(x).astype(new_dtype)


def _np_slice(x: Any, *, start_indices: Any, limit_indices: Any, strides: Any = None) -> Any:
    strides = strides or (1,) * len(start_indices)
    return np.asarray(x)[tuple(slice(s, e, st) for s, e, st in zip(start_indices,
                                                                   limit_indices, strides))]


def _np_integer_pow(x: Any, *, y: int) -> Any:
    x = np.asarray(x)
    return (x ** y).astype(x.dtype)


def _np_reduce(fn: Callable[..., Any]) -> Callable[..., Any]:
    def impl(x: Any, *, axes: Sequence[int], **_: Any) -> Any:
        x = np.asarray(x)
        return np.asarray(fn(x, axis=tuple(axes)), dtype=x.dtype)
    return impl


def _np_cumsum(x: Any, *, axis: int, reverse: bool) -> Any:
    x = np.asarray(x)
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis), axis).astype(x.dtype)
    return np.cumsum(x, axis).astype(x.dtype)


def _same_dtype(fn: Callable[..., Any]) -> Callable[..., Any]:
    def impl(*args: Any, **params: Any) -> Any:
        arrays = [np.asarray(a) for a in args]
        out = fn(*arrays)
        return np.asarray(out, dtype=arrays[0].dtype)
    return impl


NUMPY_IMPLS: dict[str, Callable[..., Any]] = {
    "add": _same_dtype(np.add), "sub": _same_dtype(np.subtract),
    "mul": lambda x, y, **_: np.asarray(np.multiply(x, y), np.asarray(x).dtype),
    "div": _same_dtype(np.divide), "neg": _same_dtype(np.negative),
    "max": _same_dtype(np.maximum), "min": _same_dtype(np.minimum),
    "sin": _same_dtype(np.sin), "cos": _same_dtype(np.cos), "tan": _same_dtype(np.tan),
    "exp": _same_dtype(np.exp), "log": _same_dtype(np.log), "tanh": _same_dtype(np.tanh),
    "sqrt": _same_dtype(np.sqrt), "abs": _same_dtype(np.abs), "sign": _same_dtype(np.sign),
    "log1p": _same_dtype(np.log1p), "expm1": _same_dtype(np.expm1),
    "logistic": _same_dtype(lambda x: 1 / (1 + np.exp(-x))),
    "pow": _same_dtype(np.power), "square": _same_dtype(np.square),
    "rsqrt": _same_dtype(lambda x: 1 / np.sqrt(x)),
    "integer_pow": _np_integer_pow,
    "eq": lambda x, y: np.equal(x, y), "ne": lambda x, y: np.not_equal(x, y),
    "gt": lambda x, y: np.greater(x, y), "ge": lambda x, y: np.greater_equal(x, y),
    "lt": lambda x, y: np.less(x, y), "le": lambda x, y: np.less_equal(x, y),
    "and": lambda x, y: np.logical_and(x, y) if np.asarray(x).dtype == bool else x & y,
    "or": lambda x, y: np.logical_or(x, y) if np.asarray(x).dtype == bool else x | y,
    "not": lambda x: np.logical_not(x) if np.asarray(x).dtype == bool else ~x,
    "select_n": _np_select_n,
    "convert_element_type": _np_convert,
    "broadcast_in_dim": _np_broadcast_in_dim,
    "reshape": lambda x, *, new_sizes, **_: np.reshape(np.asarray(x), new_sizes),
    "transpose": lambda x, *, permutation: np.transpose(np.asarray(x), permutation),
    "squeeze": lambda x, *, dimensions: np.squeeze(np.asarray(x), tuple(dimensions)),
    "expand_dims": lambda x, *, dimensions: np.expand_dims(np.asarray(x), tuple(dimensions)),
    "reduce_sum": _np_reduce(np.sum), "reduce_max": _np_reduce(np.max),
    "reduce_min": _np_reduce(np.min), "reduce_prod": _np_reduce(np.prod),
    "dot_general": _np_dot_general,
    "slice": _np_slice,
    "concatenate": lambda *xs, dimension: np.concatenate([np.asarray(x) for x in xs],
                                                         dimension),
    "rev": lambda x, *, dimensions: np.flip(np.asarray(x), tuple(dimensions)),
    "iota": lambda *, dtype, shape, dimension, **_: np.broadcast_to(
        np.arange(shape[dimension], dtype=dtype).reshape(
            [shape[dimension] if i == dimension else 1 for i in range(len(shape))]),
        shape).copy(),
    "cumsum": _np_cumsum,
    "stop_gradient": lambda x: np.asarray(x),
    "copy": lambda x: np.array(x),
    "add_any": lambda x, y: np.asarray(np.add(x, y), np.asarray(x).dtype),
}


def install_numpy_impls() -> None:
    """Registers the numpy reference impls for lax primitives without an impl."""
    from lamina_tracing_core import lax
    from lamina_tracing_core.primitives import Primitive as P
    prims = [v for v in vars(lax).values() if isinstance(v, P)]
    prims.append(ad_util.add_jaxvals_p)
    for prim in prims:
        fn = NUMPY_IMPLS.get(prim.name)
        if fn is not None and prim not in impl_rules:
            impl_rules[prim] = fn


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

