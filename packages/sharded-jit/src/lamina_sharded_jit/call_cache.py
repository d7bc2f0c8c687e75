"""Each jitted function's calls by signature: one table per function.

A :class:`CallCache` lives on one ``Jitted`` and remembers, per call
signature, everything a later call with that signature can reuse:

- the :class:`~lamina_sharded_jit.params.PjitParams` inferred for it (the
  traced jaxpr, the flat shardings and donations, the output tree), so a
  repeated call, under a transformation too, neither recomputes debug info
  nor consults the tracing cache;
- once the signature ran at top level (or its program came from the
  persistent trace cache, without params), the compiled program with the
  placement of its arguments (a :class:`~lamina_sharded_jit.dispatch.FastEntry`),
  so a repeated top-level call only checks the arguments and runs it.

The table is keyed on the argument *structure*: the tree of ``(dynamic
args, dynamic kwargs)``, and for functions with static arguments the static
values with their types. Under each structure is a short list of
:class:`CallSignature`, newest first: each identifies its signature by the
flat avals (weak types included) and the tracing context, and holds the
params and at most one compiled placement (a signature that ran with two
placements, e.g. committed to two devices, has two entries sharing the
params). Results that close over tracers of an enclosing transformation are
never remembered.

Bounds: :data:`MAX_PER_STRUCTURE` signatures per structure (a new one pushes
out the oldest) and :data:`MAX_STRUCTURES` structures per function (a new one
pushes out the structure seen first). Everything here is held strongly (the
jaxprs, the compiled programs), and all of it dies with the ``Jitted``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

from lamina_tracing_core.avals import ShapedArray

from lamina_sharded_jit.dispatch import FastEntry
from lamina_sharded_jit.params import PjitParams

__all__ = ["CallCache", "CallSignature", "MAX_PER_STRUCTURE", "MAX_STRUCTURES"]

#: signatures kept per argument structure
MAX_PER_STRUCTURE = 8
#: argument structures kept per function
MAX_STRUCTURES = 64


class CallSignature:
    """One remembered signature (see the module docstring). ``params`` has
    empty ``args_flat``: the arguments are the caller's."""

    __slots__ = ("structure", "avals", "context", "params", "run")

    def __init__(self, structure: Hashable, avals: tuple[ShapedArray, ...], context: Hashable,
                 params: PjitParams | None, run: FastEntry | None = None) -> None:
        self.structure = structure
        self.avals = avals
        self.context = context
        self.params = params
        self.run = run


class CallCache:
    """The per-function table of :class:`CallSignature` by structure."""

    __slots__ = ("by_structure",)

    def __init__(self) -> None:
        #: structure -> signatures, newest first (read directly on the hot path)
        self.by_structure: dict[Hashable, list[CallSignature]] = {}

    def find(self, structure: Hashable, avals: tuple[ShapedArray, ...],
             context: Hashable) -> CallSignature | None:
        """The remembered signature with these avals and tracing context (one
        that was traced in this process: with params)."""
        for sig in self.by_structure.get(structure, ()):
            if sig.avals == avals and sig.context == context and sig.params is not None:
                return sig
        return None

    def add(self, structure: Hashable, avals: tuple[ShapedArray, ...], context: Hashable,
            params: PjitParams) -> CallSignature:
        """Remembers the params of a new signature; returns its entry."""
        sig = CallSignature(structure, avals, context, params)
        self._push(sig)
        return sig

    def add_warm(self, structure: Hashable, avals: tuple[ShapedArray, ...], context: Hashable,
                 run: FastEntry) -> None:
        """Remembers a signature whose program came from the persistent trace
        cache: it runs, but has no params (a call that needs them traces)."""
        self._push(CallSignature(structure, avals, context, None, run))

    def add_run(self, sig: CallSignature, run: FastEntry) -> None:
        """Records that ``sig`` ran as ``run`` at top level: in ``sig`` itself
        the first time, else in a new entry sharing its params."""
        if sig.run is None and sig in self.by_structure.get(sig.structure, ()):
            sig.run = run
            return
        self._push(CallSignature(sig.structure, sig.avals, sig.context, sig.params, run))

    def _push(self, sig: CallSignature) -> None:
        entries = self.by_structure.get(sig.structure)
        if entries is None:
            if len(self.by_structure) >= MAX_STRUCTURES:
                del self.by_structure[next(iter(self.by_structure))]
            entries = self.by_structure[sig.structure] = []
        entries.insert(0, sig)
        del entries[MAX_PER_STRUCTURE:]

    def signatures(self) -> Iterator[CallSignature]:
        for entries in self.by_structure.values():
            yield from entries

    def num_runs(self) -> int:
        """How many compiled placements are remembered."""
        return sum(1 for sig in self.signatures() if sig.run is not None)

    def clear(self) -> None:
        self.by_structure.clear()

    def __len__(self) -> int:
        return sum(len(entries) for entries in self.by_structure.values())

    def __repr__(self) -> str:
        return f"<CallCache: {len(self)} signatures, {self.num_runs()} compiled>"

