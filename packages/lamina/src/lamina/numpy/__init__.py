"""``lamina.numpy``: the NumPy API on lamina arrays, as ``jax.numpy`` offers it.

It is ``lamina_tracing_core.numpy`` (the one implementation of NumPy
semantics in lamina, whose import also installs the array methods),
re-exported under the public name; ``lamina.numpy.linalg`` is
``lamina_tracing_core.numpy.linalg``.
"""

import lamina_interpreters_pxla as _runtime  # noqa: F401 - arrays run eagerly on its devices
import lamina_sharded_jit as _jit  # noqa: F401 - installs the compiler of the functions JAX jits
from lamina_tracing_core.numpy import *  # noqa: F403
from lamina_tracing_core.numpy import __all__ as __all__  # noqa: PLC0414
from lamina_tracing_core.numpy import bool as bool  # noqa: PLC0414 - NumPy 2's name
from lamina_tracing_core.numpy import linalg as linalg  # noqa: PLC0414
from lamina_tracing_core.numpy import fft as fft  # noqa: PLC0414
from lamina.dlpack import from_dlpack as from_dlpack  # noqa: E402, PLC0414 - needs the runtime
