"""Issue 18's remaining behaviours, each checked against what JAX 0.10.2 does:
``ShapeDtypeStruct`` constants, ``pmap(sharded_jit(f))``, deeply nested pytrees
and the weak-type flags of results."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp

SDS = lx.ShapeDtypeStruct((2, 3), jnp.float32)


# --- ShapeDtypeStruct as a closed-over constant -------------------------------------------------
def test_eval_shape_of_a_closed_over_shape_dtype_struct_returns_it() -> None:
    assert lx.eval_shape(lambda: SDS) == SDS
    weak = lx.ShapeDtypeStruct((2,), jnp.float32, weak_type=True)
    out = lx.eval_shape(lambda: weak)
    assert out == weak and out.weak_type


def test_eval_shape_of_shape_dtype_structs_inside_closed_over_pytrees() -> None:
    out = lx.eval_shape(lambda: {"a": SDS, "b": [SDS, (SDS,)]})
    assert out == {"a": SDS, "b": [SDS, (SDS,)]}


def test_shape_dtype_struct_constants_trace_through_numpy_and_transformations() -> None:
    assert lx.eval_shape(lambda: jnp.sin(SDS)) == SDS
    out = lx.eval_shape(lambda x: x * jnp.sin(SDS), jnp.ones((2, 3)))
    assert out == SDS
    grad = lx.eval_shape(lx.grad(lambda x: (x * jnp.sin(SDS)).sum()), jnp.ones((2, 3)))
    assert grad == SDS
    batched = lx.eval_shape(lx.vmap(lambda x: x + jnp.sin(SDS)), jnp.ones((4, 2, 3)))
    assert batched == lx.ShapeDtypeStruct((4, 2, 3), jnp.float32)


def test_shape_dtype_struct_constant_in_jit_trace_and_make_jaxpr() -> None:
    traced = lx.jit(lambda: SDS).trace()
    assert traced.out_info.aval.shape == (2, 3)
    assert traced.out_info.aval.dtype == np.float32
    closed = lx.make_jaxpr(lambda: SDS)()
    assert [v.aval.shape for v in closed.jaxpr.constvars] == [(2, 3)]


@pytest.mark.parametrize("fun", [lambda: SDS, lambda: jnp.sin(SDS) + 1.0])
def test_running_a_shape_dtype_struct_constant_is_jax_type_error(fun: object) -> None:
    with pytest.raises(TypeError, match="ShapeDtypeStruct does not have a value"):
        lx.jit(fun)()  # type: ignore[operator]


def test_eager_op_on_a_shape_dtype_struct_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=r"of shape float32\[2,3\] .*is not a valid JAX type"):
        jnp.sin(SDS)
    with pytest.raises(TypeError, match=r"of shape float32\[2,3\] .*is not a valid JAX type"):
        lx.jit(lambda x: x)(SDS)


def test_eval_shape_of_the_shape_of_a_shape_dtype_struct() -> None:
    out = lx.eval_shape(lambda: SDS.shape)
    assert out == (lx.ShapeDtypeStruct((), jnp.int32, weak_type=True),) * 2


# --- pmap(sharded_jit(f)) -----------------------------------------------------------------------


def test_pmap_of_sharded_jit_lowers_and_matches_numpy() -> None:
    from lamina.sharded_jit import PartitionSpec as P
    from lamina.sharded_jit import sharded_jit, with_sharding_constraint

    def body(x: object, y: object) -> object:
        z = with_sharding_constraint(jnp.sin(x) * y, P(2, 1))
        return z + 1.0

    f = sharded_jit(body, in_parts=(P(2, 1), None), out_parts=P(2, 1))
    x = np.arange(4 * 4 * 2, dtype=np.float32).reshape(4, 4, 2)
    y = np.linspace(-1.0, 1.0, 4 * 4 * 2, dtype=np.float32).reshape(4, 4, 2)
    out = lx.pmap(f)(x, y)
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * y + 1.0, rtol=1e-6)


def test_pmap_of_sharded_jit_with_a_collective_and_a_gradient() -> None:
    from lamina.sharded_jit import PartitionSpec as P
    from lamina.sharded_jit import sharded_jit

    f = sharded_jit(lambda x: x * x, in_parts=P(2), out_parts=P(2))

    def per_device(x: object) -> object:
        g = lx.grad(lambda v: f(v).sum())(x)
        return lx.lax.psum(g, "i")

    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    out = lx.pmap(per_device, axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to((2 * x).sum(0), (8, 4)))


# --- pytrees nested too deeply to flatten -------------------------------------------------------
def _nest(depth: int) -> object:
    x: object = 1.0
    for _ in range(depth):
        x = [x]
    return x


def _f(x: object, y: object) -> object:
    return y


TOO_DEEP = 2000  # JAX 0.10.2 gives nanobind's SystemError here


@pytest.fixture
def warm_transforms() -> None:
    """One plain call of each transformation first: jaxlib's C++ jit and pmap
    functions leave the flattening error pending while they run their
    first-call set-up (imports), which then fails with a SystemError that
    never reaches lamina; a process's first call with a too-deep tree is the
    one case this error cannot name (see the closing note of issue 18)."""
    lx.jit(_f)(1.0, 1.0)
    lx.jit(_f, static_argnums=0)(1, 1.0)
    lx.pmap(_f)(np.ones(1), np.ones(1))
    lx.vmap(_f)(np.ones(1), np.ones(1))


@pytest.mark.parametrize("call, where", [
    (lambda: lx.jit(_f)(1.0, _nest(TOO_DEEP)), r"jit\(_f\): argument y"),
    (lambda: lx.jit(_f, static_argnums=0)(1, _nest(TOO_DEEP)), r"jit\(_f\): argument y"),
    (lambda: lx.jit(_f)(1.0, y=_nest(TOO_DEEP)), r"jit\(_f\): argument y"),
    (lambda: lx.jit(_f).trace(_nest(TOO_DEEP), 1.0), r"jit\(_f\): argument x"),
    (lambda: lx.eval_shape(_f, 1.0, _nest(TOO_DEEP)), r"argument y"),
    (lambda: lx.vmap(_f)(1.0, _nest(TOO_DEEP)), r"vmap\(_f\): argument y"),
    (lambda: lx.pmap(_f)(1.0, _nest(TOO_DEEP)), r"pmap\(_f\): argument y"),
    (lambda: lx.tree_util.tree_leaves(_nest(TOO_DEEP)), r"tree_leaves: the tree"),
])
def test_too_deep_pytree_is_a_clear_recursion_error(call: object, where: str,
                                                    warm_transforms: None) -> None:
    with pytest.raises(RecursionError, match=rf"{where} is a pytree nested too deeply"):
        call()  # type: ignore[operator]


def test_jit_still_runs_after_a_too_deep_call_and_on_deep_trees_below_the_limit(
        warm_transforms: None) -> None:
    jitted = lx.jit(_f)
    with pytest.raises(RecursionError):
        jitted(1.0, _nest(TOO_DEEP))
    out = jitted(1.0, _nest(500))
    assert float(lx.tree_util.tree_leaves(out)[0]) == 1.0


# --- weak-type flags of results, as JAX 0.10.2 gives them ---------------------------------------
# (numpy module, lax module) -> result; the expected (weak_type, dtype) was recorded from JAX
# 0.10.2 (the same eagerly and as the result of a jit); test_weak_types_match_jax re-derives it.
WeakCase = Callable[[Any, Any], Any]

WEAK_TYPE_CASES: dict[str, tuple[WeakCase, bool, str]] = {
    "add_f32_pyfloat": (lambda np, lax: np.ones(3, np.float32) + 1.0, False, "float32"),
    "add_pyfloat_pyfloat_jnp": (lambda np, lax: np.add(1.0, 2.0), True, "float32"),
    "mul_pyint_pyint": (lambda np, lax: np.multiply(2, 3), True, "int32"),
    "add_i32_pyfloat": (lambda np, lax: np.ones(3, np.int32) + 1.0, True, "float32"),
    "sum_pyfloat": (lambda np, lax: np.sum(1.0), False, "float32"),
    "sum_weak_array": (lambda np, lax: np.sum(np.asarray(1.0) * np.ones(3)), False, "float32"),
    "mean_f32": (lambda np, lax: np.mean(np.ones(3, np.float32)), False, "float32"),
    "where_pyscalars": (lambda np, lax: np.where(True, 1.0, 2.0), True, "float32"),
    "where_array_pyscalar": (lambda np, lax: np.where(np.ones(3) > 0, np.ones(3, np.float32), 0.0),
        False, "float32"),
    "astype_weak": (lambda np, lax: np.asarray(1.0).astype(np.float32), False, "float32"),
    "asarray_pyfloat": (lambda np, lax: np.asarray(1.0), True, "float32"),
    "array_pyfloat": (lambda np, lax: np.array(1.0), True, "float32"),
    "asarray_pyint": (lambda np, lax: np.asarray(3), True, "int32"),
    "full_pyfloat": (lambda np, lax: np.full((2,), 1.0), True, "float32"),
    "full_dtype": (lambda np, lax: np.full((2,), 1.0, np.float32), False, "float32"),
    "full_like_weak": (lambda np, lax: np.full_like(np.asarray(1.0), 2.0), True, "float32"),
    "zeros_like_weak": (lambda np, lax: np.zeros_like(np.asarray(1.0)), True, "float32"),
    "ones_like_strong": (lambda np, lax: np.ones_like(np.ones(3, np.float32)), False, "float32"),
    "arange_int": (lambda np, lax: np.arange(3), False, "int32"),
    "arange_float": (lambda np, lax: np.arange(0.0, 1.0, 0.5), False, "float32"),
    "linspace": (lambda np, lax: np.linspace(0.0, 1.0, 3), False, "float32"),
    "zeros": (lambda np, lax: np.zeros(3), False, "float32"),
    "sin_pyfloat": (lambda np, lax: np.sin(1.0), True, "float32"),
    "exp_weak": (lambda np, lax: np.exp(np.asarray(1.0)), True, "float32"),
    "sqrt_pyint": (lambda np, lax: np.sqrt(2), True, "float32"),
    "abs_pyint": (lambda np, lax: np.abs(-2), True, "int32"),
    "negative_weak": (lambda np, lax: -np.asarray(1.0), True, "float32"),
    "maximum_pyscalars": (lambda np, lax: np.maximum(1.0, 2.0), True, "float32"),
    "maximum_array_pyfloat": (lambda np, lax: np.maximum(np.ones(3, np.float32), 0.0),
        False, "float32"),
    "pow_weak_pyint": (lambda np, lax: np.asarray(2.0) ** 2, True, "float32"),
    "truediv_pyint": (lambda np, lax: np.true_divide(1, 2), True, "float32"),
    "floordiv_weak": (lambda np, lax: np.asarray(7) // 2, True, "int32"),
    "dot_weak": (lambda np, lax: np.dot(np.asarray(2.0), np.asarray(3.0)), True, "float32"),
    "matmul_strong": (lambda np, lax: np.ones((2, 2), np.float32) @ np.ones((2, 2), np.float32),
        False, "float32"),
    "reshape_weak": (lambda np, lax: np.reshape(np.asarray(1.0), (1,)), True, "float32"),
    "concatenate_weak": (lambda np, lax: np.concatenate([np.asarray([1.0]), np.asarray([2.0])]),
        False, "float32"),
    "stack_pyscalars": (lambda np, lax: np.stack([1.0, 2.0]), True, "float32"),
    "clip_weak": (lambda np, lax: np.clip(np.asarray(1.0), 0.0, 0.5), True, "float32"),
    "cumsum_weak": (lambda np, lax: np.cumsum(np.asarray([1.0]) * 1.0), False, "float32"),
    "max_weak": (lambda np, lax: np.max(np.asarray(1.0)), False, "float32"),
    "argmax": (lambda np, lax: np.argmax(np.ones(3)), False, "int32"),
    "equal_pyscalars": (lambda np, lax: np.equal(1.0, 1.0), True, "bool"),
    "round_weak": (lambda np, lax: np.round(np.asarray(1.5)), True, "float32"),
    "lax_add_pyscalars": (lambda np, lax: lax.add(1.0, 2.0), True, "float32"),
    "lax_add_f32_pyfloat": (lambda np, lax: lax.add(np.float32(1), 2.0), False, "float32"),
    "lax_mul_weak_weak": (lambda np, lax: lax.mul(np.asarray(1.0), np.asarray(2.0)),
        True, "float32"),
    "lax_convert_weak": (lambda np, lax: lax.convert_element_type(1.0, np.float32),
        False, "float32"),
    "lax_full": (lambda np, lax: lax.full((2,), 1.0), True, "float32"),
    "lax_broadcast_weak": (lambda np, lax: lax.broadcast(np.asarray(1.0), (2,)), True, "float32"),
    "lax_select": (lambda np, lax: lax.select(True, np.asarray(1.0), np.asarray(2.0)),
        True, "float32"),
    "lax_reduce_sum": (lambda np, lax: lax.reduce_sum(np.asarray([1.0]) * 1.0, (0,)),
        False, "float32"),
    "lax_iota": (lambda np, lax: lax.iota(np.int32, 3), False, "int32"),
    "lax_exp_pyfloat": (lambda np, lax: lax.exp(1.0), True, "float32"),
    "float32_scalar_type": (lambda np, lax: np.float32(1.0), False, "float32"),
}


def _weak_and_dtype(typeof: Callable[[Any], Any], x: Any) -> tuple[bool, str]:
    aval = typeof(x)
    return bool(aval.weak_type), str(aval.dtype)


@pytest.mark.parametrize("name", sorted(WEAK_TYPE_CASES))
def test_weak_type_of_result_is_jax_s(name: str) -> None:
    case, weak, dtype = WEAK_TYPE_CASES[name]
    assert _weak_and_dtype(lx.typeof, case(jnp, lx.lax)) == (weak, dtype)
    jitted = lx.jit(lambda: case(jnp, lx.lax))()
    assert _weak_and_dtype(lx.typeof, jitted) == (weak, dtype)


@pytest.mark.peer
@pytest.mark.parametrize("name", sorted(WEAK_TYPE_CASES))
def test_weak_types_match_jax(name: str) -> None:
    jax = importlib.import_module("jax")
    jax_numpy = importlib.import_module("jax.numpy")
    case, weak, dtype = WEAK_TYPE_CASES[name]
    assert _weak_and_dtype(jax.typeof, case(jax_numpy, jax.lax)) == (weak, dtype)
    jitted = jax.jit(lambda: case(jax_numpy, jax.lax))()
    assert _weak_and_dtype(jax.typeof, jitted) == (weak, dtype)
