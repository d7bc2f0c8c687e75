"""``cond`` and ``switch``: the ``cond`` primitive.

``cond_p`` applies one of several closed jaxprs, chosen by an ``int32``
index, to the operands: ``outs = cond[branches=(b0, b1, ...)] index *ops``.
Every branch takes the same operands (``[*consts, *operands]``; a branch
ignores the consts of the others) and returns the same types. The index is
clamped by ``switch`` before binding; ``cond(pred, true_fun, false_fun)``
binds ``branches=(false_jaxpr, true_jaxpr)``, as JAX does.

Params (JAX 0.10's): ``branches: tuple[ClosedJaxpr, ...]``.

Rules: abstract evaluation (checks the operand and branch types), effects
(the union of the branches'), JVP, partial evaluation (known/unknown split of
every branch with the residuals of all branches merged by type), transpose,
batching (a batched index turns the cond into a ``select_n`` of all branches),
DCE, and eager evaluation of the chosen branch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util as tu
from lamina_tracing_core import ad, api, batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero, instantiate_zeros, tangent_aval, zeros_like_aval
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import (
    as_array,
    branch_output_error,
    eval_closed,
    joined_effects,
    long_type_str,
    merge_consts,
    retrace,
    body_debug_info,
    trace_body,
    typematch,
)
from lamina_tracing_core.effects import Effects, has_side_effects, uses_named_axis
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprEqn, Var
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.lax import convert, elementwise, structural

__all__ = ["cond", "cond_p", "switch"]

cond_p = Primitive("cond", multiple_results=True)
cond_p.higher_order = True


class _NoOperand:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no operand>"


_no_operand = _NoOperand()


# --- the user API --------------------------------------------------------------------
def _lax() -> Any:
    return elementwise, convert


def _resolve_operands(operands: tuple[Any, ...], operand: Any) -> tuple[Any, ...]:
    if operand is _no_operand:
        return operands
    if operands:
        raise TypeError("if 'operand' keyword is passed then no positional operands can be "
                        f"passed, got operand={operand!r} and positional operands {operands}")
    return (operand,)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any,
           operand: Any = _no_operand) -> Any:
    """Applies ``branches[index](*operands)``; ``index`` is clamped to
    ``[0, len(branches) - 1]``. Every branch is traced; they must return the
    same structure and types. Under ``vmap`` with a batched index all branches
    run and the results are selected."""
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    operands = _resolve_operands(operands, operand)
    if np.ndim(index) != 0 and not (isinstance(index, core.Tracer) and index.ndim == 0):
        raise TypeError(f"Branch index must be scalar, got {index} of shape "
                        f"{np.shape(index)}.")
    index_dtype = get_aval(index).dtype
    if index_dtype.kind not in "iu":
        raise TypeError(f"Index type must be an integer, got {index} as {index_dtype}")
    branches = tuple(branches)
    if not branches:
        raise ValueError("Empty branch sequence")
    if len(branches) == 1:
        return branches[0](*operands)
    elementwise, convert = _lax()
    index = convert.convert_element_type(index, np.int32)
    index = elementwise.clamp(np.array(0, np.int32), index,
                              np.array(len(branches) - 1, np.int32))
    return _bind_cond(index, branches, operands, api="switch",
                      names=[f"branch {i}" if i == 0 else f"branch{i}"
                             for i in range(len(branches))])


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any, operand: Any = _no_operand) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``.

    ``pred`` is a boolean (or numeric, compared with 0) scalar. Both branches
    are traced and must return the same pytree structure and types. The
    deprecated form ``cond(pred, true_operand, true_fun, false_operand,
    false_fun)`` is accepted, as in JAX."""
    if not (callable(true_fun) and callable(false_fun)):
        if callable(false_fun) and len(operands) == 2 and callable(operands[1]):
            x_true, f_true, x_false, f_false = true_fun, false_fun, operands[0], operands[1]
            return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true,
                        x_false)
        raise TypeError("lax.cond: true_fun and false_fun arguments should be callable.")
    operands = _resolve_operands(operands, operand)
    if pred is None:
        raise TypeError("cond predicate is None")
    if isinstance(pred, (list, tuple)) or np.ndim(pred) != 0 and not (
            isinstance(pred, core.Tracer) and pred.ndim == 0):
        raise TypeError(f"Pred must be a scalar, got {pred} of "
                        + (f"type {type(pred)}" if isinstance(pred, (list, tuple))
                           else f"shape {np.shape(pred)}."))
    try:
        pred_dtype = get_aval(pred).dtype
    except TypeError as err:
        raise TypeError(f"Pred type must be either boolean or number, got {pred}.") from err
    elementwise, convert = _lax()
    if pred_dtype.kind != "b":
        if pred_dtype.kind not in "iuf":
            raise TypeError(f"Pred type must be either boolean or number, got {pred_dtype}.")
        pred = elementwise.ne(pred, np.zeros((), pred_dtype))
    index = convert.convert_element_type(pred, np.int32)
    return _bind_cond(index, (false_fun, true_fun), operands, api="cond",
                      names=["false_fun", "true_fun"])


def _bind_cond(index: Any, funs: Sequence[Callable[..., Any]], operands: tuple[Any, ...],
               *, api: str, names: Sequence[str]) -> Any:
    args, in_tree = tu.tree_flatten(operands)
    avals = [get_aval(x) for x in args]
    bodies = [trace_body(f, in_tree, avals, body_debug_info(api, f, operands)) for f in funs]
    # Errors name the branches the way the user wrote them (true_fun first).
    order = [1, 0] if api == "cond" else list(range(len(funs)))
    first = bodies[order[0]]
    for i in order[1:]:
        err = branch_output_error(api, names[order[0]], names[i], funs[order[0]], funs[i],
                                  first.out_tree, first.out_avals, bodies[i].out_tree,
                                  bodies[i].out_avals)
        if err is not None:
            raise err
    jaxprs, consts = merge_consts(bodies)
    out = cond_p.bind(index, *consts, *args, branches=tuple(jaxprs))
    return tu.tree_unflatten(first.out_tree, out)


# --- abstract evaluation and effects ----------------------------------------------------------
def _cond_abstract_eval(index: ShapedArray, *avals: ShapedArray,
                        branches: Sequence[ClosedJaxpr]) -> list[ShapedArray]:
    if index.shape != () or index.dtype not in (np.dtype(np.int32), np.dtype(np.bool_)):
        raise TypeError(f"cond: the branch index must be an int32 scalar, got "
                        f"{long_type_str(index)}")
    if not branches:
        raise TypeError("cond: needs at least one branch")
    for i, branch in enumerate(branches):
        in_avals = branch.in_avals
        if len(in_avals) != len(avals) or not all(map(typematch, in_avals, avals)):
            raise TypeError(
                f"cond: branch {i} takes operands of types "
                f"{[long_type_str(a) for a in in_avals]} but the cond got operands of types "
                f"{[long_type_str(a) for a in avals]}")
    out0 = branches[0].out_avals
    for i, branch in enumerate(branches[1:], start=1):
        outs = branch.out_avals
        if len(outs) != len(out0) or not all(map(typematch, outs, out0)):
            raise TypeError(
                f"cond: branch 0 and branch {i} must have equal output types, got "
                f"{[long_type_str(a) for a in out0]} and {[long_type_str(a) for a in outs]}")
    return list(out0)


def _cond_effects(*, branches: Sequence[ClosedJaxpr]) -> Effects:
    return joined_effects(branches)


cond_p.def_abstract_eval(_cond_abstract_eval)
cond_p.def_effects(_cond_effects)


def _cond_impl(index: Any, *args: Any, branches: Sequence[ClosedJaxpr]) -> list[Any]:
    i = int(np.clip(int(np.asarray(index)), 0, len(branches) - 1))
    outs = eval_closed(branches[i], *args)
    return [as_array(out, aval) for out, aval in zip(outs, branches[i].out_avals)]


cond_p.def_impl(api.compiled_impl_when_eager(cond_p, _cond_impl))


# --- JVP ---------------------------------------------------------------------------------------
def _cond_jvp(primals: Sequence[Any], tangents: Sequence[Any], *,
              branches: Sequence[ClosedJaxpr]) -> tuple[list[Any], list[Any]]:
    index, *ops = primals
    _, *ops_dot = tangents
    ops_nz = [type(t) is not Zero for t in ops_dot]
    branch_nzs = [ad.jvp_jaxpr(b, ops_nz, False)[1] for b in branches]
    out_nz = [any(nzs) for nzs in zip(*branch_nzs)]
    branches_jvp = tuple(ad.jvp_jaxpr(b, ops_nz, out_nz)[0] for b in branches)
    nz_dots = [t for t in ops_dot if type(t) is not Zero]
    out = cond_p.bind(index, *ops, *nz_dots, branches=branches_jvp)
    n = len(out_nz)
    out_primals, nz_tangents = out[:n], iter(out[n:])
    out_tangents = [next(nz_tangents) if nz else Zero(tangent_aval(get_aval(p)))
                    for p, nz in zip(out_primals, out_nz)]
    return list(out_primals), out_tangents


ad.primitive_jvps[cond_p] = _cond_jvp


# --- partial evaluation --------------------------------------------------------------------------
def _merge_branch_residuals(res_avals: Sequence[Sequence[ShapedArray]]
                            ) -> tuple[list[ShapedArray], list[list[int]]]:
    """One list of residual slots for all branches: a slot is shared by
    residuals of equal type from different branches. Returns the slot avals
    and, per branch, the slot of each of its residuals."""
    slots: list[tuple[ShapedArray, int]] = []
    slot_of: dict[tuple[ShapedArray, int], int] = {}
    per_branch = []
    for avals in res_avals:
        counters: dict[ShapedArray, itertools.count[int]] = {}
        idxs = []
        for a in avals:
            key = (a, next(counters.setdefault(a, itertools.count())))
            if key not in slot_of:
                slot_of[key] = len(slots)
                slots.append(key)
            idxs.append(slot_of[key])
        per_branch.append(idxs)
    return [a for a, _ in slots], per_branch


def _join_known_outputs(jaxpr: ClosedJaxpr, num_known_out: int, slot_avals: Sequence[ShapedArray],
                        slots: Sequence[int]) -> ClosedJaxpr:
    """A known branch ``ins -> [*known_outs, *own_residuals]`` made to return
    ``[*known_outs, *all_slots]`` (zeros in the slots of other branches)."""
    dbg = jaxpr.jaxpr.debug_info
    assert dbg is not None
    res_names = dbg.result_paths[num_known_out:]
    slot_names: list[str | None] = [None] * len(slot_avals)
    for s, name in zip(slots, res_names):
        slot_names[s] = name

    def joined(*args: Any) -> list[Any]:
        outs = eval_closed(jaxpr, *args)
        known, res = outs[:num_known_out], outs[num_known_out:]
        filled: list[Any] = [None] * len(slot_avals)
        for s, r in zip(slots, res):
            filled[s] = r
        return known + [zeros_like_aval(a) if r is None else r
                        for a, r in zip(slot_avals, filled)]

    new_dbg = dbg.replace(result_paths=tuple(dbg.result_paths[:num_known_out])
                          + tuple(slot_names))
    return retrace(joined, jaxpr.in_avals, new_dbg)


def _join_unknown_inputs(jaxpr: ClosedJaxpr, slot_avals: Sequence[ShapedArray],
                         slots: Sequence[int]) -> ClosedJaxpr:
    """An unknown branch ``[*own_residuals, *ins] -> outs`` made to take
    ``[*all_slots, *ins]`` (ignoring the slots of other branches)."""
    inner = jaxpr.jaxpr
    dbg = inner.debug_info
    assert dbg is not None
    n_res = len(slots)
    slot_vars: list[Var] = [Var(a) for a in slot_avals]
    slot_names: list[str | None] = [None] * len(slot_avals)
    for s, v, name in zip(slots, inner.invars[:n_res], dbg.arg_names[:n_res]):
        slot_vars[s] = v
        slot_names[s] = name
    new = inner.replace(invars=slot_vars + list(inner.invars[n_res:]),
                        debug_info=dbg.replace(arg_names=tuple(slot_names)
                                               + tuple(dbg.arg_names[n_res:])))
    return ClosedJaxpr(new, jaxpr.consts)


def _cond_partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer,
                       branches: Sequence[ClosedJaxpr]) -> list[Any]:
    params = {"branches": tuple(branches)}
    if not tracers[0].is_known():
        return list(trace.default_process_primitive(cond_p, list(tracers), params))
    ops_uk = [not t.is_known() for t in tracers[1:]]
    if not any(ops_uk):
        return list(cond_p.bind(*[t.pval.const for t in tracers], **params))
    branch_uks = [pe.partial_eval_jaxpr_nounits(b, ops_uk, instantiate=False)[2]
                  for b in branches]
    out_uks = [any(uks) for uks in zip(*branch_uks)]
    splits = [pe.partial_eval_jaxpr_nounits(b, ops_uk, instantiate=out_uks) for b in branches]
    slot_avals, slots = _merge_branch_residuals([s[3] for s in splits])
    num_known_out = len(out_uks) - sum(out_uks)
    known = tuple(_join_known_outputs(s[0], num_known_out, slot_avals, idx)
                  for s, idx in zip(splits, slots))
    unknown = tuple(_join_unknown_inputs(s[1], slot_avals, idx)
                    for s, idx in zip(splits, slots))
    in_consts = [t.pval.const for t in tracers if t.is_known()]
    known_out = cond_p.bind(*in_consts, branches=known)
    known_vals, residuals = known_out[:num_known_out], known_out[num_known_out:]
    index_tracer = trace.instantiate_const(tracers[0])
    res_tracers = [trace.new_instantiated_const(r) for r in residuals]
    op_tracers = [trace.instantiate_const(t) for t, uk in zip(tracers[1:], ops_uk) if uk]
    out_tracers = trace.emit_recipe(cond_p, [index_tracer, *res_tracers, *op_tracers],
                                    {"branches": unknown}, unknown[0].out_avals)
    known_iter, unknown_iter = iter(known_vals), iter(out_tracers)
    return [next(unknown_iter) if uk else next(known_iter) for uk in out_uks]


pe.custom_partial_eval_rules[cond_p] = _cond_partial_eval


# --- transpose -------------------------------------------------------------------------------------
def _cond_transpose(cts: Sequence[Any], index: Any, *ops: Any,
                    branches: Sequence[ClosedJaxpr]) -> list[Any]:
    if ad.is_undefined_primal(index):
        raise ValueError("cond: the branch index is not a linear input")
    linear = [ad.is_undefined_primal(x) for x in ops]
    branches_t = tuple(ad.transpose_jaxpr(b, linear) for b in branches)
    res = [x for x, lin in zip(ops, linear) if not lin]
    cts_in = [instantiate_zeros(ct) for ct in cts]
    out = iter(cond_p.bind(index, *res, *cts_in, branches=branches_t))
    return [None] + [next(out) if lin else None for lin in linear]


ad.primitive_transposes[cond_p] = _cond_transpose


# --- batching ------------------------------------------------------------------------------------
def _bcast_to(pred: Any, shape: tuple[int, ...]) -> Any:
    if get_aval(pred).shape == shape:
        return pred
    return structural.broadcast_in_dim(pred, shape, (0,))


def _uses_axis(branches: Sequence[ClosedJaxpr], axis_data: batching.AxisData) -> bool:
    return uses_named_axis(joined_effects(branches), axis_data.name)


def _cond_batch(axis_data: batching.AxisData, args: Sequence[Any],
                dims: Sequence[int | None], *, branches: Sequence[ClosedJaxpr]
                ) -> tuple[list[Any], list[int | None]]:
    index, *ops = args
    index_dim, *op_dims = dims
    if index_dim is not None:
        return _cond_batch_with_batched_index(axis_data, args, dims, branches)
    if all(d is None for d in op_dims) and not _uses_axis(branches, axis_data):
        outs = cond_p.bind(index, *ops, branches=tuple(branches))
        return list(outs), [None] * len(outs)
    ops_bat = [d is not None for d in op_dims]
    ops = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(ops, op_dims)]
    out_bats = [batching.batch_jaxpr(b, axis_data, ops_bat, False)[1] for b in branches]
    out_bat = [any(bs) for bs in zip(*out_bats)]
    branches_b = tuple(batching.batch_jaxpr(b, axis_data, ops_bat, out_bat)[0]
                       for b in branches)
    outs = cond_p.bind(index, *ops, branches=branches_b)
    return list(outs), [0 if b else None for b in out_bat]


def _cond_batch_with_batched_index(axis_data: batching.AxisData, args: Sequence[Any],
                                   dims: Sequence[int | None],
                                   branches: Sequence[ClosedJaxpr]
                                   ) -> tuple[list[Any], list[int | None]]:
    """A batched predicate: every branch runs on every element and ``select_n``
    picks the results (as in JAX; assumes branches have no side effects)."""
    size = axis_data.size
    index, *ops = [batching.bdim_at_front(x, d, size) for x, d in zip(args, dims)]
    n_out = len(branches[0].out_avals)
    branches_b = [batching.batch_jaxpr(b, axis_data, [True] * len(ops), [True] * n_out)[0]
                  for b in branches]
    branch_outs = []
    for i, jaxpr in enumerate(branches_b):
        # Operands of the branches not taken are cut off from differentiation,
        # so that reverse mode does not see their (discarded) contributions.
        taken = elementwise.eq(index, np.array(i, np.int32))
        ops_i = [elementwise.select(_bcast_to(taken, get_aval(x).shape), x,
                                    convert.stop_gradient(x)) for x in ops]
        branch_outs.append(eval_closed(jaxpr, *ops_i))
    outs = [elementwise.select_n(_bcast_to(index, get_aval(cases[0]).shape), *cases)
            for cases in zip(*branch_outs)]
    return outs, [0] * len(outs)


batching.fancy_primitive_batchers[cond_p] = _cond_batch


# --- DCE ------------------------------------------------------------------------------------------
def _cond_dce(used_outputs: Sequence[bool], eqn: JaxprEqn
              ) -> tuple[list[bool], JaxprEqn | None]:
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    branches = eqn.params["branches"]
    used_per_branch = [pe.dce_closed_jaxpr(b, used_outputs)[1] for b in branches]
    used_ops = [any(us) for us in zip(*used_per_branch)]
    new_branches = tuple(pe.dce_closed_jaxpr(b, used_outputs, instantiate=used_ops)[0]
                         for b in branches)
    new_params = dict(eqn.params, branches=new_branches)
    new_eqn = eqn.replace(
        invars=[eqn.invars[0]] + [v for v, u in zip(eqn.invars[1:], used_ops) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=new_params, effects=joined_effects(new_branches))
    return [True] + used_ops, new_eqn


pe.dce_rules[cond_p] = _cond_dce
