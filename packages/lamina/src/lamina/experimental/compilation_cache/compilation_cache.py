"""JAX's ``jax.experimental.compilation_cache.compilation_cache``: the
functions of :mod:`lamina.compilation_cache`."""

from lamina.compilation_cache import initialize_cache, is_initialized, reset_cache, set_cache_dir

__all__ = ["initialize_cache", "is_initialized", "reset_cache", "set_cache_dir"]
