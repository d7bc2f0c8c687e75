"""Buffers the runtime is reading: a delete waits for the calls that read them.

jaxlib's ``execute_sharded`` and its batched copies read their arguments'
buffers after they release the GIL. An ``ArrayImpl.delete()`` run by another
thread in that window frees what they are about to read, and the process
crashes. So every lamina path that hands buffers to the runtime marks them
*in use* for the length of the call, and every delete or donation lamina
makes goes through this module:

- :func:`using` marks buffers in use, or raises :class:`DeletedArrayError`
  (naming the argument) for one that is deleted or whose delete has begun;
  :func:`done_using` unmarks them.
- :func:`delete` deletes a buffer once no call is reading it; from the moment
  it starts, new calls refuse the buffer, so it never waits for long.
- A call that donates arguments claims them the same way (``donated`` in
  :func:`using`): it waits for the calls that read them to finish, and calls
  that start later refuse them, as they would after the donation.

A call never waits while holding buffers another waiter needs, so two
threads cannot deadlock: marking and claiming happen in one step under one
lock, and only a donating call ever waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from lamina_interpreters_pxla._jaxlib import ArrayImpl
from lamina_interpreters_pxla.donation import DeletedArrayError, deleted_message

__all__ = ["delete", "done_using", "run_using", "using"]

_lock = threading.Lock()
#: notified when a buffer stops being read, or its deletion ends
_changed = threading.Condition(_lock)
#: id(ArrayImpl) -> how many calls are reading it now
_readers: dict[int, int] = {}
#: ids of buffers being deleted or donated (their deletion has begun)
_ending: set[int] = set()


def using(impls: Sequence[ArrayImpl], subject: Callable[[int], str],
          donated: Sequence[bool] | None = None) -> None:
    """Marks ``impls`` as read by one call (until :func:`done_using`); the
    ``donated`` ones are claimed instead, waiting for their readers to finish.

    Raises DeletedArrayError, naming ``subject(i)``, for the first buffer that
    is deleted or being deleted; nothing is marked then."""
    readers = _readers
    with _lock:
        for i, impl in enumerate(impls):
            if impl.is_deleted() or id(impl) in _ending:
                raise DeletedArrayError(deleted_message(impl, subject(i)))
        if donated is None:
            for impl in impls:
                key = id(impl)
                readers[key] = readers.get(key, 0) + 1
            return
        claimed = []
        own: dict[int, int] = {}  # this call's own reads of a buffer it donates too
        for impl, claim in zip(impls, donated):
            key = id(impl)
            if claim:
                _ending.add(key)
                claimed.append(key)
            else:
                readers[key] = readers.get(key, 0) + 1
                own[key] = own.get(key, 0) + 1
        # (the runtime rejects a buffer both donated and read; never wait for oneself)
        while any(readers.get(key, 0) > own.get(key, 0) for key in claimed):
            _changed.wait()


def done_using(impls: Sequence[ArrayImpl], donated: Sequence[bool] | None = None) -> None:
    """Ends what :func:`using` began for the same arguments."""
    readers = _readers
    wake = False
    with _lock:
        for i, impl in enumerate(impls):
            key = id(impl)
            if donated is not None and donated[i]:
                _ending.discard(key)
                wake = True  # a delete of the donated buffer may wait
                continue
            left = readers[key] - 1
            if left:
                readers[key] = left
            else:
                del readers[key]
                if _ending and key in _ending:
                    wake = True
        if wake:
            _changed.notify_all()


def delete(impl: ArrayImpl) -> None:
    """Deletes ``impl``'s buffers once no call reads them. Deleting a buffer
    another thread is deleting (or donating) waits for that to finish."""
    key = id(impl)
    with _lock:
        while key in _ending:
            _changed.wait()
        _ending.add(key)
        try:
            while key in _readers:
                _changed.wait()
            impl.delete()
        finally:
            _ending.discard(key)
            _changed.notify_all()


def run_using(impls: Sequence[ArrayImpl], subject: Callable[[int], str],
              call: Callable[[], Any]) -> Any:
    """``call()`` with ``impls`` marked in use (a transfer, a host copy)."""
    using(impls, subject)
    try:
        return call()
    finally:
        done_using(impls)
