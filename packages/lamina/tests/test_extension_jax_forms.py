"""The forms in which JAX hands values to user rules and takes them back,
which libraries written for JAX depend on (equinox's test suite found each):
rules get tuples, ``linear_transpose`` takes avals for its primals, and a
lowering rule may call Python through ``mlir.emit_python_callback``."""

from __future__ import annotations

from typing import Any

import jaxlib.version
import lamina as lx
import lamina.lib
import lamina.numpy as jnp
import numpy as np
import pytest
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina.core import ShapedArray
from lamina.extend import core as ext_core
from lamina.interpreters import ad, batching, mlir


def _primitive(name: str) -> ext_core.Primitive:
    prim = ext_core.Primitive(name)
    prim.def_impl(lambda x: np.asarray(x) * 2)
    prim.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    return prim


def test_jvp_and_batching_rules_get_tuples_as_in_jax() -> None:
    """A rule that uses its arguments as vmap axis specifications (equinox's
    ``create_vprim``) needs JAX's tuples: a list is another pytree there."""
    double_p = _primitive("double_tuple_forms")
    seen: dict[str, Any] = {}

    def jvp(primals: Any, tangents: Any) -> Any:
        seen["jvp"] = (type(primals), type(tangents))
        return double_p.bind(*primals), double_p.bind(*tangents)

    def batch(vals: Any, dims: Any) -> Any:
        seen["batch"] = (type(vals), type(dims))
        # in_axes=dims against the tuple of arguments: JAX's shapes line up
        return lx.vmap(lambda *xs: xs[0] * 2, in_axes=dims)(*vals), 0

    ad.primitive_jvps[double_p] = jvp
    batching.primitive_batchers[double_p] = batch
    mlir.register_lowering(double_p, mlir.lower_fun(lambda x: x * 2, multiple_results=False))
    x = jnp.arange(3.0)
    out, tangent = lx.jvp(lambda v: double_p.bind(v), (x,), (jnp.ones(3),))
    np.testing.assert_allclose(out, 2 * np.arange(3.0))
    np.testing.assert_allclose(tangent, 2 * np.ones(3))
    assert seen["jvp"] == (tuple, tuple)
    np.testing.assert_allclose(lx.vmap(double_p.bind)(x[:, None]), 2 * np.arange(3.0)[:, None])
    assert seen["batch"] == (tuple, tuple)


def test_linear_transpose_takes_avals_and_duck_typed_primals() -> None:
    weak = ShapedArray((), np.dtype(np.float32), weak_type=True)
    (ct,) = lx.linear_transpose(lambda v: 2 * v, weak)(1.0)
    assert float(ct) == 2.0 and ct.dtype == np.float32 and ct.weak_type

    class Stand:
        shape = (2,)
        dtype = np.dtype(np.float32)

    (ct2,) = lx.linear_transpose(lambda v: v[::-1] * 3, Stand())(jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(ct2, [6.0, 3.0])
    with pytest.raises(TypeError, match="linear_transpose.*problematic value is of type"):
        lx.linear_transpose(lambda v: v, object())


def _host_double_p(check: str) -> ext_core.Primitive:
    """A primitive whose lowering runs NumPy on the host through
    ``emit_python_callback``, as equinox's ``noinline`` does."""
    prim = ext_core.Primitive(f"host_double_{check}")
    prim.multiple_results = True
    prim.def_abstract_eval(lambda x: [ShapedArray(x.shape, x.dtype)])

    def host(x: np.ndarray) -> tuple[np.ndarray, ...]:
        if check == "shape":
            return (np.zeros((7,), x.dtype),)
        return (2 * x,)

    def lowering(ctx: Any, x: Any) -> Any:
        token = hlo.after_all([]) if check == "token" else None
        results, new_token, keepalive = mlir.emit_python_callback(
            ctx, host, token, [x], ctx.avals_in, ctx.avals_out, has_side_effect=False)
        assert (new_token is None) == (token is None)
        ctx.module_context.add_keepalive(keepalive)
        return results

    mlir.register_lowering(prim, lowering)
    return prim


@pytest.mark.parametrize("check", ["plain", "token"])
def test_emit_python_callback_runs_the_function_on_the_host(check: str) -> None:
    prim = _host_double_p(check)
    (out,) = lx.jit(lambda v: prim.bind(v + 1))(jnp.arange(3.0))
    np.testing.assert_allclose(out, 2 * (np.arange(3.0) + 1))


def test_emit_python_callback_checks_results_like_jax() -> None:
    prim = _host_double_p("shape")
    with pytest.raises(Exception, match=r"Incorrect output shape for return value #0"):
        lx.block_until_ready(lx.jit(lambda v: prim.bind(v))(jnp.arange(3.0)))


def test_lib_version_is_jaxlib_version() -> None:
    assert lamina.lib.__version__ == jaxlib.version.__version__


def test_jit_returns_float0_outputs_as_numpy_zeros() -> None:
    """An integer argument's cotangent leaves jit as NumPy float0 zeros, as in
    JAX (equinox compares such trees with NumPy), on every call."""
    def grads(x: Any, y: Any) -> Any:
        out, pullback = lx.vjp(lambda a, b: a * 2.0 + b, x, y)
        return pullback(out)

    jitted = lx.jit(grads)
    for _ in range(3):
        g_int, g_float = jitted(1, 2.0)
        assert type(g_int) is np.ndarray and g_int.dtype == lx.dtypes.float0
        assert float(g_float) == 4.0


def test_a_callback_failing_in_a_program_is_a_jaxlib_runtime_error() -> None:
    from jaxlib import _jax

    def fails(x: Any) -> Any:
        raise KeyError("boom")

    run = lx.jit(lambda x: lx.pure_callback(fails, lx.ShapeDtypeStruct((), np.float32), x))
    with pytest.raises(_jax.JaxRuntimeError, match="KeyError: 'boom'") as info:
        lx.block_until_ready(run(1.0))
    assert isinstance(info.value.__cause__, KeyError)


def test_integer_inputs_are_unperturbed_under_vjp_and_jvp() -> None:
    """An integer input's float0 tangent is a symbolic zero (JAX's jvp and
    linearize make it one): custom_vjp's forward rule sees it unperturbed."""
    seen: list[tuple[bool, bool]] = []

    @lx.custom_vjp
    def scale(n: Any, x: Any) -> Any:
        return x * n

    def fwd(n: Any, x: Any) -> Any:
        seen.append((n.perturbed, x.perturbed))
        return scale(n.value, x.value), n.value

    def bwd(n: Any, g: Any) -> Any:
        return None, g * n

    scale.defvjp(fwd, bwd, symbolic_zeros=True)
    grad = lx.jit(lambda n, x: lx.vjp(scale, n, x)[1](1.0))(3, 2.0)
    assert float(grad[1]) == 3.0 and seen == [(False, True)]
    float0_tangent = np.zeros((), lx.dtypes.float0)
    _, t = lx.jvp(lambda n, x: x * n, (3, 2.0), (float0_tangent, 1.0))
    assert float(t) == 3.0


def test_core_max_dim_and_min_dim() -> None:
    import lamina.core as lcore

    assert lcore.max_dim(np.int64(2), 3) == 3 and lcore.min_dim(2, 3) == 2
    with pytest.raises(TypeError, match="max_dim argument d2"):
        lcore.max_dim(2, "a")
    with pytest.raises(TypeError, match="min_dim argument d1"):
        lcore.min_dim(2.5, 3)


def test_def_effectful_abstract_eval_puts_its_effects_on_the_equation() -> None:
    """JAX's ``def_effectful_abstract_eval``: the rule returns avals and effects;
    the effects are the staged equation's and the jaxpr's, and depend on the
    operand types as the rule says."""
    from lamina_tracing_core.effects import Effect

    class BigOperand(Effect):
        def __repr__(self) -> str:
            return "BigOperand"

    big = BigOperand()
    tag_p = ext_core.Primitive("tag_big_operands")
    tag_p.def_impl(lambda x: x)

    @tag_p.def_effectful_abstract_eval
    def _abstract(x: ShapedArray) -> Any:
        return ShapedArray(x.shape, x.dtype), ({big} if x.size > 2 else set())

    small = lx.make_jaxpr(tag_p.bind)(jnp.ones(2))
    large = lx.make_jaxpr(tag_p.bind)(jnp.ones(3))
    assert small.eqns[0].effects == frozenset() and small.effects == frozenset()
    assert large.eqns[0].effects == {big} and big in large.effects
    assert tag_p.abstract_eval(ShapedArray((4,), np.dtype(np.float32)))[1] == {big}
    np.testing.assert_allclose(tag_p.bind(np.arange(3.0)), np.arange(3.0))


def test_dce_jaxpr_consts_prunes_constants_too() -> None:
    from lamina.interpreters import partial_eval as pe

    big, unused = np.arange(3.0), np.ones(2)
    closed = lx.make_jaxpr(lambda x, y: (x * jnp.asarray(big), jnp.sum(jnp.asarray(unused)) + y))(
        jnp.ones(3), 1.0)
    jaxpr = closed.jaxpr
    assert len(jaxpr.constvars) == 2  # big and unused
    new, used_consts, used_inputs = pe.dce_jaxpr_consts(jaxpr, [True, False])
    assert used_consts == [True, False] and used_inputs == [True, False]
    assert len(new.constvars) == 1 and len(new.invars) == 1 and len(new.outvars) == 1


def test_unsafe_trace_state_queries() -> None:
    seen: list[tuple[Any, ...]] = []

    def probe(x: Any) -> Any:
        seen.append((ext_core.unsafe_am_i_under_a_jit_DO_NOT_USE(),
                     ext_core.unsafe_am_i_under_a_vmap_DO_NOT_USE(),
                     ext_core.unsafe_get_axis_names_DO_NOT_USE(),
                     ext_core.nonempty_axis_env_DO_NOT_USE()))
        return x

    probe(1.0)
    lx.jit(probe)(1.0)
    lx.vmap(probe, axis_name="i")(jnp.ones(2))
    lx.grad(probe)(1.0)
    # JAX 0.10.2's answers
    assert seen == [(False, False, [], False), (True, False, [], False),
                    (False, True, ["i"], True), (False, False, [], False)]
