"""What the runtime keeps for programs with effects (callbacks into Python).

- **Ordered-effects tokens.** A module with ordered effects takes a token
  (a ``bool[0]`` array) as its first argument and returns one as its first
  result (``LoweringResult.has_token``). The runtime passes each call the
  token the previous call on the same devices returned: the next program
  cannot start before that buffer exists, i.e. before the previous program
  finished, so ordered effects happen in program order across calls.
- **Callback errors.** A callback that raises makes XLA fail the execution
  with a generic runtime error; :func:`callback_error` finds the exception
  the callback raised (kept by the lowering's ``HostFunction``) and turns it
  into a ``CallbackError`` naming the callback, where it was defined and the
  program, chained to the original exception.
- :func:`effects_barrier` waits until every program with effects has
  finished (JAX's ``effects_barrier``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import ArrayImpl, Device, JaxRuntimeError, _jax
from lamina_interpreters_pxla.buffers import put_host_value
from lamina_interpreters_pxla.compiler import result_handler
from lamina_interpreters_pxla.sharding import GSPMDSharding, single_device_sharding
from lamina_mlir_lowering.lowering_result import TOKEN_AVAL
from lamina_tracing_core.callbacks import CallbackError

__all__ = ["ProgramCallbackError", "TokenSlot", "callback_error", "effects_barrier",
           "note_running"]


class ProgramCallbackError(CallbackError, JaxRuntimeError):  # type: ignore[misc, valid-type]
    """A callback raised while a compiled program ran: a ``CallbackError``
    that is also jaxlib's ``JaxRuntimeError``, the type JAX raises there (code
    written for JAX catches that one and reads the callback's exception from
    the message)."""

_lock = threading.Lock()
#: per device assignment (device ids), the token the last ordered program returned
_tokens: dict[tuple[int, ...], ArrayImpl] = {}
#: runtime tokens of programs with effects that may still be running
_running: list[Any] = []


def _token_sharding(devices: Sequence[Device]) -> Any:
    if len(devices) == 1:
        return single_device_sharding(devices[0])
    return GSPMDSharding.get_replicated(list(devices))


class TokenSlot:
    """The ordered-effects token of one program's devices: ``take()`` gives
    the argument for the next call, ``put(results)`` keeps what it returned."""

    __slots__ = ("key", "sharding", "handler")

    def __init__(self, devices: Sequence[Device]):
        self.key = tuple(d.id for d in devices)
        self.sharding = _token_sharding(devices)
        self.handler = result_handler(TOKEN_AVAL, self.sharding, True)

    def take(self) -> ArrayImpl:
        with _lock:
            token = _tokens.get(self.key)
        if token is None or token.is_deleted():
            token = put_host_value(np.zeros((0,), np.bool_), self.sharding, committed=True,
                                   what="ordered effects", name="token")
        return token

    def put(self, token: ArrayImpl) -> None:
        with _lock:
            _tokens[self.key] = token


def note_running(runtime_token: Any) -> None:
    """Remembers a program with effects until :func:`effects_barrier`."""
    with _lock:
        _running.append(runtime_token)
        if len(_running) > 64:
            del _running[:32]  # old entries have long finished (calls block on errors)


def effects_barrier() -> None:
    """Waits until every program with effects started so far has finished."""
    with _lock:
        running, _running[:] = list(_running), []
        tokens = list(_tokens.values())
    for token in running:
        token.block_until_ready()
    live = [t for t in tokens if not t.is_deleted()]
    if live:
        _jax.batched_block_until_ready(live)


def callback_error(host_callbacks: Sequence[Any], program: str,
                   error: BaseException) -> ProgramCallbackError | None:
    """The ``CallbackError`` for a failed run of ``program`` whose callback
    raised (None when no callback did); resets the callbacks' kept errors."""
    failed = None
    for fun in host_callbacks:
        raised = getattr(fun, "error", None)
        if raised is not None:
            fun.error = None
            if failed is None:
                failed = (fun, raised)
    if failed is None:
        return None
    fun, raised = failed
    err = ProgramCallbackError(f"{fun.callback.where()} raised {type(raised).__name__}: {raised} "
                        f"(while running {program})")
    err.__cause__ = raised
    return err
