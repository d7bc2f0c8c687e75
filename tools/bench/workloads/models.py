"""Model functions shared by several workloads, written against an Adapter.

Every ``make_*`` returns a *new* function object on each call: the tracing
workloads call them once per iteration so that no trace cache (keyed on the
function) can answer and every iteration really traces.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..registry import Bench

MLP_LAYERS = 16
MLP_WIDTH = 128
MLP_BATCH = 32
LEARNING_RATE = 0.01

# How often each kind of traced function body ran in this process. A tracing
# iteration that a cache answered (so nothing was really traced) shows up as
# fewer body runs than calls; see :func:`counted_bench`.
BODY_RUNS: collections.Counter[str] = collections.Counter()


def mlp_params(layers: int = MLP_LAYERS, width: int = MLP_WIDTH, seed: int = 0) -> Any:
    """``[(w, b), ...]`` as float32 numpy arrays, scaled to keep tanh unsaturated."""
    import numpy as np

    rng = np.random.default_rng(seed)
    scale = np.float32(1.0 / np.sqrt(width))
    return [
        (
            (rng.standard_normal((width, width), dtype=np.float32) * scale),
            np.zeros((width,), np.float32),
        )
        for _ in range(layers)
    ]


def mlp_batch(width: int = MLP_WIDTH, batch: int = MLP_BATCH, seed: int = 1) -> tuple[Any, Any]:
    """Inputs and regression targets, float32."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    y = rng.standard_normal((batch, width), dtype=np.float32)
    return x, y


def make_forward(a: Adapter) -> Callable[[Any, Any], Any]:
    """A fresh ``forward(params, x)``: tanh(x @ w + b) per layer."""
    jnp = a.np_api

    def forward(params: Any, x: Any) -> Any:
        h = x
        for w, b in params:
            h = jnp.tanh(jnp.dot(h, w) + b)
        return h

    return forward


def make_loss(a: Adapter) -> Callable[[Any, Any, Any], Any]:
    """A fresh mean-squared-error ``loss(params, x, y)`` of the MLP."""
    jnp = a.np_api
    forward = make_forward(a)

    def loss(params: Any, x: Any, y: Any) -> Any:
        BODY_RUNS["loss"] += 1
        d = forward(params, x) - y
        return jnp.mean(d * d)

    return loss


def make_train_step(
    a: Adapter, learning_rate: float = LEARNING_RATE
) -> Callable[[Any, Any, Any], Any]:
    """A fresh SGD ``train_step(params, x, y) -> (new_params, loss)``.

    The learning rate is a constant of the program: different rates give
    different modules (what the compile-time workload needs).
    """
    value_and_grad = a.api.value_and_grad
    tree_map = a.tree_util.tree_map
    loss = make_loss(a)

    def train_step(params: Any, x: Any, y: Any) -> Any:
        BODY_RUNS["train_step"] += 1
        value, grads = value_and_grad(loss)(params, x, y)
        new_params = tree_map(lambda p, g: p - learning_rate * g, params, grads)
        return new_params, value

    return train_step


def _chain_ops(a: Adapter) -> tuple[Callable[[Any, Any], Any], ...]:
    lax = a.lax
    # Four elementwise lax ops, one equation each; cycled through by the chain.
    return (
        lambda x, y: lax.sin(x),
        lambda x, y: lax.add(x, y),
        lambda x, y: lax.cos(x),
        lambda x, y: lax.mul(x, y),
    )


def make_chain(a: Adapter, length: int) -> Callable[[Any, Any], Any]:
    """A fresh ``f(x, y)`` that is a chain of ``length`` elementwise equations."""
    ops = _chain_ops(a)
    schedule = [ops[i % len(ops)] for i in range(length)]

    def chain(x: Any, y: Any) -> Any:
        BODY_RUNS["chain"] += 1
        for op in schedule:
            x = op(x, y)
        return x

    return chain


def chain_inputs() -> tuple[Any, Any]:
    import numpy as np

    return np.ones((8,), np.float32), np.full((8,), 0.5, np.float32)


def counted_bench(
    run: Callable[[], Any],
    body: str,
    warmup: Callable[[], Any] | None = None,
    facts: Callable[[Any], dict[str, Any]] | None = None,
) -> Bench:
    """A bench that checks that every timed call really ran the traced body.

    ``info`` reports ``body_runs_per_call``: runs of the ``body`` kind (see
    :data:`BODY_RUNS`) per call of ``run``, counted over the calls after
    warm-up; 1.0 when each iteration traces, 0.0 when a cache answered.
    ``facts(last_result)`` adds workload facts (e.g. the equation count)
    from the last timed call, so no extra call is needed.
    """
    calls = [0]
    start = [0]
    last: list[Any] = []

    def timed() -> Any:
        if calls[0] == 0:
            start[0] = BODY_RUNS[body]
        calls[0] += 1
        last[:] = [run()]
        return last[0]

    def info() -> dict[str, Any]:
        found: dict[str, Any] = {}
        if calls[0]:
            found["body_runs_per_call"] = (BODY_RUNS[body] - start[0]) / calls[0]
        if facts is not None:
            found.update(facts(last[0] if last else run()))
        return found

    return Bench(run=timed, warmup=warmup if warmup is not None else run, info=info)


def count_eqns(closed_jaxpr: Any) -> int:
    """Top-level equation count of a ``ClosedJaxpr``."""
    return len(closed_jaxpr.jaxpr.eqns)


def block_leaves(tree: Any) -> Any:
    """Wait on every array in a dict/list/tuple tree; returns ``tree``.

    Implementation-neutral on purpose: it calls each leaf's own
    ``block_until_ready`` so no library-level tree utility is timed.
    """
    if isinstance(tree, dict):
        for value in tree.values():
            block_leaves(value)
    elif isinstance(tree, list | tuple):
        for value in tree:
            block_leaves(value)
    else:
        tree.block_until_ready()
    return tree
