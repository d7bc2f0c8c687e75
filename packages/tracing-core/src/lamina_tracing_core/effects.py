"""Effects of equations and jaxprs.

An effect is something an equation does beyond computing its outputs. The one
lamina tracks everywhere is the *named-axis effect*: an equation that uses a
named axis (``psum(x, 'i')``) records ``NamedAxisEffect('i')``. A jaxpr's
effects are the union of its equations' (computed bottom-up), and a binder of
the axis (pmap, vmap with ``axis_name``) removes it from what it exposes.

The *host effects* are what callbacks into Python do: ``IOEffect`` (an
``io_callback``) and ``DebugEffect`` (``debug.callback``/``debug.print``),
each ordered or not. Ordered effects are threaded with tokens when lowered, so
they happen in program order within and across calls; unordered ones only
survive dead-code elimination. ``OrderedIO`` / ``UnorderedIO`` /
``OrderedDebug`` / ``UnorderedDebug`` are the four values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class Effect:
    """Base class of all effects (hashable value objects)."""


@dataclass(frozen=True)
class NamedAxisEffect(Effect):
    """The equation uses the named axis ``name``."""

    name: object

    def __str__(self) -> str:
        return f"NamedAxis({self.name})"


@dataclass(frozen=True)
class HostEffect(Effect):
    """A callback into Python: ``kind`` says what for (``'io'``, ``'debug'``),
    ``ordered`` whether its executions keep program order."""

    kind: str
    ordered: bool

    def __str__(self) -> str:
        return f"{'Ordered' if self.ordered else 'Unordered'}{self.kind.capitalize()}"


@dataclass(frozen=True)
class UserCheckEffect(Effect):
    """A ``checkify.check``: it must be functionalized (by ``checkify``) before
    the program runs, and dead-code elimination keeps it."""

    def __str__(self) -> str:
        return "UserCheck"


OrderedIO = HostEffect("io", True)
UnorderedIO = HostEffect("io", False)
OrderedDebug = HostEffect("debug", True)
UnorderedDebug = HostEffect("debug", False)


def is_ordered(effect: Effect) -> bool:
    return isinstance(effect, HostEffect) and effect.ordered


def ordered_effects(effects: "Effects") -> tuple[HostEffect, ...]:
    """The ordered effects among ``effects``, in a fixed order (kind name)."""
    return tuple(sorted((e for e in effects if isinstance(e, HostEffect) and e.ordered),
                        key=lambda e: e.kind))


def has_ordered_effects(effects: "Effects") -> bool:
    return any(isinstance(e, HostEffect) and e.ordered for e in effects)


def has_host_effects(effects: "Effects") -> bool:
    return any(isinstance(e, HostEffect) for e in effects)


Effects = frozenset[Effect]
no_effects: Effects = frozenset()


def union(effect_sets: Iterable[Effects]) -> Effects:
    out: set[Effect] = set()
    for effects in effect_sets:
        out.update(effects)
    return frozenset(out)


def named_axes_used(effects: Effects) -> frozenset[object]:
    return frozenset(e.name for e in effects if isinstance(e, NamedAxisEffect))


def uses_named_axis(effects: Effects, name: object) -> bool:
    """True when ``name`` (None: no axis) is among the named axes used."""
    return name is not None and any(
        isinstance(e, NamedAxisEffect) and e.name == name for e in effects)


def has_side_effects(effects: Effects) -> bool:
    """True for effects other than named-axis uses: an equation that has them
    must survive dead-code elimination even when its results are unused."""
    return any(not isinstance(e, NamedAxisEffect) for e in effects)


def remove_named_axes(effects: Effects, names: Iterable[object]) -> Effects:
    """What a binder of ``names`` exposes of its body's effects."""
    bound = set(names)
    return frozenset(e for e in effects
                     if not (isinstance(e, NamedAxisEffect) and e.name in bound))
