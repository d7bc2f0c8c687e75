"""Cumulative reductions: ``cumsum``, ``cumprod``, ``cummax``, ``cummin``,
``cumlogsumexp`` (params ``axis``, ``reverse``), and ``associative_scan``.

``cumsum`` is linear (its transpose is the reversed ``cumsum``). The others
differentiate through a *dual* associative scan: the scan's combine function
is applied to (value, tangent) pairs, which is itself associative, so one
scan yields the primal and tangent outputs at once, with tangents entering
only linearly (so the result is transposable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules

Array = Any


def _cumulative(name: str, accepted: frozenset[np.dtype[Any]]) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(operand: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
        if operand.dtype not in accepted:
            common.check_dtype(name, operand, accepted)
        if not 0 <= axis < len(operand.shape):
            raise ValueError(f"{name}: axis {axis} is out of bounds for an operand of shape "
                             f"{operand.shape}")
        return operand

    def batch(args: Any, dims: Any, *, axis: int, reverse: bool) -> Any:
        (x,), (d,) = args, dims
        return prim.bind(x, axis=axis + 1 if axis >= d else axis, reverse=reverse), d

    prim.def_abstract_eval(abstract_eval)
    batching_rules[prim] = batch
    sit.register(prim, _cumulative_sharding)
    return prim


def _cumulative_sharding(x: ShapedArray, *, axis: int, reverse: bool
                         ) -> list[sit.TypeSharding | None]:
    """The operand's sharding; the scanned axis must not be split (a scan
    across shards would need communication JAX does not insert)."""
    if sit.spec_of(x)[axis]:
        raise sit.ShardingTypeError("Input should be unsharded over the axis being reduced. "
                                    f"Got input type={x} and axis={axis}")
    return [x.sharding]


cumsum_p = _cumulative("cumsum", common.NUM)
cumprod_p = _cumulative("cumprod", common.NUM)
cummax_p = _cumulative("cummax", common.ORDERED)
cummin_p = _cumulative("cummin", common.ORDERED)
cumlogsumexp_p = _cumulative("cumlogsumexp", common.FLOAT)


def _bind(prim: Primitive, operand: ArrayLike, axis: int, reverse: bool) -> Array:
    nd = len(get_aval(operand).shape)
    return prim.bind(operand, axis=common.canonicalize_axis(axis, nd), reverse=bool(reverse))


def cumsum(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    """Cumulative sum along ``axis`` (from the end when ``reverse``)."""
    return _bind(cumsum_p, operand, axis, reverse)


def cumprod(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    return _bind(cumprod_p, operand, axis, reverse)


def cummax(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    return _bind(cummax_p, operand, axis, reverse)


def cummin(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    return _bind(cummin_p, operand, axis, reverse)


def cumlogsumexp(operand: ArrayLike, axis: int = 0, reverse: bool = False) -> Array:
    return _bind(cumlogsumexp_p, operand, axis, reverse)


# --- associative scan ------------------------------------------------------------------------
def _interleave(a: Any, b: Any, axis: int) -> Any:
    """Elements of ``a`` and ``b`` alternating along ``axis`` (``a`` first); ``a``
    is as long as ``b`` or one longer."""
    a_shape, b_shape = get_aval(a).shape, get_aval(b).shape
    dtype = get_aval(a).dtype
    zero = np.zeros((), dtype)
    nd = len(a_shape)
    a_cfg = [(0, 0, 0)] * nd
    b_cfg = [(0, 0, 0)] * nd
    same = a_shape[axis] == b_shape[axis]
    a_cfg[axis] = (0, 1 if same else 0, 1)
    b_cfg[axis] = (1, 0 if same else 1, 1)
    combine = ew.bitwise_or if dtype == np.dtype(bool) else ew.add
    return combine(st.pad(a, zero, a_cfg), st.pad(b, zero, b_cfg))


def associative_scan(fn: Callable[..., Any], elems: Sequence[Any], reverse: bool = False,
                     axis: int = 0) -> list[Any]:
    """Inclusive scan of the lists ``elems`` along ``axis`` with the associative
    ``fn(a_list, b_list) -> list`` (a work-efficient odd/even recursion)."""
    elems = list(elems)
    if reverse:
        elems = [st.rev(e, (axis,)) for e in elems]

    def scan(xs: list[Any]) -> list[Any]:
        n = get_aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        evens_in = [st.slice_in_dim(x, 0, n - 1, 2, axis) for x in xs]
        odds_in = [st.slice_in_dim(x, 1, n, 2, axis) for x in xs]
        odd = scan(list(fn(evens_in, odds_in)))
        if n % 2 == 0:
            even = fn([st.slice_in_dim(o, 0, get_aval(o).shape[axis] - 1, 1, axis) for o in odd],
                      [st.slice_in_dim(x, 2, n, 2, axis) for x in xs])
        else:
            even = fn(odd, [st.slice_in_dim(x, 2, n, 2, axis) for x in xs])
        even = [st.concatenate([st.slice_in_dim(x, 0, 1, 1, axis), e], axis)
                for x, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(elems)
    if reverse:
        out = [st.rev(o, (axis,)) for o in out]
    return out


# --- rules ---------------------------------------------------------------------------------
def _cumsum_transpose(ct: Any, operand: Any, *, axis: int, reverse: bool) -> list[Any]:
    return [cumsum_p.bind(ct, axis=axis, reverse=not reverse)]


helpers.deflinear(cumsum_p, _cumsum_transpose)


def _dual_prod(a: list[Any], b: list[Any]) -> list[Any]:
    (x, dx), (y, dy) = a, b
    return [ew.mul(x, y), ew.add(ew.mul(dx, y), ew.mul(x, dy))]


def _dual_chooser(pick_first: Callable[[Any, Any], Any]) -> Callable[..., list[Any]]:
    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        (x, dx), (y, dy) = a, b
        first = pick_first(x, y)
        return [ew.select(first, x, y), ew.select(first, dx, dy)]
    return combine


def _dual_logaddexp(a: list[Any], b: list[Any]) -> list[Any]:
    (x, dx), (y, dy) = a, b
    hi = ew.max(x, y)
    lo = ew.min(x, y)
    out = ew.add(hi, ew.log1p(ew.exp(ew.sub(lo, hi))))
    out = ew.select(ew.eq(lo, common.const(lo, -np.inf)), hi, out)
    wx, wy = ew.exp(ew.sub(x, out)), ew.exp(ew.sub(y, out))
    return [out, ew.add(ew.mul(dx, wx), ew.mul(dy, wy))]


def _scan_jvp(prim: Primitive, combine: Callable[..., list[Any]]) -> Callable[..., Any]:
    def rule(primals: Any, tangents: Any, *, axis: int, reverse: bool) -> Any:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis, reverse=reverse)
        if helpers.is_zero(t):
            return out, helpers.zero_from_primal(out)
        _, tangent = associative_scan(combine, [x, t], reverse=reverse, axis=axis)
        return out, tangent
    return rule


jvp_rules[cumprod_p] = _scan_jvp(cumprod_p, _dual_prod)
# cummax/cummin: on ties the later element wins, matching the primal's choice
# of value (both equal) and giving each position one source of derivative.
jvp_rules[cummax_p] = _scan_jvp(cummax_p, _dual_chooser(lambda x, y: ew.gt(x, y)))
jvp_rules[cummin_p] = _scan_jvp(cummin_p, _dual_chooser(lambda x, y: ew.lt(x, y)))
jvp_rules[cumlogsumexp_p] = _scan_jvp(cumlogsumexp_p, _dual_logaddexp)

__all__ = ["cumsum_p", "cumprod_p", "cummax_p", "cummin_p", "cumlogsumexp_p", "cumsum",
           "cumprod", "cummax", "cummin", "cumlogsumexp", "associative_scan"]
