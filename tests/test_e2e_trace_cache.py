"""Behaviours 2 and 11: how often a Python function is traced, counted with a
Python counter in its body. Expected counts are JAX 0.10's."""

from __future__ import annotations

import numpy as np

import lamina as lx
import lamina.numpy as jnp
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import Tracer


class Counted:
    """A function that counts how often its body runs (i.e. is traced)."""

    def __init__(self, body=lambda x: x * 2 + 1):
        self.calls = 0
        self.body = body
        self.__name__ = "counted"
        self.__qualname__ = "counted"

    def __call__(self, *args):
        self.calls += 1
        return self.body(*args)


X = np.arange(3, dtype=np.float32)


def test_inner_jit_traced_once_across_outer_traces():
    inner = Counted()
    inner_jit = lx.jit(inner)
    for i in range(4):
        # a fresh outer function each time: the outer is re-traced, the inner is not
        lx.make_jaxpr(lambda x, i=i: inner_jit(x) + i)(X)
        lx.jit(lambda x, i=i: inner_jit(x) * i)(X)
    assert inner.calls == 1


def test_inner_jit_retraced_for_a_new_shape_only():
    inner = Counted()
    inner_jit = lx.jit(inner)
    outer = lambda x: inner_jit(x).sum()
    lx.jit(outer)(X)
    lx.make_jaxpr(outer)(X)
    lx.grad(outer)(X)
    assert inner.calls == 1
    lx.jit(outer)(np.ones(5, np.float32))
    assert inner.calls == 2


def test_inner_jit_sees_shaped_not_concrete_avals():
    seen = []

    def inner(x):
        seen.append(x)
        return x + 1

    lx.jit(lambda x: lx.jit(inner)(x) * 2)(np.float32(3.0))
    (tracer,) = seen
    assert isinstance(tracer, Tracer)
    aval = tracer.aval
    assert type(aval) is ShapedArray
    assert aval.shape == () and aval.dtype == np.float32


def test_eval_shape_then_jit_traces_once():
    fun = Counted()
    out = lx.eval_shape(fun, X)
    assert out.shape == (3,) and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(lx.jit(fun)(X)), X * 2 + 1)
    assert fun.calls == 1


def test_eval_shape_of_jit_then_jit_then_make_jaxpr_of_jit_traces_once():
    fun = Counted()
    jitted = lx.jit(fun)
    lx.eval_shape(jitted, X)
    jitted(X)
    lx.make_jaxpr(jitted)(X)
    lx.eval_shape(fun, X)
    assert fun.calls == 1


def test_python_scalars_weakly_typed_share_one_trace():
    fun = Counted()
    jitted = lx.jit(fun)
    assert float(jitted(1.0)) == 3.0
    assert float(jitted(2.0)) == 5.0
    assert float(jitted(-7.5)) == -14.0
    assert fun.calls == 1
    jitted(3)  # a weak int is another type: one more trace (as JAX)
    assert fun.calls == 2


def test_strong_float32_traces_once_more():
    fun = Counted()
    jitted = lx.jit(fun)
    weak = jitted(1.0)
    jitted(2.0)
    assert fun.calls == 1
    strong = jitted(np.float32(1.0))
    assert fun.calls == 2
    jitted(np.float32(5.0))
    assert fun.calls == 2
    assert weak.weak_type and not strong.weak_type


def test_make_jaxpr_shares_the_jit_cache():
    fun = Counted()
    lx.jit(fun)(X)
    lx.make_jaxpr(fun)(X)
    lx.make_jaxpr(fun)(X)
    assert fun.calls == 1


def test_static_argnums_key_the_cache():
    fun = Counted(lambda x, n: x * n)
    jitted = lx.jit(fun, static_argnums=(1,))
    jitted(X, 2)
    jitted(X + 1, 2)
    assert fun.calls == 1
    np.testing.assert_allclose(np.asarray(jitted(X, 3)), X * 3)
    assert fun.calls == 2


def test_tree_structure_keys_the_cache():
    fun = Counted(lambda t: jnp.sum(t[0]) + jnp.sum(t[1]))
    jitted = lx.jit(fun)
    jitted((X, X))
    jitted((X + 1, X))
    assert fun.calls == 1
    jitted([X, X])
    assert fun.calls == 2
