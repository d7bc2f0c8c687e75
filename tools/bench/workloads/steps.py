"""Steady-state step times of compiled programs (compile stays in warm-up)."""

from __future__ import annotations

from typing import Any

from ..adapters import Adapter
from ..registry import STEP, Bench, workload
from .models import block_leaves, make_train_step, mlp_batch, mlp_params

MESH_DEVICES = 8
MATMUL_SIZE = 512


@workload(
    "step_mlp_train",
    area="step",
    goal=STEP,
    description="jitted 16-layer MLP SGD step, params fed back each step",
    report_memory=True,
    budget_s=0.6,
    warmup_iters=3,
)
def step_mlp_train(a: Adapter) -> Bench:
    step = a.api.jit(make_train_step(a))
    x, y = (a.api.device_put(v) for v in mlp_batch())
    state = [a.api.device_put(mlp_params())]

    def run() -> Any:
        new_params, loss = step(state[0], x, y)
        block_leaves((new_params, loss))
        state[0] = new_params
        return loss

    def info() -> dict[str, Any]:
        return {"final_loss": float(run())}

    return Bench(run=run, info=info)


@workload(
    "step_sharded_matmul",
    area="step",
    goal=STEP,
    description="jitted 512x512 matmul, rows sharded 8 ways (NamedSharding on a Mesh)",
    budget_s=0.6,
    warmup_iters=3,
)
def step_sharded_matmul(a: Adapter) -> Bench:
    import numpy as np

    shd = a.sharding
    devices = list(a.api.devices())
    if len(devices) < MESH_DEVICES:
        raise RuntimeError(f"needs {MESH_DEVICES} devices, found {len(devices)}")
    mesh = shd.Mesh(np.array(devices[:MESH_DEVICES]), ("x",))
    rows = shd.NamedSharding(mesh, shd.PartitionSpec("x", None))
    replicated = shd.NamedSharding(mesh, shd.PartitionSpec())
    rng = np.random.default_rng(3)
    lhs = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE), dtype=np.float32)
    rhs = rng.standard_normal((MATMUL_SIZE, MATMUL_SIZE), dtype=np.float32)
    lhs_d = a.api.device_put(lhs, rows)
    rhs_d = a.api.device_put(rhs, replicated)
    jnp = a.np_api
    f = a.api.jit(lambda lhs, rhs: jnp.dot(lhs, rhs), out_shardings=rows)
    return Bench(run=lambda: f(lhs_d, rhs_d).block_until_ready())
