"""``lamina.numpy.fft``: ``lamina_tracing_core.numpy.fft`` re-exported."""

from lamina_tracing_core.numpy.fft import *  # noqa: F403
from lamina_tracing_core.numpy.fft import __all__ as __all__  # noqa: PLC0414
