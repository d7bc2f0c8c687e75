"""What a warm start loads: a trace cache hit needs no MLIR and no lowering.

A first process fills the persistent caches with a jitted SGD step of a small
MLP (``grad``, ``lamina.numpy``, a pytree of parameters); a second, fresh
process calls the same step with the same cache directory and reports, after
its first result, which modules it imported (beyond what the interpreter
and NumPy had loaded before lamina). The program comes from the
trace cache (its module compiled from the stored bytecode, unparsed) and the
executable from the compilation cache, so neither MLIR's Python bindings
(``jaxlib.mlir.ir``, the dialect classes) nor lamina's lowering stack
(``lamina_mlir_lowering.lowering``, the rules) may be there;
a process that must lower (the compilation cache alone, the first time)
loads them, and the next such process, which traces again but finds the
lowered module in the persistent lowering cache, does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = '''
import json, sys
import numpy as np
floor = set(sys.modules)  # what the interpreter (site hooks, coverage) and numpy loaded
import lamina as lx
import lamina.numpy as jnp

lx.config.update("jax_compilation_cache_dir", sys.argv[1])
lx.config.update("jax_persistent_cache_min_compile_time_secs", 0)
lx.config.update("persistent_trace_cache", sys.argv[2] == "trace")

def loss(params, x, y):
    h = x
    for w, b in params:
        h = jnp.tanh(jnp.dot(h, w) + b)
    return jnp.mean((h - y) ** 2)

@lx.jit
def step(params, x, y):
    value, grads = lx.value_and_grad(loss)(params, x, y)
    return lx.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value

rng = np.random.default_rng(0)
params = [(rng.standard_normal((8, 8), dtype=np.float32), np.zeros(8, np.float32))
          for _ in range(3)]
x = rng.standard_normal((4, 8), dtype=np.float32)
_, value = step(params, x, x)
from lamina_sharded_jit import persistent_lowering, persistent_trace
print(json.dumps({"loss": float(value), "hits": persistent_trace.stats["hits"],
                  "lowering_hits": persistent_lowering.stats["hits"],
                  "modules": sorted(set(sys.modules) - floor)}))
'''

LOWERING = ("jaxlib.mlir.ir", "jaxlib.mlir.dialects.stablehlo", "jaxlib.mlir.dialects.sdy",
            "jaxlib.mlir.dialects.func", "lamina_mlir_lowering.lowering",
            "lamina_mlir_lowering.rules", "lamina_mlir_lowering.lax_rules",
            "lamina_sharded_jit.lowering_rules")


#: what the step does not use, so a warm start (either cache) must not load it:
#: loaded on first use (PEP 562) by lamina.numpy, lax, control flow and the rule tables
UNUSED = ("lamina_tracing_core.numpy.linalg", "lamina_tracing_core.numpy.fft",
          "lamina_tracing_core.numpy.polynomial", "lamina_tracing_core.numpy.histograms",
          "lamina_tracing_core.numpy.setops", "lamina_tracing_core.numpy.windows",
          "lamina_tracing_core.lax.linalg", "lamina_mlir_lowering.lax_rules.linalg",
          "jaxlib.cpu._lapack", "sysconfig")
#: ... and what only the lowering rules load (those of control flow import it)
UNUSED_ON_A_HIT = ("lamina_tracing_core.control_flow.scan",
                   "lamina_tracing_core.control_flow.cond",
                   "lamina_tracing_core.control_flow.loops")


def _run(cache_dir: Path, mode: str) -> dict[str, Any]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(cache_dir), mode], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


def test_a_trace_cache_hit_imports_no_mlir_and_no_lowering(tmp_path: Path) -> None:
    cold = _run(tmp_path, "trace")
    assert cold["hits"] == 0
    assert set(LOWERING) <= set(cold["modules"])  # the cold process lowered
    warm = _run(tmp_path, "trace")
    assert warm["hits"] == 1, warm["hits"]
    assert warm["loss"] == cold["loss"]
    loaded = [m for m in LOWERING if m in warm["modules"]]
    assert loaded == [], f"a trace cache hit imported {loaded}"
    # the compilation cache alone traces and lowers: the same modules are back
    lowered = _run(tmp_path, "compile")
    assert lowered["hits"] == 0 and lowered["lowering_hits"] == 0
    assert lowered["loss"] == cold["loss"]
    assert set(LOWERING) <= set(lowered["modules"])
    # ... once: the next process traces, and takes the module from the lowering cache
    again = _run(tmp_path, "compile")
    assert again["hits"] == 0 and again["lowering_hits"] == 1
    assert again["loss"] == cold["loss"]
    loaded = [m for m in LOWERING if m in again["modules"]]
    assert loaded == [], f"a lowering cache hit imported {loaded}"


def test_a_warm_start_loads_none_of_the_parts_the_step_does_not_use(tmp_path: Path) -> None:
    _run(tmp_path, "trace")
    for mode, unused in (("trace", UNUSED + UNUSED_ON_A_HIT), ("compile", UNUSED)):
        # a trace cache hit; then a process that traces and lowers again
        loaded = [m for m in unused if m in _run(tmp_path, mode)["modules"]]
        assert loaded == [], f"a warm start ({mode}) imported {loaded}"
