"""``lamina.custom_derivatives``: user-defined derivative rules (JAX's
``jax.custom_derivatives``).

``custom_jvp`` and ``custom_vjp`` come from tracing-core. This module adds the
two helpers JAX builds on them:

- ``custom_gradient(fun)``: ``fun(*args)`` returns ``(out, vjp_fn)`` and
  ``vjp_fn(ct)`` returns the cotangents of the arguments (a tuple, or a bare
  value for a single argument). The rule may close over the arguments and
  intermediate values: it is traced to a jaxpr whose constants are the
  residuals that the backward pass receives.
- ``closure_convert(fun, *example_args)``: ``(converted, consts)`` where
  ``converted(*args, *consts)`` computes ``fun(*args)`` with the values of
  enclosing transformations that ``fun`` closes over and that could carry a
  derivative (traced inexact values) passed explicitly, as ``custom_vjp``'s
  rules require.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import core, dtypes
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import tangent_aval, zeros_like_aval
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import (
    CustomVJPPrimal,
    SymbolicZero,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
    custom_vjp_primal_tree_values,
)
from lamina_tracing_core.jaxpr import Jaxpr

__all__ = [
    "CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp",
    "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p", "custom_vjp_primal_tree_values",
    "zero_from_primal",
]


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of each leaf of ``val`` (a ``SymbolicZero`` per leaf with
    ``symbolic_zeros``, else a zero array of the tangent dtype)."""
    def zero(x: Any) -> Any:
        aval = tangent_aval(get_aval(x))
        if symbolic_zeros:
            return SymbolicZero(aval)
        return zeros_like_aval(aval)
    return tu.tree_map(zero, val)


# --- custom_gradient ------------------------------------------------------------------------
class _RuleResiduals:
    """The traced gradient rule: a jaxpr (static) and its constants (the
    residuals, the pytree's leaves)."""

    def __init__(self, jaxpr: Jaxpr, in_tree: Any, out_tree: Any, consts: Sequence[Any]):
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree
        self.consts = list(consts)


tu.register_pytree_node(
    _RuleResiduals,
    lambda r: (r.consts, (r.jaxpr, r.in_tree, r.out_tree)),
    lambda aux, consts: _RuleResiduals(aux[0], aux[1], aux[2], list(consts)))


def custom_gradient(fun: Callable[..., Any]) -> Callable[..., Any]:
    """``fun(*args) -> (out, vjp_fn)`` as a function whose reverse-mode derivative
    is ``vjp_fn`` (only reverse mode: forward-mode differentiation raises, as in
    JAX's ``custom_vjp``)."""

    @custom_vjp
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out, _ = fun(*args, **kwargs)
        return out

    def fwd(*args: Any, **kwargs: Any) -> tuple[Any, _RuleResiduals]:
        out, rule = fun(*args, **kwargs)
        out_flat, out_tree = tu.tree_flatten((out,))
        dbg = api_util.debug_info("custom_gradient rule", rule, (out,), {})
        flat_rule, rule_tree = api_util.flatten_fun_nokwargs(
            wrap_init(rule, debug_info=dbg), out_tree)
        ct_avals = [tangent_aval(get_aval(x)) for x in out_flat]
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_rule, ct_avals)
        return out, _RuleResiduals(jaxpr, rule_tree(), out_tree, consts)

    def bwd(res: _RuleResiduals, ct: Any) -> Any:
        cts_flat, ct_tree = tu.tree_flatten((ct,))
        if ct_tree != res.out_tree:
            raise TypeError(f"custom_gradient: cotangent structure {ct_tree} does not match the "
                            f"output structure {res.out_tree}")
        in_cts = tu.tree_unflatten(res.in_tree, core.eval_jaxpr(res.jaxpr, res.consts,
                                                                *cts_flat))
        return (in_cts,) if tu.treedef_is_leaf(res.in_tree) else in_cts

    wrapped.defvjp(fwd, bwd)
    functools.update_wrapper(wrapped, fun)
    return wrapped


# --- closure_convert ------------------------------------------------------------------------
def _may_carry_derivative(x: Any) -> bool:
    """Whether a closed-over value could have a tangent: a tracer of an inexact
    dtype (integer and boolean values only ever have float0 tangents)."""
    if not isinstance(x, core.Tracer):
        return False
    return tangent_aval(get_aval(x)).dtype != dtypes.float0


def closure_convert(fun: Callable[..., Any], *example_args: Any
                    ) -> tuple[Callable[..., Any], list[Any]]:
    """``(converted, hoisted)``: ``converted(*args, *hoisted)`` equals
    ``fun(*args)`` for arguments shaped like ``example_args``; ``hoisted`` are
    the traced values ``fun`` closes over that may be differentiated."""
    args_flat, in_tree = tu.tree_flatten(example_args)
    dbg = api_util.debug_info("closure_convert", fun, example_args, {})
    flat_fun, out_tree_thunk = api_util.flatten_fun_nokwargs(wrap_init(fun, debug_info=dbg),
                                                             in_tree)
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, [get_aval(x) for x in args_flat])
    out_tree = out_tree_thunk()
    hoist = [_may_carry_derivative(c) for c in consts]
    kept = [c for c, h in zip(consts, hoist) if not h]
    hoisted = [c for c, h in zip(consts, hoist) if h]

    def converted(*args_and_consts: Any) -> Any:
        n_args = len(args_and_consts) - len(hoisted)
        args, given = args_and_consts[:n_args], list(args_and_consts[n_args:])
        kept_it, given_it = iter(kept), iter(given)
        all_consts = [next(given_it) if h else next(kept_it) for h in hoist]
        flat, tree = tu.tree_flatten(tuple(args))
        if tree != in_tree:
            raise TypeError(f"closure_convert: the converted function was given arguments of "
                            f"structure {tree}, but it was traced for {in_tree}")
        return tu.tree_unflatten(out_tree, core.eval_jaxpr(jaxpr, all_consts, *flat))

    functools.update_wrapper(converted, fun)
    return converted, hoisted
