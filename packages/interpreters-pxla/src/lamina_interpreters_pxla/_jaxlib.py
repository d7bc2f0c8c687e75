"""The one place this package imports jaxlib's native modules.

jaxlib ships no type stubs for its nanobind extensions (``_jax``, ``utils``),
so they are typed ``Any`` here and the names below give the rest of the
package readable annotations. Nothing here patches jaxlib.
"""

from __future__ import annotations

import os

# The native module reads this once, when it loads; jax sets the same default.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import importlib  # noqa: E402
from typing import Any, TypeAlias  # noqa: E402

_jax: Any = importlib.import_module("jaxlib._jax")
xc: Any = importlib.import_module("jaxlib.xla_client")
jaxlib_utils: Any = importlib.import_module("jaxlib.utils")

#: jaxlib's classes, for annotations (all ``Any`` to the type checker)
Client: TypeAlias = Any
Device: TypeAlias = Any
DeviceList: TypeAlias = Any
ArrayImpl: TypeAlias = Any
HloSharding: TypeAlias = Any
LoadedExecutable: TypeAlias = Any

#: the same classes at run time (for isinstance and construction)
ClientClass: Any = _jax.Client
DeviceClass: Any = _jax.Device
DeviceListClass: Any = _jax.DeviceList
ArrayImplClass: Any = _jax.ArrayImpl
HloShardingClass: Any = xc.HloSharding
JaxRuntimeError: type[Exception] = _jax.JaxRuntimeError
