"""``pmap_p``: the final-style map primitive behind ``pmap``.

``outs = pmap_p.bind(fun, *args, **params)`` maps the ``WrappedFun`` ``fun``
over the ``in_axes`` of ``args``, one replica per device. ``fun`` stays a
``WrappedFun`` until the impl rule (:mod:`lamina_interpreters_pxla.pmap_execution`)
traces it, so every transformation above (jvp, vmap, partial evaluation,
transposition) wraps the function (tracing-core's ``process_map``) and updates
its ``debug_info`` instead of transforming a jaxpr.

Params (JAX's ``xla_pmap`` names):

- ``axis_name``: the name collectives use (an :class:`AnonymousAxis` when the
  user gave none); ``axis_size``: the mapped size (this process's share);
  ``global_axis_size``: the size over all processes; ``is_explicit_global_axis_size``;
- ``in_axes``: one ``int | None`` per flat argument (canonical, non-negative);
- ``out_axes_thunk``: a thunk giving one ``int | None`` per flat result once
  ``fun`` has been traced (in a jaxpr equation: ``out_axes``, a tuple);
- ``devices``: the devices to run on (a tuple) or ``None``; ``backend``;
- ``name``: the function's name (the module is ``pmap_<name>``);
- ``donated_invars``: one bool per flat argument;
- ``chunked``: whether the arrays use chunked shards (``pmap_chunked_shards``).

In a jaxpr equation the function is ``call_jaxpr`` (an open ``Jaxpr`` without
constvars, per-device types) and ``out_axes`` is concrete. This module
registers the rules that see the equation form: abstract evaluation, effects
(the equation exposes its body's named axes minus its own), the transpose
(itself a ``pmap_p``), DCE, and the updater that keeps ``donated_invars``
aligned when a transformation changes the inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import tree_util
from lamina_linear_util.api_util import flatten_axes
from lamina_tracing_core import ad, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects, NamedAxisEffect, remove_named_axes
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn
from lamina_tracing_core.primitives import abstract_eval_rules, effect_rules, transpose_rules

__all__ = ["AnonymousAxis", "ConstOutAxes", "OutAxesThunk", "PmapPrimitive", "pmap_p"]


class AnonymousAxis:
    """The axis name of a ``pmap`` given ``axis_name=None``.

    Collectives cannot name it; it exists so that nested anonymous pmaps bind
    distinct axes. Two are equal when they bind the same nesting depth, so a
    function keeps hitting the caches call after call.
    """

    __slots__ = ("depth",)

    def __init__(self, depth: int):
        self.depth = depth

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnonymousAxis) and other.depth == self.depth

    def __hash__(self) -> int:
        return hash((AnonymousAxis, self.depth))

    def __repr__(self) -> str:
        return f"<pmap axis {self.depth}>"


class OutAxesThunk:
    """``out_axes_thunk`` of a ``pmap`` call: broadcasts the user's ``out_axes``
    (a prefix of the output tree) over the flat results once the output tree
    is known. Compares by the ``out_axes`` specification only (what the thunk
    returns is otherwise a function of the traced function), so that two calls
    of the same function give equal ``WrappedFun``s for the caches."""

    __slots__ = ("_spec", "_spec_key", "_out_tree", "_cached")

    def __init__(self, spec: Any, out_tree: Callable[[], Any]):
        self._spec = spec
        leaves, treedef = tree_util.none_leaf_registry.flatten(spec)
        self._spec_key = (tuple(leaves), treedef)
        self._out_tree = out_tree
        self._cached: tuple[int | None, ...] | None = None

    def __call__(self) -> tuple[int | None, ...]:
        if self._cached is None:
            out_tree = self._out_tree()
            axes = flatten_axes("pmap out_axes", out_tree, self._spec)
            # A negative entry is refused only where it reaches a result: a
            # spec may hold entries for empty subtrees (equinox's filter_pmap
            # passes one per possible axis, -n..n-1, most of them empty).
            if any(ax is not None and ax < 0 for ax in axes):
                raise ValueError(f"pmap out_axes entries must be non-negative, but got "
                                 f"{self._spec}.")
            self._cached = tuple(axes)
        return self._cached

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutAxesThunk) and other._spec_key == self._spec_key

    def __hash__(self) -> int:
        return hash(self._spec_key)

    def __repr__(self) -> str:
        return f"OutAxesThunk({self._spec!r})"


class ConstOutAxes:
    """An ``out_axes_thunk`` whose value is known (re-binding a jaxpr equation)."""

    __slots__ = ("value",)

    def __init__(self, value: Sequence[int | None]):
        self.value = tuple(value)

    def __call__(self) -> tuple[int | None, ...]:
        return self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConstOutAxes) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"ConstOutAxes({self.value!r})"


class PmapPrimitive(core.MapPrimitive):
    """``MapPrimitive`` whose re-bound equations keep their body's debug info
    as it is (``traced_for='pmap'``, the names of the body's inputs)."""

    higher_order = True

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        new_params = dict(params)
        call_jaxpr: Jaxpr = new_params.pop("call_jaxpr")
        out_axes = tuple(new_params.pop("out_axes"))
        fun = pe.wrapped_fun_of_jaxpr(ClosedJaxpr(call_jaxpr, ()))
        new_params["out_axes_thunk"] = ConstOutAxes(out_axes)
        return [fun], new_params


pmap_p = PmapPrimitive("xla_pmap")


# --- the equation form ------------------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, call_jaxpr: Jaxpr, axis_size: int,
                   in_axes: Sequence[int | None], out_axes: Sequence[int | None],
                   **_: Any) -> list[ShapedArray]:
    if len(avals) != len(call_jaxpr.invars) or len(in_axes) != len(avals):
        raise TypeError(f"pmap: {len(avals)} operands for a body of "
                        f"{len(call_jaxpr.invars)} inputs and {len(in_axes)} in_axes")
    for i, (aval, ax, v) in enumerate(zip(avals, in_axes, call_jaxpr.invars)):
        per_device = core.mapped_aval(axis_size, ax, aval)
        if per_device.shape != v.aval.shape or per_device.dtype != v.aval.dtype:
            raise TypeError(f"pmap: operand {i} of type {aval.str_short()} mapped at axis "
                            f"{ax} does not fit the body's input {v.aval.str_short()}")
    return [core.unmapped_aval(axis_size, ax, v.aval)
            for v, ax in zip(call_jaxpr.outvars, out_axes)]


def _effects(*, call_jaxpr: Jaxpr, axis_name: Any, **_: Any) -> Effects:
    return remove_named_axes(call_jaxpr.effects, [axis_name])


def _update_params(params: dict[str, Any], in_sources: tuple[int | None, ...]
                   ) -> dict[str, Any]:
    donated = params.get("donated_invars")
    if donated is None:
        return params
    return dict(params, donated_invars=tuple(
        bool(donated[s]) if s is not None else False for s in in_sources))


def _transpose(cts: Sequence[Any], *invals: Any, **params: Any) -> list[Any]:
    # The transpose of a map is a map of the transposed body (tracing-core's
    # map_transpose names its inputs cotangent(result) and its outputs
    # cotangent(x)); cotangents of broadcast inputs are summed over devices.
    return ad.map_transpose(pmap_p, cts, *invals, **params)


def _dce(used_outputs: Sequence[bool], eqn: JaxprEqn) -> tuple[list[bool], JaxprEqn | None]:
    # A pmap equation inside another program drops the inputs its body does
    # not read (as jit's does); a pmap called on its own keeps every argument
    # in its module (pmap_execution.lower_pmap), which no DCE pass reaches.
    side_effects = any(not isinstance(e, NamedAxisEffect) for e in eqn.effects)
    if not any(used_outputs) and not side_effects:
        return [False] * len(eqn.invars), None
    params = eqn.params
    body, used_inputs = pe.dce_jaxpr(params["call_jaxpr"], used_outputs)

    def keep(seq: Sequence[Any], flags: Sequence[bool]) -> tuple[Any, ...]:
        return tuple(x for x, f in zip(seq, flags) if f)

    new_params = dict(params, call_jaxpr=body, in_axes=keep(params["in_axes"], used_inputs),
                      out_axes=keep(params["out_axes"], used_outputs))
    if "donated_invars" in params:
        new_params["donated_invars"] = keep(params["donated_invars"], used_inputs)
    new_eqn = eqn.replace(invars=list(keep(eqn.invars, used_inputs)),
                          outvars=list(keep(eqn.outvars, used_outputs)), params=new_params,
                          effects=remove_named_axes(body.effects, [params["axis_name"]]))
    return list(used_inputs), new_eqn


abstract_eval_rules[pmap_p] = _abstract_eval
effect_rules[pmap_p] = _effects
transpose_rules[pmap_p] = _transpose
pe.dce_rules[pmap_p] = _dce
core.map_param_updaters[pmap_p] = _update_params
