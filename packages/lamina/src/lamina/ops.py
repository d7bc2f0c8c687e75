"""``lamina.ops``: segment reductions (JAX's ``jax.ops``).

``segment_sum(data, segment_ids, num_segments)`` combines the rows of
``data`` (its leading axis) that share a segment id into row ``id`` of the
result, ``[num_segments, *data.shape[1:]]``; a segment no row names holds the
reduction's identity (0, 1, the dtype's lowest or highest value). Ids
outside ``[0, num_segments)`` are dropped (JAX's default ``mode``, fill or
drop); ``num_segments`` defaults to ``max(segment_ids) + 1``, which needs
concrete ids. ``bucket_size`` reduces the rows in buckets of that many first
and then combines the buckets, as JAX does (the same result, up to rounding).
Each is one scatter, so ``grad``, ``vmap`` and ``jit`` go through it;
``out_sharding`` reshards the result (``reshard``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
import numpy as np
from lamina_sharded_jit.explicit_sharding import reshard
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.api import vmap
from lamina_tracing_core.lax.indexing import ScatterDimensionNumbers
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]

Array = Any
_Scatter = Callable[..., Any]


def _identity(kind: str, dtype: np.dtype[Any]) -> Any:
    if kind == "sum":
        return np.zeros((), dtype)
    if kind == "prod":
        return np.ones((), dtype)
    return dtypes.lowest(dtype) if kind == "max" else dtypes.highest(dtype)


_SCATTERS: dict[str, _Scatter] = {"sum": lax.scatter_add, "prod": lax.scatter_mul,
                                  "max": lax.scatter_max, "min": lax.scatter_min}
_REDUCERS: dict[str, Callable[..., Any]] = {"sum": jnp.sum, "prod": jnp.prod, "max": jnp.max,
                                            "min": jnp.min}


def _segment_reduce(kind: str, data: Any, segment_ids: Any, num_segments: Any,
                    indices_are_sorted: bool, unique_indices: bool, bucket_size: int | None,
                    mode: Any, out_sharding: Any) -> Array:
    out = _reduce_segments(kind, data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode)
    return out if out_sharding is None else reshard(out, out_sharding)


def _reduce_segments(kind: str, data: Any, segment_ids: Any, num_segments: Any,
                     indices_are_sorted: bool, unique_indices: bool, bucket_size: int | None,
                     mode: Any) -> Array:
    fun = f"segment_{kind}"
    x = jnp.asarray(_util.operand(fun, data, "data"))
    ids = jnp.asarray(_util.operand(fun, segment_ids, "segment_ids"))
    if not dtypes.is_integer(ids.dtype):
        raise TypeError(f"{fun}: segment_ids must be integers, got {ids.dtype}")
    if ids.ndim != 1 or x.ndim < 1 or ids.shape[0] != x.shape[0]:
        raise ValueError(f"{fun}: segment_ids must be one id per row of data (shape "
                         f"{x.shape[:1]}), got shape {ids.shape}")
    if num_segments is None:
        num_segments = int(_util.concrete(fun, jnp.max(ids), "the `num_segments` argument "
                                          "(max(segment_ids) + 1 when it is not given)")) + 1
    n = _util.concrete_int(fun, num_segments, "num_segments")
    if n < 0:
        raise ValueError(f"{fun}: num_segments must be non-negative, got {n}")
    scatter_mode = "drop" if mode is None else mode

    def reduce_rows(rows: Array, row_ids: Array) -> Array:
        out = jnp.full((n, *rows.shape[1:]), _identity(kind, rows.dtype), rows.dtype)
        dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, rows.ndim)),
                                        inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
        return _SCATTERS[kind](out, row_ids[:, None], rows, dnums,
                               indices_are_sorted=indices_are_sorted,
                               unique_indices=unique_indices, mode=scatter_mode)

    if bucket_size is None:
        return reduce_rows(x, ids)
    rows = x.shape[0]
    buckets = max(math.ceil(rows / bucket_size), 1)
    pad = buckets * bucket_size - rows
    # padded rows go to segment n, which every mode leaves out of the result
    padded_ids = jnp.pad(ids, (0, pad), constant_values=n)
    padded = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
    per_bucket = vmap(reduce_rows)(
        jnp.reshape(padded, (buckets, bucket_size, *x.shape[1:])),
        jnp.reshape(padded_ids, (buckets, bucket_size)))
    return _REDUCERS[kind](per_bucket, axis=0)


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Array:
    """The sum of the rows of ``data`` in each segment (0 where none)."""
    return _segment_reduce("sum", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None,
                 indices_are_sorted: bool = False, unique_indices: bool = False,
                 bucket_size: int | None = None, mode: Any = None,
                 out_sharding: Any = None) -> Array:
    """The product of the rows of ``data`` in each segment (1 where none)."""
    return _segment_reduce("prod", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Array:
    """The maximum of the rows of ``data`` in each segment (the dtype's
    lowest value, -inf for floats, where none)."""
    return _segment_reduce("max", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Array:
    """The minimum of the rows of ``data`` in each segment (the dtype's
    highest value, inf for floats, where none)."""
    return _segment_reduce("min", data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)
