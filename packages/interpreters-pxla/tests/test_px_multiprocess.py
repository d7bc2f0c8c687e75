"""Two processes x 4 CPU devices through the distributed-client hook."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.multiprocess

WORKER = """
import sys
import numpy as np
from jaxlib import _jax
import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import backends
from lamina_tracing_core import lax

pid, port = int(sys.argv[1]), sys.argv[2]
address = f"127.0.0.1:{port}"
service = _jax.get_distributed_runtime_service(address, 2) if pid == 0 else None
client = _jax.get_distributed_runtime_client(address, pid, init_timeout=60)
client.connect()
collectives = _jax.make_gloo_tcp_collectives(distributed_client=client)
backends.set_distributed_settings(backends.DistributedSettings(client, pid, 2, collectives))
px.config.update("num_cpu_devices", 4)

assert px.device_count() == 8 and px.local_device_count() == 4
assert px.process_index() == pid and px.process_count() == 2
mesh = px.Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))
sharding = px.NamedSharding(mesh, px.P(("x", "y")))
host = np.arange(16, dtype=np.float32)
x = px.device_put(host, sharding)           # each process puts its own 4 shards
assert not x.is_fully_addressable
shards = x.addressable_shards
assert len(shards) == 4
for s in shards:
    np.testing.assert_array_equal(np.asarray(s.data), host[s.index])
y = lax.sin(x)                              # one SPMD program over both processes
for s in y.addressable_shards:
    np.testing.assert_allclose(np.asarray(s.data), np.sin(host[s.index]), rtol=1e-6)
total = lax.reduce_sum(x, (0,))             # needs an all-reduce across processes
assert float(np.asarray(total.addressable_shards[0].data)) == host.sum()
try:
    np.asarray(x)
except RuntimeError as e:
    assert "other processes" in str(e)
else:
    raise AssertionError("fetching a non-addressable array must fail")
client.wait_at_barrier("done", 60000)
print(f"process {pid} ok", flush=True)
del x, y, total, shards
client.shutdown()
if service is not None:
    service.shutdown()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_processes_share_one_mesh() -> None:
    port = str(_free_port())
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"}
    env.pop("XLA_FLAGS", None)
    code = textwrap.dedent(WORKER)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(pid), port], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for pid in range(2)]
    outputs = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        outputs.append((proc.returncode, out, err))
    for pid, (rc, out, err) in enumerate(outputs):
        assert rc == 0, err[-3000:]
        assert f"process {pid} ok" in out


class _FailingClient:
    """A distributed client whose barriers fail at once, as a barrier that
    another process timed out (with its own shorter timeout) does."""

    def wait_at_barrier(self, barrier_id: str, timeout_in_ms: int) -> None:
        raise RuntimeError("DEADLINE_EXCEEDED: Barrier timed out. Id: x")


def test_barrier_error_gives_the_real_wait() -> None:
    from lamina_interpreters_pxla import multihost_utils

    saved = list(multihost_utils._peer_failure)
    try:
        with pytest.raises(multihost_utils.ProcessSyncError) as info:
            multihost_utils._coordination_barrier(_FailingClient(), "late", 300.0)
    finally:
        multihost_utils._peer_failure[:] = saved
    message = str(info.value)
    assert "within 300s" not in message
    assert "this process waited 0.0s of its timeout_seconds=300;" in message, message
    assert "Barrier timed out" in message
