"""``lamina.interpreters.ad``: JVP and transpose rules (JAX's
``jax.interpreters.ad``), over tracing-core's tables.

- ``primitive_jvps[prim] = rule(primals, tangents, **params) -> (out,
  tangent_out)``; a tangent that is known to be zero arrives as ``Zero(aval)``
  and an output tangent may be one.
- ``primitive_transposes[prim] = rule(cotangent, *args, **params) -> list``:
  linear inputs arrive as ``UndefinedPrimal(aval)``; the rule returns one
  cotangent per input (``None`` or ``Zero`` where there is none). The
  cotangent may be a ``Zero``; for a primitive with several results it is a
  list.
- helpers that build rules: ``defjvp`` (one function per argument,
  ``fn(g, *primals, **params)``), ``defjvp2`` (also given the output),
  ``deflinear`` (``transpose(ct, **params)``), ``deflinear2``
  (``transpose(ct, *args, **params)``), ``defbilinear``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.ad import JVPTrace as JVPTrace
from lamina_tracing_core.ad import JVPTracer as JVPTracer
from lamina_tracing_core.ad import primitive_jvps as primitive_jvps
from lamina_tracing_core.ad import primitive_transposes as primitive_transposes
from lamina_tracing_core.ad_util import add_jaxvals as add_jaxvals
from lamina_tracing_core.ad_util import add_jaxvals_p as add_jaxvals_p
from lamina_tracing_core.ad_util import add_tangents as add_tangents
from lamina_tracing_core.ad_util import instantiate_zeros as instantiate_zeros
from lamina_tracing_core.ad_util import zeros_like_aval as zeros_like_aval
from lamina_tracing_core.base_primitives import deflinear as deflinear2
from lamina_tracing_core.lax.helpers import defbilinear as defbilinear
from lamina_tracing_core.lax.helpers import defjvp as defjvp
from lamina_tracing_core.lax.helpers import defjvp2 as defjvp2
from lamina_tracing_core.primitives import MissingRuleError, Primitive
from lamina_tracing_core.symbolic import UndefinedPrimal as UndefinedPrimal
from lamina_tracing_core.symbolic import Zero as Zero
from lamina_tracing_core.symbolic import is_undefined_primal as is_undefined_primal

__all__ = [
    "JVPTrace", "JVPTracer", "UndefinedPrimal", "Zero", "add_jaxvals", "add_jaxvals_p",
    "add_tangents", "defbilinear", "defjvp", "defjvp2", "deflinear", "deflinear2",
    "get_primitive_transpose", "instantiate_zeros", "is_undefined_primal", "primitive_jvps",
    "primitive_transposes", "zeros_like_aval",
]


def deflinear(primitive: Primitive, transpose_rule: Callable[..., Sequence[Any]]) -> None:
    """``primitive`` is linear in all its arguments: its JVP applies it to the
    tangents, and its transpose is ``transpose_rule(ct, **params)`` (one
    cotangent per argument), called only with a non-zero cotangent."""
    def transpose(ct: Any, *args: Any, **params: Any) -> list[Any]:
        return list(transpose_rule(ct, **params))

    deflinear2(primitive, transpose)


def get_primitive_transpose(p: Primitive) -> Callable[..., Any]:
    """The transpose rule of ``p``; ``MissingRuleError`` (a ``LookupError``)
    naming the primitive when it has none."""
    try:
        return primitive_transposes[p]
    except KeyError:
        raise MissingRuleError(
            f"Transpose rule (for reverse-mode differentiation) for '{p}' not "
            f"implemented") from None
