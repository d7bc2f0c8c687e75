"""``lamina.compilation_cache``: the persistent compilation cache's controls.

The cache itself (what it keys on, its settings, its safety) is described in
``lamina_interpreters_pxla.persistent_cache``. JAX has these functions at
``jax.experimental.compilation_cache.compilation_cache``; lamina has them there
too.
"""

from __future__ import annotations

import os
import warnings

from lamina_interpreters_pxla.persistent_cache import is_initialized, reset_cache, set_cache_dir

__all__ = ["initialize_cache", "is_initialized", "reset_cache", "set_cache_dir"]


def initialize_cache(path: str | os.PathLike[str]) -> None:
    """Deprecated (as in JAX): use :func:`set_cache_dir`."""
    warnings.warn("initialize_cache is deprecated; use set_cache_dir (or "
                  "config.update('compilation_cache_dir', path))", DeprecationWarning,
                  stacklevel=2)
    set_cache_dir(path)
