"""Lowering a ``pmap_p`` equation inside a replica-mode module (nested pmap).

A pmap whose body contains another pmap runs on ``outer size x inner size``
replicas (:func:`jaxpr_replicas` counts them): the outer program's axis
environment gets the inner axis appended (``ReplicaAxisContext``), each
replica slices its entry of the inner mapped inputs by its index along the
inner axis, runs the inner body, and the inner mapped outputs are gathered
back along the inner axis (``all_gather`` over the inner axis' replica groups),
so the enclosing body sees whole values again.

A ``pmap_p`` equation in a module that is not in replica mode (``jit`` of a
``pmap``: a single-device or SPMD program) is lowered as the *batched* body
instead: the body vmapped over the mapped axis, collectives over the pmap's
axis becoming array operations (tracing-core's batching rules). The values
are the same; the work runs where the enclosing program runs (XLA's SPMD
partitioner may spread it), not one replica per device. A replica-mode
module with too few replicas for the pmap is an error that names the
function and the number of replicas it needs.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_mlir_lowering import (
    LoweringRuleContext,
    ReplicaAxisContext,
    lower_sub_jaxpr,
    register_lowering,
)
from lamina_mlir_lowering.lax_rules.collectives import replica_groups_attr
from lamina_mlir_lowering.types import Value, dense_i64_array, i64_attr, ir_constant
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, subjaxprs_of_params
from lamina_tracing_core.lax import structural
from lamina_tracing_core.source_info import set_frame_override

from lamina_interpreters_pxla.pmap_primitive import AnonymousAxis, pmap_p

__all__ = ["jaxpr_replicas", "describe_axis"]


def jaxpr_replicas(jaxpr: Jaxpr | ClosedJaxpr) -> int:
    """How many replicas the pmaps nested in ``jaxpr`` need (1 without any):
    a pmap equation needs its axis size times its body's replicas; sequential
    ones share replicas (the maximum is taken)."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    need = 1
    for eqn in inner.eqns:
        if eqn.primitive is pmap_p:
            need = max(need, int(eqn.params["axis_size"])
                       * jaxpr_replicas(eqn.params["call_jaxpr"]))
            continue
        for sub in subjaxprs_of_params(eqn.params):
            need = max(need, jaxpr_replicas(sub))
    return need


def describe_axis(name: Hashable) -> str:
    """``'i'`` for a named axis, ``an anonymous axis`` otherwise (for errors)."""
    return "an anonymous axis" if isinstance(name, AnonymousAxis) else repr(name)


def _replica_context(ctx: LoweringRuleContext) -> ReplicaAxisContext | None:
    """The enclosing replica-mode axis context, or None when the module is
    not in replica mode (then the map is lowered batched)."""
    outer = ctx.axis_context
    if isinstance(outer, ReplicaAxisContext):
        return outer
    if outer is None and ctx.module_context.num_replicas > 1:
        return ReplicaAxisContext((), num_replicas=ctx.module_context.num_replicas)
    return None


def _check_replicas(ctx: LoweringRuleContext, outer: ReplicaAxisContext, axis_size: int,
                    name: str) -> None:
    needed = math.prod(s for _, s in outer.axis_env) * axis_size
    if outer.total % needed:
        raise ctx.error(
            f"pmap of {name} over an axis of size {axis_size} needs {needed} replicas, but "
            f"the enclosing computation has {outer.total}: compile it with "
            f"num_replicas=jaxpr_replicas(jaxpr)")


def _index_along(ctx: LoweringRuleContext, inner: ReplicaAxisContext,
                 axis_name: Hashable) -> Value:
    """This replica's index along ``axis_name`` as an ``i32`` scalar."""
    u32 = np.dtype(np.uint32)
    replica = hlo.replica_id()
    div = ir_constant(np.array(inner.axis_index_divisor(axis_name), u32))
    size = ir_constant(np.array(inner.axis_size(axis_name), u32))
    index = hlo.remainder(hlo.divide(replica, div), size)
    return hlo.convert(ctx.module_context.types.shaped((), np.int32), index)


def _take_entry(ctx: LoweringRuleContext, x: Value, aval: Any, axis: int,
                index: Value) -> Value:
    """``x[..., index, ...]`` along ``axis`` (the axis removed)."""
    types = ctx.module_context.types
    zero = ir_constant(np.array(0, np.int32))
    starts = [index if d == axis else zero for d in range(aval.ndim)]
    sizes = [1 if d == axis else s for d, s in enumerate(aval.shape)]
    piece = hlo.dynamic_slice(x, starts, dense_i64_array(sizes))
    kept = tuple(s for d, s in enumerate(aval.shape) if d != axis)
    return hlo.reshape(types.shaped(kept, aval.dtype), piece)


def _gather_entries(ctx: LoweringRuleContext, y: Value, aval: Any, axis: int, size: int,
                    groups: Sequence[Sequence[int]]) -> Value:
    """The per-replica ``y`` of every replica along the axis, stacked at ``axis``."""
    types = ctx.module_context.types
    one = list(aval.shape)
    one.insert(axis, 1)
    full = list(aval.shape)
    full.insert(axis, size)
    y = hlo.reshape(types.shaped(tuple(one), aval.dtype), y)
    op = hlo.AllGatherOp([types.shaped(tuple(full), aval.dtype)], [y], i64_attr(axis),
                         replica_groups_attr(groups))
    result: Value = op.results[0]
    return result


def _pmap_lowering(ctx: LoweringRuleContext, *args: Value, axis_name: Hashable,
                   axis_size: int, in_axes: Sequence[int | None],
                   out_axes: Sequence[int | None], call_jaxpr: Jaxpr, devices: Any,
                   name: str, **_: Any) -> list[Value]:
    if devices is not None:
        raise ctx.error(f"nested pmap of {name} with devices specified is not supported: "
                        f"give devices= to the outermost pmap only")
    outer = _replica_context(ctx)
    if outer is None:
        return _lower_batched(ctx, args, axis_name, axis_size, in_axes, out_axes, call_jaxpr,
                              name)
    _check_replicas(ctx, outer, axis_size, name)
    if axis_name in outer.axis_names:
        raise ctx.error(f"nested pmap of {name} binds the axis {describe_axis(axis_name)} "
                        f"that an enclosing pmap already binds")
    inner = ReplicaAxisContext(outer.axis_env + ((axis_name, axis_size),),
                               num_replicas=outer.total)
    index = _index_along(ctx, inner, axis_name)
    body_args = [x if ax is None else _take_entry(ctx, x, aval, ax, index)
                 for x, aval, ax in zip(args, ctx.avals_in, in_axes)]
    outs = lower_sub_jaxpr(ctx, call_jaxpr, body_args, name=name, axis_context=inner)
    groups = inner.groups(axis_name)
    return [y if ax is None else _gather_entries(ctx, y, v.aval, ax, axis_size, groups)
            for y, v, ax in zip(outs, call_jaxpr.outvars, out_axes)]


def _lower_batched(ctx: LoweringRuleContext, args: Sequence[Value], axis_name: Hashable,
                   axis_size: int, in_axes: Sequence[int | None],
                   out_axes: Sequence[int | None], call_jaxpr: Jaxpr, name: str) -> list[Value]:
    """The map as its batched body (outside replica mode, e.g. under jit).

    Batching adds equations that no body equation wrote (an unbatched result
    broadcast to the mapped axis, a moved axis): they get the pmap
    equation's user line, not the line of the call that lowers."""
    frame = ctx.source_info.frame if ctx.source_info is not None else None
    previous = set_frame_override(frame) if frame is not None else None
    try:
        return _trace_and_lower_batched(ctx, args, axis_name, axis_size, in_axes, out_axes,
                                        call_jaxpr, name)
    finally:
        if frame is not None:
            set_frame_override(previous)


def _trace_and_lower_batched(ctx: LoweringRuleContext, args: Sequence[Value],
                             axis_name: Hashable, axis_size: int,
                             in_axes: Sequence[int | None], out_axes: Sequence[int | None],
                             call_jaxpr: Jaxpr, name: str) -> list[Value]:
    closed = ClosedJaxpr(call_jaxpr, ())
    batched, out_batched = batching.batch_jaxpr(
        closed, batching.AxisData(axis_name, axis_size), [ax is not None for ax in in_axes],
        instantiate=[ax is not None for ax in out_axes])

    def apply(*xs: Any) -> list[Any]:
        moved = [x if ax is None else batching.moveaxis(x, ax, 0)
                 for x, ax in zip(xs, in_axes)]
        outs = core.eval_jaxpr(batched.jaxpr, batched.consts, *moved)
        # an unmapped (out_axes None) result is the same on every device: take one
        return [structural.index_in_dim(o, 0, 0, keepdims=False) if ax is None and b
                else o if ax is None else batching.moveaxis(o, 0, ax)
                for o, ax, b in zip(outs, out_axes, out_batched)]

    dbg = call_jaxpr.debug_info
    fun = wrap_init(apply, debug_info=pe.tracing_debug_info_of(dbg))
    with core.extend_axis_env_nd(_bound_axes(ctx)):
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, list(ctx.avals_in))
    return lower_sub_jaxpr(ctx, ClosedJaxpr(jaxpr, consts), args, name=name)


def _bound_axes(ctx: LoweringRuleContext) -> list[tuple[Hashable, int | None]]:
    """The named axes the enclosing module binds (SPMD manual axes), so that
    re-tracing the body accepts collectives over them."""
    axis_ctx = ctx.axis_context
    if axis_ctx is None:
        return []
    return [(n, axis_ctx.axis_size(n)) for n in axis_ctx.axis_names]


register_lowering(pmap_p, _pmap_lowering)
