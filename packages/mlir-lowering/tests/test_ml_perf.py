"""Lowering speed: a 2,000-op chain well under JAX's own lowering time, and
time linear in program size.

Reference (measured on the 2-core dev machine, jax 0.10.2): ``jit(f).lower(x)``
of the same chain takes ~150 ms, ~95 ms of it lowering, which is ~13x the time
of merely creating the 2,000 MLIR operations. The brief asks for at most half
of JAX's time; the machine is shared and its speed varies, so the test
compares with that floor measured in the same process (best of several
interleaved runs): lamina must stay under 6.5x the floor (half of JAX's ~13x).
Measured when quiet: ~21 ms, 2-3x the floor."""

from __future__ import annotations

import gc
import time
from typing import Any

import numpy as np
from lamina_tracing_core import lax
from lamina_tracing_core.api import grad, make_jaxpr

import lamina_mlir_lowering as ml

F32 = np.float32


def _chain(n_pairs: int) -> Any:
    def f(x: Any) -> Any:
        for _ in range(n_pairs):
            x = lax.mul(lax.sin(x), x)
        return x
    return make_jaxpr(f)(np.ones(8, F32))


def _best_time(closed: Any, repeats: int = 5) -> float:
    ml.lower_jaxpr_to_module("jit_f", closed)   # warm caches (types, context)
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        ml.lower_jaxpr_to_module("jit_f", closed)
        best = min(best, time.perf_counter() - start)
    return best


def _floor_time(n_pairs: int) -> float:
    """Creating the same ops with the MLIR builders and nothing else."""
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import func
    from jaxlib.mlir.dialects import stablehlo as hlo
    with ml.default_context(), ir.Location.unknown():
        t = ir.RankedTensorType.get([8], ir.F32Type.get())
        loc = ir.Location.fused([ir.Location.file("f.py", 1, 0), ir.Location.name("jit(f)/sin")])
        start = time.perf_counter()
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp("main", ir.FunctionType.get([t], [t]))
            with ir.InsertionPoint(fn.add_entry_block()):
                x = fn.arguments[0]
                for _ in range(n_pairs):
                    x = hlo.multiply(hlo.sine(x, loc=loc), x, loc=loc)
                func.ReturnOp([x])
        return time.perf_counter() - start


def test_2000_op_chain_is_fast() -> None:
    closed = _chain(1000)
    assert len(closed.jaxpr.eqns) == 2000
    ml.lower_jaxpr_to_module("jit_f", closed)
    best, floor = float("inf"), float("inf")
    for _ in range(7):
        gc.collect()
        floor = min(floor, _floor_time(1000))
        start = time.perf_counter()
        ml.lower_jaxpr_to_module("jit_f", closed)
        best = min(best, time.perf_counter() - start)
    assert best / floor < 6.5, (best, floor)
    assert best < 0.5   # a sanity bound that holds even on a heavily loaded machine


def test_lowering_time_is_linear_in_program_size() -> None:
    small = _best_time(_chain(250))
    large = _best_time(_chain(2000))
    # 8x the equations: linear is ~8x; quadratic would be ~64x.
    assert large / small < 16


def _mlp_train_step(layers: int, width: int) -> Any:
    def loss(params: Any, x: Any, y: Any) -> Any:
        h = x
        for w, b in params:
            z = lax.add(lax.dot_general(h, w, (((1,), (0,)), ((), ()))),
                        lax.broadcast_in_dim(b, (h.shape[0], width), (1,)))
            h = lax.tanh(z)
        d = lax.sub(h, y)
        return lax.reduce_sum(lax.mul(d, d), (0, 1))

    def step(params: Any, x: Any, y: Any) -> Any:
        grads = grad(loss)(params, x, y)
        return [(lax.sub(w, lax.mul(np.float32(0.01), gw)), lax.sub(b, lax.mul(np.float32(0.01), gb)))
                for (w, b), (gw, gb) in zip(params, grads)]

    params = [(np.full((width, width), 0.01, F32), np.zeros(width, F32)) for _ in range(layers)]
    x = np.ones((4, width), F32)
    return make_jaxpr(step)(params, x, x), params, x


def test_16_layer_mlp_train_step_lowers_and_runs() -> None:
    from ml_runner import run
    closed, params, x = _mlp_train_step(16, 32)
    start = time.perf_counter()
    result = ml.lower_jaxpr_to_module("jit_step", closed)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0   # ~0.1 s when the machine is quiet
    assert result.arg_names[0] == "params[0][0]"
    flat = [a for pair in params for a in pair]
    outs = run(result, *flat, x, x)
    assert len(outs) == 32
    assert all(np.isfinite(o).all() for o in outs)
