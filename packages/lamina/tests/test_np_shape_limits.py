"""Shapes XLA cannot hold raise a clear error, eagerly and under jit, instead
of aborting the process inside XLA; a negative iota size names iota.

The crashing calls run in a child process, so that a regression fails the
test instead of killing pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import lamina
import lamina.numpy as jnp
from lamina import lax

ZEROS_MESSAGE = ("lamina.numpy.zeros: shape (8589934592, 8589934592) of int8: 2**66 elements "
                 "(2**66 bytes), more than an array can hold (at most 2**63 - 1 bytes)")


def _run_child(body: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent("""
        import lamina
        import lamina.numpy as jnp
        from lamina import lax
        try:
            BODY
        except ValueError as e:
            print("raised", type(e).__name__, e)
        """).replace("BODY", body)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("body", [
    "jnp.zeros((2**33, 2**33), jnp.int8)",
    "lamina.jit(lambda: jnp.zeros((2**33, 2**33), jnp.int8))()",
])
def test_huge_zeros_raise_in_a_child_process(body: str) -> None:
    proc = _run_child(body)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"raised ShapeTooLargeError {ZEROS_MESSAGE}"


@pytest.mark.parametrize("body,where", [
    ("jnp.ones((2**62,), jnp.float32)", "lamina.numpy.ones: shape (4611686018427387904,)"),
    ("lax.broadcast(jnp.ones(3), (2**31, 2**31))",
     "broadcast_in_dim: shape (2147483648, 2147483648, 3)"),
    ("lamina.jit(lambda x: lax.broadcast_in_dim(x, (2**62, 2**62, 0), (2,)))(jnp.ones(0))",
     "broadcast_in_dim: shape (4611686018427387904, 4611686018427387904, 0)"),
    ("lamina.jit(lambda: lax.full((2**61,), 0, jnp.int32))()", "full: shape (2305843009213693952,)"),
])
def test_other_too_large_shapes_raise_in_a_child_process(body: str, where: str) -> None:
    proc = _run_child(body)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"raised ShapeTooLargeError {where} of "), proc.stdout


def test_error_in_this_process_eager_and_jit() -> None:
    with pytest.raises(ValueError) as eager:
        jnp.zeros((2 ** 33, 2 ** 33), jnp.int8)
    assert str(eager.value) == ZEROS_MESSAGE
    with pytest.raises(ValueError) as jitted:
        lamina.jit(lambda: jnp.zeros((2 ** 33, 2 ** 33), jnp.int8))()
    assert str(jitted.value) == ZEROS_MESSAGE


def test_empty_arrays_with_huge_dimensions_still_work() -> None:
    x = jnp.zeros((0, 2 ** 62, 2 ** 62), jnp.int8)
    assert x.shape == (0, 2 ** 62, 2 ** 62)
    assert lamina.jit(lambda: jnp.ones((2 ** 60, 0)) + 1)().shape == (2 ** 60, 0)
    with pytest.raises(ValueError, match="its leading dimensions"):
        jnp.ones((2 ** 62, 0))  # XLA aborts on it: its byte count overflows first


def test_negative_iota_size_names_iota_eager_and_jit() -> None:
    message = r"^iota shape must have every element be nonnegative, got \(-1,\)\.$"
    with pytest.raises(TypeError, match=message):
        lax.iota(jnp.float32, -1)
    with pytest.raises(TypeError, match=message):
        lamina.jit(lambda: lax.iota(jnp.float32, -1))()
