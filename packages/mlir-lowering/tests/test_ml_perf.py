"""Lowering work: a fixed, small amount of Python per equation, and work
linear in program size.

Speed itself is measured side by side with JAX by the benchmarks
(``hatch run bench:run lower_*``), never asserted here: timings on a shared
machine are noise. These tests count what a regression would change
deterministically: the Python function calls lowering makes (a profile hook
counts them). When written, lowering a chain of ``sin``/``mul`` equations made
~13 Python calls per equation at every size."""

from __future__ import annotations

import sys
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


def _python_calls_to_lower(closed: Any) -> int:
    """Python function calls made by one lowering of ``closed`` (caches warm)."""
    ml.lower_jaxpr_to_module("jit_f", closed)
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        ml.lower_jaxpr_to_module("jit_f", closed)
    finally:
        sys.setprofile(None)
    return calls


def test_2000_op_chain_lowers_with_little_python_per_equation() -> None:
    closed = _chain(1000)
    assert len(closed.jaxpr.eqns) == 2000
    text = ml.lower_jaxpr_to_module("jit_f", closed).as_text()
    assert text.count("stablehlo.sine") == 1000 and text.count("stablehlo.multiply") == 1000
    assert _python_calls_to_lower(closed) / 2000 < 20


def test_lowering_work_is_linear_in_program_size() -> None:
    small = _python_calls_to_lower(_chain(250))
    large = _python_calls_to_lower(_chain(2000))
    # 8x the equations: linear is ~8x; quadratic would be ~64x.
    assert large / small < 10


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
    result = ml.lower_jaxpr_to_module("jit_step", closed)
    assert result.arg_names[0] == "params[0][0]"
    flat = [a for pair in params for a in pair]
    outs = run(result, *flat, x, x)
    assert len(outs) == 32
    assert all(np.isfinite(o).all() for o in outs)
