"""One process of the warm-start tests: the demo's train steps with a cache directory.

``python tests/warm_start_worker.py CACHE_DIR [--trace-cache] [--no-pmap]``
runs one step of the demo's jitted MLP train step (over a ``NamedSharding``
mesh of 8 CPU devices) and, unless ``--no-pmap``, one of its ``pmap`` step,
with the persistent compilation cache in ``CACHE_DIR`` (every compilation
written), and with ``--trace-cache`` the persistent trace cache as well. It
prints one JSON line: how many compilations XLA ran in this process, what the
persistent caches did, the losses, the warnings, and the seconds from the
start of the process to the first result. Compilations are counted twice:
by the runtime's counter and by the ``log_compiles`` lines.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

os.environ.setdefault("LAMINA_NUM_CPU_DEVICES", "8")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


def _init_params(sizes: list[int]) -> dict[str, dict[str, object]]:
    """The demo's parameter tree, made on the host (no compilation before the step)."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {f"dense{i + 1}": {"w": (rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)
                                    ).astype(np.float32),
                              "b": np.zeros((n_out,), np.float32)}
            for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))}


def main(argv: list[str]) -> None:
    import numpy as np

    import lamina as lx
    from lamina import demo
    from lamina_interpreters_pxla import compiler, persistent_cache
    from lamina_sharded_jit import persistent_trace
    from lamina_sharded_jit.tracing import trace_stats

    from compile_counting import count_compiles

    compiles = count_compiles(lx)
    lx.config.update("compilation_cache_dir", argv[0])
    lx.config.update("persistent_cache_min_compile_time_secs", 0)
    if "--trace-cache" in argv:
        lx.config.update("persistent_trace_cache", True)
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        x, y = demo.make_spirals(64)
        params = _init_params([2, 32, 32, demo.NUM_CLASSES])
        mesh = lx.sharding.Mesh(np.array(lx.devices()), ("data",))
        step = demo.make_sharded_step(mesh)
        params, loss = step(params, x[:64], y[:64])
        first = float(np.asarray(loss))
        first_result = time.perf_counter() - START
        pmap_loss = None
        if "--no-pmap" not in argv:
            n = lx.local_device_count()
            replicated = lx.tree_util.tree_map(
                lambda p: np.broadcast_to(np.asarray(p), (n,) + p.shape), params)
            _, losses = demo.make_pmap_step()(replicated, x[:64].reshape(n, -1, 2),
                                              y[:64].reshape(n, -1))
            pmap_loss = float(np.asarray(losses)[0])
        caught = [f"{w.category.__name__}: {w.message}" for w in records]
    print(json.dumps({"xla_compiles": compiler.compile_stats["xla_compiles"],
                      "logged_compiles": len(compiles),
                      "disk": persistent_cache.disk_stats, "traces": trace_stats["traces"],
                      "trace_cache": persistent_trace.stats, "loss": first,
                      "pmap_loss": pmap_loss, "warnings": caught,
                      "first_result_s": first_result}))


if __name__ == "__main__":
    main(sys.argv[1:])
