"""Running compiled programs.

Compiling is :mod:`lamina_interpreters_pxla.compiler`'s (its names are
importable from here too). :class:`Executable` wraps the compiled program with what is needed to call it
safely: the argument and result types, shardings and names. jaxlib crashes
the process (instead of raising) when an argument's shards sit on other
devices, or in another order, than the program's assignment, so every call is
checked in Python first and errors name the argument (``y['hi']``) and the
function. Outputs come back as lamina ``Array``s through jaxlib's result
handlers, asynchronously: ``call`` returns before the computation finishes
(use :func:`block_until_ready`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from lamina_interpreters_pxla._jaxlib import (
    ArrayImpl,
    ArrayImplClass,
    Device,
    JaxRuntimeError,
    LoadedExecutable,
    _jax,
    xc,
)
from lamina_interpreters_pxla.array import Array, deleted_message, record_donation
from lamina_interpreters_pxla import buffer_use
from lamina_interpreters_pxla.donation import DeletedArrayError, deleted_argument_error
from lamina_interpreters_pxla.backends import device_list
from lamina_interpreters_pxla.compiler import BuildOptions as BuildOptions
from lamina_interpreters_pxla.compiler import CompileError as CompileError
from lamina_interpreters_pxla.compiler import clear_compile_cache as clear_compile_cache
from lamina_interpreters_pxla.compiler import compile_module as compile_module
from lamina_interpreters_pxla.compiler import compile_stats as compile_stats
from lamina_interpreters_pxla.compiler import result_handler
from lamina_interpreters_pxla.effects_runtime import TokenSlot, callback_error
from lamina_interpreters_pxla.execution_guard import check_execution_allowed
from lamina_interpreters_pxla.execution_guard import state as _execution_guard
from lamina_interpreters_pxla.layouts import has_custom_layout
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    SingleDeviceSharding,
    is_sharding,
)
from lamina_interpreters_pxla.transfer import shard_args
from lamina_linear_util.tree_util import tree_leaves
from lamina_tracing_core.avals import ShapedArray, get_aval


class ExecutableCallError(ValueError):
    """An executable was called with arguments it cannot take."""


# --- results ---------------------------------------------------------------------
def output_shardings_of(loaded: LoadedExecutable, devices: Sequence[Device],
                        num_outputs: int) -> list[Any]:
    """The shardings XLA chose for the outputs (SPMD), as lamina shardings."""
    ops = loaded.get_output_shardings()
    if ops is None:
        if len(devices) != 1:
            raise ExecutableCallError(
                "the executable reports no output shardings; pass out_shardings")
        return [SingleDeviceSharding(devices[0])] * num_outputs
    dl = device_list(devices)
    return [GSPMDSharding(dl, xc.HloSharding.from_proto(op)) for op in ops]


# --- the executable ------------------------------------------------------------------
_warned_donations: set[tuple[str, int]] = set()


class Executable:
    """A compiled program with typed, named, sharded inputs and outputs.

    ``in_avals``, ``in_shardings``, ``arg_names`` and ``donated_invars`` describe
    every flat argument the caller passes; ``kept_var_idx`` lists those that
    reach the program (the lowering prunes unused ones). ``devices`` is the
    device assignment, replica-major. ``out_shardings=None`` takes XLA's choice.

    A program with effects (``lowering.host_callbacks``, ``lowering.has_token``)
    runs through :meth:`execute` too: it gets the previous call's
    ordered-effects token, its call waits until the program has finished, and
    an exception raised by one of its callbacks comes back from that call as a
    ``CallbackError`` naming the callback and the program.
    """

    def __init__(self, loaded: LoadedExecutable, *, name: str,
                 in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray],
                 in_shardings: Sequence[Any], out_shardings: Sequence[Any] | None,
                 devices: Sequence[Device], options: BuildOptions = BuildOptions(),
                 arg_names: Sequence[str | None] | None = None,
                 result_names: Sequence[str | None] | None = None,
                 donated_invars: Sequence[bool] | None = None,
                 kept_var_idx: Sequence[int] | None = None,
                 out_committed: Sequence[bool] | None = None,
                 lowering: Any = None):
        n_in = len(in_avals)
        self.loaded = loaded
        self.name = name
        self.in_avals = list(in_avals)
        self.out_avals = list(out_avals)
        self.devices = list(devices)
        self.options = options
        self.arg_names = list(arg_names) if arg_names is not None else [None] * n_in
        self.result_names = (list(result_names) if result_names is not None
                             else [None] * len(out_avals))
        self.donated_invars = (list(donated_invars) if donated_invars is not None
                               else [False] * n_in)
        self.kept_var_idx = (tuple(kept_var_idx) if kept_var_idx is not None
                             else tuple(range(n_in)))
        self.in_shardings = list(in_shardings)
        has_token = bool(getattr(lowering, "has_token", False))
        self.out_shardings = (list(out_shardings) if out_shardings is not None
                              else output_shardings_of(loaded, self.devices, len(out_avals)
                                                       + has_token)[has_token:])
        self.out_committed = (list(out_committed) if out_committed is not None
                              else [True] * len(out_avals))
        self.lowering = lowering
        #: the Python functions the program calls back (registered when compiled)
        self.host_callbacks: tuple[Any, ...] = tuple(getattr(lowering, "host_callbacks", ()))
        self._token_slot = (TokenSlot(self.devices) if getattr(lowering, "has_token", False)
                            else None)
        #: True when calls must take :meth:`_execute_effectful` (not jaxlib's C++ path)
        self.has_effects = bool(self.host_callbacks) or self._token_slot is not None
        self._check_signature()
        self._handlers = [result_handler(a, s, c) for a, s, c in
                          zip(self.out_avals, self.out_shardings, self.out_committed)]
        self._any_donated = any(self.donated_invars)
        #: per kept argument, whether it is donated (None: none is)
        self._donated_kept = ([self.donated_invars[i] for i in self.kept_var_idx]
                              if self._any_donated else None)

    # -- construction checks ----------------------------------------------------
    def _check_signature(self) -> None:
        n_in = len(self.in_avals)
        for what, seq in (("in_shardings", self.in_shardings), ("arg_names", self.arg_names),
                          ("donated_invars", self.donated_invars)):
            if len(seq) != n_in:
                raise ValueError(f"Executable {self.name}: {len(seq)} {what} for {n_in} "
                                 "arguments")
        if len(self.out_shardings) != len(self.out_avals):
            raise ValueError(f"Executable {self.name}: {len(self.out_shardings)} out_shardings "
                             f"for {len(self.out_avals)} outputs")
        for s in self.in_shardings + self.out_shardings:
            if not is_sharding(s):
                raise TypeError(f"Executable {self.name}: {s!r} is not a lamina sharding")
        local = list(self.loaded.local_devices())
        expected = [d for d in self.devices if d.process_index == d.client.process_index()]
        if local != expected:
            raise ExecutableCallError(
                f"Executable {self.name}: the program's devices {local} differ from the "
                f"device assignment {expected}")
        for i in self.kept_var_idx:
            order = list(self.in_shardings[i]._addressable_device_assignment)
            if order != local:
                raise ExecutableCallError(
                    f"Executable {self.name}: argument {self._arg_label(i)} is sharded "
                    f"over {order}, not the program's devices {local} in that order")

    def _arg_label(self, i: int) -> str:
        name = self.arg_names[i] if i < len(self.arg_names) else None
        return f"'{name}'" if name else f"#{i}"

    # -- calling ---------------------------------------------------------------
    def call(self, *args: Any) -> list[Array]:
        """Runs the program on ``args`` (every flat argument, kept or not) and
        returns its outputs as Arrays (without waiting for them)."""
        return [Array(r) for r in self.call_impls(args)]

    __call__ = call

    def call_impls(self, args: Sequence[Any]) -> list[ArrayImpl]:
        """Like :meth:`call` but returns jaxlib ``ArrayImpl``s."""
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name} takes {len(self.in_avals)} arguments, got "
                            f"{len(args)}")
        impls = self.prepare_args(args)
        return self.execute(impls)

    def prepare_args(self, args: Sequence[Any]) -> list[ArrayImpl]:
        """Checks each kept argument and puts host data (or uncommitted arrays on
        the wrong devices) where the program needs it, in one ``shard_args``."""
        impls: list[Any] = []
        pending: list[tuple[int, Any, Any]] = []
        for pos, i in enumerate(self.kept_var_idx):
            x = args[i]
            impl = x._arr if type(x) is Array else x
            if type(impl) is ArrayImplClass:
                if self._accepts(i, impl):
                    impls.append(impl)
                    continue
            else:
                self._check_host_value(i, x)
            impls.append(None)
            pending.append((pos, x, self.in_shardings[i]))
        if pending:
            placed = shard_args([p[1] for p in pending], [p[2] for p in pending],
                                arg_names=[self.arg_names[self.kept_var_idx[p[0]]]
                                           for p in pending])
            for (pos, _, _), impl in zip(pending, placed):
                impls[pos] = impl
        if self._any_donated:
            self._check_donations(impls)
        return impls

    def _accepts(self, i: int, impl: ArrayImpl) -> bool:
        """True if ``impl`` can go to the program as is; False if it must be
        moved first (uncommitted); raises if it is committed elsewhere."""
        if impl.is_deleted():
            raise DeletedArrayError(deleted_message(
                impl, f"{self.name}: argument {self._arg_label(i)}"))
        aval, expected = impl.aval, self.in_avals[i]
        if aval.shape != expected.shape or aval.dtype != expected.dtype:
            raise ExecutableCallError(
                f"{self.name}: argument {self._arg_label(i)} has type "
                f"{_str_aval(aval)} but the program expects {expected.str_short()}")
        if has_custom_layout(impl):
            return False  # shard_args brings it back to the default layout
        sharding, wanted = impl._sharding, self.in_shardings[i]
        if sharding is wanted or sharding == wanted:
            return True
        if is_sharding(sharding) and sharding.is_equivalent_to(wanted, len(aval.shape)):
            return True
        if not impl._committed:
            return False
        raise ExecutableCallError(
            f"{self.name}: argument {self._arg_label(i)} of type {expected.str_short()} is "
            f"committed to {sharding!r}, but the program expects {wanted!r}; device_put it "
            "there first")

    def _check_host_value(self, i: int, x: Any) -> None:
        try:
            aval = get_aval(x)
        except TypeError as e:
            raise ExecutableCallError(
                f"{self.name}: argument {self._arg_label(i)} is not a valid array: {e}") from e
        expected = self.in_avals[i]
        if aval.shape != expected.shape or aval.dtype != expected.dtype:
            raise ExecutableCallError(
                f"{self.name}: argument {self._arg_label(i)} has type {aval.str_short()} but "
                f"the program expects {expected.str_short()}")

    def _check_donations(self, impls: list[ArrayImpl]) -> None:
        seen: dict[int, int] = {}
        for pos, impl in enumerate(impls):
            i = self.kept_var_idx[pos]
            other = seen.get(id(impl))
            if other is not None and (self.donated_invars[i] or self.donated_invars[other]):
                raise ExecutableCallError(
                    f"{self.name}: the same buffer is passed as arguments "
                    f"{self._arg_label(other)} and {self._arg_label(i)}, and one of them is "
                    "donated; pass a copy")
            seen[id(impl)] = i

    def execute(self, impls: list[ArrayImpl]) -> list[ArrayImpl]:
        """Runs the program on prepared single-program arguments (from
        :meth:`prepare_args`); handles donation bookkeeping."""
        def subject(pos: int) -> str:
            return f"{self.name}: argument {self._arg_label(self.kept_var_idx[pos])}"

        if _execution_guard.disallowed:
            check_execution_allowed(self.name)
        if self.has_effects:
            return self._execute_effectful(impls, subject)
        # another thread may have deleted or donated an argument since the checks
        buffer_use.using(impls, subject, self._donated_kept)
        try:
            results = self.loaded.execute_sharded(impls)
        except JaxRuntimeError as e:
            # a donation by jaxlib's C++ path, which lamina does not see
            raise deleted_argument_error(impls, subject) or runtime_error(self, e) from e
        finally:
            buffer_use.done_using(impls, self._donated_kept)
        outs: list[ArrayImpl] = results.consume_with_handlers(self._handlers)
        if self._any_donated:
            self._after_donation(impls)
        return outs

    def _execute_effectful(self, impls: list[ArrayImpl], subject: Any) -> list[ArrayImpl]:
        """:meth:`execute` for a program with callbacks: threads the ordered
        token, waits for the program (its callbacks have run when the call
        returns) and names a callback that raised."""
        slot = self._token_slot
        args = [slot.take(), *impls] if slot is not None else impls
        buffer_use.using(impls, subject, self._donated_kept)
        try:
            results = self.loaded.execute_sharded(args, with_tokens=True)
            results.consume_token().block_until_ready()
        except JaxRuntimeError as e:
            failed = callback_error(self.host_callbacks, self.name, e)
            if failed is not None:
                raise failed from failed.__cause__
            raise deleted_argument_error(impls, subject) or runtime_error(self, e) from e
        finally:
            buffer_use.done_using(impls, self._donated_kept)
        if slot is None:
            outs: list[ArrayImpl] = results.consume_with_handlers(self._handlers)
        else:
            outs = results.consume_with_handlers([slot.handler, *self._handlers])
            slot.put(outs.pop(0))
        if self._any_donated:
            self._after_donation(impls)
        return outs

    def _after_donation(self, impls: list[ArrayImpl]) -> None:
        unused = []
        for pos, impl in enumerate(impls):
            i = self.kept_var_idx[pos]
            if not self.donated_invars[i]:
                continue
            if impl.is_deleted():
                record_donation(impl, self.name)
            else:
                unused.append(f"{self.in_avals[i].str_long()} {self._arg_label(i)}")
        if unused and (self.name, len(unused)) not in _warned_donations:
            _warned_donations.add((self.name, len(unused)))
            # JAX's wording first (code matches on it), then lamina's names
            warnings.warn(f"Some donated buffers were not usable: {', '.join(unused)} "
                          f"(in {self.name}).", UserWarning, stacklevel=4)

    # -- inspection --------------------------------------------------------------
    def as_text(self) -> str:
        """The optimized HLO."""
        return str(self.loaded.hlo_modules()[0].to_string())

    def cost_analysis(self) -> dict[str, Any]:
        return dict(self.loaded.cost_analysis())

    def memory_analysis(self) -> Any:
        return self.loaded.get_compiled_memory_stats()

    def runtime_executable(self) -> LoadedExecutable:
        return self.loaded

    def __repr__(self) -> str:
        return (f"Executable({self.name}, {len(self.in_avals)} args -> "
                f"{len(self.out_avals)} results on {len(self.devices)} devices)")


def _str_aval(aval: Any) -> str:
    return aval.str_short() if isinstance(aval, ShapedArray) else repr(aval)


def runtime_error(exe: Executable, e: Exception) -> Exception:
    """A failed execution of ``exe`` as an error that names the program."""
    msg = str(e)
    if "deleted or donated" in msg:
        return ExecutableCallError(f"{exe.name}: an argument was deleted or donated: {msg}")
    return type(e)(f"{exe.name}: {msg}")


# --- waiting ---------------------------------------------------------------------
def block_until_ready(x: Any) -> Any:
    """Waits until every Array in the pytree ``x`` is computed; returns ``x``.

    The arrays are waited on in one batched call; only when it fails are
    they checked one by one, so the error names a deleted (or donated) array."""
    tree = x
    impls = []
    arrays = []
    for leaf in tree_leaves(tree):
        if type(leaf) is Array:
            arrays.append(leaf)
            impls.append(leaf._arr)
        elif type(leaf) is ArrayImplClass:
            impls.append(leaf)
        elif hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    if impls:
        try:
            _jax.batched_block_until_ready(impls)
        except JaxRuntimeError:
            for x in arrays:
                x._check_if_deleted("block_until_ready")
            raise
    return tree
