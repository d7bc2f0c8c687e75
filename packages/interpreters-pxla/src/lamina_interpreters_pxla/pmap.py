"""``pmap``: map a function over an axis of its arguments, one replica per device.

``pmap(f, axis_name='i')(xs)`` runs ``f`` on every device with the ``i``-th
entry of ``xs`` (along the ``in_axes`` of each argument) and stacks the results
(along ``out_axes``). Collectives inside ``f`` (``psum``, ``pmean``,
``all_gather``, ``ppermute``, ``axis_index``...) communicate over ``'i'``.

It is a *final-style* transformation: the call flattens the arguments, fixes
the ``static_broadcasted_argnums``, and binds :data:`pmap_p` with the user
function still a ``WrappedFun`` carrying its debug info (the argument names
``x``, ``y['hi']``, ``args[1]``, ``kwargs['w']`` and the result paths,
formed here with ``api_util.debug_info(traced_for='pmap')``). Every
transformation above (jvp, grad, vmap, ...) wraps that function and updates
its names; the impl rule (:mod:`lamina_interpreters_pxla.pmap_execution`)
traces it last, lowers it with the names on the module's arguments and
results, compiles it in replica mode and runs it.

Eager calls with arguments of a signature seen before skip all of that: each
pmapped function keeps its compiled executables keyed on the argument tree,
static arguments and argument types, and a hit puts the arguments in place
(one batched ``shard_args`` for those not already laid out right) and runs
the executable.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from lamina_linear_util import api_util, tree_util
from lamina_linear_util.errors import NonHashableStaticArgumentError
from lamina_linear_util.linear_util import WrappedFun, wrap_init
from lamina_tracing_core import core, dtypes, trace_settings
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, get_aval

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.cpp_dispatch import (
    Fastpath,
    clear_cpp_caches,
    fastpath,
    new_cpp_function,
)
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_interpreters_pxla.pmap_config import chunked_shards
from lamina_interpreters_pxla.pmap_execution import (
    PmapCallParams,
    PmapExecutable,
    TracedPmap,
    capture_executable,
    clear_cache,
    compile_pmap,
    devices_for,
    lower_pmap,
    trace_pmap,
)
from lamina_interpreters_pxla.pmap_primitive import AnonymousAxis, OutAxesThunk, pmap_p
from lamina_interpreters_pxla.pmap_shardings import PmapLayout, addressable
from lamina_interpreters_pxla.stages import ArgInfo, Compiled, Lowered, OutInfo, Traced

__all__ = ["PmapFunction", "pmap", "pmap_p"]

_flatten = tree_util.registry.flatten
_PYTHON_SCALARS = (bool, int, float, complex)
_FAST_CACHE_SIZE = 256


def pmap(fun: Callable[..., Any], axis_name: Hashable | None = None, *,
         in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Iterable[int] = (),
         devices: Sequence[Any] | None = None, backend: str | None = None,
         axis_size: int | None = None,
         donate_argnums: int | Iterable[int] = ()) -> Any:
    """Parallel map of ``fun`` over an axis of its arguments, one replica per device.

    Args:
      fun: the function to map. Its arguments and results are arrays, scalars
        or pytrees of them; the arguments at ``static_broadcasted_argnums`` may
        be any hashable values.
      axis_name: a hashable name for the mapped axis, which collectives
        (``psum(x, axis_name)``...) refer to.
      in_axes: which axis of each positional argument to map over: an int,
        ``None`` (the argument is broadcast to every device), or a pytree
        prefix of the positional arguments (a tuple with one entry per
        positional argument, static ones included) with such leaves.
        Arguments passed by keyword are always mapped over their axis 0.
      out_axes: where the mapped axis goes in each result: an int, ``None``
        (the result is the same on every device and is returned once), or a
        pytree prefix of the results.
      static_broadcasted_argnums: positions of arguments that are static:
        passed to ``fun`` as Python values (so they must be hashable), the same
        on every device; a new value compiles anew. They must be passed
        positionally.
      devices: the devices to run on (default: the first local devices of
        ``backend``); the mapped size (times the replicas nested pmaps need)
        must not exceed their number.
      backend: the platform to run on when ``devices`` is not given.
      axis_size: the size of the mapped axis; needed only when no argument is
        mapped.
      donate_argnums: positional arguments whose buffers the computation may
        reuse for its results (they are invalid afterwards).

    Returns a function to call like ``fun`` (jaxlib's C++ dispatch function
    in front of a :class:`PmapFunction`, or the latter itself with static or
    donated arguments); stage it with ``.trace(*args)`` / ``.lower(*args)``.
    With ``pmap_chunked_shards`` on (the default) the results' shards keep the
    stacked rank (``[1, 100]``) and carry an ordinary ``NamedSharding``; off,
    they drop the mapped axis and carry a ``PmapSharding``.
    """
    api_util.check_callable(fun)
    _check_axes_spec("in_axes", in_axes)
    _check_axes_spec("out_axes", out_axes)
    static = api_util.ensure_index_tuple(static_broadcasted_argnums,
                                         what="static_broadcasted_argnums")
    donate = api_util.ensure_index_tuple(donate_argnums, what="donate_argnums")
    if both := sorted(set(static) & set(donate)):
        raise ValueError(f"pmap of {api_util.fun_name(fun)}: arguments {both} are both in "
                         f"static_broadcasted_argnums={static} and donate_argnums={donate}")
    if devices is not None:
        devices = tuple(devices)
        if not devices:
            raise ValueError("'devices' argument to pmap must be non-empty, or None.")
    if axis_size is not None:
        axis_size = operator.index(axis_size)
        if axis_size < 1:
            raise ValueError(f"pmap axis_size must be a positive int, got {axis_size}")
    mapped = PmapFunction(fun, axis_name, in_axes=in_axes, out_axes=out_axes, static=static,
                          devices=devices, backend=backend, axis_size=axis_size, donate=donate)
    return _callable_of(mapped)


_all_pmapped: weakref.WeakSet[PmapFunction] = weakref.WeakSet()


def clear_pmap_caches() -> None:
    """Forgets every pmap's compiled signatures: its dispatch cache, the
    impl rule's trace/compile cache and the C++ fastpaths."""
    for mapped in list(_all_pmapped):
        mapped._fast.clear()
    clear_cache()
    clear_cpp_caches()


def _callable_of(mapped: PmapFunction) -> Any:
    """What ``pmap`` returns: jaxlib's C++ jit function in front of
    ``mapped`` (see ``cpp_dispatch``), carrying its stages as attributes; or
    ``mapped`` itself when static or donated arguments keep calls in Python."""
    if mapped._static or mapped._donate:
        return mapped
    # _pmapped: the Python side, for introspection and tests
    return new_cpp_function(mapped._name, mapped._fun, mapped._cache_miss,
                            trace=mapped.trace, lower=mapped.lower, _pmapped=mapped)


def _check_axes_spec(what: str, spec: Any) -> None:
    if isinstance(spec, list) and what == "in_axes":
        spec = tuple(spec)
    for leaf in tree_util.none_leaf_registry.flatten(spec)[0]:
        if leaf is not None and type(leaf) is not int:
            raise TypeError(f"pmap {what} must be an int, None, or (nested) container with "
                            f"those types as leaves, but got {spec}.")


@dataclass
class _Call:
    """One call of a pmapped function, ready to bind."""

    fun: WrappedFun
    flat_args: list[Any]
    in_tree: Any
    out_tree: Callable[[], Any]
    params: dict[str, Any]
    out_axes_thunk: OutAxesThunk

    @property
    def call_params(self) -> PmapCallParams:
        return PmapCallParams(**{k: v for k, v in self.params.items()
                                 if k != "out_axes_thunk"})


class PmapFunction:
    """A pmapped function: call it, or stage it with :meth:`trace` / :meth:`lower`."""

    def __init__(self, fun: Callable[..., Any], axis_name: Hashable | None, *, in_axes: Any,
                 out_axes: Any, static: tuple[int, ...], devices: tuple[Any, ...] | None,
                 backend: str | None, axis_size: int | None, donate: tuple[int, ...]):
        self._fun = fun
        self._axis_name = axis_name
        self._in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        self._out_axes = out_axes
        self._static = static
        self._devices = devices
        self._backend = backend
        self._axis_size = axis_size
        self._donate = donate
        self._name = api_util.fun_name(fun)
        self._fast: dict[Hashable, tuple[PmapExecutable, Any]] = {}
        # (updated=(): copying the wrapped object's __dict__ would clobber ours when
        # fun is itself a PmapFunction)
        functools.update_wrapper(self, fun, updated=())
        _all_pmapped.add(self)

    def __repr__(self) -> str:
        return f"<pmap of {self._name}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        # Decorating a method: bind like a function does.
        if obj is None:
            return self
        return functools.partial(self, obj)

    # -- calling -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(args, kwargs)[0]

    def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> tuple[Any, PmapExecutable | None, list[Any]]:
        """The result, the executable that ran it (None when the call was
        staged) and the flat dynamic arguments."""
        key = self._fast_key(args, kwargs)
        if key is not None:
            entry = self._fast.get(key[0])
            if entry is not None:
                exe, out_tree = entry
                return tree_util.tree_unflatten(out_tree, exe.call_flat(key[1])), exe, key[1]
        return self._call_slow(args, kwargs, key)

    def _cache_miss(self, *args: Any, **kwargs: Any) -> tuple[Any, Fastpath | None, bool]:
        """The C++ function's miss: the Python path, and the fastpath for a
        plain call (every argument an Array placed as the program wants)."""
        try:
            out, exe, flat = self._call(args, kwargs)
        except (SystemError, RecursionError) as e:  # a too-deep argument names itself
            named = api_util.deep_argument_error(f"pmap({self._name})", self._fun, args,
                                                 kwargs) if tree_util.is_too_deep(e) else None
            if named is None:
                raise
            raise named from None
        if exe is None or exe._select is not None or exe.has_effects or _float_checks.any:
            return out, None, False
        return out, fastpath(exe.loaded, flat, exe.in_shardings, exe.kept_var_idx, out), False

    def _fast_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[Hashable, list[Any]] | None:
        """The dispatch-cache key of an eager call and its flat dynamic
        arguments, or None when the call must take the full path (traced
        values, unusual argument types, bad static arguments)."""
        if core.cur_level() != 0 or type(core.find_top_trace(())) is not core.EvalTrace:
            return None
        static_key: tuple[Any, ...] = ()
        if self._static:
            n = len(args)
            try:
                positions = self._static_positions(n)
                static_key = tuple((i, type(args[i]), args[i]) for i in positions)
                hash(static_key)
            except (ValueError, TypeError):
                return None
            args = tuple(a for i, a in enumerate(args) if i not in positions)
        flat, tree = _flatten((args, kwargs))
        leaf_keys = []
        for x in flat:
            t = type(x)
            if t is Array:
                leaf_keys.append(x._arr.aval)
            elif t is np.ndarray:
                leaf_keys.append((x.shape, x.dtype))
            elif t in _PYTHON_SCALARS:
                leaf_keys.append(t)
            elif isinstance(x, np.generic):
                leaf_keys.append((t,))
            else:
                return None
        key = (tree, static_key, tuple(leaf_keys), chunked_shards(), dtypes.x64_enabled(),
               trace_settings.state.key)
        return key, flat

    def _call_slow(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                   key: tuple[Hashable, list[Any]] | None
                   ) -> tuple[Any, PmapExecutable | None, list[Any]]:
        call = self._prepare(args, kwargs)
        if key is None:
            outs = pmap_p.bind(call.fun, *call.flat_args, **call.params)
            return tree_util.tree_unflatten(call.out_tree(), outs), None, []
        with capture_executable() as box:
            outs = pmap_p.bind(call.fun, *call.flat_args, **call.params)
        out_tree = call.out_tree()
        exe = box[0] if box else None
        if exe is not None:
            if len(self._fast) >= _FAST_CACHE_SIZE:
                self._fast.pop(next(iter(self._fast)))
            self._fast[key[0]] = (exe, out_tree)
        return tree_util.tree_unflatten(out_tree, outs), exe, key[1]

    # -- staging ---------------------------------------------------------------------------
    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """Traces the per-device program for these arguments (arrays or
        ``ShapeDtypeStruct``s; static arguments as values). The ``Traced``
        stage's jaxpr is the per-replica program; ``.lower()`` lowers it."""
        call = self._prepare(args, kwargs)
        avals = [_abstractify(x) for x in call.flat_args]
        traced = trace_pmap(call.fun, avals, call.call_params, call.out_axes_thunk)
        out_tree = call.out_tree()
        args_info = [ArgInfo(a, d, n, None) for a, d, n in
                     zip(traced.in_avals, traced.params.donated_invars, traced.arg_names)]
        out_info = [OutInfo(a, n, None) for a, n in zip(traced.out_avals, traced.result_names)]

        def lower(platforms: tuple[str, ...] | None) -> Lowered:
            return _lower_traced(traced, call.in_tree, out_tree, platforms)

        return Traced(traced.jaxpr, fun_name=self._name, in_tree=call.in_tree,
                      out_tree=out_tree, args_info=args_info, out_info=out_info,
                      lower_fn=lower)

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """``trace(*args, **kwargs).lower()``: the replica-mode StableHLO module,
        its arguments and results named (``y['hi']``, ``result['a']``)."""
        return self.trace(*args, **kwargs).lower()

    # -- preparing a call ----------------------------------------------------------------------
    def _static_positions(self, n: int) -> tuple[int, ...]:
        static = self._static
        if max(static) >= n or min(static) < -n:
            raise ValueError(
                f"pmapped function has static_broadcasted_argnums={static} but was called "
                f"with only {n} positional argument{'s' if n != 1 else ''}. All static "
                f"broadcasted arguments must be passed positionally.")
        return tuple(sorted({i % n for i in static}))

    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Call:
        n_args = len(args)
        static = self._static_positions(n_args) if self._static else ()
        dbg = api_util.debug_info("pmap", self._fun, args, kwargs, static_argnums=static)
        fun = wrap_init(self._fun, debug_info=dbg)
        dyn_argnums = tuple(i for i in range(n_args) if i not in static)
        if static:
            try:
                fun, dyn_args = api_util.argnums_partial(fun, dyn_argnums, args)
            except NonHashableStaticArgumentError as e:
                raise NonHashableStaticArgumentError(
                    f"pmap of {self._name}: {e} Arguments at static_broadcasted_argnums="
                    f"{self._static} must be hashable.") from None
        else:
            dyn_args = args
        fun, _ = api_util.result_paths(fun)
        flat_args, in_tree = _flatten((dyn_args, kwargs))
        flat_fun, out_tree = api_util.flatten_fun(fun, in_tree)
        names = dbg.safe_arg_names(len(flat_args))
        try:
            in_axes = self._flat_in_axes(dyn_argnums, n_args, in_tree, flat_args, names)
        except InvalidInputError:
            raise core.invalid_argument_error(dbg, flat_args) from None
        size, global_size = self._mapped_size(flat_args, in_axes, names)
        donated = self._donated(dyn_args, dyn_argnums, n_args, len(flat_args))
        out_axes_thunk = OutAxesThunk(self._out_axes, out_tree)
        axis_name = self._axis_name
        if axis_name is None:
            axis_name = AnonymousAxis(len(core.bound_axis_names()))
        params = dict(axis_name=axis_name, axis_size=size, global_axis_size=global_size,
                      devices=self._devices, backend=self._backend, name=self._name,
                      in_axes=in_axes, out_axes_thunk=out_axes_thunk,
                      donated_invars=donated,
                      is_explicit_global_axis_size=self._axis_size is not None,
                      chunked=chunked_shards())
        return _Call(flat_fun, flat_args, in_tree, out_tree, params, out_axes_thunk)

    def _flat_in_axes(self, dyn_argnums: tuple[int, ...], n_args: int, in_tree: Any,
                      flat_args: Sequence[Any], names: Sequence[str | None]
                      ) -> tuple[int | None, ...]:
        spec = self._in_axes
        if isinstance(spec, tuple):
            if len(spec) != n_args:
                # JAX's wording and key path (code matches on them)
                raise ValueError(
                    f"pmap in_axes specification must be a tree prefix of the corresponding "
                    f"value: pytree structure error: different lengths of tuple at key path "
                    f"pmap in_axes[0]: the prefix pytree pmap in_axes has a tuple of length "
                    f"{len(spec)}, but the full pytree (the tuple of arguments passed "
                    f"positionally) has length {n_args}")
            spec = tuple(spec[i] for i in dyn_argnums)
        flat = api_util.flatten_axes("pmap in_axes", in_tree, (spec, 0), kws=True,
                                     tupled_args=True, path_through_args=True)
        out: list[int | None] = []
        for x, ax, name in zip(flat_args, flat, names):
            if ax is None:
                out.append(None)
                continue
            ndim = len(_shape_of(x))
            if not -ndim <= ax < ndim:
                raise ValueError(
                    f"pmap was requested to map its argument {name or '<unnamed>'} along "
                    f"axis {ax}, which implies that its rank should be at least "
                    f"{ax + 1 if ax >= 0 else -ax}, but is only {ndim} (its shape is "
                    f"{_shape_of(x)})")
            out.append(ax % ndim)
        return tuple(out)

    def _num_processes(self) -> int:
        """How many processes share the mapped axis (each passes its entries)."""
        if self._devices is not None:
            return len({d.process_index for d in self._devices})
        return backends.process_count(self._backend)

    def _mapped_size(self, flat_args: Sequence[Any], in_axes: Sequence[int | None],
                     names: Sequence[str | None]) -> tuple[int, int]:
        """This process's size of the mapped axis, and the size over all processes."""
        first: tuple[int, int, str] | None = None
        for i, (x, ax) in enumerate(zip(flat_args, in_axes)):
            if ax is None:
                continue
            size = _shape_of(x)[ax]
            name = names[i] or f"flat argument {i}"
            if first is None:
                first = (size, ax, name)
            elif size != first[0]:
                ref_size, ref_ax, ref_name = first
                where = f" on axis {ref_ax}" if ref_ax != ax else ""
                raise ValueError(
                    f"pmap got inconsistent sizes for array axes to be mapped: the argument "
                    f"{name} has size {size} on axis {ax}, {ref_name} has size "
                    f"{ref_size}{where}")
        processes = self._num_processes() if first is not None or self._axis_size else 1
        if first is None:
            if self._axis_size is None:
                raise ValueError(f"pmap of {self._name} requires at least one argument with "
                                 f"a mapped axis (or an explicit axis_size=...)")
            if self._axis_size % processes:
                raise ValueError(f"pmap of {self._name}: axis_size={self._axis_size} is not "
                                 f"a multiple of the {processes} processes")
            return self._axis_size // processes, self._axis_size
        local = first[0]
        if local == 0:
            raise ValueError(f"pmap of {self._name}: the mapped axis {first[1]} of argument "
                             f"{first[2]} has size 0, but pmap needs one device per entry of "
                             f"the mapped axis, so at least one")
        if self._axis_size is not None and self._axis_size != local * processes:
            raise ValueError(f"Specified axis_size {self._axis_size} doesn't match received "
                             f"axis_size {local * processes} (of argument {first[2]}).")
        return local, local * processes

    def _donated(self, dyn_args: tuple[Any, ...], dyn_argnums: tuple[int, ...], n_args: int,
                 n_flat: int) -> tuple[bool, ...]:
        """One flag per flat argument: the leaves of the positional arguments at
        ``donate_argnums``."""
        if not self._donate:
            return (False,) * n_flat
        donate = {i % n_args for i in self._donate if -n_args <= i < n_args}
        flags: list[bool] = []
        for arg, pos in zip(dyn_args, dyn_argnums):
            flags += [pos in donate] * len(_flatten(arg)[0])
        flags += [False] * (n_flat - len(flags))  # keyword arguments are never donated
        return tuple(flags)


def _shape_of(x: Any) -> tuple[int, ...]:
    shape = getattr(x, "shape", None)
    if shape is not None:
        return tuple(shape)
    return tuple(get_aval(x).shape)


def _abstractify(x: Any) -> ShapedArray:
    """The aval of an argument of ``trace``/``lower``: an array, a scalar, or a
    shape-and-dtype description (``ShapeDtypeStruct``)."""
    try:
        aval = get_aval(x)
    except InvalidInputError:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise
        aval = x
    if type(aval) is not ShapedArray:
        aval = ShapedArray(tuple(aval.shape), dtypes.canonicalize_dtype(aval.dtype),
                           bool(getattr(aval, "weak_type", False)))
    return aval


def _lower_traced(traced: TracedPmap, in_tree: Any, out_tree: Any,
                  platforms: tuple[str, ...] | None) -> Lowered:
    params = traced.params
    devices: tuple[Any, ...] | None = None
    try:
        devices = devices_for(traced)
    except ValueError:
        if platforms is None:
            raise
    if platforms is None:
        assert devices is not None
        platforms = (backends.lowering_platform(devices[0]),)
    elif devices is not None and backends.lowering_platform(devices[0]) not in platforms:
        devices = None  # lowered for another platform: export only
    lowering = lower_pmap(traced, platforms)
    mine = (None if devices is None else tuple(devices)
            if params.axis_size == params.global_axis_size else addressable(devices))
    layout = (PmapLayout(mine, params.axis_size, traced.replication, params.chunked,
                         params.axis_name) if mine is not None else None)
    in_shardings = ([layout.array_sharding(ax, a.ndim)
                     for ax, a in zip(params.in_axes, traced.in_avals)]
                    if layout is not None else None)
    out_shardings = ([layout.array_sharding(ax, a.ndim)
                      for ax, a in zip(traced.out_axes, traced.out_avals)]
                     if layout is not None else None)
    args_info = [ArgInfo(a, d, n, s) for a, d, n, s in zip(
        traced.in_avals, params.donated_invars, traced.arg_names,
        in_shardings or [None] * len(traced.in_avals))]
    out_info = [OutInfo(a, n, s) for a, n, s in zip(
        traced.out_avals, traced.result_names, out_shardings or [None] * len(traced.out_avals))]

    def compile_fn(lowered: Lowered) -> Compiled:
        if devices is None:
            raise ValueError(f"pmap of {params.name} was lowered for {lowered.platforms} "
                             f"without devices of that platform; it can be exported but not "
                             f"compiled here")
        exe = compile_pmap(traced, lowering, devices)
        return Compiled(exe, in_tree=in_tree, out_tree=out_tree, args_info=args_info,
                        fun_name=params.name)

    return Lowered(lowering, fun_name=params.name, jaxpr=traced.jaxpr,
                   platforms=lowering.platforms, in_tree=in_tree, out_tree=out_tree,
                   args_info=args_info, out_info=out_info, devices=devices,
                   in_shardings=in_shardings, out_shardings=out_shardings,
                   compile_fn=compile_fn)
