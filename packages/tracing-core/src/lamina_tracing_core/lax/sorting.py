"""Sorting: ``sort`` (several operands sorted together by the first
``num_keys``) and ``top_k``.

Both differentiate by gathering the tangents with the permutation the sort
applied (``take_along_axis`` of an iota sorted alongside the operands).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.lax import common, elementwise, helpers, indexing
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules

Array = Any

sort_p = Primitive("sort", multiple_results=True)


def _sort_sharding(*avals: ShapedArray, dimension: int, **_: Any
                   ) -> list[sit.TypeSharding | None]:
    """Every result has the sharded operands' common sharding, which must
    leave the sorted dimension whole (an unsharded operand is let through, as
    in ``sit.concatenate``)."""
    sharded = [a.sharding for a in avals if a.sharding is not None]
    for s in sharded:
        if dimension < len(s.spec) and s.spec[dimension]:
            raise sit.ShardingTypeError(
                "Arguments to sort must be unsharded over the sorting dimension. "
                f"Got arg sharding={s!r} and sorting dimension={dimension}")
        if s != sharded[0]:
            raise sit.ShardingTypeError("Arguments to sort must have equal shardings, got: "
                                        f"{' '.join(repr(t) for t in sharded)}")
    return [sharded[0] if sharded else None] * len(avals)


sit.register(sort_p, _sort_sharding)


@sort_p.def_abstract_eval
def _sort_abstract_eval(*avals: ShapedArray, dimension: int, is_stable: bool,
                        num_keys: int) -> list[ShapedArray]:
    if not avals:
        raise TypeError("sort requires at least one operand")
    if any(a.shape != avals[0].shape for a in avals[1:]):
        raise TypeError(f"Arguments to sort must have equal shapes, got: "
                        f"{' '.join(str(a.shape) for a in avals)}")
    if not 0 <= dimension < len(avals[0].shape):
        raise ValueError(f"sort dimension {dimension} is out of bounds for operands of shape "
                         f"{avals[0].shape}")
    if not 1 <= num_keys <= len(avals):
        raise ValueError(f"sort num_keys={num_keys} must be between 1 and the number of "
                         f"operands {len(avals)}")
    for a in avals:
        if a.dtype not in common.ANY:
            common.check_dtype("sort", a, common.ANY)
    return list(avals)


def sort(operand: ArrayLike | Sequence[ArrayLike], dimension: int = -1,
         is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sorts ``operand`` (or several, lexicographically by the first ``num_keys``)
    along ``dimension``; NaNs sort to the end, -0.0 equals 0.0."""
    if isinstance(operand, (list, tuple)):
        if len(operand) == 0:
            raise TypeError("Sort requires at least one operand")
        if not 1 <= num_keys <= len(operand):
            raise ValueError(f"num_keys={num_keys} must be between 1 and "
                             f"len(operand)={len(operand)}")
        nd = len(get_aval(operand[0]).shape)
        dim = common.canonicalize_axis(dimension, nd)
        return tuple(sort_p.bind(*operand, dimension=dim, is_stable=bool(is_stable),
                                 num_keys=operator.index(num_keys)))
    if num_keys != 1:
        raise ValueError(f"num_keys={num_keys} must equal 1 for a single operand.")
    dim = common.canonicalize_axis(dimension, len(get_aval(operand).shape))
    return sort_p.bind(operand, dimension=dim, is_stable=bool(is_stable), num_keys=1)[0]


def sort_key_val(keys: ArrayLike, values: ArrayLike, dimension: int = -1,
                 is_stable: bool = True) -> tuple[Array, Array]:
    """Sorts ``keys`` along ``dimension`` and applies the same permutation to ``values``."""
    k, v = sort([keys, values], dimension, is_stable, num_keys=1)
    return k, v


def _iota_along(shape: tuple[int, ...], axis: int) -> Any:
    dtype = dtypes.int32 if shape[axis] < 2 ** 31 - 1 else dtypes.int64
    return st.broadcasted_iota(dtype, shape, axis)


def _sort_jvp(primals: Any, tangents: Any, *, dimension: int, is_stable: bool,
              num_keys: int) -> Any:
    shape = get_aval(primals[0]).shape
    iota = _iota_along(shape, dimension)
    outs = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)
    perm = outs[-1]
    out_tangents = [t if helpers.is_zero(t) else indexing.take_along_axis(t, perm, dimension)
                    for t in tangents]
    return list(outs[:-1]), out_tangents


def _sort_batch(args: Any, dims: Any, *, dimension: int, is_stable: bool,
                num_keys: int) -> Any:
    proto, bdim = next((a, d) for a, d in zip(args, dims) if d is not None)
    full = get_aval(proto).shape
    new_args = []
    for a, d in zip(args, dims):
        if d is None:
            kept = tuple(i for i in range(len(full)) if i != bdim)
            new_args.append(st.broadcast_in_dim(a, full, kept))
        else:
            new_args.append(helpers.moveaxis(a, d, bdim))
    new_dim = dimension + (1 if bdim <= dimension else 0)
    outs = sort_p.bind(*new_args, dimension=new_dim, is_stable=is_stable, num_keys=num_keys)
    return outs, [bdim] * len(outs)


jvp_rules[sort_p] = _sort_jvp
batching_rules[sort_p] = _sort_batch

top_k_p = Primitive("top_k", multiple_results=True)


@top_k_p.def_abstract_eval
def _top_k_abstract_eval(operand: ShapedArray, *, k: int, axis: int) -> list[ShapedArray]:
    if operand.dtype in common.COMPLEX:
        raise ValueError("top_k is not compatible with complex inputs.")
    if operand.dtype not in common.ORDERED:
        common.check_dtype("top_k", operand, common.ORDERED)
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if not operand.shape:
        raise TypeError(f"top_k operand must have >= 1 dimension, got {operand.shape}")
    if not 0 <= axis < len(operand.shape):
        raise ValueError(f"top_k axis argument out of range: axis={axis} for "
                         f"operand.shape={operand.shape}")
    shape = list(operand.shape)
    if shape[axis] < k:
        raise ValueError("k argument to top_k must be no larger than size along axis; got "
                         f"k={k} with shape={operand.shape} and axis={axis}")
    shape[axis] = k
    return [ShapedArray(tuple(shape), operand.dtype, operand.weak_type),
            ShapedArray(tuple(shape), dtypes.int32, operand.weak_type)]


def top_k(operand: ArrayLike, k: int, *, axis: int = -1) -> list[Array]:
    """``[values, indices]``: the ``k`` largest entries along ``axis``
    (descending) and their indices; ties keep the lower index first. A list,
    as JAX returns."""
    nd = len(get_aval(operand).shape)
    if nd == 0:
        raise TypeError("top_k operand must have >= 1 dimension, got ()")
    k = operator.index(k)
    values, indices = top_k_p.bind(operand, k=k, axis=common.canonicalize_axis(axis, nd))
    return [values, indices]


def _approx_k(fun: str, operand: ArrayLike, k: int, reduction_dimension: int,
              recall_target: float, largest: bool) -> list[Array]:
    """The exact answer approximate top-k asks for (what JAX's CPU and GPU
    fallback computes; recall 1 meets any ``recall_target``): ``top_k`` along
    ``reduction_dimension``, of the negated operand for the smallest."""
    aval = get_aval(operand)
    if not dtypes.is_floating(aval.dtype):
        raise ValueError(f"{fun}: operand must be a floating type, got {aval.dtype}")
    if not 0 < recall_target <= 1:
        raise ValueError(f"{fun}: recall_target must be in (0, 1], got {recall_target}")
    nd = len(aval.shape)
    axis = common.canonicalize_axis(reduction_dimension, nd) if nd else 0
    values, indices = top_k(operand if largest else elementwise.neg(operand), k, axis=axis)
    return [values if largest else elementwise.neg(values), indices]


def approx_max_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Array]:
    """``[values, indices]`` of the ``k`` largest entries along
    ``reduction_dimension`` (JAX's ``lax.approx_max_k``), computed exactly:
    descending, ties keep the lower index first. ``reduction_input_size_override``
    and ``aggregate_to_topk`` only tune TPU's approximate kernel."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, recall_target, True)


def approx_min_k(operand: ArrayLike, k: int, reduction_dimension: int = -1,
                 recall_target: float = 0.95, reduction_input_size_override: int = -1,
                 aggregate_to_topk: bool = True) -> list[Array]:
    """``[values, indices]`` of the ``k`` smallest entries, as :func:`approx_max_k`
    (ascending)."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, recall_target, False)


def _top_k_jvp(primals: Any, tangents: Any, *, k: int, axis: int) -> Any:
    (x,), (t,) = primals, tangents
    values, indices = top_k_p.bind(x, k=k, axis=axis)
    if helpers.is_zero(t):
        return [values, indices], [helpers.zero_from_primal(values),
                                   helpers.zero_from_primal(indices)]
    return [values, indices], [indexing.take_along_axis(t, indices, axis),
                               helpers.zero_from_primal(indices)]


def _top_k_batch(args: Any, dims: Any, *, k: int, axis: int) -> Any:
    (x,), (d,) = args, dims
    outs = top_k_p.bind(x, k=k, axis=axis + 1 if d <= axis else axis)
    return outs, [d, d]


jvp_rules[top_k_p] = _top_k_jvp
batching_rules[top_k_p] = _top_k_batch
_ = np

__all__ = ["approx_max_k", "approx_min_k", "sort_p", "top_k_p", "sort", "sort_key_val",
           "top_k"]
