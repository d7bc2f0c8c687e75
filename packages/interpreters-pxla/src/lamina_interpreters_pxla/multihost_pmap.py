"""``pmap`` across the processes of a multi-process run.

JAX's multi-process ``pmap`` maps over every process's devices at once: each
process passes arrays whose mapped axis has its *local* size (one entry per
local device), the program runs as ``local size x processes`` replicas over
all devices (grouped by process), collectives (``psum``, ``all_gather``,
``axis_index``...) span every replica, and each process gets back arrays of
its local size.

:func:`install` makes :func:`multiprocess_pmap_impl` pmap's multi-process
executor (``lamina.distributed.initialize`` calls it), through the selection
point of :func:`~lamina_interpreters_pxla.pmap_execution.set_multiprocess_executor`:
in a run of several processes (and no explicit ``devices=``) pmap's impl
hands the call to it, and it traces the function for the
global axis size with pmap's own :func:`~lamina_interpreters_pxla.pmap_execution.trace_pmap`,
lowers and compiles it over the global devices with ``lower_pmap`` and
``compile_pmap``, and wraps that executable so that it takes and gives
process-local arrays: a local argument's buffers are re-wrapped as the global
array's addressable shards (no copy), and a global result's addressable
buffers are re-wrapped as the local result (as JAX does). Every other pmap
runs over the local devices as in a single-process run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla._jaxlib import ArrayImpl, ArrayImplClass, Device
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.multihost import GlobalArrayError, process_major_devices
from lamina_interpreters_pxla.pmap_execution import (
    PmapCallParams,
    PmapExecutable,
    compile_pmap,
    lower_pmap,
    set_multiprocess_executor,
    trace_pmap,
)
from lamina_interpreters_pxla.pmap_shardings import PmapLayout
from lamina_interpreters_pxla.sharding import is_sharding
from lamina_interpreters_pxla.transfer import shard_args
from lamina_linear_util.cache import cache as lu_cache
from lamina_linear_util.linear_util import WrappedFun
from lamina_tracing_core.avals import ShapedArray, get_aval

__all__ = ["MultiprocessPmapExecutable", "install", "multiprocess_pmap_impl",
           "global_pmap_devices"]


class MultiprocessPmapError(ValueError):
    """A pmap that cannot run across the processes of the run."""


def global_pmap_devices(local_size: int, backend: str | None, name: str) -> tuple[Device, ...]:
    """The first ``local_size`` devices of each process, process 0's first."""
    try:
        return tuple(process_major_devices(local_size, backend))
    except GlobalArrayError as e:
        raise MultiprocessPmapError(
            f"pmap of {name}: the mapped axis has size {local_size} in this process, but a "
            f"multi-process pmap maps one entry per local device in every process ({e})"
        ) from None


class MultiprocessPmapExecutable:
    """A pmap executable over every process's devices, called with and returning
    process-local arrays (see the module docstring)."""

    def __init__(self, inner: PmapExecutable, local_layout: PmapLayout,
                 local_in_avals: Sequence[ShapedArray], local_out_avals: Sequence[ShapedArray]):
        self.inner = inner
        self.name = inner.name
        self.local_layout = local_layout
        self.local_in_avals = list(local_in_avals)
        self.local_out_avals = list(local_out_avals)
        self._local_in = [local_layout.program_sharding(ax, a.ndim)
                          for ax, a in zip(inner.in_axes, self.local_in_avals)]
        self._local_out = [local_layout.array_sharding(ax, a.ndim)
                           for ax, a in zip(inner.out_axes, self.local_out_avals)]

    def call_flat(self, args: Sequence[Any], *, check: bool = False) -> list[Array]:
        """Runs on every flat argument (process-local values); returns local Arrays."""
        if len(args) != len(self.local_in_avals):
            raise TypeError(f"{self.name} takes {len(self.local_in_avals)} arguments, got "
                            f"{len(args)}")
        outs = self.inner.call_flat(self._globalize(args), check=check)
        return [Array(self._localize(j, out._arr)) for j, out in enumerate(outs)]

    call = call_flat

    def __call__(self, *args: Any) -> list[Array]:
        return self.call_flat(args, check=True)

    def _globalize(self, args: Sequence[Any]) -> list[Any]:
        """Each kept argument as a global array whose addressable shards are its
        local shards (placed on the local devices first where needed)."""
        out: list[Any] = list(args)
        kept = self.inner.kept_var_idx
        pending = [i for i in kept if not self._in_place(i, args[i])]
        if pending:
            placed = shard_args([args[i] for i in pending], [self._local_in[i] for i in pending],
                                arg_names=[self.inner.arg_names[i] for i in pending],
                                what=self.name)
            for i, impl in zip(pending, placed):
                out[i] = impl
        for i in kept:
            x = out[i]
            impl = x._arr if type(x) is Array else x
            if not self._is_global(i, impl):
                out[i] = Array(impl._rewrap_with_aval_and_sharding(self.inner.in_avals[i],
                                                                   self.inner.in_shardings[i]))
        return out

    def _is_global(self, i: int, impl: ArrayImpl) -> bool:
        """True for a global array already laid out as the program takes it."""
        return bool(type(impl) is ArrayImplClass and not impl._sharding.is_fully_addressable
                    and tuple(impl.aval.shape) == tuple(self.inner.in_avals[i].shape)
                    and impl._sharding == self.inner.in_shardings[i])

    def _in_place(self, i: int, x: Any) -> bool:
        impl = x._arr if type(x) is Array else x
        if type(impl) is not ArrayImplClass or impl.is_deleted():
            return False
        if self._is_global(i, impl):
            return True
        aval, want = impl.aval, self.local_in_avals[i]
        if tuple(aval.shape) != tuple(want.shape) or aval.dtype != want.dtype:
            raise MultiprocessPmapError(
                f"{self.name}: argument {self.inner.arg_names[i] or i} has type "
                f"{aval.str_short()} but this process's share is {want.str_short()}")
        sharding = impl._sharding
        local = self._local_in[i]
        return bool(sharding is local or sharding == local
                    or (is_sharding(sharding)
                        and sharding.is_equivalent_to(local, len(aval.shape))))

    def _localize(self, j: int, impl: ArrayImpl) -> ArrayImpl:
        # The same buffers (this process's shards) under the local type and
        # sharding; re-wrapping does not touch ``_arrays``, whose per-shard
        # objects cost an import attempt of jax per call inside jaxlib.
        out: ArrayImpl = impl._rewrap_with_aval_and_sharding(self.local_out_avals[j],
                                                             self._local_out[j])
        return out

    def __repr__(self) -> str:
        return (f"MultiprocessPmapExecutable({self.name}, "
                f"{len(self.inner.devices)} devices over {backends.process_count()} processes)")


def _with_axis_size(aval: ShapedArray, axis: int | None, size: int) -> ShapedArray:
    if axis is None:
        return aval
    return aval.update(shape=aval.shape[:axis] + (size,) + aval.shape[axis + 1:])


def build_multiprocess_executable(fun: WrappedFun, local_in_avals: Sequence[ShapedArray],
                                  params: PmapCallParams,
                                  out_axes_thunk: Callable[[], tuple[int | None, ...]]
                                  ) -> MultiprocessPmapExecutable:
    """Traces, lowers and compiles ``fun`` for every process's devices."""
    local_size = params.axis_size
    devices = global_pmap_devices(local_size, params.backend, params.name)
    global_size = len(devices)
    global_params = dataclasses.replace(params, axis_size=global_size,
                                        global_axis_size=global_size)
    global_in = [_with_axis_size(a, ax, global_size)
                 for a, ax in zip(local_in_avals, params.in_axes)]
    traced = trace_pmap(fun, global_in, global_params, out_axes_thunk)
    if traced.replication != 1:
        raise MultiprocessPmapError(
            f"pmap of {params.name}: nested pmaps are not supported across processes")
    lowering = lower_pmap(traced, (backends.lowering_platform(devices[0]),))
    inner = compile_pmap(traced, lowering, devices)
    me = backends.process_index(params.backend)
    local_devices = tuple(d for d in devices if d.process_index == me)
    layout = PmapLayout(local_devices, local_size, 1, params.chunked, params.axis_name)
    local_out = [_with_axis_size(a, ax, local_size)
                 for a, ax in zip(traced.out_avals, traced.out_axes)]
    return MultiprocessPmapExecutable(inner, layout, local_in_avals, local_out)


class _Carried:
    """A value carried through the cache without being part of its key."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Carried)

    def __hash__(self) -> int:
        return 0


def _cached_build(fun: WrappedFun, in_avals: tuple[ShapedArray, ...], params: PmapCallParams,
                  out_axes: _Carried) -> MultiprocessPmapExecutable:
    return build_multiprocess_executable(fun, in_avals, params, out_axes.value)


_cache = lu_cache(_cached_build, max_size=1024)


def multiprocess_pmap_impl(fun: WrappedFun, *args: Any, out_axes_thunk: Callable[[], Any],
                           **params: Any) -> list[Array]:
    """Runs a ``pmap_p`` application that spans the processes of the run (see
    the module docstring); pmap's impl calls it once :func:`install` ran."""
    call_params = PmapCallParams(**params)
    exe = _cache(fun, tuple(get_aval(x) for x in args), call_params,
                 _Carried(out_axes_thunk))
    return exe.call_flat(args)


def install() -> None:
    """Makes :func:`multiprocess_pmap_impl` pmap's executor for calls that span
    processes (idempotent; calls within one process keep the local path)."""
    set_multiprocess_executor(multiprocess_pmap_impl)
