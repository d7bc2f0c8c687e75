"""shard_map: cached dispatch, a tensor-parallel MLP step, tracing + lowering.

The MLP is data- and tensor-parallel over a 4x2 ``('data', 'model')`` mesh:
the first layer split by columns and the second by rows over ``'model'``
(joined by a ``psum``), the batch over ``'data'``; the step is the jitted
SGD update through ``value_and_grad`` of the ``shard_map``-ped loss.
"""

from __future__ import annotations

import itertools
from typing import Any

from ..adapters import Adapter
from ..registry import DISPATCH, STEP, TRACING, Bench, workload
from .models import BODY_RUNS, block_leaves, counted_bench

DEVICES = 8
FEATURES = 16
TP_BATCH = 256
TP_IN, TP_HIDDEN, TP_OUT = 64, 512, 16
TP_LR = 0.01


def _mesh(a: Adapter, shape: tuple[int, ...], names: tuple[str, ...]) -> Any:
    import numpy as np

    devices = list(a.api.devices())
    if len(devices) < DEVICES:
        raise RuntimeError(f"needs {DEVICES} devices, found {len(devices)}; "
                           "set XLA_FLAGS=--xla_force_host_platform_device_count=8")
    return a.sharding.Mesh(np.array(devices[:DEVICES]).reshape(shape), names)


@workload(
    "shard_map_psum_dispatch",
    area="dispatch",
    goal=DISPATCH,
    description="cached jit(shard_map(x + psum(x))) call over 8 devices",
)
def shard_map_psum_dispatch(a: Adapter) -> Bench:
    import numpy as np

    shd, lax = a.sharding, a.lax
    mesh = _mesh(a, (DEVICES,), ("i",))
    spec = shd.PartitionSpec("i")
    f = a.api.jit(a.api.shard_map(lambda x: x + lax.psum(x, "i"), mesh=mesh, in_specs=spec,
                                  out_specs=spec))
    x = a.api.device_put(np.ones((DEVICES, FEATURES), np.float32),
                         shd.NamedSharding(mesh, spec))
    return Bench(run=lambda: f(x).block_until_ready())


def _tp_specs(a: Adapter) -> dict[str, dict[str, Any]]:
    P = a.sharding.PartitionSpec
    return {"w1": {"w": P(None, "model"), "b": P("model")},
            "w2": {"w": P("model", None), "b": P()}}


def _make_tp_step(a: Adapter, mesh: Any, lr: float = TP_LR) -> Any:
    lax, jnp, shd = a.lax, a.np_api, a.sharding
    P = shd.PartitionSpec
    specs = _tp_specs(a)

    def loss(params: Any, x: Any, y: Any) -> Any:
        BODY_RUNS["tp_loss"] += 1
        hidden = jnp.tanh(x @ params["w1"]["w"] + params["w1"]["b"])
        out = lax.psum(hidden @ params["w2"]["w"], "model") + params["w2"]["b"]
        return lax.pmean(jnp.mean((out - y) ** 2), "data")

    sharded_loss = a.api.shard_map(loss, mesh=mesh, in_specs=(specs, P("data"), P("data")),
                                   out_specs=P())

    def step(params: Any, x: Any, y: Any) -> Any:
        value, grads = a.api.value_and_grad(sharded_loss)(params, x, y)
        new = a.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return new, value

    shardings = a.tree_util.tree_map(lambda s: shd.NamedSharding(mesh, s), specs,
                                     is_leaf=lambda s: isinstance(s, P))
    batch = shd.NamedSharding(mesh, P("data"))
    return a.api.jit(step, in_shardings=(shardings, batch, batch),
                     out_shardings=(shardings, shd.NamedSharding(mesh, P())))


def _tp_data(a: Adapter, mesh: Any) -> tuple[Any, Any, Any]:
    import numpy as np

    shd = a.sharding
    P = shd.PartitionSpec
    rng = np.random.default_rng(5)
    params = {"w1": {"w": rng.standard_normal((TP_IN, TP_HIDDEN), np.float32) * 0.1,
                     "b": np.zeros((TP_HIDDEN,), np.float32)},
              "w2": {"w": rng.standard_normal((TP_HIDDEN, TP_OUT), np.float32) * 0.1,
                     "b": np.zeros((TP_OUT,), np.float32)}}
    specs = _tp_specs(a)
    placed = a.tree_util.tree_map(lambda v, s: a.api.device_put(v, shd.NamedSharding(mesh, s)),
                                  params, specs, is_leaf=lambda s: isinstance(s, P))
    batch = shd.NamedSharding(mesh, P("data"))
    x = a.api.device_put(rng.standard_normal((TP_BATCH, TP_IN), np.float32), batch)
    y = a.api.device_put(rng.standard_normal((TP_BATCH, TP_OUT), np.float32), batch)
    return placed, x, y


@workload(
    "step_tp_mlp_shard_map",
    area="step",
    goal=STEP,
    description="jitted SGD step of a data + tensor parallel MLP (shard_map, 4x2 mesh)",
    budget_s=0.6,
    warmup_iters=3,
)
def step_tp_mlp_shard_map(a: Adapter) -> Bench:
    mesh = _mesh(a, (4, 2), ("data", "model"))
    step = _make_tp_step(a, mesh)
    state = list(_tp_data(a, mesh))

    def run() -> Any:
        params, loss = step(*state)
        state[0] = params
        return block_leaves((params, loss))

    return Bench(run=run)


@workload(
    "lower_tp_mlp_shard_map",
    area="lowering",
    goal=TRACING,
    clock="cpu",
    description="jit(step).lower of the shard_map tensor-parallel MLP step (new function each time)",
)
def lower_tp_mlp_shard_map(a: Adapter) -> Bench:
    mesh = _mesh(a, (4, 2), ("data", "model"))
    params, x, y = _tp_data(a, mesh)
    rates = itertools.count()
    return counted_bench(
        lambda: _make_tp_step(a, mesh, TP_LR + next(rates) * 1e-9).lower(params, x, y),
        "tp_loss")
