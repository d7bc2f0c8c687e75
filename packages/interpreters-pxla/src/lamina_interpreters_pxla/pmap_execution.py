"""pmap's impl rule: trace the ``WrappedFun`` at the last moment, lower it in
replica mode, compile it, run it.

The pipeline, each step usable on its own (``pmap(f).trace`` / ``.lower``
stop early):

1. :func:`trace_pmap` traces ``fun`` once for the per-device argument types,
   under the bound axis (``trace_to_jaxpr_final``: the transformations whose
   wrappers ``fun`` carries stay above the staging trace). With chunked shards
   the per-replica program takes and gives each mapped value with a size-1
   axis at its mapped position (a WrappedFun transformation squeezes it on the
   way in and restores it on the way out), so the program's buffers are
   exactly the arrays' shards. The jaxpr's names come from ``fun.debug_info``.
2. :func:`lower_pmap` lowers that program with one replica per device
   (``ReplicaAxisContext``; nested pmaps multiply the replicas), pruning the
   arguments it does not use, as ``jit`` does.
3. :func:`compile_pmap` compiles it for the devices and wraps it in a
   :class:`PmapExecutable`, whose call path is lean: arguments already laid
   out right go straight to XLA, the others are placed in one batched
   ``shard_args`` call, and the result handlers are built once.

The impl rule caches step 1-3 per (function, argument types, params) with
``lamina_linear_util.cache`` (explain-mode reports misses on the
``lamina.cache`` logger), so a function is traced once per signature.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import ArrayImpl, ArrayImplClass, Device
from lamina_interpreters_pxla.array import Array, DeletedArrayError, deleted_message
from lamina_interpreters_pxla.compiler import log_compilation
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_interpreters_pxla.float_checks import first_bad, is_suspended
from lamina_interpreters_pxla.executable import (
    BuildOptions,
    Executable,
    ExecutableCallError,
    compile_module,
)
from lamina_interpreters_pxla.layouts import has_custom_layout
from lamina_interpreters_pxla.pmap_lowering import jaxpr_replicas
from lamina_interpreters_pxla.pmap_primitive import pmap_p
from lamina_interpreters_pxla.pmap_shardings import PmapLayout, addressable, choose_devices
from lamina_interpreters_pxla.sharding import PmapSharding
from lamina_interpreters_pxla.transfer import shard_args
from lamina_linear_util.cache import cache as lu_cache
from lamina_linear_util.linear_util import WrappedFun, transformation
from lamina_mlir_lowering import LoweringResult, ReplicaAxisContext, lower_jaxpr_to_module
from lamina_tracing_core import core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import InvalidInputError, ShapedArray, get_aval
from lamina_tracing_core.effects import NamedAxisEffect, has_ordered_effects, ordered_effects
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Var
from lamina_tracing_core.lax import structural

__all__ = ["PmapCallParams", "PmapExecutable", "PmapExecutor", "TracedPmap",
           "capture_executable", "compile_pmap", "lower_pmap", "pmap_callable",
           "recent_executables", "recent_lowerings", "run_local_pmap",
           "set_multiprocess_executor", "spans_processes", "trace_pmap"]


@dataclass(frozen=True)
class PmapCallParams:
    """The hashable params of one ``pmap_p`` application (all but the function
    and ``out_axes_thunk``; see :mod:`lamina_interpreters_pxla.pmap_primitive`)."""

    axis_name: Hashable
    axis_size: int
    global_axis_size: int
    devices: tuple[Device, ...] | None
    backend: str | None
    name: str
    in_axes: tuple[int | None, ...]
    donated_invars: tuple[bool, ...]
    is_explicit_global_axis_size: bool
    chunked: bool


# --- 1. tracing ------------------------------------------------------------------------
@dataclass(frozen=True)
class TracedPmap:
    """A pmapped function traced for given argument types.

    ``jaxpr`` is the per-replica program (per-device types; with chunked
    shards every mapped value keeps a size-1 axis at its mapped position) with
    its ``JaxprDebugInfo``; ``in_avals``/``out_avals`` are the stacked
    (global) types; ``replication`` is the replicas per mapped entry (nested
    pmaps)."""

    params: PmapCallParams
    jaxpr: ClosedJaxpr
    in_avals: tuple[ShapedArray, ...]
    out_avals: tuple[ShapedArray, ...]
    out_axes: tuple[int | None, ...]
    replication: int

    @property
    def num_replicas(self) -> int:
        """Replicas over all processes."""
        return self.params.global_axis_size * self.replication

    @property
    def num_processes(self) -> int:
        return self.params.global_axis_size // self.params.axis_size

    @property
    def arg_names(self) -> tuple[str | None, ...]:
        dbg = self.jaxpr.jaxpr.debug_info
        return tuple(dbg.arg_names) if dbg is not None else (None,) * len(self.in_avals)

    @property
    def result_names(self) -> tuple[str | None, ...]:
        dbg = self.jaxpr.jaxpr.debug_info
        return tuple(dbg.result_paths) if dbg is not None else (None,) * len(self.out_avals)


def _result_label(fun_debug: Any, i: int, n: int) -> str:
    paths = fun_debug.safe_result_paths(n) if fun_debug is not None else (None,) * n
    return paths[i] or f"result {i}"


def _check_out_axes(out_axes: Sequence[int | None], out_avals: Sequence[ShapedArray],
                    fun: WrappedFun, name: str) -> None:
    if len(out_axes) != len(out_avals):
        raise ValueError(f"pmap of {name}: out_axes gives {len(out_axes)} axes for "
                         f"{len(out_avals)} results")
    for i, (ax, aval) in enumerate(zip(out_axes, out_avals)):
        if ax is not None and not 0 <= ax <= aval.ndim:
            label = _result_label(fun.debug_info, i, len(out_avals))
            raise ValueError(f"pmap of {name}: out_axes entry {ax} for {label} of per-device "
                             f"type {aval.str_short()} must be between 0 and {aval.ndim}")


def _chunked_io(inner: Callable[..., Any], in_axes: tuple[int | None, ...],
                out_axes_thunk: Callable[[], tuple[int | None, ...]], fun: WrappedFun,
                name: str, *args: Any) -> list[Any]:
    """The per-replica program with chunked shards: the size-1 mapped axis of
    each mapped argument is squeezed before the body and put back on each
    mapped result after it."""
    body_args = [a if ax is None else structural.squeeze(a, (ax,))
                 for a, ax in zip(args, in_axes)]
    outs = list(inner(*body_args))
    out_axes = out_axes_thunk()
    try:
        out_avals = [get_aval(o) for o in outs]
    except InvalidInputError:
        raise core.invalid_output_error(fun.debug_info, outs) from None
    _check_out_axes(out_axes, out_avals, fun, name)
    return [o if ax is None else structural.expand_dims(o, (ax,))
            for o, ax in zip(outs, out_axes)]


def _per_device_avals(in_avals: Sequence[ShapedArray], params: PmapCallParams
                      ) -> list[ShapedArray]:
    out = []
    for i, (aval, ax) in enumerate(zip(in_avals, params.in_axes)):
        if ax is not None and (ax >= aval.ndim or aval.shape[ax] != params.axis_size):
            raise ValueError(f"pmap of {params.name}: flat argument {i} of type "
                             f"{aval.str_short()} has no axis {ax} of size "
                             f"{params.axis_size} to map over")
        out.append(core.mapped_aval(params.axis_size, ax, aval))
    return out


def trace_pmap(fun: WrappedFun, in_avals: Sequence[ShapedArray], params: PmapCallParams,
               out_axes_thunk: Callable[[], tuple[int | None, ...]]) -> TracedPmap:
    """Step 1: trace ``fun`` (flat, per-device) for stacked ``in_avals``."""
    per_device = _per_device_avals(in_avals, params)
    if params.chunked:
        program_in = [a if ax is None else core.unmapped_aval(1, ax, a)
                      for a, ax in zip(per_device, params.in_axes)]
        traced_fun = transformation(_chunked_io, fun, params.in_axes, out_axes_thunk, fun,
                                    params.name)
    else:
        program_in, traced_fun = per_device, fun
    # Collectives see the whole axis (every process's entries).
    with core.extend_axis_env(params.axis_name, params.global_axis_size):
        jaxpr, out_avals, consts = pe.trace_to_jaxpr_final(traced_fun, program_in)
    out_axes = tuple(out_axes_thunk())
    n = params.axis_size
    if params.chunked:
        global_out = tuple(a if ax is None else a.update(
            shape=a.shape[:ax] + (n,) + a.shape[ax + 1:]) for a, ax in zip(out_avals, out_axes))
    else:
        _check_out_axes(out_axes, out_avals, fun, params.name)
        global_out = tuple(core.unmapped_aval(n, ax, a) for a, ax in zip(out_avals, out_axes))
    closed = ClosedJaxpr(jaxpr, consts)
    return TracedPmap(params, closed, tuple(in_avals), global_out, out_axes,
                      jaxpr_replicas(jaxpr))


# --- 2. lowering ----------------------------------------------------------------------------
#: The most recent lowerings (newest last), for inspecting what reached XLA,
#: e.g. the argument names after a transformation of a pmap.
recent_lowerings: list[LoweringResult] = []
_RECENT = 16


def module_name(name: str) -> str:
    return f"pmap_{name}"


def _without_dead_equations(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` without the top-level equations nothing needs (e.g. the
    squeezes of arguments the body does not use), so none is lowered; the
    inputs, outputs and inner jaxprs stay as they are."""
    used: set[Any] = {v for v in jaxpr.outvars if isinstance(v, Var)}
    kept: list[JaxprEqn] = []
    for eqn in reversed(jaxpr.eqns):
        side_effects = any(not isinstance(e, NamedAxisEffect) for e in eqn.effects)
        if side_effects or any(v in used for v in eqn.outvars):
            kept.append(eqn)
            used.update(v for v in eqn.invars if isinstance(v, Var))
    if len(kept) == len(jaxpr.eqns):
        return jaxpr
    kept.reverse()
    effects = frozenset(e for eqn in kept for e in eqn.effects)
    return jaxpr.replace(eqns=kept, effects=effects)


def lower_pmap(traced: TracedPmap, platforms: Sequence[str]) -> LoweringResult:
    """Step 2: the replica-mode module of ``traced``. Unlike jit's, it keeps
    every argument, read or not (pmap's contract: the module names all of
    them); the dead equations go."""
    params = traced.params
    jaxpr = _without_dead_equations(traced.jaxpr.jaxpr)
    if has_ordered_effects(jaxpr.effects):
        # JAX's wording; each replica's callbacks run on its own device thread
        raise ValueError(f"Ordered effects not supported in `pmap` (pmap({params.name}) has "
                         f"{', '.join(str(e) for e in ordered_effects(jaxpr.effects))}); "
                         "use ordered=False")
    total = traced.num_replicas
    lowering = lower_jaxpr_to_module(
        module_name(params.name), ClosedJaxpr(jaxpr, traced.jaxpr.consts),
        platforms=tuple(platforms), donated_args=params.donated_invars, num_replicas=total,
        axis_context=ReplicaAxisContext(((params.axis_name, params.global_axis_size),),
                                        num_replicas=total),
        keep_unused=True)
    recent_lowerings.append(lowering)
    del recent_lowerings[:-_RECENT]
    return lowering


# --- 3. compiling and calling -------------------------------------------------------------
def _unstacked(s: Any) -> bool:
    """True for classic pmap shardings whose shards drop the mapped axis."""
    return (isinstance(s, PmapSharding) and not s.sharding_spec.chunked
            and s.sharding_spec.sharded_axis is not None)


class PmapExecutable(Executable):
    """A compiled pmap computation with a lean call path.

    Besides the ``Executable`` fields it knows the layout of the arrays it
    takes and gives (:class:`PmapLayout`): ``in_axes``/``out_axes`` and the
    user-facing output avals and shardings (which differ from the program's
    only in the classic layout with nested pmaps).
    """

    def __init__(self, loaded: Any, traced: TracedPmap, lowering: LoweringResult,
                 layout: PmapLayout, devices: Sequence[Device]):
        params = traced.params
        self.layout = layout
        self.in_axes = params.in_axes
        self.out_axes = traced.out_axes
        self.array_out_avals = list(traced.out_avals)
        self.array_out_shardings = [layout.array_sharding(ax, a.ndim)
                                    for ax, a in zip(traced.out_axes, traced.out_avals)]
        r = layout.replication if layout.stacked else 1
        program_out = [a if ax is None or r == 1 else a.update(
            shape=a.shape[:ax] + (a.shape[ax] * r,) + a.shape[ax + 1:])
            for a, ax in zip(traced.out_avals, traced.out_axes)]
        super().__init__(
            loaded, name=f"pmap({params.name})", in_avals=traced.in_avals,
            out_avals=program_out,
            in_shardings=[layout.program_sharding(ax, a.ndim)
                          for ax, a in zip(params.in_axes, traced.in_avals)],
            out_shardings=[layout.program_sharding(ax, a.ndim)
                           for ax, a in zip(traced.out_axes, program_out)],
            devices=devices,
            options=BuildOptions(num_replicas=traced.num_replicas, use_shardy=False),
            arg_names=traced.arg_names, result_names=traced.result_names,
            donated_invars=params.donated_invars, kept_var_idx=lowering.kept_var_idx,
            lowering=lowering)
        self._kept_shardings = [self.in_shardings[i] for i in self.kept_var_idx]
        self._repeat = r
        self._select = [ax is not None for ax in traced.out_axes] if r > 1 else None

    # -- calling ---------------------------------------------------------------------
    def call(self, *args: Any) -> list[Array]:
        return self.call_flat(args, check=True)

    __call__ = call

    def call_impls(self, args: Sequence[Any]) -> list[ArrayImpl]:
        return [a._arr for a in self.call_flat(args, check=True)]

    def call_flat(self, args: Sequence[Any], *, check: bool = False) -> list[Array]:
        """Runs on every flat argument (kept or not). ``check=False`` trusts
        that the arguments have the types the program was compiled for (the
        pmap dispatch cache guarantees it)."""
        if check and len(args) != len(self.in_avals):
            raise TypeError(f"{self.name} takes {len(self.in_avals)} arguments, got "
                            f"{len(args)}")
        impls: list[Any] = []
        pending: list[int] = []
        wants = self._kept_shardings
        for pos, i in enumerate(self.kept_var_idx):
            x = args[i]
            if type(x) is Array:
                impl = x._arr
                s = impl._sharding
                want = wants[pos]
                if ((s is want or s == want or s.is_equivalent_to(want, len(impl.aval.shape)))
                        and not impl.is_deleted()
                        and not has_custom_layout(impl)
                        and (not check or self._same_type(i, impl.aval))):
                    impls.append(impl)
                    continue
            impls.append(None)
            pending.append(pos)
        if pending:
            self._place(args, impls, pending)
        outs = self.execute(impls)
        if self._select is not None:
            outs = self._select_replicas(outs)
        arrays = [Array(o) for o in outs]
        if _float_checks.any:
            self._check_results(arrays)
        return arrays

    def _check_results(self, arrays: list[Array]) -> None:
        """debug_nans/debug_infs: a mapped program is not searched equation by
        equation (its collectives need every replica); the error names the
        function and the result."""
        bad = first_bad(arrays)
        if bad is not None and not is_suspended():
            i, kind = bad
            name = self.result_names[i] if i < len(self.result_names) else None
            raise FloatingPointError(
                f"invalid value ({kind}) encountered in {self.name}'s result "
                f"{name or i}")

    def _same_type(self, i: int, aval: Any) -> bool:
        want = self.in_avals[i]
        if aval.shape != want.shape or aval.dtype != want.dtype:
            raise ExecutableCallError(
                f"{self.name}: argument {self._arg_label(i)} has type {aval.str_short()} but "
                f"the program expects {want.str_short()}")
        return True

    def _place(self, args: Sequence[Any], impls: list[Any], pending: list[int]) -> None:
        values, shardings, names = [], [], []
        for pos in pending:
            i = self.kept_var_idx[pos]
            value = self._host_or_device_value(i, args[i])
            if self._repeat > 1 and self.in_axes[i] is not None:
                value = np.repeat(np.asarray(value), self._repeat, axis=self.in_axes[i])
            values.append(value)
            shardings.append(self.in_shardings[i])
            names.append(self.arg_names[i])
        placed = shard_args(values, shardings, arg_names=names, what=self.name)
        for pos, impl in zip(pending, placed):
            impls[pos] = impl

    def _host_or_device_value(self, i: int, x: Any) -> Any:
        """``x`` ready for ``shard_args``: checked, and brought to the host when
        its shards cannot become the program's by moving buffers."""
        impl = x._arr if type(x) is Array else x
        label = f"{self.name}: argument {self._arg_label(i)}"
        if type(impl) is ArrayImplClass:
            if impl.is_deleted():
                raise DeletedArrayError(deleted_message(impl, label))
            self._same_type(i, impl.aval)
            want = self.in_shardings[i]
            if _unstacked(impl._sharding) != _unstacked(want) or self._repeat > 1:
                return Array(impl)._value
            return impl
        try:
            aval = get_aval(x)
        except TypeError as e:
            raise ExecutableCallError(f"{label} is not a valid array: {e}") from e
        self._same_type(i, aval)
        return x

    def _select_replicas(self, outs: list[ArrayImpl]) -> list[ArrayImpl]:
        """Classic layout with nested pmaps: keep one replica per mapped entry."""
        assert self._select is not None
        r = self._repeat
        picked = []
        for impl, mapped, aval, s in zip(outs, self._select, self.array_out_avals,
                                         self.array_out_shardings):
            if not mapped:
                picked.append(impl)
                continue
            shards = list(impl._arrays)[::r]
            picked.append(ArrayImplClass(aval, s, shards, True, _skip_checks=True))
        return picked


def compile_pmap(traced: TracedPmap, lowering: LoweringResult,
                 devices: Sequence[Device]) -> PmapExecutable:
    """Step 3: compile ``lowering`` for ``devices`` (one per replica)."""
    params = traced.params
    start = time.perf_counter()
    loaded = compile_module(lowering.module, devices,
                            BuildOptions(num_replicas=traced.num_replicas, use_shardy=False),
                            name=lowering.module_name, host_callbacks=lowering.host_callbacks)
    log_compilation(f"pmap({params.name})", traced.arg_names, traced.in_avals,
                    time.perf_counter() - start)
    # ``axis_size`` is the share of the mapped axis the caller passes: all of
    # it (the arrays span every replica), or this process's entries when the
    # axis spans several processes (the arrays live on this process's devices).
    mine = tuple(devices) if params.axis_size == params.global_axis_size else \
        addressable(devices)
    layout = PmapLayout(mine, params.axis_size, traced.replication, params.chunked,
                        params.axis_name)
    return PmapExecutable(loaded, traced, lowering, layout, devices)


def devices_for(traced: TracedPmap) -> tuple[Device, ...]:
    """Every replica's device (over all processes), in replica order."""
    params = traced.params
    return choose_devices(params.axis_size * traced.replication, traced.num_processes,
                          params.devices, params.backend, params.name)


def build_executable(fun: WrappedFun, in_avals: Sequence[ShapedArray],
                     params: PmapCallParams,
                     out_axes_thunk: Callable[[], tuple[int | None, ...]]) -> PmapExecutable:
    """Steps 1-3 for the local platform (uncached)."""
    traced = trace_pmap(fun, in_avals, params, out_axes_thunk)
    devices = devices_for(traced)
    lowering = lower_pmap(traced, (backends.lowering_platform(devices[0]),))
    return compile_pmap(traced, lowering, devices)


class _NotInKey:
    """Carries a value through the cache without being part of its key (the
    ``out_axes_thunk``, which is already part of the function's identity)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NotInKey)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "<out_axes_thunk>"


def _cached_build(fun: WrappedFun, in_avals: tuple[ShapedArray, ...], params: PmapCallParams,
                  out_axes: _NotInKey) -> PmapExecutable:
    return build_executable(fun, in_avals, params, out_axes.value)


_cache = lu_cache(_cached_build, max_size=1024)


def pmap_callable(fun: WrappedFun, in_avals: Sequence[ShapedArray], params: PmapCallParams,
                  out_axes_thunk: Callable[[], tuple[int | None, ...]]) -> PmapExecutable:
    """The (cached) executable of ``fun`` for ``in_avals`` and ``params``."""
    return _cache(fun, tuple(in_avals), params, _NotInKey(out_axes_thunk))


def cache_info() -> Any:
    return _cache.cache_info()


def clear_cache() -> None:
    _cache.cache_clear()


# --- the impl rule ------------------------------------------------------------------------
#: The executables the impl rule ran most recently (newest last, cached or
#: not): what a pmap under a transformation compiled to, names included
#: (``recent_executables[-1].lowering.arg_names``).
recent_executables: list[PmapExecutable] = []


class _Capture(threading.local):
    def __init__(self) -> None:
        self.box: list[PmapExecutable] | None = None


_capture = _Capture()


@contextmanager
def capture_executable() -> Iterator[list[PmapExecutable]]:
    """Collects the executable the next (outermost) eager pmap call runs, so
    the API layer can cache it for its dispatch fast path."""
    previous = _capture.box
    box: list[PmapExecutable] = []
    _capture.box = box
    try:
        yield box
    finally:
        _capture.box = previous


#: ``executor(fun, *args, out_axes_thunk=..., **params) -> list[Array]``: runs
#: one ``pmap_p`` application (the impl rule's signature).
PmapExecutor = Callable[..., list[Array]]

#: The executor of pmaps that span the processes of a multi-process run, or
#: None (a single-process run: every pmap runs over this process's devices).
_multiprocess_executor: PmapExecutor | None = None


def set_multiprocess_executor(executor: PmapExecutor | None) -> None:
    """Chooses how pmap runs in a multi-process run: from now on, a ``pmap_p``
    application without explicit ``devices`` runs through ``executor`` when the
    backend spans several processes (``None`` goes back to local-only pmaps).
    ``lamina.distributed.initialize`` sets it, through
    :func:`lamina_interpreters_pxla.multihost_pmap.install`."""
    global _multiprocess_executor
    _multiprocess_executor = executor


def spans_processes(params: dict[str, Any]) -> bool:
    """True when a ``pmap_p`` application with ``params`` maps over every
    process's devices (no explicit ``devices``, a multi-process backend)."""
    return params.get("devices") is None and backends.process_count(params.get("backend")) > 1


def _pmap_impl(fun: WrappedFun, *args: Any, out_axes_thunk: Callable[[], Any],
               **params: Any) -> list[Array]:
    """``pmap_p``'s impl: the multi-process executor when one is set and the
    call spans processes (see :func:`set_multiprocess_executor`), else
    :func:`run_local_pmap`."""
    executor = _multiprocess_executor
    if executor is not None and spans_processes(params):
        return executor(fun, *args, out_axes_thunk=out_axes_thunk, **params)
    return run_local_pmap(fun, *args, out_axes_thunk=out_axes_thunk, **params)


def run_local_pmap(fun: WrappedFun, *args: Any, out_axes_thunk: Callable[[], Any],
                   **params: Any) -> list[Array]:
    """Runs one ``pmap_p`` application over this process's devices (cached
    per function, argument types and params)."""
    call_params = PmapCallParams(**params)
    box, _capture.box = _capture.box, None
    try:
        exe = pmap_callable(fun, [get_aval(x) for x in args], call_params, out_axes_thunk)
    finally:
        _capture.box = box
    if box is not None:
        box.append(exe)
    recent_executables.append(exe)
    del recent_executables[:-_RECENT]
    return exe.call_flat(args)


pmap_p.def_impl(_pmap_impl)
