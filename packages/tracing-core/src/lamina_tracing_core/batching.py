"""Batching (``vmap``): BatchTrace and the utilities batching rules use.

A batched value is a ``BatchTracer(val, batch_dim)``: ``val`` carries one extra
axis, ``batch_dim``, of the batch size; ``not_mapped`` (``None``) marks a value
the same for every batch element.

Rule conventions:

- ``primitives.batching_rules[prim](batched_args, batch_dims, **params) ->
  (out, out_dims)``: plain rules, called only when some argument is batched.
- ``fancy_primitive_batchers[prim](axis_data, batched_args, batch_dims,
  **params) -> (out, out_dims)``: rules that need the axis (its size, name,
  spmd name) — collectives over the vmapped named axis and higher-order
  primitives that batch their inner jaxprs with ``batch_jaxpr``. They are
  called even when no argument is batched (``psum`` of an unbatched value
  over the vmapped axis multiplies by the axis size).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import lamina_tracing_core.core as core
from lamina_tracing_core import source_info as _si
from lamina_tracing_core import vma as _vma
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.base_primitives import (  # re-exported: batching.moveaxis etc.
    bdim_at_front as bdim_at_front,
    broadcast_batch as broadcast_batch,
    moveaxis as moveaxis,
    reduce_sum,
)
from lamina_tracing_core.symbolic import Zero
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, canonicalize_axis, get_aval
from lamina_tracing_core.core import MainTrace, Trace, Tracer
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprDebugInfo
from lamina_tracing_core.primitives import MissingRuleError, Primitive, batching_rules
from lamina_linear_util.linear_util import WrappedFun, transformation_with_aux, wrap_init, transformation
from lamina_linear_util.errors import StoreError

#: The batch dim of an unbatched value.
not_mapped = None


class AxisData:
    """The vmapped axis: ``name`` (or None), ``size``, and ``spmd_name``."""

    __slots__ = ("name", "size", "spmd_name")

    def __init__(self, name: object, size: int, spmd_name: object = None):
        self.name = name
        self.size = size
        self.spmd_name = spmd_name

    def __repr__(self) -> str:
        return f"AxisData(name={self.name!r}, size={self.size}, spmd_name={self.spmd_name!r})"


#: rule(axis_data, batched_args, batch_dims, **params) -> (out, out_dims)
fancy_primitive_batchers: dict[Primitive, Callable[..., Any]] = {}


def matchaxis(src: int | None, dst: int | None, x: Any, size: int) -> Any:
    """``x`` (batched at ``src``) with its batch dim at ``dst``: moved,
    broadcast when unbatched, or an error when ``dst`` is unbatched but ``x``
    is not."""
    if src == dst:
        return x
    if src is not_mapped:
        return broadcast_batch(x, size, dst)  # type: ignore[arg-type]
    if dst is not_mapped:
        raise ValueError(f"cannot unbatch a value batched along axis {src}")
    return moveaxis(x, src, dst)


# --- the batch trace ---------------------------------------------------------------------


class BatchTracer(Tracer):
    """A batched value: ``val`` with the batch axis at ``batch_dim``.

    For error messages it also carries ``deps``, a bit mask over the flat
    arguments of the vmapped function (bit ``i``: the value depends on
    argument ``i``), and where it was created (``source_info``)."""

    __slots__ = ("val", "batch_dim", "_aval", "deps", "source_info")

    def __init__(self, trace: Trace, val: Any, batch_dim: int | None, deps: int = 0,
                 source_info: _si.SourceInfo | None = None):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim
        self._aval: ShapedArray | None = None
        self.deps = deps
        self.source_info = source_info

    @property
    def aval(self) -> ShapedArray:
        aval = self._aval
        if aval is None:
            full = get_aval(self.val)
            d = self.batch_dim
            aval = full if d is None else full.update(shape=full.shape[:d] + full.shape[d + 1:])
            spmd = self._trace.axis_data.spmd_name  # type: ignore[attr-defined]
            if spmd is not None and aval.vma and _vma.checking():
                # the batch is split over the spmd axes, not one element
                # (JAX's typeof of an element leaves them out)
                names = frozenset(spmd) if isinstance(spmd, (tuple, list)) else {spmd}
                aval = aval.update(vma=aval.vma - names)
            self._aval = aval
        return aval

    def full_lower(self) -> Any:
        if self.batch_dim is not_mapped:
            return core.full_lower(self.val)
        return self

    def _origin_message(self) -> str:
        main = self._trace.main
        message = (f"The error occurred while tracing {main.describe_function()}: the value "
                   f"is batched (it differs across the vmapped axis), so it has no single "
                   f"concrete value.")
        names = _argument_names(main.debug_info, self.deps)
        if len(names) == 1:
            message += (f" It is batched because it depends on the value of the argument "
                        f"{names[0]}.")
        elif names:
            message += (f" It is batched because it depends on the values of the arguments "
                        f"{_english_list(names)}.")
        where = self._origin_source_info()
        frame = where.frame if where is not None else None
        if frame is not None:
            message += (f"\nThis BatchTracer was created on line:\n  {frame.file_name}:"
                        f"{frame.line} ({frame.function_name})")
        return message

    def _origin_source_info(self) -> Any:
        if self.source_info is not None:
            return self.source_info
        val = self.val
        return val._origin_source_info() if isinstance(val, Tracer) else None

    def _operand_origin(self) -> tuple[list[str], Any] | None:
        dbg = self._trace.main.debug_info
        names = _argument_names(dbg, self.deps)
        if names or self.deps:
            return names, dbg
        val = self.val  # unbatched: an enclosing transformation may know
        return val._operand_origin() if isinstance(val, Tracer) else None


def _argument_names(debug_info: Any, deps: int) -> list[str]:
    """The names of the arguments whose bits are set in ``deps`` (those known)."""
    arg_names = getattr(debug_info, "arg_names", None)
    if not deps or not arg_names:
        return []
    return [name for i, name in enumerate(arg_names)
            if deps >> i & 1 and name is not None]


def _english_list(names: list[str]) -> str:
    """``x and y``; ``x, y, and z`` (the wording of jit's message)."""
    if len(names) == 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + ", and " + names[-1]


class BatchTrace(Trace):
    """Vectorizes every primitive along the batch axis (``main.payload['axis_data']``)."""

    __slots__ = ("axis_data",)

    def __init__(self, main: MainTrace):
        super().__init__(main)
        self.axis_data: AxisData = main.payload["axis_data"]

    def pure(self, val: Any) -> BatchTracer:
        return BatchTracer(self, val, not_mapped)

    def lift(self, tracer: Tracer) -> BatchTracer:
        return self.pure(tracer)

    def process_primitive(self, primitive: Primitive, tracers: list[Any],
                          params: dict[str, Any]) -> Any:
        # tuples, as JAX hands them to rules: rules written for JAX pass them on
        # as parameters or axis specifications, where a list means another tree
        vals = tuple(t.val for t in tracers)
        dims = tuple(t.batch_dim for t in tracers)
        fancy = fancy_primitive_batchers.get(primitive)
        if fancy is not None:
            out, out_dims = fancy(self.axis_data, vals, dims, **params)
        elif all(d is not_mapped for d in dims):
            return primitive.bind(*vals, **params)
        else:
            rule = batching_rules.get(primitive)
            if rule is None:
                raise MissingRuleError(
                    f"Batching rule for '{primitive.name}' not implemented")
            out, out_dims = rule(vals, dims, **params)
        deps = 0
        for t in tracers:
            deps |= t.deps
        # a traced ``val`` knows its own line (see ``_origin_source_info``)
        first = out[0] if primitive.multiple_results and out else out
        src = None if isinstance(first, Tracer) else _si.current_source_info()
        if primitive.multiple_results:
            return [BatchTracer(self, x, d, deps, src) for x, d in zip(out, out_dims)]
        return BatchTracer(self, out, out_dims, deps, src)

    def process_map(self, primitive: core.MapPrimitive, fun: WrappedFun, tracers: list[Any],
                    params: dict[str, Any]) -> list[Any]:
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if all(d is not_mapped for d in dims):
            out: list[Any] = primitive.bind(fun, *vals, **params)
            return out
        in_axes = tuple(params["in_axes"])
        # Where both the map and the batch use an argument's axes: the map's
        # axis is removed inside, so a batch dim after it shifts down by one;
        # a batch dim at or before it pushes the map axis up by one.
        new_in_axes = tuple(ax + 1 if ax is not None and d is not None and d <= ax else ax
                            for d, ax in zip(dims, in_axes))
        inner_dims = tuple(d - 1 if ax is not None and d is not None and ax < d else d
                           for d, ax in zip(dims, in_axes))
        fun_b, out_dims = batch_subtrace(fun, self.main, inner_dims,
                                         tuple(t.deps for t in tracers))
        out_axes_thunk = params["out_axes_thunk"]

        def new_out_axes_thunk() -> tuple[int | None, ...]:
            return tuple(ax + 1 if ax is not None and d is not None and d < ax else ax
                         for ax, d in zip(out_axes_thunk(), out_dims()))

        new_params = dict(params, in_axes=new_in_axes, out_axes_thunk=new_out_axes_thunk)
        new_params = core.update_map_params(primitive, new_params, list(range(len(vals))))
        outs = primitive.bind(fun_b, *vals, **new_params)
        final_dims = [d + 1 if ax is not None and d is not None and ax <= d else d
                      for d, ax in zip(out_dims(), out_axes_thunk())]
        deps = _joint_deps(tracers)
        return [BatchTracer(self, v, d, deps) for v, d in zip(outs, final_dims)]

    def post_process_map(self, primitive: core.MapPrimitive, out_tracers: list[Any],
                         params: dict[str, Any], *, debug_info: JaxprDebugInfo
                         ) -> tuple[list[Any], core.MapPostProcess]:
        vals = [t.val for t in out_tracers]
        dims = [t.batch_dim for t in out_tracers]
        seen_axes: list[tuple[Any, ...]] = []

        def out_axes_transform(out_axes: tuple[Any, ...]) -> tuple[Any, ...]:
            # the map stacks each body output at its out axis: a batch dim
            # before that axis pushes the axis one further out
            seen_axes.append(tuple(out_axes))
            return tuple(ax + 1 if ax is not None and d is not None and d < ax else ax
                         for ax, d in zip(out_axes, dims))

        def todo(outs: list[Any]) -> list[Any]:
            out_axes = seen_axes[-1]
            return [BatchTracer(self, v, d + 1 if ax is not None and d is not None
                                and ax <= d else d, t.deps)
                    for v, d, ax, t in zip(outs, dims, out_axes, out_tracers)]

        # vmap keeps names (names.batched)
        return vals, core.MapPostProcess(todo, out_axes_transform,
                                         tuple(debug_info.result_paths))

    def process_custom_jvp_call(self, primitive: Primitive, fun: WrappedFun,
                                jvp: WrappedFun, tracers: list[Any], *,
                                symbolic_zeros: bool) -> list[Any]:
        vals = [t.val for t in tracers]
        dims = tuple(t.batch_dim for t in tracers)
        fun_b, out_dims1 = batch_subtrace(fun, self.main, dims, tuple(t.deps for t in tracers))
        jvp_b, out_dims2 = batch_custom_jvp_subtrace(jvp, self.main, dims)
        outs = core.bind_custom_jvp(primitive, fun_b, jvp_b, vals,
                                    symbolic_zeros=symbolic_zeros)
        out_dims = _first_filled(out_dims1, out_dims2)
        deps = _joint_deps(tracers)
        return [BatchTracer(self, v, d, deps) for v, d in zip(outs, out_dims)]

    def process_custom_vjp_call(self, primitive: Primitive, fun: WrappedFun,
                                fwd: WrappedFun, bwd: Any, tracers: list[Any], *,
                                out_trees: Callable[[], Any], symbolic_zeros: bool) -> list[Any]:
        vals = [t.val for t in tracers]
        dims = tuple(t.batch_dim for t in tracers)
        fwd_dims = tuple(x for d in dims for x in (d, not_mapped))
        in_deps = tuple(t.deps for t in tracers)
        fun_b, out_dims1 = batch_subtrace(fun, self.main, dims, in_deps)
        fwd_b, out_dims2 = batch_subtrace(fwd, self.main, fwd_dims,
                                          tuple(x for d in in_deps for x in (d, 0)))

        def bwd_in_dims() -> tuple[int | None, ...]:
            _, res_tree, input_fwds = out_trees()
            fwd_out = out_dims2()
            num_res_out = res_tree.num_leaves - sum(f is not None for f in input_fwds)
            res_dims = iter(fwd_out[:num_res_out])
            full_res = [next(res_dims) if f is None else dims[f] for f in input_fwds]
            return (*full_res, *fwd_out[num_res_out:])

        bwd_b = batch_custom_vjp_bwd(bwd, self.axis_data, bwd_in_dims, dims)
        outs = core.bind_custom_vjp(primitive, fun_b, fwd_b, bwd_b, vals, out_trees=out_trees,
                                    symbolic_zeros=symbolic_zeros)
        try:
            out_dims = list(out_dims1())
        except Exception:
            _, res_tree, input_fwds = out_trees()
            num_res_out = res_tree.num_leaves - sum(f is not None for f in input_fwds)
            out_dims = list(out_dims2())[num_res_out:]
        out_deps = _joint_deps(tracers)
        return [BatchTracer(self, v, d, out_deps) for v, d in zip(outs, out_dims)]


def _joint_deps(tracers: list[Any]) -> int:
    """The arguments any of ``tracers`` depends on (for error messages)."""
    deps = 0
    for t in tracers:
        deps |= t.deps
    return deps


def _first_filled(*thunks: Callable[[], Any]) -> list[Any]:
    for i, thunk in enumerate(thunks):
        try:
            dims = list(thunk())
        except StoreError:
            continue
        return dims if i == 0 else dims[:len(dims) // 2]
    raise StoreError("neither the function nor its custom JVP ran")


# --- batching WrappedFuns ------------------------------------------------------------------
def _batch_subtrace(inner: Callable[..., Any], store: Any, main: MainTrace,
                    in_dims: tuple[int | None, ...], in_deps: tuple[int, ...],
                    *args: Any) -> list[Any]:
    trace = main.trace
    deps = in_deps or (0,) * len(in_dims)
    in_tracers = [BatchTracer(trace, x, d, dep) if d is not not_mapped else x
                  for x, d, dep in zip(args, in_dims, deps)]
    outs = inner(*in_tracers)
    out_vals, out_dims = [], []
    for o in outs:
        t = trace.full_raise(o)
        out_vals.append(t.val)
        out_dims.append(t.batch_dim)
    store.store(tuple(out_dims))
    return out_vals


def batch_subtrace(fun: WrappedFun, main: MainTrace, in_dims: Sequence[int | None],
                   in_deps: Sequence[int] = ()
                   ) -> tuple[WrappedFun, Callable[[], tuple[int | None, ...]]]:
    """``fun`` on batched values (batch dims ``in_dims``) under the existing
    BatchTrace ``main``; the thunk gives the output batch dims. ``in_deps``
    are the ``BatchTracer.deps`` of the values passed in (which arguments of
    ``main``'s function they depend on), so errors inside still name them."""
    new_fun, out_dims = transformation_with_aux(_batch_subtrace, fun, main, tuple(in_dims),
                                                tuple(in_deps))
    return _with_vmap_name(new_fun, fun), out_dims


def _with_vmap_name(new_fun: WrappedFun, fun: WrappedFun) -> WrappedFun:
    dbg = fun.debug_info
    if dbg is None:
        return new_fun
    return new_fun.replace_debug_info(dbg.replace(func_src_info=_si.wrap_func_src(dbg.func_src_info,
                                                                          "vmap")))


def _batch_custom_jvp(inner: Callable[..., Any], store: Any, main: MainTrace,
                      in_dims: tuple[int | None, ...], *args: Any) -> list[Any]:
    trace = main.trace
    assert isinstance(trace, BatchTrace)
    size = trace.axis_data.size
    in_tracers: list[Any] = []
    for x, d in zip(args, in_dims + in_dims):
        if type(x) is Zero:
            full = x.aval
            in_tracers.append(Zero(full.update(shape=full.shape[:d] + full.shape[d + 1:]))
                              if d is not None else x)
        else:
            in_tracers.append(BatchTracer(trace, x, d) if d is not None else x)
    outs = list(inner(*in_tracers))
    m = len(outs) // 2
    primals = [trace.full_raise(o) for o in outs[:m]]
    tangents = outs[m:]
    out_vals: list[Any] = [p.val for p in primals]
    out_dims: list[int | None] = [p.batch_dim for p in primals]
    tangent_vals = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if type(t) is Zero or t is None:
            full = p.val
            d = out_dims[i]
            aval = get_aval(full)
            tangent_vals.append(Zero(aval) if type(t) is Zero or t is None else t)
            continue
        tt = trace.full_raise(t)
        if tt.batch_dim != out_dims[i]:
            if out_dims[i] is None:  # the primal is unbatched but its tangent is not
                out_vals[i] = broadcast_batch(out_vals[i], size, tt.batch_dim)
                out_dims[i] = tt.batch_dim
                tangent_vals.append(tt.val)
            else:
                tangent_vals.append(matchaxis(tt.batch_dim, out_dims[i], tt.val, size))
        else:
            tangent_vals.append(tt.val)
    store.store(tuple(out_dims) * 2)
    return out_vals + tangent_vals


def batch_custom_jvp_subtrace(jvp: WrappedFun, main: MainTrace, in_dims: Sequence[int | None]
                              ) -> tuple[WrappedFun, Callable[[], tuple[int | None, ...]]]:
    """A custom JVP function (``(*primals, *tangents) -> [*primals_out,
    *tangents_out]``) batched with the primals' dims (tangents alike); each
    output tangent is moved to its primal's batch dim."""
    new_fun, out_dims = transformation_with_aux(_batch_custom_jvp, jvp, main, tuple(in_dims))
    return _with_vmap_name(new_fun, jvp), out_dims


def batch_custom_vjp_bwd(bwd: Any, axis_data: AxisData,
                         in_dims: Callable[[], Sequence[int | None]],
                         out_dim_dests: Sequence[int | None]) -> WrappedFun:
    """A custom VJP's ``bwd`` (a WrappedFun ``(*res, *cts) -> cts_in``) as a
    freshly vmapped function: its inputs batched at ``in_dims()``, its
    outputs moved to the primal inputs' dims (summed where those are not
    batched)."""

    def new_bwd(*args: Any) -> list[Any]:
        dims = list(in_dims())
        args_ = []
        for x, d in zip(args, dims):
            if type(x) is Zero and d is not None:
                full = x.aval
                args_.append(Zero(full.update(shape=full.shape[:d] + full.shape[d + 1:])))
            else:
                args_.append(x)
        dims = [None if type(x) is Zero else d for x, d in zip(args_, dims)]
        batched = batch_fun(bwd, axis_data, dims, lambda: tuple(out_dim_dests),
                            sum_unbatched=True)
        return list(batched.call_wrapped(*args_))

    return wrap_init(new_bwd, debug_info=getattr(bwd, "debug_info", None))


def _vmap_outer(inner: Callable[..., Any], axis_data: AxisData,
                in_dims: tuple[int | None, ...],
                out_dim_dests: Callable[[], Sequence[int | None]], sum_unbatched: bool,
                debug_info: Any, *args: Any) -> list[Any]:
    results, trace = _vmap_in_main(inner, axis_data, in_dims, out_dim_dests, sum_unbatched,
                                   debug_info, *args)
    if core.config.check_tracer_leaks:  # the vmapped call is over: what is left leaked
        core.raise_if_leaked(trace)
    return results


def _vmap_in_main(inner: Callable[..., Any], axis_data: AxisData,
                  in_dims: tuple[int | None, ...],
                  out_dim_dests: Callable[[], Sequence[int | None]], sum_unbatched: bool,
                  debug_info: Any, *args: Any) -> tuple[list[Any], BatchTrace]:
    with core.new_main(BatchTrace, transform="vmap", debug_info=debug_info,
                       axis_data=axis_data) as main:
        trace = main.trace
        assert isinstance(trace, BatchTrace)
        if axis_data.name is not None:
            ctx: Any = core.extend_axis_env(axis_data.name, axis_data.size, main)
        else:
            ctx = _null_context()
        with ctx, _si.transform_name_stack("vmap", debug_info):
            in_tracers = [BatchTracer(trace, x, d, 1 << i) if d is not not_mapped else x
                          for i, (x, d) in enumerate(zip(args, in_dims))]
            outs = inner(*in_tracers)
            out_tracers = [trace.full_raise(o) for o in outs]
        for t in out_tracers:
            if t.batch_dim is None:  # batched values come from primitives: always arrays
                try:
                    get_aval(t.val)
                except InvalidInputError:
                    raise core.invalid_output_error(debug_info, outs) from None
        dests = tuple(out_dim_dests())
        results = []
        for i, (t, dest) in enumerate(zip(out_tracers, dests)):
            val, d = t.val, t.batch_dim
            if dest is None and d is not None:
                if sum_unbatched:
                    val = reduce_sum(val, (d,))
                    results.append(val)
                    continue
                raise ValueError(_mapped_output_error(debug_info, i, axis_data, d))
            if dest is not None:
                # The result has the output's rank plus the batch axis; an
                # out-of-range ``out_axes`` is an error, never taken modulo it.
                try:
                    canonicalize_axis(dest, t.aval.ndim + 1)
                except ValueError as e:
                    owner = core.describe_output(debug_info, i, len(outs))
                    raise ValueError(f"{e} (out_axes of {owner})") from None
            results.append(matchaxis(d, dest, val, axis_data.size))
    return results, trace



def _mapped_output_error(debug_info: Any, i: int, axis_data: AxisData, axis: int) -> str:
    path = None
    if debug_info is not None:
        try:
            paths = debug_info.safe_result_paths(i + 1) if hasattr(
                debug_info, "safe_result_paths") else None
        except Exception:
            paths = None
        if paths is not None and i < len(paths):
            path = paths[i]
    where = f" {path}" if path else f" {i}"
    hint = (f"output{where} depends on the mapped inputs; give it an out_axes entry, or make "
            "it unmapped")
    if axis_data.name is not None:  # JAX's two texts, then the output's path
        return (f"vmap has mapped output (axis_name={axis_data.name}) but out_axes is None "
                f"({hint})")
    return (f"at vmap out_axes, got axis spec None but output was batched on axis {axis} "
            f"({hint})")


class _null_context:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def vmap_flat(fun: WrappedFun, axis_data: AxisData, in_dims: Sequence[int | None],
              out_dim_dests: Callable[[], Sequence[int | None]], *args: Any,
              sum_unbatched: bool = False) -> list[Any]:
    """Evaluates flat ``fun`` vmapped on ``args`` (batched at ``in_dims``);
    outputs are moved to ``out_dim_dests()`` (``None``: must be unbatched, or
    is summed over the batch axis with ``sum_unbatched``)."""
    batched = batch_fun(fun, axis_data, in_dims, out_dim_dests, sum_unbatched=sum_unbatched)
    return list(batched.call_wrapped(*args))


def batch_fun(fun: WrappedFun, axis_data: AxisData, in_dims: Sequence[int | None],
              out_dim_dests: Callable[[], Sequence[int | None]], *,
              sum_unbatched: bool = False) -> WrappedFun:
    """``fun`` vmapped along ``axis_data`` (a WrappedFun -> WrappedFun
    transformation; names unchanged, ``vmap(f)`` recorded in the debug info
    and in the name stack of the equations it traces)."""
    new_fun = transformation(_vmap_outer, fun, axis_data, tuple(in_dims), out_dim_dests,
                             sum_unbatched, fun.debug_info)
    return _with_vmap_name(new_fun, fun)


# --- batching jaxprs (initial-style higher-order primitives) -----------------------------------
def batch_jaxpr(closed_jaxpr: ClosedJaxpr, axis_size: int | AxisData,
                in_batched: Sequence[bool], instantiate: bool | Sequence[bool],
                axis_name: object = None, spmd_axis_name: object = None
                ) -> tuple[ClosedJaxpr, list[bool]]:
    """The jaxpr vmapped over inputs ``in_batched`` (batch dim 0), with
    outputs batched at 0 where batched or where ``instantiate`` says; returns
    it and which outputs are batched. Names unchanged; ``vmap(f)`` recorded.
    ``axis_size`` may be an ``AxisData`` (name and spmd name included)."""

    axis_data = (axis_size if isinstance(axis_size, AxisData)
                 else AxisData(axis_name, int(axis_size), spmd_axis_name))
    in_batched = [bool(b) for b in in_batched]
    n_out = len(closed_jaxpr.jaxpr.outvars)
    inst = ([bool(instantiate)] * n_out if isinstance(instantiate, bool)
            else [bool(i) for i in instantiate])
    cell: list[list[bool]] = []
    jaxpr_fun = core.jaxpr_as_fun(closed_jaxpr)
    dbg = closed_jaxpr.jaxpr.debug_info

    def batched(*args: Any) -> list[Any]:
        with core.new_main(BatchTrace, transform="vmap", debug_info=dbg,
                           axis_data=axis_data) as main:
            trace = main.trace
            ctx: Any = (core.extend_axis_env(axis_data.name, axis_data.size, main)
                        if axis_data.name is not None else _null_context())
            with ctx:
                in_tracers = [BatchTracer(trace, x, 0) if b else x
                              for x, b in zip(args, in_batched)]
                outs = [trace.full_raise(o) for o in jaxpr_fun(*in_tracers)]
            out_batched = [t.batch_dim is not not_mapped or i for t, i in zip(outs, inst)]
            cell.append(out_batched)
            return [matchaxis(t.batch_dim, 0 if b else None, t.val, axis_data.size)
                    for t, b in zip(outs, out_batched)]

    in_avals = [core.unmapped_aval(axis_data.size, 0, a) if b else a
                for a, b in zip(closed_jaxpr.in_avals, in_batched)]
    out_dbg = None
    if dbg is not None:
            out_dbg = dbg.replace(func_src_info=_si.wrap_func_src(dbg.func_src_info, "vmap"))
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrap_init(batched), in_avals,
                                                 debug_info=out_dbg)
    out = ClosedJaxpr(jaxpr, consts)
    core.maybe_validate(out)
    return out, cell[0]

