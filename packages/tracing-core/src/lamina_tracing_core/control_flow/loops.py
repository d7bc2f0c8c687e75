"""``while_loop`` and ``fori_loop``: the ``while`` primitive.

``while_p`` repeats ``carry = body(*body_consts, *carry)`` while
``cond(*cond_consts, *carry)`` (a boolean scalar) holds. Operands:
``[*cond_consts, *body_consts, *init]``.

Params (JAX 0.10's): ``cond_jaxpr``, ``body_jaxpr`` (ClosedJaxprs),
``cond_nconsts``, ``body_nconsts`` (ints).

The bodies are traced with ``traced_for='while_cond'`` / ``'while_body'`` and
the user functions' parameter names. Rules: abstract evaluation, effects,
JVP (fixpoint on the nonzero carry tangents), partial evaluation (known
carries computed by a known loop; the unknown ones by the whole loop, staged),
batching (a batched predicate runs until every element is done, selecting the
carries of the finished ones), DCE, eager evaluation. Reverse mode is not
defined: transposing a while loop raises JAX's error pointing to ``scan`` or
a ``fori_loop`` with static bounds.

``fori_loop(lower, upper, body, init)`` is a ``scan`` when the bounds are
known at trace time (so it is reverse-differentiable) and a ``while`` loop
otherwise, as in JAX.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util as tu
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_tracing_core import ad, api, batching, core, dtypes
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core import names as _names
from lamina_tracing_core.ad_util import Zero, instantiate_zeros, tangent_aval
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import (
    add_unused_invars,
    keep_passed_through_carries,
    body_debug_info,
    carry_type_error,
    eval_closed,
    joined_effects,
    long_type_str,
    permute_invars,
    retrace,
    split_list,
    trace_body,
    typematch,
)
from lamina_tracing_core.control_flow.scan import scan_with_debug_info
from lamina_tracing_core.effects import Effects, has_side_effects, uses_named_axis
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprEqn
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.lax import convert, elementwise, reductions, structural

__all__ = ["fori_loop", "while_loop", "while_p"]

while_p = Primitive("while", multiple_results=True)
while_p.higher_order = True

WHILE_TRANSPOSE_ERROR = (
    "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
    "dynamic start/stop values. Try using lax.scan, or using fori_loop with static "
    "start/stop.")


# --- the user API --------------------------------------------------------------------
def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
               init_val: Any) -> Any:
    """``val = init_val; while cond_fun(val): val = body_fun(val); return val``.

    ``cond_fun`` must return a boolean scalar; ``body_fun`` must return a value
    of the structure and types of ``init_val``. Differentiable in forward mode
    only."""
    return _while_loop(cond_fun, body_fun, init_val, None)


def _while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any],
                init_val: Any, body_dbg: TracingDebugInfo | None) -> Any:
    if not (callable(body_fun) and callable(cond_fun)):
        raise TypeError("lax.while_loop: body_fun and cond_fun arguments should be callable.")
    cond_dbg = body_debug_info("while_cond", cond_fun, (init_val,))
    if body_dbg is None:
        body_dbg = body_debug_info("while_body", body_fun, (init_val,))
    init_flat, carry_tree = tu.tree_flatten(init_val)
    in_tree = tu.tree_structure((init_val,))
    init_avals = [get_aval(x) for x in init_flat]

    def trace(avals: list[ShapedArray]) -> tuple[Any, Any]:
        cond_t = trace_body(cond_fun, in_tree, avals, cond_dbg)
        if (not tu.treedef_is_strict_leaf(cond_t.out_tree) or len(cond_t.out_avals) != 1
                or cond_t.out_avals[0].shape != () or cond_t.out_avals[0].dtype != np.bool_):
            raise TypeError("cond_fun must return a boolean scalar, but got output type(s) "
                            f"{cond_t.out_avals}.")
        return cond_t, trace_body(body_fun, in_tree, avals, body_dbg)

    cond_t, body_t = trace(init_avals)
    if len(body_t.out_avals) == len(init_avals):
        promoted, changed = _promote_weak_inits(init_flat, init_avals, body_t.out_avals)
        if changed:
            init_flat = promoted
            init_avals = [get_aval(x) for x in init_flat]
            cond_t, body_t = trace(init_avals)
    err = carry_type_error("while_loop body", body_fun, carry_tree, init_avals,
                           body_t.out_tree, body_t.out_avals)
    if err is not None:
        raise err
    outs = while_p.bind(*cond_t.consts, *body_t.consts, *init_flat,
                        cond_jaxpr=cond_t.jaxpr, body_jaxpr=body_t.jaxpr,
                        cond_nconsts=cond_t.num_consts, body_nconsts=body_t.num_consts)
    return tu.tree_unflatten(carry_tree, outs)


def _promote_weak_inits(init_flat: list[Any], init_avals: Sequence[ShapedArray],
                        out_avals: Sequence[ShapedArray]) -> tuple[list[Any], bool]:
    out, changed = [], False
    for x, a, b in zip(init_flat, init_avals, out_avals):
        if a.weak_type and not typematch(a, b) and a.shape == b.shape:
            dtype, _ = dtypes.promote_types_weak((a.dtype, a.weak_type), (b.dtype, b.weak_type))
            out.append(convert.convert_element_type(x, dtype))
            changed = True
        else:
            out.append(x)
    return out, changed


def _fori_cond_fun(loop_carry: tuple[Any, Any, Any]) -> Any:
    i, upper, _ = loop_carry
    return elementwise.lt(i, upper)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any,
              *, unroll: int | bool | None = None) -> Any:
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``.

    With bounds known at trace time this is a ``scan`` (reverse-mode
    differentiable, ``unroll`` allowed); otherwise a ``while_loop``."""
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    dtype = _fori_index_dtype(lower, upper)
    body_dbg = body_debug_info("fori_loop", body_fun, (0, init_val))
    bounds = _static_bounds(lower, upper)
    if bounds is not None:
        lower_, upper_ = bounds
        length = max(upper_ - lower_, 0)

        def scanned(loop_carry: tuple[Any, Any], _: Any) -> tuple[tuple[Any, Any], None]:
            i, x = loop_carry
            return (i + 1, body_fun(i, x)), None

        start = np.array(lower_, dtype) if not _is_weak_python_int(lower) else lower_
        (_, result), _ = scan_with_debug_info(scanned, (start, init_val), None, length, False,
                                              False if unroll is None else unroll,
                                              body_dbg.replace(result_paths=None))
        return result
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    lower = convert.convert_element_type(lower, dtype)
    upper = convert.convert_element_type(upper, dtype)

    def while_body(loop_carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        i, upper_, x = loop_carry
        return elementwise.add(i, np.array(1, dtype)), upper_, body_fun(i, x)

    while_dbg = body_dbg.replace(arg_names=(body_dbg.arg_names[0], None)
                                 + tuple(body_dbg.arg_names[1:]))
    _, _, result = _while_loop(_fori_cond_fun, while_body, (lower, upper, init_val), while_dbg)
    return result


def _is_weak_python_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _fori_index_dtype(lower: Any, upper: Any) -> np.dtype[Any]:
    lo, hi = get_aval(lower), get_aval(upper)
    if lo.dtype == hi.dtype:
        return lo.dtype
    if lo.dtype.kind == "i" and hi.dtype.kind == "i":
        if lo.weak_type and not hi.weak_type:
            return hi.dtype
        if hi.weak_type and not lo.weak_type:
            return lo.dtype
    raise TypeError("lower and upper arguments to fori_loop must have equal types, got "
                    f"{lo.dtype.name} and {hi.dtype.name}")


def _static_bounds(lower: Any, upper: Any) -> tuple[int, int] | None:
    try:
        lo = core.concrete_or_error(None, lower)
        hi = core.concrete_or_error(None, upper)
        return int(lo), int(hi)
    except (TypeError, core.ConcretizationTypeError):
        return None


# --- abstract evaluation, effects, impl --------------------------------------------------------
def _while_abstract_eval(*avals: ShapedArray, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
                         cond_nconsts: int, body_nconsts: int) -> list[ShapedArray]:
    cconsts, bconsts, carry = split_list(avals, [cond_nconsts, body_nconsts])
    for what, jaxpr, got in (("cond_jaxpr", cond_jaxpr, cconsts + carry),
                             ("body_jaxpr", body_jaxpr, bconsts + carry)):
        want = jaxpr.in_avals
        if len(want) != len(got) or not all(map(typematch, got, want)):
            raise TypeError(f"while: {what} takes operands of types "
                            f"{[long_type_str(a) for a in want]} but got "
                            f"{[long_type_str(a) for a in got]}")
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != np.bool_:
        raise TypeError(f"while: cond_jaxpr must return a boolean scalar, got "
                        f"{[long_type_str(a) for a in pred]}")
    outs = body_jaxpr.out_avals
    if len(outs) != len(carry) or not all(map(typematch, outs, carry)):
        raise TypeError(f"while: body_jaxpr returns {[long_type_str(a) for a in outs]} for a "
                        f"carry of types {[long_type_str(a) for a in carry]}")
    return list(outs)


def _while_effects(*, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, **_: Any) -> Effects:
    return joined_effects([cond_jaxpr, body_jaxpr])


def _while_impl(*args: Any, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
                cond_nconsts: int, body_nconsts: int) -> list[Any]:
    cconsts, bconsts, carry = split_list(args, [cond_nconsts, body_nconsts])
    while bool(np.asarray(eval_closed(cond_jaxpr, *cconsts, *carry)[0])):
        carry = eval_closed(body_jaxpr, *bconsts, *carry)
    return list(carry)


while_p.def_abstract_eval(_while_abstract_eval)
while_p.def_effects(_while_effects)
_while_compiled = api.compiled_impl_when_eager(while_p, _while_impl)


def _while_eager(*args: Any, **params: Any) -> list[Any]:
    """An eager while loop: one compiled program (or a Python loop before a
    compiler is installed)."""
    n_consts = params["cond_nconsts"] + params["body_nconsts"]
    return keep_passed_through_carries(_while_compiled(*args, **params), args[n_consts:],
                                       params["body_jaxpr"], params["body_nconsts"])


while_p.def_impl(_while_eager)


# --- JVP ------------------------------------------------------------------------------------------
def _tangent_name(name: str | None) -> str | None:
    return _names.tangent(name)


def _while_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, cond_jaxpr: ClosedJaxpr,
               body_jaxpr: ClosedJaxpr, cond_nconsts: int, body_nconsts: int
               ) -> tuple[list[Any], list[Any]]:
    nonzeros = [type(t) is not Zero for t in tangents]
    _, bconst_nz, init_nz = split_list(nonzeros, [cond_nconsts, body_nconsts])
    num_carry = len(init_nz)
    carry_nz = init_nz
    for _ in range(1 + num_carry):
        body_jvp, out_nz = ad.jvp_jaxpr(body_jaxpr, bconst_nz + carry_nz, instantiate=carry_nz)
        if out_nz == carry_nz:
            break
        carry_nz = list(map(operator.or_, carry_nz, out_nz))
    else:  # pragma: no cover
        raise AssertionError("while JVP: no fixpoint of the carry tangents")
    cconsts, bconsts, init = split_list(primals, [cond_nconsts, body_nconsts])
    _, bconst_dot, init_dot = split_list(tangents, [cond_nconsts, body_nconsts])
    bconst_dot = [t for t in bconst_dot if type(t) is not Zero]
    init_dot = [instantiate_zeros(t) if nz and type(t) is Zero else t
                for t, nz in zip(init_dot, carry_nz)]
    init_dot = [t for t, nz in zip(init_dot, carry_nz) if nz]
    # body_jvp: [bconsts, carry, bconst_dot, carry_dot] -> [carry, carry_dot]
    nb, nbd, nc = body_nconsts, len(bconst_dot), num_carry
    body_jvp = permute_invars(body_jvp, list(range(nb)) + list(range(nb + nc, nb + nc + nbd))
                              + list(range(nb, nb + nc))
                              + list(range(nb + nc + nbd, nb + nc + nbd + len(init_dot))))
    cond_dbg = cond_jaxpr.jaxpr.debug_info
    carry_names = (cond_dbg.arg_names[cond_nconsts:] if cond_dbg is not None
                   else (None,) * num_carry)
    cond_aug = add_unused_invars(
        cond_jaxpr, len(cond_jaxpr.in_avals), [get_aval(t) for t in init_dot],
        [_tangent_name(n) for n, nz in zip(carry_names, carry_nz) if nz])
    outs = while_p.bind(*cconsts, *bconsts, *bconst_dot, *init, *init_dot,
                        cond_jaxpr=cond_aug, body_jaxpr=body_jvp, cond_nconsts=cond_nconsts,
                        body_nconsts=body_nconsts + len(bconst_dot))
    carry_out, carry_dot = outs[:num_carry], iter(outs[num_carry:])
    tangents_out = [next(carry_dot) if nz else Zero(tangent_aval(get_aval(p)))
                    for p, nz in zip(carry_out, carry_nz)]
    return list(carry_out), tangents_out


ad.primitive_jvps[while_p] = _while_jvp


# --- partial evaluation ------------------------------------------------------------------------
def _known_part(jaxpr: ClosedJaxpr, unknowns: list[bool], num_known_out: int) -> ClosedJaxpr:
    """The known part of ``jaxpr`` on its known inputs, returning only its
    first ``num_known_out`` known outputs (the residuals are dropped)."""
    known, _, _, res_avals = pe.partial_eval_jaxpr_nounits(jaxpr, unknowns, instantiate=False)
    keep = [True] * num_known_out + [False] * (len(known.out_avals) - num_known_out)
    pruned, _ = pe.dce_closed_jaxpr(known, keep, instantiate=True)
    del res_avals
    return pruned


def _while_partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer,
                        cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                        body_nconsts: int) -> list[Any]:
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    unknowns = [not t.is_known() for t in tracers]
    if not any(unknowns):
        return list(while_p.bind(*[t.pval.const for t in tracers], **params))
    cconst_uk, bconst_uk, init_uk = split_list(unknowns, [cond_nconsts, body_nconsts])
    num_carry = len(init_uk)
    carry_uk = init_uk
    for _ in range(1 + num_carry):
        out_uk = pe.partial_eval_jaxpr_nounits(body_jaxpr, bconst_uk + carry_uk,
                                               instantiate=carry_uk)[2]
        if out_uk == carry_uk:
            break
        carry_uk = list(map(operator.or_, carry_uk, out_uk))
    else:  # pragma: no cover
        raise AssertionError("while partial eval: no fixpoint of the unknown carries")
    cond_uk = pe.partial_eval_jaxpr_nounits(cond_jaxpr, cconst_uk + carry_uk,
                                            instantiate=False)[2][0]
    if cond_uk or all(unknowns):
        return list(trace.default_process_primitive(while_p, list(tracers), params))
    # The known carries by a loop on the known inputs; the unknown ones by the
    # whole loop, staged (it needs the known carries of every iteration).
    num_known = num_carry - sum(carry_uk)
    cond_known = _known_part(cond_jaxpr, cconst_uk + carry_uk, 1)
    body_known = _known_part(body_jaxpr, bconst_uk + carry_uk, num_known)
    known_ins = [t.pval.const for t, uk in zip(tracers, cconst_uk + bconst_uk + carry_uk)
                 if not uk]
    known_outs = while_p.bind(*known_ins, cond_jaxpr=cond_known, body_jaxpr=body_known,
                              cond_nconsts=cond_nconsts - sum(cconst_uk),
                              body_nconsts=body_nconsts - sum(bconst_uk))
    staged = trace.default_process_primitive(while_p, list(tracers), params)
    known_iter = iter(known_outs)
    return [t if uk else next(known_iter) for t, uk in zip(staged, carry_uk)]


pe.custom_partial_eval_rules[while_p] = _while_partial_eval


def _while_transpose_error(*args: Any, **params: Any) -> list[Any]:
    raise ValueError(WHILE_TRANSPOSE_ERROR)


ad.primitive_transposes[while_p] = _while_transpose_error


# --- batching -------------------------------------------------------------------------------------
def _uses_axis(jaxprs: Sequence[ClosedJaxpr], axis_data: batching.AxisData) -> bool:
    return uses_named_axis(joined_effects(jaxprs), axis_data.name)


def _while_batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None],
                 *, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_nconsts: int,
                 body_nconsts: int) -> tuple[list[Any], list[int | None]]:
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts)
    if all(d is None for d in dims) and not _uses_axis([cond_jaxpr, body_jaxpr], axis_data):
        outs = while_p.bind(*args, **params)
        return list(outs), [None] * len(outs)
    size = axis_data.size
    batched = [d is not None for d in dims]
    cconst_b, bconst_b, init_b = split_list(batched, [cond_nconsts, body_nconsts])
    num_carry = len(init_b)
    carry_b = init_b
    for _ in range(1 + num_carry):
        out_b = batching.batch_jaxpr(body_jaxpr, axis_data, bconst_b + carry_b,
                                     instantiate=carry_b)[1]
        if out_b == carry_b:
            break
        carry_b = list(map(operator.or_, carry_b, out_b))
    else:  # pragma: no cover
        raise AssertionError("while batching: no fixpoint of the batched carries")
    pred_b = batching.batch_jaxpr(cond_jaxpr, axis_data, cconst_b + carry_b, False)[1][0]
    if pred_b:
        carry_b = [True] * num_carry
    body_b = batching.batch_jaxpr(body_jaxpr, axis_data, bconst_b + carry_b, carry_b)[0]
    cond_b = batching.batch_jaxpr(cond_jaxpr, axis_data, cconst_b + carry_b, pred_b)[0]
    cconsts, bconsts, init = split_list(args, [cond_nconsts, body_nconsts])
    cdims, bdims, idims = split_list(dims, [cond_nconsts, body_nconsts])
    cconsts = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(cconsts, cdims)]
    bconsts = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(bconsts, bdims)]
    init = [batching.bdim_at_front(x, d, size) if b else x
            for x, d, b in zip(init, idims, carry_b)]
    if not pred_b:
        outs = while_p.bind(*cconsts, *bconsts, *init, cond_jaxpr=cond_b, body_jaxpr=body_b,
                            cond_nconsts=cond_nconsts, body_nconsts=body_nconsts)
        return list(outs), [0 if b else None for b in carry_b]
    cond_any, body_sel = _select_loop(cond_b, body_b, cond_nconsts)
    outs = while_p.bind(*cconsts, *cconsts, *bconsts, *init, cond_jaxpr=cond_any,
                        body_jaxpr=body_sel, cond_nconsts=cond_nconsts,
                        body_nconsts=cond_nconsts + body_nconsts)
    return list(outs), [0] * num_carry


def _select_loop(cond_b: ClosedJaxpr, body_b: ClosedJaxpr, cond_nconsts: int
                 ) -> tuple[ClosedJaxpr, ClosedJaxpr]:
    """For a batched predicate: a cond that holds while any element's does, and
    a body that advances only the elements whose predicate holds."""

    def any_pred(*args: Any) -> list[Any]:
        pred = eval_closed(cond_b, *args)[0]
        return [reductions.reduce_or(pred, (0,))]

    def selected_body(*args: Any) -> list[Any]:
        cconsts, rest = args[:cond_nconsts], args[cond_nconsts:]
        carry = rest[len(body_b.in_avals) - len(body_b.out_avals):]
        pred = eval_closed(cond_b, *cconsts, *carry)[0]
        new = eval_closed(body_b, *rest)
        out = []
        for n, old in zip(new, carry):
            shape = get_aval(old).shape
            p = pred if len(shape) == 1 else structural.broadcast_in_dim(pred, shape, (0,))
            out.append(elementwise.select(p, n, old))
        return out

    cond_dbg = cond_b.jaxpr.debug_info
    body_dbg = body_b.jaxpr.debug_info
    assert cond_dbg is not None and body_dbg is not None
    cond_any = retrace(any_pred, cond_b.in_avals, cond_dbg)
    body_sel = retrace(selected_body, cond_b.in_avals[:cond_nconsts] + body_b.in_avals,
                       body_dbg.replace(arg_names=tuple(cond_dbg.arg_names[:cond_nconsts])
                                        + tuple(body_dbg.arg_names)))
    return cond_any, body_sel


batching.fancy_primitive_batchers[while_p] = _while_batch


# --- DCE --------------------------------------------------------------------------------------------
def _while_dce(used_outputs: Sequence[bool], eqn: JaxprEqn
               ) -> tuple[list[bool], JaxprEqn | None]:
    """Drops the carries that neither the predicate nor a used result needs."""
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    cond_jaxpr: ClosedJaxpr = eqn.params["cond_jaxpr"]
    body_jaxpr: ClosedJaxpr = eqn.params["body_jaxpr"]
    nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    num_carry = len(body_jaxpr.out_avals)
    _, cond_used = pe.dce_closed_jaxpr(cond_jaxpr, [True])
    used_carry = [bool(u) or c for u, c in zip(used_outputs, cond_used[nc:])]
    for _ in range(1 + num_carry):
        _, body_used = pe.dce_closed_jaxpr(body_jaxpr, used_carry)
        new_used = [u or b for u, b in zip(used_carry, body_used[nb:])]
        if new_used == used_carry:
            break
        used_carry = new_used
    else:  # pragma: no cover
        raise AssertionError("while DCE: no fixpoint of the used carries")
    new_body, body_used = pe.dce_closed_jaxpr(body_jaxpr, used_carry,
                                              instantiate=[False] * nb + used_carry)
    new_cond, cond_used = pe.dce_closed_jaxpr(cond_jaxpr, [True],
                                              instantiate=[False] * nc + used_carry)
    used_inputs = cond_used[:nc] + body_used[:nb] + used_carry
    new_params = dict(eqn.params, cond_jaxpr=new_cond, body_jaxpr=new_body,
                      cond_nconsts=sum(cond_used[:nc]), body_nconsts=sum(body_used[:nb]))
    new_eqn = eqn.replace(invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
                          outvars=[v for v, u in zip(eqn.outvars, used_carry) if u],
                          params=new_params, effects=joined_effects([new_cond, new_body]))
    return used_inputs, new_eqn


pe.dce_rules[while_p] = _while_dce
