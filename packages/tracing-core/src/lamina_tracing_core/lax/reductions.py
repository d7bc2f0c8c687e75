"""Reductions over axes: ``reduce_sum/prod/max/min/and/or/xor``, ``argmax``,
``argmin``, and ``reduce`` for the monoids they implement.

Params follow JAX 0.10: ``axes`` (a sorted tuple of distinct ints) on all,
``out_sharding`` on ``reduce_sum`` only, ``index_dtype`` on argmax/argmin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import (
    convert_element_type,
    reduce_sum,
    reduce_sum_p,
    reduced_shape,
    reduction_axes,
    reduction_batcher,
)
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import cumulative
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules

Array = Any


def _reducer(name: str, accepted: frozenset[np.dtype[Any]], *, keep_weak: bool = True
             ) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(operand: ShapedArray, *, axes: tuple[int, ...],
                      **params: Any) -> ShapedArray:
        if operand.dtype not in accepted:
            common.check_dtype(name, operand, accepted)
        shape = reduced_shape(name, operand, axes)
        return ShapedArray(shape, operand.dtype, operand.weak_type and keep_weak)

    prim.def_abstract_eval(abstract_eval)
    sit.register(prim, sit.reduction)
    batching_rules[prim] = reduction_batcher(prim)
    return prim


reduce_prod_p = _reducer("reduce_prod", common.NUM)
reduce_max_p = _reducer("reduce_max", common.ANY)
reduce_min_p = _reducer("reduce_min", common.ANY)
reduce_and_p = _reducer("reduce_and", common.BOOL_OR_INT, keep_weak=False)
reduce_or_p = _reducer("reduce_or", common.BOOL_OR_INT, keep_weak=False)
reduce_xor_p = _reducer("reduce_xor", common.BOOL_OR_INT, keep_weak=False)


def reduce_prod(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_prod_p.bind(operand, axes=reduction_axes(operand, axes))


def reduce_max(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_max_p.bind(operand, axes=reduction_axes(operand, axes))


def reduce_min(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_min_p.bind(operand, axes=reduction_axes(operand, axes))


def reduce_and(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_and_p.bind(operand, axes=reduction_axes(operand, axes))


def reduce_or(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_or_p.bind(operand, axes=reduction_axes(operand, axes))


def reduce_xor(operand: ArrayLike, axes: Sequence[int]) -> Array:
    return reduce_xor_p.bind(operand, axes=reduction_axes(operand, axes))


# --- rules ------------------------------------------------------------------------------
def _keepdims_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _reduce_chooser_jvp(g: Any, ans: Any, operand: Any, *, axes: tuple[int, ...]) -> Any:
    """Ties share the derivative: the tangent is the mean of ``g`` over the
    positions that attain the max (min)."""
    shape = get_aval(operand).shape
    ans_full = st.reshape(ans, _keepdims_shape(shape, axes))
    indicators = convert_element_type(ew.eq(operand, ans_full), get_aval(g).dtype)
    counts = reduce_sum(indicators, axes)
    return ew.div(reduce_sum(ew.mul(g, indicators), axes), counts)


helpers.defjvp2(reduce_max_p, _reduce_chooser_jvp)
helpers.defjvp2(reduce_min_p, _reduce_chooser_jvp)
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    helpers.defjvp_zero(_p)


def _exclusive_cumprod(x: Any, axis: int, reverse: bool) -> Any:
    """Products of the elements strictly before (after, if ``reverse``) each
    position along ``axis``: no division, so zeros are handled exactly."""
    shape = get_aval(x).shape
    n = shape[axis]
    ones = np.ones((), get_aval(x).dtype)
    config = [(0, 0, 0)] * len(shape)
    if reverse:
        config[axis] = (0, 1, 0)
        shifted = st.pad(st.slice_in_dim(x, 1, n, 1, axis), ones, config)
    else:
        config[axis] = (1, 0, 0)
        shifted = st.pad(st.slice_in_dim(x, 0, n - 1, 1, axis), ones, config)
    return cumulative.cumprod(shifted, axis, reverse)


def _reduce_prod_jvp(primals: Any, tangents: Any, *, axes: tuple[int, ...]) -> Any:
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    if helpers.is_zero(t):
        return out, helpers.zero_from_primal(out)
    if not axes:
        return out, t
    shape = get_aval(x).shape
    kept = [i for i in range(len(shape)) if i not in axes]
    # Move the reduced axes to the front and flatten them into one.
    perm = tuple(axes) + tuple(kept)
    n = 1
    for a in axes:
        n *= shape[a]
    rest = tuple(shape[i] for i in kept)
    xf = st.reshape(st.transpose(x, perm), (n,) + rest)
    tf = st.reshape(st.transpose(t, perm), (n,) + rest)
    others = ew.mul(_exclusive_cumprod(xf, 0, False), _exclusive_cumprod(xf, 0, True))
    return out, reduce_sum(ew.mul(tf, others), (0,))


jvp_rules[reduce_prod_p] = _reduce_prod_jvp


# --- argmax / argmin ---------------------------------------------------------------------
def _argminmax(name: str) -> Primitive:
    prim = Primitive(name)
    sit.register(prim, sit.reduction)

    def abstract_eval(operand: ShapedArray, *, axes: tuple[int, ...],
                      index_dtype: Any) -> ShapedArray:
        if len(axes) != 1:
            raise ValueError(f"{name} takes exactly one axis, got axes={axes}")
        axis, = axes
        if not 0 <= axis < len(operand.shape):
            raise ValueError(f"{name}: invalid axis {axis} for operand shape {operand.shape}")
        if operand.shape[axis] < 1:
            raise ValueError(f"argmin and argmax require non-empty reduced dimension. "
                             f"operand.shape={operand.shape} axis={axis}")
        if operand.dtype not in common.ORDERED:
            common.check_dtype(name, operand, common.ORDERED)
        if np.dtype(index_dtype) not in common.INT:
            raise TypeError(f"{name}: index_dtype must be an integer type, but got "
                            f"{np.dtype(index_dtype).name}")
        shape = operand.shape[:axis] + operand.shape[axis + 1:]
        return ShapedArray(shape, np.dtype(index_dtype), False)

    def batch(args: Any, dims: Any, *, axes: tuple[int, ...], index_dtype: Any) -> Any:
        (x,), (d,) = args, dims
        axis, = axes
        new_axis = axis + 1 if axis >= d else axis
        out_d = d - 1 if axis < d else d
        return prim.bind(x, axes=(new_axis,), index_dtype=index_dtype), out_d

    prim.def_abstract_eval(abstract_eval)
    batching_rules[prim] = batch
    helpers.defjvp_zero(prim)
    return prim


argmax_p = _argminmax("argmax")
argmin_p = _argminmax("argmin")


def argmax(operand: ArrayLike, axis: int, index_dtype: Any) -> Array:
    """Index of the first maximum along ``axis`` (NaNs count as maximal)."""
    nd = len(get_aval(operand).shape)
    return argmax_p.bind(operand, axes=(common.canonicalize_axis(axis, nd),),
                         index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand: ArrayLike, axis: int, index_dtype: Any) -> Array:
    """Index of the first minimum along ``axis`` (NaNs count as minimal)."""
    nd = len(get_aval(operand).shape)
    return argmin_p.bind(operand, axes=(common.canonicalize_axis(axis, nd),),
                         index_dtype=dtypes.canonicalize_dtype(index_dtype))


# --- reduce over a monoid ------------------------------------------------------------------
def _identity_of(prim: Primitive, dtype: np.dtype[Any]) -> Any:
    if prim is reduce_sum_p or prim is reduce_or_p or prim is reduce_xor_p:
        return np.zeros((), dtype)
    if prim is reduce_prod_p:
        return np.ones((), dtype)
    if prim is reduce_and_p:
        return np.array(-1 if dtype in common.SIGNED else True if dtype == dtypes.bool_
                        else dtypes.highest(dtype) if dtype in common.UNSIGNED else 0, dtype)
    if prim is reduce_max_p:
        return dtypes.lowest(dtype)
    return dtypes.highest(dtype)


_MONOIDS: dict[Callable[..., Any], Primitive] = {
    ew.add: reduce_sum_p, ew.mul: reduce_prod_p, ew.max: reduce_max_p, ew.min: reduce_min_p,
    ew.bitwise_and: reduce_and_p, ew.bitwise_or: reduce_or_p, ew.bitwise_xor: reduce_xor_p}


def reduce(operands: Any, init_values: Any, computation: Callable[..., Any],
           dimensions: Sequence[int], out_sharding: Any = None) -> Any:
    """Reduces ``operands`` over ``dimensions`` with ``computation`` starting from
    ``init_values``.

    The computations lax has primitives for (``lax.add``, ``lax.mul``,
    ``lax.max``, ``lax.min``, the bitwise ops) are recognized and lowered to
    ``reduce_sum`` etc.; a non-identity init value is combined afterwards.
    """
    if isinstance(operands, (list, tuple)):
        if len(operands) != 1:
            raise TypeError("lax.reduce of several operands needs a general reduction "
                            "computation, which lamina does not support; reduce each "
                            "operand with a monoid computation (lax.add, lax.max, ...)")
        (x,), (init,) = operands, init_values
        return [reduce(x, init, computation, dimensions, out_sharding)]
    prim = _MONOIDS.get(computation)
    if prim is None:
        raise TypeError(f"lax.reduce: computation {computation!r} is not a recognized monoid "
                        f"(lax.add, lax.mul, lax.max, lax.min, lax.bitwise_and/or/xor)")
    x = operands
    dims = reduction_axes(x, dimensions)
    params: dict[str, Any] = {"axes": dims}
    if prim is reduce_sum_p:
        params["out_sharding"] = out_sharding
    out = prim.bind(x, **params)
    dtype = get_aval(x).dtype
    init = init_values
    # A known identity init is dropped; any other init is combined in once
    # (the monoids are associative and commutative).
    if isinstance(init, (int, float, bool, complex, np.generic, np.ndarray)) and \
            np.array_equal(np.asarray(init, dtype), _identity_of(prim, dtype)):
        return out
    return computation(out, init)


__all__ = ["reduce_sum_p", "reduce_prod_p", "reduce_max_p", "reduce_min_p", "reduce_and_p",
           "reduce_or_p", "reduce_xor_p", "argmax_p", "argmin_p", "reduce_sum", "reduce_prod",
           "reduce_max", "reduce_min", "reduce_and", "reduce_or", "reduce_xor", "argmax",
           "argmin", "reduce"]
