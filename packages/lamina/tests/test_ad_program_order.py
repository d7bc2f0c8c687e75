"""Reverse mode sums cotangents in JAX's order, so gradients match JAX's to the
last bit where float addition is not associative.

The linear jaxpr keeps its equations in program (creation) order, as JAX's
does, and the backward pass visits them in reverse; ``jnp.diagonal`` is a
gather as in JAX, so under jit XLA folds its scatter-add transpose into the
other cotangents the way it does for JAX. The expected values were recorded
with JAX 0.10.2 (inputs chosen so that another summation order gives another
result)."""

from __future__ import annotations

import numpy as np

import lamina
import lamina.numpy as jnp
from lamina import lax

X = np.array([0.5, 2.0], np.float32)
A = np.array([1e8, 3e7], np.float32)
B = np.array([-1e8, 1.0], np.float32)
C = np.array([3.0, -3e7], np.float32)


def late_use(x, a, b, c):
    w = lax.mul(x, c)  # computed first, used last
    y = lax.mul(x, a)
    z = lax.mul(lax.sin(x), b)
    return lax.reduce_sum(lax.add(lax.add(y, z), w), (0,))


# make_jaxpr(grad(late_use)) in JAX 0.10.2
JAX_GRAD_JAXPR = """\
{ lambda ; a:f32[2] b:f32[2] c:f32[2] d:f32[2]. let
    e:f32[2] = mul a d
    f:f32[2] = mul a b
    g:f32[2] = sin a
    h:f32[2] = cos a
    i:f32[2] = mul g c
    j:f32[2] = add f i
    k:f32[2] = add j e
    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] k
    l:f32[2] = broadcast_in_dim 1.0:f32[]
    m:f32[2] = mul l c
    n:f32[2] = mul m h
    o:f32[2] = mul l b
    p:f32[2] = add_any n o
    q:f32[2] = mul l d
    r:f32[2] = add_any p q
  in (r,) }"""

JAX_GRAD_X = [12241747.0, 0.0]
JAX_JIT_GRAD_X = [12241748.0, 0.0]  # XLA fuses the sums of the jitted program


def _without_header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#"))


def test_grad_jaxpr_keeps_program_order() -> None:
    text = str(lamina.make_jaxpr(lamina.grad(late_use))(X, A, B, C))
    assert _without_header(text) == JAX_GRAD_JAXPR


def test_grad_and_vjp_sum_cotangents_in_jax_order() -> None:
    assert np.asarray(lamina.grad(late_use)(X, A, B, C)).tolist() == JAX_GRAD_X
    assert np.asarray(lamina.jit(lamina.grad(late_use))(X, A, B, C)).tolist() == JAX_JIT_GRAD_X
    _, pull = lamina.vjp(late_use, X, A, B, C)
    assert np.asarray(pull(np.float32(1.0))[0]).tolist() == JAX_GRAD_X


M = np.array([[1.0, 1.0], [2.0, 0.25]], np.float32)
MA = np.array([[1e8, 2.0], [3.0, 1e8]], np.float32)
MB = np.array([[-1e8, 5.0], [6.0, -1e8]], np.float32)


def diagonal_last(m, a, b):
    return jnp.sum(m * a) + jnp.sum(m.T * b) + jnp.sum(jnp.log(jnp.diagonal(m)))


def test_diagonal_cotangent_is_added_last_under_jit_as_in_jax() -> None:
    # jit: XLA turns add(scatter-add(zeros, diagonal), rest) into a scatter-add
    # into rest; eagerly the cotangents are summed in reverse program order.
    assert np.asarray(lamina.jit(lamina.grad(diagonal_last))(M, MA, MB)).tolist() == [
        [1.0, 8.0], [8.0, 4.0]]
    assert np.asarray(lamina.grad(diagonal_last)(M, MA, MB)).tolist() == [
        [0.0, 8.0], [8.0, 0.0]]


def test_diagonal_is_a_gather() -> None:
    jaxpr = lamina.make_jaxpr(jnp.diagonal)(M)
    assert [e.primitive.name for e in jaxpr.eqns][-1] == "gather"
    assert np.asarray(jnp.diagonal(np.arange(12.0).reshape(3, 4), 1)).tolist() == [1.0, 6.0, 11.0]
    assert np.asarray(jnp.diagonal(np.arange(12.0).reshape(3, 4), -1)).tolist() == [4.0, 9.0]
