"""``lamina.custom_batching``: functions with their own vmap rule (JAX's
``jax.custom_batching``).

``custom_vmap(fun)`` wraps ``fun``; ``@f.def_vmap`` gives the rule used
when ``f`` is vmapped::

    @custom_vmap
    def f(x, y): ...

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        # in_batched: one bool per argument leaf (same pytree as the args);
        # batched arguments carry the batch axis first.
        return out, out_batched   # out_batched: one bool per output leaf

Outside vmap ``f`` computes ``fun``. Under ``jvp``/``grad`` the primal keeps
the rule and the tangent is ``fun``'s own derivative (so a vmapped gradient
batches the tangent computation with the ordinary rules). ``sequential_vmap(f)``
is ``f`` with a rule that runs the batch one element at a time (``lax.map``).

It is written with lamina's extension API itself: ``custom_vmap_p`` is a
``Primitive`` with impl, abstract eval, effects, a fancy batching rule, a JVP
rule and a lowering that inlines the function's jaxpr, each registered on it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import wrap_init
from lamina_mlir_lowering.lowering import lower_sub_jaxpr
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value
from lamina_tracing_core import ad, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import instantiate_zeros
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import bdim_at_front
from lamina_tracing_core.batching import AxisData, fancy_primitive_batchers
from lamina_tracing_core.control_flow import lax_map
from lamina_tracing_core.effects import Effects
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.symbolic import Zero, tangent_aval

__all__ = ["custom_vmap", "custom_vmap_p", "sequential_vmap"]

custom_vmap_p = Primitive("custom_vmap_call", multiple_results=True)
"""``custom_vmap_p.bind(*consts, *args, call_jaxpr, rule, in_tree, out_tree,
num_consts)``: ``call_jaxpr`` computes the function; ``rule`` is the user's
vmap rule on pytrees ``in_tree``/``out_tree``."""


class custom_vmap:
    """``fun`` with a vmap rule set by :meth:`def_vmap` (see the module docstring)."""

    def __init__(self, fun: Callable[..., Any]):
        api_util.check_callable(fun)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule: Callable[..., tuple[Any, Any]] | None = None

    def def_vmap(self, vmap_rule: Callable[..., tuple[Any, Any]]
                 ) -> Callable[..., tuple[Any, Any]]:
        """Sets ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = getattr(self.fun, "__name__", "fun")
        if kwargs:
            raise TypeError(f"custom_vmap function {name} takes positional arguments only; "
                            f"got keyword arguments {', '.join(sorted(kwargs))}")
        dbg = api_util.debug_info("custom_vmap", self.fun, args, {})
        args_flat, in_tree = tu.tree_flatten(list(args))  # in_batched is a list, as in JAX
        flat_fun, out_tree = api_util.flatten_fun_nokwargs(
            wrap_init(self.fun, debug_info=dbg), in_tree)
        in_avals = [get_aval(x) for x in args_flat]
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(flat_fun, in_avals)
        closed = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
        outs = custom_vmap_p.bind(*consts, *args_flat, call_jaxpr=closed, rule=self._rule(name),
                                  in_tree=in_tree, out_tree=out_tree(),
                                  num_consts=len(consts))
        return tu.tree_unflatten(out_tree(), outs)

    def _rule(self, name: str) -> Callable[..., tuple[Any, Any]]:
        def rule(axis_size: int, in_batched: Any, *args: Any) -> tuple[Any, Any]:
            if self.vmap_rule is None:
                raise AttributeError(f"No batching rule defined for custom_vmap function "
                                     f"{name} using def_vmap.")
            return self.vmap_rule(axis_size, in_batched, *args)
        return rule


def _abstract_eval(*avals: ShapedArray, call_jaxpr: ClosedJaxpr, **_: Any) -> list[ShapedArray]:
    return list(call_jaxpr.out_avals)


def _effects(*, call_jaxpr: ClosedJaxpr, **_: Any) -> Effects:
    return call_jaxpr.jaxpr.effects


def _impl(*args: Any, call_jaxpr: ClosedJaxpr, **_: Any) -> list[Any]:
    return core.jaxpr_as_fun(call_jaxpr)(*args)


def _batch(axis_data: AxisData, args: Sequence[Any], dims: Sequence[int | None], *,
           call_jaxpr: ClosedJaxpr, rule: Callable[..., tuple[Any, Any]], in_tree: Any,
           out_tree: Any, num_consts: int) -> tuple[list[Any], list[int | None]]:
    if all(d is None for d in dims):
        outs = custom_vmap_p.bind(*args, call_jaxpr=call_jaxpr, rule=rule, in_tree=in_tree,
                                  out_tree=out_tree, num_consts=num_consts)
        return outs, [None] * len(outs)
    if any(d is not None for d in dims[:num_consts]):
        raise ValueError("custom_vmap: the function closes over a value batched by an "
                         "enclosing vmap; pass it as an argument instead")
    size = axis_data.size
    user_args = [x if d is None else bdim_at_front(x, d, size)
                 for x, d in zip(args[num_consts:], dims[num_consts:])]
    in_batched = tu.tree_unflatten(in_tree, [d is not None for d in dims[num_consts:]])
    out, out_batched = rule(size, in_batched, *tu.tree_unflatten(in_tree, user_args))
    outs_flat, got_tree = tu.tree_flatten(out)
    if got_tree != out_tree:
        raise TypeError(f"custom_vmap rule returned an output of structure {got_tree}, but "
                        f"the function's output has structure {out_tree}")
    batched_flat, batched_tree = tu.tree_flatten(out_batched)
    if batched_tree != out_tree:
        raise TypeError(f"custom_vmap rule returned out_batched of structure {batched_tree}; "
                        f"it must match the output's structure {out_tree}")
    return outs_flat, [0 if b else None for b in batched_flat]


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], *, call_jaxpr: ClosedJaxpr,
         **params: Any) -> tuple[list[Any], list[Any]]:
    primals_out = custom_vmap_p.bind(*primals, call_jaxpr=call_jaxpr, **params)
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_jaxpr, out_nz = ad.jvp_jaxpr(call_jaxpr, nonzeros, instantiate=False)
    outs = core.jaxpr_as_fun(jvp_jaxpr)(
        *primals, *[instantiate_zeros(t) for t, nz in zip(tangents, nonzeros) if nz])
    nz_tangents = iter(outs[len(primals_out):])
    tangents_out = [next(nz_tangents) if nz else Zero(tangent_aval(get_aval(p)))
                    for p, nz in zip(primals_out, out_nz)]
    return primals_out, tangents_out


def _lower(ctx: LoweringRuleContext, *args: Value, call_jaxpr: ClosedJaxpr,
           **_: Any) -> list[Value]:
    return lower_sub_jaxpr(ctx, call_jaxpr, args)


custom_vmap_p.def_impl(_impl)
custom_vmap_p.def_abstract_eval(_abstract_eval)
custom_vmap_p.def_effects(_effects)
custom_vmap_p.def_jvp(_jvp)
fancy_primitive_batchers[custom_vmap_p] = _batch
register_lowering(custom_vmap_p, _lower)


def sequential_vmap(f: Callable[..., Any]) -> custom_vmap:
    """``f`` with a vmap rule that maps it over the batch one element at a
    time (a ``lax.map`` loop): for functions with no batching rule of their
    own, or whose batched form costs too much memory."""
    wrapped = custom_vmap(f)

    @wrapped.def_vmap
    def rule(axis_size: int, in_batched: Any, *args: Any) -> tuple[Any, Any]:
        flags = tu.tree_leaves(in_batched)
        leaves, tree = tu.tree_flatten(args)
        batched = [x for x, b in zip(leaves, flags) if b]

        def one(batched_elems: list[Any]) -> Any:
            it = iter(batched_elems)
            merged = [next(it) if b else x for x, b in zip(leaves, flags)]
            return f(*tu.tree_unflatten(tree, merged))

        out = lax_map(one, batched)
        return out, tu.tree_map(lambda _: True, out)

    return wrapped
