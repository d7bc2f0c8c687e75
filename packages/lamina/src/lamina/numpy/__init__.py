"""``lamina.numpy``: the NumPy API on lamina arrays, as ``jax.numpy`` offers it.

It is ``lamina_tracing_core.numpy`` (the one implementation of NumPy
semantics in lamina, whose import also installs the array methods),
re-exported under the public name; ``lamina.numpy.linalg`` is
``lamina_tracing_core.numpy.linalg``. Names are looked up there on first use
(PEP 562), so the parts that one loads lazily (``linalg``, ``fft``,
``histogram``, ...) stay unloaded until a program asks for them; so does
``from_dlpack`` (``lamina.dlpack``, which needs the runtime).
"""

import importlib as _importlib
import typing as _typing

import lamina_interpreters_pxla as _runtime  # noqa: F401 - arrays run eagerly on its devices
import lamina_sharded_jit as _jit  # noqa: F401 - installs the compiler of the functions JAX jits
from lamina_tracing_core import numpy as _numpy
from lamina_tracing_core.numpy import __all__ as __all__  # noqa: PLC0414

if _typing.TYPE_CHECKING:
    from lamina_tracing_core.numpy import *  # noqa: F403
    from lamina_tracing_core.numpy import bool as bool  # noqa: PLC0414 - NumPy 2's name
    from lamina_tracing_core.numpy import fft as fft  # noqa: PLC0414
    from lamina_tracing_core.numpy import linalg as linalg  # noqa: PLC0414

    from lamina.dlpack import from_dlpack as from_dlpack  # noqa: PLC0414


def __getattr__(name: str) -> _typing.Any:
    if name in _OWN:
        value = getattr(_importlib.import_module(_OWN[name]), name)
    elif name in _PUBLIC:
        value = getattr(_numpy, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | _PUBLIC | set(_OWN))


_PUBLIC = frozenset(__all__) | {"bool"}
#: names of lamina's own (not tracing-core's) -> their module
_OWN = {"from_dlpack": "lamina.dlpack"}
