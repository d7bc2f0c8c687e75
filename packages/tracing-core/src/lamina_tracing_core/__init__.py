"""Avals, tracers, jaxprs with JaxprDebugInfo, lax primitives and transformations.

The user-facing transformations (``jvp``, ``linearize``, ``vjp``, ``grad``,
``value_and_grad``, ``jacfwd``, ``jacrev``, ``hessian``, ``vmap``,
``make_jaxpr``, ``eval_jaxpr``) are re-exported here from ``api``.
"""

from lamina_tracing_core.__about__ import __version__
from lamina_tracing_core.api import (
    ShapeDtypeStruct,
    eval_jaxpr,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    make_jaxpr,
    value_and_grad,
    vjp,
    vmap,
)
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.core import (
    Tracer,
    check_jaxpr,
    concrete_or_error,
    config,
    extend_axis_env,
    jaxpr_as_fun,
)
from lamina_tracing_core.errors import (
    ConcretizationTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnboundAxisNameError,
    UnexpectedTracerError,
)
from lamina_tracing_core.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    JaxprDebugInfo,
    validate_jaxpr_debug_info,
)
from lamina_tracing_core.jaxpr import pp_jaxpr

__all__ = [
    "ClosedJaxpr", "ConcretizationTypeError", "Jaxpr", "JaxprDebugInfo", "ShapeDtypeStruct",
    "ShapedArray", "Tracer", "TracerArrayConversionError", "TracerBoolConversionError",
    "TracerIntegerConversionError", "UnboundAxisNameError", "UnexpectedTracerError",
    "__version__", "check_jaxpr", "concrete_or_error", "config", "eval_jaxpr",
    "extend_axis_env", "get_aval", "grad", "hessian", "jacfwd", "jacrev", "jaxpr_as_fun",
    "jvp", "linearize", "make_jaxpr", "pp_jaxpr", "validate_jaxpr_debug_info",
    "value_and_grad", "vjp", "vmap",
]

# Last: installs the array operators and methods (on tracers and Arrays).
import lamina_tracing_core.numpy  # noqa: E402, F401
