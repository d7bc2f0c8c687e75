"""Programs that call back into Python: a jitted step with one debug.print,
and tracing a model whose layers print and call a pure callback.

The printed lines go to a sink (``debug.print`` writes to ``sys.stdout`` on
both sides), so the worker's own output stays clean.
"""

from __future__ import annotations

import sys
from typing import Any

from ..adapters import Adapter
from ..registry import STEP, TRACING, Bench, workload
from .models import BODY_RUNS, block_leaves, mlp_batch, mlp_params
from .tracing import tracing_bench


class _Sink:
    """A stdout that keeps only how many lines were written."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        return len(text)

    def flush(self) -> None:
        pass


def _printing_forward(a: Adapter, with_callback: bool) -> Any:
    jnp = a.np_api

    def forward(params: Any, x: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(params):
            h = jnp.tanh(h @ w + b)
            a.api.debug.print("layer {i}: mean {m}", i=i, m=jnp.mean(h))
        if with_callback:
            h = a.api.pure_callback(lambda v: v, a.api.ShapeDtypeStruct(h.shape, h.dtype), h)
        return h

    return forward


@workload(
    "step_debug_print",
    area="step",
    goal=STEP,
    description="jitted 16-layer MLP forward step with one debug.print of the loss",
    budget_s=0.6,
    warmup_iters=3,
)
def step_debug_print(a: Adapter) -> Bench:
    jnp = a.np_api

    def step(params: Any, x: Any, y: Any) -> Any:
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        loss = jnp.mean((h - y) ** 2)
        a.api.debug.print("loss {}", loss)
        return loss

    f = a.api.jit(step)
    params = a.api.device_put(mlp_params())
    x, y = (a.api.device_put(v) for v in mlp_batch())
    sink = _Sink()

    def run() -> Any:
        saved, sys.stdout = sys.stdout, sink
        try:
            return block_leaves(f(params, x, y))
        finally:
            sys.stdout = saved

    return Bench(run=run, info=lambda: {"lines_printed": sink.lines})


@workload(
    "make_jaxpr_callbacks_mlp16",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of a 16-layer MLP printing each layer, with a pure_callback",
)
def make_jaxpr_callbacks_mlp16(a: Adapter) -> Bench:
    params = mlp_params()
    x, _ = mlp_batch()

    def traced() -> Any:
        forward = _printing_forward(a, with_callback=True)

        def loss(p: Any, v: Any) -> Any:
            BODY_RUNS["callbacks"] += 1
            return a.np_api.sum(forward(p, v))

        return a.api.make_jaxpr(loss)(params, x)

    return tracing_bench(traced, "callbacks")
