"""``random.gamma`` and ``scipy.special.logsumexp``: compiled step times and tracing."""

from __future__ import annotations

import importlib
from typing import Any

from ..adapters import Adapter
from ..registry import STEP, TRACING, Bench, workload

GAMMA_SAMPLES = 1_000_000
LOGSUMEXP_SHAPE = (1000, 1000)


def _special(a: Adapter) -> Any:
    return importlib.import_module(f"{a.modules.root}.scipy.special")


def _gamma_fn(a: Adapter, samples: int) -> Any:
    random = a.random
    return lambda key: random.gamma(key, 2.0, (samples,))


def _logsumexp_fn(a: Adapter) -> Any:
    special = _special(a)
    return lambda x: special.logsumexp(x, axis=1)


def _logsumexp_input() -> Any:
    import numpy as np

    return np.random.default_rng(5).standard_normal(LOGSUMEXP_SHAPE, dtype=np.float32)


@workload(
    "step_random_gamma_1m",
    area="random",
    goal=STEP,
    description="jitted random.gamma(key, 2.0, (10**6,))",
    budget_s=1.0,
    warmup_iters=2,
)
def step_random_gamma_1m(a: Adapter) -> Bench:
    f = a.api.jit(_gamma_fn(a, GAMMA_SAMPLES))
    key = a.random.PRNGKey(0)
    return Bench(run=lambda: f(key).block_until_ready())


@workload(
    "step_logsumexp",
    area="random",
    goal=STEP,
    description="jitted scipy.special.logsumexp over axis 1 of a 1000x1000 float32 array",
    budget_s=0.6,
    warmup_iters=3,
)
def step_logsumexp(a: Adapter) -> Bench:
    f = a.api.jit(_logsumexp_fn(a))
    x = a.api.device_put(_logsumexp_input())
    return Bench(run=lambda: f(x).block_until_ready())


@workload(
    "make_jaxpr_random_gamma",
    area="random",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of random.gamma(key, 2.0, (10**6,)), a new function each time",
)
def make_jaxpr_random_gamma(a: Adapter) -> Bench:
    key = a.random.PRNGKey(0)
    return Bench(run=lambda: a.api.make_jaxpr(_gamma_fn(a, GAMMA_SAMPLES))(key))


@workload(
    "make_jaxpr_logsumexp",
    area="random",
    goal=TRACING,
    clock="cpu",
    description="make_jaxpr of scipy.special.logsumexp over axis 1, a new function each time",
)
def make_jaxpr_logsumexp(a: Adapter) -> Bench:
    x = _logsumexp_input()
    return Bench(run=lambda: a.api.make_jaxpr(_logsumexp_fn(a))(x))
