"""``lamina.numpy.linalg``: ``lamina_tracing_core.numpy.linalg`` re-exported."""

from lamina_tracing_core.numpy.linalg import *  # noqa: F403
from lamina_tracing_core.numpy.linalg import __all__ as __all__  # noqa: PLC0414
