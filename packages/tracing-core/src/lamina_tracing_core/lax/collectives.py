"""Collectives over named axes: ``psum``, ``pmax``, ``pmin``, ``all_gather``,
``reduce_scatter`` (``psum_scatter``), ``ppermute``, ``all_to_all`` and
``axis_index``.

Each equation records a ``NamedAxisEffect`` per axis it names (the
``effect_rules`` below); ``core.bind`` checks from those that every axis is
bound (else ``UnboundAxisNameError``) and hands the equation to the binder's
trace. Under ``vmap(..., axis_name='i')`` the collectives over ``'i'`` become
array operations over the batch dimension (the ``fancy_primitive_batchers``,
which receive the vmapped axis); under ``pmap`` they are lowered to XLA
collectives by the lowering layer.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import batching, core, dtypes
from lamina_tracing_core import vma as _vma
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.effects import Effects, NamedAxisEffect
from lamina_tracing_core.lax import common, convert, helpers, indexing, manual_types, reductions
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.primitives import Primitive, effect_rules, transpose_rules
from lamina_tracing_core.vma import pvary_p, vma_rules
from lamina_linear_util import tree_util

Array = Any
AxisName = Any


def _as_tuple(axis_name: AxisName) -> tuple[Any, ...]:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _named(axes: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(a for a in axes if not isinstance(a, int))


def _effects_of(axes: Any) -> Effects:
    return frozenset(NamedAxisEffect(a) for a in _named(_as_tuple(axes)))


def axis_size(axis_name: AxisName) -> int:
    """The size of the bound named axis (the product for several names)."""
    size = 1
    for name in _as_tuple(axis_name):
        s = core.axis_size(name)
        if s is None:
            raise ValueError(f"the size of the named axis {name!r} is not known here")
        size *= s
    return size


def _group_size(axis_name: AxisName, axis_index_groups: Any) -> int:
    if axis_index_groups is not None:
        return len(axis_index_groups[0])
    return axis_size(axis_name)


def _canonical_groups(groups: Any) -> tuple[tuple[int, ...], ...] | None:
    if groups is None:
        return None
    out = tuple(tuple(int(i) for i in g) for g in groups)
    if len({len(g) for g in out}) > 1:
        raise ValueError(f"axis_index_groups must all be the same size, got {groups}")
    flat = [i for g in out for i in g]
    if sorted(flat) != list(range(len(flat))):
        raise ValueError(f"axis_index_groups must cover all indices exactly once, got {groups}")
    return out


def _tree_map(f: Any, x: Any) -> Any:
    return tree_util.tree_map(f, x)


def _is_tracer(x: Any) -> bool:
    return isinstance(x, core.Tracer)


# --- all-reduce: psum / pmax / pmin ------------------------------------------------------
def _allreduce(name: str, accepted: frozenset[np.dtype[Any]]) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(x: ShapedArray, *, axes: tuple[Any, ...],
                      axis_index_groups: Any) -> ShapedArray:
        if x.dtype not in accepted:
            common.check_dtype(name, x, accepted)
        pos = tuple(a for a in axes if isinstance(a, int))
        if axis_index_groups is not None and pos:
            raise ValueError(f"axis_index_groups can only be used with reductions over named "
                             f"axes, but got: {axes}")
        if pos:
            for a in pos:
                if not 0 <= a < len(x.shape):
                    raise ValueError(f"{name}: positional axis {a} is out of bounds for "
                                     f"{x.str_short()}")
            shape = tuple(d for i, d in enumerate(x.shape) if i not in pos)
            return ShapedArray(shape, x.dtype, False)
        return x.strip_weak_type()

    prim.def_abstract_eval(abstract_eval)
    effect_rules[prim] = lambda *, axes, axis_index_groups: _effects_of(axes)
    return prim


psum_p = _allreduce("psum", common.NUM)
pmax_p = _allreduce("pmax", common.ANY)
pmin_p = _allreduce("pmin", common.ANY)


def psum(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """All-reduce sum of ``x`` (a pytree) over the named axis (or axes); booleans
    are summed as int32. On non-traced values (``psum(1, 'i')``) it is the
    value times the axis size."""
    axes = _as_tuple(axis_name)
    if not axes:
        return x
    if any(isinstance(a, int) for a in axes) and axis_index_groups is not None:
        raise ValueError("axis_index_groups only supported for sums over just named axes")
    groups = _canonical_groups(axis_index_groups)

    def bind(leaf: Any) -> Any:
        if get_aval(leaf).dtype == dtypes.bool_:
            leaf = convert.convert_element_type(leaf, dtypes.int32)
        if not _is_tracer(leaf) and not _vma.checking():
            named, pos = _named(axes), tuple(a for a in axes if isinstance(a, int))
            size = len(groups[0]) if groups is not None else axis_size(named)
            if pos:
                nd = len(get_aval(leaf).shape)
                leaf = reductions.reduce_sum(leaf, [common.canonicalize_axis(a, nd) for a in pos])
            return ew.mul(common.const(leaf, size), leaf) if size != 1 else leaf
        if _vma.checking() and not any(isinstance(a, int) for a in axes) and groups is None:
            aval = get_aval(leaf)
            if aval.unreduced & set(axes):
                # unreduced -> invariant: the sum of the per-device summands
                return manual_types.psum_unreduced(leaf, aval, axes)
            # varying -> invariant: the sum over devices, whose transpose is pvary
            return psum_invariant_p.bind(_vary_over(leaf, axes), axes=axes)
        return psum_p.bind(leaf, axes=axes, axis_index_groups=groups)

    return _tree_map(bind, x)


def pmean(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """All-reduce mean over the named axis (integers give floats)."""
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = _group_size(_named(_as_tuple(axis_name)), _canonical_groups(axis_index_groups))
    return _tree_map(lambda v: _divide_by_count(v, n), total)


def _divide_by_count(total: Any, n: int) -> Any:
    """``total / n`` as ``jnp.true_divide`` gives it: integers and booleans
    become the default float type; the weak type is kept."""
    aval = get_aval(total)
    dtype = dtypes.to_inexact_dtype(aval.dtype)
    total = convert.convert_element_type_internal(total, dtype, aval.weak_type)
    return ew.div(total, convert.convert_element_type_internal(n, dtype, aval.weak_type))


def _pextremum(prim: Primitive, x: Any, axis_name: AxisName, axis_index_groups: Any) -> Any:
    axes = _as_tuple(axis_name)
    if any(isinstance(a, int) for a in axes) and axis_index_groups is not None:
        raise ValueError("axis_index_groups only supported for sums over just named axes")
    groups = _canonical_groups(axis_index_groups)
    return _tree_map(lambda leaf: prim.bind(_vary_over(leaf, axes), axes=axes,
                                            axis_index_groups=groups), x)


def _vary_over(x: Any, axes: Sequence[Any]) -> Any:
    """``x`` typed as varying over the named ``axes`` before a collective over
    them (a no-op unless varying manual axes are being checked)."""
    if not _vma.checking() or not _vma.auto_pcast_on():
        return x
    vma = get_aval(x).vma
    missing = tuple(a for a in _named(axes) if a not in vma)
    return pvary_p.bind(x, axes=missing) if missing else x


def _reducing_vma(x: ShapedArray, **params: Any) -> frozenset[Any]:
    """After an all-reduce the value no longer varies over the axes it names."""
    return x.vma - frozenset(_named(_as_tuple(params.get("axes", params.get("axis_name")))))


def _collective_vma(name: str) -> Any:
    def rule(x: ShapedArray, **params: Any) -> frozenset[Any]:
        axes = _named(_as_tuple(params["axis_name"]))
        if any(a not in x.vma for a in axes):
            raise ValueError(f"Collective {name} must be applied to a device-varying type, "
                             f"but got {set(x.vma)} for collective acting over axis name "
                             f"{axes}; pass check_vma=False to shard_map to skip the check")
        return x.vma
    return rule


def pmax(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """All-reduce max over the named axis."""
    return _pextremum(pmax_p, x, axis_name, axis_index_groups)


def pmin(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None) -> Any:
    """All-reduce min over the named axis."""
    return _pextremum(pmin_p, x, axis_name, axis_index_groups)


def _psum_transpose(ct: Any, x: Any, *, axes: tuple[Any, ...], axis_index_groups: Any
                    ) -> list[Any]:
    # The transpose of a sum over devices is a sum over devices of the cotangent
    # (each device's input contributed to every device's output).
    pos = tuple(a for a in axes if isinstance(a, int))
    if pos:
        shape = x.aval.shape
        kept = tuple(i for i in range(len(shape)) if i not in pos)
        ct = st.broadcast_in_dim(ct, shape, kept)
    named = _named(axes)
    if not named:
        return [ct]
    return [psum_p.bind(ct, axes=named, axis_index_groups=axis_index_groups)]


helpers.deflinear(psum_p, _psum_transpose)

#: ``psum_invariant[axes] x``: the sum over devices of a value varying over
#: ``axes``, typed invariant over them (what ``psum`` binds in a ``shard_map``
#: body traced with ``check_vma``). Its transpose is ``pvary``: the cotangent
#: of each device's contribution is the (invariant) cotangent of the sum.
psum_invariant_p = Primitive("psum_invariant")


def _psum_invariant_abstract_eval(x: ShapedArray, *, axes: tuple[Any, ...]) -> ShapedArray:
    if x.dtype not in common.NUM:
        common.check_dtype("psum", x, common.NUM)
    if any(isinstance(a, int) for a in axes):
        raise ValueError(f"psum_invariant does not accept positional axes, got {axes}")
    return x.strip_weak_type()


def _psum_invariant_vma(x: ShapedArray, *, axes: tuple[Any, ...]) -> frozenset[Any]:
    if not set(axes) & x.vma:
        raise ValueError(
            f"psum is a varying->invariant collective: the axes it sums over must be among "
            f"those its operand varies over. Got axes={axes} for an operand of type "
            f"{x.str_short()}")
    return x.vma - frozenset(axes)


psum_invariant_p.def_abstract_eval(_psum_invariant_abstract_eval)
effect_rules[psum_invariant_p] = lambda *, axes: _effects_of(axes)
vma_rules[psum_invariant_p] = _psum_invariant_vma
helpers.deflinear(psum_invariant_p,
                  lambda ct, x, *, axes: [pvary_p.bind(ct, axes=axes)])
helpers.deflinear(pvary_p, lambda ct, x, *, axes: [psum_invariant_p.bind(ct, axes=axes)])
_vma.ur_rules[psum_invariant_p] = manual_types.keep_ur  # a sum over other axes
for _p in (psum_p, pmax_p, pmin_p):
    vma_rules[_p] = _reducing_vma


def _reduce_positional(prim: Primitive, v: Any, axes: tuple[int, ...]) -> Any:
    if not axes:
        return v
    red = {psum_p: reductions.reduce_sum, pmax_p: reductions.reduce_max,
           pmin_p: reductions.reduce_min, psum_invariant_p: reductions.reduce_sum}[prim]
    return red(v, axes)


def _bind_allreduce(prim: Primitive, v: Any, axes: tuple[Any, ...],
                    axis_index_groups: Any) -> Any:
    if prim is psum_invariant_p:
        return prim.bind(v, axes=axes)
    return prim.bind(v, axes=axes, axis_index_groups=axis_index_groups)


def _allreduce_batch(prim: Primitive, axis_data: Any, args: Any, dims: Any, *,
                     axes: tuple[Any, ...], axis_index_groups: Any = None) -> Any:
    (v,), (d,) = args, dims
    frame = axis_data.name
    if frame not in axes:
        if d is None:
            return _bind_allreduce(prim, v, axes, axis_index_groups), None
        if not any(isinstance(a, int) for a in axes):
            return _bind_allreduce(prim, v, axes, axis_index_groups), d
        v = helpers.moveaxis(v, d, 0)
        shifted = tuple(a + 1 if isinstance(a, int) else a for a in axes)
        return _bind_allreduce(prim, v, shifted, axis_index_groups), 0
    if axis_index_groups is not None:
        raise ValueError(f"{prim.name} with axis_index_groups over an axis bound by vmap "
                         "is not supported")
    rest = tuple(a for a in axes if a != frame)
    if d is None:
        out = _bind_allreduce(prim, v, rest, None) if rest else v
        if prim is psum_p or prim is psum_invariant_p:
            out = ew.mul(common.const(out, axis_data.size), out)
        return out, None
    # The vmapped axis is reduced as a positional axis: the batch dim itself.
    v = helpers.moveaxis(v, d, 0)
    pos = (0,) + tuple(a + 1 for a in rest if isinstance(a, int))
    named = _named(rest)
    out = _reduce_positional(prim, v, tuple(sorted(pos)))
    if named:
        out = _bind_allreduce(prim, out, named, None)
    return out, None


batching.fancy_primitive_batchers[psum_p] = \
    lambda axis_data, args, dims, **p: _allreduce_batch(psum_p, axis_data, args, dims, **p)
batching.fancy_primitive_batchers[pmax_p] = \
    lambda axis_data, args, dims, **p: _allreduce_batch(pmax_p, axis_data, args, dims, **p)
batching.fancy_primitive_batchers[pmin_p] = \
    lambda axis_data, args, dims, **p: _allreduce_batch(pmin_p, axis_data, args, dims, **p)
batching.fancy_primitive_batchers[psum_invariant_p] = \
    lambda axis_data, args, dims, **p: _allreduce_batch(psum_invariant_p, axis_data, args,
                                                        dims, **p)


# --- ppermute -------------------------------------------------------------------------------
ppermute_p = Primitive("ppermute")


@ppermute_p.def_abstract_eval
def _ppermute_abstract_eval(x: ShapedArray, *, axis_name: tuple[Any, ...],
                            perm: tuple[tuple[int, int], ...]) -> ShapedArray:
    srcs = [s for s, _ in perm]
    dsts = [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    return x


effect_rules[ppermute_p] = lambda *, axis_name, perm: _effects_of(axis_name)


def ppermute(x: Any, axis_name: AxisName, perm: Sequence[tuple[int, int]]) -> Any:
    """Sends each device's ``x`` along ``perm``'s ``(source, destination)`` pairs
    over the named axis; devices that receive nothing get zeros."""
    axes = _as_tuple(axis_name)
    perm_t = tuple((operator.index(s), operator.index(t)) for s, t in perm)
    return _tree_map(lambda leaf: ppermute_p.bind(_vary_over(leaf, axes), axis_name=axes,
                                                  perm=perm_t), x)


def pshuffle(x: Any, axis_name: AxisName, perm: Sequence[int]) -> Any:
    """``ppermute`` with ``perm[i]`` the source of device ``i``."""
    if set(perm) != set(range(len(perm))):
        raise ValueError(f"`perm` does not represent a permutation: {perm}")
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def _ppermute_transpose(ct: Any, x: Any, *, axis_name: tuple[Any, ...],
                        perm: tuple[tuple[int, int], ...]) -> list[Any]:
    inverse = tuple((t, s) for s, t in perm)
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=inverse)]


helpers.deflinear(ppermute_p, _ppermute_transpose)


def _take_static(x: Any, indices: Sequence[int], axis: int) -> Any:
    """``x`` indexed along ``axis`` by the static ``indices`` (a permutation)."""
    pieces = [st.slice_in_dim(x, i, i + 1, 1, axis) for i in indices]
    return st.concatenate(pieces, axis)


def _ppermute_batch(axis_data: Any, args: Any, dims: Any, *, axis_name: tuple[Any, ...],
                    perm: tuple[tuple[int, int], ...]) -> Any:
    (v,), (d,) = args, dims
    if axis_data.name not in axis_name:
        return ppermute_p.bind(v, axis_name=axis_name, perm=perm), d
    rest = tuple(a for a in axis_name if a != axis_data.name)
    if rest:
        raise ValueError("ppermute over several axes including one bound by vmap is not "
                         "supported")
    if len(perm) != axis_data.size:
        raise ValueError(f"ppermute over the vmapped axis {axis_data.name!r} needs a full "
                         f"permutation of its {axis_data.size} indices, got {perm}")
    if d is None:
        return v, None
    sources = [0] * axis_data.size
    for s, t in perm:
        sources[t] = s
    return _take_static(v, sources, d), d


batching.fancy_primitive_batchers[ppermute_p] = _ppermute_batch


# --- all_gather / reduce_scatter ------------------------------------------------------------
all_gather_p = Primitive("all_gather")


@all_gather_p.def_abstract_eval
def _all_gather_abstract_eval(x: ShapedArray, *, all_gather_dimension: int,
                              axis_name: tuple[Any, ...], axis_index_groups: Any,
                              axis_size: int, tiled: bool) -> ShapedArray:
    shape = list(x.shape)
    if tiled:
        if not 0 <= all_gather_dimension < len(shape):
            raise ValueError(f"all_gather: axis {all_gather_dimension} is out of bounds for "
                             f"{x.str_short()}")
        shape[all_gather_dimension] *= axis_size
    else:
        if not 0 <= all_gather_dimension <= len(shape):
            raise ValueError(f"all_gather: axis {all_gather_dimension} is out of bounds for "
                             f"{x.str_short()}")
        shape.insert(all_gather_dimension, axis_size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


effect_rules[all_gather_p] = lambda **p: _effects_of(p["axis_name"])


def all_gather(x: Any, axis_name: AxisName, *, axis_index_groups: Any = None, axis: int = 0,
               tiled: bool = False, to: str = "varying") -> Any:
    """Gathers every device's ``x`` along a new axis ``axis`` (or concatenated
    along ``axis`` when ``tiled``). ``to`` is the result's manual axis type
    over ``axis_name`` (JAX 0.10's): ``'varying'`` (its transpose is a
    ``psum_scatter``) or ``'invarying'`` (every device holds the same
    gathered value; its transpose takes the device's own block)."""
    if to not in ("varying", "reduced", "invarying"):
        raise ValueError("Got unexpected `to` value for `jax.lax.all_gather`. Allowed `to` "
                         "values are: {'varying', 'reduced', 'invarying'}")
    if to == "reduced":  # needs reduced types, which lamina does not have
        raise ValueError("lax.all_gather: to='reduced' needs reduced manual axis types, which "
                         "lamina does not have; use to='varying' or to='invarying'")
    axes = _as_tuple(axis_name)
    if to == "invarying" and axis_index_groups is not None:
        raise ValueError("lax.all_gather: to='invarying' takes no axis_index_groups")
    groups = _canonical_groups(axis_index_groups)
    size = _group_size(axes, groups)

    def bind(leaf: Any) -> Any:
        nd = len(get_aval(leaf).shape)
        dim = common.canonicalize_axis(axis, nd if tiled else nd + 1)
        if to == "invarying":
            return all_gather_invariant_p.bind(_vary_over(leaf, axes), all_gather_dimension=dim,
                                               axis_name=axes, axis_size=size,
                                               tiled=bool(tiled))
        return all_gather_p.bind(_vary_over(leaf, axes), all_gather_dimension=dim,
                                 axis_name=axes,
                                 axis_index_groups=groups, axis_size=size, tiled=bool(tiled))

    return _tree_map(bind, x)


#: ``all_gather(..., to='invarying')``: the gathered value typed as the same on
#: every device of the gathered axes (JAX's ``all_gather_invariant``).
all_gather_invariant_p = Primitive("all_gather_invariant")
all_gather_invariant_p.def_abstract_eval(
    lambda x, **params: _all_gather_abstract_eval(x, axis_index_groups=None, **params))
effect_rules[all_gather_invariant_p] = lambda **p: _effects_of(p["axis_name"])


def _all_gather_invariant_vma(x: ShapedArray, *, axis_name: tuple[Any, ...],
                              **_: Any) -> frozenset[Any]:
    return frozenset(x.vma) - frozenset(_named(axis_name))


def _all_gather_invariant_transpose(ct: Any, x: Any, *, all_gather_dimension: int,
                                    axis_name: tuple[Any, ...], axis_size: int,
                                    tiled: bool) -> list[Any]:
    """Every device's cotangent is the whole gathered one: each takes its block."""
    size = get_aval(ct).shape[all_gather_dimension] // axis_size
    start = ew.mul(axis_index(axis_name), np.array(size, np.int32))
    block = indexing.dynamic_slice_in_dim(ct, start, size, all_gather_dimension)
    return [block if tiled else st.squeeze(block, (all_gather_dimension,))]


reduce_scatter_p = Primitive("reduce_scatter")


@reduce_scatter_p.def_abstract_eval
def _reduce_scatter_abstract_eval(x: ShapedArray, *, scatter_dimension: int,
                                  axis_name: tuple[Any, ...], axis_index_groups: Any,
                                  axis_size: int, tiled: bool) -> ShapedArray:
    if x.dtype not in common.NUM:
        common.check_dtype("reduce_scatter", x, common.NUM)
    if not 0 <= scatter_dimension < len(x.shape):
        raise ValueError(f"reduce_scatter: scatter_dimension {scatter_dimension} is out of "
                         f"bounds for {x.str_short()}")
    shape = list(x.shape)
    size = shape[scatter_dimension]
    if tiled:
        if size % axis_size:
            raise ValueError(f"tiled reduce_scatter operand scatter dimension size {size} "
                             f"must be divisible by shard_count {axis_size}")
        shape[scatter_dimension] = size // axis_size
    else:
        if size != axis_size:
            raise ValueError(f"reduce_scatter operand scatter dimension size {size} must "
                             f"match shard count {axis_size}")
        del shape[scatter_dimension]
    return ShapedArray(tuple(shape), x.dtype, False)


effect_rules[reduce_scatter_p] = lambda **p: _effects_of(p["axis_name"])


def psum_scatter(x: Any, axis_name: AxisName, *, scatter_dimension: int = 0,
                 axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """Sums ``x`` over the named axis and leaves device ``i`` the ``i``-th block
    along ``scatter_dimension``."""
    axes = _as_tuple(axis_name)
    groups = _canonical_groups(axis_index_groups)
    size = _group_size(axes, groups)

    def bind(leaf: Any) -> Any:
        dim = common.canonicalize_axis(scatter_dimension, len(get_aval(leaf).shape))
        return reduce_scatter_p.bind(_vary_over(leaf, axes), scatter_dimension=dim,
                                     axis_name=axes,
                                     axis_index_groups=groups, axis_size=size,
                                     tiled=bool(tiled))

    return _tree_map(bind, x)


def _all_gather_transpose(ct: Any, x: Any, *, all_gather_dimension: int,
                          axis_name: tuple[Any, ...], axis_index_groups: Any, axis_size: int,
                          tiled: bool) -> list[Any]:
    return [reduce_scatter_p.bind(ct, scatter_dimension=all_gather_dimension,
                                  axis_name=axis_name, axis_index_groups=axis_index_groups,
                                  axis_size=axis_size, tiled=tiled)]


def _reduce_scatter_transpose(ct: Any, x: Any, *, scatter_dimension: int,
                              axis_name: tuple[Any, ...], axis_index_groups: Any,
                              axis_size: int, tiled: bool) -> list[Any]:
    return [all_gather_p.bind(ct, all_gather_dimension=scatter_dimension, axis_name=axis_name,
                              axis_index_groups=axis_index_groups, axis_size=axis_size,
                              tiled=tiled)]


helpers.deflinear(all_gather_p, _all_gather_transpose)
helpers.deflinear(all_gather_invariant_p, _all_gather_invariant_transpose)
helpers.deflinear(reduce_scatter_p, _reduce_scatter_transpose)


def _split_axis(x: Any, axis: int, factor: int) -> Any:
    shape = list(get_aval(x).shape)
    shape[axis:axis + 1] = [factor, shape[axis] // factor]
    return st.reshape(x, tuple(shape))


def _fold_axis(x: Any, axis: int) -> Any:
    shape = list(get_aval(x).shape)
    shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
    return st.reshape(x, tuple(shape))


def _all_gather_batch(axis_data: Any, args: Any, dims: Any, *, all_gather_dimension: int,
                      axis_name: tuple[Any, ...], axis_size: int, tiled: bool,
                      axis_index_groups: Any = None, prim: Primitive = all_gather_p) -> Any:
    (x,), (d,) = args, dims
    params: dict[str, Any] = dict(axis_name=axis_name, axis_size=axis_size, tiled=tiled)
    if prim is all_gather_p:
        params["axis_index_groups"] = axis_index_groups
    if axis_data.name not in axis_name:
        if d is None:
            return prim.bind(x, all_gather_dimension=all_gather_dimension, **params), None
        dim = all_gather_dimension
        if d <= dim:
            dim += 1
        elif not tiled:
            d += 1
        return prim.bind(x, all_gather_dimension=dim, **params), d
    if len(axis_name) > 1 or axis_index_groups is not None:
        raise ValueError("all_gather over several axes (or axis_index_groups) including one "
                         "bound by vmap is not supported")
    if d is None:
        shape = list(get_aval(x).shape)
        shape.insert(all_gather_dimension, axis_data.size)
        kept = tuple(i for i in range(len(shape)) if i != all_gather_dimension)
        y = st.broadcast_in_dim(x, tuple(shape), kept)
    else:
        y = helpers.moveaxis(x, d, all_gather_dimension)
    if tiled:
        y = _fold_axis(y, all_gather_dimension)
    return y, None


def _reduce_scatter_batch(axis_data: Any, args: Any, dims: Any, *, scatter_dimension: int,
                          axis_name: tuple[Any, ...], axis_index_groups: Any, axis_size: int,
                          tiled: bool) -> Any:
    (x,), (d,) = args, dims
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups,
                  axis_size=axis_size, tiled=tiled)
    if axis_data.name not in axis_name:
        if d is None:
            return reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension,
                                         **params), None
        dim = scatter_dimension
        if d <= dim:
            dim += 1
        elif not tiled:
            d -= 1
        return reduce_scatter_p.bind(x, scatter_dimension=dim, **params), d
    if len(axis_name) > 1 or axis_index_groups is not None:
        raise ValueError("psum_scatter over several axes (or axis_index_groups) including one "
                         "bound by vmap is not supported")
    size = axis_data.size
    if d is None:
        x = ew.mul(common.const(x, size), x)
    else:
        x = reductions.reduce_sum(x, (d,))
    # Device i keeps block i of the scatter dimension: that block index becomes
    # the batch dimension.
    if tiled:
        x = _split_axis(x, scatter_dimension, size)
    return x, scatter_dimension


batching.fancy_primitive_batchers[all_gather_p] = _all_gather_batch
batching.fancy_primitive_batchers[all_gather_invariant_p] = \
    lambda axis_data, args, dims, **params: _all_gather_batch(
        axis_data, args, dims, prim=all_gather_invariant_p, **params)
batching.fancy_primitive_batchers[reduce_scatter_p] = _reduce_scatter_batch


# --- all_to_all ---------------------------------------------------------------------------------
all_to_all_p = Primitive("all_to_all")


@all_to_all_p.def_abstract_eval
def _all_to_all_abstract_eval(x: ShapedArray, *, split_axis: int, concat_axis: int,
                              axis_name: Any, axis_index_groups: Any,
                              tiled: bool) -> ShapedArray:
    nd = len(x.shape)
    for what, a in (("split_axis", split_axis), ("concat_axis", concat_axis)):
        if not 0 <= a < nd:
            raise ValueError(f"all_to_all: {what} {a} is out of bounds for {x.str_short()}")
    size = _group_size(_as_tuple(axis_name), axis_index_groups)
    shape = list(x.shape)
    if shape[split_axis] % size:
        raise ValueError(f"all_to_all: the split_axis size {shape[split_axis]} must be "
                         f"divisible by the size of the named axis {axis_name!r} ({size})")
    shape[split_axis] //= size
    shape[concat_axis] *= size
    return ShapedArray(tuple(shape), x.dtype, False)


effect_rules[all_to_all_p] = lambda **p: _effects_of(p["axis_name"])


def all_to_all(x: Any, axis_name: AxisName, split_axis: int, concat_axis: int, *,
               axis_index_groups: Any = None, tiled: bool = False) -> Any:
    """Splits ``x`` along ``split_axis`` into one block per device, sends block ``j``
    to device ``j``, and concatenates the received blocks along ``concat_axis``
    (a new axis unless ``tiled``)."""
    groups = _canonical_groups(axis_index_groups)
    if isinstance(axis_name, list):
        axis_name = tuple(axis_name)

    def bind(leaf: Any) -> Any:
        shape = get_aval(leaf).shape
        nd = len(shape)
        split = common.canonicalize_axis(split_axis, nd)
        concat = common.canonicalize_axis(concat_axis, nd)
        size = _group_size(_as_tuple(axis_name), groups)
        if tiled:
            if shape[split] % size:
                raise ValueError(f"The size of all_to_all split_axis ({shape[split]}) has to "
                                 f"be divisible by the size of the named axis {axis_name} "
                                 f"({size})")
        else:
            if size != shape[split]:
                raise ValueError("all_to_all requires the size of the mapped axis axis_name "
                                 "to equal x.shape[split_axis], but they are "
                                 f"{size} and {shape[split]} respectively.")
            if split < concat:
                concat += 1
                leaf = st.expand_dims(leaf, (concat,))
            elif concat < split:
                leaf = st.expand_dims(leaf, (concat,))
                split += 1
        out = all_to_all_p.bind(_vary_over(leaf, _as_tuple(axis_name)), split_axis=split,
                                concat_axis=concat,
                                axis_name=axis_name, axis_index_groups=groups,
                                tiled=bool(tiled))
        if not tiled and split != concat:
            out = st.squeeze(out, (split,))
        return out

    return _tree_map(bind, x)


def pswapaxes(x: Any, axis_name: AxisName, axis: int, *, axis_index_groups: Any = None) -> Any:
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def _all_to_all_transpose(ct: Any, x: Any, *, split_axis: int, concat_axis: int,
                          axis_name: Any, axis_index_groups: Any, tiled: bool) -> list[Any]:
    return [all_to_all_p.bind(ct, split_axis=concat_axis, concat_axis=split_axis,
                              axis_name=axis_name, axis_index_groups=axis_index_groups,
                              tiled=tiled)]


helpers.deflinear(all_to_all_p, _all_to_all_transpose)


def _all_to_all_batch(axis_data: Any, args: Any, dims: Any, *, split_axis: int,
                      concat_axis: int, axis_name: Any, axis_index_groups: Any,
                      tiled: bool) -> Any:
    (x,), (d,) = args, dims
    names = _as_tuple(axis_name)
    params = dict(axis_name=axis_name, axis_index_groups=axis_index_groups, tiled=tiled)
    if axis_data.name not in names:
        if d is None:
            return all_to_all_p.bind(x, split_axis=split_axis, concat_axis=concat_axis,
                                     **params), None
        return all_to_all_p.bind(x, split_axis=split_axis + (d <= split_axis),
                                 concat_axis=concat_axis + (d <= concat_axis), **params), d
    if len(names) > 1 or axis_index_groups is not None:
        raise ValueError("all_to_all over several axes (or axis_index_groups) including one "
                         "bound by vmap is not supported")
    size = axis_data.size
    if d is None:
        x = st.broadcast(x, (size,))
        d = 0
    if split_axis == concat_axis:
        axis = split_axis + (d <= split_axis)
        d_out = d
        x = _split_axis(x, axis, size)
        d += 1 if axis <= d else 0
        perm = list(range(len(get_aval(x).shape)))
        perm[d], perm[axis] = perm[axis], perm[d]
        return _fold_axis(st.transpose(x, tuple(perm)), axis), d_out
    x = _fold_axis(helpers.moveaxis(x, d, concat_axis), concat_axis)
    return _split_axis(x, split_axis, size), split_axis


batching.fancy_primitive_batchers[all_to_all_p] = _all_to_all_batch


# --- axis_index -------------------------------------------------------------------------------
axis_index_p = Primitive("axis_index")
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), dtypes.int32, False))
effect_rules[axis_index_p] = lambda *, axis_name: _effects_of(axis_name)


def axis_index(axis_name: AxisName) -> Array:
    """This device's (or batch element's) index along the named axis; for a
    tuple of names, the row-major index over them."""
    if not isinstance(axis_name, (tuple, list)):
        return axis_index_p.bind(axis_name=axis_name)
    index: Any = np.array(0, np.int32)
    inner = 1
    for name in reversed(axis_name):
        index = ew.add(index, ew.mul(axis_index(name), np.array(inner, np.int32)))
        inner *= axis_size(name)
    return index


def _axis_index_batch(axis_data: Any, args: Any, dims: Any, *, axis_name: Any) -> Any:
    if axis_data.name not in _as_tuple(axis_name):
        return axis_index_p.bind(axis_name=axis_name), None
    return st.iota(dtypes.int32, axis_data.size), 0


batching.fancy_primitive_batchers[axis_index_p] = _axis_index_batch


# --- pvary / pbroadcast -----------------------------------------------------------------------
def pvary(x: Any, axis_name: AxisName) -> Any:
    """Types ``x`` (a pytree) as varying over the named manual axes: the values
    do not change, only ``shard_map``'s varying-manual-axes type does, so an
    invariant value may meet per-device ones. Its transpose sums the
    cotangents over those axes. A no-op unless the body is traced with
    ``check_vma``."""
    axes = _named(_as_tuple(axis_name))
    if not axes or not _vma.checking():
        return x
    return _tree_map(lambda leaf: pvary_p.bind(leaf, axes=axes), x)


_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x: Any, axis_name: AxisName, *, to: str) -> Any:
    """Changes the manual-axes type of ``x`` (a pytree) over ``axis_name``:
    ``to='varying'`` is :func:`pvary` (an invariant value becomes varying; a
    reduced one becomes varying too), ``to='unreduced'`` makes a varying value
    unreduced (each device's value a summand of it, summed by a later
    ``psum``), ``to='reduced'`` types an invariant value reduced (its
    cotangent is then unreduced). Other changes are refused, as JAX does."""
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"pcast: axis_name={axis_name!r} must be a tuple or a str")
    axes = _named(_as_tuple(axis_name))
    if not axes:
        return x
    if to not in _PCAST_TO:
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: "
                         "{'varying', 'reduced', 'unreduced'}")

    def one(leaf: Any) -> Any:
        aval = get_aval(leaf)
        if to != "varying" or aval.reduced & set(axes) or aval.unreduced & set(axes):
            # (in a body without check_vma nothing varies: to='unreduced' is refused)
            return manual_types.cast_to(leaf, aval, axes, to)
        if _vma.checking() and any(a in get_aval(leaf).vma for a in axes):
            raise ValueError(f"pcast: unsupported pcast from=varying, to={to!r} (the "
                             f"operand {get_aval(leaf).str_short()} already varies over "
                             f"{axes})")
        return pvary(leaf, axes)

    return _tree_map(one, x)


batching.fancy_primitive_batchers[pvary_p] = \
    lambda axis_data, args, dims, *, axes: (
        pvary_p.bind(args[0], axes=tuple(a for a in axes if a != axis_data.name))
        if any(a != axis_data.name for a in axes) else args[0], dims[0])

for _p in (ppermute_p, all_gather_p, reduce_scatter_p, all_to_all_p):
    vma_rules[_p] = _collective_vma(_p.name)
vma_rules[all_gather_invariant_p] = _all_gather_invariant_vma
vma_rules[axis_index_p] = lambda *, axis_name: frozenset(_named(_as_tuple(axis_name)))


def pbroadcast(x: Any, axis_name: AxisName, source: int) -> Any:
    """Every device along ``axis_name`` gets the ``x`` of the device at index
    ``source`` (a collective broadcast)."""
    size = axis_size(axis_name)
    if not 0 <= operator.index(source) < size:
        raise ValueError(f"pbroadcast: source {source} is not an index of the axis "
                         f"{axis_name!r} of size {size}")

    def one(leaf: Any) -> Any:
        keep = ew.eq(axis_index(axis_name), np.array(source, np.int32))
        zero = common.const(leaf, 0)
        summed = psum(ew.select(st.broadcast(keep, get_aval(leaf).shape), leaf,
                                st.broadcast(zero, get_aval(leaf).shape)), axis_name)
        # typed as its operand (as JAX's collective broadcast is), though the
        # value is now the same on every device
        return pvary(summed, tuple(a for a in get_aval(leaf).vma
                                   if a not in get_aval(summed).vma))

    return _tree_map(one, x)


_ = (math, transpose_rules)

__all__ = ["psum_p", "pmax_p", "pmin_p", "ppermute_p", "all_gather_p", "all_gather_invariant_p",
           "reduce_scatter_p",
           "all_to_all_p", "axis_index_p", "pvary_p", "psum", "pmean", "pmax", "pmin", "ppermute",
           "pshuffle", "all_gather", "psum_scatter", "all_to_all", "pswapaxes", "axis_index",
           "axis_size", "pvary", "pbroadcast", "pcast", "psum_invariant_p"]
