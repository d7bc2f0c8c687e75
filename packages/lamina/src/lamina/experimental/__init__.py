"""``lamina.experimental``: the home of APIs JAX keeps under ``jax.experimental``.

It is a package, so ``import lamina.experimental.<name>`` (and, under the
compatibility alias, ``import jax.experimental.<name>``) finds the submodules
lamina provides; a name lamina does not provide is an ``ImportError``.
"""

import importlib
from typing import Any

#: functions JAX keeps in ``jax.experimental`` itself -> the lamina module defining them
_FUNCTIONS = {"io_callback": "lamina.callbacks"}


def __getattr__(name: str) -> Any:
    module = _FUNCTIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina.experimental' has no attribute {name!r}")
    # loaded on first use, as lamina's own attributes: the runtime comes with it
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
