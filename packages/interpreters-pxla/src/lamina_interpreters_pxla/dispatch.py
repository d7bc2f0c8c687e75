"""Eager, op-by-op execution of primitives.

Outside every transformation, ``bind`` ends in the EvalTrace, which calls
``primitives.impl_rules[prim]``, or for a primitive without an impl rule of its
own the one default impl. This module makes :func:`apply_primitive` that
default when it is imported (``primitives.set_default_impl``); primitives
with an impl of their own (pmap, ``device_put``) keep it. Applying a primitive
lowers a one-equation jaxpr for the argument
types through ``lamina_mlir_lowering.lower_jaxpr_to_module``, compiles it and
runs it; the compiled program is cached by (primitive, params, argument
types, placement), so the second call with the same signature only pays for
the call itself: one dictionary lookup, the arguments' buffers (scalar
constants such as the ``1`` of ``x + 1`` keep a device buffer per value) and
jaxlib's ``execute_sharded`` with prebuilt result handlers. The primitives
handled here check their own inputs (``checks_inputs=True``): a compile runs
the abstract-evaluation rule and a cache hit has the same types and params,
so the eval trace need not check the inputs again.

Placement follows JAX: arguments committed to a device (``device_put`` with a
device or sharding, results of committed computations) decide where the
computation runs, and committed arguments on different devices are an error;
otherwise it runs on the default device and its results stay uncommitted.
Arguments sharded over several devices run as one SPMD program over their
mesh, and results keep XLA's chosen sharding (as a ``NamedSharding`` over the
same mesh when one describes it).

A primitive defined later needs nothing more than its abstract-evaluation
and lowering rules to run eagerly.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import ArrayImpl, Device, JaxRuntimeError
from lamina_interpreters_pxla.array import (
    Array,
    DeletedArrayError,
    deleted_message,
    place_host_value,
)
from lamina_interpreters_pxla import backends
from lamina_interpreters_pxla.backends import default_device, lowering_platform
from lamina_interpreters_pxla import buffer_use
from lamina_interpreters_pxla.compiler import log_compilation
from lamina_interpreters_pxla.donation import deleted_argument_error
from lamina_interpreters_pxla.execution_guard import check_execution_allowed
from lamina_interpreters_pxla.execution_guard import state as _execution_guard
from lamina_interpreters_pxla.executable import (
    BuildOptions,
    Executable,
    compile_module,
    output_shardings_of,
    runtime_error,
)
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_interpreters_pxla.memory_kinds import output_memory_kinds, program_memory_kinds
from lamina_interpreters_pxla.float_checks import first_bad, is_suspended
from lamina_interpreters_pxla.layouts import _custom_layouts
from lamina_interpreters_pxla.monitoring import (
    BACKEND_COMPILE_EVENT,
    JAXPR_TO_MLIR_MODULE_EVENT,
    timed_event,
)
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    NamedSharding,
    context_mesh_state,
    is_sharding,
    named_sharding_from_hlo,
    named_sharding_of_type,
    single_device_sharding,
)
from lamina_interpreters_pxla.transfer import put_host_value, shard_args
from lamina_tracing_core import core, dtypes, primitives
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.memory import spaces_used
from lamina_mlir_lowering.sharding import UNSPECIFIED
from lamina_tracing_core.avals import ShapedArray, get_aval, has_no_value
from lamina_tracing_core.base_primitives import convert_element_type_p
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprDebugInfo, JaxprEqn, Var
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.source_info import SourceInfo, current_source_info

_PYTHON_SCALARS = (bool, int, float, complex)


class EagerDispatchError(ValueError):
    """A primitive cannot run eagerly on these arguments (e.g. incompatible devices)."""


# --- the compiled-call cache ------------------------------------------------------------
# How each argument of a cached entry reaches the program. The cache key fixes
# every argument's kind (an Array with its aval, sharding and committed flag, a
# host scalar's type, a numpy array's shape and dtype), so the entry decides
# once, when it is built, what a call has to do for each position.
_IN_PLACE = 0   # an Array already on the program's sharding: passed as is
_MOVE = 1       # an Array that must move first (shard_args)
_SCALAR = 2     # a Python/numpy scalar or 0-d array: a cached device buffer
_HOST = 3       # a numpy array: put on the device on every call (it may change)


class _ArgPlan:
    """How one argument reaches the program: as is, moved, or put from the host."""

    __slots__ = ("sharding", "move")

    def __init__(self, sharding: Any, move: bool):
        self.sharding = sharding
        self.move = move


def _arg_kind(x: Any, plan: _ArgPlan) -> int:
    if type(x) is Array:
        return _MOVE if plan.move else _IN_PLACE
    if type(x) in _PYTHON_SCALARS or np.ndim(x) == 0:
        return _SCALAR
    return _HOST


class _Entry:
    """One compiled primitive application (per argument signature), ready to
    call: the result handlers are built, and what each argument needs was
    decided from the signature, which the cache key guarantees."""

    __slots__ = ("name", "executable", "loaded", "handlers", "plans", "kinds", "shardings",
                 "simple", "scalars", "multiple_results", "keepalive")

    def __init__(self, prim: Primitive, executable: Executable, plans: list[_ArgPlan],
                 kinds: list[int], keepalive: Any):
        self.name = prim.name
        self.executable = executable
        self.loaded = executable.loaded
        self.handlers = executable._handlers
        self.plans = plans
        self.kinds = tuple(kinds)
        self.shardings = tuple(p.sharding for p in plans)
        #: every argument is an Array in place or a scalar: the fast path
        self.simple = all(k in (_IN_PLACE, _SCALAR) for k in kinds)
        #: per argument position: the device buffers of the scalars seen there
        self.scalars: list[dict[Any, ArrayImpl]] = [{} for _ in kinds]
        self.multiple_results = prim.multiple_results
        self.keepalive = keepalive  # objects whose id() is part of the cache key

    def run(self, args: Sequence[Any]) -> Any:
        impls: list[ArrayImpl] | None = None
        if self.simple and not _custom_layouts:
            impls = []
            for i, kind in enumerate(self.kinds):
                x = args[i]
                if kind == _IN_PLACE:
                    impls.append(x._arr)
                else:
                    impls.append(self._scalar(i, x))
        else:
            impls = self._prepare(args)
        name = self.name
        if _execution_guard.disallowed:  # an attribute read: this runs for every eager op
            check_execution_allowed(f"jit({name})")
        # checks deletion too, atomically with another thread's delete
        buffer_use.using(impls, lambda i: f"{name}: argument {i}")
        try:
            results = self.loaded.execute_sharded(impls)
        except JaxRuntimeError as e:
            # a donation by jaxlib's C++ path, which lamina does not see
            raise (deleted_argument_error(impls, lambda i: f"{name}: argument {i}")
                   or runtime_error(self.executable, e)) from e
        finally:
            buffer_use.done_using(impls)
        outs = results.consume_with_handlers(self.handlers)
        if _float_checks.any:
            _check_results(self.name, [Array(o) for o in outs])
        if self.multiple_results:
            return [Array(o) for o in outs]
        return Array(outs[0])

    def _scalar(self, i: int, x: Any) -> ArrayImpl:
        """A device buffer holding scalar ``x`` (argument ``i``): eager code
        mixes arrays with the same few constants (``x + 1``); device data is
        immutable and eager programs never donate, so one buffer serves every
        call with that value."""
        cache = self.scalars[i]
        t = type(x)
        if t is np.ndarray:
            key: Any = (x.dtype, x.tobytes())
        elif t is float:
            key = x.hex()  # tells 0.0 from -0.0, keys NaNs
        elif t is complex:
            key = (x.real.hex(), x.imag.hex())
        elif t is int or t is bool:
            key = (t, x)
        else:  # numpy scalars, 0-d array-likes
            value = np.asarray(x)
            key = (t, value.dtype, value.tobytes())
        impl = cache.get(key)
        if impl is None or impl.is_deleted():
            impl = put_host_value(x, self.shardings[i], committed=False, what=self.name,
                                  name=str(i))
            if len(cache) >= _SCALARS_PER_ARGUMENT:
                cache.clear()
            cache[key] = impl
        return impl

    def _prepare(self, args: Sequence[Any]) -> list[ArrayImpl]:
        """The program's arguments for any mix of kinds (the general path)."""
        impls: list[ArrayImpl] = []
        moves: list[int] = []
        name = self.name
        for i, (x, kind, plan) in enumerate(zip(args, self.kinds, self.plans)):
            if kind == _SCALAR:
                impls.append(self._scalar(i, x))
                continue
            if kind == _HOST:
                impls.append(put_host_value(x, plan.sharding, committed=False,
                                            what=name, name=str(i)))
                continue
            impl = x._arr
            if impl.is_deleted():
                raise DeletedArrayError(deleted_message(impl, f"{name}: argument {i}"))
            if kind == _MOVE or id(impl) in _custom_layouts:
                moves.append(i)
            impls.append(impl)
        if moves:
            placed = shard_args([impls[i] for i in moves], [self.plans[i].sharding
                                                          for i in moves],
                                committed=[False] * len(moves), what=name,
                                arg_names=[str(i) for i in moves])
            for i, impl in zip(moves, placed):
                impls[i] = impl
        return impls


def _check_results(name: str, outs: Sequence[Any]) -> None:
    """debug_nans/debug_infs for one eager primitive: the error names it and
    the user's line that applied it."""
    if is_suspended():
        return
    bad = first_bad(outs)
    if bad is not None:
        raise FloatingPointError(f"invalid value ({bad[1]}) encountered in {name} at "
                                 f"{current_source_info()}")


#: distinct scalar values cached per argument position of an entry
_SCALARS_PER_ARGUMENT = 64


_CACHE_SIZE = 4096
_cache: collections.OrderedDict[Hashable, _Entry] = collections.OrderedDict()
_cache_lock = threading.Lock()
cache_stats = {"hits": 0, "misses": 0}


def cache_info() -> dict[str, int]:
    """Hits and misses of the eager compile cache, and its size."""
    return {**cache_stats, "size": len(_cache)}


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


# --- keys ------------------------------------------------------------------------------
def _arg_key(x: Any) -> Hashable:
    t = type(x)
    if t is Array:
        key: tuple[Any, ...] | None = x._dispatch_key
        if key is None:
            impl = x._arr
            key = x._dispatch_key = (impl.aval, impl._sharding, impl._committed)
        return key
    if t in _PYTHON_SCALARS:
        return (t,)
    if t is np.ndarray:
        return (x.shape, x.dtype)
    if isinstance(x, np.generic):
        return (t, x.dtype)
    return None  # anything else: no fast path


def _hashable(value: Any, keepalive: list[Any]) -> Hashable:
    """A hashable stand-in for a param value (lists, dicts, arrays...)."""
    try:
        hash(value)
        return value  # type: ignore[no-any-return]
    except TypeError:
        pass
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_hashable(v, keepalive) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _hashable(v, keepalive)) for k, v in sorted(value.items())))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, value.dtype.str, value.tobytes())
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(_hashable(v, keepalive) for v in value))
    keepalive.append(value)
    return ("id", id(value))


def _params_key(params: dict[str, Any], keepalive: list[Any]) -> Hashable:
    return tuple((k, _hashable(v, keepalive)) for k, v in params.items())


# --- applying a primitive ------------------------------------------------------------
def apply_primitive(prim: Primitive, *args: Any, **params: Any) -> Any:
    """Runs ``prim`` on concrete ``args`` (the default eager impl: every
    primitive without an impl rule of its own runs through it).

    A call whose signature was seen before costs one dictionary lookup plus
    the program call: the key holds the primitive, its params, the x64 mode,
    the device a ``default_device`` scope chooses, and per argument its type,
    shape and dtype (and for Arrays the sharding and committed flag), which is
    everything the abstract-evaluation check, the placement and the compiled
    program depend on.
    """
    parts: list[Any] = [prim, tuple(params.items()), _x64.enabled, _default.device,
                        _context.mesh]
    k: Hashable
    for x in args:
        if type(x) is Array:
            k = x._dispatch_key
            if k is None:
                impl = x._arr
                k = x._dispatch_key = (impl.aval, impl._sharding, impl._committed)
        else:
            k = _arg_key(x)
            if k is None:  # not an array type the cache knows: no fast path
                return _lookup_or_build(None, prim, args, params, [])
        parts.append(k)
    key = tuple(parts)
    try:
        entry = _cache.get(key)
    except TypeError:  # unhashable params: key them by a hashable stand-in
        keepalive: list[Any] = []
        parts[1] = _params_key(params, keepalive)
        return _lookup_or_build(tuple(parts), prim, args, params, keepalive)
    if entry is None:
        return _lookup_or_build(key, prim, args, params, [])
    cache_stats["hits"] += 1
    return entry.run(args)


_x64 = dtypes.x64_state
_default = backends._default_device_state
_context = context_mesh_state


def _lookup_or_build(key: Hashable | None, prim: Primitive, args: Sequence[Any],
                     params: dict[str, Any], keepalive: list[Any]) -> Any:
    entry = _cache.get(key) if key is not None else None
    if entry is not None:
        cache_stats["hits"] += 1
        return entry.run(args)
    cache_stats["misses"] += 1
    entry = _build_entry(prim, args, params, keepalive)
    if key is not None:
        with _cache_lock:
            _cache[key] = entry
            if len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return entry.run(args)


def _operand_aval(prim: Primitive, i: int, x: Any) -> ShapedArray:
    if type(x) is Array:
        x._check_if_deleted(f"{prim.name}: argument {i}")
        return x.aval
    try:
        aval = get_aval(x)
    except TypeError as e:
        raise TypeError(f"{prim.name}: argument {i} ({type(x).__name__}) is not a valid "
                        f"lamina array: {e}") from e
    if has_no_value(x):  # a ShapeDtypeStruct: JAX's wording, which code matches on
        raise TypeError(f"Argument '{prim.name}: argument {i}' of shape {aval.str_long()} of "
                        f"type {type(x)} is not a valid JAX type.")
    if not dtypes.is_valid_array_dtype(aval.dtype):
        raise TypeError(f"{prim.name}: argument {i} has dtype {aval.dtype}, which is not a "
                        "valid lamina array type")
    return aval


def _build_entry(prim: Primitive, args: Sequence[Any], params: dict[str, Any],
                 keepalive: list[Any]) -> _Entry:
    in_avals = [_operand_aval(prim, i, x) for i, x in enumerate(args)]
    out_avals = primitives.abstract_eval(prim, in_avals, params)
    if sit.any_sharded(in_avals):
        out_avals = _sharded_result_types(prim, in_avals, out_avals, params)
    placement = _placement(prim, args)
    closed = _one_equation_jaxpr(prim, in_avals, out_avals, params)
    executable = _compile(prim, closed, in_avals, out_avals, placement)
    kinds = [_arg_kind(x, plan) for x, plan in zip(args, placement.plans)]
    return _Entry(prim, executable, placement.plans, kinds, keepalive)


class _Placement:
    """Where an eager computation runs and how each argument gets there."""

    __slots__ = ("devices", "plans", "in_shardings", "committed", "mesh_sharding")

    def __init__(self, devices: list[Device], plans: list[_ArgPlan], in_shardings: list[Any],
                 committed: bool, mesh_sharding: Any):
        self.devices = devices
        self.plans = plans
        self.in_shardings = in_shardings
        self.committed = committed
        self.mesh_sharding = mesh_sharding


def _placement(prim: Primitive, args: Sequence[Any]) -> _Placement:
    committed = [(i, x.sharding) for i, x in enumerate(args)
                 if type(x) is Array and x.committed]
    multi = [(i, s) for i, s in committed if s.num_devices > 1]
    mesh = _context.mesh
    if mesh is not None:
        lead = next((s for _, s in multi if isinstance(s, NamedSharding) and s.mesh == mesh),
                    NamedSharding(mesh, ()))
        return _spmd_placement(prim, args, committed, lead, "jit's context mesh")
    if multi:
        lead = next((s for _, s in multi if isinstance(s, NamedSharding)), multi[0][1])
        return _spmd_placement(prim, args, committed, lead, f"argument {multi[0][0]}")
    if committed:
        devices = {s._device_assignment[0] for _, s in committed}
        if len(devices) > 1:
            where = ", ".join(f"argument {i} on {s._device_assignment[0]}" for i, s in committed)
            raise EagerDispatchError(
                f"{prim.name}: received incompatible devices for committed arguments: {where}. "
                "device_put them onto one device first")
        device = committed[0][1]._device_assignment[0]
    else:
        device = default_device()
    sharding = single_device_sharding(device)
    shardings = [_in_own_memory(x, sharding) for x in args] if spaces_used[0] else \
        [sharding] * len(args)
    plans = [_ArgPlan(s, _needs_move(x, s)) for x, s in zip(args, shardings)]
    return _Placement([device], plans, shardings, bool(committed), None)


def _in_own_memory(x: Any, sharding: Any) -> Any:
    """``sharding`` in the memory an Array argument ``x`` is in: an eager
    operation reads a host array where it is (its result follows it there)."""
    if type(x) is not Array:
        return sharding
    kind = x._arr._sharding.memory_kind
    return sharding if kind == sharding.memory_kind else sharding.with_memory_kind(kind)


def _needs_move(x: Any, sharding: Any) -> bool:
    if type(x) is not Array:
        return False
    current = x._arr._sharding
    return not (current is sharding or current == sharding
                or (is_sharding(current) and current.is_equivalent_to(sharding, x.ndim)))


def _spmd_placement(prim: Primitive, args: Sequence[Any], committed: list[tuple[int, Any]],
                    lead: Any, lead_name: str) -> _Placement:
    """One SPMD program over ``lead``'s devices (``lead_name`` says whose
    they are); committed arguments elsewhere are an error."""
    devices = list(lead._device_assignment)
    for i, s in committed:
        if list(s._device_assignment) != devices:
            platform = str(devices[0].platform).upper()
            raise EagerDispatchError(
                "Received incompatible devices for jitted computation. Got argument "
                f"{i} of {prim.name} with shape {args[i].aval.str_short()} and with device ids "
                f"{[d.id for d in s._device_assignment]} on platform {platform} and "
                f"{lead_name} with device ids {[d.id for d in devices]} on platform {platform}")
    if isinstance(lead, NamedSharding):
        replicated: Any = NamedSharding(lead.mesh, (), memory_kind=lead.memory_kind)
    else:
        replicated = GSPMDSharding.get_replicated(devices)
    plans, in_shardings = [], []
    for x in args:
        sharding = replicated
        if type(x) is Array and x.committed:
            sharding = _on_lead_mesh(x.sharding, lead, x.ndim, replicated)
        plans.append(_ArgPlan(sharding, _needs_move(x, sharding)))
        in_shardings.append(sharding)
    return _Placement(devices, plans, in_shardings, True, lead)


def _on_lead_mesh(sharding: Any, lead: Any, ndim: int, replicated: Any) -> Any:
    """``sharding`` if it can be written over ``lead``'s mesh, an equivalent
    NamedSharding if one exists, else replicated (the argument is moved)."""
    if sharding is lead or not isinstance(lead, NamedSharding):
        same_mesh = sharding.to_sharding_spec(ndim, lead._device_assignment).mesh == \
            lead.to_sharding_spec(ndim, lead._device_assignment).mesh
        return sharding if same_mesh else replicated
    if isinstance(sharding, NamedSharding) and sharding.mesh == lead.mesh:
        return sharding
    named = named_sharding_from_hlo(lead.mesh, sharding._to_xla_hlo_sharding(ndim), ndim)
    return named if named is not None else replicated


def _sharded_result_types(prim: Primitive, in_avals: list[ShapedArray],
                          out_avals: list[ShapedArray], params: dict[str, Any]
                          ) -> list[ShapedArray]:
    """``out_avals`` with the shardings ``prim``'s sharding rule gives operands
    whose types are sharded over Explicit axes, as under jit (an eager op is
    a one-equation jit in JAX); an ambiguous result is a ``ShardingTypeError``
    naming the primitive, its operands and the user's line."""
    try:
        typed = sit.apply_rule(prim, in_avals,
                               out_avals if prim.multiple_results else out_avals[0], params)
    except sit.ShardingTypeError as e:
        operands = ", ".join(f"{a.str_short()} (argument {i})" for i, a in enumerate(in_avals))
        raise sit.ShardingTypeError(f"{e}\nThe operands of {prim.name} are {operands}, "
                                    f"at {current_source_info()}") from None
    return list(typed) if prim.multiple_results else [typed]


def _one_equation_jaxpr(prim: Primitive, in_avals: list[ShapedArray],
                        out_avals: list[ShapedArray], params: dict[str, Any]) -> ClosedJaxpr:
    invars = [Var(a) for a in in_avals]
    outvars = [Var(a) for a in out_avals]
    effects = core.eqn_effects(prim, params)
    eqn = JaxprEqn(list(invars), list(outvars), prim, dict(params), effects, SourceInfo(None))
    dbg = JaxprDebugInfo("jit", prim.name, tuple(f"args[{i}]" for i in range(len(invars))),
                         tuple("result" if len(outvars) == 1 else f"result[{i}]"
                               for i in range(len(outvars))))
    jaxpr = Jaxpr([], list(invars), list(outvars), [eqn], effects, dbg)
    return ClosedJaxpr(jaxpr, [])


def _compile(prim: Primitive, closed: ClosedJaxpr, in_avals: list[ShapedArray],
             out_avals: list[ShapedArray], placement: _Placement) -> Executable:
    devices = placement.devices
    n = len(devices)
    platform = lowering_platform(devices[0])
    arg_specs = result_specs = None
    if n > 1:
        arg_specs = [s.to_sharding_spec(a.ndim, devices)
                     for s, a in zip(placement.in_shardings, in_avals)]
        typed = [named_sharding_of_type(a.sharding) for a in out_avals]
        result_specs = [None if s is None else s.to_sharding_spec(a.ndim, devices)
                        for s, a in zip(typed, out_avals)]
    # Imported here: the lowering stack loads MLIR's dialects, which a process
    # running only stored programs (the persistent caches) never needs.
    from lamina_mlir_lowering.lowering import lower_jaxpr_to_module

    kinds = program_memory_kinds(closed, placement.in_shardings,
                                 [UNSPECIFIED] * len(out_avals))
    with timed_event(JAXPR_TO_MLIR_MODULE_EVENT, f"jit({prim.name})"):
        lowering = lower_jaxpr_to_module(
            f"jit_{prim.name}", closed, platforms=(platform,), arg_shardings=arg_specs,
            result_shardings=result_specs, num_partitions=n,
            arg_memory_kinds=None if kinds is None else kinds.args,
            result_memory_kinds=None if kinds is None else kinds.results)
    options = BuildOptions(num_partitions=n)
    start = time.perf_counter()
    with timed_event(BACKEND_COMPILE_EVENT, f"jit({prim.name})"):
        loaded = compile_module(lowering.module, devices, options, name=f"jit_{prim.name}",
                                host_callbacks=lowering.host_callbacks)
    log_compilation(prim.name, lowering.arg_names, in_avals, time.perf_counter() - start)
    out_shardings = _output_shardings(loaded, devices, out_avals, placement)
    if kinds is not None:  # in the memory the executable put them in
        out_shardings = [s if k is None or s.memory_kind == k else s.with_memory_kind(k)
                         for s, k in zip(out_shardings, output_memory_kinds(loaded,
                                                                            len(out_avals)))]
    return Executable(loaded, name=prim.name, in_avals=in_avals, out_avals=out_avals,
                      in_shardings=placement.in_shardings, out_shardings=out_shardings,
                      devices=devices, options=options,
                      out_committed=[placement.committed] * len(out_avals),
                      arg_names=list(closed.jaxpr.debug_info.arg_names)
                      if closed.jaxpr.debug_info else None, lowering=lowering)


def _output_shardings(loaded: Any, devices: list[Device], out_avals: list[ShapedArray],
                      placement: _Placement) -> list[Any]:
    if len(devices) == 1:
        return [single_device_sharding(devices[0])] * len(out_avals)
    chosen = output_shardings_of(loaded, devices, len(out_avals))
    lead = placement.mesh_sharding
    if not isinstance(lead, NamedSharding):
        return chosen
    all_explicit = lead.mesh.abstract_mesh.are_all_axes_explicit
    out = []
    for s, aval in zip(chosen, out_avals):
        # over Explicit axes the type says the layout, with JAX's spec form
        named = named_sharding_of_type(aval.sharding)
        if named is None and all_explicit and aval.sharding is None:
            named = NamedSharding(lead.mesh, (None,) * aval.ndim)
        if named is None or named.mesh != lead.mesh:
            named = named_sharding_from_hlo(lead.mesh, s._to_xla_hlo_sharding(aval.ndim),
                                            aval.ndim)
        out.append(named if named is not None else s)
    return out


# --- the default impl ------------------------------------------------------------------
primitives.set_default_impl(apply_primitive, checks_inputs=True)


def _convert_element_type_impl(operand: Any, *, new_dtype: Any, weak_type: bool,
                               sharding: Any) -> Any:
    """A host array converted to its own dtype is a plain transfer (this is how
    ``lamina.numpy.array``/``asarray`` place host data), not a compiled program
    per shape; every other conversion is the default impl's."""
    if type(operand) is np.ndarray and sharding is None and operand.dtype == new_dtype:
        mesh = _context.mesh
        if mesh is not None:  # JAX: committed, replicated over set_mesh's mesh
            return place_host_value(operand, NamedSharding(mesh, ()), weak_type=weak_type,
                                    committed=True)
        return place_host_value(operand, None, weak_type=weak_type, committed=False)
    return apply_primitive(convert_element_type_p, operand, new_dtype=new_dtype,
                           weak_type=weak_type, sharding=sharding)


convert_element_type_p.def_impl(_convert_element_type_impl)
core.impls_checking_inputs.add(convert_element_type_p)
