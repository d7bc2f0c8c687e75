"""A delete or donation by another thread never frees buffers a call is
reading (jaxlib reads them without the GIL; freeing them crashes the
process): the delete waits for the call, and calls that start after the
delete began raise DeletedArrayError naming the call and the argument.

Each test makes the other thread's timing deterministic: the runtime entry
point a call reaches is wrapped so that it starts the deleting thread, gives
it ample time to finish, and records whether it did."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import buffer_use, buffers, dispatch
from lamina_tracing_core import lax

#: how long the deleting thread gets; it must still be waiting afterwards
_GRACE_S = 0.3


class _OtherThread:
    """Runs ``action`` in a new thread; ``ran_meanwhile`` tells whether it
    finished within the grace period (it must not, while a call reads)."""

    def __init__(self, action: Any):
        self.thread = threading.Thread(target=action)
        self.ran_meanwhile: bool | None = None

    def start_and_wait(self) -> None:
        self.thread.start()
        self.thread.join(_GRACE_S)
        self.ran_meanwhile = not self.thread.is_alive()

    def finish(self) -> None:
        self.thread.join(30)
        assert not self.thread.is_alive()


class _DeletesMeanwhile:
    """A loaded executable whose ``execute_sharded`` lets another thread try
    to delete ``victim`` first."""

    def __init__(self, loaded: Any, victim: px.Array):
        self.loaded = loaded
        self.other = _OtherThread(victim.delete)

    def execute_sharded(self, impls: list[Any]) -> Any:
        self.other.start_and_wait()
        return self.loaded.execute_sharded(impls)


def _entry_for(x: px.Array) -> Any:
    """The eager cache entry ``lax.sin(x)`` runs (the only one)."""
    dispatch.clear_cache()
    lax.sin(x)
    entry, = dispatch._cache.values()
    return entry


def test_a_delete_waits_for_the_eager_op_reading_the_array() -> None:
    x = px.device_put(np.arange(4, dtype=np.float32))
    entry = _entry_for(x)
    real = entry.loaded
    entry.loaded = wrapped = _DeletesMeanwhile(real, x)
    try:
        out = lax.sin(x)
    finally:
        entry.loaded = real
    wrapped.other.finish()
    assert wrapped.other.ran_meanwhile is False
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(4, dtype=np.float32)))
    assert x.is_deleted()


def test_an_executable_call_holds_its_arguments() -> None:
    x = px.device_put(np.ones(4, np.float32))
    exe = _entry_for(x).executable
    real = exe.loaded
    exe.loaded = wrapped = _DeletesMeanwhile(real, x)
    try:
        exe.call(x)
    finally:
        exe.loaded = real
    wrapped.other.finish()
    assert wrapped.other.ran_meanwhile is False and x.is_deleted()


def test_calls_starting_after_a_delete_began_refuse_the_array() -> None:
    x = px.device_put(np.ones(4, np.float32))
    impl = x._arr
    buffer_use.using([impl], str)  # a call in flight
    other = _OtherThread(x.delete)
    other.start_and_wait()
    assert other.ran_meanwhile is False
    with pytest.raises(px.DeletedArrayError, match=r"^sin: argument 0: Array has been deleted"):
        lax.sin(x)
    buffer_use.done_using([impl])
    other.finish()
    assert x.is_deleted()


def test_executable_call_on_a_deleted_array_is_a_deleted_array_error() -> None:
    x = px.device_put(np.ones(4, np.float32))
    exe = _entry_for(x).executable
    x.delete()
    with pytest.raises(px.DeletedArrayError, match=r"^sin: argument 'args\[0\]'"):
        exe.call(x)


def test_a_donating_call_waits_for_the_calls_reading_its_argument() -> None:
    x = px.device_put(np.ones(4, np.float32))
    impl = x._arr
    buffer_use.using([impl], str)  # another call reads x
    donor = _OtherThread(lambda: buffer_use.using([impl], str, donated=[True]))
    donor.start_and_wait()
    assert donor.ran_meanwhile is False
    buffer_use.done_using([impl])
    donor.finish()  # the claim went through once the reader was done
    with pytest.raises(px.DeletedArrayError):
        buffer_use.using([impl], str)  # the donation has begun: refused
    buffer_use.done_using([impl], donated=[True])
    buffer_use.using([impl], str)  # the donating call never ran: x is still there
    buffer_use.done_using([impl])


def test_a_transfer_holds_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    x = px.device_put(np.arange(4, dtype=np.float32), px.devices()[0])
    other = _OtherThread(x.delete)
    real = buffers._jax.batched_copy_array_to_devices_with_sharding

    class _Jax:
        def __getattr__(self, name: str) -> Any:
            return getattr(buffers._jax, name)

        @staticmethod
        def batched_copy_array_to_devices_with_sharding(*args: Any) -> Any:
            other.start_and_wait()
            return real(*args)

    monkeypatch.setattr(buffers, "_jax", _Jax())
    moved = px.device_put(x, px.devices()[1])
    other.finish()
    assert other.ran_meanwhile is False and x.is_deleted()
    np.testing.assert_array_equal(np.asarray(moved), np.arange(4, dtype=np.float32))


def test_a_host_copy_holds_its_array(monkeypatch: pytest.MonkeyPatch) -> None:
    x = px.device_put(np.arange(4, dtype=np.float32))
    other = _OtherThread(x.delete)
    real = buffers._copy_to_host

    def copy_meanwhile(impl: Any) -> Any:
        other.start_and_wait()
        return real(impl)

    monkeypatch.setattr(buffers, "_copy_to_host", copy_meanwhile)
    assert np.asarray(x).tolist() == [0.0, 1.0, 2.0, 3.0]
    other.finish()
    assert other.ran_meanwhile is False and x.is_deleted()


def test_deleting_twice_from_two_threads() -> None:
    x = px.device_put(np.ones(4, np.float32))
    impl = x._arr
    buffer_use.using([impl], str)
    first, second = _OtherThread(x.delete), _OtherThread(x.delete)
    first.start_and_wait()
    second.start_and_wait()
    assert first.ran_meanwhile is False and second.ran_meanwhile is False
    buffer_use.done_using([impl])
    first.finish()
    second.finish()
    assert x.is_deleted()
    # nothing is left marked
    assert not buffer_use._readers and not buffer_use._ending


def test_a_call_donating_a_buffer_it_also_reads_does_not_wait_for_itself() -> None:
    # jit(f, donate_argnums=0)(x, x): the runtime rejects it with a named
    # error; the guard must not wait for the call's own read of x
    x = px.device_put(np.ones(4, np.float32))
    impl = x._arr
    for donated in ([True, False], [False, True], [True, True]):
        call = _OtherThread(lambda d=donated: buffer_use.using([impl, impl], str, donated=d))
        call.start_and_wait()
        assert call.ran_meanwhile is True, donated
        buffer_use.done_using([impl, impl], donated=donated)
    assert not buffer_use._readers and not buffer_use._ending
