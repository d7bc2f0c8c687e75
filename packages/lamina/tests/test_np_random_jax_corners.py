"""Corners where lamina followed JAX 0.10.2 only partly: JAX's answers recorded.

Each value below was printed by JAX 0.10.2 (``hatch run peer:python``) for
the same call: complex ``logaddexp``/``logaddexp2`` (bytes, eager and under
``jit``, and a derivative), ``gcd``/``lcm`` of unsigned integers and their
refusal of bools and floats, ``random.bits``' default dtype with x64 on, the
``~`` JAX prints for a weak type, and ``jnp.fix``, which JAX 0.10 removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp

A = np.array([1 + 2j, 0.5 - 1j, -3 + 4j, 2 + 0j, np.inf + 1j], np.complex64)
B = np.array([0.5 - 1j, 3 + 3j, -3 - 4j, -np.inf + 0j, 1 + 1j], np.complex64)
JAX_LOGADDEXP = ("8006d73d9efce43fb19b3c40f9314440d7d92ec0d90f4940"
                 "0000004000000000ffffffff0000c0ff")
JAX_LOGADDEXP2 = ("5161593fb0f6683fd6a12f40d2f638402a6f06c0180991c0"
                  "ffffffff0000c0ffffffffff0000c0ff")


@pytest.mark.parametrize("name,expected", [("logaddexp", JAX_LOGADDEXP),
                                           ("logaddexp2", JAX_LOGADDEXP2)])
def test_complex_logaddexp_is_jaxs(name: str, expected: str) -> None:
    fun = getattr(jnp, name)
    assert np.asarray(fun(A, B)).tobytes().hex() == expected
    assert np.asarray(lx.jit(fun)(A, B)).tobytes().hex() == expected


def test_complex_logaddexp_derivative_is_jaxs() -> None:
    def f(x: object) -> object:
        return jnp.real(jnp.logaddexp(x, jnp.complex64(0.5 - 1j)))

    assert np.asarray(lx.grad(f)(jnp.complex64(1 + 2j))).tobytes().hex() == "d0271940123e033f"


@pytest.mark.parametrize("name,a,b,expected", [
    ("gcd", np.array([12, -18, 0, 7]), np.array([8, 12, 0, -21]), [4, 6, 0, 7]),
    ("gcd", np.array([12, 6, 0, 255], np.uint8), 4, [4, 2, 4, 1]),
    ("gcd", np.array([12, 6], np.uint32), np.array([18, 4], np.uint32), [6, 2]),
    ("gcd", np.array([-12, 6], np.int8), np.array([18, -4], np.int8), [6, 2]),
    ("lcm", np.array([12, -18, 0, 7]), np.array([8, 12, 0, -21]), [24, 36, 0, 21]),
    ("lcm", np.array([12, 6, 0, 255], np.uint8), 4, [12, 12, 0, 252]),
    ("lcm", np.array([12, 6], np.uint32), np.array([18, 4], np.uint32), [36, 12]),
    ("lcm", np.array([-12, 6], np.int8), np.array([18, -4], np.int8), [36, 12]),
])
def test_gcd_and_lcm_of_signed_and_unsigned_integers(name: str, a: object, b: object,
                                                      expected: list[int]) -> None:
    out = getattr(jnp, name)(a, b)
    assert out.dtype == jnp.asarray(a).dtype  # int64 input: int32 without x64
    np.testing.assert_array_equal(np.asarray(out), expected)


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_and_lcm_refuse_bools_and_floats(name: str) -> None:
    for a, b in ((np.array(True), np.array(False)), (np.array(1.0), 2)):
        with pytest.raises(ValueError, match=f"{name}: arguments must be integers"):
            getattr(jnp, name)(a, b)


@pytest.fixture
def x64() -> Iterator[None]:
    lx.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        lx.config.update("jax_enable_x64", False)


JAX_BITS_X64 = [15963681350020464357, 8360145782228061838, 4400243552688456428]
JAX_BITS = [318053758, 4029299397, 2787249374]


def test_random_bits_default_to_uint64_with_x64(x64: None) -> None:
    for key in (lx.random.key(3), lx.random.PRNGKey(3)):
        out = lx.random.bits(key, (3,))
        assert out.dtype == np.uint64
        assert np.asarray(out).tolist() == JAX_BITS_X64
        assert lx.jit(lambda k: lx.random.bits(k, (2,)))(key).dtype == np.uint64
    assert lx.random.bits(lx.random.key(3), (2,), dtype=jnp.uint8).dtype == np.uint8


def test_random_bits_default_to_uint32() -> None:
    out = lx.random.bits(lx.random.key(3), (3,))
    assert out.dtype == np.uint32 and np.asarray(out).tolist() == JAX_BITS


def test_a_weak_type_prints_with_a_tilde() -> None:
    assert str(lx.typeof(1.0)) == "~float32[]"
    assert repr(lx.typeof(1.0)) == "ShapedArray(float32[], weak_type=True)"
    assert str(lx.typeof(jnp.float32(1.0))) == "float32[]"
    assert str(lx.make_jaxpr(lambda x: x * 2)(1.0)).splitlines()[-1] == (
        "{ lambda ; a:f32[]. let b:f32[] = mul a 2.0:f32[] in (b,) }")


def test_fix_is_gone_as_in_jax() -> None:
    assert not hasattr(jnp, "fix")
    assert "fix" not in dir(jnp)


@pytest.mark.parametrize("shape", [(2.0,), np.float32(2), jnp.array(3.0), (jnp.array(2.0),),
                                   np.array([2.0, 3.0])])
def test_a_float_in_a_shape_is_refused_as_in_jax(shape: object) -> None:
    for fun in (jnp.zeros, jnp.ones, jnp.empty):
        with pytest.raises(TypeError, match=f"{fun.__name__}: shapes must be 1D sequences "
                                            "of concrete values of integer type"):
            fun(shape)


def test_bools_and_integer_arrays_are_shapes_as_in_jax() -> None:
    assert jnp.zeros(True).shape == (1,)
    assert jnp.zeros((True, 2)).shape == (1, 2)
    assert jnp.ones(np.array([2, 3])).shape == (2, 3)
    assert jnp.full((np.int64(2),), 1.5).shape == (2,)


@pytest.mark.parametrize("fun", [lambda x, **k: jnp.median(x, **k),
                                 lambda x, **k: jnp.nanmedian(x, **k),
                                 lambda x, **k: jnp.quantile(x, 0.5, **k),
                                 lambda x, **k: jnp.percentile(x, 50, **k),
                                 lambda x, **k: jnp.nanquantile(x, 0.5, **k)])
def test_statistics_of_a_scalar_keep_one_axis_as_in_jax(fun: Any) -> None:
    assert fun(jnp.array(3.0), keepdims=True).shape == (1,)
    assert fun(jnp.array(3.0)).shape == ()
    assert float(fun(jnp.array(3.0))) == 3.0
    assert fun(jnp.ones((2, 3)), keepdims=True).shape == (1, 1)


@pytest.mark.parametrize("x,dtype,kwargs,expected", [
    ([0.0, 1.0], np.int32, {}, 0.0),  # a truncated mean 0, squares 0 and 1, 1 // 2
    ([0.0, 1.0], np.int32, {"ddof": 1}, 1.0),
    ([0.0, 1.0], np.int32, {"ddof": 5}, np.nan),
    ([3, 7, 8, 1], np.uint8, {"ddof": 1}, 11.0),
    ([3, 7, 8, 1], np.uint8, {"ddof": 5}, 0.0),  # unsigned: the count wrapped around
    ([[1, 5], [2, 9]], np.int16, {}, 9.0),
    ([[1, 5], [2, 9]], np.int16, {"axis": 0}, [0.0, 4.0]),
])
def test_var_with_an_integer_dtype_computes_in_integers_as_jax(
        x: Any, dtype: Any, kwargs: dict[str, Any], expected: Any) -> None:
    out = jnp.var(jnp.array(x), dtype=dtype, **kwargs)
    assert out.dtype == np.float32 and out.weak_type  # JAX's NaN guard promotes it
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_std_refuses_an_integer_dtype() -> None:
    with pytest.raises(ValueError, match="std: the dtype argument must be inexact"):
        jnp.std(jnp.array([1.0, 2.0]), dtype=jnp.int32)
    assert jnp.std(jnp.array([1.0, 2.0]), dtype=jnp.float16).dtype == np.float16
