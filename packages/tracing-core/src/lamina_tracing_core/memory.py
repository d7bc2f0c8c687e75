"""Memory spaces: which memory of its device a value's type says it lives in.

A device has several memories (jaxlib's CPU client: ``device``,
``pinned_host``, ``unpinned_host``). A sharding names one by its
``memory_kind``; a type (``ShapedArray.memory_space``) records the coarser
``MemorySpace``: ``Host`` for ``pinned_host`` data, ``Device`` for every
other kind (JAX 0.10.2 maps ``unpinned_host`` to ``Device`` too), ``Any``
for a type that does not say. Types print a space other than ``Device``
(``float32<host>[4]``, ``f32<host>[4]`` in jaxprs).

A primitive's results take the memory space its operands share (0-d
operands, which XLA places anywhere, do not count); operands in different
spaces are an error naming the primitive. Primitives whose abstract
evaluation decides the space itself (``device_put``, and every
higher-order primitive, whose body's types say it) opt out through
:data:`own_space_primitives`.

Tracing pays for none of this until a type in a space other than ``Device``
has been made in this process (:data:`spaces_used`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lamina_tracing_core.avals import ShapedArray
    from lamina_tracing_core.primitives import Primitive

__all__ = ["MemorySpace", "spaces_used", "kind_to_space", "space_to_kind", "common_space",
           "with_result_spaces", "own_space_primitives", "space_suffix"]


class MemorySpace(enum.Enum):
    """The memory a type says its value lives in (JAX's ``jax.memory.Space``)."""

    Device = enum.auto()
    Host = enum.auto()
    Any = enum.auto()

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"

    # Enum hashes its members' names; every aval hash includes a space, so an
    # identity hash keeps that cheap (members are singletons).
    __hash__ = object.__hash__


#: Whether a type in a space other than ``Device`` has been made in this
#: process: until then tracing skips the memory-space rule on every bind.
spaces_used: list[bool] = [False]

#: Primitives whose abstract evaluation sets its results' spaces itself.
own_space_primitives: set[Primitive] = set()

_SUFFIXES = {MemorySpace.Device: "", MemorySpace.Host: "<host>", MemorySpace.Any: "<any>"}


def space_suffix(space: MemorySpace) -> str:
    """What a type prints after its dtype: nothing for ``Device``, else
    ``<host>`` / ``<any>``."""
    return _SUFFIXES[space]


def kind_to_space(kind: str | None) -> MemorySpace:
    """The space of data in memory ``kind``: ``Host`` for ``pinned_host``
    only, ``Device`` for every other kind and for None."""
    return MemorySpace.Host if kind == "pinned_host" else MemorySpace.Device


def space_to_kind(space: MemorySpace) -> str:
    """The memory kind a result in ``space`` is placed in (``device`` or
    ``pinned_host``); ``Any`` names no memory, a ``ValueError``."""
    if space is MemorySpace.Device:
        return "device"
    if space is MemorySpace.Host:
        return "pinned_host"
    raise ValueError(f"space_to_kind: {space!r} names no memory kind")


def common_space(prim: Primitive, avals: Sequence[ShapedArray]) -> MemorySpace:
    """The space ``prim``'s results take from ``avals``: ``Any`` when every
    operand is in ``Any``, else the one space the operands of rank > 0
    share (``Device`` when there are none). A ``ValueError`` (JAX's message)
    when two of them differ."""
    if avals and all(a.memory_space is MemorySpace.Any for a in avals):
        return MemorySpace.Any
    first: ShapedArray | None = None
    for a in avals:
        if not a.shape:
            continue  # a scalar goes wherever its user is
        if first is not None and a.memory_space is not first.memory_space:
            raise ValueError(
                f"memory_space of all inputs passed to `{prim.name}` must be the same. Got "
                f"one operand with type: {first.str_long()} and another operand with type: "
                f"{a.str_long()}")
        first = a
    return MemorySpace.Device if first is None else first.memory_space


def with_result_spaces(prim: Primitive, in_avals: Sequence[ShapedArray], out: Any) -> Any:
    """``out`` (an aval, or a list of them for a primitive with multiple
    results) in the space ``prim``'s operands share; unchanged for a
    primitive that sets spaces itself. Call it only when :data:`spaces_used`."""
    if prim.higher_order or prim in own_space_primitives:
        return out
    space = common_space(prim, in_avals)
    if not prim.multiple_results:
        return out if out.memory_space is space else out.update(memory_space=space)
    return [a if a.memory_space is space else a.update(memory_space=space) for a in out]
