"""jax and lamina in one process: both keep working (a ``peer`` test: it runs
where jax 0.10.2 is installed beside lamina, ``hatch run peer:test``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

JAX_PYTHON = pathlib.Path(sys.executable)
PACKAGES = pathlib.Path(__file__).resolve().parents[2]
SRC_DIRS = [str(PACKAGES / name / "src") for name in (
    "linear-util", "tracing-core", "mlir-lowering", "interpreters-pxla")]

# The child process runs lamina from the source tree, so this needs both.
pytestmark = [
    pytest.mark.peer,
    pytest.mark.skipif(not all(pathlib.Path(d).is_dir() for d in SRC_DIRS),
                       reason="not run from the source tree (e.g. against an installed wheel)"),
]

JAX_PART = """
import jax
import jax.numpy as jnp
ja = jax.device_put(np.arange(4, dtype=np.float32), jax.devices()[1])
jb = ja + 1
assert np.asarray(jb).tolist() == [1.0, 2.0, 3.0, 4.0], jb
assert jax.jit(lambda v: v * 2)(np.ones(3)).tolist() == [2.0, 2.0, 2.0]
jm = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
js = jax.device_put(np.ones((8, 8), np.float32), jax.sharding.NamedSharding(
    jm, jax.sharding.PartitionSpec("x", "y")))
assert float(jnp.sum(js)) == 64.0
print("jax ok", flush=True)
"""

LAMINA_PART = """
import lamina_interpreters_pxla as px
from lamina_tracing_core import dtypes, lax
la = px.device_put(np.arange(4, dtype=np.float32), px.devices()[1])
lb = la + 1
assert lb.tolist() == [1.0, 2.0, 3.0, 4.0], lb
assert lax.add(la, la).tolist() == [0.0, 2.0, 4.0, 6.0]
lm = px.Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))
ls = px.device_put(np.ones((8, 8), np.float32), px.NamedSharding(lm, px.P("x", "y")))
assert [s.data.shape for s in ls.addressable_shards] == [(4, 2)] * 8
assert float(lax.reduce_sum(ls, (0, 1))) == 64.0
dtypes.enable_x64(True)
assert px.device_put(np.arange(2, dtype=np.int64)).dtype == np.int64
assert lax.add(1.0, 2.0).dtype == np.float64
dtypes.enable_x64(False)
assert px.device_put(np.arange(2, dtype=np.int64)).dtype == np.int32
print("lamina ok", flush=True)
"""


CROSS = """
# data crosses over through numpy
assert jnp.asarray(np.asarray(la)).tolist() == [0.0, 1.0, 2.0, 3.0]
assert px.device_put(ja).tolist() == [0.0, 1.0, 2.0, 3.0]
assert px.device_put({"j": ja}, px.devices()[3])["j"].device == px.devices()[3]
print("cross ok", flush=True)
"""


def _run(first: str, second: str, last: str) -> subprocess.CompletedProcess[str]:
    """Runs ``first``, then ``second``, then ``first`` again (each library is
    checked again after the other one has initialized and patched what it
    patches), then ``last``."""
    code = "import numpy as np\n" + "".join(textwrap.dedent(p)
                                              for p in (first, second, first, last))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(SRC_DIRS),
           "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
           "TF_CPP_MIN_LOG_LEVEL": "1"}
    return subprocess.run([str(JAX_PYTHON), "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("order", ["jax_first", "lamina_first"])
def test_jax_and_lamina_in_one_process(order: str) -> None:
    first, second = (JAX_PART, LAMINA_PART) if order == "jax_first" else (LAMINA_PART,
                                                                          JAX_PART)
    proc = _run(first, second, CROSS)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    first_name = "jax" if order == "jax_first" else "lamina"
    second_name = "lamina" if order == "jax_first" else "jax"
    assert proc.stdout.count(f"{first_name} ok") == 2, proc.stdout
    assert proc.stdout.count(f"{second_name} ok") == 1, proc.stdout
    assert "cross ok" in lines
