"""Unreduced and reduced values inside ``shard_map`` bodies (JAX's
``lax.pcast(x, axes, to='unreduced'|'reduced')``).

A value *unreduced* over manual axes holds one summand per device: its value
is the sum over those axes, taken later (``psum``, which binds
``unreduced_psum``, one all-reduce). A value *reduced* over axes is the same
on every device along them, typed so that its cotangent is unreduced: the
transposes pair up, each cast's transpose being the other direction's
(``vary_unreduced_cast_p`` with ``reduced_vary_cast_p``, ``unreduced_psum``
with ``preduced``), so a gradient through an unreduced value sums once.

- ``vary_unreduced_cast_p[axes]``: varying over ``axes`` -> unreduced (no data moves);
- ``preduced[axes]``: invariant -> reduced (no data moves);
- ``reduced_vary_cast_p[axes]``: reduced -> varying (no data moves);
- ``unreduced_psum[axes]``: unreduced -> invariant, the sum over devices.

Linear primitives keep unreduced values (``ur_rules`` below, as JAX's
``add``, ``mul`` by a reduced value, ``convert_element_type``, ``reshape``,
``transpose``, ``squeeze``, ``reduce_sum``, and ``broadcast_in_dim``, which
shard_map's residuals go through); other primitives refuse them
(``vma.default_ur_rule``).
"""

from __future__ import annotations

from typing import Any

from lamina_tracing_core import ad_util, batching
from lamina_tracing_core import base_primitives as bp
from lamina_tracing_core import vma as _vma
from lamina_tracing_core.avals import ShapedArray, order_axes
from lamina_tracing_core.effects import Effects, NamedAxisEffect
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.primitives import Primitive, effect_rules
from lamina_tracing_core.sharding_in_types import ShardingTypeError

__all__ = ["vary_unreduced_cast_p", "preduced_p", "reduced_vary_cast_p", "unreduced_psum_p",
           "cast_to", "psum_unreduced", "keep_ur"]

_NONE: frozenset[Any] = frozenset()

vary_unreduced_cast_p = Primitive("vary_unreduced_cast_p")
preduced_p = Primitive("preduced")
reduced_vary_cast_p = Primitive("reduced_vary_cast_p")
unreduced_psum_p = Primitive("unreduced_psum")


def _same(x: ShapedArray, **_: Any) -> ShapedArray:
    return x


def _summed(x: ShapedArray, **_: Any) -> ShapedArray:
    return x.strip_weak_type()


def _effects(*, axes: tuple[Any, ...]) -> Effects:
    return frozenset(NamedAxisEffect(a) for a in axes)


_Axes = frozenset[Any]
_Mat = tuple[_Axes, _Axes, _Axes]
_Ur = tuple[_Axes, _Axes]


# (vma, unreduced, reduced) of each cast's result: what it takes, what it gives
def _vary_unreduced(x: ShapedArray, axes: tuple[Any, ...]) -> _Mat:
    return x.vma - set(axes), x.unreduced | set(axes), x.reduced


def _preduced(x: ShapedArray, axes: tuple[Any, ...]) -> _Mat:
    return x.vma, x.unreduced, x.reduced | set(axes)


def _reduced_vary(x: ShapedArray, axes: tuple[Any, ...]) -> _Mat:
    return x.vma | set(axes), x.unreduced, x.reduced - set(axes)


def _unreduced_sum(x: ShapedArray, axes: tuple[Any, ...]) -> _Mat:
    return x.vma, x.unreduced - set(axes), x.reduced


_TYPE_RULES = {vary_unreduced_cast_p: _vary_unreduced, preduced_p: _preduced,
               reduced_vary_cast_p: _reduced_vary, unreduced_psum_p: _unreduced_sum}
#: each one's transpose: the cast the other way
_TRANSPOSES = {vary_unreduced_cast_p: reduced_vary_cast_p, reduced_vary_cast_p:
               vary_unreduced_cast_p, preduced_p: unreduced_psum_p,
               unreduced_psum_p: preduced_p}


def _register(prim: Primitive) -> None:
    rule = _TYPE_RULES[prim]
    prim.def_abstract_eval(_summed if prim is unreduced_psum_p else _same)
    effect_rules[prim] = _effects
    _vma.vma_rules[prim] = lambda x, *, axes: rule(x, axes)[0]
    _vma.ur_rules[prim] = lambda x, *, axes: (rule(x, axes)[1], rule(x, axes)[2])
    _vma.ur_makers.add(prim)
    other = _TRANSPOSES[prim]
    bp.deflinear(prim, lambda ct, x, *, axes: [other.bind(ct, axes=axes)])
    batching.fancy_primitive_batchers[prim] = \
        lambda axis_data, args, dims, *, axes: (prim.bind(args[0], axes=axes), dims[0])


for _prim in _TYPE_RULES:
    _register(_prim)


# --- what pcast and psum bind -------------------------------------------------------------------
def _state(x: ShapedArray, axes: tuple[Any, ...]) -> str:
    """JAX's name for the manual-axes type of ``x`` over ``axes``."""
    for name, have in (("varying", x.vma), ("unreduced", x.unreduced),
                       ("reduced", x.reduced)):
        if all(a in have for a in axes):
            return name
    return "invarying"


def cast_to(x: Any, aval: ShapedArray, axes: tuple[Any, ...], to: str) -> Any:
    """``pcast(x, axes, to=...)`` for ``to`` of 'unreduced' or 'reduced', and
    for 'varying' from reduced (``x``'s type is ``aval``); refuses the others
    with JAX's message. In a body without ``check_vma`` nothing varies, so
    'unreduced' is refused and 'reduced' changes nothing, as in JAX."""
    state = _state(aval, axes)
    prim = {("varying", "unreduced"): vary_unreduced_cast_p,
            ("invarying", "reduced"): preduced_p,
            ("reduced", "varying"): reduced_vary_cast_p}.get((state, to))
    if prim is None:
        raise ValueError(f"Unsupported pcast from={state}, to={to!r}")
    if not _vma.checking():
        return x  # a body without check_vma types no manual axes
    return prim.bind(x, axes=order_axes(frozenset(axes)))


def psum_unreduced(x: Any, aval: ShapedArray, axes: tuple[Any, ...]) -> Any:
    """``psum`` of a value unreduced over ``axes`` (exactly those): the sum of
    the per-device summands, one all-reduce."""
    named = set(axes)
    if named != aval.unreduced:
        states = {_state(aval, (a,)) for a in axes}
        raise ValueError(
            f"jax.lax.psum can only accept axis_name which corresponds to one of varying, "
            f"unreduced, reduced or invarying state of the input. Got input type: "
            f"{aval.str_long()}, axes: {axes} and input state: {states}")
    return unreduced_psum_p.bind(x, axes=order_axes(frozenset(axes)))


# --- primitives that keep unreduced values ----------------------------------------------------
def keep_ur(x: ShapedArray, *_: Any, **__: Any) -> _Ur:
    """The rule of a primitive linear in its first operand: the result is
    unreduced/reduced over what that operand is."""
    return x.unreduced, x.reduced


def _add_rule(x: ShapedArray, y: ShapedArray, **_: Any) -> _Ur:
    reduced = _vma.nary_reduced([x, y])
    xu, yu = x.unreduced, y.unreduced
    if xu and yu and xu != yu:
        raise ShardingTypeError(f"lhs and rhs to `add` must be unreduced along the same mesh "
                                f"axes. Got lhs={xu}, rhs={yu}")
    if bool(xu) != bool(yu):
        one, other = ("lhs", "rhs") if xu else ("rhs", "lhs")
        raise ShardingTypeError(
            f"{one} is unreduced while {other} is not. `add` operation does not allow this "
            f"because there will be implicit communication. Please reduce {one} via "
            f"`reshard` before calling `add`.")
    return xu, reduced


def _mul_rule(x: ShapedArray, y: ShapedArray, **_: Any) -> _Ur:
    xu, yu = x.unreduced, y.unreduced
    if xu and yu:
        raise ShardingTypeError(f"lhs and rhs to `mul` cannot be unreduced since mul is "
                                f"bilinear. Got lhs={xu}, rhs={yu}")
    if xu and xu != y.reduced:
        raise ShardingTypeError(f"RHS should be reduced along the same axes LHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    if yu and yu != x.reduced:
        raise ShardingTypeError(f"LHS should be reduced along the same axes RHS is unreduced "
                                f"on. Got lhs={x} and rhs={y}")
    if xu or yu:
        return xu | yu, _NONE  # the reduced factor's axes are used up
    return _NONE, _vma.nary_reduced([x, y])


_vma.ur_rules[ew.add_p] = _add_rule
_vma.ur_rules[ad_util.add_jaxvals_p] = _add_rule
_vma.ur_rules[ew.mul_p] = _mul_rule
for _linear in (bp.convert_element_type_p, bp.reshape_p, bp.transpose_p, st.squeeze_p,
                bp.broadcast_in_dim_p,
                bp.reduce_sum_p, _vma.pvary_p):
    _vma.ur_rules[_linear] = keep_ur
