"""The traces' custom-derivative hooks (``process_custom_jvp_call`` /
``process_custom_vjp_call``), driven by test-local call primitives that follow
the documented protocols (the control-flow layer builds custom_jvp/custom_vjp
on them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import tc_testing as T

import lamina_tracing_core as tc
from lamina_linear_util.linear_util import WrappedFun, wrap_init
from lamina_tracing_core import core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.primitives import Primitive

f32 = np.float32


class _CustomJVPCall(Primitive):
    multiple_results = True

    def bind(self, *args: Any, **params: Any) -> Any:
        fun, jvp, *vals = args
        return core.bind_custom_jvp(self, fun, jvp, vals, symbolic_zeros=False)


class _CustomVJPCall(Primitive):
    multiple_results = True

    def bind(self, *args: Any, **params: Any) -> Any:
        fun, fwd, bwd, *vals = args
        return core.bind_custom_vjp(self, fun, fwd, bwd, vals, out_trees=params["out_trees"],
                                    symbolic_zeros=False)


t_custom_jvp_p = _CustomJVPCall("t_custom_jvp_call", multiple_results=True)
t_custom_vjp_p = _CustomVJPCall("t_custom_vjp_call", multiple_results=True)


def _inline(trace: Any, fun: WrappedFun, *rest: Any, **params: Any) -> list[Any]:
    tracers = rest[-1]
    return list(fun.call_wrapped(*tracers))


pe.custom_jvp_staging_rules[t_custom_jvp_p] = _inline
pe.custom_vjp_staging_rules[t_custom_vjp_p] = _inline


def sin_with_custom_jvp(x: Any) -> Any:
    """sin(x) whose JVP is declared to be 100 * t."""
    fun = wrap_init(lambda a: [T.t_sin(a)])
    jvp = wrap_init(lambda a, t: [T.t_sin(a), T.t_mul(t, 100.0)])
    return t_custom_jvp_p.bind(fun, jvp, x)[0]


class _ResTree:
    num_leaves = 1


def sin_with_custom_vjp(x: Any) -> Any:
    """sin(x) whose VJP is declared to be 7 * ct (the residual is x)."""
    fun = wrap_init(lambda a: [T.t_sin(a)])
    fwd = wrap_init(lambda a, nonzero: [a, T.t_sin(a)])  # [*residuals, *outputs]
    bwd = wrap_init(lambda res, ct: [T.t_mul(ct, 7.0)])
    return t_custom_vjp_p.bind(fun, fwd, bwd, x,
                               out_trees=lambda: (None, _ResTree(), [None]))[0]


def test_custom_jvp_under_each_trace() -> None:
    out = sin_with_custom_jvp(f32(1.0))
    np.testing.assert_allclose(out, np.sin(1.0), rtol=1e-6)
    _, tan = tc.jvp(sin_with_custom_jvp, (f32(1.0),), (f32(2.0),))
    assert float(tan) == 200.0
    assert float(tc.grad(sin_with_custom_jvp)(f32(1.0))) == 100.0
    xs = np.ones(3, f32)
    np.testing.assert_allclose(tc.vmap(tc.grad(sin_with_custom_jvp))(xs), np.full(3, 100.0))
    np.testing.assert_allclose(
        tc.grad(lambda v: T.t_sum(tc.vmap(sin_with_custom_jvp)(v)))(xs), np.full(3, 100.0))
    closed = tc.make_jaxpr(tc.grad(sin_with_custom_jvp))(f32(1.0))
    assert float(core.jaxpr_as_fun(closed)(f32(1.0))[0]) == 100.0


def test_custom_vjp_under_each_trace() -> None:
    np.testing.assert_allclose(sin_with_custom_vjp(f32(1.0)), np.sin(1.0), rtol=1e-6)
    assert float(tc.grad(sin_with_custom_vjp)(f32(1.0))) == 7.0
    xs = np.ones(3, f32)
    np.testing.assert_allclose(tc.vmap(tc.grad(sin_with_custom_vjp))(xs), np.full(3, 7.0))
    np.testing.assert_allclose(
        tc.grad(lambda v: T.t_sum(tc.vmap(sin_with_custom_vjp)(v)))(xs), np.full(3, 7.0))
    closed = tc.make_jaxpr(tc.grad(sin_with_custom_vjp))(f32(1.0))
    assert "custom_lin" in str(closed) or float(core.jaxpr_as_fun(closed)(f32(1.0))[0]) == 7.0
    assert float(core.jaxpr_as_fun(closed)(f32(1.0))[0]) == 7.0
