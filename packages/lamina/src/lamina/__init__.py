"""lamina: JAX's programming model on jaxlib, with names everywhere and real layers.

``import lamina as lx`` gives the JAX API (``lx.jit``, ``lx.grad``, ``lx.vmap``,
``lx.pmap``, ``lx.numpy``, ``lx.lax``, ...). Attributes are loaded on first use,
so ``import lamina`` is cheap and creates no XLA client.
"""

from __future__ import annotations

import importlib
from typing import Any

from lamina.__about__ import __version__

#: public name -> (module, attribute); attribute None means the module itself.
_EXPORTS: dict[str, tuple[str, str | None]] = {
    # transformations (tracing-core)
    "grad": ("lamina_tracing_core.api", "grad"),
    "value_and_grad": ("lamina_tracing_core.api", "value_and_grad"),
    "jvp": ("lamina_tracing_core.api", "jvp"),
    "vjp": ("lamina_tracing_core.api", "vjp"),
    "linearize": ("lamina_tracing_core.api", "linearize"),
    "vmap": ("lamina_tracing_core.api", "vmap"),
    "jacfwd": ("lamina_tracing_core.api", "jacfwd"),
    "jacrev": ("lamina_tracing_core.api", "jacrev"),
    "hessian": ("lamina_tracing_core.api", "hessian"),
    "make_jaxpr": ("lamina_sharded_jit.api", "make_jaxpr"),
    "clear_caches": ("lamina_sharded_jit.api", "clear_caches"),
    # the one with .sharding, which eval_shape, make_jaxpr and the stages return
    "ShapeDtypeStruct": ("lamina_sharded_jit.api", "ShapeDtypeStruct"),
    "typeof": ("lamina_sharded_jit.explicit_sharding", "typeof"),
    "checkpoint": ("lamina_tracing_core.checkpoint", "checkpoint"),
    "ensure_compile_time_eval": ("lamina_tracing_core.core", "eval_context"),
    "remat": ("lamina_tracing_core.checkpoint", "remat"),
    "checkpoint_policies": ("lamina_tracing_core.checkpoint", "checkpoint_policies"),
    "custom_jvp": ("lamina_tracing_core.custom_derivatives", "custom_jvp"),
    "custom_vjp": ("lamina_tracing_core.custom_derivatives", "custom_vjp"),
    "named_call": ("lamina.api_extras", "named_call"),
    "named_scope": ("lamina.api_extras", "named_scope"),
    "jacobian": ("lamina_tracing_core.api", "jacrev"),  # JAX's jacobian is reverse mode
    "linear_transpose": ("lamina.transforms", "linear_transpose"),
    "custom_gradient": ("lamina.custom_derivatives", "custom_gradient"),
    "closure_convert": ("lamina.custom_derivatives", "closure_convert"),
    "float0": ("lamina_tracing_core.dtypes", "float0"),
    "enable_x64": ("lamina.runtime_api", "enable_x64"),
    "default_device": ("lamina.runtime_api", "default_device"),
    "numpy_rank_promotion": ("lamina.runtime_api", "numpy_rank_promotion"),
    "numpy_dtype_promotion": ("lamina.runtime_api", "numpy_dtype_promotion"),
    "default_matmul_precision": ("lamina.runtime_api", "default_matmul_precision"),
    "legacy_prng_key": ("lamina.runtime_api", "legacy_prng_key"),
    "default_prng_impl": ("lamina.runtime_api", "default_prng_impl"),
    "threefry_partitionable": ("lamina.runtime_api", "threefry_partitionable"),
    "no_tracing": ("lamina.runtime_api", "no_tracing"),
    "no_execution": ("lamina.runtime_api", "no_execution"),
    "enable_checks": ("lamina.runtime_api", "enable_checks"),
    "softmax_custom_jvp": ("lamina.runtime_api", "softmax_custom_jvp"),
    "make_mesh": ("lamina.runtime_api", "make_mesh"),
    "process_indices": ("lamina.runtime_api", "process_indices"),
    "live_arrays": ("lamina.runtime_api", "live_arrays"),
    "explain_cache_misses": ("lamina.runtime_api", "explain_cache_misses"),
    "log_compiles": ("lamina.runtime_api", "log_compiles"),
    "check_tracer_leaks": ("lamina.runtime_api", "check_tracer_leaks"),
    "checking_leaks": ("lamina.runtime_api", "checking_leaks"),
    "debug_nans": ("lamina.runtime_api", "debug_nans"),
    "debug_infs": ("lamina.runtime_api", "debug_infs"),
    "host_id": ("lamina.runtime_api", "host_id"),
    "host_count": ("lamina.runtime_api", "host_count"),
    "host_ids": ("lamina.runtime_api", "host_ids"),
    "copy_to_host_async": ("lamina.runtime_api", "copy_to_host_async"),
    "print_environment_info": ("lamina.runtime_api", "print_environment_info"),
    "Device": ("lamina_interpreters_pxla._jaxlib", "DeviceClass"),
    "NamedSharding": ("lamina_interpreters_pxla.sharding", "NamedSharding"),
    "P": ("lamina_interpreters_pxla.sharding", "PartitionSpec"),
    # runtime (interpreters-pxla)
    "Array": ("lamina_interpreters_pxla.array", "Array"),
    "Shard": ("lamina_interpreters_pxla.array", "Shard"),
    "device_put": ("lamina_interpreters_pxla.device_put", "device_put"),
    "device_get": ("lamina_interpreters_pxla.device_put", "device_get"),
    "transfer_guard": ("lamina_interpreters_pxla.transfer_guard", "transfer_guard"),
    "array_garbage_collection_guard": ("lamina_interpreters_pxla.garbage_collection_guard",
                                       "array_garbage_collection_guard"),
    "thread_guard": ("lamina_interpreters_pxla.thread_guard", "thread_guard"),
    "transfer_guard_host_to_device": ("lamina_interpreters_pxla.transfer_guard",
                                      "transfer_guard_host_to_device"),
    "transfer_guard_device_to_host": ("lamina_interpreters_pxla.transfer_guard",
                                      "transfer_guard_device_to_host"),
    "transfer_guard_device_to_device": ("lamina_interpreters_pxla.transfer_guard",
                                        "transfer_guard_device_to_device"),
    "block_until_ready": ("lamina_interpreters_pxla.executable", "block_until_ready"),
    "devices": ("lamina_interpreters_pxla.backends", "devices"),
    "local_devices": ("lamina_interpreters_pxla.backends", "local_devices"),
    "device_count": ("lamina_interpreters_pxla.backends", "device_count"),
    "local_device_count": ("lamina_interpreters_pxla.backends", "local_device_count"),
    "process_index": ("lamina_interpreters_pxla.backends", "process_index"),
    "process_count": ("lamina_interpreters_pxla.backends", "process_count"),
    "default_backend": ("lamina_interpreters_pxla.backends", "default_backend"),
    "pmap": ("lamina_interpreters_pxla.pmap", "pmap"),
    "make_array_from_single_device_arrays": ("lamina_interpreters_pxla.multihost",
                                             "make_array_from_single_device_arrays"),
    "make_array_from_callback": ("lamina_interpreters_pxla.multihost",
                                 "make_array_from_callback"),
    "make_array_from_process_local_data": ("lamina_interpreters_pxla.multihost",
                                           "make_array_from_process_local_data"),
    # jit (sharded-jit)
    "jit": ("lamina_sharded_jit", "jit"),
    "eval_shape": ("lamina_sharded_jit", "eval_shape"),
    "disable_jit": ("lamina_sharded_jit", "disable_jit"),
    "shard_map": ("lamina_sharded_jit.shard_map", "shard_map"),
    "smap": ("lamina_sharded_jit.shard_map", "smap"),
    "auto_pcast": ("lamina_tracing_core.vma", "auto_pcast"),
    "set_mesh": ("lamina_interpreters_pxla.sharding", "set_mesh"),
    "reshard": ("lamina_sharded_jit.explicit_sharding", "reshard"),
    # submodules
    "numpy": ("lamina.numpy", None),
    "lax": ("lamina.lax", None),
    "random": ("lamina.random", None),
    "image": ("lamina.image", None),
    "nn": ("lamina.nn", None),
    "scipy": ("lamina.scipy", None),
    "tree_util": ("lamina.tree_util", None),
    "tree": ("lamina.tree", None),
    "sharding": ("lamina.sharding", None),
    "memory": ("lamina.memory", None),
    "stages": ("lamina.stages", None),
    "errors": ("lamina.errors", None),
    "sharded_jit": ("lamina.sharded_jit", None),
    "distributed": ("lamina.distributed", None),
    "multihost_utils": ("lamina.multihost_utils", None),
    "dtypes": ("lamina.dtypes", None),
    "export": ("lamina.export", None),
    "config": ("lamina.config", None),
    "typing": ("lamina.typing", None),
    "custom_derivatives": ("lamina.custom_derivatives", None),
    "flatten_util": ("lamina.flatten_util", None),
    "test_util": ("lamina.test_util", None),
    "experimental": ("lamina.experimental", None),
    "compilation_cache": ("lamina.compilation_cache", None),
    "debug": ("lamina.debug", None),
    "core": ("lamina.core", None),
    "interpreters": ("lamina.interpreters", None),
    "custom_batching": ("lamina.custom_batching", None),
    "lib": ("lamina.lib", None),
    "ops": ("lamina.ops", None),
    "dlpack": ("lamina.dlpack", None),
    "profiler": ("lamina.profiler", None),
    "ffi": ("lamina.ffi", None),
    "monitoring": ("lamina.monitoring", None),
    "pure_callback": ("lamina.callbacks", "pure_callback"),
    "effects_barrier": ("lamina_interpreters_pxla.effects_runtime", "effects_barrier"),
    "clear_persistent_caches": ("lamina_sharded_jit.persistent_trace", "clear_persistent_caches"),
}

#: attributes that must not pull in the runtime: ``lamina.distributed.launch``
#: starts processes without loading jaxlib.
_NO_RUNTIME_NEEDED = frozenset({"distributed"})

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    entry = _EXPORTS.get(name)
    if entry is None:
        raise AttributeError(f"module 'lamina' has no attribute {name!r}")
    module_name, attribute = entry
    if name not in _NO_RUNTIME_NEEDED:
        # Lazy, as every attribute here: eager execution needs the runtime, whose
        # import sets the default eager impl (`primitives.set_default_impl`). It
        # creates no client (first use does), so `distributed.initialize` still works.
        importlib.import_module("lamina_interpreters_pxla")
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return __all__
