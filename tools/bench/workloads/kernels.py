"""Linear algebra, FFT and CNN kernels: steady-state run time of the compiled
programs (the same LAPACK / XLA kernels on both sides, so the goal is parity)
and tracing plus lowering of the CNN training step and of the decompositions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..adapters import Adapter
from ..registry import STEP, TRACING, Bench, workload
from .models import BODY_RUNS, block_leaves, counted_bench

CHOLESKY_SIZE = 256
SVD_SIZE = 128
EIGH_SIZE = 256
FFT_POINTS = 2 ** 16
CNN_BATCH = 16
CNN_IMAGE = 28
CNN_CHANNELS = 16
CNN_CLASSES = 10

# LAPACK (SciPy's OpenBLAS, which jaxlib's kernels call on both sides) runs
# single-threaded in these workers. Its thread pool, on a small machine that
# other processes keep busy, makes a 128x128 SVD take anywhere from 2 to
# 300 ms depending on when its threads get a core; with one thread the figure
# is the kernel's, and both sides run the same kernel either way. The work is
# then one thread's, so these rows are timed by CPU time, which other
# processes waiting for the same cores do not inflate.
SINGLE_THREADED_BLAS = (
    ("OPENBLAS_NUM_THREADS", "1"), ("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"),
)


def _spd(n: int) -> Any:
    import numpy as np

    m = np.random.default_rng(21).standard_normal((n, n)).astype(np.float32)
    return (m @ m.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def _compiled_step(a: Adapter, fun: Callable[..., Any], *args: Any) -> Bench:
    jitted = a.api.jit(fun)
    placed = [a.api.device_put(x) for x in args]
    return Bench(run=lambda: block_leaves(jitted(*placed)))


def _cholesky_solve(a: Adapter) -> Callable[[Any, Any], Any]:
    linalg = a.lax.linalg

    def solve(m: Any, b: Any) -> Any:
        low = linalg.cholesky(m)
        y = linalg.triangular_solve(low, b, left_side=True, lower=True)
        return linalg.triangular_solve(low, y, left_side=True, lower=True, transpose_a=True)

    return solve


@workload(
    "step_cholesky_solve_256",
    area="kernels",
    goal=STEP,
    description="jitted Cholesky + two triangular solves of a 256x256 SPD system, 16 rhs",
    budget_s=0.6,
    warmup_iters=3,
    env=SINGLE_THREADED_BLAS,
    clock="cpu",
)
def step_cholesky_solve_256(a: Adapter) -> Bench:
    import numpy as np

    rhs = np.random.default_rng(1).standard_normal((CHOLESKY_SIZE, 16)).astype(np.float32)
    return _compiled_step(a, _cholesky_solve(a), _spd(CHOLESKY_SIZE), rhs)


@workload(
    "step_svd_128",
    area="kernels",
    goal=STEP,
    description="jitted jnp.linalg.svd of a 128x128 matrix (u, s, vh)",
    budget_s=0.6,
    warmup_iters=3,
    env=SINGLE_THREADED_BLAS,
    clock="cpu",
)
def step_svd_128(a: Adapter) -> Bench:
    import numpy as np

    x = np.random.default_rng(2).standard_normal((SVD_SIZE, SVD_SIZE)).astype(np.float32)
    return _compiled_step(a, lambda m: tuple(a.np_api.linalg.svd(m)), x)


@workload(
    "step_eigh_256",
    area="kernels",
    goal=STEP,
    description="jitted jnp.linalg.eigh of a 256x256 symmetric matrix",
    budget_s=0.6,
    warmup_iters=3,
    env=SINGLE_THREADED_BLAS,
    clock="cpu",
)
def step_eigh_256(a: Adapter) -> Bench:
    return _compiled_step(a, lambda m: tuple(a.np_api.linalg.eigh(m)), _spd(EIGH_SIZE))


@workload(
    "step_fft_65536",
    area="kernels",
    goal=STEP,
    description="jitted jnp.fft.fft of 2^16 complex64 points",
    budget_s=0.6,
    warmup_iters=3,
)
def step_fft_65536(a: Adapter) -> Bench:
    import numpy as np

    rng = np.random.default_rng(3)
    x = (rng.standard_normal(FFT_POINTS) + 1j * rng.standard_normal(FFT_POINTS))
    return _compiled_step(a, a.np_api.fft.fft, x.astype(np.complex64))


def _cnn_params() -> Any:
    import numpy as np

    rng = np.random.default_rng(4)
    pooled = CNN_IMAGE // 2
    return {
        "conv": (0.1 * rng.standard_normal((3, 3, 1, CNN_CHANNELS))).astype(np.float32),
        "dense": (0.01 * rng.standard_normal((pooled * pooled * CNN_CHANNELS, CNN_CLASSES))
                  ).astype(np.float32),
    }


def _cnn_batch() -> Any:
    import numpy as np

    rng = np.random.default_rng(5)
    x = rng.standard_normal((CNN_BATCH, CNN_IMAGE, CNN_IMAGE, 1)).astype(np.float32)
    labels = rng.integers(0, CNN_CLASSES, CNN_BATCH)
    return x, np.eye(CNN_CLASSES, dtype=np.float32)[labels]


def make_cnn_step(a: Adapter) -> Callable[[Any, Any, Any], Any]:
    """A fresh SGD step of conv (3x3, SAME) -> relu -> 2x2 max-pool -> dense ->
    softmax cross-entropy."""
    lax, jnp = a.lax, a.np_api
    tree_map = a.tree_util.tree_map

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = lax.conv_general_dilated(x, params["conv"], (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jnp.maximum(h, 0.0)
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logits = jnp.reshape(h, (h.shape[0], -1)) @ params["dense"]
        logits = logits - jnp.max(logits, axis=-1, keepdims=True)
        log_probs = logits - jnp.log(jnp.sum(jnp.exp(logits), axis=-1, keepdims=True))
        return -jnp.mean(jnp.sum(log_probs * y, axis=-1))

    def step(params: Any, x: Any, y: Any) -> Any:
        BODY_RUNS["cnn_step"] += 1
        value, grads = a.api.value_and_grad(loss)(params, x, y)
        return tree_map(lambda p, g: p - 0.1 * g, params, grads), value

    return step


@workload(
    "step_cnn_train",
    area="kernels",
    goal=STEP,
    description="jitted SGD step of conv + relu + max-pool + dense on 16 28x28 images",
    budget_s=0.6,
    warmup_iters=3,
)
def step_cnn_train(a: Adapter) -> Bench:
    step = a.api.jit(make_cnn_step(a))
    x, y = (a.api.device_put(v) for v in _cnn_batch())
    state = [a.api.device_put(_cnn_params())]

    def run() -> Any:
        params, value = step(state[0], x, y)
        block_leaves((params, value))
        state[0] = params
        return value

    return Bench(run=run, info=lambda: {"final_loss": float(run())})


@workload(
    "lower_cnn_train_step",
    area="kernels",
    goal=TRACING,
    clock="cpu",
    description="jit(cnn_step).lower of the conv + max-pool + dense SGD step",
)
def lower_cnn_train_step(a: Adapter) -> Bench:
    params = _cnn_params()
    x, y = _cnn_batch()
    return counted_bench(lambda: a.api.jit(make_cnn_step(a)).lower(params, x, y), "cnn_step")


@workload(
    "lower_linalg_fft",
    area="kernels",
    goal=TRACING,
    clock="cpu",
    description="jit(f).lower of a Cholesky solve, an SVD, an eigh and an FFT together",
)
def lower_linalg_fft(a: Adapter) -> Bench:
    import numpy as np

    jnp = a.np_api
    spd = _spd(64)
    rhs = np.ones((64, 4), np.float32)
    signal = np.ones(1024, np.complex64)

    def make() -> Callable[..., Any]:
        cho = _cholesky_solve(a)

        def f(m: Any, b: Any, s: Any) -> Any:
            BODY_RUNS["linalg_fft"] += 1
            return (cho(m, b), jnp.linalg.svd(m), jnp.linalg.eigh(m), jnp.fft.fft(s))

        return f

    return counted_bench(lambda: a.api.jit(make()).lower(spd, rhs, signal), "linalg_fft")
