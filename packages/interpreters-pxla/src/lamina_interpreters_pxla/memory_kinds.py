"""Memory kinds of a program's arguments and results (JAX 0.10.2's rules).

A program whose shardings and types all name the device's default memory is
lowered without memory kinds. Otherwise ``main``'s arguments carry the
memory kind of their sharding (an argument without one carries none) and its
results that of their requested sharding or, without one, of their type's
memory space (``Host``: ``pinned_host``); a requested memory kind is also
annotated on the result value (``annotate_device_placement``), which is how
XLA learns to move it there. After compiling, the memory each output is in
comes from the executable (:func:`output_memory_kinds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lamina_mlir_lowering.sharding import is_unspecified
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, subjaxprs_of_params
from lamina_tracing_core.memory import MemorySpace, space_to_kind, spaces_used

__all__ = ["ProgramMemoryKinds", "program_memory_kinds", "output_memory_kinds"]

_DEFAULT_KINDS = (None, "device")


@dataclass(frozen=True)
class ProgramMemoryKinds:
    """What ``lower_jaxpr_to_module`` takes: one entry per jaxpr input
    (``args``) and output (``results``, ``placements``); None for none."""

    args: tuple[str | None, ...]
    results: tuple[str | None, ...]
    placements: tuple[str | None, ...]


def program_memory_kinds(jaxpr: ClosedJaxpr, in_shardings: Sequence[Any],
                         out_shardings: Sequence[Any]) -> ProgramMemoryKinds | None:
    """The memory kinds to lower ``jaxpr`` with, given its per-input and
    per-output shardings (``UNSPECIFIED`` where none is asked for); None when
    everything is in the default memory (no memory kind is written)."""
    if not spaces_used[0]:  # no value has ever been placed outside device memory
        return None
    given_in = [None if is_unspecified(s) else s.memory_kind for s in in_shardings]
    given_out = [None if is_unspecified(s) else s.memory_kind for s in out_shardings]
    if (all(k in _DEFAULT_KINDS for k in (*given_in, *given_out))
            and not _leaves_device_memory(jaxpr.jaxpr)):
        return None
    results = tuple(k if k is not None else _kind_of(a)
                    for k, a in zip(given_out, jaxpr.out_avals))
    return ProgramMemoryKinds(tuple(given_in), results, tuple(given_out))


def _kind_of(aval: ShapedArray) -> str | None:
    space = aval.memory_space
    return None if space is MemorySpace.Any else space_to_kind(space)


def _leaves_device_memory(jaxpr: Jaxpr) -> bool:
    """Whether some value of ``jaxpr`` (or of a jaxpr inside it) has a type
    outside device memory."""
    if any(v.aval.memory_space is not MemorySpace.Device for v in jaxpr.invars
           if isinstance(v.aval, ShapedArray)):
        return True
    for eqn in jaxpr.eqns:
        if any(isinstance(v.aval, ShapedArray) and v.aval.memory_space is not MemorySpace.Device
               for v in eqn.outvars):
            return True
        if eqn.primitive.higher_order and any(
                _leaves_device_memory(j) for j in subjaxprs_of_params(eqn.params)):
            return True
    return False


def output_memory_kinds(loaded: Any, num_outputs: int, has_token: bool = False
                        ) -> list[str | None]:
    """The memory kind of each of ``loaded``'s ``num_outputs`` results (after
    an ordered-effects token when ``has_token``), as the compiled executable
    reports it; None for each when it reports none."""
    try:
        kinds = list(loaded.get_output_memory_kinds()[0])
    except Exception:  # noqa: BLE001 - a client that cannot tell: take the default
        return [None] * num_outputs
    if has_token:
        kinds = kinds[1:]
    return [str(k) for k in kinds] if len(kinds) == num_outputs else [None] * num_outputs
