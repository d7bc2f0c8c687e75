"""The program every process of the multi-process tests runs.

``python tests/multiprocess_worker.py SCENARIO OUT_DIR``, started by
``lamina.distributed.launch`` (or by hand with its environment), with one of:

- ``checks``: joins the run and computes the values the tests compare with
  numpy: a global ``psum`` in ``pmap``, a jitted matmul over a 2x4 global
  mesh, a gradient step of the demo model, ``sharded_jit`` with local parts,
  the global-array constructors and ``process_allgather``. Each process saves
  its results to ``OUT_DIR/p<id>.npz``; structural facts are asserted here.
- ``exit_early``: process 1 exits (status 3) right after joining; the others
  wait at a barrier with a short timeout and report the error they get.
- ``mismatch``: the processes disagree on ``num_processes``; both must say so.
- ``errors``: a single process checks ``initialize``'s errors.
- ``lost_peer``: process 1 dies without a launcher; process 0 must get
  ``ProcessLostError`` naming it (a 3 s heartbeat timeout).
- ``duplicate_id``: both processes are given ``process_id=0``.

Several checks share one run because each run pays for importing jaxlib and
creating the clients in every process.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

# --- inputs shared with the tests (which compute the expected values) ----------------------
MATMUL_SHAPES = ((16, 8), (8, 12))
PSUM_SHAPE = (8, 3)
MODEL_SIZES = (2, 16, 3)
BATCH = 32
SHARDED_JIT_SHAPE = (8, 6)


def matmul_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return (rng.standard_normal(MATMUL_SHAPES[0]).astype(np.float32),
            rng.standard_normal(MATMUL_SHAPES[1]).astype(np.float32))


def psum_input() -> np.ndarray:
    return np.arange(np.prod(PSUM_SHAPE), dtype=np.float32).reshape(PSUM_SHAPE)


def model_inputs() -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    params = {}
    for i, (n_in, n_out) in enumerate(zip(MODEL_SIZES[:-1], MODEL_SIZES[1:])):
        params[f"dense{i + 1}"] = {
            "w": (rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in)).astype(np.float32),
            "b": (rng.standard_normal(n_out) * 0.1).astype(np.float32)}
    x = rng.standard_normal((BATCH, MODEL_SIZES[0])).astype(np.float32)
    y = rng.integers(0, MODEL_SIZES[-1], BATCH).astype(np.int32)
    return params, x, y


def host_local_input(pid: int) -> np.ndarray:
    return np.arange(16, dtype=np.float32).reshape(4, 4) + 100 * pid


def sharded_jit_input() -> np.ndarray:
    return np.arange(np.prod(SHARDED_JIT_SHAPE), dtype=np.float32).reshape(SHARDED_JIT_SHAPE)


# --- scenarios ---------------------------------------------------------------------------------
def _timed(results: dict[str, Any], name: str, check: Callable[[], None]) -> None:
    start = time.perf_counter()
    check()
    results[f"seconds/{name}"] = np.float64(time.perf_counter() - start)


def checks(out_dir: str) -> None:
    import lamina.distributed

    lamina.distributed.initialize(initialization_timeout=60)
    import lamina as lx

    pid = lx.process_index()
    assert lx.process_count() == 2 and lx.device_count() == 8 and lx.local_device_count() == 4
    assert all(d.process_index == pid for d in lx.local_devices())
    results: dict[str, Any] = {}
    for name, check in (("pmap", _check_pmap), ("matmul", _check_matmul),
                        ("grad_step", _check_grad_step), ("arrays", _check_arrays),
                        ("sharded_jit", _check_sharded_jit), ("shard_map", _check_shard_map),
                        ("thread_guard", _check_thread_guard)):
        try:
            _timed(results, name, lambda check=check: check(lx, pid, results))
        except Exception:  # recorded for the test; every process fails alike
            results[f"error/{name}"] = np.array(traceback.format_exc())
    from lamina import multihost_utils
    multihost_utils.sync_global_devices("checks done", timeout_seconds=60)
    np.savez(os.path.join(out_dir, f"p{pid}.npz"), **results)
    print(f"process {pid}: checks done", flush=True)


def _check_pmap(lx: Any, pid: int, results: dict[str, Any]) -> None:
    g = psum_input()
    local = g[4 * pid:4 * (pid + 1)]  # this process's 4 entries of the 8-way map
    f = lx.pmap(lambda x: (lx.lax.psum(x, "i"), lx.lax.axis_index("i")), axis_name="i")
    total, index = f(local)
    assert total.shape == (4, 3) and total.is_fully_addressable
    results["pmap/psum"] = np.asarray(total)
    results["pmap/axis_index"] = np.asarray(index)
    results["pmap/psum_again"] = np.asarray(f(total)[0])  # the cached executable


def _global_mesh(lx: Any) -> Any:
    from lamina.sharding import Mesh
    return Mesh(np.array(lx.devices()).reshape(2, 4), ("x", "y"))


def _check_matmul(lx: Any, pid: int, results: dict[str, Any]) -> None:
    from lamina import multihost_utils
    from lamina.sharding import NamedSharding, PartitionSpec as P

    mesh = _global_mesh(lx)
    a, b = matmul_inputs()
    sa, sb = NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))
    out_sharding = NamedSharding(mesh, P("x", None))
    ga = lx.make_array_from_callback(a.shape, sa, lambda index: a[index])
    gb = lx.make_array_from_callback(b.shape, sb, lambda index: b[index])
    matmul = lx.jit(lambda x, y: x @ y, out_shardings=out_sharding)
    out = matmul(ga, gb)
    assert out.shape == (16, 12) and not out.is_fully_addressable
    assert out.sharding == out_sharding and len(out.addressable_shards) == 4
    for shard in out.addressable_shards:
        assert shard.data.shape == (8, 12) and shard.device.process_index == pid
    results["matmul/gathered"] = multihost_utils.process_allgather(out, tiled=True)
    results["matmul/local_rows"] = np.asarray(out.addressable_data(0))
    again = matmul(ga, gb)  # the dispatch fast path
    results["matmul/again"] = multihost_utils.process_allgather(again, tiled=True)
    # numpy arguments: every process passes the whole value, each puts its part
    from_host = lx.jit(lambda x, y: x @ y, in_shardings=(sa, sb), out_shardings=out_sharding)
    results["matmul/from_host"] = multihost_utils.process_allgather(from_host(a, b), tiled=True)


def _check_grad_step(lx: Any, pid: int, results: dict[str, Any]) -> None:
    from lamina import demo
    from lamina.sharding import Mesh

    params, x, y = model_inputs()
    mesh = Mesh(np.array(lx.devices()), ("data",))
    step = demo.make_sharded_step(mesh)
    new_params, loss = step(params, x, y)
    assert new_params["dense1"]["w"].is_fully_replicated
    results["grad_step/loss"] = np.asarray(loss)
    for layer, leaves in new_params.items():
        for leaf, value in leaves.items():
            results[f"grad_step/{layer}/{leaf}"] = np.asarray(value)


def _check_arrays(lx: Any, pid: int, results: dict[str, Any]) -> None:
    from lamina import multihost_utils
    from lamina.sharding import NamedSharding, PartitionSpec as P

    mesh = _global_mesh(lx)
    g = psum_input()
    local = g[4 * pid:4 * (pid + 1)]  # this process's half of the rows
    by_rows = NamedSharding(mesh, P("x"))
    built = lx.make_array_from_process_local_data(by_rows, local)
    assert built.shape == (8, 3) and not built.is_fully_addressable
    results["arrays/process_local"] = multihost_utils.process_allgather(built, tiled=True)
    # columns split across processes, rows over each process's own devices
    wide = np.arange(64, dtype=np.float32).reshape(8, 8)
    by_cols = lx.make_array_from_process_local_data(NamedSharding(mesh, P("y", "x")),
                                                    wide[:, 4 * pid:4 * (pid + 1)])
    assert by_cols.shape == (8, 8)
    results["arrays/process_local_cols"] = multihost_utils.process_allgather(by_cols, tiled=True)
    cols = NamedSharding(mesh, P("x", None))
    pieces = [lx.device_put(g[index], device)
              for device, index in cols.addressable_devices_indices_map(g.shape).items()]
    single = lx.make_array_from_single_device_arrays(g.shape, cols, pieces[::-1])
    results["arrays/single_device"] = multihost_utils.process_allgather(single, tiled=True)
    # host-local <-> global over the 2x4 mesh (each process owns one row of it)
    host_local = host_local_input(pid)
    as_global = multihost_utils.host_local_array_to_global_array(host_local, mesh, P("x", "y"))
    assert as_global.shape == (8, 4) and not as_global.is_fully_addressable
    results["arrays/host_local_to_global"] = multihost_utils.process_allgather(as_global,
                                                                               tiled=True)
    back = multihost_utils.global_array_to_host_local_array(as_global, mesh, P("x", "y"))
    assert back.is_fully_addressable
    results["arrays/global_to_host_local"] = np.asarray(back)
    mine = np.full((2,), pid, np.int32)
    results["arrays/allgather_stacked"] = multihost_utils.process_allgather(mine)
    results["arrays/allgather_tiled"] = multihost_utils.process_allgather(mine, tiled=True)
    results["arrays/broadcast"] = multihost_utils.broadcast_one_to_all(mine + 10)


def _check_sharded_jit(lx: Any, pid: int, results: dict[str, Any]) -> None:
    from lamina.sharded_jit import PartitionSpec as P, sharded_jit

    g = sharded_jit_input()
    local = g[4 * pid:4 * (pid + 1)]  # this process's rows
    f = sharded_jit(lambda x: (x * 2.0, x.sum(axis=0)), in_parts=P(8, 1),
                    out_parts=(P(8, 1), None), local_in_parts=P(4, 1),
                    local_out_parts=(P(4, 1), None), num_partitions=8,
                    local_num_partitions=4)
    doubled, column_sums = f(local)
    results["sharded_jit/doubled"] = np.asarray(doubled)
    results["sharded_jit/column_sums"] = np.asarray(column_sums)


def _check_shard_map(lx: Any, pid: int, results: dict[str, Any]) -> None:
    """shard_map and explicit sharding over the global 2x4 mesh of both processes."""
    from lamina import multihost_utils
    from lamina.sharding import NamedSharding, PartitionSpec as P

    mesh = lx.make_mesh((2, 4), ("x", "y"))  # Explicit axes
    a, b = matmul_inputs()
    with lx.set_mesh(mesh):
        ga = lx.make_array_from_callback(a.shape, NamedSharding(mesh, P("x", None)),
                                         lambda index: a[index])
        gb = lx.make_array_from_callback(b.shape, NamedSharding(mesh, P(None, "y")),
                                         lambda index: b[index])
        assert str(lx.typeof(ga)) == "float32[16@x,8]", lx.typeof(ga)
        product = lx.jit(lambda x, y: x @ y)(ga, gb)
        assert str(lx.typeof(product)) == "float32[16@x,12@y]", lx.typeof(product)
        results["shard_map/product"] = multihost_utils.process_allgather(product, tiled=True)
        summed = lx.jit(lx.shard_map(lambda blk: lx.lax.psum(blk, "x") + lx.lax.axis_index("y"),
                                     in_specs=P("x", "y"), out_specs=P(None, "y")))(product)
        assert str(lx.typeof(summed)) == "float32[8,12@y]", lx.typeof(summed)
        results["shard_map/psum"] = multihost_utils.process_allgather(summed, tiled=True)


def _check_thread_guard(lx: Any, pid: int, results: dict[str, Any]) -> None:
    """Inside ``thread_guard(True)`` a program over both processes runs from this
    thread, and is refused from another one (in both processes, before launch)."""
    import threading

    from lamina.sharding import NamedSharding, PartitionSpec as P

    mesh = _global_mesh(lx)
    g = psum_input()
    x = lx.make_array_from_callback(g.shape, NamedSharding(mesh, P("x")), lambda i: g[i])
    total = lx.jit(lambda v: v.sum(), out_shardings=NamedSharding(mesh, P()))
    refused: list[str] = []

    def from_another_thread() -> None:
        try:
            total(x).block_until_ready()
        except Exception as e:  # jaxlib's runtime error
            refused.append(str(e))

    with lx.thread_guard(True):
        results["thread_guard/total"] = np.asarray(total(x))
        worker = threading.Thread(target=from_another_thread)
        worker.start()
        worker.join(timeout=60)
    assert refused and "multi-process" in refused[0], refused
    results["thread_guard/refused"] = np.array(refused[0])


def exit_early(out_dir: str) -> None:
    import lamina.distributed

    lamina.distributed.initialize(initialization_timeout=60)
    import lamina as lx
    from lamina import multihost_utils

    pid = lx.process_index()
    if pid == 1:
        print("process 1 leaves early", flush=True)
        os._exit(3)
    start = time.monotonic()
    try:
        multihost_utils.sync_global_devices("after the exit", timeout_seconds=2)
    except multihost_utils.ProcessSyncError as e:
        print(f"process {pid} caught after {time.monotonic() - start:.1f}s: {e}", flush=True)
        return
    raise AssertionError("sync_global_devices did not fail although process 1 exited")


def mismatch(out_dir: str) -> None:
    """Process 0 is told the run has 2 processes, process 1 that it has 3."""
    import lamina.distributed as dist

    pid = int(os.environ["LAMINA_PROCESS_ID"])
    try:
        dist.initialize(num_processes=2 + pid, initialization_timeout=60)
    except dist.DistributedError as e:
        print(f"process {pid} caught: {e}", flush=True)
        return
    raise AssertionError("initialize accepted inconsistent num_processes")


def errors(out_dir: str) -> None:
    import socket

    import lamina.distributed as dist

    def expect(fragment: str, **kwargs: Any) -> float:
        start = time.monotonic()
        try:
            dist.initialize(**kwargs)
        except dist.DistributedError as e:
            assert fragment in str(e), (fragment, str(e))
            print(f"error ok: {e}", flush=True)
            return time.monotonic() - start
        raise AssertionError(f"initialize({kwargs}) did not fail")

    for key in ("LAMINA_COORDINATOR_ADDRESS", "LAMINA_NUM_PROCESSES", "LAMINA_PROCESS_ID"):
        os.environ.pop(key, None)
    expect("missing coordinator_address, num_processes, process_id")
    expect("process_id must be an int in [0, 2)", coordinator_address="127.0.0.1:1",
           num_processes=2, process_id=2)
    expect("must be 'host:port'", coordinator_address="localhost", num_processes=2,
           process_id=0)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    took = expect(f"could not reach the coordinator at {dead}", coordinator_address=dead,
                  num_processes=2, process_id=1, initialization_timeout=2)
    assert took < 10, took
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.initialize(f"127.0.0.1:{port}", 1, 0, initialization_timeout=30)
    expect("should only be called once", coordinator_address=f"127.0.0.1:{port}",
           num_processes=1, process_id=0)
    from lamina.distributed import runtime
    try:  # a second process claiming the id this one holds
        runtime._claim_process_id(dist.distributed_client(), f"127.0.0.1:{port}", 0)
    except dist.DistributedError as e:
        assert "process_id 0 is a duplicate: it was already taken by" in str(e), str(e)
        print(f"error ok: {e}", flush=True)
    else:
        raise AssertionError("a second claim of process_id 0 was accepted")
    import lamina as lx
    assert lx.process_count() == 1 and lx.device_count() == 4
    dist.shutdown()
    dist.shutdown()  # twice is fine
    expect("a backend was already created", coordinator_address=f"127.0.0.1:{port}",
           num_processes=1, process_id=0)
    print(f"unreachable coordinator failed after {took:.1f}s", flush=True)


def lost_peer(out_dir: str) -> None:
    """Process 1 dies (no launcher to stop the rest); process 0 keeps running
    Python code and must get ``ProcessLostError`` naming process 1."""
    import lamina.distributed as dist

    dist.initialize(initialization_timeout=60, heartbeat_timeout_seconds=3)
    from lamina import multihost_utils

    pid = int(os.environ["LAMINA_PROCESS_ID"])
    multihost_utils.sync_global_devices("both joined", timeout_seconds=30)
    if pid == 1:
        print("process 1 dies", flush=True)
        os._exit(5)
    start = time.monotonic()
    try:
        while time.monotonic() - start < 20:
            time.sleep(0.05)
    except dist.ProcessLostError as e:
        print(f"process 0 caught {type(e).__name__} after {time.monotonic() - start:.1f}s: "
              f"{e}", flush=True)
        try:
            multihost_utils.sync_global_devices("after the loss", timeout_seconds=30)
        except multihost_utils.ProcessSyncError as sync_error:
            print(f"then sync_global_devices: {sync_error}", flush=True)
        return
    raise AssertionError("process 0 was not told that process 1 was lost")


def duplicate_id(out_dir: str) -> None:
    """Both processes claim process_id=0; the second one started must say so."""
    import lamina.distributed as dist

    started_as = int(os.environ["LAMINA_PROCESS_ID"])
    if started_as == 1:
        time.sleep(2)  # the first one has started the service by now
    try:
        dist.initialize(process_id=0, initialization_timeout=6)
    except dist.DistributedError as e:
        print(f"process started as {started_as} caught: {e}", flush=True)
        return
    raise AssertionError("initialize accepted a duplicate process_id")


SCENARIOS: dict[str, Callable[[str], None]] = {
    "checks": checks, "exit_early": exit_early, "mismatch": mismatch, "errors": errors,
    "lost_peer": lost_peer, "duplicate_id": duplicate_id,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]](sys.argv[2] if len(sys.argv) > 2 else ".")
