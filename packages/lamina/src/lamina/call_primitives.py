"""Call primitives (JAX's ``CallPrimitive``, ``call_p``, ``closed_call_p``):
a primitive that applies a function to its operands as one equation.

``prim.bind(fun, *args, **params)`` applies the ``WrappedFun`` ``fun`` to
``args``. Eagerly (no transformation active for ``args``) that is
``call_impl``: ``fun`` runs as plain Python. Under a transformation ``fun``
is traced once to a jaxpr and the primitive's equation holds it in its
``call_jaxpr`` param, an open ``Jaxpr`` for a ``CallPrimitive``, a
``ClosedJaxpr`` for a ``ClosedCallPrimitive`` (values ``fun`` closes over
become leading operands). Binding with ``call_jaxpr=`` in the params (as a
jaxpr's evaluation re-binds its equations) applies that jaxpr.

Every call primitive gets its rules when made, written once here over
tracing-core's jaxpr transformations: JVP, transposition, batching, partial
evaluation, DCE (``dce_jaxpr_call_rule`` / ``dce_jaxpr_closed_call_rule``)
and lowering (the body becomes a private function named after the ``name``
param, else the primitive, and is called). The other params are carried
unchanged through every transformation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_linear_util.linear_util import WrappedFun
from lamina_mlir_lowering.lowering import make_call_rule
from lamina_mlir_lowering.rules import register_lowering
from lamina_tracing_core import ad, batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero, instantiate_zeros
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.primitives import Primitive

from lamina.interpreters.partial_eval import dce_jaxpr_call_rule, dce_jaxpr_closed_call_rule

__all__ = ["CallPrimitive", "ClosedCallPrimitive", "call_impl", "call_p", "closed_call_p"]


def call_impl(f: WrappedFun, *args: Any, **params: Any) -> Any:
    """Applies ``f`` to ``args``: the eager meaning of every call primitive
    (``params`` parameterize the primitive, not the function)."""
    del params
    return f.call_wrapped(*args)


class CallPrimitive(Primitive):
    """A primitive applying a function (see the module docstring); its
    equations hold the body as an open ``Jaxpr`` in ``call_jaxpr``."""

    multiple_results = True
    higher_order = True
    call_primitive = True
    #: whether ``call_jaxpr`` holds a ``ClosedJaxpr`` (else an open ``Jaxpr``)
    closed_body = False

    def __init__(self, name: str):
        super().__init__(name, multiple_results=True)
        _register_rules(self)

    def bind(self, *args: Any, **params: Any) -> Any:
        if "call_jaxpr" in params:
            return super().bind(*args, **params)
        if not args or not isinstance(args[0], WrappedFun):
            got = type(args[0]).__name__ if args else "no arguments"
            raise TypeError(f"{self.name}.bind: expected a WrappedFun as the first argument "
                            f"(or a call_jaxpr param), got {got}")
        fun, *vals = args
        if isinstance(core.find_top_trace(vals), core.EvalTrace):
            return call_impl(fun, *vals, **params)
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun, [get_aval(v) for v in vals])
        body = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
        return _bind_body(self, [*consts, *vals], body, params)


class ClosedCallPrimitive(CallPrimitive):
    """A :class:`CallPrimitive` whose ``call_jaxpr`` is a ``ClosedJaxpr``."""

    closed_body = True


def _body(params: dict[str, Any]) -> ClosedJaxpr:
    body = params["call_jaxpr"]
    return body if isinstance(body, ClosedJaxpr) else ClosedJaxpr(body, ())


def _bind_body(prim: CallPrimitive, args: Sequence[Any], body: ClosedJaxpr,
               params: dict[str, Any]) -> Any:
    """Binds ``prim`` applying ``body`` to ``args``, in the form of its
    ``call_jaxpr`` param (an open body takes the constants as operands)."""
    if prim.closed_body:
        return prim.bind(*args, call_jaxpr=body, **params)
    if body.consts:
        return prim.bind(*body.consts, *args,
                         call_jaxpr=pe.convert_constvars_jaxpr(body.jaxpr), **params)
    return prim.bind(*args, call_jaxpr=body.jaxpr, **params)


def _others(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "call_jaxpr"}


def _register_rules(prim: CallPrimitive) -> None:
    def impl(*args: Any, **params: Any) -> list[Any]:
        body = _body(params)
        return list(core.eval_jaxpr(body.jaxpr, body.consts, *args))

    def abstract_eval(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        body = _body(params)
        if len(avals) != len(body.in_avals):
            raise TypeError(f"{prim.name}: {len(avals)} operands for a call_jaxpr of "
                            f"{len(body.in_avals)} inputs")
        return list(body.out_avals)

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any
            ) -> tuple[list[Any], list[Any]]:
        nonzeros = [type(t) is not Zero for t in tangents]
        body, out_nz = ad.jvp_jaxpr(_body(params), nonzeros, False)
        outs = _bind_body(prim, [*primals, *(t for t in tangents if type(t) is not Zero)],
                          body, _others(params))
        return ad.split_jvp_outputs(outs, out_nz)

    def transpose(cts: Sequence[Any], *args: Any, **params: Any) -> list[Any]:
        linear = [ad.is_undefined_primal(x) for x in args]
        body = ad.transpose_jaxpr(_body(params), linear)
        residuals = [x for x, lin in zip(args, linear) if not lin]
        cts_in = [instantiate_zeros(ct) if type(ct) is Zero else ct for ct in cts]
        outs = iter(_bind_body(prim, [*residuals, *cts_in], body, _others(params)))
        return [next(outs) if lin else None for lin in linear]

    def batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None],
              **params: Any) -> tuple[list[Any], list[int | None]]:
        moved = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, dims)]
        body, out_batched = batching.batch_jaxpr(
            _body(params), axis_data, [d is not None for d in dims], False)
        outs = _bind_body(prim, moved, body, _others(params))
        return list(outs), [0 if b else None for b in out_batched]

    def partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer, **params: Any
                     ) -> list[Any]:
        unknowns = [not t.is_known() for t in tracers]
        others = _others(params)
        if not any(unknowns):
            return list(prim.bind(*[t.pval.const for t in tracers], **params))
        known, unknown, out_uk, res_avals = pe.partial_eval_jaxpr_nounits(
            _body(params), unknowns, False)
        known_all = _bind_body(prim, [t.pval.const for t in tracers if t.is_known()], known,
                               others)
        n_known = len(known_all) - len(res_avals)
        known_outs, residuals = known_all[:n_known], known_all[n_known:]
        if not any(out_uk):
            return list(known_outs)
        operands = [trace.new_instantiated_const(r) for r in residuals]
        operands += [trace.instantiate_const(t) for t, uk in zip(tracers, unknowns) if uk]
        if prim.closed_body:
            unknown_params = {**others, "call_jaxpr": unknown}
        else:
            operands = [trace.new_instantiated_const(c) for c in unknown.consts] + operands
            unknown_params = {**others,
                              "call_jaxpr": pe.convert_constvars_jaxpr(unknown.jaxpr)}
        out_tracers = trace.emit_recipe(prim, operands, unknown_params, unknown.out_avals,
                                        unknown.effects)
        known_iter, unknown_iter = iter(known_outs), iter(out_tracers)
        return [next(unknown_iter) if uk else next(known_iter) for uk in out_uk]

    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval)
    ad.primitive_jvps[prim] = jvp
    ad.primitive_transposes[prim] = transpose
    batching.fancy_primitive_batchers[prim] = batch
    pe.custom_partial_eval_rules[prim] = partial_eval
    pe.dce_rules[prim] = dce_jaxpr_closed_call_rule if prim.closed_body else dce_jaxpr_call_rule
    register_lowering(prim, make_call_rule("call_jaxpr", name_param="name"))


#: JAX's ``call_p``: ``call_p.bind(fun, *args)``, its body an open jaxpr.
call_p: CallPrimitive = CallPrimitive("call")
#: JAX's ``closed_call_p``: its equations hold a ``ClosedJaxpr``.
closed_call_p: ClosedCallPrimitive = ClosedCallPrimitive("closed_call")
