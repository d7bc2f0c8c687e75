"""``lamina.interpreters.partial_eval``: tracing to jaxprs, partial
evaluation and dead-code elimination (JAX's ``jax.interpreters.partial_eval``).

- ``trace_to_jaxpr_dynamic(fun, in_avals)`` traces a flat ``WrappedFun`` to
  ``(jaxpr, out_avals, consts)``; the jaxpr carries the argument names and
  result paths of ``fun.debug_info``.
- ``trace_to_jaxpr_nounits(fun, pvals, instantiate=False)`` runs ``fun`` on
  ``PartialVal``s (``PartialVal.known(x)`` / ``PartialVal.unknown(aval)``):
  known values are computed now, the rest becomes ``(jaxpr, out_pvals,
  consts)``.
- ``dce_rules[prim] = rule(used_outputs, eqn) -> (used_inputs, new_eqn or
  None)`` prunes a primitive's equation; without a rule an equation is kept
  whole when any output is used or it has side effects.
- ``dce_jaxpr_call_rule`` / ``dce_jaxpr_closed_call_rule`` are ready-made
  ``dce_rules`` for a call-like primitive whose ``call_jaxpr`` param holds
  its body (an open ``Jaxpr`` / a ``ClosedJaxpr``): the body is pruned to the
  used outputs and the equation keeps only the inputs the body still reads.
- ``Val`` is the type of a value a jaxpr computes on (any array-like).
- ``custom_partial_eval_rules[prim] = rule(trace, *tracers, **params)`` and
  ``partial_eval_jaxpr_custom_rules`` customize how a primitive is split
  between known and unknown parts (higher-order primitives use them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

from lamina_linear_util.linear_util import WrappedFun
from lamina_tracing_core import partial_eval as _pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import eqn_effects
from lamina_tracing_core.effects import has_side_effects
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn
from lamina_tracing_core.partial_eval import DynamicJaxprTrace as DynamicJaxprTrace
from lamina_tracing_core.partial_eval import DynamicJaxprTracer as DynamicJaxprTracer
from lamina_tracing_core.partial_eval import JaxprTrace as JaxprTrace
from lamina_tracing_core.partial_eval import JaxprTracer as JaxprTracer
from lamina_tracing_core.partial_eval import PartialVal as PartialVal
from lamina_tracing_core.partial_eval import close_jaxpr as close_jaxpr
from lamina_tracing_core.partial_eval import convert_constvars_jaxpr as convert_constvars_jaxpr
from lamina_tracing_core.partial_eval import custom_partial_eval_rules as custom_partial_eval_rules
from lamina_tracing_core.partial_eval import dce_closed_jaxpr as dce_closed_jaxpr
from lamina_tracing_core.partial_eval import dce_rules as dce_rules
from lamina_tracing_core.partial_eval import (
    partial_eval_jaxpr_custom_rules as partial_eval_jaxpr_custom_rules,
)
from lamina_tracing_core.partial_eval import partial_eval_jaxpr_nounits as partial_eval_jaxpr_nounits
from lamina_tracing_core.partial_eval import trace_to_jaxpr_nounits as trace_to_jaxpr_nounits

__all__ = [
    "DynamicJaxprTrace", "DynamicJaxprTracer", "JaxprTrace", "JaxprTracer", "PartialVal", "Val",
    "close_jaxpr", "convert_constvars_jaxpr", "custom_partial_eval_rules", "dce_closed_jaxpr",
    "dce_jaxpr", "dce_jaxpr_call_rule", "dce_jaxpr_closed_call_rule", "dce_jaxpr_consts", "dce_rules", "partial_eval_jaxpr_custom_rules", "partial_eval_jaxpr_nounits",
    "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits",
]

#: A value a jaxpr computes on: an array, a scalar or a tracer (JAX's ``Val``).
Val: TypeAlias = Any


def trace_to_jaxpr_dynamic(fun: WrappedFun, in_avals: Sequence[ShapedArray], *,
                           keep_inputs: Sequence[bool] | None = None, lower: bool = False,
                           auto_dce: bool = False) -> tuple[Jaxpr, list[ShapedArray], list[object]]:
    """Traces ``fun`` at ``in_avals`` to ``(jaxpr, out_avals, consts)``.

    ``keep_inputs[i]`` False drops input ``i`` from the jaxpr (a ValueError
    if the function reads it); ``auto_dce`` removes the equations no output
    needs. ``lower`` is accepted for JAX's signature: lamina's traced values
    are always lowered to plain values."""
    del lower
    jaxpr, out_avals, consts = _pe.trace_to_jaxpr_dynamic(fun, in_avals)
    n_in = len(jaxpr.invars)
    keep = [True] * n_in if keep_inputs is None else [bool(k) for k in keep_inputs]
    if len(keep) != n_in:
        raise ValueError(f"trace_to_jaxpr_dynamic: keep_inputs has {len(keep)} entries for "
                         f"{n_in} inputs of {fun.__name__}")
    if auto_dce or not all(keep):
        names = _input_names(fun, n_in)
        jaxpr, kept = _pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=keep)
        dropped_but_used = [n for n, k, want in zip(names, kept, keep) if k and not want]
        if dropped_but_used:
            raise ValueError(f"trace_to_jaxpr_dynamic: keep_inputs drops "
                             f"{', '.join(dropped_but_used)}, which {fun.__name__} uses")
    return jaxpr, out_avals, consts


def _input_names(fun: WrappedFun, n_in: int) -> list[str]:
    """The names of ``fun``'s flat inputs (``args[i]`` where none is known)."""
    dbg = fun.debug_info
    names = list(dbg.arg_names) if dbg is not None and len(dbg.arg_names) == n_in else []
    return [str(names[i]) if names and names[i] else f"args[{i}]" for i in range(n_in)]


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: bool | Sequence[bool],
              instantiate: bool | Sequence[bool] = False) -> tuple[Jaxpr, list[bool]]:
    """``(new_jaxpr, used_inputs)``: ``jaxpr`` without the outputs not in
    ``used_outputs`` (one flag for all, or one per output), without the
    equations nothing needs and without the inputs nothing uses (unless
    ``instantiate`` keeps them)."""
    if isinstance(used_outputs, bool):
        used_outputs = [used_outputs] * len(jaxpr.outvars)
    return _pe.dce_jaxpr(jaxpr, used_outputs, instantiate)


def dce_jaxpr_consts(jaxpr: Jaxpr, used_outputs: bool | Sequence[bool],
                     instantiate: bool | Sequence[bool] = False
                     ) -> tuple[Jaxpr, list[bool], list[bool]]:
    """``(new_jaxpr, used_consts, used_inputs)``: :func:`dce_jaxpr` that also
    drops the constvars nothing uses (JAX's). A sequence ``instantiate`` has
    one flag per constvar, then one per input."""
    n_consts = len(jaxpr.constvars)
    pruned, used = dce_jaxpr(convert_constvars_jaxpr(jaxpr), used_outputs, instantiate)
    used_consts, used_inputs = used[:n_consts], used[n_consts:]
    k = sum(used_consts)
    dbg = pruned.debug_info
    if dbg is not None and k:
        dbg = dbg.replace(arg_names=tuple(dbg.arg_names)[k:])
    new = Jaxpr(pruned.invars[:k], pruned.invars[k:], pruned.outvars, pruned.eqns,
                pruned.effects, dbg)
    return new, used_consts, used_inputs



def dce_jaxpr_call_rule(used_outputs: list[bool], eqn: JaxprEqn
                        ) -> tuple[list[bool], JaxprEqn | None]:
    """The DCE rule of a call primitive whose ``call_jaxpr`` param is an open
    ``Jaxpr``: ``(used_inputs, new_eqn)``, the equation dropped (None) when
    no output is used and it has no side effects."""
    return _dce_call(used_outputs, eqn, "dce_jaxpr_call_rule")


def dce_jaxpr_closed_call_rule(used_outputs: list[bool], eqn: JaxprEqn
                               ) -> tuple[list[bool], JaxprEqn | None]:
    """:func:`dce_jaxpr_call_rule` for a ``call_jaxpr`` that is a ``ClosedJaxpr``
    (its unused constants are pruned too)."""
    return _dce_call(used_outputs, eqn, "dce_jaxpr_closed_call_rule")


def _dce_call(used_outputs: list[bool], eqn: JaxprEqn, name: str
              ) -> tuple[list[bool], JaxprEqn | None]:
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    body = eqn.params.get("call_jaxpr")
    new_body: Jaxpr | ClosedJaxpr
    if isinstance(body, ClosedJaxpr):
        new_body, used_inputs = _pe.dce_closed_jaxpr(body, used_outputs)
    elif isinstance(body, Jaxpr):
        new_body, used_inputs = _pe.dce_jaxpr(body, used_outputs)
    else:
        raise TypeError(f"{name}: equation {eqn.primitive.name} has no call_jaxpr param "
                        f"holding a jaxpr (got {type(body).__name__})")
    params = dict(eqn.params, call_jaxpr=new_body)
    new_eqn = eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_outputs) if u],
        params=params, effects=eqn_effects(eqn.primitive, params))
    return used_inputs, new_eqn
