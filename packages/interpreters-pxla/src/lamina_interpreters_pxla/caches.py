"""``clear_caches``: forget everything this layer compiled or traced.

The runtime caches compiled programs (the compile cache, keyed on the
module), eager dispatch's per-primitive executables, pmap's traces and
compiled signatures, and the C++ dispatch fastpaths. Clearing them makes the
next call of every function trace, lower and compile again (what
``jax.clear_caches`` does), e.g. to measure compile time or to free memory.
"""

from __future__ import annotations

import sys

from lamina_linear_util.cache import clear_all_caches

from lamina_interpreters_pxla import dispatch
from lamina_interpreters_pxla.cpp_dispatch import clear_cpp_caches
from lamina_interpreters_pxla.executable import clear_compile_cache

__all__ = ["clear_caches"]


def clear_caches() -> None:
    """Empties this layer's caches and linear-util's (see the module docstring)."""
    clear_all_caches()
    dispatch.clear_cache()
    clear_compile_cache()
    # pmap's caches exist once pmap is imported; importing it here would load
    # its lowering (and MLIR's dialects) into every process that uses jit.
    pmap = sys.modules.get("lamina_interpreters_pxla.pmap")
    if pmap is not None:
        pmap.clear_pmap_caches()
    clear_cpp_caches()
