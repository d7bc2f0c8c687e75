"""The ``pmap_chunked_shards`` setting: how ``pmap`` lays its arrays out.

- ``True`` (the default, as in current JAX): every shard of a pmapped array
  keeps the array's rank (an ``[8, 100]`` array's shards are ``[1, 100]``), so
  pmap's inputs and outputs carry an ordinary mesh sharding
  (``NamedSharding`` over a 1-D ``Mesh`` of the devices) that ``jit`` and
  ``device_put`` accept without copies.
- ``False``: the classic pmap layout: shards drop the mapped axis (``[100]``)
  and arrays carry a rank-reducing ``PmapSharding``.

The setting lives in the runtime config (:data:`lamina_interpreters_pxla.config.config`,
environment variable ``LAMINA_PMAP_CHUNKED_SHARDS``); this module gives pmap
its reader and a scoped override.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from lamina_interpreters_pxla.config import config

__all__ = ["ENV_VAR", "chunked_shards", "chunked_shards_scope", "set_chunked_shards"]

ENV_VAR = "LAMINA_PMAP_CHUNKED_SHARDS"


def chunked_shards() -> bool:
    """The current value of the setting (see the module docstring)."""
    return config.pmap_chunked_shards


def set_chunked_shards(value: bool) -> bool:
    """Sets the setting; returns the previous value."""
    if not isinstance(value, bool):
        raise TypeError(f"pmap_chunked_shards must be a bool, got {value!r}")
    previous = config.pmap_chunked_shards
    config.update("pmap_chunked_shards", value)
    return previous


@contextmanager
def chunked_shards_scope(value: bool) -> Iterator[None]:
    """``with chunked_shards_scope(False):`` uses the classic layout in the block."""
    previous = set_chunked_shards(value)
    try:
        yield
    finally:
        set_chunked_shards(previous)
