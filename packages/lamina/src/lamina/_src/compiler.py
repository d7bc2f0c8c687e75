"""``jax._src.compiler`` under the alias: lamina's compiler module itself.

Libraries reach into JAX's private compiler module to wrap its
``backend_compile_and_load`` (chex's ``restrict_backends`` forbids compiling
for a platform that way). The wrapper only takes effect if it replaces the
function lamina actually calls, so importing this module gives
:mod:`lamina_interpreters_pxla.compiler` itself (the module object, not a
copy of its names): an attribute assigned on it is the one every compile
looks up.
"""

from __future__ import annotations

import sys

from lamina_interpreters_pxla import compiler as _compiler

# The import system hands out what sys.modules holds for this name once the
# module has run, so `from lamina._src import compiler` yields the real one.
sys.modules[__name__] = _compiler
