"""``lamina.errors``: the exceptions lamina raises at trace time (JAX's names),
and ``JaxRuntimeError``, what a failed execution raises (jaxlib's class)."""

from lamina_interpreters_pxla._jaxlib import JaxRuntimeError
from lamina_tracing_core.errors import (
    ConcretizationTypeError,
    JaxprTypeError,
    LaminaTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnboundAxisNameError,
    UnexpectedTracerError,
)

#: JAX's name for the base class of the trace-time type errors.
JAXTypeError = LaminaTypeError

__all__ = [
    "ConcretizationTypeError", "JAXTypeError", "JaxRuntimeError", "JaxprTypeError",
    "LaminaTypeError",
    "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
    "UnboundAxisNameError", "UnexpectedTracerError",
]
