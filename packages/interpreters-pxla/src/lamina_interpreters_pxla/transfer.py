"""``shard_args``: put many values, lamina Arrays included, where they need to
be, in few jaxlib calls.

The work happens in :mod:`lamina_interpreters_pxla.buffers` (host data,
grouped device-to-device copies, resharding and layout programs; every error
names the argument); this module adds the ``Array`` wrapper on top and keeps
the names the other modules use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_interpreters_pxla._jaxlib import ArrayImpl
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.array import place_host_value as place_host_value
from lamina_interpreters_pxla.buffers import (
    ALWAYS_COPY,
    DONATE_INPUT,
    REUSE_INPUT,
    CopySemantics,
    HostBufferSemantics,
    InvalidArgumentError,
    LayoutError,
    host_array,
    put_host_value,
    relabel,
    shard_impls,
)

__all__ = [
    "ALWAYS_COPY", "DONATE_INPUT", "REUSE_INPUT", "CopySemantics", "HostBufferSemantics",
    "InvalidArgumentError", "LayoutError", "host_array", "place_host_value", "put_host_value",
    "relabel", "shard_args",
]


def shard_args(values: Sequence[Any], shardings: Sequence[Any],
               layouts: Sequence[Any] | None = None,
               copy_semantics: Sequence[Any] | None = None, *,
               committed: Sequence[bool] | None = None,
               zero_copy: Sequence[bool] | None = None,
               arg_names: Sequence[str | None] | None = None,
               what: str = "device_put") -> list[ArrayImpl]:
    """Puts ``values[i]`` (an Array, an ``ArrayImpl`` or host data) on
    ``shardings[i]`` and returns jaxlib ``ArrayImpl``s in the same order; the
    other arguments are those of :func:`~lamina_interpreters_pxla.buffers.shard_impls`."""
    impls = [x._arr if type(x) is Array else x for x in values]
    return shard_impls(impls, shardings, layouts, copy_semantics, committed=committed,
                       zero_copy=zero_copy, arg_names=arg_names, what=what)
