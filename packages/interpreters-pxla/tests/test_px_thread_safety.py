"""An array deleted by another thread between a call's checks and the
runtime's use of it: the call raises DeletedArrayError naming the call and
the argument, like a use after the delete.

The other thread is simulated deterministically: the runtime entry point
the call reaches is wrapped so that it deletes the argument first (what a
thread scheduled in that window does)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import array as array_module
from lamina_interpreters_pxla import buffers, dispatch
from lamina_interpreters_pxla._jaxlib import JaxRuntimeError
from lamina_tracing_core import lax


class _DeletesFirst:
    """A loaded executable whose ``execute_sharded`` deletes ``victim`` first."""

    def __init__(self, loaded: Any, victim: px.Array):
        self.loaded = loaded
        self.victim = victim

    def execute_sharded(self, impls: list[Any]) -> Any:
        self.victim.delete()
        return self.loaded.execute_sharded(impls)


def _entry_for(x: px.Array) -> Any:
    """The eager cache entry ``lax.sin(x)`` runs (the only one)."""
    dispatch.clear_cache()
    lax.sin(x)
    entry, = dispatch._cache.values()
    return entry


def test_eager_op_on_an_array_deleted_after_the_check() -> None:
    x = px.device_put(np.ones(4, np.float32))
    entry = _entry_for(x)
    real = entry.loaded
    entry.loaded = _DeletesFirst(real, x)
    try:
        with pytest.raises(px.DeletedArrayError,
                           match=r"^sin: argument 0: Array has been deleted with shape=f32\[4\]"):
            lax.sin(x)
    finally:
        entry.loaded = real


def test_executable_call_on_an_array_deleted_after_the_check() -> None:
    x = px.device_put(np.ones(4, np.float32))
    exe = _entry_for(x).executable
    real = exe.loaded
    exe.loaded = _DeletesFirst(real, x)
    try:
        with pytest.raises(px.DeletedArrayError,
                           match=r"^sin: argument 'args\[0\]': Array has been deleted"):
            exe.call(x)
    finally:
        exe.loaded = real


def test_executable_call_on_a_deleted_array_is_a_deleted_array_error() -> None:
    x = px.device_put(np.ones(4, np.float32))
    exe = _entry_for(x).executable
    x.delete()
    with pytest.raises(px.DeletedArrayError, match=r"^sin: argument 'args\[0\]'"):
        exe.call(x)


def test_transfer_of_an_array_deleted_after_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # jaxlib's batched copy crashes on an array whose delete already ran, so
    # the simulated thread deletes the buffers as the copy starts and the copy
    # fails the way jaxlib's does when that happens during it
    x = px.device_put(np.ones(4, np.float32), px.devices()[0])

    def deleted_during_the_copy(impls: list[Any], *rest: Any) -> list[Any]:
        x.delete()
        raise JaxRuntimeError("INVALID_ARGUMENT: AcquireScopedRawBuffer called on deleted or "
                              "donated buffer")

    monkeypatch.setattr(buffers, "_batched_copy", deleted_during_the_copy)
    with pytest.raises(px.DeletedArrayError, match=r"^device_put: argument x\['x'\]: Array has been "
                                                   r"deleted with shape=f32\[4\]"):
        px.device_put({"x": x}, px.devices()[1])


def test_host_copy_of_an_array_deleted_after_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    x = px.device_put(np.ones(4, np.float32))
    real = array_module.to_host

    def deletes_first(impl: Any) -> Any:
        x.delete()
        return real(impl)

    monkeypatch.setattr(array_module, "to_host", deletes_first)
    with pytest.raises(px.DeletedArrayError, match=r"^Array has been deleted with shape=f32\[4\]"):
        np.asarray(x)
