"""Primitives and the tables of rules registered beside them.

A primitive is a named operation (``add``, ``dot_general``, ``cond``). What it
*means* under each interpretation lives in a table keyed by the primitive:

===================  ========================================================
table                rule signature
===================  ========================================================
impl_rules           ``impl(*values, **params) -> out``: eager execution; the
                     runtime layer registers these (it owns devices). The
                     eval trace checks the inputs with the abstract-eval rule
                     first unless the primitive is in
                     ``core.impls_checking_inputs``.
abstract_eval_rules  ``rule(*avals, **params) -> aval`` (or a list when the
                     primitive has ``multiple_results``); checks its inputs and
                     raises a clear TypeError/ValueError on bad ones.
effect_rules         ``rule(**params) -> Effects``: effects of one equation
                     (e.g. the named axes a collective uses). Optional.
jvp_rules            ``rule(primals, tangents, **params) -> (primal_out,
                     tangent_out)``; tangents may be symbolic zeros.
transpose_rules      ``rule(cotangents_out, *invals, **params) -> list``;
                     linear inputs arrive as ``UndefinedPrimal``.
batching_rules       ``rule(batched_args, batch_dims, **params) -> (out,
                     out_dims)``; ``None`` marks an unbatched argument.
===================  ========================================================

The lowering layer keeps its own table (``lowering_rules``) in the same style.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects

Rule = Callable[..., Any]


class Primitive:
    """A named operation; ``bind`` applies it under the current transformations."""

    multiple_results: bool = False
    #: True for primitives whose params hold jaxprs (jit, cond, scan, ...).
    higher_order: bool = False

    def __init__(self, name: str, *, multiple_results: bool = False):
        self.name = name
        self.multiple_results = multiple_results

    def bind(self, *args: Any, **params: Any) -> Any:
        return core.bind(self, args, params)

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """How an equation's params are re-bound when a jaxpr is evaluated:
        ``(subfuns, bind_params)`` with ``prim.bind(*subfuns, *args,
        **bind_params)``. Final-style primitives (pmap, custom_jvp) turn the
        jaxprs in their params back into ``WrappedFun``s here."""
        return [], params

    def __repr__(self) -> str:
        return self.name

    # Registration helpers, so rules can be written beside the primitive.
    def def_impl(self, rule: Rule) -> Rule:
        impl_rules[self] = rule
        return rule

    def def_abstract_eval(self, rule: Rule) -> Rule:
        abstract_eval_rules[self] = rule
        return rule

    def def_effects(self, rule: Callable[..., Effects]) -> Callable[..., Effects]:
        effect_rules[self] = rule
        return rule

    def def_jvp(self, rule: Rule) -> Rule:
        jvp_rules[self] = rule
        return rule

    def def_transpose(self, rule: Rule) -> Rule:
        transpose_rules[self] = rule
        return rule

    def def_batching(self, rule: Rule) -> Rule:
        batching_rules[self] = rule
        return rule


class MissingRuleError(LookupError):
    """A primitive was used under an interpretation it has no rule for."""


impl_rules: dict[Primitive, Rule] = {}
abstract_eval_rules: dict[Primitive, Rule] = {}
effect_rules: dict[Primitive, Callable[..., Effects]] = {}
jvp_rules: dict[Primitive, Rule] = {}
transpose_rules: dict[Primitive, Rule] = {}
batching_rules: dict[Primitive, Rule] = {}


def abstract_eval(prim: Primitive, avals: list[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
    """Output avals of ``prim`` applied to ``avals``, always as a list."""
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise MissingRuleError(f"primitive {prim.name} has no abstract evaluation rule")
    out = rule(*avals, **params)
    return list(out) if prim.multiple_results else [out]


# Imported last: core imports this module's names, and Primitive.bind needs core.
import lamina_tracing_core.core as core  # noqa: E402
