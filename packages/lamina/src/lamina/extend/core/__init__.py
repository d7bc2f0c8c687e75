"""``lamina.extend.core``: primitives, jaxprs and trace probes under JAX's
names (``jax.extend.core``).

Every name is tracing-core's own object: a ``Primitive`` made here is a
lamina primitive, and its rules registered through
:mod:`lamina.interpreters` (or its own ``def_*`` methods) are the ones every
transformation reads. How to define one with every rule: ``docs/extending.md``.

``DebugInfo`` is the record a function about to be traced carries (what was
traced, the function's name and line, its argument names and result paths).
``get_opaque_trace_state(convention)`` identifies the innermost active
transformation: two calls compare equal exactly when the same transformations
are active (flax records it to refuse a module used across transformations).
``CallPrimitive`` makes a primitive that applies a function as one
equation (``prim.bind(fun, *args)``, ``fun`` a ``WrappedFun``), with every
rule; ``call_impl`` is its eager meaning (see :mod:`lamina.call_primitives`).
``gensym()`` gives the variable constructor (``gensym()(aval)`` is a fresh
``Var``); ``primitives`` is the module of lamina's built-in primitives.
``array_types`` is the live set of Python types lamina treats as arrays.
"""

from __future__ import annotations

from collections.abc import Iterator, Set
from typing import Any

from lamina_linear_util.debug_info import TracingDebugInfo as DebugInfo
from lamina_tracing_core import core as _core
from lamina_tracing_core.avals import aval_handlers
from lamina_tracing_core.batching import BatchTrace
from lamina_tracing_core.core import check_jaxpr as check_jaxpr
from lamina_tracing_core.core import concrete_or_error as concrete_or_error
from lamina_tracing_core.core import find_top_trace as find_top_trace
from lamina_tracing_core.core import jaxpr_as_fun as jaxpr_as_fun
from lamina_tracing_core.core import mapped_aval as mapped_aval
from lamina_tracing_core.core import new_jaxpr_eqn as new_jaxpr_eqn
from lamina_tracing_core.core import primal_dtype_to_tangent_dtype as primal_dtype_to_tangent_dtype
from lamina_tracing_core.core import unmapped_aval as unmapped_aval
from lamina_tracing_core.core import valid_jaxtype as valid_jaxtype
from lamina_tracing_core.effects import Effect as Effect
from lamina_tracing_core.effects import Effects as Effects
from lamina_tracing_core.effects import no_effects as no_effects
from lamina_tracing_core.errors import JaxprTypeError as JaxprTypeError
from lamina_tracing_core.jaxpr import ClosedJaxpr as ClosedJaxpr
from lamina_tracing_core.jaxpr import DropVar as DropVar
from lamina_tracing_core.jaxpr import Jaxpr as Jaxpr
from lamina_tracing_core.jaxpr import JaxprEqn as JaxprEqn
from lamina_tracing_core.jaxpr import Literal as Literal
from lamina_tracing_core.jaxpr import Var as Var
from lamina_tracing_core.jaxpr import subjaxprs_of_params
from lamina_tracing_core.partial_eval import DynamicJaxprTrace
from lamina_tracing_core.primitives import Primitive as Primitive

from lamina.call_primitives import CallPrimitive as CallPrimitive
from lamina.call_primitives import call_impl as call_impl
from lamina.extend.core import primitives as primitives

__all__ = [
    "CallPrimitive", "ClosedJaxpr", "DebugInfo", "DropVar", "Effect", "Effects", "Jaxpr", "JaxprEqn",
    "JaxprTypeError", "Literal", "OpaqueTraceState", "Primitive", "Var", "array_types",
    "call_impl", "check_jaxpr", "concrete_or_error", "find_top_trace", "gensym", "get_opaque_trace_state",
    "jaxpr_as_fun", "jaxprs_in_params", "mapped_aval", "new_jaxpr_eqn", "no_effects",
    "nonempty_axis_env_DO_NOT_USE", "primal_dtype_to_tangent_dtype", "primitives", "subjaxprs",
    "unmapped_aval", "unsafe_am_i_under_a_jit_DO_NOT_USE", "unsafe_am_i_under_a_vmap_DO_NOT_USE",
    "unsafe_get_axis_names_DO_NOT_USE", "valid_jaxtype",
]


class _ArrayTypes(Set[type]):
    """The Python types with an abstract value (arrays and scalars), read live
    from tracing-core's table, so types registered later (device arrays) count."""

    def __contains__(self, t: object) -> bool:
        return t in aval_handlers

    def __iter__(self) -> Iterator[type]:
        return iter(list(aval_handlers))

    def __len__(self) -> int:
        return len(aval_handlers)

    def __repr__(self) -> str:
        return f"array_types({', '.join(sorted(t.__name__ for t in aval_handlers))})"


array_types: Set[type] = _ArrayTypes()


def gensym() -> type[Var]:
    """The constructor of fresh jaxpr variables: ``gensym()(aval)`` (JAX's form)."""
    return Var


def jaxprs_in_params(params: dict[str, Any]) -> Iterator[Jaxpr]:
    """The (open) jaxprs an equation's params hold, directly or in tuples."""
    yield from subjaxprs_of_params(params)


def subjaxprs(jaxpr: Jaxpr) -> Iterator[Jaxpr]:
    """The jaxprs held by the equations of ``jaxpr`` (one level down)."""
    for eqn in jaxpr.eqns:
        yield from subjaxprs_of_params(eqn.params)


class OpaqueTraceState:
    """The innermost active transformation when it was taken; equal to
    another exactly when both saw the same one."""

    __slots__ = ("_main",)

    def __init__(self, main: _core.MainTrace):
        self._main = main

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpaqueTraceState) and self._main is other._main

    def __hash__(self) -> int:
        return id(self._main)

    def __repr__(self) -> str:
        return f"OpaqueTraceState({self._main.transform})"


def get_opaque_trace_state(convention: str | None = None) -> OpaqueTraceState:
    """The state of the trace stack, for comparing later (``convention`` names
    the caller's use, as in JAX; it does not change the result)."""
    del convention
    return OpaqueTraceState(_core.trace_stack()[-1])


def _tracing_under(trace_type: type[Any]) -> bool:
    mains = [*_core.trace_stack(), _core._state.dynamic]
    return any(issubclass(m.trace_type, trace_type) for m in mains)


def unsafe_am_i_under_a_jit_DO_NOT_USE() -> bool:
    """Whether the code runs while a function is being staged into a jaxpr
    (``jit``, ``make_jaxpr``, a loop body...), as JAX's."""
    return _tracing_under(DynamicJaxprTrace)


def unsafe_am_i_under_a_vmap_DO_NOT_USE() -> bool:
    """Whether the code runs under ``vmap`` (a batching trace is active)."""
    return _tracing_under(BatchTrace)


def unsafe_get_axis_names_DO_NOT_USE() -> list[Any]:
    """The named axes bound here (``vmap``/``pmap`` ``axis_name``s), outermost first."""
    return list(_core.bound_axis_names())


def nonempty_axis_env_DO_NOT_USE() -> bool:
    """Whether any named axis is bound here."""
    return bool(_core.bound_axis_names())


