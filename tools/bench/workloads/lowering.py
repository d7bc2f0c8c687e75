"""``jit(f).lower``: tracing plus lowering to a StableHLO module; compile time."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..registry import COMPILE, TRACING, Bench, workload
from .models import (
    BODY_RUNS,
    LEARNING_RATE,
    chain_inputs,
    counted_bench,
    make_chain,
    make_train_step,
    mlp_batch,
    mlp_params,
)

LOWER_CHAIN_LENGTH = 2_000
ADD_CHAIN_DEPTH = 200
# Each nesting level costs a few dozen Python frames in either library.
ADD_CHAIN_RECURSION_LIMIT = 20_000


@workload(
    "lower_mlp_train_step",
    area="lowering",
    goal=TRACING,
    clock="cpu",
    description="jit(train_step).lower of the 16-layer MLP SGD step",
    report_memory=True,
)
def lower_mlp_train_step(a: Adapter) -> Bench:
    params = mlp_params()
    x, y = mlp_batch()
    return counted_bench(lambda: a.api.jit(make_train_step(a)).lower(params, x, y), "train_step")


@workload(
    "lower_chain_2k",
    area="lowering",
    goal=TRACING,
    clock="cpu",
    description="jit(f).lower of a 2,000-equation elementwise chain",
)
def lower_chain_2k(a: Adapter) -> Bench:
    x, y = chain_inputs()
    return counted_bench(lambda: a.api.jit(make_chain(a, LOWER_CHAIN_LENGTH)).lower(x, y), "chain")


def make_add_chain(a: Adapter, depth: int) -> Callable[[Any], Any]:
    """``depth`` nested jits, each a new inner function adding 1 to the last."""
    jit = a.api.jit

    def identity(x: Any) -> Any:
        BODY_RUNS["add_chain"] += 1  # once per trace of the whole chain
        return x

    f: Callable[[Any], Any] = identity
    for _ in range(depth):
        f = jit(lambda x, inner=f: inner(x) + 1)
    return f


@workload(
    "jit_add_chain_200",
    area="lowering",
    goal=TRACING,
    clock="cpu",
    description="jit(f).lower where f is 200 nested inner jits of x + 1",
    recursion_limit=ADD_CHAIN_RECURSION_LIMIT,
    min_samples=2,
)
def jit_add_chain_200(a: Adapter) -> Bench:
    import numpy as np

    x = np.ones((8,), np.float32)
    return counted_bench(
        lambda: a.api.jit(make_add_chain(a, ADD_CHAIN_DEPTH)).lower(x), "add_chain"
    )


@workload(
    "compile_mlp_train_step",
    area="compile",
    goal=COMPILE,
    description="Lowered.compile() of the MLP SGD step (lowering untimed)",
    report_memory=True,
    min_samples=2,
    warmup_iters=1,
    budget_s=0.5,
)
def compile_mlp_train_step(a: Adapter) -> Bench:
    params = mlp_params()
    x, y = mlp_batch()
    variant = itertools.count()

    def prepare() -> Callable[[], object]:
        # Every iteration's module differs (in the learning-rate constant), so
        # no compile cache can answer, whether keyed on the function or, as
        # lamina's is, on the module's contents.
        rate = LEARNING_RATE * (1.0 + 1e-4 * next(variant))
        lowered = a.api.jit(make_train_step(a, rate)).lower(params, x, y)
        return lowered.compile  # type: ignore[no-any-return]

    return Bench(run=lambda: None, prepare=prepare)
