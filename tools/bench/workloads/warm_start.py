"""Warm starts: a fresh process's first result of a jitted train step, caches warm.

Each side gets a persistent cache directory of its own (in the system's temp
directory, one per implementation and variant), every compilation written to
it (``jax_persistent_cache_min_compile_time_secs`` 0). One discarded process
per implementation fills the caches first; each measured process then imports
the library, sets the cache options, and times everything up to the first
result of the MLP SGD step (import, tracing, lowering, loading or compiling,
running). ``warm_start_both_caches`` adds lamina's persistent trace cache on
the lamina side (JAX has none, so its side is the same as in
``warm_start_compile_cache``). ``cold_start_train_step`` is the same first
step with no cache at all (tracing, lowering and compiling in every process):
the figure the caches are measured against.

Both sides pay the same floor before any of their own work: starting Python,
importing numpy and jaxlib, creating the CPU client, and importing ml_dtypes,
which jaxlib itself does at the first transfer of an array (it registers
loops on NumPy's ufuncs: about 0.5 s of CPU with numpy 2.4 and ml_dtypes
0.7); see the README's section on warm starts. ``warm_start_jaxlib_floor``
adds to that floor what XLA itself does in a warm start: it loads the train
step's serialized executable (written by that side's library in the
discarded first process) and runs it on the batch with jaxlib alone, no
library at all. No library built on jaxlib can reach its first result sooner.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import types

from ..adapters import Adapter
from ..registry import INFO, Bench, Goal, workload
from .models import block_leaves, make_train_step, mlp_batch, mlp_params

COMPILE_CACHE = Goal("warm_start_compile", "warm start (compilation cache)", 0.5)
BOTH_CACHES = Goal("warm_start_both", "warm start (both caches)", 0.3)


def _first_step(a: Adapter, variant: str, trace_cache: bool, cache: bool = True) -> Bench:
    root = a.modules.root

    def run() -> object:
        api = importlib.import_module(root)
        if cache:
            directory = os.path.join(tempfile.gettempdir(),
                                     f"bench-warm-start-{a.impl}-{variant}")
            api.config.update("jax_compilation_cache_dir", directory)
            api.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        if trace_cache and a.impl == "lamina":
            api.config.update("persistent_trace_cache", True)
        step = api.jit(make_train_step(a))
        x, y = mlp_batch()
        return block_leaves(step(mlp_params(), x, y))

    return Bench(run=run, single_shot=True)


def _register(name: str, goal: Goal, trace_cache: bool, description: str,
              cache: bool = True) -> None:
    workload(name, area="warm_start", goal=goal, description=description,
             warmup_processes=1, warmup_iters=0, min_samples=1, timeout_s=300.0)(
        lambda a: _first_step(a, name, trace_cache, cache))


_register("warm_start_compile_cache", COMPILE_CACHE, False,
          "fresh process to the first MLP train-step result, compilation cache warm")
_register("warm_start_both_caches", BOTH_CACHES, True,
          "the same with lamina's persistent trace cache too (JAX: compilation cache)")
_register("cold_start_train_step", INFO, False,
          "fresh process to the first MLP train-step result, no persistent cache",
          cache=False)


def _floor(a: Adapter) -> Bench:
    def run() -> object:
        # What any jaxlib program pays first, whichever library drives it (the
        # same code on both sides): numpy, ml_dtypes (jaxlib imports it at
        # the first transfer), jaxlib, and the CPU client with its devices.
        importlib.import_module("numpy")
        importlib.import_module("ml_dtypes")
        xla_client = importlib.import_module("jaxlib.xla_client")
        return xla_client.make_cpu_client().devices()

    return Bench(run=run, single_shot=True)


workload("warm_start_floor", area="warm_start", goal=INFO,
         description="the same start-up cost on both sides: numpy, ml_dtypes, jaxlib, client",
         warmup_processes=1, warmup_iters=0, min_samples=1, timeout_s=300.0)(_floor)


def _write_step_executable(a: Adapter, directory: str) -> None:
    """The train step compiled by ``a``'s library, serialized, with its flat
    arguments (what the measured processes of the jaxlib floor load)."""
    import numpy as np

    params, (x, y) = mlp_params(), mlp_batch()
    compiled = a.api.jit(make_train_step(a)).lower(params, x, y).compile()
    os.makedirs(directory, exist_ok=True)
    leaves = [np.asarray(leaf) for leaf in a.tree_util.tree_leaves((params, x, y))]
    np.savez(os.path.join(directory, "arguments.npz"), *leaves)
    blob = compiled.runtime_executable().serialize()
    with open(os.path.join(directory, "step.tmp"), "wb") as f:
        f.write(blob)
    os.replace(os.path.join(directory, "step.tmp"), os.path.join(directory, "step.exe"))


def _run_step_executable(directory: str) -> object:
    """Loads the serialized step and runs it with jaxlib alone."""
    # jaxlib asks `jax` for array types when it can import it; a jaxlib-only
    # program has none (the placeholder makes that import fail)
    placeholder = "jax" not in sys.modules
    if placeholder:
        sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        return _load_and_run(directory)
    finally:
        if placeholder:
            del sys.modules["jax"]


def _load_and_run(directory: str) -> object:
    np = importlib.import_module("numpy")
    importlib.import_module("ml_dtypes")
    xla_client = importlib.import_module("jaxlib.xla_client")
    jaxlib = importlib.import_module("jaxlib._jax")
    device = xla_client.make_cpu_client().devices()[0]
    with open(os.path.join(directory, "step.exe"), "rb") as f:
        blob = f.read()
    loaded = device.client.deserialize_executable(
        blob, jaxlib.DeviceList((device,)), xla_client.CompileOptions())

    class OneDevice(jaxlib.SingleDeviceSharding):  # type: ignore[misc, name-defined]
        memory_kind = None

        def _to_xla_hlo_sharding(self, ndim: int) -> object:
            return xla_client.HloSharding.replicate()

    sharding = OneDevice(device)
    with np.load(os.path.join(directory, "arguments.npz")) as stored:
        values = [stored[name] for name in stored.files]
    arguments = [jaxlib.batched_device_put(
        types.SimpleNamespace(shape=v.shape, dtype=v.dtype, weak_type=False),
        sharding, [v], [device], True, enable_x64=False) for v in values]
    results = loaded.execute_sharded(arguments).disassemble_into_single_device_arrays()
    for per_device in results:
        for array in per_device:
            array.block_until_ready()
    return results


def _jaxlib_floor(a: Adapter) -> Bench:
    import jaxlib.version

    directory = os.path.join(tempfile.gettempdir(),
                             f"bench-warm-start-{a.impl}-jaxlib-{jaxlib.version.__version__}")

    def run() -> object:
        if not os.path.exists(os.path.join(directory, "step.exe")):
            _write_step_executable(a, directory)  # the discarded first process
            return None
        return _run_step_executable(directory)

    return Bench(run=run, single_shot=True)


workload("warm_start_jaxlib_floor", area="warm_start", goal=INFO,
         description="the floor, then the cached train step loaded and run by jaxlib alone",
         warmup_processes=1, warmup_iters=0, min_samples=1, timeout_s=300.0)(_jaxlib_floor)
