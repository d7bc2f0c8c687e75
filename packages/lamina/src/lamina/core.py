"""``lamina.core``: what ``jax.core`` offers libraries, from tracing-core.

Under the JAX alias (:mod:`lamina.compat`) this module is ``jax.core``. It
holds the names of JAX 0.10's ``jax.core`` that lamina implements, and the
tracing types libraries written for earlier JAX versions still read from it
(``Primitive``, ``Jaxpr``, ``ClosedJaxpr``, ``get_aval``, ...). Each name is
tracing-core's own object, re-exported: ``isinstance(x, lamina.core.Tracer)``
is True for every tracer under ``jit``, ``grad`` or ``vmap``.

``ShapedArray(shape, dtype, weak_type)`` is constructed positionally, the way
jaxlib's C++ builds the aval of an array it converts to NumPy whenever a
module named ``jax.core`` is loaded; so device-to-host transfers work with the
alias installed.
"""

from __future__ import annotations

import operator
from typing import Any

from lamina_tracing_core.api import eval_jaxpr as eval_jaxpr
from lamina_tracing_core.avals import ShapedArray as ShapedArray
from lamina_tracing_core.avals import get_aval as get_aval
from lamina_tracing_core.core import Trace as Trace
from lamina_tracing_core.core import Tracer as Tracer
from lamina_tracing_core.core import concrete_or_error as concrete_or_error
from lamina_tracing_core.core import eval_context as eval_context
from lamina_tracing_core.core import find_top_trace as find_top_trace
from lamina_tracing_core.core import jaxpr_as_fun as jaxpr_as_fun
from lamina_tracing_core.core import mapped_aval as mapped_aval
from lamina_tracing_core.core import unmapped_aval as unmapped_aval
from lamina_tracing_core.core import valid_jaxtype as valid_jaxtype
from lamina_tracing_core.jaxpr import Atom as Atom
from lamina_tracing_core.jaxpr import ClosedJaxpr as ClosedJaxpr
from lamina_tracing_core.jaxpr import DropVar as DropVar
from lamina_tracing_core.jaxpr import Jaxpr as Jaxpr
from lamina_tracing_core.jaxpr import JaxprEqn as JaxprEqn
from lamina_tracing_core.jaxpr import Literal as Literal
from lamina_tracing_core.jaxpr import Var as Var
from lamina_tracing_core.primitives import Primitive as Primitive

#: JAX's public name for ``eval_context``: concrete operations run at once,
#: even under jit.
ensure_compile_time_eval = eval_context

#: The base class of abstract values. lamina has one kind of aval, so it is
#: ``ShapedArray`` itself: ``isinstance(aval, AbstractValue)`` holds for every aval.
AbstractValue = ShapedArray

#: A value a primitive is applied to: an array, a scalar or a tracer.
Value = Any

#: The parameters of an equation (``JaxprEqn.params``).
ParamDict = dict[str, Any]



def _dim(d: Any, where: str) -> int:
    try:
        return operator.index(d)
    except TypeError:
        raise TypeError(f"{where}: {type(d).__name__!r} object cannot be interpreted as an "
                        "integer dimension") from None


def max_dim(d1: Any, d2: Any) -> int:
    """``max(d1, d2)`` of two dimension sizes (JAX's ``core.max_dim``; lamina's
    shapes are constant, so sizes are integers and anything else is a TypeError)."""
    return max(_dim(d1, "core.max_dim argument d1"), _dim(d2, "core.max_dim argument d2"))


def min_dim(d1: Any, d2: Any) -> int:
    """``min(d1, d2)`` of two dimension sizes (JAX's ``core.min_dim``)."""
    return min(_dim(d1, "core.min_dim argument d1"), _dim(d2, "core.min_dim argument d2"))


__all__ = [
    "AbstractValue", "Atom", "ClosedJaxpr", "DropVar", "Jaxpr", "JaxprEqn", "Literal",
    "ParamDict", "Primitive", "ShapedArray", "Trace", "Tracer", "Value", "Var",
    "concrete_or_error", "ensure_compile_time_eval", "eval_context", "eval_jaxpr", "find_top_trace", "get_aval", "jaxpr_as_fun",
    "mapped_aval", "max_dim", "min_dim", "unmapped_aval", "valid_jaxtype",
]
