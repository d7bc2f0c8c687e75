"""Indexing primitives: ``dynamic_slice``, ``dynamic_update_slice``, ``gather``
and the ``scatter`` family (``scatter``, ``scatter-add``, ``scatter-sub``,
``scatter-mul``, ``scatter-min``, ``scatter-max``), with XLA's dimension
numbers (``GatherDimensionNumbers``, ``ScatterDimensionNumbers``) and JAX's
out-of-bounds modes (``GatherScatterMode``).

As in JAX, the index vector of ``gather``/``scatter`` indices is always their
last dimension.
"""

from __future__ import annotations

import enum
import functools
import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import convert_element_type
from lamina_tracing_core.effects import no_effects
from lamina_tracing_core.jaxpr import Jaxpr, JaxprDebugInfo, JaxprEqn, Var
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.source_info import SourceInfo

Array = Any


class GatherDimensionNumbers(NamedTuple):
    """XLA gather dimension numbers (the index vector is the last indices dim).

    offset_dims: output dims that hold the slice (window) dims, sorted.
    collapsed_slice_dims: operand dims of size-1 slices dropped from the output.
    start_index_map: operand dim indexed by each entry of the index vector.
    operand_batching_dims / start_indices_batching_dims: paired batch dims.
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """XLA scatter dimension numbers (the index vector is the last indices dim).

    update_window_dims: dims of ``updates`` that are window dims, sorted.
    inserted_window_dims: operand dims of size-1 windows absent from updates.
    scatter_dims_to_operand_dims: operand dim indexed by each index-vector entry.
    operand_batching_dims / scatter_indices_batching_dims: paired batch dims.
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """How out-of-bounds indices are handled.

    CLIP: indices are clamped so the whole window is in bounds.
    FILL_OR_DROP: a gather window partly out of bounds is filled with
      ``fill_value``; a scatter window partly out of bounds is dropped.
    PROMISE_IN_BOUNDS: the caller promises in-bounds indices (XLA clamps
      gathers and drops scatters).
    ONE_HOT: gather via a one-hot matmul (a lowering choice).
    """

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()
    ONE_HOT = enum.auto()

    @staticmethod
    def from_any(s: str | GatherScatterMode | None) -> GatherScatterMode:
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s == "fill" or s == "drop":
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f'Unknown gather mode "{s}"')


def _tuple(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(operator.index(x) for x in xs)


def _canonical_gather_dnums(d: GatherDimensionNumbers) -> GatherDimensionNumbers:
    if not isinstance(d, GatherDimensionNumbers):
        raise TypeError(f"gather dimension_numbers must be a GatherDimensionNumbers, got {d!r}")
    return GatherDimensionNumbers(*(_tuple(f) for f in d))


def _canonical_scatter_dnums(d: ScatterDimensionNumbers) -> ScatterDimensionNumbers:
    if not isinstance(d, ScatterDimensionNumbers):
        raise TypeError(f"scatter dimension_numbers must be a ScatterDimensionNumbers, got "
                        f"{d!r}")
    return ScatterDimensionNumbers(*(_tuple(f) for f in d))


# --- dimension-number checks ----------------------------------------------------------
def _check_sorted_unique(op: str, name: str, dims: tuple[int, ...]) -> None:
    if list(dims) != sorted(dims):
        raise TypeError(f"{op} {name} in dimension numbers must be sorted; got {dims}")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{op} {name} in dimension numbers must not repeat; got {dims}")


def _check_in_range(op: str, name: str, dims: tuple[int, ...], rank: int) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise TypeError(f"{op} {name} in dimension numbers must be in the range "
                            f"[0, {rank}); got {dims}")


def _check_disjoint(op: str, name_a: str, a: tuple[int, ...], name_b: str,
                    b: tuple[int, ...]) -> None:
    common_dims = set(a) & set(b)
    if common_dims:
        raise TypeError(f"{op} {name_a} {a} and {name_b} {b} must be disjoint; both contain "
                        f"{sorted(common_dims)}")


def _check_indices(op: str, indices: ShapedArray) -> None:
    if indices.dtype not in common.INT:
        raise TypeError(f"{op} indices must have an integer type, got {indices.dtype.name}")
    if not indices.shape:
        raise TypeError(f"{op} indices must have rank >= 1 (the last dimension is the index "
                        f"vector), got a scalar")


# --- gather -------------------------------------------------------------------------
gather_p = Primitive("gather")


def _gather_shape(operand: ShapedArray, indices: ShapedArray,
                  dnums: GatherDimensionNumbers, slice_sizes: tuple[int, ...]
                  ) -> tuple[int, ...]:
    _check_indices("gather", indices)
    offset_dims, collapsed, start_index_map, obd, sibd = dnums
    op_rank, idx_rank = len(operand.shape), len(indices.shape)
    index_vector_dim = idx_rank - 1
    out_rank = len(offset_dims) + idx_rank - 1
    _check_sorted_unique("gather", "offset_dims", offset_dims)
    _check_in_range("gather", "offset_dims", offset_dims, out_rank)
    if len(start_index_map) != indices.shape[index_vector_dim]:
        raise TypeError(f"gather has {len(start_index_map)} elements in start_index_map but "
                        f"the index vector (the last dimension of indices, shape "
                        f"{indices.shape}) has {indices.shape[index_vector_dim]}; these "
                        f"must be equal")
    _check_in_range("gather", "start_index_map", start_index_map, op_rank)
    if len(set(start_index_map)) != len(start_index_map):
        raise TypeError(f"gather start_index_map must not repeat; got {start_index_map}")
    _check_sorted_unique("gather", "collapsed_slice_dims", collapsed)
    _check_in_range("gather", "collapsed_slice_dims", collapsed, op_rank)
    _check_sorted_unique("gather", "operand_batching_dims", obd)
    _check_in_range("gather", "operand_batching_dims", obd, op_rank)
    _check_disjoint("gather", "collapsed_slice_dims", collapsed, "operand_batching_dims", obd)
    _check_disjoint("gather", "start_index_map", start_index_map, "operand_batching_dims",
                    obd)
    if len(set(sibd)) != len(sibd):
        raise TypeError(f"gather start_indices_batching_dims must not repeat; got {sibd}")
    _check_in_range("gather", "start_indices_batching_dims", sibd, idx_rank)
    if index_vector_dim in sibd:
        raise TypeError("gather cannot have the index vector dimension as a batching "
                        f"dimension; got start_indices_batching_dims {sibd}")
    if len(obd) != len(sibd):
        raise TypeError("gather requires equal numbers of operand_batching_dims and "
                        f"start_indices_batching_dims, got {obd} and {sibd}")
    op_batch = tuple(operand.shape[i] for i in obd)
    idx_batch = tuple(indices.shape[i] for i in sibd)
    if op_batch != idx_batch:
        raise TypeError("gather requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {op_batch} and {idx_batch}")
    if len(slice_sizes) != op_rank:
        raise TypeError(f"gather must have one slice size for every operand dimension; got "
                        f"slice_sizes={slice_sizes} for an operand of rank {op_rank}")
    if len(slice_sizes) != len(offset_dims) + len(collapsed) + len(obd):
        raise TypeError("every operand dimension of a gather must be an offset dimension or "
                        f"collapsed or batching; got slice_sizes={slice_sizes}, offset_dims="
                        f"{offset_dims}, collapsed_slice_dims={collapsed}, "
                        f"operand_batching_dims={obd}")
    for i, (size, bound) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= size <= bound:
            raise TypeError(f"gather slice size {size} at index {i} is out of range for an "
                            f"operand dimension of size {bound}")
    for d in collapsed + obd:
        if slice_sizes[d] > 1:
            raise TypeError(f"gather slice_sizes[{d}] must be at most 1 for a collapsed or "
                            f"batching dimension, got {slice_sizes[d]}")
    batch_shape = iter(indices.shape[:-1])
    window = iter(s for i, s in enumerate(slice_sizes) if i not in collapsed and i not in obd)
    offset_set = set(offset_dims)
    return tuple(next(window) if i in offset_set else next(batch_shape)
                 for i in range(out_rank))


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand: ShapedArray, indices: ShapedArray, *,
                          dimension_numbers: GatherDimensionNumbers,
                          slice_sizes: tuple[int, ...], unique_indices: bool,
                          indices_are_sorted: bool, mode: GatherScatterMode,
                          fill_value: Any) -> ShapedArray:
    shape = _gather_shape(operand, indices, dimension_numbers, slice_sizes)
    return ShapedArray(shape, operand.dtype, operand.weak_type)


def _gather_sharding(operand: ShapedArray, indices: ShapedArray, *,
                     dimension_numbers: GatherDimensionNumbers,
                     slice_sizes: tuple[int, ...], **_: Any) -> list[sit.TypeSharding | None]:
    """JAX's gather rule: the window dimensions keep the operand's axes and
    the batch dimensions the indices'. Unambiguous only when every indexed
    operand dimension is taken whole or not split, paired batch dimensions
    are not split differently, and the indices are split over batch
    dimensions alone; otherwise a ``ShardingTypeError`` (the gather would
    need communication, or the result's layout is a choice)."""
    dn = dimension_numbers
    ospec, ispec = sit.spec_of(operand), list(sit.spec_of(indices))
    pairs = list(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    resolvable = (
        all(slice_sizes[d] == operand.shape[d] or not ospec[d] for d in dn.start_index_map)
        and all(not ospec[o] or not ispec[i] or ospec[o] == ispec[i] for o, i in pairs)
        and all(not axes for d, axes in enumerate(ispec)
                if d not in dn.start_indices_batching_dims))
    if not resolvable:
        raise sit.ShardingTypeError(
            "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
            "indexing as out sharding could not be resolved unambiguously (or would require "
            f"collectives on inputs). Got operand={operand!r}, indices={indices!r}")
    for o, i in pairs:
        ispec[i] = ispec[i] or ospec[o]
    window = iter(d for d in range(operand.ndim)
                  if d not in dn.collapsed_slice_dims and d not in dn.operand_batching_dims)
    batch = iter(ispec)
    out_rank = len(dn.offset_dims) + indices.ndim - 1
    spec = [ospec[next(window)] if k in dn.offset_dims else next(batch) for k in range(out_rank)]
    mesh = (operand.sharding or indices.sharding).mesh  # type: ignore[union-attr]
    return [sit.TypeSharding(mesh, tuple(spec)) if any(spec) else None]


sit.register(gather_p, _gather_sharding)


def default_fill_value(dtype: np.dtype[Any]) -> Any:
    """What a FILL_OR_DROP gather writes for out-of-bounds windows by default."""
    if dtype in common.INEXACT:
        return np.nan
    if dtype in common.SIGNED:
        return int(dtypes.lowest(dtype))
    if dtype in common.UNSIGNED:
        return int(dtypes.highest(dtype))
    if dtype == dtypes.bool_:
        return True
    raise ValueError(f"Unsupported dtype for gather fill_value {dtype}")


def gather(operand: ArrayLike, start_indices: ArrayLike,
           dimension_numbers: GatherDimensionNumbers, slice_sizes: Sequence[int], *,
           unique_indices: bool = False, indices_are_sorted: bool = False,
           mode: str | GatherScatterMode | None = None, fill_value: Any = None) -> Array:
    """XLA's gather: slices of ``operand`` of ``slice_sizes`` starting at each
    index vector of ``start_indices`` (see GatherDimensionNumbers)."""
    parsed = GatherScatterMode.from_any(
        GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else mode)
    if parsed == GatherScatterMode.FILL_OR_DROP:
        if fill_value is None:
            fill_value = default_fill_value(get_aval(operand).dtype)
    else:
        fill_value = None
    return gather_p.bind(operand, start_indices,
                         dimension_numbers=_canonical_gather_dnums(dimension_numbers),
                         slice_sizes=common.canonicalize_shape(slice_sizes, "gather"),
                         unique_indices=bool(unique_indices),
                         indices_are_sorted=bool(indices_are_sorted), mode=parsed,
                         fill_value=fill_value)


def _gather_jvp(g: Any, operand: Any, indices: Any, *, dimension_numbers: Any,
                slice_sizes: Any, unique_indices: bool, indices_are_sorted: bool,
                mode: Any, fill_value: Any) -> Any:
    return gather(g, indices, dimension_numbers, slice_sizes, unique_indices=unique_indices,
                  indices_are_sorted=indices_are_sorted, mode=mode, fill_value=0)


def _gather_to_scatter_dnums(d: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(
        update_window_dims=d.offset_dims, inserted_window_dims=d.collapsed_slice_dims,
        scatter_dims_to_operand_dims=d.start_index_map, operand_batching_dims=d.operand_batching_dims,
        scatter_indices_batching_dims=d.start_indices_batching_dims)


def _scatter_to_gather_dnums(d: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(
        offset_dims=d.update_window_dims, collapsed_slice_dims=d.inserted_window_dims,
        start_index_map=d.scatter_dims_to_operand_dims,
        operand_batching_dims=d.operand_batching_dims,
        start_indices_batching_dims=d.scatter_indices_batching_dims)


def _gather_transpose(ct: Any, operand: Any, indices: Any, *, dimension_numbers: Any,
                      slice_sizes: Any, unique_indices: bool, indices_are_sorted: bool,
                      mode: Any, fill_value: Any) -> list[Any]:
    if helpers.is_undefined_primal(indices):
        raise ValueError("gather is not linear in its indices")
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval), None]
    zeros = st.full(operand.aval.shape, 0, get_aval(ct).dtype)
    out = scatter_add(zeros, indices, ct, _gather_to_scatter_dnums(dimension_numbers),
                      unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                      mode=mode)
    return [out, None]


def _inc(dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d + 1 for d in dims)


def _gather_batch(args: Any, dims: Any, *, dimension_numbers: GatherDimensionNumbers,
                  slice_sizes: tuple[int, ...], unique_indices: bool,
                  indices_are_sorted: bool, mode: Any, fill_value: Any) -> Any:
    operand, indices = args
    op_d, idx_d = dims
    d = dimension_numbers
    if idx_d is None:
        operand = helpers.moveaxis(operand, op_d, 0)
        dnums = GatherDimensionNumbers(
            offset_dims=(0,) + _inc(d.offset_dims), collapsed_slice_dims=_inc(d.collapsed_slice_dims),
            start_index_map=_inc(d.start_index_map), operand_batching_dims=_inc(d.operand_batching_dims),
            start_indices_batching_dims=d.start_indices_batching_dims)
        sizes = (get_aval(operand).shape[0],) + slice_sizes
        return gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=sizes,
                             unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                             mode=mode, fill_value=fill_value), 0
    indices = helpers.moveaxis(indices, idx_d, 0)
    if op_d is None:
        dnums = GatherDimensionNumbers(
            offset_dims=_inc(d.offset_dims), collapsed_slice_dims=d.collapsed_slice_dims,
            start_index_map=d.start_index_map, operand_batching_dims=d.operand_batching_dims,
            start_indices_batching_dims=_inc(d.start_indices_batching_dims))
        return gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=slice_sizes,
                             unique_indices=False, indices_are_sorted=False, mode=mode,
                             fill_value=fill_value), 0
    operand = helpers.moveaxis(operand, op_d, 0)
    size = get_aval(operand).shape[0]
    dnums = GatherDimensionNumbers(
        offset_dims=_inc(d.offset_dims), collapsed_slice_dims=_inc(d.collapsed_slice_dims),
        start_index_map=_inc(d.start_index_map),
        operand_batching_dims=(0,) + _inc(d.operand_batching_dims),
        start_indices_batching_dims=(0,) + _inc(d.start_indices_batching_dims))
    sizes = (0 if size == 0 else 1,) + slice_sizes
    return gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=sizes,
                         unique_indices=unique_indices, indices_are_sorted=indices_are_sorted,
                         mode=mode, fill_value=fill_value), 0


helpers.defjvp(gather_p, _gather_jvp, None)
transpose_rules[gather_p] = _gather_transpose
batching_rules[gather_p] = _gather_batch


# --- scatter ----------------------------------------------------------------------------
def _updates_batching_dims(indices_batching_dims: tuple[int, ...],
                           update_window_dims: tuple[int, ...], index_vector_dim: int,
                           updates_rank: int) -> tuple[int, ...]:
    positions: list[int | None] = list(range(index_vector_dim))
    for w in update_window_dims:
        positions.insert(w, None)
    if len(positions) != updates_rank:
        raise TypeError("scatter updates rank does not match the dimension numbers")
    return tuple(positions.index(i) for i in indices_batching_dims)


def _scatter_check(name: str, operand: ShapedArray, indices: ShapedArray,
                   updates: ShapedArray, dnums: ScatterDimensionNumbers) -> None:
    _check_indices(name, indices)
    common.check_same_dtypes(name, operand, updates)
    uwd, iwd, sdod, obd, sibd = dnums
    op_rank, idx_rank, upd_rank = len(operand.shape), len(indices.shape), len(updates.shape)
    index_vector_dim = idx_rank - 1
    expected_rank = idx_rank - 1 + len(uwd)
    if upd_rank != expected_rank:
        raise TypeError(f"{name}: updates must be of rank {expected_rank} (indices batch rank "
                        f"{idx_rank - 1} + {len(uwd)} update_window_dims); got rank {upd_rank} "
                        f"(shape {updates.shape})")
    _check_sorted_unique(name, "update_window_dims", uwd)
    _check_in_range(name, "update_window_dims", uwd, upd_rank)
    _check_sorted_unique(name, "inserted_window_dims", iwd)
    _check_in_range(name, "inserted_window_dims", iwd, op_rank)
    _check_sorted_unique(name, "operand_batching_dims", obd)
    _check_in_range(name, "operand_batching_dims", obd, op_rank)
    _check_disjoint(name, "inserted_window_dims", iwd, "operand_batching_dims", obd)
    _check_disjoint(name, "scatter_dims_to_operand_dims", sdod, "operand_batching_dims", obd)
    if len(set(sibd)) != len(sibd):
        raise TypeError(f"{name} scatter_indices_batching_dims must not repeat; got {sibd}")
    _check_in_range(name, "scatter_indices_batching_dims", sibd, idx_rank)
    if index_vector_dim in sibd:
        raise TypeError(f"{name} cannot have the index vector dimension as a batching "
                        f"dimension; got scatter_indices_batching_dims {sibd}")
    if len(obd) != len(sibd):
        raise TypeError(f"{name} requires equal numbers of operand_batching_dims and "
                        f"scatter_indices_batching_dims, got {obd} and {sibd}")
    op_batch = tuple(operand.shape[i] for i in obd)
    idx_batch = tuple(indices.shape[i] for i in sibd)
    if op_batch != idx_batch:
        raise TypeError(f"{name} requires operand batching dimensions and indices batching "
                        f"dimensions to have the same shape, got {op_batch} and {idx_batch}")
    upd_bd = _updates_batching_dims(sibd, uwd, index_vector_dim, upd_rank)
    upd_batch = tuple(updates.shape[i] for i in upd_bd)
    if op_batch != upd_batch:
        raise TypeError(f"{name} requires operand batching dimensions and updates batching "
                        f"dimensions to have the same shape, got {op_batch} and {upd_batch}")
    if op_rank != len(uwd) + len(iwd) + len(obd):
        raise TypeError(f"{name} has a window of rank {len(uwd) + len(iwd) + len(obd)} "
                        f"(update_window_dims + inserted_window_dims + operand_batching_dims)"
                        f" that does not match the operand rank {op_rank}")
    if len(sdod) != indices.shape[index_vector_dim]:
        raise TypeError(f"{name} has {len(sdod)} elements in scatter_dims_to_operand_dims but "
                        f"the index vector (last dimension of indices, shape {indices.shape}) "
                        f"has {indices.shape[index_vector_dim]}; these must be equal")
    _check_in_range(name, "scatter_dims_to_operand_dims", sdod, op_rank)
    if len(set(sdod)) != len(sdod):
        raise TypeError(f"{name} scatter_dims_to_operand_dims must not repeat; got {sdod}")
    max_window = [operand.shape[i] for i in range(op_rank) if i not in iwd and i not in obd]
    for bound, w in zip(max_window, uwd):
        if updates.shape[w] > bound:
            raise TypeError(f"{name}: bounds of the window dimensions of updates must not "
                            f"exceed the operand's; for updates dimension {w} the bound is "
                            f"{updates.shape[w]}, the operand's is {bound}")
    scatter_dims = [i for i in range(upd_rank) if i not in uwd]
    for i, pos in zip(scatter_dims, range(index_vector_dim)):
        if updates.shape[i] != indices.shape[pos]:
            raise TypeError(f"{name}: bounds of the scatter dimensions of updates must equal "
                            f"those of the indices; for updates dimension {i} the bound is "
                            f"{updates.shape[i]}, the indices' is {indices.shape[pos]}")


def _make_scatter_prim(name: str) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
                      update_jaxpr: Any, update_consts: Any,
                      dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool,
                      unique_indices: bool, mode: Any) -> ShapedArray:
        _scatter_check(name, operand, indices, updates, dimension_numbers)
        return operand

    prim.def_abstract_eval(abstract_eval)
    return prim


scatter_p = _make_scatter_prim("scatter")
scatter_add_p = _make_scatter_prim("scatter-add")
scatter_sub_p = _make_scatter_prim("scatter-sub")
scatter_mul_p = _make_scatter_prim("scatter-mul")
scatter_min_p = _make_scatter_prim("scatter-min")
scatter_max_p = _make_scatter_prim("scatter-max")

_COMBINERS: dict[Primitive, tuple[Primitive, dict[str, Any]]] = {
    scatter_add_p: (ew.add_p, {}), scatter_sub_p: (ew.sub_p, {}),
    scatter_mul_p: (ew.mul_p, {"out_dtype": None}), scatter_min_p: (ew.min_p, {}),
    scatter_max_p: (ew.max_p, {})}


@functools.lru_cache(maxsize=None)
def _update_jaxpr(prim: Primitive, dtype: np.dtype[Any]) -> Jaxpr:
    """The scalar combiner ``lambda a, b: op(a, b)`` that a scatter applies
    (a fixed jaxpr per primitive and dtype, so params compare equal)."""
    combiner, params = _COMBINERS[prim]
    aval = ShapedArray((), dtype, False)
    a, b, c = Var(aval), Var(aval), Var(aval)
    eqn = JaxprEqn([a, b], [c], combiner, dict(params), no_effects, SourceInfo(None))
    dbg = JaxprDebugInfo(prim.name, None, (None, None), (None,))
    return Jaxpr([], [a, b], [c], [eqn], no_effects, dbg)


def _scatter_bind(prim: Primitive, operand: ArrayLike, indices: ArrayLike,
                  updates: ArrayLike, dimension_numbers: ScatterDimensionNumbers,
                  indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Array:
    jaxpr = None if prim is scatter_p else _update_jaxpr(prim, get_aval(operand).dtype)
    return prim.bind(operand, indices, updates, update_jaxpr=jaxpr, update_consts=(),
                     dimension_numbers=_canonical_scatter_dnums(dimension_numbers),
                     indices_are_sorted=bool(indices_are_sorted),
                     unique_indices=bool(unique_indices),
                     mode=GatherScatterMode.from_any(mode))


def scatter(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
            dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: str | GatherScatterMode | None = None) -> Array:
    """``operand`` with windows overwritten by ``updates`` (XLA scatter; with
    repeated indices the winner is unspecified)."""
    return _scatter_bind(scatter_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_add(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    """``operand`` with ``updates`` added into windows (repeated indices accumulate)."""
    return _scatter_bind(scatter_add_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_sub(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    return _scatter_bind(scatter_sub_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_mul(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    return _scatter_bind(scatter_mul_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_min(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    return _scatter_bind(scatter_min_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def scatter_max(operand: ArrayLike, scatter_indices: ArrayLike, updates: ArrayLike,
                dimension_numbers: ScatterDimensionNumbers, *, indices_are_sorted: bool = False,
                unique_indices: bool = False, mode: str | GatherScatterMode | None = None
                ) -> Array:
    return _scatter_bind(scatter_max_p, operand, scatter_indices, updates, dimension_numbers,
                         indices_are_sorted, unique_indices, mode)


def _window_slice_sizes(operand_shape: tuple[int, ...], updates_shape: tuple[int, ...],
                        d: ScatterDimensionNumbers) -> list[int]:
    """The gather slice sizes that read back the windows a scatter writes."""
    sizes = []
    pos = 0
    for i in range(len(operand_shape)):
        if i in d.inserted_window_dims or i in d.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(updates_shape[d.update_window_dims[pos]])
            pos += 1
    return sizes


def _gather_windows(x: Any, indices: Any, updates_shape: tuple[int, ...],
                    d: ScatterDimensionNumbers, mode: Any, fill_value: Any = None) -> Any:
    sizes = _window_slice_sizes(get_aval(x).shape, updates_shape, d)
    return gather(x, indices, _scatter_to_gather_dnums(d), sizes, mode=mode,
                  fill_value=fill_value)


def _scatter_params(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params[k] for k in ("indices_are_sorted", "unique_indices", "mode")}


def _scatter_linear_jvp(prim: Primitive, primals: Any, tangents: Any, **params: Any) -> Any:
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    out = prim.bind(operand, indices, updates, **params)
    if helpers.is_zero(g_operand) and helpers.is_zero(g_updates):
        return out, helpers.zero_from_primal(out)
    return out, prim.bind(helpers.instantiate(g_operand), indices,
                          helpers.instantiate(g_updates), **params)


def _scatter_addsub_transpose(prim: Primitive, ct: Any, operand: Any, indices: Any,
                              updates: Any, **params: Any) -> list[Any]:
    if helpers.is_undefined_primal(indices):
        raise ValueError(f"{prim.name} is not linear in its indices")
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval) if helpers.is_undefined_primal(operand) else None,
                None,
                helpers.Zero(updates.aval) if helpers.is_undefined_primal(updates) else None]
    operand_ct = ct if helpers.is_undefined_primal(operand) else None
    updates_ct = None
    if helpers.is_undefined_primal(updates):
        updates_ct = _gather_windows(ct, indices, updates.aval.shape,
                                     params["dimension_numbers"], params["mode"], 0)
        if prim is scatter_sub_p:
            updates_ct = ew.neg(updates_ct)
    return [operand_ct, None, updates_ct]


for _prim in (scatter_add_p, scatter_sub_p):
    jvp_rules[_prim] = functools.partial(_scatter_linear_jvp, _prim)
    transpose_rules[_prim] = functools.partial(_scatter_addsub_transpose, _prim)


def _scatter_mul_jvp(primals: Any, tangents: Any, **params: Any) -> Any:
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    terms = []
    if not helpers.is_zero(g_operand):
        terms.append(scatter_mul_p.bind(g_operand, indices, updates, **params))
    if not helpers.is_zero(g_updates):
        terms.append(_scatter_mul_updates_tangent(operand, indices, updates, g_updates,
                                                  params))
    return out, helpers._sum_contributions(out, terms)


def _scatter_mul_updates_tangent(operand: Any, indices: Any, updates: Any, g_updates: Any,
                                 params: dict[str, Any]) -> Any:
    """The tangent of ``scatter_mul(operand, indices, updates)`` along
    ``g_updates``, linear in ``g_updates``.

    Each output element is its operand element times the product of the
    updates that land on it, so the derivative along one update is the
    operand element times the product of the *other* updates there. With
    unique indices there are no others (as JAX: ``operand *
    scatter_add(0, indices, g_updates)``). With repeated indices the
    product of the others is formed without dividing by a zero: per output
    element, the product of its non-zero updates and the count of its zero
    updates. When none of the other updates there is zero, the others'
    product is that product divided by the update (by one for a zero
    update, the only zero there); otherwise it is zero."""
    d: ScatterDimensionNumbers = params["dimension_numbers"]
    sp = _scatter_params(params)
    if params["unique_indices"]:
        return ew.mul(operand, scatter_add(_zeros(operand), indices, g_updates, d, **sp))
    mode = params["mode"]
    upd_shape = get_aval(updates).shape
    is_zero = ew.eq(updates, _zeros(updates))
    nonzero = ew.select(is_zero, _ones(updates), updates)
    products = scatter_mul(_ones(operand), indices, nonzero, d, **sp)
    zero_counts = scatter_add(st.full(get_aval(operand).shape, 0, dtypes.int32), indices,
                              convert_element_type(is_zero, dtypes.int32), d, **sp)
    product_here = _gather_windows(products, indices, upd_shape, d, mode, 1)
    zeros_here = _gather_windows(zero_counts, indices, upd_shape, d, mode, 0)
    zeros_elsewhere = ew.sub(zeros_here, convert_element_type(is_zero, dtypes.int32))
    others = ew.select(ew.eq(zeros_elsewhere, st.full_like(zeros_elsewhere, 0)),
                       ew.div(product_here, nonzero), _zeros(updates))
    per_element = scatter_add(_zeros(operand), indices, ew.mul(g_updates, others), d, **sp)
    return ew.mul(operand, per_element)


def _scatter_mul_transpose(ct: Any, operand: Any, indices: Any, updates: Any,
                           **params: Any) -> list[Any]:
    if helpers.is_undefined_primal(indices):
        raise ValueError("scatter-mul is not linear in its indices")
    if helpers.is_undefined_primal(updates):
        raise NotImplementedError("scatter-mul is not linear in its updates: its transpose "
                                  "with respect to them is not defined")
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval), None, None]
    return [scatter_mul(ct, indices, updates, params["dimension_numbers"],
                        **_scatter_params(params)), None, None]


jvp_rules[scatter_mul_p] = _scatter_mul_jvp
transpose_rules[scatter_mul_p] = _scatter_mul_transpose


def _ones(x: Any) -> Any:
    return st.full_like(x, 1)


def _zeros(x: Any) -> Any:
    return st.full_like(x, 0)


def _scatter_extremal_jvp(prim: Primitive, primals: Any, tangents: Any, **params: Any) -> Any:
    """Ties between the operand and updates (and among updates) share the
    derivative equally, as for ``max``/``min``."""
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    d = params["dimension_numbers"]
    out = prim.bind(operand, indices, updates, **params)
    if helpers.is_zero(g_operand) and helpers.is_zero(g_updates):
        return out, helpers.zero_from_primal(out)
    g_operand = helpers.instantiate(g_operand)
    g_updates = helpers.instantiate(g_updates)
    upd_shape = get_aval(updates).shape
    initial = _gather_windows(operand, indices, upd_shape, d, None)
    target = _gather_windows(out, indices, upd_shape, d, None)
    successful = ew.eq(updates, target)
    retained = ew.eq(initial, target)
    num_updates = _gather_windows(
        scatter_add(_zeros(operand), indices, ew.select(successful, _ones(updates),
                                                        _zeros(updates)), d),
        indices, upd_shape, d, None)
    num_refs = _gather_windows(scatter_add(_zeros(operand), indices, _ones(updates), d),
                               indices, upd_shape, d, None)
    one = common.const(num_updates, 1)
    updates_normalizer = ew.select(retained, ew.div(one, ew.add(num_updates, one)),
                                   ew.div(one, num_updates))
    updates_coef = ew.select(successful, updates_normalizer, _zeros(updates))
    operand_normalizer = ew.select(retained, ew.div(one, ew.add(num_updates, one)),
                                   _zeros(num_updates))
    operand_coef = ew.div(ew.add(common.const(operand_normalizer, -1), operand_normalizer),
                          num_refs)
    target_tangents = _gather_windows(g_operand, indices, upd_shape, d, None)
    tangent_updates = ew.add(ew.mul(target_tangents, operand_coef),
                             ew.mul(g_updates, updates_coef))
    tangent = scatter_add(g_operand, indices, tangent_updates, d, **_scatter_params(params))
    return out, tangent


jvp_rules[scatter_min_p] = functools.partial(_scatter_extremal_jvp, scatter_min_p)
jvp_rules[scatter_max_p] = functools.partial(_scatter_extremal_jvp, scatter_max_p)


def _scatter_jvp(primals: Any, tangents: Any, **params: Any) -> Any:
    operand, indices, updates = primals
    g_operand, _, g_updates = tangents
    d = params["dimension_numbers"]
    sp = _scatter_params(params)
    if helpers.is_zero(g_operand) and helpers.is_zero(g_updates):
        out = scatter_p.bind(operand, indices, updates, **params)
        return out, helpers.zero_from_primal(out)
    g_operand = helpers.instantiate(g_operand)
    g_updates = helpers.instantiate(g_updates)
    if params["unique_indices"]:
        out = scatter_p.bind(operand, indices, updates, **params)
        return out, scatter_p.bind(g_operand, indices, g_updates, **params)
    # With repeated indices, find which update won each position by scattering
    # ids, then express the result as a scatter-add of masked values.
    upd_shape = get_aval(updates).shape
    ids_shape = list(upd_shape)
    for w in d.update_window_dims:
        ids_shape[w] = 1
    num_ids = math.prod(ids_shape)
    id_dtype = dtypes.uint32 if num_ids < 2 ** 31 else dtypes.uint64
    update_ids = ew.add(st.reshape(st.iota(id_dtype, num_ids), tuple(ids_shape)),
                        st.full(upd_shape, 1, id_dtype))
    scattered_ids = scatter(st.full(get_aval(operand).shape, 0, id_dtype), indices, update_ids,
                            d, **sp)
    gathered_ids = _gather_windows(scattered_ids, indices, upd_shape, d, None)
    operand_kept = ew.eq(scattered_ids, _zeros(scattered_ids))
    update_won = ew.eq(update_ids, gathered_ids)
    masked_operand = ew.select(operand_kept, operand, _zeros(operand))
    masked_updates = ew.select(update_won, updates, _zeros(updates))
    masked_g_operand = ew.select(operand_kept, g_operand, _zeros(g_operand))
    masked_g_updates = ew.select(update_won, g_updates, _zeros(g_updates))
    out = scatter_add(masked_operand, indices, masked_updates, d, **sp)
    return out, scatter_add(masked_g_operand, indices, masked_g_updates, d, **sp)


def _scatter_transpose(ct: Any, operand: Any, indices: Any, updates: Any,
                       **params: Any) -> list[Any]:
    if not params["unique_indices"]:
        raise NotImplementedError("scatter transpose is only implemented where "
                                  "unique_indices=True")
    if helpers.is_undefined_primal(indices):
        raise ValueError("scatter is not linear in its indices")
    upd_aval = updates.aval if helpers.is_undefined_primal(updates) else get_aval(updates)
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval) if helpers.is_undefined_primal(operand) else None,
                None,
                helpers.Zero(updates.aval) if helpers.is_undefined_primal(updates) else None]
    d = params["dimension_numbers"]
    operand_ct = updates_ct = None
    if helpers.is_undefined_primal(operand):
        operand_ct = scatter(ct, indices, st.full(upd_aval.shape, 0, get_aval(ct).dtype), d,
                             indices_are_sorted=params["indices_are_sorted"],
                             unique_indices=True, mode=params["mode"])
    if helpers.is_undefined_primal(updates):
        updates_ct = _gather_windows(ct, indices, upd_aval.shape, d, params["mode"], 0)
    return [operand_ct, None, updates_ct]


jvp_rules[scatter_p] = _scatter_jvp
transpose_rules[scatter_p] = _scatter_transpose


def _scatter_batch(prim: Primitive, args: Any, dims: Any, **params: Any) -> Any:
    operand, indices, updates = args
    op_d, idx_d, upd_d = dims
    size = helpers.batch_size(args, dims)
    d: ScatterDimensionNumbers = params["dimension_numbers"]
    operand = helpers.bdim_at_front(operand, op_d, size)
    updates = helpers.bdim_at_front(updates, upd_d, size)
    if idx_d is None:
        dnums = ScatterDimensionNumbers(
            update_window_dims=(0,) + _inc(d.update_window_dims),
            inserted_window_dims=_inc(d.inserted_window_dims),
            scatter_dims_to_operand_dims=_inc(d.scatter_dims_to_operand_dims),
            operand_batching_dims=_inc(d.operand_batching_dims),
            scatter_indices_batching_dims=d.scatter_indices_batching_dims)
    else:
        indices = helpers.bdim_at_front(indices, idx_d, size)
        dnums = ScatterDimensionNumbers(
            update_window_dims=_inc(d.update_window_dims),
            inserted_window_dims=_inc(d.inserted_window_dims),
            scatter_dims_to_operand_dims=_inc(d.scatter_dims_to_operand_dims),
            operand_batching_dims=(0,) + _inc(d.operand_batching_dims),
            scatter_indices_batching_dims=(0,) + _inc(d.scatter_indices_batching_dims))
    new_params = dict(params, dimension_numbers=dnums)
    return prim.bind(operand, indices, updates, **new_params), 0


for _prim in (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p,
              scatter_max_p):
    batching_rules[_prim] = functools.partial(_scatter_batch, _prim)


# --- dynamic_slice / dynamic_update_slice -------------------------------------------------
dynamic_slice_p = Primitive("dynamic_slice")
sit.register(dynamic_slice_p, sit.varying_out_shape("dynamic_slice"))


def _check_start_indices(name: str, operand: ShapedArray,
                         start_indices: Sequence[ShapedArray]) -> None:
    if len(start_indices) != len(operand.shape):
        raise TypeError(f"{name} start_indices must have length equal to the rank of the "
                        f"operand, got {len(start_indices)} indices for operand shape "
                        f"{operand.shape}")
    if any(i.shape for i in start_indices):
        raise TypeError(f"start_indices arguments to {name} must be scalars, got indices of "
                        f"shapes {[i.shape for i in start_indices]}")
    if start_indices and any(i.dtype != start_indices[0].dtype or i.dtype not in common.INT
                             for i in start_indices):
        raise TypeError(f"index arguments to {name} must be integers of the same type, got: "
                        f"{', '.join(i.dtype.name for i in start_indices)}")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(operand: ShapedArray, *start_indices: ShapedArray,
                                 slice_sizes: tuple[int, ...]) -> ShapedArray:
    _check_start_indices("dynamic_slice", operand, start_indices)
    if len(slice_sizes) != len(operand.shape):
        raise TypeError(f"dynamic_slice slice_sizes must have the same length as the operand "
                        f"rank, got slice_sizes {slice_sizes} for operand shape "
                        f"{operand.shape}")
    if any(s < 0 or s > d for s, d in zip(slice_sizes, operand.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be between 0 and the operand shape, "
                        f"got slice_sizes {slice_sizes} for operand shape {operand.shape}")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


def _dynamic_slice_indices(operand_shape: tuple[int, ...], start_indices: Any,
                           allow_negative_indices: bool | Sequence[bool]) -> list[Any]:
    """Start indices as scalars, negative ones counted from the end (clamping
    to the valid range happens in the primitive)."""
    if not isinstance(start_indices, (list, tuple)):
        idx_shape = get_aval(start_indices).shape
        if len(idx_shape) != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got {idx_shape}")
        start_indices = [index_in(start_indices, i) for i in range(idx_shape[0])]
    if len(start_indices) != len(operand_shape):
        raise ValueError(f"Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {operand_shape})")
    if isinstance(allow_negative_indices, bool):
        allow_negative_indices = [allow_negative_indices] * len(start_indices)
    out: list[Any] = []
    for i, dim, allow_neg in zip(start_indices, operand_shape, allow_negative_indices):
        aval = get_aval(i)
        if aval.dtype in common.UNSIGNED:
            out.append(i)
        elif isinstance(i, (int, np.integer)):
            if i < 0 and not allow_neg:
                raise ValueError(f"Index {i} is out of bounds for dimension {dim} if "
                                 "allow_negative_indices=False")
            value = int(i) + dim if i < 0 else int(i)
            out.append(np.array(value, aval.dtype))
        elif allow_neg:
            zero = common.const(aval.dtype, 0)
            out.append(ew.select(ew.lt(i, zero), ew.add(i, common.const(aval.dtype, dim)), i))
        else:
            out.append(i)
    return out


def index_in(x: Any, i: int) -> Any:
    """``x[i]`` of a 1-D array with a static ``i``."""
    return st.squeeze(st.slice(x, (i,), (i + 1,)), (0,))


def dynamic_slice(operand: ArrayLike, start_indices: Any, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """A slice of ``slice_sizes`` at traced ``start_indices`` (clamped so the slice
    fits, as XLA does)."""
    shape = get_aval(operand).shape
    starts = _dynamic_slice_indices(shape, start_indices, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts,
                                slice_sizes=common.canonicalize_shape(slice_sizes,
                                                                      "dynamic_slice"))


def dynamic_slice_in_dim(operand: ArrayLike, start_index: ArrayLike, slice_size: int,
                         axis: int = 0, *, allow_negative_indices: bool = True) -> Array:
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    zero = np.array(0, get_aval(start_index).dtype)
    starts = [zero] * len(shape)
    sizes = list(shape)
    starts[axis] = start_index
    sizes[axis] = operator.index(slice_size)
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(operand: ArrayLike, index: ArrayLike, axis: int = 0,
                         keepdims: bool = True, *, allow_negative_indices: bool = True) -> Array:
    result = dynamic_slice_in_dim(operand, index, 1, axis,
                                  allow_negative_indices=allow_negative_indices)
    if keepdims:
        return result
    axis = common.canonicalize_axis(axis, len(get_aval(operand).shape))
    return st.squeeze(result, (axis,))


def _dynamic_slice_jvp(primals: Any, tangents: Any, *, slice_sizes: tuple[int, ...]) -> Any:
    operand, *starts = primals
    out = dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    t = tangents[0]
    if helpers.is_zero(t):
        return out, helpers.zero_from_primal(out)
    return out, dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)


def _dynamic_slice_transpose(ct: Any, operand: Any, *starts: Any,
                             slice_sizes: tuple[int, ...]) -> list[Any]:
    if any(helpers.is_undefined_primal(s) for s in starts):
        raise ValueError("dynamic_slice is not linear in its start indices")
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval)] + [None] * len(starts)
    zeros = st.full(operand.aval.shape, 0, get_aval(ct).dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


def _stack_start_indices(starts: Sequence[Any], dims: Sequence[int | None], size: int
                         ) -> tuple[Any, int | None]:
    """Scalar start indices (some batched) as one ``[B, n]`` (or ``[n]``) array."""
    if not starts:
        return np.zeros((0,), np.int32), None
    if all(d is None for d in dims):
        return st.concatenate([st.broadcast(s, (1,)) for s in starts], 0), None
    cols = [st.broadcast_in_dim(s, (size, 1), (0,) if d is not None else ())
            for s, d in zip(starts, dims)]
    return st.concatenate(cols, 1), 0


def _dynamic_slice_batch(args: Any, dims: Any, *, slice_sizes: tuple[int, ...]) -> Any:
    operand, *starts = args
    op_d, *start_ds = dims
    size = helpers.batch_size(args, dims)
    nd = len(slice_sizes)
    index, index_d = _stack_start_indices(starts, start_ds, size)
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(nd)), collapsed_slice_dims=(),
                                   start_index_map=tuple(range(nd)))
    return _gather_batch([operand, index], [op_d, index_d], dimension_numbers=dnums,
                         slice_sizes=slice_sizes, unique_indices=True,
                         indices_are_sorted=True, mode=GatherScatterMode.CLIP,
                         fill_value=None)


jvp_rules[dynamic_slice_p] = _dynamic_slice_jvp
transpose_rules[dynamic_slice_p] = _dynamic_slice_transpose
batching_rules[dynamic_slice_p] = _dynamic_slice_batch

dynamic_update_slice_p = Primitive("dynamic_update_slice")


def _dynamic_update_slice_sharding(operand: ShapedArray, update: ShapedArray,
                                   *_: ShapedArray) -> list[sit.TypeSharding | None]:
    """The operand's sharding, which the update's must equal (JAX's rule; an
    unsharded update counts as replicated over the operand's mesh)."""
    if operand.sharding != update.sharding:
        mesh = (operand.sharding or update.sharding).mesh  # type: ignore[union-attr]
        raise sit.ShardingTypeError(
            "dynamic_update_slice operand sharding must be equal to update sharding, got "
            f"operand sharding {_with_axis_types(operand, mesh)} and update sharding "
            f"{_with_axis_types(update, mesh)}.")
    return [operand.sharding]


def _with_axis_types(aval: ShapedArray, mesh: Any) -> str:
    """``float32[8@x,4]({Explicit: ('x', 'y')})``: the type and its mesh's
    axes by type, as JAX's messages show an operand."""
    by_type: dict[Any, list[str]] = {}
    for name, kind in zip(mesh.axis_names, mesh.axis_types):
        by_type.setdefault(kind, []).append(name)
    shown = ", ".join(f"{kind!r}: {tuple(names)}" for kind, names in by_type.items())
    return f"{aval.str_long()}({{{shown}}})"


sit.register(dynamic_update_slice_p, _dynamic_update_slice_sharding)


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_abstract_eval(operand: ShapedArray, update: ShapedArray,
                                        *start_indices: ShapedArray) -> ShapedArray:
    if len(operand.shape) != len(update.shape):
        raise TypeError("dynamic_update_slice update must have the same rank as operand, got "
                        f"update shape {update.shape} for operand shape {operand.shape}.")
    _check_start_indices("dynamic_update_slice", operand, start_indices)
    if any(u > o for u, o in zip(update.shape, operand.shape)):
        raise TypeError("dynamic_update_slice update shape must be smaller than operand "
                        f"shape, got update shape {update.shape} for operand shape "
                        f"{operand.shape}.")
    common.check_same_dtypes("dynamic_update_slice", operand, update)
    weak = operand.weak_type and update.weak_type
    return operand if weak == operand.weak_type else operand.update(weak_type=weak)


def dynamic_update_slice(operand: ArrayLike, update: ArrayLike, start_indices: Any, *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Array:
    """``operand`` with ``update`` written at traced ``start_indices`` (clamped so
    it fits)."""
    starts = _dynamic_slice_indices(get_aval(operand).shape, start_indices,
                                    allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_update_slice_in_dim(operand: ArrayLike, update: ArrayLike, start_index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Array:
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    starts: list[Any] = [np.array(0, get_aval(start_index).dtype)] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts,
                                allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(operand: ArrayLike, update: ArrayLike, index: ArrayLike,
                                axis: int, *, allow_negative_indices: bool = True) -> Array:
    shape = get_aval(operand).shape
    axis = common.canonicalize_axis(axis, len(shape))
    if len(get_aval(update).shape) == len(shape) - 1:
        update = st.expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


def _dynamic_update_slice_jvp(primals: Any, tangents: Any) -> Any:
    operand, update, *starts = primals
    g_operand, g_update = tangents[:2]
    out = dynamic_update_slice_p.bind(operand, update, *starts)
    if helpers.is_zero(g_operand) and helpers.is_zero(g_update):
        return out, helpers.zero_from_primal(out)
    return out, dynamic_update_slice_p.bind(helpers.instantiate(g_operand),
                                            helpers.instantiate(g_update), *starts)


def _dynamic_update_slice_transpose(ct: Any, operand: Any, update: Any,
                                    *starts: Any) -> list[Any]:
    if any(helpers.is_undefined_primal(s) for s in starts):
        raise ValueError("dynamic_update_slice is not linear in its start indices")
    none = [None] * len(starts)
    if helpers.is_zero(ct):
        return [helpers.Zero(operand.aval) if helpers.is_undefined_primal(operand) else None,
                helpers.Zero(update.aval) if helpers.is_undefined_primal(update) else None
                ] + none
    upd_shape = update.aval.shape if helpers.is_undefined_primal(update) \
        else get_aval(update).shape
    operand_ct = update_ct = None
    if helpers.is_undefined_primal(operand):
        zeros = st.full(upd_shape, 0, get_aval(ct).dtype)
        operand_ct = dynamic_update_slice_p.bind(ct, zeros, *starts)
    if helpers.is_undefined_primal(update):
        update_ct = dynamic_slice_p.bind(ct, *starts, slice_sizes=upd_shape)
    return [operand_ct, update_ct] + none


def _dynamic_update_slice_batch(args: Any, dims: Any) -> Any:
    operand, update, *starts = args
    op_d, upd_d, *start_ds = dims
    size = helpers.batch_size(args, dims)
    nd = len(get_aval(operand).shape) - (0 if op_d is None else 1)
    index, index_d = _stack_start_indices(starts, start_ds, size)
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(nd)),
                                    inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=tuple(range(nd)))
    operand = helpers.bdim_at_front(operand, op_d, size)
    update = helpers.bdim_at_front(update, upd_d, size)
    if index_d is None:
        index = helpers.broadcast_batch(index, size, 0)
    # As a batched scatter with operand/indices batching dims at the front.
    batched_dnums = ScatterDimensionNumbers(
        update_window_dims=tuple(i + 1 for i in dnums.update_window_dims),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=tuple(i + 1 for i in dnums.scatter_dims_to_operand_dims),
        operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    return scatter(operand, index, update, batched_dnums, indices_are_sorted=True,
                   unique_indices=True, mode=GatherScatterMode.CLIP), 0


jvp_rules[dynamic_update_slice_p] = _dynamic_update_slice_jvp
transpose_rules[dynamic_update_slice_p] = _dynamic_update_slice_transpose
batching_rules[dynamic_update_slice_p] = _dynamic_update_slice_batch


# --- helpers for other modules ------------------------------------------------------------
def take_along_axis(x: Any, idx: Any, axis: int) -> Any:
    """``x`` gathered along ``axis`` at ``idx`` (same shape as ``x`` except on
    ``axis``), as numpy's ``take_along_axis``; indices are promised in bounds."""
    shape = get_aval(x).shape
    nd = len(shape)
    others = tuple(i for i in range(nd) if i != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,),
                                   start_index_map=(axis,), operand_batching_dims=others,
                                   start_indices_batching_dims=others)
    index = st.expand_dims(idx, (nd,))
    return gather(x, index, dnums, (1,) * nd, mode=GatherScatterMode.PROMISE_IN_BOUNDS)


def index_take(src: ArrayLike, idxs: Sequence[ArrayLike], axes: Sequence[int]) -> Array:
    """``src`` at the points ``(idxs[0][i], idxs[1][i], ...)`` of its ``axes``
    (JAX's ``lax.index_take``): shape ``[n, *other dims]``. Each index is taken
    modulo its axis' size, Python-style (-1 is the last entry)."""
    shape = get_aval(src).shape
    nd = len(shape)
    axes = tuple(common.canonicalize_axis(a, nd) for a in axes)
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes {axes}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"index_take: axes {axes} repeat an axis")
    columns = [st.expand_dims(i, (1,)) for i in idxs]
    if {get_aval(c).shape for c in columns} != {get_aval(columns[0]).shape}:
        raise ValueError("index_take: the index arrays must be of one shape, got "
                         f"{[get_aval(i).shape for i in idxs]}")
    index = st.concatenate(columns, 1) if len(columns) > 1 else columns[0]
    index_aval = get_aval(index)
    sizes = np.broadcast_to(np.array([max(shape[a], 1) for a in axes], index_aval.dtype),
                            index_aval.shape)
    wrapped = ew.rem(index, sizes)  # C-style: negative for a negative index
    index = ew.select(ew.lt(wrapped, np.zeros_like(sizes)), ew.add(wrapped, sizes), wrapped)
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, 1 + nd - len(axes))),
                                   collapsed_slice_dims=tuple(sorted(axes)),
                                   start_index_map=axes)
    slice_sizes = tuple(1 if d in axes else shape[d] for d in range(nd))
    return gather(src, index, dnums, slice_sizes, mode=GatherScatterMode.PROMISE_IN_BOUNDS)


__all__ = [
    "index_take", "GatherDimensionNumbers", "ScatterDimensionNumbers", "GatherScatterMode", "gather_p",
    "scatter_p", "scatter_add_p", "scatter_sub_p", "scatter_mul_p", "scatter_min_p",
    "scatter_max_p", "dynamic_slice_p", "dynamic_update_slice_p", "gather", "scatter",
    "scatter_add", "scatter_sub", "scatter_mul", "scatter_min", "scatter_max",
    "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
    "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "take_along_axis"]
