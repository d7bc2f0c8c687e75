"""Staging to jaxprs: dynamic tracing and known/unknown partial evaluation.

Two traces build jaxprs:

- ``DynamicJaxprTrace`` (omnistaging): every primitive applied to its tracers
  becomes an equation of the jaxpr being built, in program order, with its
  ``SourceInfo`` and effects. ``trace_to_jaxpr_dynamic(fun, in_avals)`` traces
  a ``WrappedFun`` this way; constants are hoisted to constvars (Python and
  numpy scalars become ``Literal``s); the jaxpr's ``JaxprDebugInfo`` comes
  from ``fun.debug_info``. Staging is frame based: a final-style map
  primitive traces its body in a new *frame* of the same main trace.
- ``JaxprTrace`` (partial evaluation): values are ``PartialVal``s, known
  (a value, computed now by binding at the level below) or unknown (an aval,
  recorded as an equation recipe). ``trace_to_jaxpr_nounits`` gives the jaxpr
  of the unknown part; ``partial_eval_jaxpr_nounits`` splits a closed jaxpr.

Hooks for higher-order primitives (tables keyed by primitive):

- ``custom_partial_eval_rules[prim](trace, *tracers, **params)``: how a
  JaxprTrace processes it (default: known if all inputs are, else staged).
- ``partial_eval_jaxpr_custom_rules[prim](saveable, unks_in, inst_in, eqn)``
  for the jaxpr-level known/staged split used by remat (the control-flow
  layer's ``checkpoint``).
- ``dce_rules[prim](used_outputs, eqn) -> (used_inputs, new_eqn | None)``:
  ``used_inputs`` has one flag per operand of ``eqn`` (the equation given),
  and ``new_eqn``'s operands are exactly the flagged ones, in order
  (``dce_jaxpr`` checks this).
- ``custom_staging_rules[prim](trace, *tracers, **params)``: how a
  DynamicJaxprTrace stages it (default: one equation, abstract eval).
- ``custom_jvp_staging_rules[prim](trace, fun, jvp, tracers, *,
  symbolic_zeros)`` and ``custom_vjp_staging_rules[prim](trace, fun, fwd, bwd,
  tracers, *, out_trees, symbolic_zeros)``: how a DynamicJaxprTrace stages a
  custom derivative call (the control-flow layer registers them; they use
  ``trace_to_jaxpr_dynamic`` and ``DynamicJaxprTrace.emit_eqn``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import itertools
import operator
from typing import Any

import numpy as np

from lamina_tracing_core import core
from lamina_tracing_core import names as _names
from lamina_tracing_core import sharding_in_types as _sit
from lamina_tracing_core import memory as _memory
from lamina_tracing_core import source_info as _si
from lamina_tracing_core import vma as _vma
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, get_aval
from lamina_tracing_core.core import (
    MainTrace,
    Trace,
    Tracer,
    escaped_tracer_error,
    tracing_debug_info_of as tracing_debug_info_of,
    wrapped_fun_of_jaxpr,
)
from lamina_tracing_core.effects import (
    Effects,
    NamedAxisEffect,
    has_side_effects,
    no_effects,
    remove_named_axes,
)
from lamina_tracing_core.jaxpr import (
    Atom,
    ClosedJaxpr,
    DropVar,
    Jaxpr,
    JaxprDebugInfo,
    JaxprEqn,
    Literal,
    Var,
)
from lamina_tracing_core.primitives import (
    MissingRuleError,
    Primitive,
    abstract_eval_rules,
    effect_rules,
    effectful_abstract_eval_rules,
)
from lamina_linear_util.debug_info import MadeBy, TracingDebugInfo, fit_names
from lamina_linear_util.linear_util import WrappedFun, wrap_init, transformation_with_aux

__all__ = [
    "DynamicJaxprTrace", "DynamicJaxprTracer", "JaxprTrace", "JaxprTracer", "PartialVal",
    "close_jaxpr", "convert_constvars_jaxpr", "custom_partial_eval_rules",
    "custom_staging_rules", "dce_jaxpr", "dce_rules", "partial_eval_jaxpr_custom_rules",
    "partial_eval_jaxpr_nounits", "register_literalable_type", "trace_to_jaxpr_dynamic",
    "trace_to_jaxpr_final", "trace_to_jaxpr_nounits", "trace_to_subjaxpr_dynamic",
    "wrapped_fun_of_jaxpr",
]

custom_partial_eval_rules: dict[Primitive, Callable[..., Any]] = {}
partial_eval_jaxpr_custom_rules: dict[Primitive, Callable[..., Any]] = {}
dce_rules: dict[Primitive, Callable[..., Any]] = {}
custom_staging_rules: dict[Primitive, Callable[..., Any]] = {}
custom_jvp_staging_rules: dict[Primitive, Callable[..., Any]] = {}
custom_vjp_staging_rules: dict[Primitive, Callable[..., Any]] = {}


# --- debug info helpers ------------------------------------------------------------------
def jaxpr_debug_info(dbg: TracingDebugInfo | JaxprDebugInfo | None, n_in: int, n_out: int,
                     traced_for: str = "jit", *, made_by: MadeBy = None) -> JaxprDebugInfo:
    """Resolves the debug info of a traced function for a jaxpr with ``n_in``
    inputs and ``n_out`` outputs. Counts that do not fit mean a stale record:
    an error under validation naming ``made_by``, else the names still certain
    (linear-util's ``fit_names``)."""
    if dbg is None:
        return JaxprDebugInfo(traced_for, None, (None,) * n_in, (None,) * n_out)
    if isinstance(dbg, JaxprDebugInfo):
        names = fit_names(dbg.arg_names, n_in, what="arg_names", dbg=dbg, made_by=made_by)
        paths = fit_names(dbg.result_paths, n_out, what="result_paths", dbg=dbg,
                          made_by=made_by)
        return JaxprDebugInfo(dbg.traced_for, dbg.func_src_info, names, paths)
    return JaxprDebugInfo.from_tracing(dbg, n_in, n_out, made_by=made_by)


# --- dynamic tracing ------------------------------------------------------------------------
#: The types whose scalar (0-d) values become ``Literal``s in a jaxpr instead
#: of constvars: Python scalars, numpy scalars and 0-d numpy arrays. A layer
#: with its own array type adds it with ``register_literalable_type`` (the
#: runtime registers its ``Array``); membership is by exact type.
_PY_SCALARS = frozenset({int, float, bool, complex})
literalable_types: set[type] = {int, float, bool, complex, np.ndarray}
literalable_types.update(t for t in set(np.sctypeDict.values()) if issubclass(t, np.generic))


def register_literalable_type(t: type) -> None:
    """Makes 0-d values of type ``t`` (exact type, not subclasses) staged as
    ``Literal``s when a traced function uses them, as numpy scalars are. ``t``
    must have ``.shape`` and ``.dtype`` and convert with ``np.asarray``; a
    literal's value is read back with ``core.literal_value``."""
    if not isinstance(t, type):
        raise TypeError(f"register_literalable_type: expected a type, got {t!r}")
    literalable_types.add(t)


class JaxprStackFrame:
    """The jaxpr being built by one dynamic trace (or one map body)."""

    __slots__ = ("invars", "eqns", "const_tracers", "constvars", "constvals", "effects",
                 "alive", "debug_info")

    def __init__(self, debug_info: Any = None):
        self.invars: list[Var] = []
        self.eqns: list[JaxprEqn] = []
        self.const_tracers: dict[int, DynamicJaxprTracer] = {}
        self.constvars: list[Var] = []
        self.constvals: list[Any] = []
        self.effects: set[Any] = set()
        self.alive = True
        self.debug_info = debug_info

    def to_jaxpr(self, out_tracers: Sequence[DynamicJaxprTracer],
                 debug_info: JaxprDebugInfo) -> tuple[Jaxpr, list[Any]]:
        outvars = [t._atom for t in out_tracers]
        constvars, constvals = self.constvars, self.constvals
        if constvars:  # drop constants nothing uses
            used = {id(a) for eqn in self.eqns for a in eqn.invars}
            used.update(id(a) for a in outvars)
            keep = [id(v) in used for v in constvars]
            if not all(keep):
                constvars = [v for v, k in zip(constvars, keep) if k]
                constvals = [c for c, k in zip(constvals, keep) if k]
        jaxpr = Jaxpr(list(constvars), list(self.invars), outvars, self.eqns,
                      frozenset(self.effects), debug_info)
        return jaxpr, list(constvals)

    def provenance(self, atom: Atom) -> list[int]:
        """Indices of the invars ``atom`` depends on (walks the equations)."""
        if type(atom) is Literal:
            return []
        needed = {atom}
        for eqn in reversed(self.eqns):
            if any(v in needed for v in eqn.outvars):
                needed.update(a for a in eqn.invars if type(a) is not Literal)
        return [i for i, v in enumerate(self.invars) if v in needed]

    def equations_leading_to(self, atom: Atom, limit: int = 6) -> list[JaxprEqn]:
        if type(atom) is Literal:
            return []
        needed = {atom}
        found = []
        for eqn in reversed(self.eqns):
            if any(v in needed for v in eqn.outvars):
                needed.update(a for a in eqn.invars if type(a) is not Literal)
                found.append(eqn)
        return list(reversed(found))[:limit]


class DynamicJaxprTracer(Tracer):
    """A value of the jaxpr being built: its aval and its variable or literal."""

    __slots__ = ("_aval", "_atom", "_frame", "_source_info")

    def __init__(self, trace: DynamicJaxprTrace, aval: ShapedArray, atom: Atom,
                 frame: JaxprStackFrame, source_info: _si.SourceInfo | None = None):
        self._trace = trace
        self._aval = aval
        self._atom = atom
        self._frame = frame
        self._source_info = source_info

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def to_concrete_value(self) -> Any:
        atom = self._atom
        if type(atom) is Literal:
            return core.literal_value(atom)
        return None

    def _origin_source_info(self) -> _si.SourceInfo | None:
        return self._source_info

    def _operand_origin(self) -> tuple[list[str], Any] | None:
        frame = self._frame
        if not frame.alive:
            return None
        return argument_names_behind(self), frame.debug_info


class DynamicJaxprTrace(Trace):
    """Stages every primitive into the jaxpr of the current frame."""

    __slots__ = ("frame",)

    def __init__(self, main: MainTrace):
        super().__init__(main)
        self.frame: JaxprStackFrame = main.payload.get("frame") or JaxprStackFrame()

    # values entering the jaxpr
    def new_arg(self, aval: ShapedArray) -> DynamicJaxprTracer:
        var = Var(aval)
        self.frame.invars.append(var)
        return DynamicJaxprTracer(self, aval, var, self.frame)

    def new_const(self, val: Any) -> DynamicJaxprTracer:
        frame = self.frame
        t = type(val)
        if t in literalable_types and (t in _PY_SCALARS or not val.shape):
            aval = get_aval(val)
            return DynamicJaxprTracer(self, aval, Literal(val, aval), frame)
        key = id(val)
        known = frame.const_tracers.get(key)
        if known is not None:
            return known
        aval = val.aval if isinstance(val, Tracer) else get_aval(val)
        var = Var(aval)
        frame.constvars.append(var)
        frame.constvals.append(val)
        tracer = DynamicJaxprTracer(self, aval, var, frame)
        frame.const_tracers[key] = tracer  # also keeps `val` alive, so ids stay unique
        return tracer

    pure = new_const

    def lift(self, tracer: Tracer) -> DynamicJaxprTracer:
        return self.new_const(tracer)

    def full_raise(self, val: Any) -> Any:
        if type(val) is DynamicJaxprTracer and val._frame is self.frame:
            return val
        if not isinstance(val, Tracer):
            return self.new_const(val)
        trace = val._trace
        if trace is self:
            assert isinstance(val, DynamicJaxprTracer)
            if not val._frame.alive:
                raise escaped_tracer_error(val, "it comes from a finished inner trace")
            return self.new_const(val)  # a value of an enclosing frame
        if trace.level < self.level:
            if not trace.main.alive:
                raise escaped_tracer_error(val)
            return self.new_const(val)
        raise escaped_tracer_error(val, "it belongs to a transformation above the current one")

    # staging
    def emit_eqn(self, in_tracers: Sequence[DynamicJaxprTracer], out_avals: Sequence[ShapedArray],
                 primitive: Primitive, params: dict[str, Any], effects: Effects | None = None,
                 source_info: _si.SourceInfo | None = None) -> list[DynamicJaxprTracer]:
        """Appends ``outs = primitive[params] ins`` to the jaxpr; returns the
        output tracers (for rules that stage their own equations)."""
        frame = self.frame
        if effects is None:
            effects = core.eqn_effects(primitive, params)
        if source_info is None:
            source_info = _si.current_source_info()
        outvars = [Var(a) for a in out_avals]
        frame.eqns.append(JaxprEqn([t._atom for t in in_tracers], outvars, primitive, params,
                                   effects, source_info))
        if effects:
            frame.effects.update(effects)
        return [DynamicJaxprTracer(self, a, v, frame, source_info)
                for a, v in zip(out_avals, outvars)]

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        rule = custom_staging_rules.get(primitive)
        if rule is not None:
            return rule(self, *tracers, **params)
        return self.stage_primitive(primitive, tracers, params)

    def stage_primitive(self, primitive: Primitive, tracers: Sequence[Any],
                        params: dict[str, Any]) -> Any:
        """The default staging: one equation, its outputs from the abstract
        evaluation rule (custom staging rules fall back on it)."""
        abstract = abstract_eval_rules.get(primitive)
        if abstract is None:
            raise MissingRuleError(f"primitive {primitive.name} has no abstract evaluation "
                                   f"rule, so it cannot be staged into a jaxpr")
        effectful = effectful_abstract_eval_rules.get(primitive)
        if effectful is not None:
            out, effects = effectful(*[t._aval for t in tracers], **params)
            effects = frozenset(effects)
        elif primitive in _cacheable_abstract_evals:
            out = core.abstract_eval_cached(primitive, tuple([t._aval for t in tracers]),
                                            params)
        else:
            out = abstract(*[t._aval for t in tracers], **params)
        if _sit.types_sharded[0]:
            out = _sharded_types(primitive, tracers, out, params)
        if _memory.spaces_used[0]:
            out = _memory.with_result_spaces(primitive, [t._aval for t in tracers], out)
        if _vma._checking[0]:
            out = _vma.result_avals(primitive, [t._aval for t in tracers], out, params)
        frame = self.frame
        if effectful is None:
            effects = (core.eqn_effects(primitive, params)
                       if primitive.higher_order or primitive in effect_rules else no_effects)
        source_info = _si.current_source_info()
        invars = [t._atom for t in tracers]
        if primitive.multiple_results:
            outvars = [Var(a) for a in out]
            frame.eqns.append(JaxprEqn(invars, outvars, primitive, params, effects,
                                       source_info))
            if effects:
                frame.effects.update(effects)
            return [DynamicJaxprTracer(self, a, v, frame, source_info)
                    for a, v in zip(out, outvars)]
        outvar = Var(out)
        frame.eqns.append(JaxprEqn(invars, [outvar], primitive, params, effects, source_info))
        if effects:
            frame.effects.update(effects)
        return DynamicJaxprTracer(self, out, outvar, frame, source_info)

    def provenance(self, tracer: Tracer) -> str:
        assert isinstance(tracer, DynamicJaxprTracer)
        frame = tracer._frame
        if not frame.alive:
            return ""
        names = argument_names_behind(tracer)
        if len(names) == 1:
            return ("This concrete value was not available in Python because it depends "
                    f"on the value of the argument {names[0]}.")
        if names:
            # JAX's English list ("x and y", "x, y, and z"): code matches on it
            listed = (" and ".join(names) if len(names) == 2
                      else ", ".join(names[:-1]) + ", and " + names[-1])
            return ("This concrete value was not available in Python because it depends "
                    f"on the values of the arguments {listed}.")
        eqns = frame.equations_leading_to(tracer._atom)
        if not eqns:
            return ("This value is a constant that became a tracer because it was "
                    "created inside the traced function.")
        lines = ["This value became a tracer due to lamina operations on these lines:", ""]
        for eqn in eqns:
            outs = " ".join(f"{v.aval.str_short()}" for v in eqn.outvars)
            lines.append(f"  operation {eqn.primitive.name} -> {outs}")
            lines.append(f"    from line {eqn.source_info}")
        return "\n".join(lines) + "\n"

    # final-style map primitives (pmap) staged under jit
    def process_map(self, primitive: core.MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        axis_name, axis_size = params["axis_name"], params["axis_size"]
        in_axes = tuple(params["in_axes"])
        in_avals = [core.mapped_aval(axis_size, ax, t.aval) for t, ax in zip(tracers, in_axes)]
        with core.extend_axis_env(axis_name, axis_size):
            jaxpr, out_avals, consts = trace_to_subjaxpr_dynamic(fun, self.main, in_avals)
        out_axes = tuple(params["out_axes_thunk"]())
        call_jaxpr = convert_constvars_jaxpr(jaxpr)
        const_tracers = [self.full_raise(c) for c in consts]
        new_params = {k: v for k, v in params.items() if k != "out_axes_thunk"}
        new_params.update(in_axes=(None,) * len(consts) + in_axes, out_axes=out_axes,
                          call_jaxpr=call_jaxpr)
        new_params = core.update_map_params(
            primitive, new_params, [None] * len(consts) + list(range(len(tracers))))
        out_avals_full = [core.unmapped_aval(axis_size, ax, a)
                          for a, ax in zip(out_avals, out_axes)]
        effects = remove_named_axes(jaxpr.effects, [axis_name])
        return self.emit_eqn([*const_tracers, *tracers], out_avals_full, primitive, new_params,
                             effects)

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        rule = custom_jvp_staging_rules.get(primitive)
        if rule is None:
            raise MissingRuleError(f"{primitive.name} has no staging rule "
                                   f"(partial_eval.custom_jvp_staging_rules)")
        out: list[Any] = rule(self, fun, jvp, tracers, symbolic_zeros=symbolic_zeros)
        return out

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        rule = custom_vjp_staging_rules.get(primitive)
        if rule is None:
            raise MissingRuleError(f"{primitive.name} has no staging rule "
                                   f"(partial_eval.custom_vjp_staging_rules)")
        out: list[Any] = rule(self, fun, fwd, bwd, tracers, out_trees=out_trees,
                              symbolic_zeros=symbolic_zeros)
        return out


def argument_names_behind(tracer: DynamicJaxprTracer) -> list[str]:
    """The names of the traced function's arguments that ``tracer``'s value
    depends on (``x['a']``; ``(flat argument 2)`` where a name is unknown)."""
    frame = tracer._frame
    dbg = frame.debug_info
    names = []
    for i in frame.provenance(tracer._atom):
        name = None
        if dbg is not None and len(dbg.arg_names) == len(frame.invars):
            name = dbg.arg_names[i]
        names.append(name if name is not None else f"(flat argument {i})")
    return names


def _sharded_types(primitive: Primitive, tracers: Sequence[Any], out: Any,
                   params: dict[str, Any]) -> Any:
    """``out`` with the result shardings of ``primitive``'s sharding rule; a
    ``ShardingTypeError`` names the operands and the arguments they come from."""
    try:
        return _sit.apply_rule(primitive, [t._aval for t in tracers], out, params)
    except _sit.ShardingTypeError as e:
        described = describe_staged_operands(tracers)
        raise _sit.ShardingTypeError(
            f"{e}\nThe operands are {described}" if described else str(e)) from None


def describe_staged_operands(operands: Sequence[Any]) -> str:
    """For an error about ``operands`` met while tracing: each operand's type
    and the arguments it comes from, and the function being traced
    (``float32[3] (from x['a']) and float32[4] (from y) while tracing f at
    file.py:3 for jit``); empty when no operand is a tracer that can tell
    (``Tracer._operand_origin``: staged values, batched values, and values
    under differentiation whose primal or tangent can tell)."""
    origins = [x._operand_origin() if isinstance(x, Tracer) else None for x in operands]
    known = [o for o in origins if o is not None]
    if not known:
        return ""
    parts = []
    for x, origin in zip(operands, origins):
        names = origin[0] if origin is not None else []
        source = f" (from {', '.join(names)})" if names else ""
        parts.append(f"{get_aval(x).str_long()}{source}")
    # the innermost transformation's function: the first operand's that names one
    dbg = next((d for _, d in known if getattr(d, "func_src_info", None)), None)
    where = f" while tracing {dbg.func_src_info} for {dbg.traced_for}" if dbg is not None else ""
    return " and ".join(parts) + where


def _traced_for(fun: WrappedFun, default: str) -> str:
    dbg = fun.debug_info
    return dbg.traced_for if dbg is not None else default


def _finish_frame(trace: DynamicJaxprTrace, frame: JaxprStackFrame, fun: WrappedFun,
                  in_avals: Sequence[ShapedArray], ans: Any,
                  debug_info: JaxprDebugInfo | None
                  ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    try:
        out_tracers = [trace.full_raise(x) for x in ans]
    except InvalidInputError:
        raise core.invalid_output_error(fun.debug_info, ans) from None
    dbg = (debug_info if debug_info is not None else
           jaxpr_debug_info(fun.debug_info, len(in_avals), len(out_tracers),
                            made_by=fun.stale_names_suspects))
    jaxpr, consts = frame.to_jaxpr(out_tracers, dbg)
    return jaxpr, [t._aval for t in out_tracers], consts


_EMPTY_STACK = _si.NameStack()
_cacheable_abstract_evals = core.cacheable_abstract_evals


def trace_to_jaxpr_dynamic(fun: WrappedFun, in_avals: Sequence[ShapedArray], *,
                           debug_info: JaxprDebugInfo | None = None
                           ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    """Traces ``fun`` on arguments of type ``in_avals`` to ``(jaxpr, out_avals,
    consts)``. The jaxpr's debug info is resolved from ``fun.debug_info``
    unless ``debug_info`` is given. Values of enclosing transformations that
    ``fun`` closes over become constants (tracers among ``consts``). Tracing
    starts from an empty name stack: the equations' name stacks are relative
    to the new jaxpr (the enclosing equation carries the outer path)."""
    return _trace_in_new_main(
        fun, in_avals, debug_info,
        lambda frame: core.new_main(DynamicJaxprTrace, dynamic=True,
                                    transform=_traced_for(fun, "jit"),
                                    debug_info=fun.debug_info, frame=frame))


def trace_to_subjaxpr_dynamic(fun: WrappedFun, main: MainTrace,
                              in_avals: Sequence[ShapedArray], *,
                              debug_info: JaxprDebugInfo | None = None
                              ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    """Like ``trace_to_jaxpr_dynamic`` but in a new frame of the existing
    dynamic ``main`` (for final-style bodies whose wrappers belong to
    transformations above ``main``)."""
    trace = main.trace
    assert isinstance(trace, DynamicJaxprTrace)
    frame = JaxprStackFrame(fun.debug_info)
    previous = trace.frame
    trace.frame = frame
    outer_stack = _si.set_name_stack(_EMPTY_STACK)
    try:
        in_tracers = [trace.new_arg(a) for a in in_avals]
        ans = fun.call_wrapped(*in_tracers)
        return _finish_frame(trace, frame, fun, in_avals, ans, debug_info)
    finally:
        _si.set_name_stack(outer_stack)
        trace.frame = previous
        frame.alive = False


def trace_to_jaxpr_final(fun: WrappedFun, in_avals: Sequence[ShapedArray], *,
                         debug_info: JaxprDebugInfo | None = None
                         ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    """Traces a final-style function (the map layer's impl rule): the staging
    trace replaces the bottom of the stack, so the transformations whose
    wrappers ``fun`` carries stay above it."""
    return _trace_in_new_main(
        fun, in_avals, debug_info,
        lambda frame: core.new_base_main(DynamicJaxprTrace, transform=_traced_for(fun, "pmap"),
                                         debug_info=fun.debug_info, frame=frame))


def _trace_in_new_main(fun: WrappedFun, in_avals: Sequence[ShapedArray],
                       debug_info: JaxprDebugInfo | None,
                       enter: Callable[[JaxprStackFrame], Any]
                       ) -> tuple[Jaxpr, list[ShapedArray], list[Any]]:
    """Traces ``fun`` in a fresh frame under the staging main trace that
    ``enter(frame)`` pushes, from an empty name stack."""
    out, trace = _trace_in_main(fun, in_avals, debug_info, enter)
    if core.config.check_tracer_leaks:  # the tracing frame is gone: what is left leaked
        core.raise_if_leaked(trace)
    core.maybe_validate(out[0])
    return out


def _trace_in_main(fun: WrappedFun, in_avals: Sequence[ShapedArray],
                   debug_info: JaxprDebugInfo | None,
                   enter: Callable[[JaxprStackFrame], Any]
                   ) -> tuple[tuple[Jaxpr, list[ShapedArray], list[Any]], DynamicJaxprTrace]:
    frame = JaxprStackFrame(fun.debug_info)
    outer_stack = _si.set_name_stack(_EMPTY_STACK)
    try:
        with enter(frame) as main:
            trace = main.trace
            assert isinstance(trace, DynamicJaxprTrace)
            try:
                in_tracers = [trace.new_arg(a) for a in in_avals]
                ans = fun.call_wrapped(*in_tracers)
                out = _finish_frame(trace, frame, fun, in_avals, ans, debug_info)
            finally:
                frame.alive = False
                frame.const_tracers.clear()  # the finished frame holds no tracer of its own
    finally:
        _si.set_name_stack(outer_stack)
    return out, trace


def convert_constvars_jaxpr(jaxpr: Jaxpr) -> Jaxpr:
    """The jaxpr with its constvars turned into leading invars (unnamed)."""
    if not jaxpr.constvars:
        return jaxpr
    dbg = jaxpr.debug_info
    if dbg is not None:
        dbg = dbg.replace(arg_names=(None,) * len(jaxpr.constvars) + tuple(dbg.arg_names))
    return Jaxpr([], [*jaxpr.constvars, *jaxpr.invars], jaxpr.outvars, jaxpr.eqns,
                 jaxpr.effects, dbg)


def close_jaxpr(jaxpr: Jaxpr) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, ())


def closed_jaxpr_from_consts(jaxpr: Jaxpr, consts: Sequence[Any]) -> ClosedJaxpr:
    return ClosedJaxpr(jaxpr, consts)


# --- partial evaluation ----------------------------------------------------------------------
class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unknown>"


_UNKNOWN = _Unknown()


class PartialVal:
    """A value that is known (``known(x)``) or only its type is (``unknown(aval)``)."""

    __slots__ = ("aval", "const")

    def __init__(self, aval: ShapedArray, const: Any):
        self.aval = aval
        self.const = const

    @staticmethod
    def known(const: Any) -> PartialVal:
        return PartialVal(get_aval(const), const)

    @staticmethod
    def unknown(aval: ShapedArray) -> PartialVal:
        return PartialVal(aval, _UNKNOWN)

    def is_known(self) -> bool:
        return self.const is not _UNKNOWN

    def get_known(self) -> Any:
        return None if self.const is _UNKNOWN else self.const

    def get_aval(self) -> ShapedArray:
        return self.aval

    def __repr__(self) -> str:
        if self.is_known():
            return f"PartialVal.known({self.const!r})"
        return f"PartialVal.unknown({self.aval.str_short()})"


class _LambdaBinding:
    __slots__ = ()


LAMBDA_BINDING = _LambdaBinding()


class ConstRecipe:
    __slots__ = ("val",)

    def __init__(self, val: Any):
        self.val = val


_recipe_counter = itertools.count()


class EqnRecipe:
    """An equation whose inputs are tracers (toposorted into a jaxpr later).

    ``seq`` numbers recipes in creation order. Creation order is a topological
    order (a recipe's inputs exist before it), and it is the program order JAX
    keeps: equations come out in it, so transposition sums cotangents in the
    same order as JAX, bit for bit."""

    __slots__ = ("seq", "primitive", "in_tracers", "params", "outvars", "effects",
                 "source_info")

    def __init__(self, primitive: Primitive, in_tracers: list[JaxprTracer],
                 params: dict[str, Any], outvars: list[Var], effects: Effects,
                 source_info: _si.SourceInfo):
        self.seq = next(_recipe_counter)
        self.primitive = primitive
        self.in_tracers = in_tracers
        self.params = params
        self.outvars = outvars
        self.effects = effects
        self.source_info = source_info


class JaxprTracer(Tracer):
    """A partially known value: ``pval``; an unknown one has a recipe saying
    how to compute it and the jaxpr variable it will be."""

    __slots__ = ("pval", "recipe", "jaxpr_var")

    def __init__(self, trace: JaxprTrace, pval: PartialVal, recipe: Any,
                 var: Var | None = None):
        self._trace = trace
        self.pval = pval
        self.recipe = recipe
        self.jaxpr_var = var

    @property
    def aval(self) -> ShapedArray:
        return self.pval.aval

    def is_known(self) -> bool:
        return self.pval.const is not _UNKNOWN

    def full_lower(self) -> Any:
        const = self.pval.const
        if const is not _UNKNOWN:
            return core.full_lower(const)
        return self

    def to_concrete_value(self) -> Any:
        const = self.pval.const
        if const is _UNKNOWN:
            return None
        if isinstance(const, Tracer):
            return const.to_concrete_value()
        return const

    def _origin_source_info(self) -> _si.SourceInfo | None:
        if type(self.recipe) is EqnRecipe:
            return self.recipe.source_info
        return None


def lower_known(x: Any) -> Any:
    """The known value of a partially evaluated tracer (else ``x``)."""
    if isinstance(x, JaxprTracer) and x.is_known():
        return core.full_lower(x.pval.const)
    return x


class JaxprTrace(Trace):
    """Partial evaluation: known values are computed, unknown ones recorded.

    The recorded equations' name stacks are relative to the name stack
    current when the partial evaluation started (``main.payload['name_stack']``),
    as for any new jaxpr; the known computations, bound at the level below,
    keep the full stack."""

    __slots__ = ("_instantiated", "_base_stack", "_relative_infos")

    def __init__(self, main: MainTrace):
        super().__init__(main)
        self._instantiated: dict[int, tuple[Any, JaxprTracer]] = {}
        self._relative_infos: dict[int, tuple[_si.SourceInfo, _si.SourceInfo]] = {}
        base: _si.NameStack | None = main.payload.get("name_stack")
        self._base_stack = base.stack if base is not None else ()

    def _recipe_source_info(self) -> _si.SourceInfo:
        info = _si.current_source_info()
        base = self._base_stack
        if base:
            relative = self._relative_infos.get(id(info))
            if relative is not None and relative[0] is info:
                return relative[1]
            stack = info.name_stack.stack
            out = info
            if stack[:len(base)] == base:
                out = info.replace_name_stack(_si.NameStack(stack[len(base):]))
            self._relative_infos[id(info)] = (info, out)
            return out
        return info

    def pure(self, val: Any) -> JaxprTracer:
        return JaxprTracer(self, PartialVal.known(val), None)

    def lift(self, tracer: Tracer) -> JaxprTracer:
        return self.pure(tracer)

    def new_arg(self, pval: PartialVal) -> Any:
        if pval.is_known():
            return JaxprTracer(self, pval, None)
        return JaxprTracer(self, pval, LAMBDA_BINDING, Var(pval.aval))

    def instantiate_const(self, tracer: JaxprTracer) -> JaxprTracer:
        """An unknown tracer for a known one (its value becomes a constant)."""
        const = tracer.pval.const
        if const is _UNKNOWN:
            return tracer
        return self.new_instantiated_const(const)

    def new_instantiated_const(self, val: Any) -> JaxprTracer:
        hit = self._instantiated.get(id(val))
        if hit is not None and hit[0] is val:
            return hit[1]
        aval = val.aval if isinstance(val, Tracer) else get_aval(val)
        tracer = JaxprTracer(self, PartialVal.unknown(aval), ConstRecipe(val), Var(aval))
        self._instantiated[id(val)] = (val, tracer)
        return tracer

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        rule = custom_partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, *tracers, **params)
        if all(t.pval.const is not _UNKNOWN for t in tracers):
            return primitive.bind(*[t.pval.const for t in tracers], **params)
        return self.default_process_primitive(primitive, tracers, params)

    def default_process_primitive(self, primitive: Primitive, tracers: list[JaxprTracer],
                                  params: dict[str, Any]) -> Any:
        """Stages ``primitive`` as an equation recipe on (instantiated) tracers."""
        tracers = [self.instantiate_const(t) for t in tracers]
        if primitive not in abstract_eval_rules:
            raise MissingRuleError(f"primitive {primitive.name} has no abstract evaluation "
                                   f"rule, so it cannot be partially evaluated")
        in_avals = tuple([t.pval.aval for t in tracers])
        out = core.abstract_eval_cached(primitive, in_avals, params)
        if _vma._checking[0]:
            out = _vma.result_avals(primitive, in_avals, out, params)
        out_avals = list(out) if primitive.multiple_results else [out]
        out_tracers = self.emit_recipe(primitive, tracers, params, out_avals)
        return out_tracers if primitive.multiple_results else out_tracers[0]

    def emit_recipe(self, primitive: Primitive, in_tracers: list[JaxprTracer],
                    params: dict[str, Any], out_avals: Sequence[ShapedArray],
                    effects: Effects | None = None) -> list[JaxprTracer]:
        """Records ``outs = primitive[params] ins`` (ins must be unknown)."""
        if effects is None:
            effects = core.eqn_effects(primitive, params)
        outvars = [Var(a) for a in out_avals]
        recipe = EqnRecipe(primitive, in_tracers, params, outvars, effects,
                           self._recipe_source_info())
        return [JaxprTracer(self, PartialVal.unknown(a), recipe, v)
                for a, v in zip(out_avals, outvars)]

    def process_map(self, primitive: core.MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        return _partial_eval_map(self, primitive, fun, tracers, params)

    def post_process_map(self, primitive: core.MapPrimitive, out_tracers: list[Any],
                         params: dict[str, Any], *, debug_info: JaxprDebugInfo
                         ) -> tuple[list[Any], core.MapPostProcess]:
        return _post_process_map(self, primitive, out_tracers, params, debug_info)

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        if all(t.is_known() for t in tracers):
            return core.bind_custom_jvp(primitive, fun, jvp, [t.pval.const for t in tracers],
                                        symbolic_zeros=symbolic_zeros)
        # Partial evaluation only builds linear functions here, which need no
        # custom rule any more: inline the function.
        return list(fun.call_wrapped(*tracers))

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        if all(t.is_known() for t in tracers):
            return core.bind_custom_vjp(primitive, fun, fwd, bwd,
                                        [t.pval.const for t in tracers],
                                        out_trees=out_trees, symbolic_zeros=symbolic_zeros)
        return list(fun.call_wrapped(*tracers))


_recipe_seq = operator.attrgetter("seq")


def tracers_to_jaxpr(in_tracers: Sequence[JaxprTracer], out_tracers: Sequence[JaxprTracer],
                     debug_info: JaxprDebugInfo | None = None, *, allow_env: bool = False
                     ) -> tuple[Jaxpr, list[Any], list[JaxprTracer]]:
    """Collects the recipes reachable from ``out_tracers`` into a jaxpr, in the
    order they were created, with invars ``in_tracers``; constants become constvars. Unknown inputs that are
    not among ``in_tracers`` (free tracers of an enclosing partial evaluation)
    are returned as ``env`` when ``allow_env``, appended to the invars."""
    in_ids = {id(t) for t in in_tracers}
    constvars: list[Var] = []
    constvals: list[Any] = []
    seen_leaves: set[int] = set()
    env: list[JaxprTracer] = []
    eqn_recipes: list[EqnRecipe] = []
    seen: set[int] = set()

    def leaf(t: JaxprTracer) -> None:
        if id(t) in seen_leaves:
            return
        seen_leaves.add(id(t))
        recipe = t.recipe
        if type(recipe) is ConstRecipe:
            assert t.jaxpr_var is not None
            constvars.append(t.jaxpr_var)
            constvals.append(recipe.val)
        elif recipe is LAMBDA_BINDING:
            if id(t) not in in_ids:
                if not allow_env:
                    raise escaped_tracer_error(
                        t, "an input of an enclosing partial evaluation reached this one")
                env.append(t)
        else:
            raise escaped_tracer_error(t, f"a tracer without a recipe ({recipe!r})")

    for root in out_tracers:
        recipe = root.recipe
        if type(recipe) is not EqnRecipe:
            leaf(root)
            continue
        if id(recipe) in seen:
            continue
        seen.add(id(recipe))
        stack: list[tuple[EqnRecipe, int]] = [(recipe, 0)]
        while stack:
            r, i = stack[-1]
            if i < len(r.in_tracers):
                stack[-1] = (r, i + 1)
                t = r.in_tracers[i]
                sub = t.recipe
                if type(sub) is EqnRecipe:
                    if id(sub) not in seen:
                        seen.add(id(sub))
                        stack.append((sub, 0))
                else:
                    leaf(t)
            else:
                stack.pop()
                eqn_recipes.append(r)
    # program (creation) order, as in JAX, not the depth-first order found above
    eqn_recipes.sort(key=_recipe_seq)
    eqns = []
    effects: set[Any] = set()
    for r in eqn_recipes:
        eqns.append(JaxprEqn([t.jaxpr_var for t in r.in_tracers],  # type: ignore[misc]
                             r.outvars, r.primitive, r.params, r.effects, r.source_info))
        if r.effects:
            effects.update(r.effects)
    invars = [t.jaxpr_var for t in in_tracers] + [t.jaxpr_var for t in env]
    outvars = [t.jaxpr_var for t in out_tracers]
    n_in, n_out = len(invars), len(outvars)
    dbg = debug_info or JaxprDebugInfo("partial_eval", None, (None,) * n_in, (None,) * n_out)
    jaxpr = Jaxpr(constvars, invars, outvars, eqns, frozenset(effects), dbg)  # type: ignore[arg-type]
    return jaxpr, constvals, env


def trace_to_jaxpr_nounits(fun: WrappedFun, pvals: Sequence[PartialVal],
                           instantiate: bool | Sequence[bool] | Callable[[int], Sequence[bool]]
                           = False, *, transform: str = "partial_eval"
                           ) -> tuple[Jaxpr, list[PartialVal], list[Any]]:
    """Partially evaluates flat ``fun`` on ``pvals``: known values are computed
    now; returns the jaxpr of the unknown part (invars: the unknown inputs;
    outvars: the unknown outputs), every output's PartialVal, and the jaxpr's
    consts. ``instantiate`` (per output, or a function of the output count)
    forces known outputs into the jaxpr."""
    with core.new_main(JaxprTrace, transform=transform, debug_info=fun.debug_info,
                       name_stack=_si.current_name_stack()) as main:
        trace = main.trace
        assert isinstance(trace, JaxprTrace)
        in_tracers = [trace.new_arg(p) for p in pvals]
        args = [t.pval.const if t.is_known() else t for t in in_tracers]
        outs = fun.call_wrapped(*args)
        out_tracers = [trace.full_raise(o) for o in outs]
        n_out = len(out_tracers)
        inst = (instantiate(n_out) if callable(instantiate) else
                (instantiate,) * n_out if isinstance(instantiate, bool) else instantiate)
        out_tracers = [trace.instantiate_const(t) if i else t
                       for t, i in zip(out_tracers, inst)]
        unknown_in = [t for t in in_tracers if not t.is_known()]
        unknown_out = [t for t in out_tracers if not t.is_known()]
        jaxpr, consts, _ = tracers_to_jaxpr(unknown_in, unknown_out)
        out_pvals = [t.pval for t in out_tracers]
    return jaxpr, out_pvals, consts


def partial_eval_jaxpr_nounits(closed_jaxpr: ClosedJaxpr, unknowns: Sequence[bool],
                               instantiate: bool | Sequence[bool]
                               ) -> tuple[ClosedJaxpr, ClosedJaxpr, list[bool], list[ShapedArray]]:
    """Splits a closed jaxpr by data dependence on the ``unknowns`` inputs.

    Returns ``(jaxpr_known, jaxpr_unknown, out_unknowns, res_avals)``:
    ``jaxpr_known`` maps the known inputs to ``[*known_outputs, *residuals]``;
    ``jaxpr_unknown`` maps ``[*residuals, *unknown_inputs]`` to the unknown
    outputs. ``instantiate`` forces outputs to be unknown. Residuals are named
    ``residual(x)`` when they are the known input ``x``, else ``None``.
    """
    unknowns = [bool(u) for u in unknowns]
    n_out = len(closed_jaxpr.jaxpr.outvars)
    inst = ([bool(instantiate)] * n_out if isinstance(instantiate, bool)
            else [bool(i) for i in instantiate])
    fun = wrapped_fun_of_jaxpr(closed_jaxpr)
    in_avals = closed_jaxpr.in_avals
    dbg = closed_jaxpr.jaxpr.debug_info
    arg_names = dbg.arg_names if dbg is not None else (None,) * len(in_avals)
    result_paths = dbg.result_paths if dbg is not None else (None,) * n_out
    cell: list[Any] = []

    def known_fun(*known_vals: Any) -> list[Any]:
        known_iter = iter(known_vals)
        pvals = [PartialVal.unknown(a) if u else PartialVal.known(next(known_iter))
                 for a, u in zip(in_avals, unknowns)]
        jaxpr_unknown, out_pvals, residuals = trace_to_jaxpr_nounits(fun, pvals, inst)
        known_names = [n for n, u in zip(arg_names, unknowns) if not u]
        res_names = []
        for r in residuals:
            name = None
            for kv, kn in zip(known_vals, known_names):
                if r is kv:
                    name = _names.residual(kn)
                    break
            res_names.append(name)
        cell.append((jaxpr_unknown, out_pvals, [get_aval(r) for r in residuals], res_names))
        return [p.get_known() for p in out_pvals if p.is_known()] + list(residuals)

    known_avals = [a for a, u in zip(in_avals, unknowns) if not u]
    jaxpr_known, _, consts_known = trace_to_jaxpr_dynamic(wrap_init(known_fun), known_avals)
    (jaxpr_unknown, out_pvals, res_avals, res_names), = cell
    out_unknowns = [not p.is_known() for p in out_pvals]
    src = dbg.func_src_info if dbg is not None else None
    traced_for = dbg.traced_for if dbg is not None else "partial_eval"
    jaxpr_known = jaxpr_known.replace(debug_info=JaxprDebugInfo(
        traced_for, src, tuple(n for n, u in zip(arg_names, unknowns) if not u),
        tuple(p for p, uk in zip(result_paths, out_unknowns) if not uk) + tuple(res_names)))
    jaxpr_unknown = convert_constvars_jaxpr(jaxpr_unknown).replace(debug_info=JaxprDebugInfo(
        traced_for, src, tuple(res_names) + tuple(n for n, u in zip(arg_names, unknowns) if u),
        tuple(p for p, uk in zip(result_paths, out_unknowns) if uk)))
    known, unknown = ClosedJaxpr(jaxpr_known, consts_known), ClosedJaxpr(jaxpr_unknown, ())
    core.maybe_validate(known)
    core.maybe_validate(unknown)
    return known, unknown, out_unknowns, res_avals


# --- partial evaluation of map primitives (pmap) ------------------------------------------------
def _partial_eval_map_body(inner: Callable[..., Any], store: Any, main: MainTrace,
                           in_knowns: tuple[bool, ...], in_avals: tuple[ShapedArray, ...],
                           known_names: tuple[str | None, ...], *known_vals: Any) -> list[Any]:
    trace = main.trace
    assert isinstance(trace, JaxprTrace)
    known_iter = iter(known_vals)
    in_tracers = [next(known_iter) if k else trace.new_arg(PartialVal.unknown(a))
                  for k, a in zip(in_knowns, in_avals)]
    outs = inner(*in_tracers)
    out_tracers = [trace.full_raise(o) for o in outs]
    out_knowns = tuple(t.is_known() for t in out_tracers)
    unknown_in = [t for t, k in zip(in_tracers, in_knowns) if not k]
    unknown_out = [t for t in out_tracers if not t.is_known()]
    jaxpr, residuals, env = tracers_to_jaxpr(unknown_in, unknown_out, allow_env=True)
    res_names = tuple(_residual_name(r, known_vals, known_names) for r in residuals)
    store.store((out_knowns, [t.aval for t in unknown_out], jaxpr, res_names, env))
    return [t.pval.const for t in out_tracers if t.is_known()] + list(residuals)


def _residual_name(residual: Any, known_vals: Sequence[Any],
                   known_names: Sequence[str | None]) -> str | None:
    """``residual(x)`` when the residual is the known input ``x`` itself."""
    for value, name in zip(known_vals, known_names):
        if residual is value:
            return _names.residual(name)
    return None


def _partial_eval_map(trace: JaxprTrace, primitive: Primitive, fun: WrappedFun,
                      tracers: list[JaxprTracer], params: dict[str, Any]) -> list[Any]:
    axis_name, axis_size = params["axis_name"], params["axis_size"]
    in_axes = tuple(params["in_axes"])
    in_knowns = tuple(t.is_known() for t in tracers)
    in_avals = tuple(core.mapped_aval(axis_size, ax, t.aval) if not k else t.aval
                     for t, ax, k in zip(tracers, in_axes, in_knowns))
    dbg = fun.debug_info
    names = dbg.safe_arg_names(len(tracers)) if dbg is not None else (None,) * len(tracers)
    known_names = tuple(n for n, k in zip(names, in_knowns) if k)
    body, aux = transformation_with_aux(_partial_eval_map_body, fun, trace.main, in_knowns,
                                        in_avals, known_names)
    if dbg is not None:
        def known_paths() -> tuple[str | None, ...]:
            out_knowns, _, _, res_names, _ = aux()
            paths = dbg.safe_result_paths(len(out_knowns))
            return tuple(p for p, k in zip(paths, out_knowns) if k) + tuple(res_names)

        body = body.replace_debug_info(dbg.replace(arg_names=known_names,
                                                   result_paths=known_paths))
    out_axes_thunk = params["out_axes_thunk"]

    def known_out_axes() -> tuple[int | None, ...]:
        out_knowns, _, _, res_names, _ = aux()
        known_axes: tuple[int | None, ...] = tuple(
            ax for ax, k in zip(out_axes_thunk(), out_knowns) if k)
        return known_axes + (0,) * len(res_names)

    known_params = {k: v for k, v in params.items()}
    known_params.update(in_axes=tuple(ax for ax, k in zip(in_axes, in_knowns) if k),
                        out_axes_thunk=known_out_axes)
    known_params = core.update_map_params(
        primitive, known_params, [i for i, k in enumerate(in_knowns) if k])
    outs = primitive.bind(body, *[t.pval.const for t in tracers if t.is_known()],
                          **known_params)
    out_knowns, out_avals_mapped, jaxpr, res_names, env = aux()
    n_res = len(res_names)
    known_outs, residuals = outs[:len(outs) - n_res], outs[len(outs) - n_res:]
    out_axes = tuple(out_axes_thunk())
    staged_out_axes = tuple(ax for ax, k in zip(out_axes, out_knowns) if not k)
    unknown_tracers = [t for t in tracers if not t.is_known()]
    staged_in_axes = ((0,) * n_res + (None,) * len(env)
                      + tuple(ax for ax, k in zip(in_axes, in_knowns) if not k))
    call_jaxpr = convert_constvars_jaxpr(jaxpr)
    if dbg is not None:
        paths = dbg.safe_result_paths(len(out_knowns))
        call_jaxpr = call_jaxpr.replace(debug_info=JaxprDebugInfo(
            dbg.traced_for, dbg.func_src_info, tuple(res_names) + (None,) * len(env) + tuple(
                n for n, k in zip(names, in_knowns) if not k),
            tuple(p for p, k in zip(paths, out_knowns) if not k)))
    staged_params = {k: v for k, v in params.items() if k != "out_axes_thunk"}
    staged_params.update(in_axes=staged_in_axes, out_axes=staged_out_axes,
                         call_jaxpr=call_jaxpr)
    staged_params = core.update_map_params(
        primitive, staged_params, [None] * (n_res + len(env))
        + [i for i, k in enumerate(in_knowns) if not k])
    res_tracers = [trace.new_instantiated_const(r) for r in residuals]
    out_avals = [core.unmapped_aval(axis_size, ax, a)
                 for ax, a in zip(staged_out_axes, out_avals_mapped)]
    effects = remove_named_axes(jaxpr.effects, [axis_name])
    staged = trace.emit_recipe(primitive, [*res_tracers, *env, *unknown_tracers], staged_params,
                               out_avals, effects)
    known_iter, staged_iter = iter(known_outs), iter(staged)
    return [next(known_iter) if k else next(staged_iter) for k in out_knowns]


def _post_process_map(trace: JaxprTrace, primitive: Primitive,
                      out_tracers: list[JaxprTracer], params: dict[str, Any],
                      debug_info: JaxprDebugInfo) -> tuple[list[Any], core.MapPostProcess]:
    """A map body closed over unknown values of ``trace``: its known outputs
    and residuals leave the map; the unknown part is staged as a second map
    equation (residuals mapped at 0, the closed-over values broadcast).
    ``debug_info`` names the body's outputs: the known ones keep their names,
    the staged map is named after the body with the unknown ones' names (its
    inputs, residuals and closed-over values, have none)."""
    out_knowns = [t.is_known() for t in out_tracers]
    unknown = [t for t in out_tracers if not t.is_known()]
    jaxpr, residuals, env = tracers_to_jaxpr([], unknown, allow_env=True)
    known_vals = [t.pval.const for t in out_tracers if t.is_known()]
    axis_name, axis_size = params["axis_name"], params["axis_size"]
    staged_out_axes: list[tuple[Any, ...]] = []

    def out_axes_transform(out_axes: tuple[Any, ...]) -> tuple[Any, ...]:
        staged_out_axes.append(tuple(ax for ax, k in zip(out_axes, out_knowns) if not k))
        return tuple(ax for ax, k in zip(out_axes, out_knowns) if k) + (0,) * len(residuals)

    def todo(outs: list[Any]) -> list[Any]:
        n_known = len(outs) - len(residuals)
        known_outs, res = outs[:n_known], outs[n_known:]
        res_tracers = [trace.new_instantiated_const(r) for r in res]
        out_axes = staged_out_axes[-1]
        call_jaxpr = convert_constvars_jaxpr(jaxpr).replace(debug_info=JaxprDebugInfo(
            debug_info.traced_for, debug_info.func_src_info,
            (None,) * (len(res) + len(env)),
            tuple(p for p, k in zip(debug_info.result_paths, out_knowns) if not k)))
        new_params = {k: v for k, v in params.items() if k != "out_axes_thunk"}
        new_params.update(in_axes=(0,) * len(res) + (None,) * len(env), out_axes=out_axes,
                          call_jaxpr=call_jaxpr)
        new_params = core.update_map_params(primitive, new_params,
                                            [None] * (len(res) + len(env)))
        out_avals = [core.unmapped_aval(axis_size, ax, t.aval)
                     for ax, t in zip(out_axes, unknown)]
        effects = remove_named_axes(jaxpr.effects, [axis_name])
        staged = trace.emit_recipe(primitive, [*res_tracers, *env], new_params, out_avals,
                                   effects)
        known_iter, staged_iter = iter(known_outs), iter(staged)
        return [next(known_iter) if k else next(staged_iter) for k in out_knowns]

    known_paths = tuple(p for p, k in zip(debug_info.result_paths, out_knowns) if k)
    # the residuals are computed values, never inputs of the body: no names
    return known_vals + list(residuals), core.MapPostProcess(
        todo, out_axes_transform, known_paths + (None,) * len(residuals))


# --- dead-code elimination ---------------------------------------------------------------------
def _check_dce_rule(eqn: JaxprEqn, used_inputs: Sequence[bool], new_eqn: JaxprEqn) -> None:
    """The DCE-rule protocol: ``used_inputs`` has one flag per operand of the
    *old* equation, and the new equation's operands are exactly the flagged
    ones, in order (so the caller marks the right variables as needed)."""
    kept = [a for a, u in zip(eqn.invars, used_inputs) if u]
    if len(used_inputs) != len(eqn.invars) or len(kept) != len(new_eqn.invars) or any(
            a is not b for a, b in zip(kept, new_eqn.invars)):
        raise AssertionError(
            f"the DCE rule of {eqn.primitive.name!r} returned {len(used_inputs)} input flags "
            f"({sum(map(bool, used_inputs))} set) for an equation with {len(eqn.invars)} "
            f"operands, and a new equation with {len(new_eqn.invars)}")


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool],
              instantiate: bool | Sequence[bool] = False) -> tuple[Jaxpr, list[bool]]:
    """Removes the outputs not in ``used_outputs``, the equations nothing
    needs, and the inputs nothing uses (unless ``instantiate`` keeps them).
    Returns the new jaxpr (debug info filtered alike) and which inputs it
    kept. Higher-order primitives prune their bodies via ``dce_rules``."""
    used_outputs = [bool(u) for u in used_outputs]
    n_in = len(jaxpr.invars)
    inst = ([bool(instantiate)] * n_in if isinstance(instantiate, bool)
            else [bool(i) for i in instantiate])
    used: set[Var] = {v for v, u in zip(jaxpr.outvars, used_outputs)
                      if u and isinstance(v, Var)}
    new_eqns: list[JaxprEqn] = []
    for eqn in reversed(jaxpr.eqns):
        used_outs = [not isinstance(v, DropVar) and v in used for v in eqn.outvars]
        rule = dce_rules.get(eqn.primitive)
        if rule is not None:
            used_ins, new_eqn = rule(used_outs, eqn)
            if new_eqn is not None:
                _check_dce_rule(eqn, used_ins, new_eqn)
                new_eqns.append(new_eqn)
                # The flags are the old equation's: one per operand it had.
                used.update(a for a, u in zip(eqn.invars, used_ins)
                            if u and isinstance(a, Var))
            continue
        if any(used_outs) or has_side_effects(eqn.effects):
            new_eqns.append(eqn)
            used.update(a for a in eqn.invars if isinstance(a, Var))
    new_eqns.reverse()
    used_inputs = [v in used or i for v, i in zip(jaxpr.invars, inst)]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u]
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    dbg = jaxpr.debug_info
    if dbg is not None:
        dbg = dbg.replace(
            arg_names=tuple(n for n, u in zip(dbg.arg_names, used_inputs) if u),
            result_paths=tuple(p for p, u in zip(dbg.result_paths, used_outputs) if u))
    effects = frozenset(e for eqn in new_eqns for e in eqn.effects)
    new_jaxpr = Jaxpr(list(jaxpr.constvars), invars, outvars, new_eqns, effects, dbg)
    core.maybe_validate(new_jaxpr)
    return new_jaxpr, used_inputs


def dce_closed_jaxpr(closed_jaxpr: ClosedJaxpr, used_outputs: Sequence[bool],
                     instantiate: bool | Sequence[bool] = False
                     ) -> tuple[ClosedJaxpr, list[bool]]:
    """``dce_jaxpr`` of a closed jaxpr, pruning its unused constants too."""
    jaxpr = closed_jaxpr.jaxpr
    n_consts = len(jaxpr.constvars)
    inst = instantiate if isinstance(instantiate, bool) else list(instantiate)
    inner, used_inputs = dce_jaxpr(
        convert_constvars_jaxpr(jaxpr), used_outputs,
        [False] * n_consts + ([inst] * len(jaxpr.invars) if isinstance(inst, bool) else inst))
    used_consts, used_args = used_inputs[:n_consts], used_inputs[n_consts:]
    constvars = [v for v, u in zip(jaxpr.constvars, used_consts) if u]
    consts = [c for c, u in zip(closed_jaxpr.consts, used_consts) if u]
    dbg = inner.debug_info
    if dbg is not None:
        dbg = dbg.replace(arg_names=tuple(dbg.arg_names[len(constvars):]))
    new = Jaxpr(constvars, inner.invars[len(constvars):], inner.outvars, inner.eqns,
                inner.effects, dbg)
    return ClosedJaxpr(new, consts), used_args


def has_named_axis_effects(effects: Effects) -> bool:
    return any(isinstance(e, NamedAxisEffect) for e in effects)

