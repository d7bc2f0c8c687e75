"""Tracing to jaxprs: ``make_jaxpr`` of models, transformations and chains.

Every iteration builds a new function object, so every iteration traces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..registry import TRACING, Bench, workload
from .models import (
    BODY_RUNS,
    chain_inputs,
    count_eqns,
    counted_bench,
    make_chain,
    make_forward,
    make_loss,
    mlp_batch,
    mlp_params,
)

VMAP_OPS = 50
VMAP_BATCH, VMAP_FEATURES = 64, 16
SCAN_LAYERS, SCAN_WIDTH, SCAN_BATCH, SCAN_STEPS = 8, 64, 8, 10
CHAIN_WARMUP_LENGTH = 1_000


def tracing_bench(
    trace: Callable[[], Any], body: str, warmup: Callable[[], Any] | None = None
) -> Bench:
    """A bench whose iteration is ``trace()`` (a ``make_jaxpr``), checked to
    really trace ``body`` each time and reporting the equation count."""
    return counted_bench(trace, body, warmup, facts=lambda jaxpr: {"eqns": count_eqns(jaxpr)})


@workload(
    "make_jaxpr_mlp16",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of a 16-layer MLP loss",
    report_memory=True,
)
def make_jaxpr_mlp16(a: Adapter) -> Bench:
    params = mlp_params()
    x, y = mlp_batch()
    return tracing_bench(lambda: a.api.make_jaxpr(make_loss(a))(params, x, y), "loss")


@workload(
    "make_jaxpr_grad_mlp16",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of grad of the 16-layer MLP loss",
    report_memory=True,
)
def make_jaxpr_grad_mlp16(a: Adapter) -> Bench:
    params = mlp_params()
    x, y = mlp_batch()
    return tracing_bench(
        lambda: a.api.make_jaxpr(a.api.grad(make_loss(a)))(params, x, y), "loss"
    )


def _vmap_ops(a: Adapter) -> tuple[Callable[[Any, Any], Any], ...]:
    jnp = a.np_api
    # Elementwise math, a binary op with the input, and a reduction that is
    # broadcast back: the mix exercises several batching rules.
    return (
        lambda h, x: jnp.sin(h),
        lambda h, x: h * x,
        lambda h, x: jnp.cos(h),
        lambda h, x: h + jnp.sum(h),
        lambda h, x: jnp.exp(-h),
    )


def make_fifty_op_function(a: Adapter) -> Callable[[Any], Any]:
    """A fresh per-example ``f(x)`` of 50 numpy-level operations."""
    ops = _vmap_ops(a)
    schedule = [ops[i % len(ops)] for i in range(VMAP_OPS)]

    def f(x: Any) -> Any:
        BODY_RUNS["fifty_ops"] += 1
        h = x
        for op in schedule:
            h = op(h, x)
        return h

    return f


@workload(
    "make_jaxpr_vmap_50ops",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of vmap of a 50-op function",
)
def make_jaxpr_vmap_50ops(a: Adapter) -> Bench:
    import numpy as np

    xs = np.linspace(0.0, 1.0, VMAP_BATCH * VMAP_FEATURES, dtype=np.float32).reshape(
        VMAP_BATCH, VMAP_FEATURES
    )
    return tracing_bench(
        lambda: a.api.make_jaxpr(a.api.vmap(make_fifty_op_function(a)))(xs), "fifty_ops"
    )


def make_scan_function(a: Adapter) -> Callable[[Any, Any, Any], Any]:
    """A fresh ``f(ws, c0, xs)`` scanning an 8-layer body over ``xs``."""
    jnp = a.np_api
    lax = a.lax

    def f(ws: Any, c0: Any, xs: Any) -> Any:
        BODY_RUNS["scan_outer"] += 1

        def body(c: Any, x: Any) -> Any:
            for w in ws:
                c = jnp.tanh(jnp.dot(c, w) + x)
            return c, jnp.sum(c)

        return lax.scan(body, c0, xs)

    return f


@workload(
    "make_jaxpr_scan_8layers",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of a scan over an 8-layer body",
)
def make_jaxpr_scan_8layers(a: Adapter) -> Bench:
    import numpy as np

    rng = np.random.default_rng(2)
    ws = [
        rng.standard_normal((SCAN_WIDTH, SCAN_WIDTH), dtype=np.float32) for _ in range(SCAN_LAYERS)
    ]
    c0 = np.zeros((SCAN_BATCH, SCAN_WIDTH), np.float32)
    xs = rng.standard_normal((SCAN_STEPS, SCAN_BATCH, SCAN_WIDTH), dtype=np.float32)
    return tracing_bench(lambda: a.api.make_jaxpr(make_scan_function(a))(ws, c0, xs), "scan_outer")


def _chain_workload(length: int, label: str, **options: Any) -> None:
    @workload(
        f"make_jaxpr_chain_{label}",
        area="tracing",
        goal=TRACING,
        clock="cpu",
        description=f"make_jaxpr of an elementwise chain of {length:,} equations",
        **options,
    )
    def setup(a: Adapter) -> Bench:
        x, y = chain_inputs()

        def trace() -> Any:
            return a.api.make_jaxpr(make_chain(a, length))(x, y)

        def warmup() -> Any:
            # Warm the same code paths on a short chain; a long warm-up
            # trace would only cost time.
            return a.api.make_jaxpr(make_chain(a, CHAIN_WARMUP_LENGTH))(x, y)

        return tracing_bench(trace, "chain", warmup=warmup)


_chain_workload(1_000, "1k")
_chain_workload(10_000, "10k", min_samples=2, warmup_iters=1)
_chain_workload(50_000, "50k", min_samples=1, warmup_iters=1, budget_s=0.0, timeout_s=300.0)


@workload(
    "eval_shape_then_jit",
    area="tracing",
    goal=TRACING,
    clock="cpu",
    description="eval_shape(f) then jit(f).lower: the trace is shared",
)
def eval_shape_then_jit(a: Adapter) -> Bench:
    params = mlp_params(layers=4)
    x, _ = mlp_batch()

    def fresh() -> Callable[[Any, Any], Any]:
        forward = make_forward(a)

        def f(params: Any, x: Any) -> Any:
            BODY_RUNS["eval_shape_fn"] += 1
            return forward(params, x)

        return f

    def run() -> Any:
        f = fresh()
        a.api.eval_shape(f, params, x)
        return a.api.jit(f).lower(params, x)

    # body_runs_per_call is 1.0 when jit reuses eval_shape's trace, 2.0 when not.
    return counted_bench(run, "eval_shape_fn")
