"""Vmappable containers: user types that ``vmap`` takes and returns whole,
mapping the arrays they hold (JAX's ``batching.register_vmappable``).

``register_vmappable(data_type, spec_type, axis_size_type, to_elt, from_elt,
make_iota)`` makes ``data_type`` a leaf of ``vmap``'s inputs and outputs; its
``in_axes``/``out_axes`` entry may be a ``spec_type`` object (or an int or
None). The handlers say how the container maps:

- ``to_elt(cont, get_idx, x, spec)`` builds the per-example container of
  ``x``: it calls ``cont(part, axis)`` for each array ``part`` of ``x``
  mapped along ``axis`` (None: not mapped) and puts the results in place;
  ``get_idx()`` is the example's index along the mapped axis (an int32).
- ``from_elt(cont, axis_size, elt, spec)`` builds the batched container
  from a per-example one: ``cont(axis_size, part, axis)`` gives the part
  batched at ``axis``.

``cont`` recurses into parts that are themselves vmappable. The handlers
are called once to find the parts and once to build the containers, so they
must call ``cont`` on the same parts in the same order each time.
``make_iota`` (for ``axis_size_type`` sizes) is accepted for JAX's
signature; lamina's axis sizes are ints. As in JAX, the size of the mapped
axis comes from the other arguments or ``axis_size``, not from containers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

__all__ = [
    "flatten_input", "flatten_output", "is_vmappable", "register_vmappable", "spec_types",
    "unflatten_input", "unflatten_output", "unregister_vmappable", "vmappables",
]

#: data_type -> (spec_type, axis_size_type)
vmappables: dict[type, tuple[type, type]] = {}
#: the registered spec types (accepted as in_axes/out_axes entries)
spec_types: set[type] = set()
_to_elt: dict[type, Callable[..., Any]] = {}
_from_elt: dict[type, Callable[..., Any]] = {}


def register_vmappable(data_type: type, spec_type: type, axis_size_type: type,
                       to_elt: Callable[..., Any], from_elt: Callable[..., Any],
                       make_iota: Callable[..., Any] | None) -> None:
    """Registers ``data_type`` as a container ``vmap`` maps through (see the
    module docstring)."""
    del make_iota
    vmappables[data_type] = (spec_type, axis_size_type)
    spec_types.add(spec_type)
    _to_elt[data_type] = to_elt
    _from_elt[data_type] = from_elt


def unregister_vmappable(data_type: type) -> None:
    """Undoes :func:`register_vmappable` for ``data_type``."""
    spec_type, _ = vmappables.pop(data_type)
    _to_elt.pop(data_type)
    _from_elt.pop(data_type)
    if all(s is not spec_type for s, _ in vmappables.values()):
        spec_types.discard(spec_type)


def is_vmappable(x: Any) -> bool:
    return type(x) in vmappables


def flatten_input(x: Any, spec: Any) -> list[tuple[Any, Any]]:
    """The ``(part, axis)`` pairs ``x``'s ``to_elt`` maps, in order."""
    found: list[tuple[Any, Any]] = []

    def cont(part: Any, axis: Any) -> Any:
        if is_vmappable(part):
            found.extend(flatten_input(part, axis))
        else:
            found.append((part, axis))
        return part

    # the container built here is discarded: any index will do
    _to_elt[type(x)](cont, lambda: np.int32(0), x, spec)
    return found


def unflatten_input(x: Any, spec: Any, parts: Iterator[Any], get_idx: Callable[[], Any]) -> Any:
    """``x``'s per-example container, its parts taken from ``parts`` in
    :func:`flatten_input`'s order (mapped values, inside ``vmap``)."""
    def cont(part: Any, axis: Any) -> Any:
        if is_vmappable(part):
            return unflatten_input(part, axis, parts, get_idx)
        return next(parts)

    return _to_elt[type(x)](cont, get_idx, x, spec)


def flatten_output(elt: Any, spec: Any, axis_size: int) -> list[tuple[Any, Any]]:
    """The ``(part, axis)`` pairs ``elt``'s ``from_elt`` batches, in order."""
    found: list[tuple[Any, Any]] = []

    def cont(size: int, part: Any, axis: Any) -> Any:
        if is_vmappable(part):
            found.extend(flatten_output(part, axis, size))
        else:
            found.append((part, axis))
        return part

    _from_elt[type(elt)](cont, axis_size, elt, spec)
    return found


def unflatten_output(elt: Any, spec: Any, axis_size: int, parts: Iterator[Any]) -> Any:
    """The batched container of ``elt``, its parts taken from ``parts``
    (batched values, in :func:`flatten_output`'s order)."""
    def cont(size: int, part: Any, axis: Any) -> Any:
        if is_vmappable(part):
            return unflatten_output(part, axis, size, parts)
        return next(parts)

    return _from_elt[type(elt)](cont, axis_size, elt, spec)

