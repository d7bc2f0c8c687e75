"""Batching: vmap numerics, axis specs, errors, named axes and batch_jaxpr."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import batching, core, effects, lax
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

f32 = np.float32


def loop(f: Any, xs: Any, in_axis: int = 0) -> np.ndarray[Any, Any]:
    xs = np.moveaxis(np.asarray(xs), in_axis, 0)
    return np.stack([np.asarray(f(x)) for x in xs])


def test_vmap_matches_python_loop() -> None:
    def f(x):
        return T.t_add(T.t_mul(T.t_sin(x), x), 1.0)

    xs = T.rand_args([(5, 3)])[0]
    np.testing.assert_allclose(tc.vmap(f)(xs), loop(f, xs), rtol=1e-6)
    np.testing.assert_allclose(tc.vmap(f, in_axes=1, out_axes=1)(xs.T), loop(f, xs).T,
                               rtol=1e-6)


def test_vmap_lax_with_unbatched_operand_and_reduction() -> None:
    w = T.rand_args([(3, 4)], seed=3)[0]

    def f(x):
        y = lax.dot_general(x, w, (((0,), (0,)), ((), ())))
        return lax.reduce_sum(lax.tanh(y), (0,))

    xs = T.rand_args([(6, 3)], seed=4)[0]
    np.testing.assert_allclose(tc.vmap(f)(xs), loop(f, xs), rtol=1e-5)


def test_in_axes_prefix_pytrees_none_and_kwargs() -> None:
    def f(p, c, scale):
        return T.t_mul(T.t_add(p["a"], p["b"]), T.t_mul(c, scale))

    a = np.arange(6, dtype=f32).reshape(2, 3)
    b = np.arange(6, dtype=f32).reshape(3, 2)
    c = f32(2.0)
    out = tc.vmap(f, in_axes=({"a": 0, "b": 1}, None))(
        {"a": a, "b": b}, c, scale=np.array([1.0, 10.0], f32))
    expected = np.stack([(a[i] + b[:, i]) * c * s for i, s in enumerate([1.0, 10.0])])
    np.testing.assert_allclose(out, expected)


def test_negative_axes_and_out_axes_pytree() -> None:
    def f(x):
        return {"same": x, "sin": T.t_sin(x)}

    xs = np.arange(6, dtype=f32).reshape(3, 2)
    out = tc.vmap(f, in_axes=-1, out_axes={"same": 0, "sin": -1})(xs)
    np.testing.assert_allclose(out["same"], xs.T)
    np.testing.assert_allclose(out["sin"], np.sin(xs), rtol=1e-6)


def test_out_axes_none_for_unbatched_output() -> None:
    out = tc.vmap(lambda x, c: (T.t_sin(x), c), in_axes=(0, None), out_axes=(0, None))(
        np.ones(3, f32), f32(5.0))
    assert np.asarray(out[1]).shape == ()
    # JAX 0.10.2's texts (unnamed and named axis), then the output
    with pytest.raises(ValueError, match="at vmap out_axes, got axis spec None but output was "
                                         "batched on axis 0 \\(output"):
        tc.vmap(T.t_sin, out_axes=None)(np.ones(3, f32))
    with pytest.raises(ValueError, match="vmap has mapped output \\(axis_name=i\\) but "
                                         "out_axes is None"):
        tc.vmap(T.t_sin, out_axes=None, axis_name="i")(np.ones(3, f32))
    # sum_match sums such an output over the mapped axis instead
    summed = tc.vmap(T.t_sin, out_axes=None, sum_match=True)(np.ones(3, f32))
    np.testing.assert_allclose(summed, 3 * np.sin(1.0), rtol=1e-6)


def test_axis_size_without_mapped_inputs() -> None:
    out = tc.vmap(lambda c: T.t_add(c, 1.0), in_axes=None, axis_size=4)(f32(1.0))
    np.testing.assert_allclose(out, np.full(4, 2.0))


def test_inconsistent_sizes_error_names_argument_paths() -> None:
    def g(x, y):
        return T.t_add(x, y["a"])

    with pytest.raises(ValueError) as info:
        tc.vmap(g)(np.ones((2, 3), f32), {"a": np.ones((3, 3), f32)})
    assert str(info.value) == (
        "vmap got inconsistent sizes for array axes to be mapped:\n"
        "  * one axis had size 2: axis 0 of argument x of type float32[2,3];\n"
        "  * one axis had size 3: axis 0 of argument y['a'] of type float32[3,3]")


def test_bad_axis_specs() -> None:
    def g(x, y):
        return T.t_add(x, y["a"])

    x, y = np.ones((2, 3), f32), {"a": np.ones((2, 3), f32)}
    with pytest.raises(ValueError, match=r"len\(in_axes\)=3, len\(args\)=2"):
        tc.vmap(g, in_axes=(0, 1, 2))(x, y)
    with pytest.raises(ValueError, match="tree prefix"):
        tc.vmap(g, in_axes=(0, {"b": 0}))(x, y)
    with pytest.raises(ValueError, match=r"axis 2.*argument x"):
        tc.vmap(g, in_axes=(2, 0))(x, y)
    with pytest.raises(ValueError, match="at least one non-None value in in_axes"):
        tc.vmap(g, in_axes=None)(x, y)
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None"):
        tc.vmap(g, in_axes=0.5)(x, y)


def test_psum_over_vmapped_axis() -> None:
    xs = np.arange(4, dtype=f32)
    np.testing.assert_allclose(tc.vmap(lambda x: lax.psum(x, "b"), axis_name="b")(xs),
                               np.full(4, xs.sum()))
    # an unbatched value summed over the axis is multiplied by its size
    np.testing.assert_allclose(tc.vmap(lambda x: lax.psum(1.0, "b"), axis_name="b")(xs),
                               np.full(4, 4.0))


def test_nested_vmaps_with_axis_names() -> None:
    xs = np.arange(6, dtype=f32).reshape(2, 3)

    def inner(x):
        return T.t_add(lax.psum(x, "i"), T.t_mul(lax.psum(x, "j"), 0.0))

    out = tc.vmap(tc.vmap(inner, axis_name="j"), axis_name="i")(xs)
    np.testing.assert_allclose(out, np.broadcast_to(xs.sum(0), (2, 3)))


def test_vmap_removes_its_axis_from_effects() -> None:
    closed = tc.make_jaxpr(tc.vmap(lambda x: lax.psum(x, "b"), axis_name="b"))(
        np.ones(3, f32))
    assert effects.NamedAxisEffect("b") not in closed.effects
    assert "psum" not in str(closed)
    # a collective over an outer (pmap-like) axis stays, with its effect
    closed = tc.make_jaxpr(tc.vmap(lambda x: lax.psum(x, "p")), axis_env=[("p", 2)])(
        np.ones(3, f32))
    assert effects.NamedAxisEffect("p") in closed.effects


def test_vmap_of_grad_and_grad_of_vmap() -> None:
    xs = np.linspace(0.1, 1.0, 4).astype(f32)
    g = tc.vmap(tc.grad(lambda x: T.t_mul(T.t_sin(x), x)))(xs)
    np.testing.assert_allclose(g, np.cos(xs) * xs + np.sin(xs), rtol=1e-5)
    g2 = tc.grad(lambda v: T.t_sum(tc.vmap(lambda x: T.t_mul(T.t_sin(x), x))(v)))(xs)
    np.testing.assert_allclose(g2, g, rtol=1e-5)


def test_vmap_names_unchanged_in_jaxpr() -> None:
    closed = tc.make_jaxpr(tc.vmap(lambda x, y: T.t_add(x, y["k"])))(
        np.ones(3, f32), {"k": np.ones(3, f32)})
    assert closed.jaxpr.debug_info is not None
    assert closed.jaxpr.debug_info.arg_names == ("x", "y['k']")
    validate_jaxpr_debug_info(closed)


def test_batch_jaxpr_keeps_names_and_records_vmap() -> None:
    closed = tc.make_jaxpr(lambda a, b: (T.t_mul(a, b), T.t_sin(b)))(f32(1.0), f32(2.0))
    batched, out_batched = batching.batch_jaxpr(closed, 3, [True, False], instantiate=False)
    assert out_batched == [True, False]
    dbg = batched.jaxpr.debug_info
    assert dbg is not None and dbg.arg_names == ("a", "b")
    assert dbg.result_paths == ("result[0]", "result[1]")
    assert dbg.func_src_info is not None and dbg.func_src_info.startswith("vmap(")
    validate_jaxpr_debug_info(batched)
    assert batched.in_avals[0].shape == (3,) and batched.out_avals[1].shape == ()
    inst, out_batched = batching.batch_jaxpr(closed, 3, [True, False], instantiate=True)
    assert out_batched == [True, True] and inst.out_avals[1].shape == (3,)
    out = core.jaxpr_as_fun(inst)(np.arange(3, dtype=f32), f32(2.0))
    np.testing.assert_allclose(out[0], np.arange(3) * 2.0)
    np.testing.assert_allclose(out[1], np.full(3, np.sin(2.0)), rtol=1e-6)


def test_batch_jaxpr_with_axis_name_handles_collectives() -> None:
    closed = tc.make_jaxpr(lambda a: lax.psum(a, "z"), axis_env=[("z", 3)])(f32(1.0))
    batched, out_batched = batching.batch_jaxpr(
        closed, batching.AxisData("z", 3), [True], instantiate=True)
    assert effects.NamedAxisEffect("z") not in batched.effects
    out = core.jaxpr_as_fun(batched)(np.arange(3, dtype=f32))
    np.testing.assert_allclose(out[0], np.full(3, 3.0))


def test_batched_value_in_python_control_flow_is_an_error() -> None:
    def f(x):
        if T.t_sin(x) > 0:  # type: ignore[operator]
            return x
        return x

    with pytest.raises(tc.TracerBoolConversionError, match="for vmap"):
        tc.vmap(f)(np.ones(3, f32))


def test_missing_batching_rule_is_clear() -> None:
    from lamina_tracing_core.primitives import MissingRuleError, Primitive
    p = Primitive("no_batch_rule")
    p.def_abstract_eval(lambda a: a)
    p.def_impl(lambda x: x)
    with pytest.raises(MissingRuleError, match="Batching rule for 'no_batch_rule'"):
        tc.vmap(lambda x: p.bind(x))(np.ones(2, f32))
