"""``lamina.errors``: the exceptions lamina raises at trace time (JAX's names)."""

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

__all__ = [
    "ConcretizationTypeError", "JaxprTypeError", "LaminaTypeError",
    "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
    "UnboundAxisNameError", "UnexpectedTracerError",
]
