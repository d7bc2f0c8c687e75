"""One process of the multi-process cache test (``tests/test_multiprocess_cache.py``).

``python tests/multiprocess_cache_worker.py CACHE_DIR OUT_DIR``, started by
``lamina.distributed.launch`` (2 processes x 4 CPU devices): joins the run,
turns on both persistent caches in ``CACHE_DIR`` (shared by the processes,
every compilation written), runs one step of the demo's jitted train step
over the 8-device global mesh and one global ``psum`` in ``pmap``, and writes
``OUT_DIR/p<id>.json``: how many compilations XLA ran here (the runtime's
counter and the ``log_compiles`` lines), what both caches did, the loss and
the sum, and the warnings raised.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

SIZES = (2, 16, 3)
BATCH = 32


def _inputs() -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray, np.ndarray]:
    """The same host values in every process (each puts its part)."""
    rng = np.random.default_rng(7)
    params = {f"dense{i + 1}": {"w": (rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)
                                      ).astype(np.float32),
                                "b": np.zeros((n_out,), np.float32)}
              for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:]))}
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=(BATCH,)).astype(np.int32)
    return params, x, y


def main(cache_dir: str, out_dir: str) -> None:
    import lamina.distributed

    lamina.distributed.initialize(initialization_timeout=60)
    import lamina as lx
    from lamina import demo, multihost_utils
    from lamina.sharding import Mesh
    from lamina_interpreters_pxla import compiler, persistent_cache
    from lamina_sharded_jit import persistent_trace
    from lamina_sharded_jit.tracing import trace_stats

    from compile_counting import count_compiles

    compiles = count_compiles(lx)
    lx.config.update("compilation_cache_dir", cache_dir)
    lx.config.update("persistent_cache_min_compile_time_secs", 0)
    lx.config.update("persistent_trace_cache", True)
    pid = lx.process_index()
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        params, x, y = _inputs()
        step = demo.make_sharded_step(Mesh(np.array(lx.devices()), ("data",)))
        _, loss = step(params, x, y)
        local = np.full((4, 3), pid + 1.0, np.float32)
        total = lx.pmap(lambda v: lx.lax.psum(v, "i"), axis_name="i")(local)
        report = {
            "xla_compiles": compiler.compile_stats["xla_compiles"],
            "logged_compiles": len(compiles), "disk": dict(persistent_cache.disk_stats),
            "traces": trace_stats["traces"], "trace_cache": dict(persistent_trace.stats),
            "loss": float(np.asarray(loss)), "psum": np.asarray(total).tolist(),
        }
        multihost_utils.sync_global_devices("cache checks done", timeout_seconds=60)
    report["warnings"] = [f"{w.category.__name__}: {w.message}" for w in records]
    with open(os.path.join(out_dir, f"p{pid}.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
