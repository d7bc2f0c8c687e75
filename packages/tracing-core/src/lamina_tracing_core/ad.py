"""Automatic differentiation: JVP, linearize, VJP and transposition.

Forward mode is a trace: a ``JVPTracer`` carries a primal and a tangent, and
``JVPTrace.process_primitive`` calls ``primitives.jvp_rules[prim](primals,
tangents, **params) -> (primal_out, tangent_out)``. A tangent that is known to
be zero is the symbolic ``ad_util.Zero(aval)``: rules skip it, and a tracer
whose tangent is zero lowers to its primal, so untouched values cost nothing.
Tangents of integer/boolean values are ``float0`` zeros.

Reverse mode is linearize + transpose: ``linearize`` runs the JVP under
partial evaluation (primals known, tangents unknown), which splits the
program into the primal computation (run now) and a *linear* jaxpr from input
tangents to output tangents. ``backward_pass`` transposes that jaxpr: it walks
the linear equations backwards calling ``primitives.transpose_rules[prim](
cotangent_out, *invals, **params) -> list`` where each linear input is an
``UndefinedPrimal(aval)`` and the rule returns one cotangent per input
(``None`` or ``Zero`` where there is none). ``cotangent_out`` is a list for
primitives with multiple results (entries may be ``Zero``); rules are not
called when every output cotangent is zero.

Names follow the algebra of :mod:`lamina_tracing_core.names` (see also
docs/INTERNALS.md): the tangent of ``x`` is ``tangent(x)``, the cotangent
input for result ``r`` is ``cotangent(r)``, a gradient is named
``cotangent(x)`` after its primal input (``cotangent(tangent(x))`` is
``cotangent(x)``), and ``func_src_info`` records the transformation
(``jvp(f)``, ``transpose(jvp(f))``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core import core, dtypes
from lamina_tracing_core import names as _names
from lamina_tracing_core import source_info as _si
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import (
    Zero,
    add_tangents,
    instantiate_zeros,
    tangent_aval,
)
from lamina_tracing_core.base_primitives import reduce_sum
from lamina_tracing_core.symbolic import UndefinedPrimal, is_undefined_primal
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, get_aval
from lamina_tracing_core.core import MainTrace, Trace, Tracer
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprDebugInfo, Literal, Var
from lamina_tracing_core.primitives import (
    MissingRuleError,
    Primitive,
    jvp_rules,
    transpose_rules,
)
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.linear_util import WrappedFun, transformation_with_aux, transformation, wrap_init

__all__ = [
    "JVPTrace", "JVPTracer", "UndefinedPrimal", "Zero", "backward_pass", "custom_lin_p",
    "instantiate_zeros", "is_undefined_primal", "jvp", "jvp_jaxpr", "jvp_subtrace",
    "linearize", "map_transpose", "primitive_jvps", "primitive_transposes",
    "transpose_jaxpr", "vjp",
]

#: The rule tables, under JAX's names.
primitive_jvps = jvp_rules
primitive_transposes = transpose_rules


# --- names (the algebra lives in `names`) --------------------------------------------------
tangent_name = _names.tangent
cotangent_name = _names.cotangent


# --- the JVP trace -------------------------------------------------------------------------
class JVPTracer(Tracer):
    """A primal value with its tangent (possibly a symbolic ``Zero``).

    For error messages it also carries ``deps``, a bit mask over the flat
    arguments of the differentiated function (bit ``i``: the value depends
    on argument ``i``; kept only where the JVP trace was started for that
    function, see :func:`_argument_deps`)."""

    __slots__ = ("primal", "tangent", "deps")

    def __init__(self, trace: Trace, primal: Any, tangent: Any, deps: int = 0):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent
        self.deps = deps

    @property
    def aval(self) -> ShapedArray:
        return get_aval(self.primal)

    def full_lower(self) -> Any:
        if type(self.tangent) is Zero:
            return core.full_lower(self.primal)
        return self

    def to_concrete_value(self) -> Any:
        primal = self.primal
        if isinstance(primal, Tracer):
            return primal.to_concrete_value()
        return primal

    def _origin_message(self) -> str:
        primal = self.primal
        if isinstance(primal, Tracer):
            return primal._origin_message()
        return core.trace_origin_message(self)

    def _origin_source_info(self) -> _si.SourceInfo | None:
        for part in (self.tangent, self.primal):
            if isinstance(part, Tracer):
                info = part._origin_source_info()
                if info is not None:
                    return info
        return None

    def _operand_origin(self) -> tuple[list[str], Any] | None:
        primal = self.primal
        if isinstance(primal, Tracer):  # a staging or batching trace below knows more
            origin = primal._operand_origin()
            if origin is not None:
                return origin
        if not self.deps:
            return None
        dbg = self._trace.main.debug_info
        names = [n for i, n in enumerate(dbg.arg_names) if self.deps >> i & 1 and n is not None]
        return names, dbg


def _argument_deps(main: MainTrace, n_primals: int) -> list[int]:
    """The ``deps`` of the input tracers of a JVP trace started for a function
    (its debug info names exactly its ``n_primals`` flat arguments): argument
    ``i`` depends on itself. All zero when the names do not fit."""
    dbg = main.debug_info
    names = getattr(dbg, "arg_names", None)
    if names is None or len(names) != n_primals:
        return [0] * n_primals
    return [1 << i for i in range(n_primals)]


def _to_primal_tangent(trace: JVPTrace, x: Any) -> tuple[Any, Any]:
    if isinstance(x, JVPTracer) and x._trace is trace:
        return x.primal, x.tangent
    return x, Zero(tangent_aval(get_aval(x)))


def maybe_jvp_tracer(trace: JVPTrace, primal: Any, tangent: Any, deps: int = 0) -> Any:
    if tangent is None or type(tangent) is Zero:
        return primal
    return JVPTracer(trace, primal, tangent, deps)


class JVPTrace(Trace):
    """Forward-mode differentiation of every primitive applied to its tracers."""

    __slots__ = ()

    def pure(self, val: Any) -> JVPTracer:
        return JVPTracer(self, val, Zero(tangent_aval(get_aval(val))))

    def lift(self, tracer: Tracer) -> JVPTracer:
        return self.pure(tracer)

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        # tuples, as JAX hands them to rules (rules written for JAX may use them
        # as vmap axis specifications, where a list is another tree)
        primals = tuple(t.primal for t in tracers)
        tangents = tuple(t.tangent for t in tracers)
        rule = jvp_rules.get(primitive)
        if rule is None:
            raise MissingRuleError(
                f"Differentiation rule for '{primitive.name}' not implemented")
        primal_out, tangent_out = rule(primals, tangents, **params)
        deps = 0
        for t in tracers:
            deps |= t.deps
        if primitive.multiple_results:
            return [maybe_jvp_tracer(self, p, t, deps) for p, t in zip(primal_out, tangent_out)]
        return maybe_jvp_tracer(self, primal_out, tangent_out, deps)

    def process_map(self, primitive: core.MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        nonzeros = tuple(type(t) is not Zero for t in tangents)
        nz_tangents = [t for t in tangents if type(t) is not Zero]
        fun_jvp, out_nonzeros = jvp_subtrace_flat(fun, self.main, nonzeros)
        in_axes = tuple(params["in_axes"])
        out_axes_thunk = params["out_axes_thunk"]

        def jvp_out_axes_thunk() -> tuple[int | None, ...]:
            out_axes = tuple(out_axes_thunk())
            return out_axes + tuple(ax for ax, nz in zip(out_axes, out_nonzeros()) if nz)

        new_params = dict(params, in_axes=in_axes + tuple(
            ax for ax, nz in zip(in_axes, nonzeros) if nz), out_axes_thunk=jvp_out_axes_thunk)
        in_sources = list(range(len(primals))) + [i for i, nz in enumerate(nonzeros) if nz]
        new_params = core.update_map_params(primitive, new_params, in_sources)
        outs = primitive.bind(fun_jvp, *primals, *nz_tangents, **new_params)
        nz_out = out_nonzeros()
        primals_out, nz_tangents_out = outs[:len(nz_out)], iter(outs[len(nz_out):])
        return [maybe_jvp_tracer(self, p, next(nz_tangents_out) if nz else None)
                for p, nz in zip(primals_out, nz_out)]

    def post_process_map(self, primitive: core.MapPrimitive, out_tracers: list[Any],
                         params: dict[str, Any], *, debug_info: JaxprDebugInfo
                         ) -> tuple[list[Any], core.MapPostProcess]:
        primals = [t.primal for t in out_tracers]
        tangents = [instantiate_zeros(t.tangent) for t in out_tracers]
        n = len(primals)

        def todo(outs: list[Any]) -> list[Any]:
            return [maybe_jvp_tracer(self, p, t) for p, t in zip(outs[:n], outs[n:])]

        def out_axes_transform(out_axes: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(out_axes) + tuple(out_axes)

        primal_paths = debug_info.result_paths
        paths = tuple(primal_paths) + _names.select(_names.tangent, primal_paths)
        return primals + tangents, core.MapPostProcess(todo, out_axes_transform, paths)

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            return core.bind_custom_jvp(primitive, fun, jvp, primals,
                                        symbolic_zeros=symbolic_zeros)
        if not symbolic_zeros:
            tangents = [instantiate_zeros(t) for t in tangents]
        outs = list(jvp.call_wrapped(*primals, *tangents))
        n = len(outs) // 2
        return [maybe_jvp_tracer(self, p, t) for p, t in zip(outs[:n], outs[n:])]

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        """JAX's protocol: ``fwd`` takes ``(primal, is_nonzero)`` pairs
        (flattened) and returns ``[*residuals, *primals_out]``; ``out_trees()``
        gives ``(out_tree, res_tree, input_fwds)`` where ``input_fwds[i]`` is
        the index of the primal input that residual ``i`` forwards, or None."""
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            return core.bind_custom_vjp(primitive, fun, fwd, bwd, primals,
                                        out_trees=out_trees, symbolic_zeros=symbolic_zeros)
        fwd_in: list[Any] = []
        for p, t in zip(primals, tangents):
            fwd_in += [p, type(t) is not Zero]
        res_and_primals_out = list(fwd.call_wrapped(*fwd_in))
        _, res_tree, input_fwds = out_trees()
        num_res_out = res_tree.num_leaves - sum(f is not None for f in input_fwds)
        res_out, primals_out = res_and_primals_out[:num_res_out], res_and_primals_out[
            num_res_out:]
        res_iter = iter(res_out)
        res = [next(res_iter) if f is None else primals[f] for f in input_fwds]
        avals_out = [tangent_aval(get_aval(x)) for x in primals_out]
        in_zeros = [type(t) is Zero for t in tangents]
        nz_tangents = [t for t in tangents if type(t) is not Zero]
        tangents_out = custom_lin_p.bind(
            *res, *nz_tangents, num_res=res_tree.num_leaves, bwd=bwd,
            out_avals=tuple(avals_out), symbolic_zeros=symbolic_zeros, in_zeros=tuple(in_zeros))
        return [maybe_jvp_tracer(self, p, t) for p, t in zip(primals_out, tangents_out)]


# --- JVP of WrappedFuns --------------------------------------------------------------------
def _jvp_flat(inner: Callable[..., Any], store: Any, main: MainTrace,
              nonzeros: tuple[bool, ...], instantiate: bool | tuple[bool, ...],
              *args: Any, own_main: bool = False) -> list[Any]:
    """``(*primals, *nonzero_tangents) -> (*primals_out, *nonzero_tangents_out)``
    inside ``main``; stores which output tangents are present. With
    ``own_main`` (``main`` was started for this function) the inputs record
    which argument they are, for error messages."""
    n = len(nonzeros)
    primals, nz_tangents = args[:n], iter(args[n:])
    trace = main.trace
    assert isinstance(trace, JVPTrace)
    deps = _argument_deps(main, n) if own_main else [0] * n
    in_tracers = [JVPTracer(trace, p, next(nz_tangents), d) if nz else p
                  for p, nz, d in zip(primals, nonzeros, deps)]
    outs = inner(*in_tracers)
    out_primals, out_tangents = [], []
    try:
        for x in outs:
            p, t = _to_primal_tangent(trace, trace.full_raise(x))
            out_primals.append(p)
            out_tangents.append(t)
    except InvalidInputError:
        if not own_main:
            raise
        raise core.invalid_output_error(main.debug_info, outs) from None
    inst = ((instantiate,) * len(outs) if isinstance(instantiate, bool) else instantiate)
    out_tangents = [instantiate_zeros(t) if i and type(t) is Zero else t
                    for t, i in zip(out_tangents, inst)]
    out_nz = tuple(type(t) is not Zero for t in out_tangents)
    store.store(out_nz)
    return out_primals + [t for t in out_tangents if type(t) is not Zero]


def jvp_subtrace_flat(fun: WrappedFun, main: MainTrace, nonzeros: tuple[bool, ...],
                      instantiate: bool | tuple[bool, ...] = False,
                      ) -> tuple[WrappedFun, Callable[[], tuple[bool, ...]]]:
    """``fun`` as ``(*primals, *nonzero_tangents) -> (*primals_out,
    *nonzero_tangents_out)`` under the existing JVP ``main``; the thunk tells
    which output tangents are present. The debug info names tangents."""
    new_fun, out_nz = transformation_with_aux(_jvp_flat, fun, main, nonzeros, instantiate)
    return _name_tangents(new_fun, fun, nonzeros, out_nz), out_nz


def _jvp_new_main(inner: Callable[..., Any], store: Any, nonzeros: tuple[bool, ...],
                  instantiate: bool | tuple[bool, ...], debug_info: Any, name_stack: bool,
                  *args: Any) -> list[Any]:
    """``_jvp_flat`` inside a JVP main trace of its own (created at call time,
    so it sits above whatever traces the caller set up); with ``name_stack``
    the equations get ``jvp(f)`` in their name stack."""
    with core.new_main(JVPTrace, transform="jvp", debug_info=debug_info) as main:
        if not name_stack:
            return _jvp_flat(inner, store, main, nonzeros, instantiate, *args, own_main=True)
        with _si.transform_name_stack("jvp", debug_info):
            return _jvp_flat(inner, store, main, nonzeros, instantiate, *args, own_main=True)


def jvp_fun(fun: WrappedFun, nonzeros: Sequence[bool],
            instantiate: bool | Sequence[bool] = False, *, name_stack: bool = True
            ) -> tuple[WrappedFun, Callable[[], tuple[bool, ...]]]:
    """``fun`` as ``(*primals, *nonzero_tangents) -> (*primals_out,
    *nonzero_tangents_out)`` under a new JVP trace (WrappedFun -> WrappedFun,
    tangents named ``tangent(x)``); the thunk tells which output tangents
    are present. With ``name_stack`` (the default) the equations it traces
    get ``jvp(f)`` in their name stack; ``jvp_jaxpr`` turns it off (an inner
    jaxpr's equations are relative to the equation holding it)."""
    nz = tuple(bool(n) for n in nonzeros)
    inst = instantiate if isinstance(instantiate, bool) else tuple(instantiate)
    new_fun, out_nz = transformation_with_aux(_jvp_new_main, fun, nz, inst, fun.debug_info,
                                              bool(name_stack))
    return _name_tangents(new_fun, fun, nz, out_nz), out_nz


def _name_tangents(new_fun: WrappedFun, fun: WrappedFun, nonzeros: tuple[bool, ...],
                   out_nz: Callable[[], tuple[bool, ...]]) -> WrappedFun:
    dbg = fun.debug_info
    if dbg is None:
        return new_fun
    arg_names = tuple(dbg.arg_names)
    names = arg_names + tuple(tangent_name(n) for n, nz in zip(arg_names, nonzeros) if nz)
    paths = dbg.result_paths

    def jvp_paths() -> tuple[str | None, ...]:
        nz = out_nz()
        primal_paths = (tuple(paths()) if callable(paths) else
                        tuple(paths) if paths is not None else (None,) * len(nz))
        if len(primal_paths) != len(nz):
            primal_paths = (None,) * len(nz)
        return primal_paths + tuple(tangent_name(p) for p, z in zip(primal_paths, nz) if z)

    return new_fun.replace_debug_info(dbg.replace(
        func_src_info=_si.wrap_func_src(dbg.func_src_info, "jvp"),
        arg_names=names if len(arg_names) == len(nonzeros) else
        (None,) * (len(nonzeros) + sum(nonzeros)),
        result_paths=jvp_paths))


def jvp(fun: WrappedFun, primals: Sequence[Any], tangents: Sequence[Any], *,
        instantiate: bool | Sequence[bool] = True) -> tuple[list[Any], list[Any]]:
    """Evaluates flat ``fun`` and its JVP: ``(primals_out, tangents_out)``.

    ``tangents`` entries may be symbolic ``Zero``s; output tangents are
    instantiated where ``instantiate`` says (else they may be ``Zero``).
    """
    nonzeros = tuple(type(t) is not Zero and not _is_float0(t) for t in tangents)
    nz_tangents = [t for t, nz in zip(tangents, nonzeros) if nz]
    fun_jvp, out_nz_thunk = jvp_fun(fun, nonzeros, instantiate)
    outs = fun_jvp.call_wrapped(*primals, *nz_tangents)
    return split_jvp_outputs(outs, out_nz_thunk())


def _is_float0(t: Any) -> bool:
    """Whether ``t`` is a float0 tangent (an integer input's), which JAX's
    jvp and linearize take as a symbolic zero."""
    return type(t) is not Zero and get_aval(t).dtype == dtypes.float0


def split_jvp_outputs(outs: Sequence[Any], out_nz: Sequence[bool]
                      ) -> tuple[list[Any], list[Any]]:
    """``(primals, tangents)`` from the outputs of a JVP that returns every
    primal and then only the non-zero tangents (``out_nz`` says which); the
    others become symbolic ``Zero``s."""
    n = len(out_nz)
    primals, nz_out = list(outs[:n]), iter(outs[n:])
    tangents = [next(nz_out) if nz else Zero(tangent_aval(get_aval(p)))
                for p, nz in zip(primals, out_nz)]
    return primals, tangents


def jvp_subtrace(fun: WrappedFun, main: MainTrace) -> WrappedFun:
    """``fun`` as ``(primals, tangents) -> (primals_out, tangents_out)`` under
    the existing JVP ``main`` (lists; tangents may be ``Zero``)."""
    return transformation(_jvp_subtrace_lists, fun, main)


def _jvp_subtrace_lists(inner: Callable[..., Any], main: MainTrace, primals: Sequence[Any],
                        tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    trace = main.trace
    assert isinstance(trace, JVPTrace)
    in_tracers = [maybe_jvp_tracer(trace, p, t) for p, t in zip(primals, tangents)]
    outs = inner(*in_tracers)
    pairs = [_to_primal_tangent(trace, trace.full_raise(x)) for x in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


# --- JVP of jaxprs (initial-style higher-order primitives) ----------------------------------
def jvp_jaxpr(closed_jaxpr: ClosedJaxpr, nonzeros: Sequence[bool],
              instantiate: bool | Sequence[bool]) -> tuple[ClosedJaxpr, list[bool]]:
    """The JVP of a closed jaxpr: ``(*primals, *nonzero_tangents) ->
    (*primals_out, *nonzero_tangents_out)`` and which output tangents are
    present (``instantiate`` forces them). The debug info names the tangents
    ``tangent(x)`` / ``tangent(result)`` and records ``jvp(f)``."""
    nonzeros = tuple(bool(nz) for nz in nonzeros)
    n_out = len(closed_jaxpr.jaxpr.outvars)
    inst = ((bool(instantiate),) * n_out if isinstance(instantiate, bool)
            else tuple(bool(i) for i in instantiate))
    fun = pe.wrapped_fun_of_jaxpr(closed_jaxpr)
    in_avals = closed_jaxpr.in_avals
    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, nonzeros) if nz]
    fun_jvp, out_nz_thunk = jvp_fun(fun, nonzeros, inst, name_stack=False)
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(fun_jvp, [*in_avals, *tangent_avals])
    out_nz = list(out_nz_thunk())
    dbg = closed_jaxpr.jaxpr.debug_info
    if dbg is not None:
        jaxpr = jaxpr.replace(debug_info=JaxprDebugInfo(
            dbg.traced_for, _si.wrap_func_src(dbg.func_src_info, "jvp"),
            tuple(dbg.arg_names) + tuple(tangent_name(n)
                                         for n, nz in zip(dbg.arg_names, nonzeros) if nz),
            tuple(dbg.result_paths) + tuple(tangent_name(p)
                                            for p, nz in zip(dbg.result_paths, out_nz) if nz)))
    out = ClosedJaxpr(jaxpr, consts)
    core.maybe_validate(out)
    return out, out_nz


# --- linearize and VJP ----------------------------------------------------------------------
class LinearizeResult:
    """What ``linearize`` returns: the primal outputs, and the linear jaxpr from
    the input tangents to the output tangents with its constants."""

    __slots__ = ("out_primals", "jaxpr", "consts", "aux")

    def __init__(self, out_primals: list[Any], jaxpr: Jaxpr, consts: list[Any], aux: Any):
        self.out_primals = out_primals
        self.jaxpr = jaxpr
        self.consts = consts
        self.aux = aux


def _jvp_for_linearize(inner: Callable[..., Any], store: Any, has_aux: bool,
                       transform: str, debug_info: Any, *args: Any) -> list[Any]:
    """``(*primals, *tangents) -> (*primals_out, *tangents_out)``, all tangents
    instantiated; with ``has_aux`` the inner function returns ``(outs, aux)``
    and ``aux`` (lowered to primal values) goes to the store."""
    n = len(args) // 2
    primals, tangents = args[:n], args[n:]
    with core.new_main(JVPTrace, transform=transform, debug_info=debug_info) as main, \
            _si.transform_name_stack("jvp", debug_info):
        trace = main.trace
        assert isinstance(trace, JVPTrace)
        deps = _argument_deps(main, n)
        # an integer input's float0 tangent is a symbolic zero, as in JAX: the
        # input is not perturbed (custom_vjp's ``perturbed`` flags say so)
        in_tracers = [p if _is_float0(t) else JVPTracer(trace, p, t, d)
                      for p, t, d in zip(primals, tangents, deps)]
        result = inner(*in_tracers)
        if has_aux:
            outs, aux = result
            aux = [_primal_of(trace, a) for a in aux]
        else:
            outs, aux = result, None
        try:
            pairs = [_to_primal_tangent(trace, trace.full_raise(x)) for x in outs]
        except InvalidInputError:
            raise core.invalid_output_error(debug_info, outs) from None
    store.store(aux)
    return [p for p, _ in pairs] + [instantiate_zeros(t) for _, t in pairs]


def _primal_of(trace: JVPTrace, x: Any) -> Any:
    if isinstance(x, JVPTracer) and x._trace is trace:
        return core.full_lower(x.primal)
    return core.full_lower(x)


def linearize(fun: WrappedFun, primals: Sequence[Any], *, has_aux: bool = False,
              transform: str = "linearize") -> LinearizeResult:
    """Runs flat ``fun`` on ``primals`` and returns the primal outputs with
    the linear jaxpr mapping input tangents to output tangents.

    With ``has_aux`` the function returns ``(flat_outs, flat_aux)`` and the aux
    values are returned in ``.aux``. The jaxpr's inputs are named
    ``tangent(x)``, its outputs ``tangent(result)``.
    """

    jvp_fun, aux_thunk = transformation_with_aux(_jvp_for_linearize, fun, has_aux, transform,
                                                fun.debug_info)
    primal_avals = [get_aval(p) for p in primals]
    in_pvals = ([pe.PartialVal.known(p) for p in primals]
                + [pe.PartialVal.unknown(tangent_aval(a)) for a in primal_avals])

    def instantiate(n_out: int) -> list[bool]:
        return [False] * (n_out // 2) + [True] * (n_out // 2)

    jaxpr, out_pvals, consts = pe.trace_to_jaxpr_nounits(
        jvp_fun, in_pvals, instantiate=instantiate, transform=transform)
    n_out = len(out_pvals) // 2
    out_primals = []
    for pval in out_pvals[:n_out]:
        if not pval.is_known():
            raise ValueError("linearize: a primal output depends on the input tangents; "
                             "a JVP rule mixes primal and tangent computations")
        out_primals.append(pval.get_known())
    aux = aux_thunk()
    if has_aux:
        aux = [pe.lower_known(a) for a in aux]
    # Names: the linear jaxpr maps the tangents of the inputs to those of the outputs.
    dbg = fun.debug_info
    arg_names = dbg.safe_arg_names(len(primals)) if dbg is not None else (None,) * len(primals)
    result_paths = (dbg.safe_result_paths(n_out) if dbg is not None else (None,) * n_out)
    jaxpr = jaxpr.replace(debug_info=JaxprDebugInfo(
        dbg.traced_for if dbg is not None else transform,
        _si.wrap_func_src(dbg.func_src_info if dbg is not None else None, "jvp"),
        tuple(tangent_name(n) for n in arg_names),
        tuple(tangent_name(p) for p in result_paths)))
    core.maybe_validate(jaxpr)
    return LinearizeResult(out_primals, jaxpr, consts, aux)


def vjp(fun: WrappedFun, primals: Sequence[Any], *, has_aux: bool = False,
        transform: str = "vjp") -> tuple[list[Any], Callable[..., list[Any]], Any]:
    """``(out_primals, vjp_fn, aux)`` for flat ``fun``: ``vjp_fn(*cts)`` gives
    one cotangent per primal input (instantiated, float0 for integers)."""
    lin = linearize(fun, primals, has_aux=has_aux, transform=transform)
    jaxpr, consts = lin.jaxpr, lin.consts

    def vjp_fn(*cts: Any) -> list[Any]:
        if len(cts) != len(jaxpr.outvars):
            raise TypeError(f"vjp function expected {len(jaxpr.outvars)} cotangents, "
                            f"got {len(cts)}")
        dummies = [UndefinedPrimal(v.aval) for v in jaxpr.invars]
        arg_cts = backward_pass(jaxpr, consts, dummies, cts)
        return [instantiate_zeros(ct) for ct in arg_cts]

    return lin.out_primals, vjp_fn, lin.aux


# --- transposition ---------------------------------------------------------------------
def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], primals_in: Sequence[Any],
                  cotangents_in: Sequence[Any]) -> list[Any]:
    """Transposes ``jaxpr``, linear in the inputs given as ``UndefinedPrimal``.

    Equations that do not depend on a linear input are evaluated forward
    first; then the linear equations are visited in reverse, each calling its
    primitive's transpose rule. Returns one cotangent per invar (``Zero``
    where none reached it).
    """
    primal_env: dict[Var, Any] = {}
    linear: set[Var] = set()
    for v, c in zip(jaxpr.constvars, consts):
        primal_env[v] = c
    for v, p in zip(jaxpr.invars, primals_in):
        if type(p) is UndefinedPrimal:
            linear.add(v)
        else:
            primal_env[v] = p

    def read_primal(a: Any) -> Any:
        if type(a) is Literal:
            return core.literal_value(a)
        return UndefinedPrimal(a.aval) if a in linear else primal_env[a]

    linear_eqns = []
    saved_frame = _si._state.frame_override
    base_stack = _si._state.name_stack
    try:
        for eqn in jaxpr.eqns:
            if any(type(a) is not Literal and a in linear for a in eqn.invars):
                linear.update(eqn.outvars)
                linear_eqns.append(eqn)
                continue
            # A non-linear equation (e.g. zeros, or a function of residuals),
            # evaluated as part of the backward pass.
            info = eqn.source_info
            if info.frame is not None:
                _si._state.frame_override = info.frame
            _si._state.name_stack = _transposed_stack(base_stack, info.name_stack)
            subfuns, params = eqn.primitive.get_bind_params(eqn.params)
            ans = eqn.primitive.bind(*subfuns, *[read_primal(a) for a in eqn.invars], **params)
            _si._state.name_stack = base_stack
            if eqn.primitive.multiple_results:
                primal_env.update(zip(eqn.outvars, ans))
            else:
                primal_env[eqn.outvars[0]] = ans

        ct_env: dict[Var, Any] = {}
        for out, ct in zip(jaxpr.outvars, cotangents_in):
            if (isinstance(out, Var) and out in linear and ct is not None
                    and type(ct) is not Zero):
                ct_env[out] = add_tangents(ct_env[out], ct) if out in ct_env else ct

        for eqn in reversed(linear_eqns):
            cts_out = [ct_env.pop(v, None) for v in eqn.outvars]
            if all(ct is None for ct in cts_out):
                continue
            prim = eqn.primitive
            rule = transpose_rules.get(prim)
            if rule is None:
                if getattr(prim, "map_primitive", False):
                    rule = _map_transpose_rule(prim)
                else:
                    raise MissingRuleError(
                        f"Transpose rule (for reverse-mode differentiation) for "
                        f"'{prim.name}' not implemented")
            cts = [Zero(v.aval) if ct is None else ct for v, ct in zip(eqn.outvars, cts_out)]
            invals = [read_primal(a) for a in eqn.invars]
            info = eqn.source_info
            if info.frame is not None:
                _si._state.frame_override = info.frame
            # The rule's equations, and the additions accumulating its
            # cotangents, are staged under transpose(<the equation's stack>).
            _si._state.name_stack = _transposed_stack(base_stack, info.name_stack)
            cts_in = rule(cts if prim.multiple_results else cts[0], *invals, **eqn.params)
            if len(cts_in) != len(eqn.invars):
                raise ValueError(f"transpose rule of {prim.name} returned {len(cts_in)} "
                                 f"cotangents for {len(eqn.invars)} inputs")
            for a, ct in zip(eqn.invars, cts_in):
                if ct is None or type(ct) is Zero or not isinstance(a, Var) or a not in linear:
                    continue
                ct_env[a] = add_tangents(ct_env[a], ct) if a in ct_env else ct
            _si._state.name_stack = base_stack
    finally:
        _si._state.frame_override = saved_frame
        _si._state.name_stack = base_stack
    return [ct_env.get(v, Zero(v.aval)) for v in jaxpr.invars]


_transposed_stacks: dict[tuple[int, int], tuple[_si.NameStack, _si.NameStack,
                                                 _si.NameStack]] = {}


def _transposed_stack(base: _si.NameStack, eqn_stack: _si.NameStack) -> _si.NameStack:
    """The name stack of what transposing an equation stages: the current
    stack followed by the equation's, wrapped in ``transpose(...)``. (The
    same stack object for the same pair, so source infos are shared.)"""
    if not eqn_stack.stack:
        return base
    key = (id(base), id(eqn_stack))
    known = _transposed_stacks.get(key)
    if known is not None and known[0] is base and known[1] is eqn_stack:
        return known[2]
    out = _si.NameStack(base.stack + eqn_stack.wrap("transpose").stack)
    if len(_transposed_stacks) >= 1024:
        _transposed_stacks.clear()
    _transposed_stacks[key] = (base, eqn_stack, out)
    return out


def transpose_jaxpr(closed_jaxpr: ClosedJaxpr, which_linear: Sequence[bool]) -> ClosedJaxpr:
    """The transpose of a closed jaxpr linear in the inputs ``which_linear``:
    ``(*non_linear_inputs, *cotangents_of_outputs) -> cotangents of the linear
    inputs`` (instantiated). Names: ``cotangent(result)`` for the cotangent
    inputs, ``cotangent(x)`` for the outputs; ``transpose(f)`` in
    ``func_src_info``."""
    which_linear = [bool(w) for w in which_linear]
    jaxpr = closed_jaxpr.jaxpr
    in_avals = closed_jaxpr.in_avals
    res_avals = [a for a, lin in zip(in_avals, which_linear) if not lin]
    ct_avals = [tangent_aval(a) for a in closed_jaxpr.out_avals]
    lin_avals = [a for a, lin in zip(in_avals, which_linear) if lin]

    def transposed(*args: Any) -> list[Any]:
        res, cts = list(args[:len(res_avals)]), args[len(res_avals):]
        res_iter = iter(res)
        primals = [UndefinedPrimal(a) if lin else next(res_iter)
                   for a, lin in zip(in_avals, which_linear)]
        arg_cts = backward_pass(jaxpr, closed_jaxpr.consts, primals, cts)
        return [instantiate_zeros(ct) if type(ct) is Zero else ct
                for ct, lin in zip(arg_cts, which_linear) if lin]

    dbg = jaxpr.debug_info
    out_dbg = None
    if dbg is not None:
        out_dbg = JaxprDebugInfo(
            dbg.traced_for, _si.wrap_func_src(dbg.func_src_info, "transpose"),
            tuple(n for n, lin in zip(dbg.arg_names, which_linear) if not lin)
            + tuple(cotangent_name(p) for p in dbg.result_paths),
            tuple(cotangent_name(n) for n, lin in zip(dbg.arg_names, which_linear) if lin))
    new_jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
        wrap_init(transposed), [*res_avals, *ct_avals], debug_info=out_dbg)
    for got, want in zip(out_avals, lin_avals):
        if got.shape != want.shape:
            raise TypeError(f"transpose_jaxpr: cotangent of shape {got.str_short()} for an "
                            f"input of type {want.str_short()}")
    out = ClosedJaxpr(new_jaxpr, consts)
    core.maybe_validate(out)
    return out


def linear_transpose_closed_jaxpr(closed_jaxpr: ClosedJaxpr, cts: Sequence[Any],
                                  *res: Any) -> list[Any]:
    """Evaluates the transpose of a jaxpr linear in all inputs (helper)."""
    primals = [UndefinedPrimal(a) for a in closed_jaxpr.in_avals]
    return backward_pass(closed_jaxpr.jaxpr, closed_jaxpr.consts, primals, cts)


# --- map primitives (pmap) under transposition ----------------------------------------------
def _map_transpose_rule(prim: Primitive) -> Callable[..., list[Any]]:
    def rule(cts: Any, *invals: Any, **params: Any) -> list[Any]:
        return map_transpose(prim, cts, *invals, **params)
    return rule


def map_transpose(primitive: Primitive, cts: Sequence[Any], *invals: Any,
                  **params: Any) -> list[Any]:
    """The transpose of a map-primitive equation (``call_jaxpr``, ``in_axes``,
    ``out_axes``): rebinds the map over the transposed body. Cotangents of
    unmapped (``in_axes`` None) inputs are summed over the mapped axis."""

    call_jaxpr: Jaxpr = params["call_jaxpr"]
    in_axes = tuple(params["in_axes"])
    out_axes = tuple(params["out_axes"])
    axis_size = params["axis_size"]
    undefined = [type(x) is UndefinedPrimal for x in invals]
    nz_cts = [type(c) is not Zero for c in cts]
    body_in_avals = [v.aval for v in call_jaxpr.invars]

    def body(*args: Any) -> list[Any]:
        it = iter(args)
        primals = [UndefinedPrimal(a) if u else next(it) for a, u in zip(body_in_avals, undefined)]
        body_cts = [next(it) if nz else Zero(v.aval) for v, nz in zip(call_jaxpr.outvars, nz_cts)]
        arg_cts = backward_pass(call_jaxpr, (), primals, body_cts)
        return [ct for ct, u in zip(arg_cts, undefined) if u]

    dbg = call_jaxpr.debug_info
    fun, nz_out = transformation_with_aux(_nonzero_outputs, wrap_init(body))
    if dbg is not None:
        # The body returns the cotangents of the linear inputs that are not
        # zero (`_nonzero_outputs`): name exactly those.
        ct_names = _names.select(_names.cotangent, dbg.arg_names, undefined)

        def result_paths() -> tuple[str | None, ...]:
            return tuple(n for n, nz in zip(ct_names, nz_out()) if nz)

        fun = fun.replace_debug_info(TracingDebugInfo(
            dbg.traced_for, _si.wrap_func_src(dbg.func_src_info, "transpose"),
            tuple(n for n, u in zip(dbg.arg_names, undefined) if not u)
            + _names.select(_names.cotangent, dbg.result_paths, nz_cts),
            result_paths))
    defined_args = [x for x, u in zip(invals, undefined) if not u]
    ct_args = [c for c, nz in zip(cts, nz_cts) if nz]
    new_in_axes = (tuple(ax for ax, u in zip(in_axes, undefined) if not u)
                   + tuple(ax for ax, nz in zip(out_axes, nz_cts) if nz))
    lin_in_axes = [ax for ax, u in zip(in_axes, undefined) if u]

    def out_axes_thunk() -> tuple[int | None, ...]:
        return tuple(ax if ax is not None else 0
                     for ax, nz in zip(lin_in_axes, nz_out()) if nz)

    new_params = {k: v for k, v in params.items() if k not in ("call_jaxpr", "out_axes")}
    new_params.update(in_axes=new_in_axes, out_axes_thunk=out_axes_thunk)
    in_sources = [i for i, u in enumerate(undefined) if not u] + [None] * len(ct_args)
    new_params = core.update_map_params(primitive, new_params, in_sources)
    outs = iter(primitive.bind(fun, *defined_args, *ct_args, **new_params))
    results: list[Any] = []
    lin_iter = iter(zip(lin_in_axes, nz_out()))
    for x, u in zip(invals, undefined):
        if not u:
            results.append(None)
            continue
        ax, nz = next(lin_iter)
        if not nz:
            results.append(Zero(core.unmapped_aval(axis_size, ax, x.aval) if ax is not None
                                else x.aval))
            continue
        ct = next(outs)
        if ax is None:
            ct = reduce_sum(ct, (0,))
        results.append(ct)
    return results


def _nonzero_outputs(inner: Callable[..., Any], store: Any, *args: Any) -> list[Any]:
    outs = inner(*args)
    store.store(tuple(type(o) is not Zero for o in outs))
    return [o for o in outs if type(o) is not Zero]


# --- custom VJP: the linear part of a custom_vjp function -------------------------------------
custom_lin_p = Primitive("custom_lin", multiple_results=True)
"""Stands for the linear (tangent) part of a ``custom_vjp`` function under
JVP; only its transpose (which calls the user's ``bwd``) is ever evaluated.
Params: ``num_res``, ``bwd``, ``out_avals``, ``symbolic_zeros``, ``in_zeros``."""


def _custom_lin_abstract_eval(*avals: ShapedArray, out_avals: tuple[ShapedArray, ...],
                              **_: Any) -> list[ShapedArray]:
    return list(out_avals)


def _custom_lin_impl(*args: Any, **params: Any) -> Any:
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def _custom_lin_transpose(cts_out: Sequence[Any], *invals: Any, num_res: int, bwd: Any,
                          out_avals: Any, symbolic_zeros: bool,
                          in_zeros: Sequence[bool]) -> list[Any]:
    res = invals[:num_res]
    if not symbolic_zeros:
        cts_out = [instantiate_zeros(ct) for ct in cts_out]
    cts_in = list(bwd.call_wrapped(*res, *cts_out))
    nz_cts_in = [Zero(tangent_aval(get_aval(ct))) if ct is None else ct
                 for ct, z in zip(cts_in, in_zeros) if not z]
    return [None] * num_res + nz_cts_in


custom_lin_p.def_abstract_eval(_custom_lin_abstract_eval)
custom_lin_p.def_impl(_custom_lin_impl)
custom_lin_p.def_transpose(_custom_lin_transpose)
