"""``jax._src.xla_bridge`` under the alias: lamina's backends module itself.

Libraries read its private state, ``_backends`` (the clients made so far, by
platform; empty before the first one, as in JAX), to learn whether it is
still too early to change the CPU device count (chex's
``set_n_cpu_devices``). Importing this module gives
:mod:`lamina_interpreters_pxla.backends` itself, so that state is the live one.
"""

from __future__ import annotations

import sys

from lamina_interpreters_pxla import backends as _backends_module

# The import system hands out what sys.modules holds for this name once the
# module has run, so `from lamina._src import xla_bridge` yields the real one.
sys.modules[__name__] = _backends_module
