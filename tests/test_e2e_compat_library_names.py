"""Names libraries import through the alias that are not lamina modules of the
same name, in a fresh process: ``jax.version`` (JAX's API version, as flax
compares it), ``jax.experimental.multihost_utils`` and
``jax.experimental.layout`` (flax imports them), ``jax.errors.JaxRuntimeError``
(equinox catches it) and the config flags libraries set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SCRIPT = """
    import json
    import lamina.compat
    lamina.compat.install()

    import jax
    import jax.numpy as jnp
    import jax.version
    from jax.experimental.layout import Format, Layout
    from jax.experimental.multihost_utils import sync_global_devices
    import lamina

    out = {
        "version": jax.version.__version__,
        "version_info": list(jax.version.__version_info__),
        "in_dir": "version" in dir(jax),
        "layout": Format.__name__ + Layout.__name__,
        "sync": sync_global_devices is lamina.multihost_utils.sync_global_devices,
    }
    try:
        jax.jit(lambda x: x)(jnp.ones(3)).block_until_ready()
        raise jax.errors.JaxRuntimeError("raised by the test")
    except jax.errors.JaxRuntimeError as e:
        out["runtime_error"] = isinstance(e, RuntimeError)
    # names of JAX 0.10.2's surface added for real code (chex, flax, GNN libraries)
    import jax.ops
    import jax.dlpack, jax.ffi, jax.profiler, jax.monitoring  # noqa: E401
    out["added"] = sorted(
        f"{m.__name__.replace('lamina', 'jax')}.{n}" for m, names in [
            (jax, ["checking_leaks", "check_tracer_leaks", "debug_nans", "debug_infs", "Shard",
                   "core", "interpreters", "custom_batching", "lib", "ops", "dlpack", "ffi",
                   "profiler", "monitoring", "transfer_guard", "transfer_guard_host_to_device",
                   "transfer_guard_device_to_host", "transfer_guard_device_to_device",
                   "array_garbage_collection_guard", "legacy_prng_key", "default_prng_impl",
                   "threefry_partitionable", "no_tracing", "softmax_custom_jvp",
                   "no_execution", "enable_checks"]),
            (jax.dlpack, ["from_dlpack", "is_supported_dtype"]),
            (jax.ffi, ["ffi_call", "ffi_lowering", "register_ffi_target", "pycapsule"]),
            (jax.profiler, ["start_trace", "stop_trace", "trace", "TraceAnnotation"]),
            (jax.monitoring, ["record_event", "register_event_listener"]),
            (jax.nn, ["dot_product_attention", "identity", "log1mexp", "logmeanexp",
                      "sparse_sigmoid"]),
            (jax.lax, ["approx_max_k", "approx_min_k"]),
            (jax.ops, ["segment_sum", "segment_prod", "segment_max", "segment_min"]),
            (jax.experimental, ["io_callback", "compilation_cache"]),
            (jax.numpy, ["float8_e4m3fn", "float4_e2m1fn", "int4", "uint2"]),
        ] for n in names if not hasattr(m, n) or n not in dir(m))
    try:
        jax.new_ref  # not provided: the alias says so, naming it
    except AttributeError as e:
        out["missing"] = str(e)
    jax.config.update("jax_numpy_rank_promotion", "raise")
    try:
        jnp.ones(3) + jnp.ones((2, 3))
    except ValueError as e:
        out["rank"] = "jax_numpy_rank_promotion='raise'" in str(e)
    print(json.dumps(out))
"""


def _run_script(tmp_path: Path, name: str, source: str, **env_vars: str) -> Any:
    """Runs ``source`` as a script in a fresh interpreter (no PYTHONPATH, so
    lamina comes from the installed packages) and returns the JSON object of
    its last output line."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1", **env_vars)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_library_names_through_the_alias(tmp_path: Path) -> None:
    out = _run_script(tmp_path, "names.py", SCRIPT)
    assert out == {"version": "0.10.2", "version_info": [0, 10, 2], "in_dir": True,
                   "layout": "FormatLayout", "sync": True, "runtime_error": True, "rank": True,
                   "added": [],
                   "missing": "module 'jax' has no attribute 'new_ref': lamina does not "
                              "implement jax.new_ref"}


PRIVATE_SCRIPT = """
    import json
    import lamina.compat
    lamina.compat.install()

    import jax
    import jax.numpy as jnp
    from jax._src import compiler

    out = {"backends_before": dict(jax._src.xla_bridge._backends)}
    seen = []
    inner = compiler.backend_compile_and_load

    def forbid_cpu(backend, *args, **kwargs):
        seen.append(backend.platform)
        raise RuntimeError("cpu compiles are forbidden here")

    compiler.backend_compile_and_load = forbid_cpu
    try:
        jax.jit(lambda x: x * 3)(jnp.ones(2))
    except Exception as e:
        out["forbidden"] = "cpu compiles are forbidden here" in str(e)
    compiler.backend_compile_and_load = inner
    out["after"] = jax.jit(lambda x: x * 3)(jnp.ones(2)).tolist()
    out["seen"] = seen
    out["backends_after"] = sorted(jax._src.xla_bridge._backends)
    print(json.dumps(out))
"""


def test_private_modules_libraries_patch_or_read(tmp_path: Path) -> None:
    # chex wraps jax._src.compiler.backend_compile_and_load (restrict_backends)
    # and reads jax._src.xla_bridge._backends (set_n_cpu_devices)
    out = _run_script(tmp_path, "private.py", PRIVATE_SCRIPT, LAMINA_PLATFORMS="cpu")
    assert out == {"backends_before": {}, "forbidden": True, "after": [3.0, 3.0],
                   "seen": ["cpu"], "backends_after": ["cpu"]}
