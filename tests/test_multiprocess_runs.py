"""lamina across processes: 2 processes x 4 CPU devices on 127.0.0.1.

The processes run ``tests/multiprocess_worker.py`` under
``lamina.distributed.launch``; the expected values are computed here with
numpy. Each launched run pays for jaxlib's import and two clients, so one run
carries all the value checks, and the failure checks use short timeouts.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import multiprocess_worker as worker
from lamina.distributed import launch

pytestmark = pytest.mark.multiprocess

WORKER = str(Path(__file__).with_name("multiprocess_worker.py"))


def _run(scenario: str, out_dir: Path, *, timeout: float) -> tuple[launch.RunResult, str, float]:
    buf = io.StringIO()
    start = time.monotonic()
    result = launch.run([sys.executable, WORKER, scenario, str(out_dir)], 2, 4,
                        timeout=timeout, out=buf)
    return result, buf.getvalue(), time.monotonic() - start


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, np.ndarray]]:
    out = tmp_path_factory.mktemp("multiprocess")
    result, output, _ = _run("checks", out, timeout=150)
    assert result.status == 0, f"{result.reason}\n{output[-6000:]}"
    loaded = {}
    for pid in range(2):
        with np.load(out / f"p{pid}.npz") as data:
            loaded[pid] = {k: data[k] for k in data.files}
    return loaded


def _errors(results: dict[int, dict[str, np.ndarray]], check: str) -> None:
    for pid, values in results.items():
        error = values.get(f"error/{check}")
        if error is not None:
            pytest.fail(f"process {pid}: {check} failed:\n{error}")


def test_pmap_psum_spans_every_process(results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "pmap")
    g = worker.psum_input()
    total = np.broadcast_to(g.sum(axis=0), (4, 3))
    for pid, values in results.items():
        np.testing.assert_allclose(values["pmap/psum"], total)
        np.testing.assert_array_equal(values["pmap/axis_index"], np.arange(4) + 4 * pid)
        np.testing.assert_allclose(values["pmap/psum_again"], total * 8)


def test_jit_matmul_over_a_global_mesh(results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "matmul")
    a, b = worker.matmul_inputs()
    expected = a.astype(np.float64) @ b
    for pid, values in results.items():
        for key in ("gathered", "again", "from_host"):
            np.testing.assert_allclose(values[f"matmul/{key}"], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(values["matmul/local_rows"], expected[8 * pid:8 * pid + 8],
                                   rtol=1e-5, atol=1e-5)


def test_the_thread_guard_refuses_a_program_over_both_processes_from_another_thread(
        results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "thread_guard")
    for values in results.values():
        np.testing.assert_allclose(values["thread_guard/total"], worker.psum_input().sum(),
                                   rtol=1e-6)
        assert "multi-process" in str(values["thread_guard/refused"])


def test_shard_map_and_explicit_sharding_over_a_global_mesh(
        results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "shard_map")
    a, b = worker.matmul_inputs()
    product = a.astype(np.float64) @ b
    summed = product.reshape(2, 8, 12).sum(0) + np.repeat(np.arange(4), 3)
    for values in results.values():
        np.testing.assert_allclose(values["shard_map/product"], product, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(values["shard_map/psum"], summed, rtol=1e-5, atol=1e-4)


def _reference_step(params: dict[str, dict[str, np.ndarray]], x: np.ndarray, y: np.ndarray,
                    lr: float) -> tuple[float, dict[str, dict[str, np.ndarray]]]:
    """The demo's loss and SGD step, by hand in float64."""
    names = sorted(params, key=lambda n: int(n[len("dense"):]))
    p = {n: {k: v.astype(np.float64) for k, v in params[n].items()} for n in names}
    acts, pre = [x.astype(np.float64)], []
    for i, n in enumerate(names):
        h = acts[-1] @ p[n]["w"] + p[n]["b"]
        pre.append(h)
        acts.append(np.maximum(h, 0) if i < len(names) - 1 else h)
    logits = acts[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    onehot = np.eye(logits.shape[1])[y]
    loss = -np.mean(np.sum(onehot * log_probs, axis=1))
    grad = (np.exp(log_probs) - onehot) / len(y)
    new: dict[str, dict[str, np.ndarray]] = {}
    for i in range(len(names) - 1, -1, -1):
        n = names[i]
        new[n] = {"w": p[n]["w"] - lr * acts[i].T @ grad, "b": p[n]["b"] - lr * grad.sum(0)}
        if i:
            grad = (grad @ p[n]["w"].T) * (pre[i - 1] > 0)
    return float(loss), new


def test_demo_gradient_step(results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "grad_step")
    from lamina import demo

    params, x, y = worker.model_inputs()
    loss, new = _reference_step(params, x, y, demo.LEARNING_RATE)
    for values in results.values():
        np.testing.assert_allclose(values["grad_step/loss"], loss, rtol=1e-5)
        for layer, leaves in new.items():
            for leaf, value in leaves.items():
                np.testing.assert_allclose(values[f"grad_step/{layer}/{leaf}"], value,
                                           rtol=1e-4, atol=1e-5)


def test_sharded_jit_with_local_parts(results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "sharded_jit")
    g = worker.sharded_jit_input()
    for pid, values in results.items():
        np.testing.assert_allclose(values["sharded_jit/doubled"], 2 * g[4 * pid:4 * pid + 4])
        np.testing.assert_allclose(values["sharded_jit/column_sums"], g.sum(axis=0))


def test_global_array_constructors_and_allgather(
        results: dict[int, dict[str, np.ndarray]]) -> None:
    _errors(results, "arrays")
    g = worker.psum_input()
    wide = np.arange(64, dtype=np.float32).reshape(8, 8)
    halves = [worker.host_local_input(pid) for pid in range(2)]
    for pid, values in results.items():
        np.testing.assert_array_equal(values["arrays/host_local_to_global"],
                                      np.concatenate(halves))
        np.testing.assert_array_equal(values["arrays/global_to_host_local"], halves[pid])
        np.testing.assert_array_equal(values["arrays/process_local"], g)
        np.testing.assert_array_equal(values["arrays/process_local_cols"], wide)
        np.testing.assert_array_equal(values["arrays/single_device"], g)
        np.testing.assert_array_equal(values["arrays/allgather_stacked"], [[0, 0], [1, 1]])
        np.testing.assert_array_equal(values["arrays/allgather_tiled"], [0, 0, 1, 1])
        np.testing.assert_array_equal(values["arrays/broadcast"], [10, 10])


def test_launcher_stops_the_run_when_a_process_exits_early(tmp_path: Path) -> None:
    result, output, took = _run("exit_early", tmp_path, timeout=60)
    assert result.status == 3, output
    assert "process 1 failed with exit status 3" in result.reason, result.reason
    assert "[p1] process 1 leaves early" in output
    assert took < 30, (took, output)


def _spawn(scenario: str, out_dir: Path, timeout: float = 60) -> tuple[list[int], list[str],
                                                                    float]:
    """Starts two processes of a run by hand (no launcher to stop them)."""
    port = launch.free_port()
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, WORKER, scenario, str(out_dir)],
                              env=launch.process_env(pid, 2, port, 4),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for pid in range(2)]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            proc.kill()
    return [p.returncode for p in procs], outputs, time.monotonic() - start


def test_a_peer_exiting_early_fails_the_barrier(tmp_path: Path) -> None:
    """Without the launcher: process 0 gets a clear error within the timeout."""
    codes, outputs, took = _spawn("exit_early", tmp_path)
    assert codes == [0, 3], outputs
    assert "process 0 caught after" in outputs[0], outputs[0]
    assert "sync_global_devices('after the exit'): not every process reached" in outputs[0]
    assert took < 40, took


def test_inconsistent_num_processes(tmp_path: Path) -> None:
    codes, outputs, _ = _spawn("mismatch", tmp_path)
    assert codes == [0, 0], outputs
    assert ("process 0 caught: lamina.distributed.initialize: inconsistent arguments: process 0 "
            "was given num_processes=2, but process 1 was given num_processes=3") in outputs[0]
    assert "process 1 caught: lamina.distributed.initialize: inconsistent arguments" \
        in outputs[1]


def test_initialize_errors() -> None:
    env: dict[str, Any] = dict(os.environ, LAMINA_NUM_CPU_DEVICES="4")
    proc = subprocess.run([sys.executable, WORKER, "errors"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "could not reach the coordinator at 127.0.0.1:" in proc.stdout
    assert "should only be called once" in proc.stdout
    assert "a backend was already created" in proc.stdout


def test_a_lost_peer_is_an_exception_not_an_abort(tmp_path: Path) -> None:
    """Process 1 dies without the launcher: jaxlib used to abort process 0
    when the heartbeat timed out; now process 0 gets ProcessLostError."""
    codes, outputs, took = _spawn("lost_peer", tmp_path, timeout=40)
    assert codes == [0, 5], outputs
    assert "process 0 caught ProcessLostError after" in outputs[0], outputs[0]
    assert "process 1 of the run stopped sending heartbeats" in outputs[0], outputs[0]
    assert "then sync_global_devices: sync_global_devices('after the loss'): the run is " \
        "broken" in outputs[0], outputs[0]
    assert took < 30, took


def test_a_duplicate_process_id_is_named(tmp_path: Path) -> None:
    codes, outputs, _ = _spawn("duplicate_id", tmp_path, timeout=40)
    assert codes[1] == 0, outputs
    assert "process started as 1 caught: lamina.distributed.initialize: process 0 cannot " \
        "start the coordinator service" in outputs[1], outputs[1]
    assert "may also have been given process_id=0 (a duplicate process_id" in outputs[1]
    # the first one cannot know: it waits for a process 1 that never comes
    assert "not all 2 processes joined" in outputs[0], outputs[0]

