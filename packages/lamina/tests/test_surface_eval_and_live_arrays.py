"""``ensure_compile_time_eval`` (constants computed while tracing, tracers
still staged) and ``live_arrays`` (the backend's live buffers)."""

from __future__ import annotations

import gc

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina_tracing_core.core import Tracer


def test_compile_time_eval_computes_constants_under_jit() -> None:
    seen: dict[str, object] = {}

    @lx.jit
    def f(x: object) -> object:
        with lx.ensure_compile_time_eval():
            z = jnp.sin(jnp.sin(3.0))
            positive = z > 0
            staged = x * 2  # reads the argument: still staged
        seen.update(z=z, staged=staged)
        if positive:  # a concrete bool: no ConcretizationTypeError
            return jnp.cos(x) + staged
        return x

    np.testing.assert_allclose(f(1.0), np.cos(1.0) + 2.0, rtol=1e-6)
    assert isinstance(seen["z"], lx.Array) and not isinstance(seen["z"], Tracer)
    assert isinstance(seen["staged"], Tracer)
    jaxpr = lx.make_jaxpr(f)(1.0)
    inner = jaxpr.jaxpr.eqns[0].params["jaxpr"].jaxpr
    assert [e.primitive.name for e in inner.eqns] == ["mul", "cos", "add"]  # no sin, no gt


def test_compile_time_eval_under_grad_and_outside_transformations() -> None:
    def f(x: object) -> object:
        with lx.ensure_compile_time_eval():
            scale = jnp.float32(3.0) ** 2
        return scale * x

    assert float(lx.grad(f)(1.0)) == 9.0
    with lx.ensure_compile_time_eval():
        np.testing.assert_array_equal(jnp.ones(3) + 1, [2.0, 2.0, 2.0])


def test_live_arrays() -> None:
    x = jnp.arange(5.0) + 0.375  # values no other test's live array has
    y = x * 7
    shapes_before = [a.shape for a in lx.live_arrays()]
    assert shapes_before.count((5,)) >= 2
    del y
    gc.collect()
    assert [a.shape for a in lx.live_arrays()].count((5,)) == shapes_before.count((5,)) - 1
    mine = [a for a in lx.live_arrays() if a.shape == (5,) and float(a[1]) == 1.375]
    assert len(mine) == 1 and isinstance(mine[0], lx.Array)
    mine[0].delete()  # the same buffers as x
    assert x.is_deleted()


def test_explain_cache_misses_flag_and_host_aliases() -> None:
    assert lx.explain_cache_misses.value is False
    with lx.explain_cache_misses(True):
        assert lx.explain_cache_misses.value is True
        assert lx.config.explain_cache_misses is True
    assert lx.explain_cache_misses.value is False
    with pytest.warns(UserWarning, match="jax.host_id has been renamed to jax.process_index"):
        assert lx.host_id() == lx.process_index()
    with pytest.warns(UserWarning, match="renamed to jax.process_count"):
        assert lx.host_count() == lx.process_count()
    with pytest.warns(UserWarning, match="renamed to jax.process_indices"):
        assert lx.host_ids() == [0]
