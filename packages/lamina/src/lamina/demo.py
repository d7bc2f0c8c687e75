"""lamina's demo: one model, trained in parallel three ways, with names everywhere.

Run with ``hatch run demo`` (``python -m lamina.demo``). It trains a small MLP
classifier on a generated 3-class spiral data set over 8 CPU devices:

1. with ``pmap`` + ``pmean`` (one replica per device),
2. with ``jit`` over a ``NamedSharding`` mesh (XLA's SPMD partitioner),
3. data-parallel and tensor-parallel at once, written per device with
   ``shard_map`` over a 2-D ``('data', 'model')`` mesh: the first layer's
   columns and the second layer's rows are split over ``'model'`` (a ``psum``
   joins them), the batch over ``'data'``,

printing a line per epoch and a terminal loss curve for each, then shows the
lowered train step's StableHLO signature: every argument carries its name
(``params['dense1']['w']``), its sharding, and ops carry source locations.
``--quick`` runs a short version (used by the tests).

``--processes N`` trains the same model as N processes of 8/N devices each
(started by ``lamina.distributed.launch``; each joins the run with
``lamina.distributed.initialize()``): the mesh and the pmap then span every
process's devices, each process feeds its share of every pmap batch, and the
result matches the single-process run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("LAMINA_NUM_CPU_DEVICES", "8")

import numpy as np  # noqa: E402
from lamina_interpreters_pxla.backends import (  # noqa: E402
    devices,
    local_device_count,
    process_count,
    process_index,
)
from lamina_interpreters_pxla.executable import block_until_ready  # noqa: E402
from lamina_interpreters_pxla.pmap import pmap  # noqa: E402
from lamina_sharded_jit import jit  # noqa: E402
from lamina_tracing_core.api import value_and_grad  # noqa: E402

import lamina.numpy as jnp  # noqa: E402
from lamina import lax, nn, random, tree_util  # noqa: E402
from lamina.__about__ import __version__  # noqa: E402
from lamina.distributed import demo_runner  # noqa: E402
from lamina.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from lamina_sharded_jit.shard_map import shard_map  # noqa: E402

Params = dict[str, dict[str, Any]]
NUM_CLASSES = 3


# --- data and model -------------------------------------------------------------------
def make_spirals(points_per_class: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A 3-arm spiral: a classic set that a linear model cannot separate."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for label in range(NUM_CLASSES):
        radius = np.linspace(0.05, 1.0, points_per_class)
        angle = label * 2 * np.pi / NUM_CLASSES + radius * 3.5 + rng.normal(
            0, 0.12, points_per_class)
        xs.append(np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1))
        ys.append(np.full(points_per_class, label))
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.int32)
    order = rng.permutation(len(y))
    return x[order], y[order]


def init_params(key: Any, sizes: Sequence[int]) -> Params:
    params: Params = {}
    keys = random.split(key, len(sizes) - 1)
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        scale = np.sqrt(2.0 / n_in).astype(np.float32)
        params[f"dense{i + 1}"] = {
            "w": random.normal(keys[i], (n_in, n_out)) * scale,
            "b": jnp.zeros((n_out,), jnp.float32),
        }
    return params


def predict(params: Params, x: Any) -> Any:
    layers = sorted(params, key=lambda name: int(name[len("dense"):]))
    for name in layers[:-1]:
        x = nn.relu(x @ params[name]["w"] + params[name]["b"])
    last = params[layers[-1]]
    return x @ last["w"] + last["b"]


def loss_fn(params: Params, x: Any, y: Any) -> Any:
    logits = predict(params, x)
    return -jnp.mean(jnp.sum(nn.one_hot(y, NUM_CLASSES) * nn.log_softmax(logits),
                             axis=-1))


def sgd(params: Params, grads: Params, lr: float) -> Params:
    updated: Params = tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
    return updated


def accuracy(params: Params, x: np.ndarray, y: np.ndarray) -> float:
    predicted = np.asarray(jnp.argmax(predict(params, x), axis=-1))
    return float(np.mean(predicted == y))


# --- the two data-parallel train steps -----------------------------------------------
LEARNING_RATE = 0.5


def make_pmap_step() -> Callable[..., Any]:
    def step(params: Params, x: Any, y: Any) -> tuple[Params, Any]:
        loss, grads = value_and_grad(loss_fn)(params, x, y)
        grads = lax.pmean(grads, axis_name="devices")
        return sgd(params, grads, LEARNING_RATE), lax.pmean(loss, axis_name="devices")
    pmapped: Callable[..., Any] = pmap(step, axis_name="devices")
    return pmapped


def make_sharded_step(mesh: Mesh) -> Callable[..., Any]:
    replicated = NamedSharding(mesh, PartitionSpec())
    by_batch = NamedSharding(mesh, PartitionSpec("data"))

    def train_step(params: Params, x: Any, y: Any) -> tuple[Params, Any]:
        loss, grads = value_and_grad(loss_fn)(params, x, y)
        return sgd(params, grads, LEARNING_RATE), loss
    jitted: Callable[..., Any] = jit(train_step, in_shardings=(replicated, by_batch, by_batch),
                                        out_shardings=(replicated, replicated))
    return jitted


# --- data + tensor parallel, per device with shard_map --------------------------------
#: How each parameter is split over the 2-D mesh: Megatron-style, the first
#: layer by columns and the second by rows over 'model'; the last replicated.
TP_SPECS = {
    "dense1": {"w": PartitionSpec(None, "model"), "b": PartitionSpec("model")},
    "dense2": {"w": PartitionSpec("model", None), "b": PartitionSpec()},
    "dense3": {"w": PartitionSpec(), "b": PartitionSpec()},
}


def tp_loss(params: Params, x: Any, y: Any) -> Any:
    """The loss on one device's blocks: its rows of the batch, its columns of
    the first layer and rows of the second."""
    hidden = nn.relu(x @ params["dense1"]["w"] + params["dense1"]["b"])
    partial = hidden @ params["dense2"]["w"]
    hidden = nn.relu(lax.psum(partial, "model") + params["dense2"]["b"])
    logits = hidden @ params["dense3"]["w"] + params["dense3"]["b"]
    local = -jnp.mean(jnp.sum(nn.one_hot(y, NUM_CLASSES) * nn.log_softmax(logits), axis=-1))
    return lax.pmean(local, "data")


def make_tp_step(mesh: Mesh) -> Callable[..., Any]:
    by_batch = PartitionSpec("data")
    loss = shard_map(tp_loss, mesh=mesh, in_specs=(TP_SPECS, by_batch, by_batch),
                     out_specs=PartitionSpec())
    shardings = tree_util.tree_map(lambda spec: NamedSharding(mesh, spec), TP_SPECS,
                                   is_leaf=lambda s: isinstance(s, PartitionSpec))
    batch_sharding = NamedSharding(mesh, by_batch)

    def tp_train_step(params: Params, x: Any, y: Any) -> tuple[Params, Any]:
        value, grads = value_and_grad(loss)(params, x, y)
        return sgd(params, grads, LEARNING_RATE), value
    jitted: Callable[..., Any] = jit(
        tp_train_step, in_shardings=(shardings, batch_sharding, batch_sharding),
        out_shardings=(shardings, NamedSharding(mesh, PartitionSpec())))
    return jitted


# --- training loops -------------------------------------------------------------------
def batches(x: np.ndarray, y: np.ndarray, batch: int, epoch: int):  # type: ignore[no-untyped-def]
    order = np.random.default_rng(epoch).permutation(len(y))
    for start in range(0, len(y) - batch + 1, batch):
        index = order[start:start + batch]
        yield x[index], y[index]


def train(name: str, step: Callable[..., Any], params: Any, data: tuple[np.ndarray, np.ndarray],
          epochs: int, batch: int, shape_batch: Callable[[np.ndarray], Any],
          unreplicate: Callable[[Any], Params]) -> tuple[Params, list[float]]:
    x, y = data
    losses: list[float] = []
    print(f"\n== {name}")
    for epoch in range(epochs):
        start, steps, loss = time.perf_counter(), 0, None
        for xb, yb in batches(x, y, batch, epoch):
            params, loss = step(params, shape_batch(xb), shape_batch(yb))
            steps += 1
        block_until_ready(params)
        elapsed = time.perf_counter() - start
        losses.append(float(np.asarray(loss).reshape(-1)[0]))
        acc = accuracy(unreplicate(params), x, y)
        print(f"  epoch {epoch + 1:2d}  loss {losses[-1]:.4f}  accuracy {acc:6.1%}  "
              f"{steps / elapsed:7.1f} steps/s")
    print(loss_curve(losses))
    return unreplicate(params), losses


def loss_curve(losses: Sequence[float], height: int = 6) -> str:
    """A small terminal plot of the loss per epoch."""
    top, bottom = max(losses), min(losses)
    span = (top - bottom) or 1.0
    rows = []
    for level in range(height, 0, -1):
        threshold = bottom + span * (level - 1) / height
        cells = "".join(" ██ " if value >= threshold else "    " for value in losses)
        label = f"{bottom + span * level / height:7.3f} |" if level in (height, 1) else \
            "        |"
        rows.append(label + cells)
    rows.append("        +" + "----" * len(losses))
    rows.append("   epoch " + "".join(f"{i + 1:^4d}" for i in range(len(losses))))
    return "\n".join(rows)


# --- what lamina adds: names, shardings, locations in the StableHLO --------------------
def describe_lowering(step: Any, params: Params, x: np.ndarray, y: np.ndarray) -> str:
    lowered = step.lower(params, x, y)
    text = lowered.as_text()
    signature = re.search(r"func\.func public @main\((.*?)\) ->", text, re.S)
    lines = ["\n== the lowered train step: what XLA sees"]
    if signature:
        for arg in re.split(r",\s*(?=%arg\d+:)", signature.group(1)):
            name = re.search(r'jax\.arg_info = "([^"]*)"', arg)
            sharding = re.search(r"sdy\.sharding = (#sdy\.sharding<[^>]*>)", arg) or re.search(
                r'mhlo\.sharding = "([^"]*)"', arg)
            arg_type = re.search(r"tensor<[^>]*>", arg)
            lines.append(f"  {name.group(1) if name else '?':28s} "
                         f"{arg_type.group(0) if arg_type else '':20s} "
                         f"{sharding.group(1) if sharding else ''}")
    debug_text = lowered.as_text(debug_info=True)
    located = re.search(r'loc\("[^"]*demo\.py":(\d+):\d+[^)]*\)', debug_text)
    if located:
        lines.append(f"  source locations survive: ops point at demo.py line {located.group(1)}")
    manual = re.search(r'manual_axes=\{[^}]*\}', text)
    if manual:
        stacks = sorted(set(re.findall(r'loc\("([^"]*shard_map\(\w+\)/psum\w*)"', debug_text)))
        lines.append(f"  per-device bodies: sdy.manual_computation {manual.group(0)}; their "
                     f"collectives are named")
        lines += [f"    {stack}" for stack in stacks]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> float:
    parser = argparse.ArgumentParser(prog="python -m lamina.demo", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short run (for tests)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--processes", type=int, default=1,
                        help="run as this many processes of 8/N CPU devices each")
    parser.add_argument(demo_runner.WORKER_FLAG, action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.processes > 1 and not ns.process_worker:
        passed = sys.argv[1:] if argv is None else list(argv)
        return demo_runner.run_in_processes(ns.processes, _without_processes(passed))
    if ns.process_worker:
        demo_runner.join_run()
    epochs = ns.epochs or (4 if ns.quick else 10)
    all_devices = devices()
    n, n_local, processes = len(all_devices), local_device_count(), process_count()
    where = f" in {processes} processes" if processes > 1 else ""
    print(f"lamina {__version__}: {n} {all_devices[0].platform} devices{where}")
    x, y = make_spirals(256 if ns.quick else 512)
    batch = 32 * n
    params = init_params(random.PRNGKey(0), [2, 64, 64, NUM_CLASSES])

    # pmap maps over every process's devices; each process passes its share
    # of the batch (one entry per local device) and a local copy of the params.
    def local_share(a: np.ndarray) -> np.ndarray:
        per_process = len(a) // processes
        return a[process_index() * per_process:][:per_process]

    replicated = tree_util.tree_map(
        lambda p: np.broadcast_to(np.asarray(p), (n_local,) + p.shape), params)
    _, pmap_losses = train(
        f"pmap + pmean over {n} devices", make_pmap_step(), replicated, (x, y), epochs, batch,
        lambda a: local_share(a).reshape((n_local, -1) + a.shape[1:]),
        lambda p: tree_util.tree_map(lambda leaf: np.asarray(leaf)[0], p))

    # jit: every process passes the whole batch and puts its own part of it.
    mesh = Mesh(np.array(all_devices), ("data",))
    sharded_step = make_sharded_step(mesh)
    final, jit_losses = train("jit over a NamedSharding mesh", sharded_step, params, (x, y),
                              epochs, batch, lambda a: a, lambda p: p)
    print(describe_lowering(sharded_step, final, x[:batch], y[:batch]))

    # shard_map: the batch over 'data', the hidden layers over 'model'.
    grid = np.array(all_devices).reshape(n // 2, 2)
    tp_mesh = Mesh(grid, ("data", "model"))
    tp_step = make_tp_step(tp_mesh)
    tp_final, tp_losses = train(
        f"data + tensor parallel: shard_map over a {n // 2}x2 ('data', 'model') mesh",
        tp_step, params, (x, y), epochs, batch, lambda a: a, lambda p: p)
    print(describe_lowering(tp_step, tp_final, x[:batch], y[:batch]))
    acc = accuracy(final, x, y)
    print(f"\nfinal accuracy {acc:.1%} (pmap loss {pmap_losses[-1]:.4f}, "
          f"jit loss {jit_losses[-1]:.4f}, shard_map loss {tp_losses[-1]:.4f})")
    return acc


def _without_processes(args: Sequence[str]) -> list[str]:
    """The demo's arguments minus ``--processes N`` (for the processes it starts)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--processes":
            skip = True
        elif not arg.startswith("--processes="):
            out.append(arg)
    return out

if __name__ == "__main__":
    main(sys.argv[1:])
