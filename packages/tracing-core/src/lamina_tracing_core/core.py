"""The tracing machinery: traces, tracers, ``bind`` and jaxpr evaluation.

lamina follows JAX's classic design (as in autodidax). Each active
transformation is a ``MainTrace`` with a *level* on a per-thread trace stack;
the bottom (level 0) is the ``EvalTrace``, which runs primitives eagerly
through ``primitives.impl_rules`` (registered by the runtime layer). A value
being transformed is wrapped in a ``Tracer`` of that transformation's ``Trace``.

``bind(prim, args, params)`` finds the highest-level trace among its arguments
and the current *dynamic* trace (``find_top_trace``), lifts every argument into
it (``full_raise``), and lets it ``process_primitive``. The dynamic trace is the
omnistaging device: ``jit`` and ``make_jaxpr`` push a ``DynamicJaxprTrace`` as
the dynamic trace, so operations on plain constants inside them are staged too.

Eagerly (the eval trace), a primitive's inputs are checked with its
abstract-evaluation rule before its impl runs, unless the impl checks them
itself (``impls_checking_inputs``; the runtime's compiled dispatch does, on
every compile). ``abstract_eval_cached`` memoizes the rules of the primitives
in ``cacheable_abstract_evals``, for tracing and for these checks.

A ``MainTrace`` dies when its context exits; a tracer of a dead main trace that
is used again (it leaked through a side effect) raises ``UnexpectedTracerError``
naming the transformation, the function, and where the tracer was made.

Named axes: ``extend_axis_env(name, size, main)`` binds an axis (vmap with an
``axis_name``, pmap, the lowering's axis environment). Binding a primitive whose
effects name an axis (``psum(x, 'i')``) checks the axis is bound (else
``UnboundAxisNameError``) and raises the trace to the binder's main trace, so
that e.g. a ``vmap`` with ``axis_name='i'`` processes a ``psum`` over ``'i'``
even of an unbatched value.
"""

from __future__ import annotations

import gc
import os
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core import errors as _errors
from lamina_tracing_core.array_methods import ArrayMethods
from lamina_tracing_core import primitives as _primitives
from lamina_tracing_core import source_info as _si
from lamina_tracing_core import vma as _vma
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, aval_handlers, get_aval
from lamina_tracing_core.effects import (
    Effects,
    NamedAxisEffect,
    no_effects,
    union,
)
from lamina_tracing_core.errors import (
    ConcretizationTypeError,
    JaxprTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnboundAxisNameError,
    UnexpectedTracerError,
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
    subjaxprs_of_params,
    validate_jaxpr_debug_info,
)
from lamina_tracing_core.primitives import (
    MissingRuleError,
    Primitive,
    abstract_eval_rules,
    effect_rules,
    impl_rules,
)

from lamina_linear_util.debug_info import TracingDebugInfo, set_validation, validation_enabled
from lamina_linear_util.linear_util import WrappedFun, transformation_with_aux, wrap_init

__all__ = [
    "AxisFrame", "ClosedJaxpr", "ConcretizationTypeError", "EvalTrace", "Jaxpr",
    "JaxprEqn", "Literal", "MainTrace", "MapPostProcess", "MapPrimitive", "Primitive",
    "ShapedArray",
    "Trace", "Tracer", "UnboundAxisNameError", "UnexpectedTracerError", "Var",
    "abstract_eval_cached", "axis_frame", "bind", "cacheable_abstract_evals",
    "check_eager_inputs", "check_jaxpr", "concrete_or_error", "config", "eqn_effects",
    "eval_context",
    "eval_jaxpr", "extend_axis_env", "find_top_trace", "full_lower", "get_aval",
    "impls_checking_inputs", "invalid_output_error", "jaxpr_as_fun", "literal_value", "mapped_aval", "new_dynamic",
    "new_main", "raise_if_leaked", "staging", "staging_hooks", "tracing_debug_info_of", "unmapped_aval",
    "wrapped_fun_of_jaxpr",
]


# --- configuration -------------------------------------------------------------------
class _Config:
    """Process-wide switches of this layer (env vars give the defaults).

    ``check_tracer_leaks`` (JAX's ``jax_check_tracer_leaks``, off by default):
    when a staging (jit, make_jaxpr) or vmap trace ends, any of its tracers
    still reachable is an error (see :func:`raise_if_leaked`); it costs a
    garbage collection per trace, so it is for debugging.

    ``enable_checks`` (JAX's ``jax_enable_checks``, off by default;
    ``LAMINA_ENABLE_CHECKS``): every jaxpr a trace or transformation produces
    is type-checked (:func:`check_jaxpr`), an ill-typed one a ``JaxprTypeError``
    naming the function and the equation; for debugging transformation rules."""

    check_tracer_leaks: bool = False
    enable_checks: bool = os.environ.get("LAMINA_ENABLE_CHECKS", "").strip().lower() in (
        "1", "true", "yes", "on")

    @property
    def validate_debug_info(self) -> bool:
        """Checks debug info after every transformation; a stale record raises.
        One switch with linear-util's (``LAMINA_VALIDATE_DEBUG_INFO``), so its
        ``safe_arg_names``/``safe_result_paths`` raise on a count mismatch too."""
        return validation_enabled()

    @validate_debug_info.setter
    def validate_debug_info(self, on: bool) -> None:
        set_validation(on)


config = _Config()


def invalid_output_error(debug_info: TracingDebugInfo | None, outs: Sequence[Any]
                         ) -> TypeError:
    """The error for a traced function that returned something that is not an
    array, naming the function and the output's path in JAX's words (code
    matches on them): ``function f at file.py:3 traced for jit returned a value
    of type <class 'str'> at output component [1], which is not a valid JAX type``."""
    i, bad = next((i, x) for i, x in enumerate(outs) if not _is_value(x))
    paths: Sequence[str | None] = ()
    if debug_info is not None:
        try:
            paths = debug_info.safe_result_paths(len(outs))
        except Exception:  # noqa: BLE001 - the names are a courtesy in an error already
            paths = ()
    path = paths[i] if i < len(paths) else None
    component = path[len("result"):] if path and path.startswith("result") else f"[{i}]"
    function = (f"function {debug_info.func_src_info} traced for {debug_info.traced_for}"
                if debug_info is not None else "the traced function")
    where = f"at output component {component}" if component else "as its result"
    return TypeError(f"{function} returned a value of type {type(bad)} {where}, which is not "
                     f"a valid JAX type")


def describe_output(debug_info: TracingDebugInfo | None, i: int, n_outs: int) -> str:
    """``output component ['b'] of the function f at x.py:3 for vmap`` (``the
    result of ...`` for a single unnested result): output ``i`` of ``n_outs``
    flat outputs, for error messages."""
    if debug_info is None:
        return f"output {i} of the transformed function"
    try:
        paths: Sequence[str | None] = debug_info.safe_result_paths(n_outs)
    except Exception:  # noqa: BLE001 - the names are a courtesy in an error already
        paths = ()
    path = paths[i] if i < len(paths) else None
    component = path[len("result"):] if path and path.startswith("result") else f"[{i}]"
    which = f"output component {component}" if component else "the result"
    return f"{which} of the function {debug_info.func_src_info} for {debug_info.traced_for}"


def invalid_argument_error(debug_info: TracingDebugInfo | None, args: Sequence[Any]
                           ) -> InvalidInputError:
    """The error for a transformation called with a flat argument that is not
    an array: JAX's words (``Argument 'no' of type <class 'str'> is not a
    valid JAX type``), then the argument's path and the function
    (``: argument x['a'] of the function f at file.py:3 for vmap``)."""
    i, bad = next((i, x) for i, x in enumerate(args) if not _is_value(x))
    names: Sequence[str | None] = debug_info.arg_names if debug_info is not None else ()
    name = names[i] if len(names) == len(args) else None
    which = f"argument {name}" if name is not None else f"flat argument {i}"
    function = (f"the function {debug_info.func_src_info} for {debug_info.traced_for}"
                if debug_info is not None else "the transformed function")
    return InvalidInputError(f"Argument {bad!r} of type {type(bad)} is not a valid JAX type: "
                             f"{which} of {function}")


def _is_value(x: Any) -> bool:
    if isinstance(x, Tracer):
        return True
    try:
        get_aval(x)
    except InvalidInputError:
        return False
    return True


def maybe_validate(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Runs ``validate_jaxpr_debug_info`` on a jaxpr a transformation produced,
    when ``config.validate_debug_info`` is on, and :func:`check_jaxpr` when
    ``config.enable_checks`` is."""
    if config.validate_debug_info:
        validate_jaxpr_debug_info(jaxpr, recursive=True, require=False)
    if config.enable_checks:
        check_jaxpr(jaxpr)


# --- the trace stack -------------------------------------------------------------------
class MainTrace:
    """One active transformation: its level, its Trace, and what it is for.

    ``transform`` names the transformation (``jvp``, ``vmap``, ``jit``...) and
    ``debug_info`` (a ``TracingDebugInfo`` or ``JaxprDebugInfo``, when known)
    the function it traces; errors about its tracers quote both.
    """

    __slots__ = ("level", "trace_type", "payload", "alive", "trace", "transform",
                 "debug_info")

    def __init__(self, level: int, trace_type: type[Trace], transform: str,
                 debug_info: Any, payload: dict[str, Any]):
        self.level = level
        self.trace_type = trace_type
        self.payload = payload
        self.alive = True
        self.transform = transform
        self.debug_info = debug_info
        self.trace: Trace = trace_type(self)

    def __repr__(self) -> str:
        state = "" if self.alive else ", dead"
        return f"MainTrace({self.level}, {self.trace_type.__name__}{state})"

    def describe_function(self) -> str:
        """``the function f at x.py:3 for jit`` (as error messages say it)."""
        dbg = self.debug_info
        src = getattr(dbg, "func_src_info", None) if dbg is not None else None
        traced_for = getattr(dbg, "traced_for", None) or self.transform
        if not src:
            return f"a function for {traced_for}"
        return f"the function {src} for {traced_for}"


class _TraceState(threading.local):
    def __init__(self) -> None:
        base = MainTrace(0, EvalTrace, "eval", None, {})
        self.stack: list[MainTrace] = [base]
        self.dynamic: MainTrace = base
        self.axis_env: list[AxisFrame] = []


_state: _TraceState  # created below, once EvalTrace exists

#: Called with ``True`` when a staging trace becomes this thread's dynamic
#: trace and ``False`` when the eval trace is dynamic again. jit's C++ fast
#: path keys its cache on it (a call with concrete arrays under a staging
#: trace must be staged, not run).
staging_hooks: list[Callable[[bool], None]] = []


def _notify_staging(dynamic: MainTrace) -> None:
    staging = dynamic.trace_type is not EvalTrace
    for hook in staging_hooks:
        hook(staging)


def trace_stack() -> list[MainTrace]:
    return list(_state.stack)


def cur_level() -> int:
    return len(_state.stack) - 1


@contextmanager
def new_main(trace_type: type[Trace], *, dynamic: bool = False, transform: str | None = None,
             debug_info: Any = None, **payload: Any) -> Iterator[MainTrace]:
    """Pushes a new transformation onto the trace stack for the block.

    ``dynamic=True`` also makes it the dynamic trace (see the module docstring).
    On exit the main trace dies: using one of its tracers afterwards raises
    ``UnexpectedTracerError``.
    """
    state = _state
    main = MainTrace(len(state.stack), trace_type, transform or trace_type.__name__,
                     debug_info, payload)
    state.stack.append(main)
    previous_dynamic = state.dynamic
    if dynamic:
        state.dynamic = main
        if staging_hooks:
            _notify_staging(main)
    try:
        yield main
    finally:
        state.stack.pop()
        state.dynamic = previous_dynamic
        main.alive = False
        if dynamic and staging_hooks:
            _notify_staging(previous_dynamic)


def new_dynamic(trace_type: type[Trace], *, transform: str | None = None,
                debug_info: Any = None, **payload: Any) -> Any:
    """``new_main(trace_type, dynamic=True, ...)``: a staging trace that also
    captures operations on constants (omnistaging)."""
    return new_main(trace_type, dynamic=True, transform=transform, debug_info=debug_info,
                    **payload)


@contextmanager
def new_base_main(trace_type: type[Trace], *, transform: str | None = None,
                  debug_info: Any = None, **payload: Any) -> Iterator[MainTrace]:
    """Replaces the bottom of the stack (level 0, the eval trace) by a new
    main trace of ``trace_type``, which is also the dynamic trace, for the
    block. The map layer's impl rule traces a final-style function this way:
    the transformations above (whose wrappers are in the function) keep
    their levels above the staging trace."""
    state = _state
    main = MainTrace(0, trace_type, transform or trace_type.__name__, debug_info, payload)
    previous_base, previous_dynamic = state.stack[0], state.dynamic
    state.stack[0], state.dynamic = main, main
    if staging_hooks:
        _notify_staging(main)
    try:
        yield main
    finally:
        state.stack[0], state.dynamic = previous_base, previous_dynamic
        main.alive = False
        if staging_hooks:
            _notify_staging(previous_dynamic)


@contextmanager
def eval_context() -> Iterator[None]:
    """Operations whose inputs are all constants run eagerly in the block,
    even while a staging trace (jit, make_jaxpr) is dynamic: a fresh eval
    trace becomes the base and the dynamic trace. Operations on a
    transformation's tracers still go to that transformation (its level is
    higher), so they are staged as usual."""
    with new_base_main(EvalTrace, transform="eval"):
        yield


# --- traces and tracers -----------------------------------------------------------------
class Trace:
    """How one transformation interprets primitives (base class).

    There is one ``Trace`` object per ``MainTrace``; tracers point to it.
    """

    __slots__ = ("main", "level")

    def __init__(self, main: MainTrace):
        self.main = main
        self.level = main.level

    def __repr__(self) -> str:
        return f"{type(self).__name__}(level={self.level})"

    def pure(self, val: Any) -> Any:
        """Wraps a non-tracer value as a tracer of this trace."""
        raise NotImplementedError(f"{type(self).__name__} does not implement pure")

    def lift(self, tracer: Tracer) -> Any:
        """Wraps a tracer of a lower-level trace as a tracer of this trace."""
        raise NotImplementedError(f"{type(self).__name__} does not implement lift")

    def full_raise(self, val: Any) -> Any:
        if not isinstance(val, Tracer):
            return self.pure(val)
        trace = val._trace
        if trace is self:
            return val
        if trace.level < self.level:
            if not trace.main.alive:
                raise escaped_tracer_error(val)
            return self.lift(val)
        raise escaped_tracer_error(
            val, f"it belongs to a transformation (level {trace.level}) that is not "
                 f"below the current one ({type(self).__name__}, level {self.level})")

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement process_primitive")

    def provenance(self, tracer: Tracer) -> str:
        """A sentence on which traced-function arguments ``tracer`` depends
        (``depends on the value of the argument x['a']``), or ``""``."""
        return ""

    def process_map(self, primitive: MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError(
            f"{type(self).__name__} does not support the map primitive {primitive.name}")

    def post_process_map(self, primitive: MapPrimitive, out_tracers: list[Any],
                         params: dict[str, Any], *, debug_info: JaxprDebugInfo
                         ) -> tuple[list[Any], MapPostProcess]:
        """For a map body that closes over this trace's values: returns the
        body's plain outputs and a ``MapPostProcess`` (how to rebuild this
        trace's tracers, the plain outputs' axes and their names).
        ``debug_info`` describes the body; its ``result_paths`` name
        ``out_tracers``."""
        raise NotImplementedError(
            f"a {primitive.name} body closes over values of {type(self).__name__}, which "
            f"is not supported: pass them as arguments instead")

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        raise NotImplementedError(
            f"{type(self).__name__} does not support {primitive.name}")

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        raise NotImplementedError(
            f"{type(self).__name__} does not support {primitive.name}")


class Tracer(ArrayMethods):
    """A value being transformed: it has an ``aval`` and belongs to a Trace.

    Operators and array methods come from ``array_methods.ArrayMethods``.
    Converting a tracer to a Python value works only when the transformation
    knows the value (``to_concrete_value``, e.g. the primal under eager
    ``jvp``); otherwise it raises an error naming the traced function and the
    argument the value depends on.
    """

    __slots__ = ("_trace",)
    __array_priority__ = 1000

    _trace: Trace

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    # Tracer-specific views; subclasses override what they know.
    def full_lower(self) -> Any:
        """The simplest equivalent value (drops wrappers that add nothing)."""
        return self

    def to_concrete_value(self) -> Any:
        """The actual value if this transformation knows it, else ``None``."""
        return None

    def _origin_message(self) -> str:
        """Where this value comes from, for error messages."""
        return trace_origin_message(self)

    def _origin_source_info(self) -> _si.SourceInfo | None:
        """Where this tracer was created, when recorded."""
        return None

    def _operand_origin(self) -> tuple[list[str], Any] | None:
        """For an error about this value as an operand: the names of the
        traced function's arguments it depends on and that function's debug
        info, or ``None`` when this transformation cannot tell."""
        return None

    # shape facts
    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype[Any]:  # type: ignore[override]
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    # conversions to Python values
    def __bool__(self) -> bool:
        value = self.to_concrete_value()
        if value is None:
            raise TracerBoolConversionError(self)
        return bool(value)

    def __int__(self) -> int:
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(self, _errors.conversion_context("int"))
        return int(value)

    def __float__(self) -> float:
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(self, _errors.conversion_context("float"))
        return float(value)

    def __complex__(self) -> complex:
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(self, _errors.conversion_context("complex"))
        return complex(value)

    def __index__(self) -> int:
        value = self.to_concrete_value()
        if value is None:
            raise TracerIntegerConversionError(self)
        return int(value.__index__())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        raise TracerArrayConversionError(self)

    def item(self, *args: Any) -> Any:
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(
                self, "The problem arose with the `item` method of a traced array.")
        return np.asarray(value).item(*args)

    def tolist(self) -> Any:
        value = self.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(
                self, "The problem arose with the `tolist` method of a traced array.")
        return np.asarray(value).tolist()

    def __hash__(self) -> int:
        raise TypeError(f"unhashable type: {type(self).__name__} (a traced array)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.aval.str_short()})"

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle a traced array ({self!r})")


def _aval_of_tracer(x: Any) -> ShapedArray:
    aval: ShapedArray = x.aval
    return aval


aval_handlers[Tracer] = _aval_of_tracer


def trace_origin_message(tracer: Tracer) -> str:
    """``The error occurred while tracing the function f at x.py:3 for jit.``
    plus, where the trace can tell, the arguments the value depends on."""
    main = tracer._trace.main
    message = f"The error occurred while tracing {main.describe_function()}."
    provenance = tracer._trace.provenance(tracer)
    if provenance:
        message += " " + provenance
    return message


def escaped_tracer_error(tracer: Tracer, detail: str | None = None) -> UnexpectedTracerError:
    """The ``UnexpectedTracerError`` for a tracer used outside its transformation."""
    main = tracer._trace.main
    lines = [
        "Encountered an unexpected tracer. A function transformed by lamina had a side "
        "effect, allowing for a reference to an intermediate value with type "
        f"{tracer.aval.str_short()} wrapped in a {type(tracer).__name__} to escape the "
        f"scope of the transformation ({main.transform}).",
        "lamina transformations require that functions explicitly return their outputs, "
        "and disallow saving intermediate values to global state.",
        f"The function being traced when the value leaked was "
        f"{main.describe_function()}.",
    ]
    where = tracer._origin_source_info()
    if where is not None and where.frame is not None:
        lines.append(f"The tracer was created on line {where.frame.file_name}:"
                     f"{where.frame.line} ({where.frame.function_name}).")
    if detail:
        lines.append(f"Detail: {detail}.")
    return UnexpectedTracerError("\n".join(lines))


def _leak_check(tracer: Tracer) -> None:
    if not tracer._trace.main.alive:
        raise escaped_tracer_error(tracer)


def raise_if_leaked(trace: Trace) -> None:
    """After ``trace`` has ended and its caller dropped its own references:
    raises JAX's ``Exception('Leaked trace ...')`` listing each tracer of
    ``trace`` that is still reachable (stored in a global, a closure, an
    object) and what holds it. Unreachable cycles are collected first, so
    only tracers user code can still touch count."""
    gc.collect()
    leaked = [r for r in gc.get_referrers(trace) if isinstance(r, Tracer)]
    if not leaked:
        return
    ignore = {id(leaked)}
    parts = [f"{t!r}\n{trace_origin_message(t)}\n{_why_alive(t, ignore)}" for t in leaked]
    body = "\n\n".join(parts)
    raise Exception(f"Leaked trace {type(trace).__name__}. Leaked tracer(s):\n\n{body}\n")


#: How many holders :func:`_why_alive` follows (each costs a heap walk).
_MAX_LINKS = 8


def _holders(x: Any, ignore: set[int]) -> list[Any]:
    return [r for r in gc.get_referrers(x)
            if id(r) not in ignore and not isinstance(r, types.FrameType)]


def _why_alive(tracer: Tracer, ignore: set[int]) -> str:
    """One line per link of a chain of holders of ``tracer``, up to a module
    global or an object nothing else holds (``<list 1234>[0]``, ``__main__.leaked``)."""
    lines: list[str] = []
    child: Any = tracer
    seen: set[int] = set()
    while (id(child) not in seen and not isinstance(child, types.ModuleType)
           and len(lines) < _MAX_LINKS):
        seen.add(id(child))
        holders = _holders(child, ignore | {id(lines), id(seen)})
        if not holders:
            break
        parent = holders[0]
        del holders  # the list itself holds `parent`: it must not show in the next step
        lines.append(f"<{type(child).__name__} {id(child)}> is referred to by "
                     f"{_place_in(parent, child)}")
        if isinstance(parent, dict):
            module = next((m for m in _holders(parent, ignore)
                           if isinstance(m, types.ModuleType)), None)
            if module is not None:
                break
        child = parent
    return "\n".join(lines)


def _place_in(parent: Any, child: Any) -> str:
    """Where ``child`` sits in ``parent``: an index, a key, a module global."""
    if isinstance(parent, (list, tuple)):
        index = next((i for i, v in enumerate(parent) if v is child), None)
        return f"<{type(parent).__name__} {id(parent)}>[{index}]"
    if isinstance(parent, dict):
        key = next((k for k, v in parent.items() if v is child), None)
        module = next((m for m in gc.get_referrers(parent)
                       if isinstance(m, types.ModuleType) and m.__dict__ is parent), None)
        if module is not None:
            return f"{module.__name__}.{key}"
        return f"<dict {id(parent)}>[{key!r}]"
    return f"<{type(parent).__name__} {id(parent)}>"


def find_top_trace(args: Sequence[Any]) -> Trace:
    """The trace that must process a primitive applied to ``args``: the
    highest-level trace among the tracers in ``args`` and the dynamic trace."""
    top = _state.dynamic
    level = top.level
    for x in args:
        if isinstance(x, Tracer):
            main = x._trace.main
            if not main.alive:
                raise escaped_tracer_error(x)
            if main.level > level:
                top, level = main, main.level
    return top.trace


def full_lower(x: Any) -> Any:
    if isinstance(x, Tracer):
        return x.full_lower()
    return x


def eqn_effects(prim: Primitive, params: dict[str, Any]) -> Effects:
    """The effects of one equation: the primitive's effect rule, or for a
    higher-order primitive without one the union of its inner jaxprs'."""
    rule = effect_rules.get(prim)
    if rule is not None:
        return rule(**params)
    if prim.higher_order:
        return union(j.effects for j in subjaxprs_of_params(params))
    return no_effects


def _raise_to_axis_binders(trace: Trace, effects: Effects) -> Trace:
    """Checks the named axes in ``effects`` are bound and returns the trace
    that must process the primitive given the binders of those axes."""
    for effect in effects:
        if isinstance(effect, NamedAxisEffect):
            frame = axis_frame(effect.name)
            main = frame.main_trace
            if main is not None and main.level > trace.level:
                trace = main.trace
    return trace


def bind(prim: Primitive, args: Sequence[Any], params: dict[str, Any]) -> Any:
    """Applies ``prim`` to ``args`` under the active transformations."""
    if _vma._checking[0]:
        args = _vma.insert_pvary(prim, args)
    # find_top_trace, inlined: this runs for every primitive applied
    top = _state.dynamic
    level = top.level
    for x in args:
        if isinstance(x, Tracer):
            main = x._trace.main
            if main.level > level:
                top, level = main, main.level
            if not main.alive:
                raise escaped_tracer_error(x)
    trace = top.trace
    if prim in effect_rules or prim.higher_order:
        effects = eqn_effects(prim, params)
        if effects:
            trace = _raise_to_axis_binders(trace, effects)
    full_raise = trace.full_raise
    out = trace.process_primitive(prim, [full_raise(a) for a in args], params)
    if prim.multiple_results:
        return [o.full_lower() if isinstance(o, Tracer) else o for o in out]
    return out.full_lower() if isinstance(out, Tracer) else out


_primitives.set_bind(bind)


def staging() -> bool:
    """True while some trace stages equations (jit, make_jaxpr, a pmap body)."""
    return _state.dynamic.level > 0 or not isinstance(_state.dynamic.trace, EvalTrace)


# --- abstract evaluation, memoized -------------------------------------------------------
#: Primitives whose abstract-evaluation rule is a pure function of the input
#: avals and the params (it reads no axis environment and no configuration but
#: the x64 mode), so ``abstract_eval_cached`` may memoize it. The lax layer
#: registers its costlier first-order rules (``dot_general``, ``reshape``, ...).
cacheable_abstract_evals: set[Primitive] = set()
_abstract_eval_memo: dict[Any, Any] = {}
_MAX_ABSTRACT_EVAL_MEMO = 8192


def abstract_eval_cached(prim: Primitive, avals: tuple[ShapedArray, ...],
                         params: dict[str, Any]) -> Any:
    """``abstract_eval_rules[prim](*avals, **params)`` (an aval, or a sequence
    of avals for a primitive with multiple results), memoized by ``(prim,
    avals, params, x64 mode)`` for the primitives in
    ``cacheable_abstract_evals`` whose params are hashable. Errors are never
    memoized: bad input raises every time."""
    rule = abstract_eval_rules.get(prim)
    if rule is None:
        raise MissingRuleError(f"primitive {prim.name} has no abstract evaluation rule")
    if prim not in cacheable_abstract_evals:
        return rule(*avals, **params)
    key = (prim, avals, tuple(params.items()), dtypes.x64_state.enabled)
    try:
        out = _abstract_eval_memo.get(key)
    except TypeError:  # unhashable params
        return rule(*avals, **params)
    if out is None:
        out = rule(*avals, **params)
        if prim.multiple_results:
            out = tuple(out)
        if len(_abstract_eval_memo) >= _MAX_ABSTRACT_EVAL_MEMO:
            _abstract_eval_memo.clear()
        _abstract_eval_memo[key] = out
    return out


def bind_custom_jvp(prim: Primitive, fun: WrappedFun, jvp: WrappedFun, args: Sequence[Any],
                    *, symbolic_zeros: bool) -> list[Any]:
    """Binds a custom-JVP call: ``trace.process_custom_jvp_call(prim, fun, jvp,
    tracers, symbolic_zeros=...)`` on the top trace."""
    trace = find_top_trace(args)
    tracers = [trace.full_raise(a) for a in args]
    outs = trace.process_custom_jvp_call(prim, fun, jvp, tracers, symbolic_zeros=symbolic_zeros)
    return [full_lower(o) for o in outs]


def bind_custom_vjp(prim: Primitive, fun: WrappedFun, fwd: WrappedFun, bwd: Any,
                    args: Sequence[Any], *, out_trees: Callable[[], Any],
                    symbolic_zeros: bool) -> list[Any]:
    """Binds a custom-VJP call: ``trace.process_custom_vjp_call(prim, fun, fwd,
    bwd, tracers, out_trees=..., symbolic_zeros=...)`` on the top trace."""
    trace = find_top_trace(args)
    tracers = [trace.full_raise(a) for a in args]
    outs = trace.process_custom_vjp_call(prim, fun, fwd, bwd, tracers, out_trees=out_trees,
                                         symbolic_zeros=symbolic_zeros)
    return [full_lower(o) for o in outs]


# --- the eval trace (level 0) -----------------------------------------------------------
#: Primitives whose impl rule checks its inputs with the primitive's
#: abstract-evaluation rule itself, so the eval trace does not. The runtime's
#: compiled dispatch qualifies: it runs the abstract-eval rule whenever it
#: compiles, and its compile cache is keyed by the argument types and the
#: params, so a cache hit has been checked. Any other impl rule (numpy
#: references, the control-flow impls) gets its inputs checked first, and bad
#: input raises the rule's clear error before the impl runs.
impls_checking_inputs: set[Primitive] = set()


def check_eager_inputs(primitive: Primitive, args: Sequence[Any], params: dict[str, Any]
                       ) -> Any:
    """Runs ``primitive``'s abstract-evaluation rule on the avals of concrete
    ``args`` (memoized, see ``abstract_eval_cached``) and returns its output
    avals (an aval, or a sequence for multiple results); ``None`` when the
    primitive has no abstract-evaluation rule."""
    if primitive not in abstract_eval_rules:
        return None
    try:
        avals = tuple([get_aval(x) for x in args])
    except TypeError:
        for i, x in enumerate(args):
            try:
                get_aval(x)
            except TypeError as e:
                raise TypeError(f"{primitive.name}: argument {i} ({type(x).__name__}) is not "
                                f"a valid lamina array: {e}") from e
        raise
    return abstract_eval_cached(primitive, avals, params)


class EvalTrace(Trace):
    """The bottom of the stack: runs primitives eagerly with ``impl_rules``, or
    ``primitives.default_impl`` for a primitive without one, after checking the
    inputs with the abstract-evaluation rule (unless the impl does, see
    ``impls_checking_inputs`` and ``primitives.set_default_impl``)."""

    __slots__ = ()

    def pure(self, val: Any) -> Any:
        return val

    def lift(self, tracer: Tracer) -> Any:
        return tracer

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        impl = impl_rules.get(primitive)
        if impl is not None:
            if primitive not in impls_checking_inputs:
                check_eager_inputs(primitive, tracers, params)
            return impl(*tracers, **params)
        default = _primitives.default_impl
        if default is None:
            check_eager_inputs(primitive, tracers, params)  # bad input: the rule's error first
            raise MissingRuleError(
                f"primitive {primitive.name} has no impl rule, so it cannot run eagerly: "
                f"the runtime layer (lamina_interpreters_pxla) sets the default impl when "
                f"it is imported; import it, or evaluate under a transformation that "
                f"stages (jit, make_jaxpr)")
        if not _primitives.default_impl_checks_inputs:
            check_eager_inputs(primitive, tracers, params)
        return default(primitive, *tracers, **params)

    def process_map(self, primitive: MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        impl = impl_rules.get(primitive)
        if impl is None:
            raise MissingRuleError(
                f"map primitive {primitive.name} has no impl rule (the pmap layer "
                f"registers it)")
        out: list[Any] = impl(fun, *tracers, **params)
        return out

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        del primitive, jvp, symbolic_zeros  # the custom rule matters only under jvp
        return list(fun.call_wrapped(*tracers))

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        del primitive, fwd, bwd, out_trees, symbolic_zeros
        return list(fun.call_wrapped(*tracers))


_state = _TraceState()


# --- named axes ----------------------------------------------------------------------------
class AxisFrame:
    """A bound named axis: its name, size and (for vmap) the binder's main trace."""

    __slots__ = ("name", "size", "main_trace")

    def __init__(self, name: object, size: int | None, main_trace: MainTrace | None):
        self.name = name
        self.size = size
        self.main_trace = main_trace

    def __repr__(self) -> str:
        return f"AxisFrame({self.name!r}, size={self.size})"


@contextmanager
def extend_axis_env(name: object, size: int | None,
                    main_trace: MainTrace | None = None) -> Iterator[AxisFrame]:
    """Binds the named axis ``name`` of ``size`` for the block. ``main_trace``
    is the binder's main trace when the binder processes collectives itself
    (vmap); pmap and the lowering's axis environment pass ``None``."""
    frame = AxisFrame(name, size, main_trace)
    env = _state.axis_env
    env.append(frame)
    try:
        yield frame
    finally:
        env.remove(frame)


@contextmanager
def extend_axis_env_nd(axes: Sequence[tuple[object, int | None]]) -> Iterator[None]:
    """Binds several ``(name, size)`` axes (no binder trace) for the block."""
    frames = [AxisFrame(n, s, None) for n, s in axes]
    env = _state.axis_env
    env.extend(frames)
    try:
        yield
    finally:
        for frame in frames:
            env.remove(frame)


def axis_frame(name: object) -> AxisFrame:
    """The innermost binding of the named axis ``name``; raises
    ``UnboundAxisNameError`` naming the axis when none binds it."""
    for frame in reversed(_state.axis_env):
        if frame.name == name:
            return frame
    raise UnboundAxisNameError(name, bound_axis_names(), _innermost_traced_function())


def _innermost_traced_function() -> str | None:
    """``the function f at x.py:3 for vmap``: the innermost transformation
    that knows which function it traces (for errors met while tracing)."""
    mains = sorted([*_state.stack, _state.dynamic], key=lambda m: m.level, reverse=True)
    for main in mains:
        if main.debug_info is not None:
            return main.describe_function()
    return None


def bound_axis_names() -> tuple[object, ...]:
    return tuple(f.name for f in _state.axis_env)


def axis_size(name: object) -> int | None:
    return axis_frame(name).size


# --- map primitives (final-style: pmap) ------------------------------------------------------
def mapped_aval(size: int | None, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """The per-instance aval of ``aval`` mapped along ``axis`` (removed)."""
    if axis is None:
        return aval
    if size is not None and aval.shape[axis] != size:
        raise ValueError(f"mapped axis {axis} of {aval.str_short()} has size "
                         f"{aval.shape[axis]}, expected {size}")
    return aval.update(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """The aval of per-instance ``aval`` stacked along ``axis`` ``size`` times."""
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


class MapPrimitive(Primitive):
    """A final-style parallel map (pmap): ``bind(fun, *args, **params)``.

    ``fun`` stays a ``WrappedFun`` until the impl rule traces it. Params:
    ``axis_name``, ``axis_size``, ``in_axes`` (one ``int | None`` per flat
    argument) and ``out_axes_thunk`` (a thunk returning one ``int | None`` per
    flat result, known once ``fun`` has been traced), plus whatever the map
    layer adds. Each trace's ``process_map`` transforms ``fun`` (WrappedFun ->
    WrappedFun, updating ``fun.debug_info``) and rebinds. In a jaxpr the
    equation holds ``call_jaxpr`` (a Jaxpr without constvars) and a concrete
    ``out_axes`` instead of the thunk.
    """

    multiple_results = True
    map_primitive = True

    def __init__(self, name: str):
        super().__init__(name, multiple_results=True)

    def bind(self, *args: Any, **params: Any) -> Any:
        fun, *vals = args
        trace = find_top_trace(vals)
        # Values of transformations above `trace` that `fun` closes over come
        # out of the body as their tracers: each such trace post-processes the
        # body's outputs (`post_process_map`) and re-wraps the map's results.
        fun, todos = _process_env_traces(fun, self, trace.level, params)
        params = dict(params, out_axes_thunk=_env_out_axes_thunk(params["out_axes_thunk"],
                                                                  todos))
        tracers = [trace.full_raise(v) for v in vals]
        outs = [full_lower(o) for o in trace.process_map(self, fun, tracers, params)]
        for post in reversed(todos()):
            outs = [full_lower(o) for o in post.todo(outs)]
        return outs

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        new_params = dict(params)
        call_jaxpr: Jaxpr = new_params.pop("call_jaxpr")
        out_axes = tuple(new_params.pop("out_axes"))
        fun = wrapped_fun_of_jaxpr(ClosedJaxpr(call_jaxpr, ()), traced_for=self.name)
        new_params["out_axes_thunk"] = _const_thunk(out_axes)
        return [fun], new_params


class MapPostProcess(NamedTuple):
    """What a trace's ``post_process_map`` returns beside the plain outputs.

    ``todo(map_results)`` rebuilds the trace's tracers from the map's results;
    ``out_axes(axes)`` gives the plain outputs' axes from the body's;
    ``result_paths`` names the plain outputs (the body's names passed through
    the naming algebra of ``names``, ``None`` where no name exists).
    """

    todo: Callable[[list[Any]], list[Any]]
    out_axes: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    result_paths: tuple[str | None, ...]


def _env_traces(inner: Callable[..., Any], store: Any, primitive: MapPrimitive, level: int,
                params_key: tuple[Any, ...], debug_info: TracingDebugInfo | None,
                *args: Any) -> list[Any]:
    outs = list(inner(*args))
    params = dict(params_key)
    todos: list[MapPostProcess] = []
    body: JaxprDebugInfo | None = None
    while True:
        above = [x._trace for x in outs if isinstance(x, Tracer) and x._trace.level > level]
        if not above:
            break
        if body is None:
            body = JaxprDebugInfo.from_tracing(debug_info, len(args), len(outs),
                                               traced_for=primitive.name)
        trace = max(above, key=lambda t: t.level)
        outs = [trace.full_raise(x) for x in outs]
        outs, post = trace.post_process_map(primitive, outs, params, debug_info=body)
        if len(post.result_paths) != len(outs):
            raise AssertionError(
                f"{type(trace).__name__}.post_process_map named {len(post.result_paths)} "
                f"of {len(outs)} outputs of a {primitive.name} body")
        body = body.replace(result_paths=post.result_paths)
        todos.append(post)
    store.store(tuple(todos))
    return outs


def _process_env_traces(fun: WrappedFun, primitive: MapPrimitive, level: int,
                        params: dict[str, Any]) -> tuple[WrappedFun, Callable[[], Any]]:
    key = tuple(sorted(params.items(), key=lambda kv: kv[0]))
    dbg = fun.debug_info
    new_fun, todos = transformation_with_aux(_env_traces, fun, primitive, level, key, dbg)
    if dbg is None:
        return new_fun, todos
    inner_paths = dbg.result_paths
    if inner_paths is None:
        # unknown names stay unknown, whatever the post-processing does
        return new_fun, todos

    def paths() -> tuple[str | None, ...]:
        # Post-processing closed-over values changes the body's outputs (a
        # JVP appends tangents, partial eval keeps the known outputs and adds
        # residuals): the names are then the ones the traces gave.
        done: tuple[MapPostProcess, ...] = todos()
        if done:
            return done[-1].result_paths
        assert inner_paths is not None
        return tuple(inner_paths()) if callable(inner_paths) else inner_paths

    return new_fun.replace_debug_info(dbg.replace(result_paths=paths)), todos


def _env_out_axes_thunk(out_axes_thunk: Callable[[], Any],
                        todos: Callable[[], Any]) -> Callable[[], Any]:
    def thunk() -> tuple[int | None, ...]:
        out_axes = tuple(out_axes_thunk())
        for post in todos():
            out_axes = tuple(post.out_axes(out_axes))
        return out_axes
    return thunk


def _const_thunk(value: Any) -> Callable[[], Any]:
    def thunk() -> Any:
        return value
    return thunk


#: ``updater(params, in_sources) -> params`` for map primitives: when a
#: transformation changes a map call's inputs, ``in_sources[i]`` is the index
#: of the original input the new input ``i`` derives from (its primal, tangent
#: or batched value), or ``None`` for a new input (hoisted constants,
#: residuals). The map layer registers one to keep per-input params such as
#: ``donated_invars`` aligned; ``in_axes``/``out_axes`` are updated by the
#: transformations themselves.
map_param_updaters: dict[Primitive, Callable[[dict[str, Any], tuple[int | None, ...]],
                                             dict[str, Any]]] = {}


def update_map_params(prim: Primitive, params: dict[str, Any],
                      in_sources: Sequence[int | None]) -> dict[str, Any]:
    updater = map_param_updaters.get(prim)
    return updater(params, tuple(in_sources)) if updater is not None else params


# --- concrete values ---------------------------------------------------------------------------
def concrete_or_error(force: Callable[[Any], Any] | None, val: Any, context: str = "") -> Any:
    """``force(val)`` for a value known at trace time; for a tracer whose value
    the transformation does not know, a ``ConcretizationTypeError`` with
    ``context`` (e.g. "The size argument of lx.numpy.zeros must be concrete.")."""
    force = force or (lambda x: x)
    if isinstance(val, Tracer):
        value = val.to_concrete_value()
        if value is None:
            raise ConcretizationTypeError(val, context)
        return force(value)
    return force(val)


def concrete_dim_or_error(val: Any, context: str = "") -> int:
    """An integer (shape entry) known at trace time, else a clear error."""
    return int(concrete_or_error(_index, val, context))


def _index(x: Any) -> int:
    return int(np.asarray(x).__index__()) if not isinstance(x, int) else x


def is_constant(x: Any) -> bool:
    """True for a value that is not traced by any transformation."""
    return not isinstance(x, Tracer)


def valid_jaxtype(x: Any) -> bool:
    try:
        get_aval(x)
    except (InvalidInputError, TypeError):
        return False
    return True


# --- evaluating jaxprs -------------------------------------------------------------------------
def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any,
               propagate_source_info: bool = True) -> list[Any]:
    """Evaluates ``jaxpr`` on ``args`` by binding each equation's primitive,
    so it runs eagerly (with whatever impl rules are registered) or under any
    active transformation. With ``propagate_source_info`` each re-bound
    equation keeps the original equation's user line and name stack."""
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} arguments, "
                        f"got {len(args)}")
    if len(consts) != len(jaxpr.constvars):
        raise TypeError(f"eval_jaxpr: the jaxpr has {len(jaxpr.constvars)} constvars, "
                        f"got {len(consts)} consts")
    env: dict[Var, Any] = {}

    def read(v: Atom) -> Any:
        if isinstance(v, Literal):
            return literal_value(v)
        return env[v]

    for v, val in zip(jaxpr.constvars, consts):
        env[v] = val
    for v, val in zip(jaxpr.invars, args):
        env[v] = val
    base_stack = _si.current_name_stack()
    saved_frame = _si._state.frame_override
    try:
        for eqn in jaxpr.eqns:
            if propagate_source_info:
                info = eqn.source_info
                if info.frame is not None:
                    _si._state.frame_override = info.frame
                if info.name_stack.stack:
                    _si._state.name_stack = _si.NameStack(base_stack.stack
                                                          + info.name_stack.stack)
            prim = eqn.primitive
            invals = [read(v) for v in eqn.invars]
            subfuns, bind_params = prim.get_bind_params(eqn.params)
            ans = prim.bind(*subfuns, *invals, **bind_params)
            _si._state.name_stack = base_stack
            if prim.multiple_results:
                for v, a in zip(eqn.outvars, ans):
                    env[v] = a
            else:
                env[eqn.outvars[0]] = ans
    finally:
        _si._state.frame_override = saved_frame
        _si._state.name_stack = base_stack
    return [read(v) for v in jaxpr.outvars]


_PYTHON_SCALARS = (bool, int, float, complex)


def literal_value(literal: Literal) -> Any:
    """The value a ``Literal`` stands for, typed as its aval says: a Python
    scalar when the aval is weakly typed and the literal holds one, else a
    0-d numpy array of the aval's dtype (so a ``float32`` literal never
    becomes a Python float or a ``float64`` array)."""
    val = literal.val
    aval = literal.aval
    t = type(val)
    if t in _PYTHON_SCALARS:
        if aval.weak_type:
            return val
    elif t is np.ndarray or not isinstance(val, np.generic):
        # a 0-d numpy array, or a registered array type (the runtime's Array)
        if getattr(val, "dtype", None) == aval.dtype:
            return val
    return np.asarray(val, dtype=aval.dtype)


def jaxpr_as_fun(closed_jaxpr: ClosedJaxpr) -> Callable[..., list[Any]]:
    """A Python function evaluating ``closed_jaxpr`` (see ``eval_jaxpr``)."""
    def fun(*args: Any) -> list[Any]:
        return eval_jaxpr(closed_jaxpr.jaxpr, closed_jaxpr.consts, *args)
    dbg = closed_jaxpr.jaxpr.debug_info
    fun.__name__ = (dbg.func_name if dbg is not None else "jaxpr_fun").replace(" ", "_")
    return fun


def tracing_debug_info_of(dbg: JaxprDebugInfo | None) -> TracingDebugInfo | None:
    """The linear-util ``TracingDebugInfo`` carrying a jaxpr's names."""
    if dbg is None:
        return None
    return TracingDebugInfo(dbg.traced_for, dbg.func_src_info, tuple(dbg.arg_names),
                            tuple(dbg.result_paths))


def wrapped_fun_of_jaxpr(closed_jaxpr: ClosedJaxpr, *, traced_for: str | None = None
                         ) -> WrappedFun:
    """A ``WrappedFun`` evaluating ``closed_jaxpr`` with its names as debug info."""
    dbg = closed_jaxpr.jaxpr.debug_info
    if dbg is not None and traced_for is not None and dbg.traced_for != traced_for:
        dbg = dbg.replace(traced_for=traced_for)
    return wrap_init(jaxpr_as_fun(closed_jaxpr), debug_info=tracing_debug_info_of(dbg))


# --- type checking jaxprs --------------------------------------------------------------------------
def check_jaxpr(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Type-checks a jaxpr: every operand is a variable or a literal; each
    variable has a ``ShapedArray`` type and is defined once before it is used;
    each equation's output avals agree with the primitive's abstract
    evaluation and its effects include those its primitive declares; literals
    match their avals (shape and dtype); a closed jaxpr has one value per
    constvar; inner jaxprs check too; the jaxpr's effects include its
    equations'; and the debug info has one name per input/output. Raises
    ``JaxprTypeError`` naming the function and the equation (with its line)."""
    if isinstance(jaxpr, ClosedJaxpr):
        if len(jaxpr.consts) != len(jaxpr.jaxpr.constvars):
            raise JaxprTypeError(f"closed jaxpr has {len(jaxpr.consts)} consts for "
                                 f"{len(jaxpr.jaxpr.constvars)} constvars")
        jaxpr = jaxpr.jaxpr
    _check_jaxpr(jaxpr, set())


def _check_jaxpr(jaxpr: Jaxpr, outer: set[Var]) -> None:
    defined: set[Var] = set()

    def where(eqn: JaxprEqn | None) -> str:
        name = jaxpr.debug_info.func_src_info if jaxpr.debug_info else None
        fun = f" in {name}" if name else ""
        if eqn is None:
            return fun
        return f"{fun}, equation `{eqn.primitive.name}` from {eqn.source_info}"

    def define(v: Var, eqn: JaxprEqn | None) -> None:
        if not isinstance(v, Var):
            raise JaxprTypeError(f"{v!r} is bound as a variable but is a "
                                 f"{type(v).__name__}{where(eqn)}")
        if not isinstance(v.aval, ShapedArray):
            raise JaxprTypeError(f"variable {v!r} has type {v.aval!r}, not a ShapedArray"
                                 f"{where(eqn)}")
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"variable {v} is defined twice{where(eqn)}")
        defined.add(v)

    def use(a: Atom, eqn: JaxprEqn | None) -> None:
        if isinstance(a, Literal):
            try:
                aval = get_aval(a.val)
            except TypeError as e:
                raise JaxprTypeError(f"literal {a!r} holds an invalid value{where(eqn)}: "
                                     f"{e}") from e
            if aval.shape != a.aval.shape:
                raise JaxprTypeError(f"literal {a} has value of shape {aval.shape}"
                                     f"{where(eqn)}")
            if aval.dtype != a.aval.dtype and not (aval.weak_type and a.aval.weak_type):
                raise JaxprTypeError(f"literal {a} has a value of dtype {aval.dtype.name}"
                                     f"{where(eqn)}")
            return
        if not isinstance(a, Var) or isinstance(a, DropVar):
            raise JaxprTypeError(f"operand {a!r} is not a variable or a literal{where(eqn)}")
        if a not in defined:
            raise JaxprTypeError(f"variable {a} is used before it is defined{where(eqn)}")

    for v in jaxpr.constvars:
        define(v, None)
    for v in jaxpr.invars:
        define(v, None)
    for eqn in jaxpr.eqns:
        for a in eqn.invars:
            use(a, eqn)
        _check_eqn_types(eqn, where(eqn))
        for sub in subjaxprs_of_params(eqn.params):
            _check_jaxpr(sub, set())
        for v in eqn.outvars:
            define(v, eqn)
    for a in jaxpr.outvars:
        use(a, None)
    dbg = jaxpr.debug_info
    if dbg is not None:
        if len(dbg.arg_names) != len(jaxpr.invars) or len(dbg.result_paths) != len(
                jaxpr.outvars):
            raise JaxprTypeError(
                f"debug info of {dbg.func_src_info} has {len(dbg.arg_names)} arg names for "
                f"{len(jaxpr.invars)} inputs and {len(dbg.result_paths)} result paths for "
                f"{len(jaxpr.outvars)} outputs")
    effects = union(eqn.effects for eqn in jaxpr.eqns)
    if not effects <= jaxpr.effects:
        raise JaxprTypeError(f"jaxpr effects {set(jaxpr.effects)} miss its equations' "
                             f"effects {set(effects - jaxpr.effects)}{where(None)}")


def _check_eqn_types(eqn: JaxprEqn, where: str) -> None:
    prim = eqn.primitive
    if prim not in abstract_eval_rules or getattr(prim, "map_primitive", False):
        return
    in_avals = [a.aval for a in eqn.invars]
    try:
        out = abstract_eval_rules[prim](*in_avals, **eqn.params)
    except Exception as e:
        raise JaxprTypeError(f"abstract evaluation failed{where}: {e}") from e
    out_avals = list(out) if prim.multiple_results else [out]
    if len(out_avals) != len(eqn.outvars):
        raise JaxprTypeError(f"{len(eqn.outvars)} outputs for {len(out_avals)} results{where}")
    for v, aval in zip(eqn.outvars, out_avals):
        if (v.aval.shape, v.aval.dtype) != (aval.shape, aval.dtype):
            raise JaxprTypeError(f"output {v} has type {v.aval.str_short()} but the "
                                 f"primitive gives {aval.str_short()}{where}")
    if prim in effect_rules and not prim.higher_order:
        declared = effect_rules[prim](**eqn.params)
        if not declared <= eqn.effects:
            raise JaxprTypeError(f"equation effects {set(eqn.effects)} miss the primitive's "
                                 f"effects {set(declared - eqn.effects)}{where}")


# --- small shared helpers ---------------------------------------------------------------------
def primal_dtype_to_tangent_dtype(dtype: Any) -> np.dtype[Any]:
    dt: np.dtype[Any] = np.dtype(dtype)
    if dtypes.is_inexact(dt) or dt == dtypes.float0:
        return dt
    return np.dtype(dtypes.float0)


def new_jaxpr_eqn(invars: list[Atom], outvars: list[Var], prim: Primitive,
                  params: dict[str, Any], effects: Effects | None = None,
                  source_info: _si.SourceInfo | None = None) -> JaxprEqn:
    """A ``JaxprEqn`` with its effects computed and the current source info."""
    if effects is None:
        effects = eqn_effects(prim, params)
    if source_info is None:
        source_info = _si.current_source_info()
    return JaxprEqn(invars, outvars, prim, params, effects, source_info)


def jaxpr_effects_of_eqns(eqns: Sequence[JaxprEqn]) -> Effects:
    return union(e.effects for e in eqns)


def closed_jaxpr_debug_info(jaxpr: ClosedJaxpr | Jaxpr) -> JaxprDebugInfo | None:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return inner.debug_info
