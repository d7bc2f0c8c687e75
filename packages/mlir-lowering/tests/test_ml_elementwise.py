"""Every elementwise lax primitive, lowered, compiled on the CPU client and
compared with numpy."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax.convert import bitcast_convert_type_p, convert_element_type_p
from ml_build import JaxprBuilder, lit
from ml_runner import run

import lamina_mlir_lowering as ml

RNG = np.random.default_rng(0)
F32 = np.float32


def _floats(lo: float = -3.0, hi: float = 3.0, shape: tuple[int, ...] = (3, 4)) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(F32)


def lower_run(prim: Any, *args: np.ndarray, **params: Any) -> list[np.ndarray]:
    b = JaxprBuilder(prim.name)
    vars_ = [b.arg(a.shape, a.dtype, f"x{i}") for i, a in enumerate(args)]
    out = b.eqn(prim, *vars_, **params)
    outs = out if prim.multiple_results else [out]
    result = ml.lower_jaxpr_to_module(f"jit_{prim.name}", b.build(outs))
    return run(result, *args)


# name, inputs, numpy reference, rtol
_v = np.vectorize
UNARY_F32: list[tuple[str, Callable[[], np.ndarray], Callable[..., Any], float]] = [
    ("neg", _floats, np.negative, 0),
    ("sign", lambda: np.array([-2.0, 0.0, 3.0, -0.5], F32), np.sign, 0),
    ("floor", _floats, np.floor, 0),
    ("ceil", _floats, np.ceil, 0),
    ("exp", _floats, np.exp, 1e-6),
    ("exp2", _floats, np.exp2, 1e-6),
    ("log", lambda: _floats(0.1, 5), np.log, 1e-6),
    ("log1p", lambda: _floats(-0.5, 5), np.log1p, 1e-6),
    ("expm1", _floats, np.expm1, 1e-6),
    ("tanh", _floats, np.tanh, 1e-6),
    ("logistic", _floats, lambda x: 1 / (1 + np.exp(-x)), 1e-6),
    ("sin", _floats, np.sin, 1e-6),
    ("cos", _floats, np.cos, 1e-6),
    ("tan", lambda: _floats(-1.2, 1.2), np.tan, 1e-5),
    ("asin", lambda: _floats(-0.99, 0.99), np.arcsin, 1e-6),
    ("acos", lambda: _floats(-0.99, 0.99), np.arccos, 1e-6),
    ("atan", _floats, np.arctan, 1e-6),
    ("sinh", _floats, np.sinh, 1e-6),
    ("cosh", _floats, np.cosh, 1e-6),
    ("asinh", _floats, np.arcsinh, 1e-6),
    ("acosh", lambda: _floats(1.0, 5.0), np.arccosh, 1e-6),
    ("atanh", lambda: _floats(-0.9, 0.9), np.arctanh, 1e-5),
    ("sqrt", lambda: _floats(0.0, 5.0), np.sqrt, 1e-6),
    ("rsqrt", lambda: _floats(0.1, 5.0), lambda x: 1 / np.sqrt(x), 1e-6),
    ("cbrt", _floats, np.cbrt, 1e-6),
    ("erf", _floats, _v(math.erf), 1e-6),
    ("erfc", _floats, _v(math.erfc), 1e-5),
    ("lgamma", lambda: _floats(0.1, 6.0), _v(math.lgamma), 1e-5),
    ("square", _floats, np.square, 1e-6),
    ("abs", _floats, np.abs, 0),
    ("is_finite", lambda: np.array([1.0, np.inf, -np.inf, np.nan], F32), np.isfinite, 0),
]


@pytest.mark.parametrize("name,make,ref,rtol", UNARY_F32, ids=[c[0] for c in UNARY_F32])
def test_unary_float(name: str, make: Callable[[], np.ndarray], ref: Callable[..., Any],
                     rtol: float) -> None:
    x = make()
    out, = lower_run(getattr(ew, f"{name}_p"), x)
    np.testing.assert_allclose(out, ref(x).astype(out.dtype), rtol=rtol, atol=1e-6)


def test_erf_inv_inverts_erf() -> None:
    x = _floats(-0.95, 0.95)
    out, = lower_run(ew.erf_inv_p, x)
    np.testing.assert_allclose(np.vectorize(math.erf)(out), x, rtol=1e-5, atol=1e-6)


def test_digamma_known_values() -> None:
    euler = 0.5772156649015329
    x = np.array([1.0, 0.5, 2.0, 10.0], F32)
    out, = lower_run(ew.digamma_p, x)
    expected = [-euler, -euler - 2 * math.log(2), 1 - euler,
                sum(1 / k for k in range(1, 10)) - euler]
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("method,expected", [(0, [-3.0, -2.0, 1.0, 3.0, 0.0]),
                                             (1, [-2.0, -2.0, 0.0, 2.0, 0.0])])
def test_round_methods(method: int, expected: list[float]) -> None:
    x = np.array([-2.5, -1.5, 0.5, 2.5, -0.4], F32)
    out, = lower_run(ew.round_p, x, rounding_method=ew.RoundingMethod(method))
    np.testing.assert_array_equal(out, np.array(expected, F32))


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, -1, -2])
def test_integer_pow(y: int) -> None:
    x = _floats(0.5, 2.0)
    out, = lower_run(ew.integer_pow_p, x, y=y)
    np.testing.assert_allclose(out, x.astype(np.float64) ** y, rtol=1e-5)
    xi = np.arange(-3, 5, dtype=np.int32)
    if y >= 0:
        out_i, = lower_run(ew.integer_pow_p, xi, y=y)
        np.testing.assert_array_equal(out_i, xi ** y)


def test_reduce_precision_to_bfloat16() -> None:
    x = _floats()
    out, = lower_run(ew.reduce_precision_p, x, exponent_bits=8, mantissa_bits=7)
    np.testing.assert_array_equal(out, x.astype(ml_dtypes.bfloat16).astype(F32))


def test_complex_unary() -> None:
    z = (_floats() + 1j * _floats()).astype(np.complex64)
    for name, ref in [("real", np.real), ("imag", np.imag), ("conj", np.conj),
                      ("abs", np.abs), ("exp", np.exp), ("neg", np.negative),
                      ("sign", lambda v: v / np.abs(v))]:
        out, = lower_run(getattr(ew, f"{name}_p"), z)
        np.testing.assert_allclose(out, ref(z), rtol=1e-5, err_msg=name)


def test_integer_unary() -> None:
    xi = np.array([-7, -1, 0, 1, 5, 2**31 - 1], np.int32)
    xu = np.array([0, 1, 5, 2**31, 2**32 - 1], np.uint32)
    cases = [
        ("neg", xi, np.negative), ("sign", xi, np.sign), ("sign", xu, np.sign),
        ("abs", xi, np.abs), ("not", xi, np.invert), ("not", xu, np.invert),
        ("population_count", xi, lambda v: np.array([bin(int(a) & 0xFFFFFFFF).count("1")
                                                     for a in v], np.int32)),
        ("clz", xu, lambda v: np.array([32 - int(a).bit_length() for a in v], np.uint32)),
    ]
    for name, x, ref in cases:
        out, = lower_run(getattr(ew, f"{name}_p"), x)
        np.testing.assert_array_equal(out, ref(x), err_msg=f"{name} {x.dtype}")
    out, = lower_run(ew.not_p, np.array([True, False]))
    np.testing.assert_array_equal(out, [False, True])


BINARY_F32 = [
    ("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
    ("rem", np.fmod), ("max", np.maximum), ("min", np.minimum), ("atan2", np.arctan2),
    ("nextafter", np.nextafter), ("pow", np.power),
]


@pytest.mark.parametrize("name,ref", BINARY_F32, ids=[c[0] for c in BINARY_F32])
def test_binary_float(name: str, ref: Callable[..., Any]) -> None:
    x, y = _floats(0.5, 3.0), _floats(0.5, 3.0)
    if name in ("max", "min"):
        x[0, 0] = np.nan
    out, = lower_run(getattr(ew, f"{name}_p"), x, y)
    np.testing.assert_allclose(out, ref(x, y), rtol=2e-6)


def test_binary_integer_semantics() -> None:
    x = np.array([7, -7, 7, -7, 2**31 - 1], np.int32)
    y = np.array([2, 2, -2, -2, 3], np.int32)
    div, = lower_run(ew.div_p, x, y)
    np.testing.assert_array_equal(div, np.trunc(x / y).astype(np.int32))  # C semantics
    rem, = lower_run(ew.rem_p, x, y)
    np.testing.assert_array_equal(rem, np.fmod(x, y))
    u = np.array([2**31 + 5, 3, 2**32 - 1], np.uint32)
    v = np.array([2, 2**31 + 1, 7], np.uint32)
    for name, ref in [("max", np.maximum), ("min", np.minimum), ("div", np.floor_divide),
                      ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor)]:
        out, = lower_run(getattr(ew, f"{name}_p"), u, v)
        np.testing.assert_array_equal(out, ref(u, v), err_msg=name)


def test_shifts() -> None:
    xi = np.array([-16, 16, -1, 1], np.int32)
    s = np.array([2, 2, 31, 31], np.int32)
    left, = lower_run(ew.shift_left_p, xi, s)
    np.testing.assert_array_equal(left, np.left_shift(xi, s))
    arith, = lower_run(ew.shift_right_arithmetic_p, xi, s)
    np.testing.assert_array_equal(arith, np.right_shift(xi, s))
    logical, = lower_run(ew.shift_right_logical_p, xi, s)
    np.testing.assert_array_equal(logical, (xi.view(np.uint32) >> s.view(np.uint32)).view(np.int32))


def test_bool_logic() -> None:
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    for name, ref in [("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)]:
        out, = lower_run(getattr(ew, f"{name}_p"), a, b)
        np.testing.assert_array_equal(out, ref(a, b))


def test_complex_from_parts_and_max() -> None:
    x, y = _floats(), _floats()
    out, = lower_run(ew.complex_p, x, y)
    np.testing.assert_allclose(out, x + 1j * y)
    z1 = np.array([1 + 1j, 1 + 3j, 2 - 1j], np.complex64)
    z2 = np.array([1 + 2j, 1 + 0j, 1 + 9j], np.complex64)
    mx, = lower_run(ew.max_p, z1, z2)
    np.testing.assert_array_equal(mx, [1 + 2j, 1 + 3j, 2 - 1j])  # lexicographic, as JAX


def test_pow_with_integer_exponent() -> None:
    x = _floats(0.5, 2.0)
    y = RNG.integers(-3, 4, x.shape).astype(np.int32)
    out, = lower_run(ew.pow_p, x, y)
    np.testing.assert_allclose(out, x.astype(np.float64) ** y, rtol=1e-5)


COMPARE = [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
           ("gt", np.greater), ("ge", np.greater_equal)]


@pytest.mark.parametrize("name,ref", COMPARE, ids=[c[0] for c in COMPARE])
def test_comparisons_per_dtype(name: str, ref: Callable[..., Any]) -> None:
    inputs = [
        (np.array([1.0, -2.0, np.nan, 3.0], F32), np.array([1.0, 2.0, np.nan, -3.0], F32)),
        (np.array([-1, 5, -(2**31), 7], np.int32), np.array([1, 5, 2**31 - 1, -7], np.int32)),
        # Values >= 2**31 tell signed from unsigned comparison.
        (np.array([2**31, 5, 0, 2**32 - 1], np.uint32), np.array([1, 5, 2**31, 3], np.uint32)),
        (np.array([True, False, True, False]), np.array([True, True, False, False])),
    ]
    for x, y in inputs:
        out, = lower_run(getattr(ew, f"{name}_p"), x, y)
        np.testing.assert_array_equal(out, ref(x, y), err_msg=str(x.dtype))


def test_literal_scalar_operand_is_broadcast() -> None:
    b = JaxprBuilder("f")
    x = b.arg((3, 4), F32, "x")
    y = b.eqn(ew.add_p, x, lit(1.5, F32))
    z = b.eqn(ew.mul_p, lit(2.0, F32), y)
    result = ml.lower_jaxpr_to_module("jit_f", b.build([z]))
    xv = _floats()
    out, = run(result, xv)
    np.testing.assert_allclose(out, 2 * (xv + 1.5), rtol=1e-6)


def test_select_n_bool_and_integer() -> None:
    a, b_, c = _floats(), _floats(), _floats()
    pred = RNG.integers(0, 2, a.shape).astype(bool)
    out, = lower_run(ew.select_n_p, pred, a, b_)
    np.testing.assert_array_equal(out, np.where(pred, b_, a))
    which = RNG.integers(0, 3, a.shape).astype(np.int32)
    out3, = lower_run(ew.select_n_p, which, a, b_, c)
    np.testing.assert_array_equal(out3, np.choose(which, [a, b_, c]))
    scalar_which = np.array(2, np.int32)
    out_s, = lower_run(ew.select_n_p, scalar_which, a, b_, c)
    np.testing.assert_array_equal(out_s, c)


def test_clamp() -> None:
    x = _floats()
    out, = lower_run(ew.clamp_p, np.array(-1.0, F32), x, np.array(1.0, F32))
    np.testing.assert_array_equal(out, np.clip(x, -1, 1))
    lo, hi = _floats(-3, 0), _floats(0, 3)
    out2, = lower_run(ew.clamp_p, lo, x, hi)
    np.testing.assert_array_equal(out2, np.minimum(np.maximum(x, lo), hi))


CONVERSIONS = [
    (np.array([-2.7, -0.5, 0.5, 2.7, 100.2], F32), np.int32),       # rounds toward zero
    (np.array([-2.0, 0.0, 0.25, np.nan], F32), np.bool_),            # x != 0
    (np.array([-3, 0, 256, 7], np.int32), np.bool_),                 # not truncation
    (np.array([True, False]), F32),
    (np.array([2**31 + 1, 7], np.uint32), F32),
    (np.array([-1, 300], np.int32), np.uint8),
    (np.array([1.5, -2.25], F32), ml_dtypes.bfloat16),
    (np.array([1.5, -2.25], ml_dtypes.bfloat16), np.float16),
    (np.array([1 + 2j, -3 - 1j], np.complex64), F32),               # real part
    (np.array([1.5, 2.0], F32), np.complex64),
]


@pytest.mark.parametrize("x,dtype", CONVERSIONS, ids=[f"{c[0].dtype}->{np.dtype(c[1])}"
                                                       for c in CONVERSIONS])
def test_convert_element_type(x: np.ndarray, dtype: Any) -> None:
    out, = lower_run(convert_element_type_p, x, new_dtype=np.dtype(dtype), weak_type=False,
                     sharding=None)
    if np.iscomplexobj(x) and not np.issubdtype(np.dtype(dtype), np.complexfloating):
        expected = x.real.astype(dtype)
    elif np.dtype(dtype) == np.bool_:
        expected = x != 0
    elif x.dtype == F32 and np.dtype(dtype) == np.int32:
        expected = np.trunc(x).astype(np.int32)
    else:
        expected = x.astype(dtype)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, expected)


def test_bitcast_convert_type() -> None:
    x = np.array([1.0, -2.5, 0.0], F32)
    out, = lower_run(bitcast_convert_type_p, x, new_dtype=np.dtype(np.int32))
    np.testing.assert_array_equal(out, x.view(np.int32))
    narrow, = lower_run(bitcast_convert_type_p, x, new_dtype=np.dtype(np.uint8))
    np.testing.assert_array_equal(narrow, x.view(np.uint8).reshape(3, 4))


def test_bfloat16_and_float16_arithmetic() -> None:
    for dt in (ml_dtypes.bfloat16, np.float16):
        x = np.array([1.5, -2.0, 3.25], dt)
        y = np.array([0.5, 4.0, -1.0], dt)
        out, = lower_run(ew.mul_p, x, y)
        assert out.dtype == np.dtype(dt)
        np.testing.assert_array_equal(out.astype(F32), (x.astype(F32) * y.astype(F32)))


def test_every_elementwise_primitive_has_a_rule() -> None:
    from lamina_tracing_core.primitives import Primitive
    missing = [v.name for v in vars(ew).values()
               if isinstance(v, Primitive) and not ml.has_lowering_rule(v)]
    assert missing == []
