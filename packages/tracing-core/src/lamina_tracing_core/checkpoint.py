"""``checkpoint`` / ``remat``: recompute instead of saving for reverse mode.

``checkpoint(fun)`` traces ``fun`` to a jaxpr and applies it through the
``checkpoint`` primitive (``remat_p``; JAX calls it ``remat2`` and prints it
as ``checkpoint``): ``outs = checkpoint[jaxpr, prevent_cse, differentiated,
policy] *consts *args``. Params (JAX 0.10's): ``jaxpr`` (an open ``Jaxpr``
without constvars; the values ``fun`` closes over are leading operands),
``prevent_cse`` (bool), ``differentiated`` (True once it computes part of a
derivative), ``policy`` (``None`` = save nothing, or a policy below).

What it changes is partial evaluation (``linearize``/``vjp``/``grad``): the
primal equations inside a checkpoint are computed now, but only the outputs of
equations the *policy* allows are saved as residuals for the backward pass;
the other equations are staged again into the backward ``checkpoint``
equation and recomputed there. A policy is ``policy(prim, *avals, **params)
-> bool`` ("may this equation's output be saved?"); ``checkpoint_policies``
has ``nothing_saveable``, ``everything_saveable``, ``dots_saveable`` (=
``checkpoint_dots``) and ``dots_with_no_batch_dims_saveable`` (=
``checkpoint_dots_with_no_batch_dims``).

Rules: abstract evaluation, effects, JVP, partial evaluation (the policy),
transpose (the transposed jaxpr stays inside a checkpoint, so the
recomputation happens in the backward pass), batching, DCE, eager evaluation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import ad, batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core import names as _names
from lamina_tracing_core import source_info as _si
from lamina_tracing_core.ad_util import Zero, instantiate_zeros, tangent_aval
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import (
    long_type_str,
    retrace,
    split_list,
    typematch,
    wrap_src,
)
from lamina_tracing_core.effects import Effects, has_side_effects, uses_named_axis
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprDebugInfo, JaxprEqn, Literal
from lamina_tracing_core.primitives import Primitive

__all__ = ["checkpoint", "checkpoint_policies", "remat", "remat_p"]

remat_p = Primitive("checkpoint", multiple_results=True)
remat_p.higher_order = True


# --- policies -----------------------------------------------------------------------------
class Policy:
    """A named saveability rule: ``policy(prim, *avals, **params) -> bool``."""

    __slots__ = ("name", "rule")

    def __init__(self, name: str, rule: Callable[..., bool]):
        self.name = name
        self.rule = rule

    def __call__(self, prim: Primitive, *avals: ShapedArray, **params: Any) -> bool:
        return bool(self.rule(prim, *avals, **params))

    def __repr__(self) -> str:
        return self.name


def _is_dot(prim: Primitive) -> bool:
    return prim.name == "dot_general"


def _no_batch_dims(params: dict[str, Any]) -> bool:
    dnums = params.get("dimension_numbers")
    if dnums is None:
        return True
    (_, _), (lhs_batch, rhs_batch) = dnums
    return not lhs_batch and not rhs_batch


class _CheckpointPolicies:
    """The built-in policies (``lx.checkpoint_policies``)."""

    nothing_saveable = Policy("nothing_saveable", lambda *_, **__: False)
    everything_saveable = Policy("everything_saveable", lambda *_, **__: True)
    dots_saveable = Policy("dots_saveable", lambda prim, *_, **__: _is_dot(prim))
    checkpoint_dots = dots_saveable
    dots_with_no_batch_dims_saveable = Policy(
        "dots_with_no_batch_dims_saveable",
        lambda prim, *_, **params: _is_dot(prim) and _no_batch_dims(params))
    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


checkpoint_policies = _CheckpointPolicies()


# --- the user API --------------------------------------------------------------------
class _Unset:
    """``concrete``'s default: JAX 0.10 removed the option but keeps its name."""


def checkpoint(fun: Callable[..., Any], *, prevent_cse: bool = True,
               policy: Callable[..., bool] | None = None,
               static_argnums: int | tuple[int, ...] = (),
               static_argnames: str | Sequence[str] = (),
               concrete: Any = _Unset) -> Callable[..., Any]:
    """``fun`` made to recompute its intermediates in the backward pass instead
    of saving them (except those ``policy`` allows). ``static_argnums`` /
    ``static_argnames`` name arguments that are not arrays (they are baked
    into the trace). ``prevent_cse`` keeps the compiler from merging the
    recomputation with the forward computation."""
    if concrete is not _Unset:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was deprecated in JAX v0.8.2, and "
            "removed in JAX v0.10.0. In its place please use `static_argnums`; for details "
            "refer to https://docs.jax.dev/en/latest/jep/11830-new-remat-checkpoint.html.")
    api_util.check_callable(fun)
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_names = ((static_argnames,) if isinstance(static_argnames, str)
                    else tuple(static_argnames))

    @functools.wraps(fun)
    def fun_remat(*args: Any, **kwargs: Any) -> Any:
        n = len(args)
        static_pos = {i % n for i in static} if n else set()
        dbg = api_util.debug_info("checkpoint / remat", fun, args, kwargs,
                                  static_argnums=tuple(sorted(static_pos)),
                                  static_argnames=static_names)
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_kw = {k: v for k, v in kwargs.items() if k in static_names}
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_names}

        def call(*dyn: Any, **kw: Any) -> Any:
            it = iter(dyn)
            full = [args[i] if i in static_pos else next(it) for i in range(n)]
            return fun(*full, **kw, **static_kw)

        kwargs = dyn_kwargs
        args_flat, in_tree = tu.tree_flatten((dyn_args, kwargs))
        wrapped, _ = api_util.result_paths(wrap_init(call, debug_info=dbg))
        flat_fun, out_tree = api_util.flatten_fun(wrapped, in_tree)
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, [get_aval(x) for x in args_flat])
        jaxpr = pe.convert_constvars_jaxpr(jaxpr)
        outs = remat_p.bind(*consts, *args_flat, jaxpr=jaxpr, prevent_cse=bool(prevent_cse),
                            differentiated=False, policy=policy)
        return tu.tree_unflatten(out_tree(), outs)

    return fun_remat


remat = checkpoint


# --- abstract evaluation, effects, impl ----------------------------------------------------
def _remat_abstract_eval(*avals: ShapedArray, jaxpr: Jaxpr, prevent_cse: bool,
                         differentiated: bool, policy: Any) -> list[ShapedArray]:
    want = [v.aval for v in jaxpr.invars]
    if len(want) != len(avals) or not all(map(typematch, avals, want)):
        raise TypeError(f"checkpoint: the jaxpr takes {[long_type_str(a) for a in want]} but "
                        f"got {[long_type_str(a) for a in avals]}")
    return [v.aval for v in jaxpr.outvars]


def _remat_effects(*, jaxpr: Jaxpr, **_: Any) -> Effects:
    return jaxpr.effects


def _remat_impl(*args: Any, jaxpr: Jaxpr, prevent_cse: bool, differentiated: bool,
                policy: Any) -> list[Any]:
    return core.eval_jaxpr(jaxpr, (), *args)


remat_p.def_abstract_eval(_remat_abstract_eval)
remat_p.def_effects(_remat_effects)
remat_p.def_impl(_remat_impl)


def _open(closed: ClosedJaxpr) -> tuple[Jaxpr, list[Any]]:
    """A closed jaxpr as remat's param (an open jaxpr) and its leading operands."""
    return pe.convert_constvars_jaxpr(closed.jaxpr), list(closed.consts)


# --- JVP -----------------------------------------------------------------------------------
def _remat_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, jaxpr: Jaxpr,
               prevent_cse: bool, differentiated: bool, policy: Any
               ) -> tuple[list[Any], list[Any]]:
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_closed, out_nz = ad.jvp_jaxpr(ClosedJaxpr(jaxpr, ()), nonzeros, False)
    jvp_jaxpr, consts = _open(jvp_closed)
    nz_tangents = [t for t in tangents if type(t) is not Zero]
    outs = remat_p.bind(*consts, *primals, *nz_tangents, jaxpr=jvp_jaxpr,
                        prevent_cse=prevent_cse, differentiated=differentiated, policy=policy)
    return ad.split_jvp_outputs(outs, out_nz)


ad.primitive_jvps[remat_p] = _remat_jvp


# --- partial evaluation: the policy ---------------------------------------------------------
def _saveable(policy: Callable[..., bool] | None, eqn: JaxprEqn) -> bool:
    if policy is None:
        return False
    return bool(policy(eqn.primitive, *[a.aval for a in eqn.invars], **eqn.params))


def _eval_with_policy(jaxpr: Jaxpr, policy: Callable[..., bool] | None,
                      in_known: Sequence[bool], *args: Any) -> list[Any]:
    """Evaluates ``jaxpr`` under a partial-evaluation trace (``args``: known
    values or unknown tracers). Equations on known values are computed now;
    those the policy does not allow to save are also staged again (fed by the
    staged versions of their inputs), so that the staged equations that need
    their outputs recompute them instead of reading a residual."""
    trace: pe.JaxprTrace | None = next(
        (a._trace for a, k in zip(args, in_known) if not k), None)
    assert trace is not None
    known: dict[Any, Any] = {}
    staged: dict[Any, Any] = {}
    for v, a, k in zip(jaxpr.invars, args, in_known):
        (known if k else staged)[v] = a

    def read_known(a: Any) -> Any:
        return a.val if type(a) is Literal else known[a]

    def read_staged(a: Any) -> Any:
        if type(a) is Literal:
            return a.val
        return staged[a] if a in staged else known[a]

    def is_known(a: Any) -> bool:
        return type(a) is Literal or a in known

    def read_prefer_known(a: Any) -> Any:
        return read_known(a) if is_known(a) else staged[a]

    # Every equation made here (computed now, staged again or split) keeps the
    # user line and name stack of the equation it comes from.
    base_stack = _si.current_name_stack()
    saved_frame = _si._state.frame_override
    try:
        for eqn in jaxpr.eqns:
            info = eqn.source_info
            if info.frame is not None:
                _si._state.frame_override = info.frame
            if info.name_stack.stack:
                _si._state.name_stack = _si.NameStack(base_stack.stack + info.name_stack.stack)
            prim = eqn.primitive
            subfuns, params = prim.get_bind_params(eqn.params)
            if all(is_known(a) for a in eqn.invars):
                out = prim.bind(*subfuns, *[read_known(a) for a in eqn.invars], **params)
                outs = list(out) if prim.multiple_results else [out]
                known.update(zip(eqn.outvars, outs))
                if not _saveable(policy, eqn):
                    ins = [trace.full_raise(read_staged(a)) for a in eqn.invars]
                    again = trace.default_process_primitive(prim, ins, eqn.params)
                    staged.update(zip(eqn.outvars,
                                      again if prim.multiple_results else [again]))
            else:
                # Higher-order equations split themselves (their rules see
                # which inputs are known); first-order ones read the
                # recomputed versions.
                read: Callable[[Any], Any] = (read_prefer_known if prim.higher_order
                                              else read_staged)
                out = prim.bind(*subfuns, *[read(a) for a in eqn.invars], **params)
                for v, o in zip(eqn.outvars, list(out) if prim.multiple_results else [out]):
                    if isinstance(o, pe.JaxprTracer) and o._trace is trace and not o.is_known():
                        staged[v] = o
                    else:
                        known[v] = pe.lower_known(o)
            _si._state.name_stack = base_stack
    finally:
        _si._state.frame_override = saved_frame
        _si._state.name_stack = base_stack
    return [read_known(a) if is_known(a) else staged[a] for a in jaxpr.outvars]


def _residual_name(res: Any, tracers: Sequence[pe.JaxprTracer],
                   arg_names: Sequence[str | None]) -> str | None:
    """``residual(x)`` for a residual that is the known input ``x``, else None."""
    for t, name in zip(tracers, arg_names):
        if t.is_known() and t.pval.const is res:
            return _names.residual(name)
    return None


def _remat_partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer, jaxpr: Jaxpr,
                        prevent_cse: bool, differentiated: bool, policy: Any) -> list[Any]:
    params = dict(jaxpr=jaxpr, prevent_cse=prevent_cse, differentiated=differentiated,
                  policy=policy)
    in_known = [t.is_known() for t in tracers]
    if all(in_known):
        return list(remat_p.bind(*[t.pval.const for t in tracers], **params))
    pvals = [t.pval for t in tracers]
    fun = wrap_init(functools.partial(_eval_with_policy, jaxpr, policy, in_known))
    staged_jaxpr, out_pvals, residuals = pe.trace_to_jaxpr_nounits(fun, pvals,
                                                                   instantiate=False)
    staged_jaxpr = pe.convert_constvars_jaxpr(staged_jaxpr)
    out_known = [p.is_known() for p in out_pvals]
    dbg = jaxpr.debug_info
    if dbg is not None:
        staged_jaxpr = staged_jaxpr.replace(debug_info=JaxprDebugInfo(
            dbg.traced_for, dbg.func_src_info,
            tuple(_residual_name(r, tracers, dbg.arg_names) for r in residuals)
            + tuple(n for n, k in zip(dbg.arg_names, in_known) if not k),
            tuple(p for p, k in zip(dbg.result_paths, out_known) if not k)))
    core.maybe_validate(staged_jaxpr)
    in_tracers = ([trace.new_instantiated_const(r) for r in residuals]
                  + [t for t in tracers if not t.is_known()])
    staged_params = dict(params, jaxpr=staged_jaxpr, differentiated=True)
    out_tracers = trace.emit_recipe(remat_p, in_tracers, staged_params,
                                    [v.aval for v in staged_jaxpr.outvars])
    staged_iter = iter(out_tracers)
    return [p.get_known() if k else next(staged_iter) for p, k in zip(out_pvals, out_known)]


pe.custom_partial_eval_rules[remat_p] = _remat_partial_eval


# --- transpose --------------------------------------------------------------------------------
def _transpose_remat_jaxpr(jaxpr: Jaxpr, linear: Sequence[bool], ct_nz: Sequence[bool]
                           ) -> ClosedJaxpr:
    """``[*non_linear_inputs, *nonzero_cotangents] -> cotangents of the linear
    inputs``: the forward (non-linear) part is recomputed inside."""
    in_avals = [v.aval for v in jaxpr.invars]
    out_avals = [v.aval for v in jaxpr.outvars]
    res_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    ct_avals = [tangent_aval(a) for a, nz in zip(out_avals, ct_nz) if nz]

    def transposed(*args: Any) -> list[Any]:
        res, cts = split_list(args, [len(res_avals)])
        res_iter, ct_iter = iter(res), iter(cts)
        primals = [ad.UndefinedPrimal(a) if lin else next(res_iter)
                   for a, lin in zip(in_avals, linear)]
        cts_full = [next(ct_iter) if nz else Zero(tangent_aval(a))
                    for a, nz in zip(out_avals, ct_nz)]
        arg_cts = ad.backward_pass(jaxpr, (), primals, cts_full)
        return [instantiate_zeros(ct) if type(ct) is not Zero else
                instantiate_zeros(Zero(tangent_aval(a)))
                for ct, a, lin in zip(arg_cts, in_avals, linear) if lin]

    dbg = jaxpr.debug_info
    names = dbg.arg_names if dbg is not None else (None,) * len(in_avals)
    paths = dbg.result_paths if dbg is not None else (None,) * len(out_avals)

    def ct_name(n: str | None) -> str | None:
        return _names.cotangent(n)

    new_dbg = JaxprDebugInfo(
        dbg.traced_for if dbg is not None else "checkpoint / remat",
        wrap_src(dbg.func_src_info if dbg is not None else None, "transpose"),
        tuple(n for n, lin in zip(names, linear) if not lin)
        + tuple(ct_name(p) for p, nz in zip(paths, ct_nz) if nz),
        tuple(ct_name(n) for n, lin in zip(names, linear) if lin))
    return retrace(transposed, res_avals + ct_avals, new_dbg)


def _remat_transpose(cts: Sequence[Any], *args: Any, jaxpr: Jaxpr, prevent_cse: bool,
                     differentiated: bool, policy: Any) -> list[Any]:
    linear = [ad.is_undefined_primal(x) for x in args]
    ct_nz = [type(ct) is not Zero for ct in cts]
    closed_t = _transpose_remat_jaxpr(jaxpr, linear, ct_nz)
    jaxpr_t, consts = _open(closed_t)
    res = [x for x, lin in zip(args, linear) if not lin]
    nz_cts = [ct for ct in cts if type(ct) is not Zero]
    outs = iter(remat_p.bind(*consts, *res, *nz_cts, jaxpr=jaxpr_t, prevent_cse=prevent_cse,
                             differentiated=True, policy=policy))
    return [next(outs) if lin else None for lin in linear]


ad.primitive_transposes[remat_p] = _remat_transpose


# --- batching ------------------------------------------------------------------------------
def _remat_batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None],
                 *, jaxpr: Jaxpr, prevent_cse: bool, differentiated: bool, policy: Any
                 ) -> tuple[list[Any], list[int | None]]:
    params = dict(prevent_cse=prevent_cse, differentiated=differentiated, policy=policy)
    uses_axis = uses_named_axis(jaxpr.effects, axis_data.name)
    if all(d is None for d in dims) and not uses_axis:
        outs = remat_p.bind(*args, jaxpr=jaxpr, **params)
        return list(outs), [None] * len(outs)
    in_batched = [d is not None for d in dims]
    moved = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, dims)]
    closed_b, out_batched = batching.batch_jaxpr(ClosedJaxpr(jaxpr, ()), axis_data, in_batched,
                                                 False)
    jaxpr_b, consts = _open(closed_b)
    outs = remat_p.bind(*consts, *moved, jaxpr=jaxpr_b, **params)
    return list(outs), [0 if b else None for b in out_batched]


batching.fancy_primitive_batchers[remat_p] = _remat_batch


# --- DCE -------------------------------------------------------------------------------------
def _remat_dce(used_outputs: Sequence[bool], eqn: JaxprEqn
               ) -> tuple[list[bool], JaxprEqn | None]:
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    new_jaxpr, used_inputs = pe.dce_jaxpr(eqn.params["jaxpr"], used_outputs)
    new_eqn = eqn.replace(invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
                          outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
                          params=dict(eqn.params, jaxpr=new_jaxpr), effects=new_jaxpr.effects)
    return used_inputs, new_eqn


pe.dce_rules[remat_p] = _remat_dce
