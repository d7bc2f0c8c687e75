"""jit with shardings, tracing caches, AOT stages and sharded_jit."""

from lamina_sharded_jit.__about__ import __version__

__all__ = ["__version__"]
