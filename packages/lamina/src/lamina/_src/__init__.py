"""``lamina._src``: thin shims for the few private ``jax._src`` names that
libraries import when they load (under the alias, ``jax._src.<name>``).

JAX's ``jax._src`` is its implementation, not an API; lamina reproduces only
names whose behaviour is simple and stable, each documented where it is
defined and listed in the README's differences:

- ``traceback_util``: ``register_exclusion``, ``include_frame``,
  ``api_boundary``, ``_exclude_paths`` (equinox, flax);
- ``dispatch.wait_for_tokens`` (equinox);
- ``dtypes``: ``jax.dtypes`` plus ``TypePromotionError``, ``ExtendedDType``,
  ``DType``, ``supports_inf`` (equinox, flax);
- ``core``: the names of :mod:`lamina.core` (flax);
- ``compiler``: lamina's compiler module, whose ``backend_compile_and_load``
  every compile calls (chex's ``restrict_backends`` wraps it);
- ``xla_bridge``: lamina's backends module, whose ``_backends`` says which
  clients exist yet (chex's ``set_n_cpu_devices``).
"""

from __future__ import annotations

import importlib
import types

_SUBMODULES = frozenset({"compiler", "core", "dispatch", "dtypes", "traceback_util", "xla_bridge"})


def __getattr__(name: str) -> types.ModuleType:
    # JAX imports these with the package, so libraries reach them as
    # attributes (jax._src.xla_bridge._backends) without importing them.
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
