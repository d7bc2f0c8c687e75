"""Primitives and the tables of rules registered beside them.

A primitive is a named operation (``add``, ``dot_general``, ``cond``). What it
*means* under each interpretation lives in a table keyed by the primitive:

===================  ========================================================
table                rule signature
===================  ========================================================
impl_rules           ``impl(*values, **params) -> out``: eager execution of
                     one primitive. A primitive without one runs through
                     ``default_impl`` (below). The eval trace checks the
                     inputs with the abstract-eval rule first unless the
                     primitive is in ``core.impls_checking_inputs``.
abstract_eval_rules  ``rule(*avals, **params) -> aval`` (or a list when the
                     primitive has ``multiple_results``); checks its inputs and
                     raises a clear TypeError/ValueError on bad ones. Results
                     then take the operands' common memory space (see
                     ``memory``) unless the primitive is in
                     ``memory.own_space_primitives``.
effect_rules         ``rule(**params) -> Effects``: effects of one equation
                     (e.g. the named axes a collective uses). Optional.
jvp_rules            ``rule(primals, tangents, **params) -> (primal_out,
                     tangent_out)``; tangents may be symbolic zeros.
transpose_rules      ``rule(cotangents_out, *invals, **params) -> list``;
                     linear inputs arrive as ``UndefinedPrimal``.
batching_rules       ``rule(batched_args, batch_dims, **params) -> (out,
                     out_dims)``; ``None`` marks an unbatched argument.
===================  ========================================================

``default_impl`` is the one eager fallback: ``rule(prim, *values, **params)``,
used for every primitive that has no entry in ``impl_rules``. The runtime layer
(which owns devices and compiles) sets it once with ``set_default_impl``; until
then a primitive without an impl rule cannot run eagerly.

The lowering layer keeps its own table (``lowering_rules``) in the same style.
"""

from __future__ import annotations

import functools

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects
from lamina_tracing_core.memory import spaces_used, with_result_spaces

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
        return _bind(self, args, params)

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """How an equation's params are re-bound when a jaxpr is evaluated:
        ``(subfuns, bind_params)`` with ``prim.bind(*subfuns, *args,
        **bind_params)``. Final-style primitives (pmap, custom_jvp) turn the
        jaxprs in their params back into ``WrappedFun``s here."""
        return [], params

    def __repr__(self) -> str:
        return self.name

    def impl(self, *args: Any, **params: Any) -> Any:
        """Runs the primitive eagerly on concrete values, by its impl rule or,
        without one, by the runtime's default impl (compile and run)."""
        rule = impl_rules.get(self)
        if rule is not None:
            return rule(*args, **params)
        if default_impl is None:
            raise MissingRuleError(f"primitive {self.name} has no impl rule and no runtime "
                                   f"is loaded to compile it")
        return default_impl(self, *args, **params)

    def abstract_eval(self, *avals: ShapedArray, **params: Any) -> tuple[Any, Effects]:
        """``(out_aval(s), effects)`` of the primitive applied to ``avals``:
        its abstract-evaluation rule's result and its effects rule's."""
        effectful = effectful_abstract_eval_rules.get(self)
        if effectful is not None:
            out, effs = effectful(*avals, **params)
            if spaces_used[0]:
                out = with_result_spaces(self, avals, out)
            return out, frozenset(effs)
        rule = abstract_eval_rules.get(self)
        if rule is None:
            raise MissingRuleError(f"primitive {self.name} has no abstract evaluation rule")
        effects = effect_rules.get(self)
        out = rule(*avals, **params)
        if spaces_used[0]:
            out = with_result_spaces(self, avals, out)
        return out, (effects(**params) if effects is not None else frozenset())

    # Registration helpers, so rules can be written beside the primitive.
    def def_impl(self, rule: Rule) -> Rule:
        impl_rules[self] = rule
        return rule

    def def_abstract_eval(self, rule: Rule) -> Rule:
        abstract_eval_rules[self] = rule
        effectful_abstract_eval_rules.pop(self, None)
        return rule

    def def_effectful_abstract_eval(self, rule: Callable[..., tuple[Any, Any]]
                                    ) -> Callable[..., tuple[Any, Any]]:
        """JAX's form of the rule: ``rule(*avals, **params) -> (out_aval(s),
        effects)``, for a primitive whose effects depend on its operands' types.
        Its avals are the abstract-evaluation rule's; its effects are each
        staged equation's (``JaxprEqn.effects``, and so the jaxpr's)."""
        effectful_abstract_eval_rules[self] = rule
        abstract_eval_rules[self] = functools.partial(_avals_of_effectful, rule)
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
#: ``rule(*avals, **params) -> (out_aval(s), effects)`` (``def_effectful_abstract_eval``)
effectful_abstract_eval_rules: dict[Primitive, Callable[..., tuple[Any, Any]]] = {}


def _avals_of_effectful(rule: Callable[..., tuple[Any, Any]], *avals: Any, **params: Any) -> Any:
    return rule(*avals, **params)[0]

effect_rules: dict[Primitive, Callable[..., Effects]] = {}
jvp_rules: dict[Primitive, Rule] = {}
transpose_rules: dict[Primitive, Rule] = {}
batching_rules: dict[Primitive, Rule] = {}


DefaultImpl = Callable[..., Any]
"""``rule(prim, *values, **params) -> out``: runs ``prim`` eagerly."""

#: The eager impl of every primitive without an ``impl_rules`` entry, or None
#: while no runtime has set one (see ``set_default_impl``).
default_impl: DefaultImpl | None = None
#: Whether ``default_impl`` checks its inputs with the abstract-evaluation rule
#: itself, so that the eval trace need not (as ``core.impls_checking_inputs``
#: says for one primitive's impl rule).
default_impl_checks_inputs: bool = False


def set_default_impl(rule: DefaultImpl | None, *, checks_inputs: bool = False) -> None:
    """Makes ``rule(prim, *values, **params)`` the eager impl of every primitive
    that has no ``impl_rules`` entry (``None`` removes it). Pass
    ``checks_inputs=True`` when the rule runs the primitive's abstract-evaluation
    rule on its inputs itself (a compile-and-run dispatch whose cache is keyed
    by the input types and params does), so the eval trace skips its own check."""
    global default_impl, default_impl_checks_inputs
    default_impl = rule
    default_impl_checks_inputs = checks_inputs


def abstract_eval(prim: Primitive, avals: list[ShapedArray], params: dict[str, Any]) -> list[ShapedArray]:
    """Output avals of ``prim`` applied to ``avals``, always as a list."""
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise MissingRuleError(f"primitive {prim.name} has no abstract evaluation rule")
    out = rule(*avals, **params)
    if spaces_used[0]:
        out = with_result_spaces(prim, avals, out)
    return list(out) if prim.multiple_results else [out]



BindRule = Callable[[Primitive, Sequence[Any], dict[str, Any]], Any]
"""``bind(prim, args, params) -> out``: applies a primitive under the active
transformations."""

#: What ``Primitive.bind`` calls: the trace stack's ``bind``. The trace stack
#: lives in ``core``, the floor above, which sets this when it is imported (the
#: package's ``__init__`` imports it, so it is set before any primitive binds).
_bind: BindRule


def set_bind(rule: BindRule) -> None:
    """Makes ``rule`` what ``Primitive.bind`` calls (``core`` does, once)."""
    global _bind
    _bind = rule
