"""Compiling StableHLO modules for an explicit device assignment.

:func:`compile_module` compiles a module (an ``ir.Module``, its text or its
bytecode) through a cache keyed by the module's fingerprint, the build
options and the devices; :func:`result_handler` builds jaxlib's handler for
one output. Calling a compiled program safely is
:class:`~lamina_interpreters_pxla.executable.Executable`'s job.
"""

from __future__ import annotations

import collections
import gc
import hashlib
import io
import logging
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import (
    Device,
    JaxRuntimeError,
    LoadedExecutable,
    _jax,
    xc,
)
from lamina_interpreters_pxla import monitoring, persistent_cache
from lamina_interpreters_pxla.backends import device_list
from lamina_mlir_lowering.serialization import parse_module
from lamina_tracing_core.avals import ShapedArray

__all__ = [
    "BuildOptions", "CompileError", "backend_compile_and_load", "clear_compile_cache",
    "compile_log", "compile_module", "compile_stats", "log_compilation", "make_compile_options",
    "module_bytecode", "module_fingerprint", "result_handler",
]


class CompileError(RuntimeError):
    """XLA rejected a program (the message names the program)."""


# --- compiling ---------------------------------------------------------------
@dataclass(frozen=True)
class BuildOptions:
    """How a module is compiled (besides the devices).

    ``num_replicas`` > 1 is replica mode (one program per device, pmap-style);
    ``num_partitions`` > 1 is SPMD partitioning (Shardy unless
    ``use_shardy=False``, for modules carrying ``mhlo.sharding`` strings).
    ``env_option_overrides`` are XLA debug options as ``(name, value)`` pairs.
    """

    num_replicas: int = 1
    num_partitions: int = 1
    use_shardy: bool = True
    use_spmd_partitioning: bool | None = None
    env_option_overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def num_devices(self) -> int:
        return self.num_replicas * self.num_partitions


def make_compile_options(options: BuildOptions, devices: Sequence[Device]) -> Any:
    """jaxlib ``CompileOptions`` with the device assignment built from device ids
    (replica-major: ``devices[r * num_partitions + p]``)."""
    opts = xc.CompileOptions()
    opts.num_replicas = options.num_replicas
    opts.num_partitions = options.num_partitions
    build = opts.executable_build_options
    spmd = options.use_spmd_partitioning
    build.use_spmd_partitioning = options.num_partitions > 1 if spmd is None else spmd
    build.use_shardy_partitioner = options.use_shardy
    ids = np.array([d.id for d in devices], dtype=np.int64).reshape(
        options.num_replicas, options.num_partitions)
    opts.device_assignment = xc.DeviceAssignment.create(ids)
    if options.env_option_overrides:
        opts.env_option_overrides = list(options.env_option_overrides)
    return opts


def module_fingerprint(module: Any) -> str:
    """A hash of the module's bytecode (or text): the compile cache's key."""
    if isinstance(module, bytes):
        data = module
    elif isinstance(module, str):
        data = module.encode()
    else:
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
        data = buf.getvalue()
    return hashlib.sha256(data).hexdigest()


_CACHE_SIZE = 4096
_compile_cache: collections.OrderedDict[tuple[Any, ...], LoadedExecutable] = \
    collections.OrderedDict()
_compile_lock = threading.Lock()
#: in-memory hits and misses, and how many compilations XLA ran (the others
#: came from the persistent cache)
compile_stats = {"hits": 0, "misses": 0, "xla_compiles": 0}


def _check_devices(devices: Sequence[Device], options: BuildOptions, name: str) -> None:
    if len(devices) != options.num_devices:
        raise CompileError(
            f"compiling {name}: {len(devices)} devices were given for "
            f"{options.num_replicas} replicas x {options.num_partitions} partitions "
            f"({options.num_devices} devices)")
    if len({id(d) for d in devices}) != len(devices):
        raise CompileError(f"compiling {name}: a device appears twice in {list(devices)}")
    clients = {id(d.client) for d in devices}
    if len(clients) != 1:
        raise CompileError(f"compiling {name}: the devices belong to different clients")


def compile_module(module: Any, devices: Sequence[Device],
                   options: BuildOptions = BuildOptions(), *, name: str = "module",
                   fingerprint: str | None = None, persistent: bool = True,
                   host_callbacks: Sequence[Any] = ()) -> LoadedExecutable:
    """Compiles ``module`` for ``devices`` (the device assignment, replica-major),
    reusing an earlier compilation of the same module, options and devices: in
    this process, or from the persistent cache when a cache directory is set
    (:mod:`~lamina_interpreters_pxla.persistent_cache`; ``persistent=False``
    keeps this compilation off the disk).
    ``host_callbacks`` are the Python functions the module's callback custom
    calls run (``LoweringResult.host_callbacks``); a module with callbacks is
    compiled for them alone (its text does not say which functions they are),
    and never from or to the disk."""
    devices = list(devices)
    _check_devices(devices, options, name)
    _last_source.from_disk = False
    _compiling.devices = devices  # for sharding inspectors the partitioner calls
    if host_callbacks:
        return _compile_with_callbacks(module, devices, options, name, host_callbacks)
    if fingerprint is None and not isinstance(module, (str, bytes)):
        module = module_bytecode(module)  # serialized once: hashed, then compiled
    key = (fingerprint or module_fingerprint(module), options, tuple(d.id for d in devices),
           id(devices[0].client))
    with _compile_lock:
        hit = _compile_cache.get(key)
        if hit is not None:
            _compile_cache.move_to_end(key)
            compile_stats["hits"] += 1
            return hit
    compile_stats["misses"] += 1
    if not isinstance(module, (str, bytes)):
        module = module_bytecode(module)
    loaded = _compile_through_disk(module, devices, options, name, persistent)
    with _compile_lock:
        _drop_unreferenced()
        _compile_cache[key] = loaded
        if len(_compile_cache) > _CACHE_SIZE:
            _compile_cache.popitem(last=False)
    return loaded


def _compile_through_disk(module: str | bytes, devices: list[Device], options: BuildOptions,
                          name: str, persistent: bool) -> LoadedExecutable:
    """The persistent cache's executable for ``module``, or XLA's (then stored)."""
    client = devices[0].client
    disk = persistent_cache.active_cache() if persistent else None
    data = module.encode() if isinstance(module, str) else module
    if disk is not None and persistent_cache.calls_back(data):
        persistent_cache.report(name, "skip", "the module has host callbacks")
        disk = None
    if disk is not None:
        extra = disk.xla_cache_overrides(devices[0].platform)
        if extra:
            options = replace(options, env_option_overrides=options.env_option_overrides + extra)
    compile_options = make_compile_options(options, devices)
    dl = device_list(devices)
    key = ""
    if disk is not None:
        key = persistent_cache.entry_key(data, compile_options, devices)
        monitoring.record_event("/jax/compilation_cache/compile_requests_use_cache")
        retrieval_start = time.monotonic()
        loaded = disk.load(key, name, client, dl, compile_options)
        if loaded is not None:
            monitoring.record_event("/jax/compilation_cache/cache_hits")
            monitoring.record_event_duration_secs(
                "/jax/compilation_cache/cache_retrieval_time_sec",
                time.monotonic() - retrieval_start)
            _last_source.from_disk = True
            return loaded
        monitoring.record_event("/jax/compilation_cache/cache_misses")
    start = time.perf_counter()
    try:
        loaded = backend_compile_and_load(client, module, dl, compile_options, ())
    except JaxRuntimeError as e:
        raise CompileError(f"XLA could not compile {name}: {e}") from e
    compile_stats["xla_compiles"] += 1
    if disk is not None:
        disk.store(key, name, loaded, time.perf_counter() - start)
    return loaded


def backend_compile_and_load(backend: Any, module: Any, executable_devices: Any,
                             options: Any, host_callbacks: Sequence[Any]) -> LoadedExecutable:
    """XLA's compile of ``module`` by the client ``backend`` for ``executable_devices``.

    Every program lamina compiles (a persistent-cache hit aside) goes through
    this function, looked up on this module at each call: a wrapper assigned
    here sees each compile and its backend (JAX's ``jax._src.compiler`` has
    the same function with the same arguments, and chex's
    ``restrict_backends`` replaces it under the alias to forbid platforms).
    """
    if host_callbacks:
        loaded: LoadedExecutable = backend.compile_and_load(
            module, executable_devices, options, host_callbacks=list(host_callbacks))
    else:
        loaded = backend.compile_and_load(module, executable_devices, options)
    return loaded


class _Compiling:
    # not thread-local: XLA runs the partitioner (which calls the inspectors)
    # on threads of its own
    devices: list[Device] | None = None


_compiling = _Compiling()


def compiling_devices() -> list[Device] | None:
    """The devices of the module being compiled (or compiled last)."""
    return _compiling.devices


def _compile_with_callbacks(module: Any, devices: list[Device], options: BuildOptions,
                            name: str, host_callbacks: Sequence[Any]) -> LoadedExecutable:
    if isinstance(module, (str, bytes)):
        module = parse_module(module)  # jaxlib takes host callbacks with an ir.Module only
    compile_stats["misses"] += 1
    compile_stats["xla_compiles"] += 1
    try:
        return backend_compile_and_load(devices[0].client, module, device_list(devices),
                                        make_compile_options(options, devices), host_callbacks)
    except JaxRuntimeError as e:
        raise CompileError(f"XLA could not compile {name}: {e}") from e


def _refs_when_only_cached() -> int:
    """What ``sys.getrefcount`` reports, inside :func:`_drop_unreferenced`'s
    loop, for a value that nothing but the cache holds."""
    probe: collections.OrderedDict[int, object] = collections.OrderedDict({0: object()})
    return max(sys.getrefcount(value) for _, value in probe.items())


_ONLY_CACHED = _refs_when_only_cached()


def _drop_unreferenced() -> None:
    """Forgets the executables that only this cache still holds (their
    programs and functions are gone), so memory goes with the functions that
    were dropped; executables of live programs stay shared. Called on a miss
    (which compiles anyway), under the lock. LoadedExecutable takes no weak
    references, hence the reference count."""
    dead = [k for k, value in _compile_cache.items()
            if sys.getrefcount(value) <= _ONLY_CACHED]
    for k in dead:
        del _compile_cache[k]


def _after_full_collection(phase: str, info: dict[str, int]) -> None:
    """A gc callback: programs held in reference cycles (a jaxpr and its
    lowerings) go at a collection, so a full one also sweeps this cache.
    Skipped when the cache's lock is taken (the collection may run inside it)."""
    if phase != "stop" or info.get("generation") != 2 or not _compile_cache:
        return
    if _compile_lock.acquire(blocking=False):
        try:
            _drop_unreferenced()
        finally:
            _compile_lock.release()


gc.callbacks.append(_after_full_collection)


def module_bytecode(module: Any) -> bytes:
    buf = io.BytesIO()
    module.operation.write_bytecode(buf)
    return buf.getvalue()


def clear_compile_cache() -> None:
    with _compile_lock:
        _compile_cache.clear()


# --- logging compilations ------------------------------------------------------------
class CompileLog:
    """``log_compiles``: when ``enabled``, every compilation of a jitted
    function, a pmap or an eager primitive is logged at WARNING level on the
    ``lamina.compiles`` logger, with the function's name, its argument
    signature by path and the time it took."""

    __slots__ = ("enabled", "logger")

    def __init__(self) -> None:
        self.enabled = False
        self.logger = logging.getLogger("lamina.compiles")


compile_log = CompileLog()


class _LastSource(threading.local):
    """Whether this thread's last ``compile_module`` loaded its executable
    from the persistent cache (what :func:`log_compilation` reports)."""

    from_disk = False


_last_source = _LastSource()


def log_compilation(fun: str, arg_names: Sequence[str | None],
                    in_avals: Sequence[ShapedArray], seconds: float) -> None:
    """``Finished XLA compilation of jit(f) in 3.1 ms; arguments: x: f32[3], ...``
    (``Loaded jit(f) from the persistent compilation cache in ...`` when the
    compilation just made came from disk)."""
    if not compile_log.enabled:
        return
    signature = ", ".join(f"{name or f'args[{i}]'}: {aval.str_short()}"
                          for i, (name, aval) in enumerate(zip(arg_names, in_avals)))
    what = ("Loaded %s from the persistent compilation cache" if _last_source.from_disk
            else "Finished XLA compilation of %s")
    compile_log.logger.warning(what + " in %.2f ms; arguments: %s",
                               fun, seconds * 1e3, signature or "(none)")


# --- results ---------------------------------------------------------------------
def result_handler(aval: ShapedArray, sharding: Any, committed: bool = True) -> Any:
    """jaxlib's handler turning one output of an executable into an ``ArrayImpl``
    whose ``aval`` and sharding are exactly ``aval`` and ``sharding``."""
    return _jax.array_result_handler(aval, sharding, committed, _skip_checks=True)
