"""Lowering, compiling and running a ``pjit_p`` call (the eager impl rule).

A *program* is one jaxpr with its shardings lowered for one device
assignment. :func:`lower_program` decides the devices (from the explicit
shardings, the shardings of committed arguments, and those of nested jits and
``with_sharding_constraint``s), expresses every sharding over one mesh and
calls ``lower_jaxpr_to_module``; :func:`compile_program` compiles the module
through the runtime's compile cache and wraps it in the runtime's
``Executable`` with every argument's and result's name, type and sharding.
Both are cached (lowering per jaxpr and placement, compilation per lowered
program), so ``pjit_p``'s impl rule costs a dictionary lookup plus the call
after the first time.

The results' shardings are the requested ones, or what XLA chose (read from
the executable, as a ``NamedSharding`` over the program's mesh when one
describes it). Results are committed when any sharding was explicit or any
argument was committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lamina_interpreters_pxla._jaxlib import xc
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.backends import default_device
from lamina_interpreters_pxla.backends import devices as devices_of
from lamina_interpreters_pxla.compiler import (
    log_compilation,
    BuildOptions,
    CompileError,
    compile_module,
    result_handler,
)
from lamina_interpreters_pxla.executable import Executable
from lamina_interpreters_pxla.memory_kinds import output_memory_kinds, program_memory_kinds
from lamina_interpreters_pxla.float_checks import checks as _float_checks
from lamina_interpreters_pxla.float_checks import first_bad, is_suspended
from lamina_interpreters_pxla.monitoring import (
    BACKEND_COMPILE_EVENT,
    JAXPR_TO_MLIR_MODULE_EVENT,
    timed_event,
)
from lamina_interpreters_pxla.sharding import (
    NamedSharding,
    PartitionSpec,
    SingleDeviceSharding,
    context_mesh,
    single_device_sharding,
)
from lamina_linear_util.cache import explain_cache_misses_enabled
from lamina_mlir_lowering.lowering_result import LoweringResult
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.dtypes import float0
from lamina_tracing_core.effects import ordered_effects
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, subjaxprs_of_params
from lamina_tracing_core.shard_map import shard_map_p

from lamina_sharded_jit.arguments import canonical_aval
from lamina_sharded_jit.explain import explain_miss, log_cost
from lamina_sharded_jit.jaxpr_cache import jaxpr_store, memoize_on_jaxpr
from lamina_sharded_jit.nan_search import explain_bad_result
from lamina_sharded_jit.persistent_lowering import lower_through_disk
from lamina_sharded_jit.primitive import pjit_p
from lamina_sharded_jit.settings import sharding_format
from lamina_sharded_jit.sharding_constraint import sharding_constraint_p
from lamina_sharded_jit.shardings import (
    UNSPECIFIED,
    ShardingSource,
    context_mesh_source,
    is_unspecified,
    lowering_sharding_context,
    lowering_specs,
    program_devices,
    shard_label,
    sharding_for_output,
)

__all__ = ["LoweredProgram", "CompiledProgram", "lower_program", "compile_program",
           "lowered_program_of",
           "pjit_call", "placed_shardings", "clear_program_caches", "CrossPlatformError"]


class CrossPlatformError(ValueError):
    """A module lowered for other platforms than this host's was compiled."""


# --- programs ------------------------------------------------------------------------------------
@dataclass(eq=False)
class LoweredProgram:
    """A jaxpr lowered for one placement (see the module docstring).

    It records what it needs of the jaxpr (names and types), not the jaxpr:
    it is kept in the jaxpr's own store (the lowering cache), and a reference
    back would make a cycle, so a dropped function's program (its module and
    executable) would wait for a full collection instead of going with it."""

    lowering: LoweringResult
    fun_name: str
    arg_names: tuple[str | None, ...]
    result_names: tuple[str | None, ...]
    in_avals: list[ShapedArray]
    out_avals: list[ShapedArray]
    devices: tuple[Any, ...]
    mesh: Any
    platforms: tuple[str, ...]
    in_shardings: tuple[Any, ...]       # per jaxpr input: requested or committed, or UNSPECIFIED
    out_shardings: tuple[Any, ...]      # per jaxpr output: requested, or UNSPECIFIED
    donated_invars: tuple[bool, ...]
    committed: bool
    compiler_options_kvs: tuple[tuple[str, Any], ...]
    compiled: CompiledProgram | None = field(default=None, repr=False)


@dataclass(eq=False)
class CompiledProgram:
    """A compiled program and what calling it needs. Its lowered program
    holds it (``LoweredProgram.compiled``), not the other way round: a
    reference back would make a cycle (see :class:`LoweredProgram`)."""

    executable: Executable
    in_shardings: tuple[Any, ...]   # concrete, one per jaxpr input
    out_shardings: tuple[Any, ...]  # concrete, one per output
    handlers: list[Any]

    @property
    def loaded(self) -> Any:
        return self.executable.loaded

    @property
    def kept_var_idx(self) -> tuple[int, ...]:
        return self.executable.kept_var_idx


# --- nested shardings ----------------------------------------------------------------------------
def _nested_sources(jaxpr: ClosedJaxpr | Jaxpr) -> tuple[ShardingSource, ...]:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    out: list[ShardingSource] = []
    for eqn in inner.eqns:
        if eqn.primitive is pjit_p:
            name = eqn.params["name"]
            for i, (s, v) in enumerate(zip(eqn.params["in_shardings"], eqn.invars)):
                if not is_unspecified(s):
                    out.append(ShardingSource(f"argument #{i} of the inner jit({name})", s,
                                              v.aval))
            for i, (s, v) in enumerate(zip(eqn.params["out_shardings"], eqn.outvars)):
                if not is_unspecified(s):
                    out.append(ShardingSource(f"result #{i} of the inner jit({name})", s,
                                              v.aval))
        elif eqn.primitive is sharding_constraint_p:
            out.append(ShardingSource(f"with_sharding_constraint at {eqn.source_info}",
                                      eqn.params["sharding"], eqn.invars[0].aval))
        elif eqn.primitive is shard_map_p:
            # The program runs on the shard_map's mesh (in its device order).
            out.insert(0, ShardingSource(
                f"the mesh of shard_map({eqn.params['name']}) at {eqn.source_info}",
                NamedSharding(eqn.params["mesh"], PartitionSpec())))
        for sub in subjaxprs_of_params(eqn.params):
            out.extend(_nested_memo(sub))
    return tuple(out)


_nested_memo = memoize_on_jaxpr(_nested_sources, max_size=4096)


# --- lowering ------------------------------------------------------------------------------------
#: The lowering cache lives on each jaxpr (``jaxpr_store``): its entries die
#: with the jaxpr, i.e. with the tracing-cache entry of the function it came
#: from, while live functions with the same jaxpr share them. The bound is
#: per jaxpr (placements of one jaxpr); past it that jaxpr's lowerings start over.
_LOWER_CACHE_SIZE = 64
#: This cache's own first key part in the jaxpr's store (a generation number
#: follows it, bumped by ``clear_program_caches``).
_LOWER_TAG = object()
_lower_generation = [0]
_lock = threading.Lock()
stats = {"lowerings": 0, "compilations": 0}


def clear_program_caches() -> None:
    with _lock:
        _lower_generation[0] += 1


def _describe_fun(name: str) -> str:
    return f"jit({name})"


def lower_program(jaxpr: ClosedJaxpr, *, in_shardings: Sequence[Any],
                  out_shardings: Sequence[Any], donated_invars: Sequence[bool], name: str,
                  keep_unused: bool, compiler_options_kvs: tuple[tuple[str, Any], ...] = (),
                  platforms: tuple[str, ...] | None = None, committed: bool = False,
                  device: Any = None) -> LoweredProgram:
    """Lowers ``jaxpr`` for its placement (cached; see the module docstring).

    ``in_shardings`` has one entry per jaxpr input: the explicit sharding, or
    a committed argument's sharding, or ``UNSPECIFIED``. ``device`` is where a
    program without any sharding runs (default: the default device).
    """
    in_sh = tuple(UNSPECIFIED if is_unspecified(s) else s for s in in_shardings)
    out_sh = tuple(UNSPECIFIED if is_unspecified(s) else s for s in out_shardings)
    donated = tuple(bool(d) for d in donated_invars)
    if device is None:
        device = default_device()
    fmt = sharding_format()
    key = (_LOWER_TAG, _lower_generation[0], tuple(id(c) for c in jaxpr.consts), in_sh, out_sh,
           donated, name, bool(keep_unused), compiler_options_kvs, platforms, bool(committed),
           device, fmt, context_mesh())
    store = jaxpr_store(jaxpr.jaxpr)
    hit = store.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], jaxpr.consts)):
        return hit[1]  # type: ignore[no-any-return]
    _explain_lowering_miss(jaxpr, key, name)
    start = time.perf_counter()
    with timed_event(JAXPR_TO_MLIR_MODULE_EVENT, _describe_fun(name)):
        program = _lower(jaxpr, in_sh, out_sh, donated, name, bool(keep_unused),
                         compiler_options_kvs, platforms, bool(committed), device, fmt)
    log_cost("lowering", _describe_fun(name), time.perf_counter() - start)
    stats["lowerings"] += 1
    with _lock:
        mine = [k for k in store if k[0] is _LOWER_TAG]
        full = len(mine) >= _LOWER_CACHE_SIZE
        for k in mine:
            if full or k[1] != key[1]:  # over the bound, or left from before a clear
                store.pop(k, None)
        store[key] = (tuple(jaxpr.consts), program)
    return program


_KEY_PARTS = ("cache", "generation", "consts", "input shardings", "output shardings", "donated arguments",
              "name", "keep_unused", "compiler options", "platforms", "committedness",
              "device", "sharding format", "context mesh (set_mesh)")


def lowered_program_of(jaxpr: ClosedJaxpr, executable: Executable) -> LoweredProgram | None:
    """The program in ``jaxpr``'s lowering cache that was compiled to ``executable``."""
    for key, value in list(jaxpr_store(jaxpr.jaxpr).items()):
        if isinstance(key, tuple) and key and key[0] is _LOWER_TAG:
            program: LoweredProgram = value[1]
            if program.compiled is not None and program.compiled.executable is executable:
                return program
    return None


def _explain_lowering_miss(jaxpr: ClosedJaxpr, key: tuple[Any, ...], name: str) -> None:
    if not explain_cache_misses_enabled():
        return
    with _lock:
        same: list[tuple[Any, ...]] = [k for k in jaxpr_store(jaxpr.jaxpr)
                                       if k[0] is _LOWER_TAG and k[1] == key[1]]
    if not same:
        explain_miss("lowering", _describe_fun(name),
                     ["never lowered this jaxpr (a new trace) before"])
        return
    dbg = jaxpr.jaxpr.debug_info
    names = dbg.arg_names if dbg is not None else ()
    old = same[-1]
    reasons: list[str] = []
    for part, a, b in zip(_KEY_PARTS, old, key):
        if a == b:
            continue
        if part == "input shardings" and len(a) == len(b):
            reasons += [f"the sharding of argument {names[i] if i < len(names) and names[i] else i}"
                        f" changed from {x} to {y}" for i, (x, y) in enumerate(zip(a, b))
                        if x != y]
        else:
            reasons.append(f"the {part} changed from {a} to {b}")
    explain_miss("lowering", _describe_fun(name), reasons)


def _lower(jaxpr: ClosedJaxpr, in_sh: tuple[Any, ...], out_sh: tuple[Any, ...],
           donated: tuple[bool, ...], name: str, keep_unused: bool,
           compiler_options_kvs: tuple[tuple[str, Any], ...],
           platforms: tuple[str, ...] | None, committed: bool, device: Any,
           fmt: str = "shardy") -> LoweredProgram:
    dbg = jaxpr.jaxpr.debug_info
    arg_names = dbg.arg_names if dbg is not None else (None,) * len(in_sh)
    res_names = dbg.result_paths if dbg is not None else (None,) * len(out_sh)
    in_avals, out_avals = jaxpr.in_avals, jaxpr.out_avals
    in_labels = [shard_label("argument", n, i) for i, n in enumerate(arg_names)]
    out_labels = [shard_label("result", n, i) for i, n in enumerate(res_names)]
    sources = [ShardingSource(label, s, a) for label, s, a in zip(in_labels, in_sh, in_avals)
               if not is_unspecified(s)]
    # set_mesh's mesh: after the arguments (theirs give the order), before the
    # results (which may have been laid out over it)
    context = context_mesh_source()
    if context is not None:
        sources.append(context)
    sources += [ShardingSource(label, s, a) for label, s, a in zip(out_labels, out_sh, out_avals)
                if not is_unspecified(s)]
    nested = _nested_memo(jaxpr)
    meshes = [s for s in nested if s.label.startswith("the mesh of shard_map")]
    sources = meshes + sources + [s for s in nested if s not in meshes]
    devices = program_devices(name, sources, device)
    _check_ordered_effects(jaxpr, name, len(devices))
    prefer = [s.sharding for s in meshes] + ([context.sharding] if context is not None else [])
    specs_in, mesh_shape, mesh = lowering_specs(in_sh, in_avals, in_labels, devices,
                                                extra=[s.sharding for s in nested] + list(out_sh),
                                                prefer=prefer)
    specs_out, _, _ = lowering_specs(out_sh, out_avals, out_labels, devices,
                                     extra=[s.sharding for s in nested] + list(in_sh),
                                     prefer=prefer)
    target = platforms if platforms is not None else (devices[0].platform,)
    kinds = program_memory_kinds(jaxpr, in_sh, out_sh)

    def lower() -> LoweringResult:
        # Imported here: the lowering stack loads MLIR's dialects, which a program
        # restored from a persistent cache does not need.
        from lamina_mlir_lowering.lowering import lower_jaxpr_to_module, sanitize_module_name

        with lowering_sharding_context(devices, mesh):
            return lower_jaxpr_to_module(
                sanitize_module_name(f"jit_{name}"),
                jaxpr if keep_unused else _without_dead_code(jaxpr), platforms=target,
                arg_shardings=specs_in, result_shardings=specs_out, donated_args=donated,
                num_partitions=len(devices), keep_unused=keep_unused, mesh=mesh_shape,
                sharding_format=fmt, arg_memory_kinds=None if kinds is None else kinds.args,
                result_memory_kinds=None if kinds is None else kinds.results,
                result_placements=None if kinds is None else kinds.placements)

    placement = (name, keep_unused, target, specs_in, specs_out, donated, fmt, mesh_shape,
                 tuple(devices), mesh, kinds)
    lowering = lower_through_disk(jaxpr, placement, name, lower)
    any_explicit = bool(sources)
    return LoweredProgram(lowering, name, tuple(arg_names), tuple(res_names), list(in_avals),
                          list(out_avals), tuple(devices), mesh, tuple(target), in_sh, out_sh,
                          donated, committed or any_explicit, compiler_options_kvs)


def _check_ordered_effects(jaxpr: ClosedJaxpr, name: str, num_devices: int) -> None:
    """JAX's rule: ordered effects (``ordered=True`` prints and callbacks)
    have one order only on one device, so a program over several refuses them."""
    ordered = ordered_effects(jaxpr.effects)
    if ordered and num_devices > 1:
        raise ValueError(
            f"The following ordered effects are not supported for more than 1 device: "
            f"[{', '.join(str(e) for e in ordered)}] (jit({name}) runs on {num_devices} "
            f"devices; use ordered=False)")


def _without_dead_code(jaxpr: ClosedJaxpr) -> ClosedJaxpr:
    """``jaxpr`` with every equation (and every operand of a nested jit,
    checkpoint, control-flow or pmap equation) that no result needs removed,
    its inputs all kept: the lowering then prunes the inputs nothing reads
    any more, and its ``kept_var_idx`` still counts the original inputs."""
    n_out = len(jaxpr.jaxpr.outvars)
    return pe.dce_closed_jaxpr(jaxpr, [True] * n_out, instantiate=True)[0]


# --- compiling ------------------------------------------------------------------------------------
def _local_platform(devices: Sequence[Any]) -> str:
    return str(devices[0].platform)


def compile_program(program: LoweredProgram) -> CompiledProgram:
    """Compiles a lowered program for its devices (once per program)."""
    compiled = program.compiled
    if compiled is not None:
        return compiled
    local = _local_platform(program.devices)
    if program.platforms != (local,):
        raise CrossPlatformError(
            f"{program.lowering.module_name} was lowered for platforms "
            f"{program.platforms}, but this host's devices are {local} devices: only a "
            f"module lowered for exactly ('{local}',) can be compiled here (lower without "
            "lowering_platforms); to keep a module for other platforms, export it "
            "(Lowered.export()) and call it where it runs")
    devices = list(program.devices)
    n = len(devices)
    available = devices_of(devices[0].client)  # every process's: a mesh may span them
    if n > len(available):
        raise CompileError(f"jit({program.fun_name}) needs {n} devices, but only "
                           f"{len(available)} are available")
    options = BuildOptions(num_partitions=n,
                           env_option_overrides=tuple(program.compiler_options_kvs),
                           use_shardy=program.lowering.sharding_format == "shardy")
    start = time.perf_counter()
    explain_miss("compilation", program.lowering.module_name,
                 ["a new lowered module (see the lowering miss)"])
    lowering = program.lowering
    # Bytecode is what compile_module hashes and compiles (a module restored
    # from the trace cache is never parsed); callbacks need the ir.Module.
    with timed_event(BACKEND_COMPILE_EVENT, f"jit({program.fun_name})"):
        loaded = compile_module(
            lowering.module if lowering.host_callbacks else lowering.as_bytecode(),
            devices, options, name=lowering.module_name, host_callbacks=lowering.host_callbacks)
    elapsed = time.perf_counter() - start
    log_cost("compiling", program.lowering.module_name, elapsed)
    log_compilation(f"jit({program.fun_name})", program.arg_names, program.in_avals, elapsed)
    stats["compilations"] += 1
    in_sh = _concrete_in_shardings(program, loaded)
    out_sh = _concrete_out_shardings(program, loaded)
    out_avals = [canonical_aval(a) for a in program.out_avals]
    executable = Executable(
        loaded, name=f"jit({program.fun_name})", in_avals=program.in_avals,
        out_avals=out_avals, in_shardings=in_sh, out_shardings=out_sh,
        devices=devices, options=options, arg_names=program.arg_names,
        result_names=program.result_names, donated_invars=program.donated_invars,
        kept_var_idx=lowering.kept_var_idx,
        out_committed=[program.committed] * len(program.out_avals), lowering=lowering)
    handlers = [result_handler(a, s, program.committed) for a, s in zip(out_avals, out_sh)]
    compiled = CompiledProgram(executable, tuple(in_sh), tuple(out_sh), handlers)
    program.compiled = compiled
    return compiled


def _concrete_in_shardings(program: LoweredProgram, loaded: Any) -> list[Any]:
    devices = program.devices
    if len(devices) == 1:
        single = single_device_sharding(devices[0])
        return [single if is_unspecified(s) else s for s in program.in_shardings]
    chosen = loaded.get_parameter_shardings()
    if chosen is not None and program.lowering.has_token:
        chosen = chosen[1:]  # the ordered-effects token comes first
    kept = program.lowering.kept_var_idx
    from_xla: dict[int, Any] = {}
    if chosen is not None:
        for pos, op in zip(kept, chosen):
            aval = program.in_avals[pos]
            from_xla[pos] = sharding_for_output(xc.HloSharding.from_proto(op), devices,
                                                program.mesh, aval.ndim)
    out = []
    for i, (s, aval) in enumerate(zip(program.in_shardings, program.in_avals)):
        if not is_unspecified(s):
            out.append(s)
        elif i in from_xla:
            out.append(from_xla[i])
        else:
            out.append(_replicated(devices, program.mesh, aval.ndim))
    return out


def _replicated(devices: Sequence[Any], mesh: Any, ndim: int) -> Any:
    return sharding_for_output(xc.HloSharding.replicate(), devices, mesh, ndim)


def _concrete_out_shardings(program: LoweredProgram, loaded: Any) -> list[Any]:
    out = _chosen_out_shardings(program, loaded)
    if not program.lowering.result_memory_kinds:
        return out
    # the memory each result is in, as the executable reports it
    kinds = output_memory_kinds(loaded, len(out), program.lowering.has_token)
    return [s if k is None or s.memory_kind == k else s.with_memory_kind(k)
            for s, k in zip(out, kinds)]


def _chosen_out_shardings(program: LoweredProgram, loaded: Any) -> list[Any]:
    devices = program.devices
    if len(devices) == 1:
        single = single_device_sharding(devices[0])
        return [single if is_unspecified(s) or isinstance(s, SingleDeviceSharding) else s
                for s in program.out_shardings]
    chosen = loaded.get_output_shardings()
    if chosen is not None and program.lowering.has_token:
        chosen = chosen[1:]  # the ordered-effects token comes first
    out = []
    for i, (s, aval) in enumerate(zip(program.out_shardings, program.out_avals)):
        if not is_unspecified(s):
            out.append(s)
        elif chosen is not None:
            out.append(sharding_for_output(xc.HloSharding.from_proto(chosen[i]), devices,
                                           program.mesh, aval.ndim))
        else:
            out.append(_replicated(devices, program.mesh, aval.ndim))
    return out


# --- calling (the impl rule) -------------------------------------------------------------------
def placed_shardings(args: Sequence[Any], in_shardings: Sequence[Any],
                     jaxpr: ClosedJaxpr, name: str) -> tuple[tuple[Any, ...], bool]:
    """Each argument's sharding as the program sees it: the explicit one, or
    a committed array's own (an explicit one that differs from a committed
    array's is an error naming the argument); and whether any is committed."""
    out: list[Any] = []
    committed = False
    dbg = jaxpr.jaxpr.debug_info
    for i, (x, s) in enumerate(zip(args, in_shardings)):
        if type(x) is Array and x._arr._committed:
            committed = True
            arg_sharding = x._arr._sharding
            if is_unspecified(s):
                out.append(arg_sharding)
                continue
            if arg_sharding != s and not arg_sharding.is_equivalent_to(s, x.ndim):
                arg_name = dbg.arg_names[i] if dbg is not None else None
                raise ValueError(
                    f"Sharding passed to jit({name}) does not match the sharding on the "
                    f"respective arg. Got jit sharding: {s!r},\narg sharding: "
                    f"{arg_sharding!r} for {shard_label('argument', arg_name, i)} of type "
                    f"{x.aval.str_short()}; device_put it to the expected sharding first")
        out.append(s)
    return tuple(out), committed


def pjit_call(args: Sequence[Any], params: dict[str, Any]) -> tuple[list[Any],
                                                                     CompiledProgram]:
    """Runs a ``pjit_p`` application on concrete arguments; also returns the
    compiled program (for jit's fast dispatch path)."""
    jaxpr: ClosedJaxpr = params["jaxpr"]
    name = params["name"]
    in_sh, committed = placed_shardings(args, params["in_shardings"], jaxpr, name)
    program = lower_program(jaxpr, in_shardings=in_sh, out_shardings=params["out_shardings"],
                            donated_invars=params["donated_invars"], name=name,
                            keep_unused=params["keep_unused"],
                            compiler_options_kvs=tuple(params["compiler_options_kvs"]),
                            committed=committed)
    compiled = compile_program(program)
    outs: list[Any] = compiled.executable.call(*args)
    if _float_checks.any and not is_suspended():
        bad = first_bad(outs)
        if bad is not None:
            raise explain_bad_result(jaxpr, args, f"jit({name})", bad[1])
    if has_float0_outputs(jaxpr):
        outs = [np.zeros(a.shape, float0) if a.dtype == float0 else o
                for o, a in zip(outs, jaxpr.out_avals)]
    return outs, compiled


def has_float0_outputs(jaxpr: ClosedJaxpr) -> bool:
    """Whether some output is a float0 tangent: jit returns those as NumPy
    zeros (they hold no data), as JAX does, so such calls skip the cached
    dispatch paths, which return device arrays."""
    return any(a.dtype == float0 for a in jaxpr.out_avals)


def _pjit_impl(*args: Any, **params: Any) -> list[Any]:
    return pjit_call(args, params)[0]


pjit_p.def_impl(_pjit_impl)
