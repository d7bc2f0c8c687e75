"""Varying manual axes: the part of a value's type that says over which manual
mesh axes of a ``shard_map`` it may differ between devices (JAX's ``vma``).

While a ``shard_map`` body traced with ``check_vma`` is traced or transformed
(``checking_vma(True)``), every value's aval carries ``vma``: a body argument
varies over the manual axes its ``in_specs`` entry names, constants over none.
The rules:

- an operation's results vary wherever one of its operands does; before a
  first-order primitive is applied to operands of different ``vma``, the
  invariant ones are ``pvary``'d to the join (``core.bind`` calls
  :func:`insert_pvary`), so every equation sees operands of one type;
- ``pvary`` adds axes (the value is unchanged; its transpose is
  ``psum_invariant``, the sum over devices that makes the gradient of a
  replicated parameter the sum of the per-device gradients);
- primitives with a rule in ``vma_rules`` (the collectives, nested
  ``shard_map``) compute their results' ``vma`` themselves;
- higher-order primitives keep the ``vma`` their bodies' jaxprs give;
- a value may also be *unreduced* over manual axes (each device holds a
  summand: ``pcast(x, axes, to='unreduced')``) or *reduced* over them (the
  same everywhere, typed so its cotangent is unreduced: ``to='reduced'``).
  Primitives in ``ur_rules`` say what their results are unreduced/reduced
  over; any other takes no unreduced operand and keeps the reduced axes its
  operands share (:func:`default_ur_rule`).

Outside such bodies nothing here runs and every ``vma`` is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from lamina_tracing_core import trace_settings
from lamina_tracing_core.avals import ShapedArray, get_aval, order_axes
from lamina_tracing_core.effects import Effects, NamedAxisEffect
from lamina_tracing_core.primitives import Primitive, effect_rules
from lamina_tracing_core.sharding_in_types import ShardingTypeError

__all__ = ["checking", "checking_vma", "vma_rules", "result_avals", "insert_pvary",
           "pvary_p", "join", "vma_of", "auto_pcast", "auto_pcast_on", "manual_axes",
           "vary_over_spmd_axes", "ur_rules", "ur_makers", "default_ur_rule", "nary_reduced"]

#: ``[on]``: whether values are typed with their varying manual axes now.
_checking = [False]
#: ``[axes]``: the manual axes of the ``shard_map`` body traced now (all the
#: enclosing bodies' included).
_manual: list[tuple[Any, ...]] = [()]

VmaRule = Callable[..., frozenset[Any]]
#: ``rule(*in_avals, **params) -> vma`` of every result, for primitives whose
#: results do not simply vary wherever their operands do.
vma_rules: dict[Primitive, VmaRule] = {}

UrRule = Callable[..., tuple[frozenset[Any], frozenset[Any]]]
#: ``rule(*in_avals, **params) -> (unreduced, reduced)`` of every result, for
#: primitives that make or keep unreduced values (or reduced ones otherwise
#: than :func:`default_ur_rule` does).
ur_rules: dict[Primitive, UrRule] = {}
#: The primitives that make unreduced or reduced values from plain ones (the
#: others apply their ``ur_rules`` only to operands that are unreduced or reduced).
ur_makers: set[Primitive] = set()

_NONE: frozenset[Any] = frozenset()


def nary_reduced(avals: Sequence[ShapedArray]) -> frozenset[Any]:
    """The reduced axes of an elementwise result: those its operands are
    reduced over, which all of them must be (an operand that is the same on
    every device along such an axis, or varies over it, is refused)."""
    specs = {a.reduced for a in avals if a.reduced_order}
    if len(specs) > 1:
        raise ShardingTypeError(f"All inputs should be reduced across the same mesh axes. Got "
                                f"specs: {specs}")
    if not specs:
        return _NONE
    reduced = next(iter(specs))
    for a in avals:
        if a.reduced == reduced:
            continue
        if (a.vma | a.unreduced) & reduced:
            raise ShardingTypeError(
                f"Inputs cannot be sharded/varying on the same axes that another input is "
                f"reduced on. Got input type: {a} and reduced spec: {set(reduced)}")
        raise ShardingTypeError(
            f"Inputs cannot be replicated on the same axes that another input is reduced "
            f"on. Got input type: {a} and reduced spec: {reduced}")
    return reduced


def default_ur_rule(prim: Primitive, avals: Sequence[ShapedArray]
                    ) -> tuple[frozenset[Any], frozenset[Any]]:
    """A primitive without a rule in ``ur_rules`` keeps the reduced axes its
    operands share and takes no unreduced operand (it is not known to be
    linear, so a summand per device cannot go through it)."""
    for a in avals:
        if a.unreduced_order:
            raise ShardingTypeError(
                f"{prim.name} cannot take an operand unreduced over mesh axes: got "
                f"{a.str_short()}. Only linear operations (add, mul by a value reduced over "
                f"those axes, convert_element_type, reshape, transpose, squeeze, "
                f"reduce_sum) keep a value unreduced; psum it over those axes first")
    return _NONE, nary_reduced(avals)


def checking() -> bool:
    """True while a ``shard_map`` body traced with ``check_vma`` is traced or
    transformed."""
    return _checking[0]


def manual_axes() -> tuple[Any, ...]:
    """The manual mesh axes of the ``shard_map`` bodies traced now."""
    return _manual[0]


@contextmanager
def checking_vma(on: bool, manual: Sequence[Any] = ()) -> Iterator[None]:
    """Types values with their varying manual axes (or stops, for a body
    traced with ``check_vma=False``) for the extent of the block, in which
    ``manual`` axes are manual too."""
    before, before_manual = _checking[0], _manual[0]
    _checking[0] = on
    _manual[0] = before_manual + tuple(a for a in manual if a not in before_manual)
    try:
        yield
    finally:
        _checking[0], _manual[0] = before, before_manual


def vary_over_spmd_axes(outs: Sequence[Any], batched: Sequence[bool], spmd_axis_name: Any,
                        where: str) -> list[Any]:
    """The results of ``vmap(..., spmd_axis_name=...)`` inside a ``shard_map``
    body: each ``batched`` one varies over those axes (its batch dimension is
    split over them, as JAX types it), which must be manual axes there."""
    if not _checking[0] or spmd_axis_name is None:
        return list(outs)
    axes = tuple(spmd_axis_name) if isinstance(spmd_axis_name, (tuple, list)) \
        else (spmd_axis_name,)
    not_manual = [a for a in axes if a not in _manual[0]]
    if not_manual:
        raise ValueError(
            f"{where}: spmd_axis_name={spmd_axis_name!r} inside a shard_map body names "
            f"{', '.join(map(repr, not_manual))}, not among the body's manual axes "
            f"{_manual[0]}: the batch dimension can be split only over manual axes there")
    return [pvary_p.bind(x, axes=order_axes(frozenset(axes) - vma_of(x)))
            if b and not frozenset(axes) <= vma_of(x) else x
            for x, b in zip(outs, batched)]


def vma_of(x: Any) -> frozenset[Any]:
    return get_aval(x).vma


def join(avals: Sequence[ShapedArray]) -> frozenset[Any]:
    out: frozenset[Any] = frozenset()
    for a in avals:
        if a.vma:
            out = out | a.vma
    return out


def result_avals(prim: Primitive, in_avals: Sequence[ShapedArray], out: Any,
                 params: dict[str, Any]) -> Any:
    """``out`` (an aval or a list of them, as ``prim``'s abstract evaluation
    gave it) with the results' varying manual axes."""
    rule = vma_rules.get(prim)
    if rule is not None:
        vma = rule(*in_avals, **params)
    elif prim.higher_order:
        return out
    else:
        vma = join(in_avals)
        if any(a.vma != vma for a in in_avals):  # only with auto_pcast off
            raise ValueError(
                f"Primitive {prim.name} requires varying manual axes to match, but got "
                f"{[set(a.vma) for a in in_avals]}. Apply `lax.pcast(..., to='varying')` to "
                f"the operands that do not vary over some of those axes, turn auto_pcast on, "
                f"or pass check_vma=False to shard_map")
    if prim in ur_makers or any(a.unreduced_order or a.reduced_order for a in in_avals):
        ur = ur_rules.get(prim)
        unreduced, reduced = (ur(*in_avals, **params) if ur is not None
                              else default_ur_rule(prim, in_avals))
        if prim.multiple_results:
            return [a.update(vma=vma, unreduced=unreduced, reduced=reduced) for a in out]
        return out.update(vma=vma, unreduced=unreduced, reduced=reduced)
    if prim.multiple_results:
        return [a if a.vma == vma else a.update(vma=vma) for a in out]
    return out if out.vma == vma else out.update(vma=vma)


def insert_pvary(prim: Primitive, args: Sequence[Any]) -> Sequence[Any]:
    """``args`` with the operands that vary over fewer manual axes than the
    others ``pvary``'d to the join, for a first-order primitive."""
    if prim.higher_order or prim in vma_rules or len(args) < 2 or not auto_pcast_on():
        return args
    try:
        vmas = [get_aval(x).vma for x in args]
    except TypeError:
        return args  # not arrays: the primitive's own checks will say so
    first = vmas[0]
    if all(v == first for v in vmas):
        return args
    joined = frozenset().union(*vmas)
    return [x if v == joined else pvary_p.bind(x, axes=_ordered(joined - v))
            for x, v in zip(args, vmas)]


def auto_pcast_on() -> bool:
    """Whether invariant values are ``pvary``'d implicitly where they meet
    varying ones (the ``auto_pcast`` setting)."""
    return bool(trace_settings.state.auto_pcast)


def auto_pcast(on: bool) -> AbstractContextManager[None]:
    """``with auto_pcast(False):`` makes a mismatch of varying manual axes an
    error instead of an implicit ``pvary`` for the block (JAX's
    ``jax.auto_pcast``)."""
    return trace_settings.scoped("auto_pcast", bool(on))


def _ordered(axes: frozenset[Any]) -> tuple[Any, ...]:
    return order_axes(axes)


# --- pvary ------------------------------------------------------------------------------------
#: ``pvary[axes] x``: ``x`` typed as varying over ``axes`` too (no data moves).
pvary_p = Primitive("pvary")


def _pvary_abstract_eval(x: ShapedArray, *, axes: tuple[Any, ...]) -> ShapedArray:
    return x


def _pvary_vma(x: ShapedArray, *, axes: tuple[Any, ...]) -> frozenset[Any]:
    for kind in ("unreduced", "reduced"):
        if getattr(x, kind) & set(axes):
            raise ValueError(f"pvary cannot accept args which are {kind}. Got "
                             f"{x.str_short()} and axes={set(axes)}")
    already = [a for a in axes if a in x.vma]
    if already:
        raise ValueError(
            f"pvary is a invariant->variant collective. This means that the axis names "
            f"mentioned in `axes` passed to `pvary` must not be present in "
            f"`jax.typeof(inp).mat.varying`. Got axes={axes} and "
            f"jax.typeof(inp)={x.str_long()}")
    return x.vma | frozenset(axes)


def _pvary_effects(*, axes: tuple[Any, ...]) -> Effects:
    return frozenset(NamedAxisEffect(a) for a in axes)


pvary_p.def_abstract_eval(_pvary_abstract_eval)
effect_rules[pvary_p] = _pvary_effects
vma_rules[pvary_p] = _pvary_vma
