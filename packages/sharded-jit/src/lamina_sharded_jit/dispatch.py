"""jit's cached Python path: signature check, batched argument placement, run.

Most cached calls never get here: ``jit`` returns jaxlib's C++ function
(``lamina_interpreters_pxla.cpp_dispatch``), which runs a known signature
itself. The C++ function falls back to Python for the calls it cannot take:
functions with static arguments, host values (numpy arrays, Python scalars)
and uncommitted arrays that must move, donation, and any first call of a
signature. Those calls use this module.

After the first top-level call of a jitted function with a given signature,
the function's call cache (:mod:`lamina_sharded_jit.call_cache`) keeps a
:class:`FastEntry` with the signature, under the argument tree structure (and
static arguments). A later call with that structure tries its entries: each
checks every flat argument against the recorded signature — the avals
(shape, dtype, weak type) compared by identity first, the sharding and the
committed flag — unwraps lamina ``Array``s to their jaxlib ``ArrayImpl``,
places the arguments that must move (host values, uncommitted arrays on other
devices) in one batched ``shard_args`` call, runs the executable and wraps
the outputs. Anything unexpected (another signature, a tracer, a deleted
array, an execution error) returns :data:`MISS` and the caller takes the full
path, which raises the clear error or builds a new entry.

Avals are interned (:func:`~lamina_sharded_jit.arguments.canonical_aval`): equal avals are the same object,
so the signature check is mostly identity comparisons, including for results
fed back as arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_interpreters_pxla import backends, buffer_use
from lamina_interpreters_pxla.array import Array, DeletedArrayError, record_donation
from lamina_interpreters_pxla.execution_guard import state as _execution_guard
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_interpreters_pxla.layouts import _custom_layouts
from lamina_interpreters_pxla.sharding import context_mesh_state
from lamina_interpreters_pxla.transfer import shard_args
from lamina_tracing_core import core, dtypes, trace_settings
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import EvalTrace, Tracer

from lamina_sharded_jit.arguments import aval_or_none

__all__ = ["FastEntry", "MISS", "at_top_level", "host_or_array"]

_PYTHON_SCALARS = (bool, int, float, complex)


class _Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<miss>"


MISS: Any = _Miss()

#: tracing-core's per-thread trace state: the dynamic trace is the eval trace
#: outside every staging transformation (read directly: the hot path).
_trace_state = core._state
_x64_state = dtypes.x64_state
_trace_settings = trace_settings.state
_default_device = backends._default_device_state
_context_mesh = context_mesh_state


def at_top_level() -> bool:
    """True when no staging trace (jit, make_jaxpr, pmap body) is active, so a
    call with concrete arguments runs now instead of being staged."""
    return _trace_state.dynamic.trace_type is EvalTrace


class FastEntry:
    """One compiled signature of a jitted function (see the module docstring)."""

    __slots__ = ("expected", "avals", "shardings", "committed", "n", "kept", "loaded",
                 "handlers", "out_tree", "donated_kept", "donated_mask", "name", "x64", "settings",
                 "default_device", "context_mesh", "executable",
                 "single_out", "aval0", "sharding0", "committed0")

    def __init__(self, *, avals: Sequence[ShapedArray], shardings: Sequence[Any],
                 committed: Sequence[bool | None], kept: Sequence[int], n_args: int,
                 compiled: Any, out_tree: Any, donated: Sequence[bool], name: str):
        self.expected = tuple(zip(avals, shardings, committed))
        self.avals = tuple(avals)
        self.shardings = tuple(shardings)
        self.committed = tuple(committed)
        # the first argument's expectations, for the one-argument case
        self.aval0 = avals[0] if avals else None
        self.sharding0 = shardings[0] if shardings else None
        self.committed0 = committed[0] if committed else None
        self.n = n_args
        self.kept = None if tuple(kept) == tuple(range(n_args)) else tuple(kept)
        self.executable = compiled.executable
        self.loaded = compiled.executable.loaded
        self.handlers = compiled.handlers
        self.out_tree = out_tree
        self.donated_kept = tuple(pos for pos, i in enumerate(kept) if donated[i])
        self.donated_mask = [bool(donated[i]) for i in kept] if self.donated_kept else None
        self.name = name
        self.x64 = _x64_state.enabled
        self.settings = _trace_settings.key
        self.default_device = _default_device.device
        self.context_mesh = _context_mesh.mesh
        self.single_out = out_tree.num_leaves == 1 and out_tree.num_nodes == 1

    def run(self, leaves: Sequence[Any]) -> Any:
        """The call's pytree result, or :data:`MISS`."""
        # The common case inline: every argument an Array whose aval, sharding
        # and committed flag are the very objects recorded (identity checks).
        # A deleted array makes the execution fail, and the full path (taken on
        # MISS) then names it.
        if _float_checks.any or _execution_guard.disallowed:
            return MISS  # the full path checks the results, or refuses to run
        if (self.x64 is not _x64_state.enabled or self.settings is not _trace_settings.key
                or self.default_device is not _default_device.device
                or self.context_mesh is not _context_mesh.mesh or _custom_layouts):
            return self._run_checked(leaves)
        if self.n == 1:
            x = leaves[0]
            if type(x) is not Array:
                return self._run_checked(leaves)
            impl = x._arr
            if (impl.aval is not self.aval0 or impl._sharding is not self.sharding0
                    or impl._committed is not self.committed0):
                return self._run_checked(leaves)
            impls = [impl]
        else:
            impls = []
            append = impls.append
            for x, aval, sharding, committed in zip(leaves, self.avals, self.shardings,
                                                    self.committed):
                if type(x) is not Array:
                    return self._run_checked(leaves)
                impl = x._arr
                if (impl.aval is not aval or impl._sharding is not sharding
                        or impl._committed is not committed):
                    return self._run_checked(leaves)
                append(impl)
        return self._execute(impls)

    def _run_checked(self, leaves: Sequence[Any]) -> Any:
        """:meth:`run` with the full signature check (equality, host values,
        moves, layouts)."""
        if (self.x64 is not _x64_state.enabled or self.settings is not _trace_settings.key
                or self.default_device is not _default_device.device
                or self.context_mesh is not _context_mesh.mesh):
            return MISS
        impls = self._check(leaves)
        if impls is None:
            return MISS
        return self._execute(impls)

    def _execute(self, impls: list[Any]) -> Any:
        """Runs the program on the checked arguments (one per flat argument)
        and wraps the results; :data:`MISS` if the execution fails."""
        if self.kept is not None:
            impls = [impls[i] for i in self.kept]
        if self.executable.has_effects:
            # tokens and callback errors; a failure must not run the program again
            outs = self.executable.execute(impls)
            if self.single_out:
                return Array(outs[0])
            return self.out_tree.unflatten([Array(o) for o in outs])
        try:
            # another thread may delete or donate an argument meanwhile
            buffer_use.using(impls, str, self.donated_mask)
        except DeletedArrayError:
            return MISS  # the full path names the argument
        try:
            results = self.loaded.execute_sharded(impls)
        except Exception:
            return MISS
        finally:
            buffer_use.done_using(impls, self.donated_mask)
        outs = results.consume_with_handlers(self.handlers)
        if self.donated_kept:
            self._record_donations(impls)
        if self.single_out:
            return Array(outs[0])
        return self.out_tree.unflatten([Array(o) for o in outs])

    def _check(self, leaves: Sequence[Any]) -> list[Any] | None:
        """The signature check by equality; places host values and
        uncommitted arrays that must move. None if the signature differs."""
        impls: list[Any] = []
        append = impls.append
        pending: list[int] | None = None
        for x, (aval, sharding, committed) in zip(leaves, self.expected):
            if type(x) is Array:
                impl = x._arr
                if impl.is_deleted():
                    return None
                a = impl.aval
                if a is not aval and a != aval:
                    return None
                if impl._committed is not committed:
                    return None
                s = impl._sharding
                if s is not sharding and s != sharding:
                    if committed:
                        return None
                    if pending is None:
                        pending = []
                    pending.append(len(impls))
                append(impl)
            elif committed is None and not isinstance(x, Tracer):
                if aval_or_none(x) != aval:
                    return None
                if pending is None:
                    pending = []
                pending.append(len(impls))
                append(x)
            else:
                return None
        if pending is not None:
            self._place(impls, pending)
        if _custom_layouts and any(id(i) in _custom_layouts for i in impls):
            return None
        return impls

    def _place(self, impls: list[Any], pending: list[int]) -> None:
        placed = shard_args([impls[i] for i in pending], [self.expected[i][1] for i in pending],
                            committed=[False] * len(pending), what=self.name)
        for i, impl in zip(pending, placed):
            impls[i] = impl

    def _record_donations(self, impls: list[Any]) -> None:
        for pos in self.donated_kept:
            impl = impls[pos]
            if impl.is_deleted():
                record_donation(impl, self.name)


def host_or_array(x: Any) -> bool:
    """True for the argument kinds the fast path takes: lamina Arrays and
    numeric host values (numpy arrays and scalars, Python scalars)."""
    t = type(x)
    if t is Array or t in _PYTHON_SCALARS:
        return True
    return isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "biufc"
