"""``lamina.memory``: the memory spaces a type can name (JAX's ``jax.memory``).

``lamina.memory.Space`` is the enum of spaces (``Space.Device``,
``Space.Host``, ``Space.Any``) that ``ShapedArray.memory_space`` holds; an
array in ``pinned_host`` memory has type ``float32<host>[4]``.
"""

from __future__ import annotations

from lamina_tracing_core.memory import MemorySpace as Space

__all__ = ["Space"]
