"""``custom_jvp`` and ``custom_vjp``: user-defined derivative rules.

Both are decorators with JAX's semantics:

- ``@custom_jvp`` + ``f.defjvp(jvp)`` (``jvp(primals, tangents) ->
  (primal_out, tangent_out)``) or ``f.defjvps(*per_argument_jvps)``;
  ``nondiff_argnums`` are passed first to the rule and get no tangents.
- ``@custom_vjp`` + ``f.defvjp(fwd, bwd)`` (``fwd(*args) -> (out, res)``,
  ``bwd(res, ct_out) -> tuple of cotangents, one per (differentiable)
  argument``, ``None`` meaning zero); ``nondiff_argnums`` are passed first to
  ``bwd`` and must not be traced values.

A call binds ``custom_jvp_call_p`` (``bind(fun, jvp, *args, symbolic_zeros)``)
or ``custom_vjp_call_p`` (``bind(fun, fwd, bwd, *args, out_trees,
symbolic_zeros)``), final-style: each trace's ``process_custom_jvp_call`` /
``process_custom_vjp_call`` decides. Evaluation runs ``fun``; JVP uses the
rules; vmap batches the function and the rules; staging (jit, make_jaxpr)
records an equation holding the primal jaxpr and lazily traced rules:

- ``custom_jvp_call[call_jaxpr, jvp_jaxpr_fun, num_consts, symbolic_zeros]``
- ``custom_vjp_call[call_jaxpr, fwd_jaxpr_thunk, num_consts, bwd, out_trees,
  symbolic_zeros]``

(JAX 0.10's params). ``call_jaxpr`` takes ``[*consts, *args]`` (values the
function closes over come first) and is named after the function's
parameters (``traced_for='custom_jvp fun'`` / ``'custom_vjp fun'``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.errors import StoreError
from lamina_linear_util.linear_util import WrappedFun, transformation_with_aux, wrap_init
from lamina_tracing_core import core, dtypes
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import (Zero, add_tangents, is_transform_node,
                                         node_tangents_flat, tangent_aval, user_tangents,
                                         zeros_like_aval)
from lamina_tracing_core.avals import ShapedArray, get_aval, is_array_like
from lamina_tracing_core.control_flow.common import eval_closed, long_type_str, typematch
from lamina_tracing_core.errors import UnexpectedTracerError
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.primitives import Primitive, abstract_eval_rules
from lamina_tracing_core.lax import convert

__all__ = [
    "CustomVJPPrimal", "SymbolicZero", "custom_jvp", "custom_jvp_call_p", "custom_vjp",
    "custom_vjp_call_p", "custom_vjp_primal_tree_values",
]

#: What a rule sees for a zero tangent/cotangent when ``symbolic_zeros=True``.
SymbolicZero = Zero


# --- primitives -----------------------------------------------------------------------
class CustomJVPCallPrimitive(Primitive):
    """``bind(fun, jvp, *args, symbolic_zeros)``: ``fun`` and ``jvp`` are flat
    ``WrappedFun``s; ``jvp(*primals, *tangents) -> [*primals_out, *tangents_out]``."""

    def __init__(self, name: str):
        super().__init__(name, multiple_results=True)
        self.higher_order = True

    def bind(self, *args: Any, **params: Any) -> Any:
        fun, jvp, *vals = args
        return core.bind_custom_jvp(self, fun, jvp, vals, symbolic_zeros=params["symbolic_zeros"])

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        call_jaxpr: ClosedJaxpr = params["call_jaxpr"]
        fun = pe.wrapped_fun_of_jaxpr(call_jaxpr)
        jvp = _lift_jvp(params["num_consts"], params["jvp_jaxpr_fun"])
        return [fun, jvp], {"symbolic_zeros": params["symbolic_zeros"]}


class CustomVJPCallPrimitive(Primitive):
    """``bind(fun, fwd, bwd, *args, out_trees, symbolic_zeros)`` (see
    ``ad.JVPTrace.process_custom_vjp_call`` for the fwd/bwd protocol)."""

    def __init__(self, name: str):
        super().__init__(name, multiple_results=True)
        self.higher_order = True

    def bind(self, *args: Any, **params: Any) -> Any:
        fun, fwd, bwd, *vals = args
        return core.bind_custom_vjp(self, fun, fwd, bwd, vals, out_trees=params["out_trees"],
                                    symbolic_zeros=params["symbolic_zeros"])

    def get_bind_params(self, params: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        call_jaxpr: ClosedJaxpr = params["call_jaxpr"]
        num_consts: int = params["num_consts"]
        fun = pe.wrapped_fun_of_jaxpr(call_jaxpr)
        fwd = _lift_fwd(num_consts, params["fwd_jaxpr_thunk"])
        bwd = _bwd_with_consts(params["bwd"], num_consts)
        return [fun, fwd, bwd], {"out_trees": params["out_trees"],
                                 "symbolic_zeros": params["symbolic_zeros"]}


custom_jvp_call_p = CustomJVPCallPrimitive("custom_jvp_call")
custom_vjp_call_p = CustomVJPCallPrimitive("custom_vjp_call")


def _call_abstract_eval(*avals: ShapedArray, call_jaxpr: ClosedJaxpr, **_: Any
                        ) -> list[ShapedArray]:
    return list(call_jaxpr.out_avals)


abstract_eval_rules[custom_jvp_call_p] = _call_abstract_eval
abstract_eval_rules[custom_vjp_call_p] = _call_abstract_eval


class CustomVJPException(Exception):
    """Differentiation of a ``custom_vjp`` function with respect to a value it
    closes over (its rule cannot give that cotangent)."""

    def __init__(self) -> None:
        super().__init__(
            "Detected differentiation of a custom_vjp function with respect to a closed-over "
            "value. That isn't supported because the custom VJP rule only specifies how to "
            "differentiate the custom_vjp function with respect to explicit input "
            "parameters. Pass the value as an explicit argument instead (or use "
            "closure_convert).")


# --- staging (jit, make_jaxpr) --------------------------------------------------------------
class _EagerRuleTracing(threading.local):
    def __init__(self) -> None:
        self.active = False


_eager = _EagerRuleTracing()


class _RuleThunk:
    """A custom rule traced to a closed jaxpr on demand, once per pattern of
    (non)zero tangents, and cached.

    ``prefill(main)`` traces the pattern differentiation uses when the rule
    takes no symbolic zeros *while the call is being staged*, in a frame of
    the staging trace: the rule may carry the wrappers of transformations
    that are only alive now (``vmap`` of a custom function inside a batched
    ``scan`` body). Rules that fail to trace, or that close over values of
    the trace being built, are left to be traced lazily, when (and if) a
    derivative is taken, as in JAX; the rules a rule calls are always lazy
    (a ``defjvps`` rule calls its own function)."""

    rule: WrappedFun

    def __init__(self, in_avals: Sequence[ShapedArray]):
        self.in_avals = list(in_avals)
        self._cache: dict[tuple[bool, ...], Any] = {}

    def _trace(self, key: tuple[bool, ...], main: Any) -> Any:
        raise NotImplementedError

    def _lookup(self, key: tuple[bool, ...]) -> Any:
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._trace(key, None)
        return hit

    def prefill(self, main: Any, key: tuple[bool, ...]) -> None:
        if _eager.active or key in self._cache:
            return
        _eager.active = True
        try:
            result = self._trace(key, main)
        except Exception:  # the rule's own errors surface when it is needed
            return
        finally:
            _eager.active = False
        closed = result[0] if isinstance(result, tuple) else result
        if not any(isinstance(c, core.Tracer) for c in closed.consts):
            self._cache[key] = result


def _trace_rule(fun: Callable[..., list[Any]], in_avals: Sequence[ShapedArray],
                main: Any) -> ClosedJaxpr:
    if main is None:
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrap_init(fun), list(in_avals))
    else:
        jaxpr, _, consts = pe.trace_to_subjaxpr_dynamic(wrap_init(fun), main, list(in_avals))
    return ClosedJaxpr(jaxpr, consts)


class _JVPJaxprThunk(_RuleThunk):
    """``thunk(*in_zeros) -> (jvp_jaxpr, out_zeros)``: the custom JVP rule traced
    to ``[*primals, *nonzero_tangents] -> [*primals_out, *nonzero_tangents_out]``."""

    def __init__(self, jvp: WrappedFun, in_avals: Sequence[ShapedArray]):
        super().__init__(in_avals)
        self.rule = jvp

    def __repr__(self) -> str:
        return f"jvp_of({self.rule.__name__})"

    def __call__(self, *in_zeros: bool) -> tuple[ClosedJaxpr, list[bool]]:
        result: tuple[ClosedJaxpr, list[bool]] = self._lookup(tuple(bool(z) for z in in_zeros))
        return result

    def _trace(self, key: tuple[bool, ...], main: Any) -> tuple[ClosedJaxpr, list[bool]]:
        tangent_avals = [tangent_aval(a) for a in self.in_avals]
        nz_avals = [a for a, z in zip(tangent_avals, key) if not z]
        n = len(self.in_avals)
        cell: list[list[bool]] = []

        def traced(*args: Any) -> list[Any]:
            primals, nz = args[:n], iter(args[n:])
            tangents = [Zero(a) if z else next(nz) for a, z in zip(tangent_avals, key)]
            outs = list(self.rule.call_wrapped(*primals, *tangents))
            m = len(outs) // 2
            cell.append([type(t) is Zero for t in outs[m:]])
            return outs[:m] + [t for t in outs[m:] if type(t) is not Zero]

        closed = _trace_rule(traced, [*self.in_avals, *nz_avals], main)
        return closed, cell[0]


def _lift_jvp(num_consts: int, thunk: _JVPJaxprThunk) -> WrappedFun:
    """The staged JVP rule as the ``jvp`` WrappedFun of a rebound call (the
    consts' tangents are dropped: a custom rule does not see closed-over values)."""
    def jvp(*xs: Any) -> list[Any]:
        n = len(xs) // 2
        primals, tangents = xs[num_consts:n], xs[n + num_consts:]
        jaxpr, out_zeros = thunk(*[type(t) is Zero for t in tangents])
        nz = [t for t in tangents if type(t) is not Zero]
        outs = eval_closed(jaxpr, *primals, *nz)
        primals_out, nz_out = outs[:len(out_zeros)], iter(outs[len(out_zeros):])
        tangents_out = [Zero(tangent_aval(get_aval(p))) if z else next(nz_out)
                        for p, z in zip(primals_out, out_zeros)]
        return list(primals_out) + tangents_out
    return wrap_init(jvp, debug_info=thunk.rule.debug_info)


def _stage_custom_jvp(trace: pe.DynamicJaxprTrace, fun: WrappedFun, jvp: WrappedFun,
                      tracers: list[Any], *, symbolic_zeros: bool) -> list[Any]:
    in_avals = [t.aval for t in tracers]
    # A new frame of the staging trace itself: `fun` may carry the wrappers of
    # transformations above it (vmap of a custom_jvp function under jit).
    jaxpr, out_avals, consts = pe.trace_to_subjaxpr_dynamic(fun, trace.main, in_avals)
    call_jaxpr = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
    core.maybe_validate(call_jaxpr)
    thunk = _JVPJaxprThunk(jvp, in_avals)
    if not symbolic_zeros:  # differentiation then always passes every tangent
        thunk.prefill(trace.main, (False,) * len(in_avals))
    params = dict(call_jaxpr=call_jaxpr, jvp_jaxpr_fun=thunk, num_consts=len(consts),
                  symbolic_zeros=symbolic_zeros)
    const_tracers = [trace.full_raise(c) for c in consts]
    return trace.emit_eqn([*const_tracers, *tracers], out_avals, custom_jvp_call_p, params)


pe.custom_jvp_staging_rules[custom_jvp_call_p] = _stage_custom_jvp


class _FwdJaxprThunk(_RuleThunk):
    """``thunk(*in_nonzeros) -> fwd_jaxpr``: the custom VJP's forward rule traced
    to ``[*primals] -> [*res, *outs]``."""

    def __init__(self, fwd: WrappedFun, in_avals: Sequence[ShapedArray], symbolic_zeros: bool):
        super().__init__(in_avals)
        self.rule = fwd
        self.symbolic_zeros = symbolic_zeros

    def __repr__(self) -> str:
        return f"fwd_of({self.rule.__name__})"

    def __call__(self, *in_nonzeros: bool) -> ClosedJaxpr:
        # Without symbolic zeros the rule does not see which inputs are perturbed.
        key = (tuple(bool(nz) for nz in in_nonzeros) if self.symbolic_zeros
               else (True,) * len(in_nonzeros))
        result: ClosedJaxpr = self._lookup(key)
        return result

    def _trace(self, key: tuple[bool, ...], main: Any) -> ClosedJaxpr:
        def traced(*primals: Any) -> list[Any]:
            args: list[Any] = []
            for p, nz in zip(primals, key):
                args += [p, nz]
            return list(self.rule.call_wrapped(*args))

        return _trace_rule(traced, self.in_avals, main)


def _lift_fwd(num_consts: int, thunk: _FwdJaxprThunk) -> WrappedFun:
    def fwd(*args: Any) -> list[Any]:
        vals, nonzeros = args[::2], args[1::2]
        if any(nonzeros[:num_consts]):
            raise CustomVJPException()
        return eval_closed(thunk(*nonzeros[num_consts:]), *vals[num_consts:])
    return wrap_init(fwd, debug_info=thunk.rule.debug_info)


def _bwd_with_consts(bwd: WrappedFun, num_consts: int) -> WrappedFun:
    """``bwd`` answering also for the consts of a rebound call (never
    differentiated: ``fwd`` refuses that)."""
    if not num_consts:
        return bwd

    def new_bwd(*args: Any) -> list[Any]:
        return [None] * num_consts + list(bwd.call_wrapped(*args))
    return wrap_init(new_bwd, debug_info=bwd.debug_info)


def _stage_custom_vjp(trace: pe.DynamicJaxprTrace, fun: WrappedFun, fwd: WrappedFun, bwd: Any,
                      tracers: list[Any], *, out_trees: Callable[[], Any],
                      symbolic_zeros: bool) -> list[Any]:
    in_avals = [t.aval for t in tracers]
    # A new frame of the staging trace itself: `fun` may carry the wrappers of
    # transformations above it (vmap of a custom_jvp function under jit).
    jaxpr, out_avals, consts = pe.trace_to_subjaxpr_dynamic(fun, trace.main, in_avals)
    call_jaxpr = ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr), ())
    core.maybe_validate(call_jaxpr)
    thunk = _FwdJaxprThunk(fwd, in_avals, symbolic_zeros)
    if not symbolic_zeros:
        thunk.prefill(trace.main, (True,) * len(in_avals))
    params = dict(call_jaxpr=call_jaxpr, fwd_jaxpr_thunk=thunk, num_consts=len(consts),
                  bwd=bwd, out_trees=out_trees, symbolic_zeros=symbolic_zeros)
    const_tracers = [trace.full_raise(c) for c in consts]
    return trace.emit_eqn([*const_tracers, *tracers], out_avals, custom_vjp_call_p, params)


pe.custom_vjp_staging_rules[custom_vjp_call_p] = _stage_custom_vjp


# --- shared helpers -----------------------------------------------------------------------------
def _resolve_kwargs(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                    kind: str, name: str) -> tuple[Any, ...]:
    """The call's arguments as positional ones (defaults applied)."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
        bound.apply_defaults()
    except (TypeError, ValueError) as e:
        raise TypeError(f"The input arguments to the {kind}-decorated function {name} could "
                        f"not be resolved to positional-only arguments. Binding failed with the "
                        f"error:\n{e}") from e
    if bound.kwargs:
        raise TypeError(f"The input arguments to the {kind}-decorated function {name} could "
                        f"not be resolved to positional-only arguments: keyword arguments "
                        f"{sorted(bound.kwargs)} remain")
    return tuple(bound.args)


def _stop_gradient_tracers(x: Any) -> Any:
    """Cuts the gradient through the tracers in a ``nondiff_argnums`` argument;
    every other leaf (a Python bool or int, a NumPy array) stays the very
    object the caller gave, so the rules can branch on it even under ``jit``."""

    def leaf(v: Any) -> Any:
        return convert.stop_gradient(v) if isinstance(v, core.Tracer) else v
    return tu.tree_map(leaf, x)


def _flat_fun(fun: Callable[..., Any], dbg: TracingDebugInfo, in_tree: Any
              ) -> tuple[WrappedFun, Callable[[], Any]]:
    wrapped, _ = api_util.result_paths(wrap_init(fun, debug_info=dbg))
    return api_util.flatten_fun_nokwargs(wrapped, in_tree)


def _first_filled(*thunks: Callable[[], Any]) -> Any:
    for thunk in thunks:
        try:
            return thunk()
        except StoreError:
            continue
    raise StoreError("neither the custom function nor its rule ran")


def _type_tree(tree: Any, avals: Sequence[ShapedArray]) -> str:
    return str(tu.tree_unflatten(tree, [long_type_str(a) for a in avals])).replace("'", "")


# --- custom_jvp ----------------------------------------------------------------------------------
def _flatten_jvp(inner: Callable[..., Any], store: Any, primal_name: str, jvp_name: str,
                 in_tree: Any, primal_out: Callable[[], Any], *args: Any) -> list[Any]:
    """The user's ``jvp(primals, tangents) -> (primals_out, tangents_out)`` as
    ``(*primals, *tangents) -> [*primals_out, *tangents_out]``, checking what it
    returns against the primal function's output."""
    n = len(args) // 2
    py_primals = tu.tree_unflatten(in_tree, args[:n])
    # A key array's tangent is one float0 array of its shape, as JAX gives it.
    py_tangents = user_tangents(tu.tree_unflatten(in_tree, args[n:]))
    pair = inner(py_primals, py_tangents)
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise TypeError(f"Custom JVP rule {jvp_name} for function {primal_name} must produce a "
                        f"pair (list or tuple of length two) representing primal and tangent "
                        f"outputs, but got {pair}.")
    primals_out, out_tree = tu.tree_flatten(pair[0])
    tangents_out, out_tree2 = tu.tree_flatten(pair[1])
    if out_tree != out_tree2 and (expanded := node_tangents_flat(pair[0], pair[1])) is not None:
        tangents_out, out_tree2 = expanded, out_tree
    if out_tree != out_tree2:
        raise TypeError(f"Custom JVP rule {jvp_name} for function {primal_name} must produce "
                        f"primal and tangent outputs with equal container (pytree) structures, "
                        f"but got {out_tree} and {out_tree2} respectively.")
    primal_avals = [get_aval(x) for x in primals_out]
    try:
        expected_tree, expected_avals = primal_out()
    except StoreError:
        expected_tree = None
    if expected_tree is not None:
        _check_rule_primal_out("JVP", "jvp", jvp_name, primal_name, out_tree, primal_avals,
                               expected_tree, expected_avals)
    expected = [tangent_aval(a) for a in primal_avals]
    got = [t.aval.strip_weak_type() if type(t) is Zero else get_aval(t).strip_weak_type()
           for t in tangents_out]
    if not all(map(typematch, expected, got)):
        if len(expected) == 1:
            raise TypeError(
                "Custom JVP rule must produce primal and tangent outputs with corresponding "
                f"shapes and dtypes. Expected {long_type_str(expected[0])} (tangent type of "
                f"{long_type_str(primal_avals[0])}) but got {long_type_str(got[0])}.")
        lines = "\n".join(
            f"  primal {long_type_str(p)} with tangent {long_type_str(g)}, expecting tangent "
            f"{long_type_str(e)}" for p, e, g in zip(primal_avals, expected, got)
            if not typematch(e, g))
        raise TypeError("Custom JVP rule must produce primal and tangent outputs with "
                        f"corresponding shapes and dtypes, but got:\n{lines}")
    store.store((out_tree, tuple(primal_avals)))
    return list(primals_out) + list(tangents_out)


def _check_rule_primal_out(rule: str, kind: str, rule_name: str, primal_name: str,
                           out_tree: Any, avals: Sequence[ShapedArray], expected_tree: Any,
                           expected_avals: Sequence[ShapedArray]) -> None:
    what = ("custom_jvp" if rule == "JVP" else "custom_vjp")
    intro = (f"Custom {rule} {kind} rule {rule_name} for function {primal_name} must produce "
             f"a pair (list or tuple of length two) where the first element represents the "
             f"primal output (equal in value to the output of the {what}-decorated function "
             f"{primal_name}, ")
    if out_tree != expected_tree:
        raise TypeError(
            intro + "and in particular of the same container/pytree structure), but instead "
            f"the {rule} rule output's first element had container/pytree structure:\n"
            f"    {_type_tree(out_tree, avals)}\nwhile the {what}-decorated function "
            f"{primal_name} had output container/pytree structure:\n"
            f"    {_type_tree(expected_tree, expected_avals)}.")
    if not all(map(typematch, avals, expected_avals)):
        raise TypeError(
            intro + "and in particular with leaves of the same shape/dtype), but instead the "
            f"{rule} rule output's first element had shapes/dtypes of:\n"
            f"    {_type_tree(out_tree, avals)}\nwhile the {what}-decorated function "
            f"{primal_name} had output shapes/dtypes of:\n"
            f"    {_type_tree(expected_tree, expected_avals)}")


class custom_jvp:
    """A function with a custom JVP rule (see the module docstring).

    ``f = custom_jvp(fun, nondiff_argnums=())``; ``f.defjvp(jvp,
    symbolic_zeros=False)`` or ``f.defjvps(*jvps)``; ``f(*args)``.
    """

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        """Sets the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out,
        tangent_out)``; returns it (usable as a decorator)."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """One rule per positional argument: ``jvp_i(tangent_i, primal_out,
        *primals) -> tangent contribution`` (``None``: no dependence)."""
        if self.nondiff_argnums:
            raise TypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
            primal_out = self(*primals)
            zeros = tu.tree_map(Zero.from_primal_value, primal_out)
            contributions = [rule(t, primal_out, *primals) if rule is not None else zeros
                             for t, rule in zip(tangents, jvps)]
            tangent_out = tu.tree_map(_sum_tangents, primal_out, *contributions)
            return primal_out, tangent_out

        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        dbg = api_util.debug_info("custom_jvp fun", self.fun, args, kwargs,
                                  static_argnums=self.nondiff_argnums)
        primal_name = dbg.func_name
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {primal_name} using "
                                 "defjvp.")
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_jvp", primal_name)
        jvp_rule = self.jvp
        nondiff = {i % len(args) for i in self.nondiff_argnums} if args else set()
        if nondiff:
            args = tuple(_stop_gradient_tracers(x) if i in nondiff else x
                         for i, x in enumerate(args))
            static_args = [args[i] for i in sorted(nondiff)]
            dyn_args = tuple(x for i, x in enumerate(args) if i not in nondiff)
            fun = _with_static_args(self.fun, args, nondiff)

            def jvp_(primals: Any, tangents: Any) -> Any:
                return jvp_rule(*static_args, primals, tangents)
        else:
            dyn_args, fun, jvp_ = args, self.fun, jvp_rule
        jvp_dbg = api_util.debug_info("custom_jvp jvp", jvp_rule, (dyn_args, dyn_args), {})
        args_flat, in_tree = tu.tree_flatten(dyn_args)
        flat_fun, fun_out_tree = _flat_fun(fun, dbg, in_tree)
        flat_fun, fun_out_type = transformation_with_aux(_out_type, flat_fun, fun_out_tree,
                                                         use_eq_store=True)
        flat_jvp, jvp_out_type = transformation_with_aux(
            _flatten_jvp, wrap_init(jvp_, debug_info=jvp_dbg), primal_name,
            jvp_dbg.func_name, in_tree, fun_out_type, use_eq_store=True)
        out_flat = custom_jvp_call_p.bind(flat_fun, flat_jvp, *args_flat,
                                          symbolic_zeros=self.symbolic_zeros)
        out_tree, _ = _first_filled(fun_out_type, jvp_out_type)
        return tu.tree_unflatten(out_tree, out_flat)


def _out_type(inner: Callable[..., Any], store: Any, out_tree: Callable[[], Any],
              *args: Any) -> list[Any]:
    outs = list(inner(*args))
    store.store((out_tree(), tuple(get_aval(o) for o in outs)))
    return outs


def _sum_tangents(_: Any, x: Any, *xs: Any) -> Any:
    return functools.reduce(add_tangents, xs, x)


def _with_static_args(fun: Callable[..., Any], args: Sequence[Any], static: set[int]
                      ) -> Callable[..., Any]:
    n = len(args)

    def call(*dyn: Any) -> Any:
        it = iter(dyn)
        return fun(*[args[i] if i in static else next(it) for i in range(n)])
    return call


# --- custom_vjp ----------------------------------------------------------------------------------
@dataclasses.dataclass
class CustomVJPPrimal:
    """An argument of a ``custom_vjp`` forward rule when ``symbolic_zeros``:
    its value and whether it is perturbed (has a nonzero tangent)."""

    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """The values of a tree of ``CustomVJPPrimal``s."""
    def value(leaf: Any) -> Any:
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value
    return tu.tree_map(value, tree, is_leaf=lambda x: type(x) is CustomVJPPrimal)


def _flatten_fwd(inner: Callable[..., Any], store: Any, symbolic_zeros: bool, primal_name: str,
                 fwd_name: str, in_tree: Any, primal_out: Callable[[], Any], *args: Any
                 ) -> list[Any]:
    """The user's ``fwd(*args) -> (out, res)`` as ``(x0, nz0, x1, nz1, ...) ->
    [*res, *outs]``; stores ``(out_tree, res_tree, input_fwds)``."""
    vals, nonzeros = args[::2], args[1::2]
    flat = ([CustomVJPPrimal(v, bool(nz)) for v, nz in zip(vals, nonzeros)] if symbolic_zeros
            else list(vals))
    py_args = tu.tree_unflatten(in_tree, flat)
    pair = inner(*py_args)
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise TypeError(
            f"Custom VJP fwd rule {fwd_name} for function {primal_name} must produce a pair "
            f"(list or tuple of length two) where the first element represents the primal "
            f"output (equal to those of the custom_vjp-decorated function {primal_name}) and "
            f"the second element represents residuals (i.e. values stored from the forward "
            f"pass for use on the backward pass), but instead of a pair the fwd rule "
            f"{fwd_name} produced {pair}.")
    outs, out_tree = tu.tree_flatten(pair[0])
    res, res_tree = tu.tree_flatten(pair[1])
    for r in res:
        if not is_array_like(r):
            raise TypeError(f"Custom VJP fwd rule {fwd_name} for function {primal_name} "
                            f"returned a residual of type {type(r).__name__}; residuals must "
                            f"be arrays (pytrees of arrays)")
    avals = [get_aval(o) for o in outs]
    try:
        expected_tree, expected_avals = primal_out()
    except StoreError:
        expected_tree = None
    if expected_tree is not None:
        _check_rule_primal_out("VJP", "fwd", fwd_name, primal_name, out_tree, avals,
                               expected_tree, expected_avals)
    store.store((out_tree, res_tree, (None,) * len(res)))
    return list(res) + list(outs)


def _node_cotangents(ct: Any, tree: Any, avals: Sequence[ShapedArray]) -> list[Any] | None:
    """``ct`` flattened as the argument of structure ``tree`` and flat types
    ``avals``, when it has the argument's structure as users see it (a key
    array, a transformation-only node, one leaf): whatever it gives a key
    array stands for no cotangent (``None`` for each of the key's data), as
    JAX drops the cotangent of an input whose cotangent type is float0
    without looking at it; else None."""
    # stand-ins of the argument's shapes: broadcast views, no memory
    like = tree.unflatten([np.broadcast_to(np.zeros((), a.dtype), a.shape) for a in avals])
    primal_leaves, user_tree = tu.user_trees.tree_flatten(like)
    try:
        ct_leaves = user_tree.flatten_up_to(ct)
    except (ValueError, TypeError):
        return None
    flat: list[Any] = []
    for p, c in zip(primal_leaves, ct_leaves):
        if is_transform_node(p):
            if not tu.treedef_is_leaf(tu.user_trees.tree_structure(c)):
                return None  # a container for a key: the structure error
            flat += [None] * len(tu.tree_leaves(p))
        else:
            flat += tu.tree_leaves(c)
    return flat if len(flat) == len(avals) else None


def _flatten_bwd(bwd: Callable[..., Any], in_tree: Any, in_avals: Sequence[ShapedArray],
                 out_trees: Callable[[], Any], bwd_name: str) -> WrappedFun:
    """The user's ``bwd(res, ct_out) -> cts`` as ``(*res, *cts_out) -> [*cts_in]``
    (one per flat primal input; zeros where the rule returns ``None``)."""
    def flat_bwd(*args: Any) -> list[Any]:
        out_tree, res_tree, _ = out_trees()
        res, cts_out = args[:res_tree.num_leaves], args[res_tree.num_leaves:]
        py_res = tu.tree_unflatten(res_tree, res)
        py_cts = tu.tree_unflatten(out_tree, cts_out)
        py_cts_in = bwd(py_res, py_cts)
        num_args = len(tu.treedef_children(in_tree))
        if isinstance(py_cts_in, list) and len(py_cts_in) == num_args:
            py_cts_in = tuple(py_cts_in)
        if not isinstance(py_cts_in, tuple) or len(py_cts_in) != num_args:
            got_tree = tu.tree_structure(py_cts_in)
            raise TypeError(
                "Custom VJP bwd rule must produce an output with the same container "
                "(pytree) structure as the args tuple of the primal function, and in "
                "particular must produce a tuple of length equal to the number of arguments "
                f"to the primal function, but got bwd output structure {got_tree} for primal "
                f"input structure {in_tree}.")
        flat: list[Any] = []
        for i, (ct, sub) in enumerate(zip(py_cts_in, tu.treedef_children(in_tree))):
            if ct is None:
                flat += [None] * sub.num_leaves
                continue
            leaves, ct_tree = tu.tree_flatten(ct)
            if ct_tree != sub and (expanded := _node_cotangents(
                    ct, sub, in_avals[len(flat):len(flat) + sub.num_leaves])) is not None:
                leaves, ct_tree = expanded, sub
            if ct_tree != sub:
                raise TypeError(
                    f"Custom VJP bwd rule {bwd_name} must produce an output with the same "
                    f"container (pytree) structure as the args tuple of the primal function, "
                    f"but at output[{i}] it produced {tu.user_trees.tree_structure(ct)} for an "
                    f"argument of structure {tu.user_treedef(sub)}.")
            flat += leaves
        paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(
            tu.tree_unflatten(in_tree, list(range(len(in_avals)))))[0]]
        results = []
        for path, a, ct in zip(paths, in_avals, flat):
            want = tangent_aval(a)
            if ct is None or type(ct) is Zero or want.dtype == dtypes.float0:
                # JAX ignores what a rule gives an input whose cotangent type is float0
                results.append(ct if type(ct) is Zero else zeros_like_aval(want))
                continue
            got = get_aval(ct)
            if not typematch(want, got):
                raise ValueError(
                    "Custom VJP bwd rule must produce an output with the same type as the args "
                    f"tuple of the primal function, but at output{path} the bwd rule produced "
                    f"an output of type {long_type_str(got)} corresponding to an input of type "
                    f"{long_type_str(a)}")
            results.append(ct)
        return results

    return wrap_init(flat_bwd, debug_info=TracingDebugInfo(
        "custom_vjp bwd", api_util.fun_sourceinfo(bwd), (), None))


def _check_no_tracers(x: Any) -> None:
    for leaf in tu.tree_leaves(x):
        if isinstance(leaf, core.Tracer):
            raise UnexpectedTracerError(
                "Found a lamina Tracer object passed as an argument to a custom_vjp function "
                "in a position indicated by nondiff_argnums as non-differentiable. Tracers "
                "cannot be passed as non-differentiable arguments to custom_vjp functions; "
                "instead, nondiff_argnums should only be used for arguments that can't be or "
                "contain lamina tracers, e.g. function-valued arguments. In particular, "
                "array-valued arguments should typically not be indicated as "
                "nondiff_argnums.")


class custom_vjp:
    """A function with a custom VJP rule (see the module docstring).

    ``f = custom_vjp(fun, nondiff_argnums=())``; ``f.defvjp(fwd, bwd,
    symbolic_zeros=False)``; ``f(*args)``.
    """

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any],
               symbolic_zeros: bool = False, optimize_remat: bool = False) -> None:
        """Sets ``fwd(*args) -> (out, res)`` and ``bwd(*nondiff_args, res,
        ct_out) -> cts``."""
        del optimize_remat
        self.fwd = fwd
        self.bwd = bwd
        self.symbolic_zeros = symbolic_zeros

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        dbg = api_util.debug_info("custom_vjp fun", self.fun, args, kwargs,
                                  static_argnums=self.nondiff_argnums)
        name = dbg.func_name
        if self.fwd is None or self.bwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using "
                                 "defvjp.")
        fwd_dbg = api_util.debug_info("custom_vjp fwd", self.fwd, args, kwargs,
                                      static_argnums=self.nondiff_argnums)
        args = _resolve_kwargs(self.fun, args, kwargs, "custom_vjp", name)
        user_fwd, user_bwd = self.fwd, self.bwd
        nondiff = {i % len(args) for i in self.nondiff_argnums} if args else set()
        if nondiff:
            for i in nondiff:
                _check_no_tracers(args[i])
            static_args = [args[i] for i in sorted(nondiff)]
            dyn_args = tuple(x for i, x in enumerate(args) if i not in nondiff)
            fun = _with_static_args(self.fun, args, nondiff)
            fwd = _with_static_args(user_fwd, args, nondiff)

            def bwd(res: Any, cts: Any) -> Any:
                return user_bwd(*static_args, res, cts)
        else:
            dyn_args, fun, fwd, bwd = args, self.fun, user_fwd, user_bwd
        args_flat, in_tree = tu.tree_flatten(dyn_args)
        in_avals = [get_aval(x) for x in args_flat]
        flat_fun, fun_out_tree = _flat_fun(fun, dbg, in_tree)
        flat_fun, fun_out_type = transformation_with_aux(_out_type, flat_fun, fun_out_tree,
                                                         use_eq_store=True)
        flat_fwd, out_trees = transformation_with_aux(
            _flatten_fwd, wrap_init(fwd, debug_info=fwd_dbg), self.symbolic_zeros, name,
            fwd_dbg.func_name, in_tree, fun_out_type, use_eq_store=True)
        flat_bwd = _flatten_bwd(bwd, in_tree, in_avals, out_trees,
                                api_util.fun_name(user_bwd))
        out_flat = custom_vjp_call_p.bind(flat_fun, flat_fwd, flat_bwd, *args_flat,
                                          out_trees=out_trees,
                                          symbolic_zeros=self.symbolic_zeros)
        try:
            out_tree, _ = fun_out_type()
        except StoreError:
            out_tree = out_trees()[0]
        return tu.tree_unflatten(out_tree, out_flat)

