"""Deleted and donated buffers: the error a later use raises, and who donated.

A donated or deleted ``ArrayImpl`` keeps its aval but has no buffers; every
layer that finds one (an Array method, a transfer, an executable call) raises
:class:`DeletedArrayError` with :func:`deleted_message`, which names the call
that consumed the buffers when :func:`record_donation` saw it.

An argument deleted or donated by another thread after a call checked it
makes the runtime refuse the call; :func:`deleted_argument_error` turns that
failure into the same :class:`DeletedArrayError` a use after the delete gets.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from lamina_interpreters_pxla._jaxlib import ArrayImpl, ArrayImplClass
from lamina_tracing_core.avals import ShapedArray

__all__ = ["DeletedArrayError", "record_donation", "donor_of", "deleted_message",
           "deleted_argument_error"]


class DeletedArrayError(RuntimeError):
    """An array whose buffers were deleted or donated was used."""


#: id(ArrayImpl) -> (weak reference to it, the call that donated it). ArrayImpl
#: is weak-referenceable but not hashable, hence the id key; the entry goes
#: away with the ArrayImpl.
_donors: dict[int, tuple[weakref.ref[Any], str]] = {}


def record_donation(impl: ArrayImpl, donor: str) -> None:
    """Remembers that ``donor`` (e.g. ``jit(f)``) consumed ``impl``'s buffers,
    so a later use of the array can say so."""
    key = id(impl)

    def forget(_ref: weakref.ref[Any]) -> None:
        _donors.pop(key, None)

    _donors[key] = (weakref.ref(impl, forget), donor)


def donor_of(impl: ArrayImpl) -> str | None:
    entry = _donors.get(id(impl))
    if entry is None or entry[0]() is not impl:
        return None
    return entry[1]


def deleted_message(impl: ArrayImpl, what: str | None = None) -> str:
    """``Array has been deleted with shape=f32[3] (donated to jit(f))``."""
    aval = impl.aval
    shape = aval.str_short() if isinstance(aval, ShapedArray) else "?"
    donor = donor_of(impl)
    why = f" (its buffers were donated to {donor})" if donor else ""
    subject = f"{what}: " if what else ""
    return f"{subject}Array has been deleted with shape={shape}{why}."


def deleted_argument_error(impls: Sequence[Any],
                           subject: Callable[[int], str]) -> DeletedArrayError | None:
    """After a failed call into the runtime: the error for the first of
    ``impls`` that is deleted now (``subject(i)`` names it, e.g. ``add:
    argument 0``), or None when none is (the failure has another cause).

    Checking arguments and handing them to the runtime are not one atomic
    step, so another thread may delete or donate an argument in between; the
    runtime then refuses it, and this names it as a use after the delete would."""
    for i, impl in enumerate(impls):
        if type(impl) is ArrayImplClass and impl.is_deleted():
            return DeletedArrayError(deleted_message(impl, subject(i)))
    return None
