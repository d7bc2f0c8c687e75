"""``lamina.experimental``: the home of APIs JAX keeps under ``jax.experimental``.

It is a package, so ``import lamina.experimental.<name>`` (and, under the
compatibility alias, ``import jax.experimental.<name>``) finds the submodules
lamina provides; a name lamina does not provide is an ``ImportError``.
"""

import importlib
from typing import Any

#: functions JAX keeps in ``jax.experimental`` itself -> the lamina module defining them
_FUNCTIONS = {"io_callback": "lamina.callbacks"}


#: the submodules of this package (listed by ``dir``, as JAX lists its loaded ones)
_SUBMODULES = ("checkify", "compilation_cache", "layout", "multihost_utils", "shard_map")


def __dir__() -> list[str]:
    return sorted([*_FUNCTIONS, *_SUBMODULES])


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:  # `jax.experimental.compilation_cache` without importing it
        return importlib.import_module(f"{__name__}.{name}")
    module = _FUNCTIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina.experimental' has no attribute {name!r}")
    # loaded on first use, as lamina's own attributes: the runtime comes with it
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
