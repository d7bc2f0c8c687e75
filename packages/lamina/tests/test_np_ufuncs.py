"""lamina.numpy elementwise functions against NumPy: values, dtypes, weak types."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lamina.numpy as jnp

X = np.array([-2.5, -1.0, -0.0, 0.5, 1.5, 3.0], np.float32)
POS = np.array([0.25, 0.5, 1.0, 2.0, 3.5, 10.0], np.float32)
UNIT = np.array([-0.9, -0.5, 0.0, 0.1, 0.5, 0.99], np.float32)
INTS = np.array([-7, -3, 0, 2, 5, 9], np.int32)
NZ_INTS = np.array([-7, -3, 1, 2, 5, 9], np.int32)


def check(actual, expected, dtype=None, rtol=1e-6, atol=1e-6):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        # lamina computes in 32 bits (x64 off), as JAX: numpy's 64-bit results map down.
        wanted = {np.float64: np.float32, np.int64: np.int32,
                  np.complex128: np.complex64}.get(np.dtype(dtype).type, np.dtype(dtype))
        assert actual_np.dtype == np.dtype(wanted), (actual_np.dtype, dtype)
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual_np, expected.astype(actual_np.dtype), rtol=rtol,
                                   atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual_np, expected)


UNARY_FLOAT = [
    ("exp", X), ("exp2", X), ("expm1", X), ("log", POS), ("log1p", POS), ("log2", POS),
    ("log10", POS), ("sqrt", POS), ("cbrt", X), ("sin", X), ("cos", X), ("tan", UNIT),
    ("arcsin", UNIT), ("arccos", UNIT), ("arctan", X), ("sinh", X), ("cosh", X), ("tanh", X),
    ("arcsinh", X), ("arccosh", POS + 1), ("arctanh", UNIT), ("reciprocal", POS),
    ("square", X), ("negative", X), ("positive", X), ("abs", X), ("absolute", X),
    ("fabs", X), ("sign", X), ("floor", X), ("ceil", X), ("trunc", X),
    ("rint", X), ("sinc", X), ("deg2rad", X), ("rad2deg", X), ("degrees", X),
    ("radians", X), ("signbit", X), ("isnan", X), ("isinf", X), ("isfinite", X),
]


@pytest.mark.parametrize("name,x", UNARY_FLOAT, ids=[n for n, _ in UNARY_FLOAT])
def test_unary_float_matches_numpy(name, x):
    expected = getattr(np, name)(x)
    actual = getattr(jnp, name)(x)
    check(actual, expected, dtype=expected.dtype, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", ["sqrt", "exp", "sin", "log1p", "reciprocal", "rint"])
def test_unary_on_ints_computes_in_float32(name):
    out = getattr(jnp, name)(np.array([1, 2, 3], np.int32))
    assert out.dtype == np.float32
    check(out, getattr(np, name)(np.array([1.0, 2.0, 3.0], np.float32)), rtol=1e-6)
    # A Python scalar stays weakly typed (JAX's rint gives a strong default float).
    assert getattr(jnp, name)(2).weak_type == (name != "rint")


def test_rounding_keeps_integers():
    assert not hasattr(jnp, "fix")  # removed in JAX 0.10 (np.fix is trunc)
    for name in ("floor", "ceil", "trunc"):
        out = getattr(jnp, name)(INTS)
        assert out.dtype == np.int32
        check(out, INTS)
    assert jnp.round(INTS).dtype == np.int32
    assert jnp.sign(np.uint8(3)).dtype == np.uint8
    assert jnp.abs(np.array([True, False])).dtype == np.bool_


def test_round_and_around():
    values = np.array([0.5, 1.5, 2.5, -0.5, 1.234, -2.675], np.float32)
    check(jnp.round(values), np.round(values))
    check(jnp.around(values, 2), np.round(values, 2), rtol=1e-6)
    check(jnp.round(np.array([1.25, 2.5], np.float16), 1), np.round(np.array([1.25, 2.5],
                                                                               np.float16), 1))
    check(jnp.round(np.array([1 + 2.5j], np.complex64)), np.round(np.array([1 + 2.5j])))


BINARY = [
    ("add", X, POS), ("subtract", X, POS), ("multiply", X, POS), ("divide", X, POS),
    ("true_divide", X, POS), ("power", POS, X), ("float_power", POS, X), ("maximum", X, UNIT),
    ("minimum", X, UNIT), ("fmax", X, UNIT), ("fmin", X, UNIT), ("arctan2", X, UNIT),
    ("hypot", X, POS), ("logaddexp", X, UNIT), ("logaddexp2", X, UNIT), ("copysign", POS, X),
    ("heaviside", X, UNIT), ("nextafter", X, POS), ("floor_divide", X, POS),
    ("remainder", X, POS), ("mod", X, POS), ("fmod", X, POS), ("equal", X, UNIT),
    ("not_equal", X, UNIT), ("less", X, UNIT), ("less_equal", X, UNIT), ("greater", X, UNIT),
    ("greater_equal", X, UNIT),
]


@pytest.mark.parametrize("name,x,y", BINARY, ids=[n for n, _, _ in BINARY])
def test_binary_float_matches_numpy(name, x, y):
    expected = getattr(np, name)(x, y)
    check(getattr(jnp, name)(x, y), expected, dtype=expected.dtype, rtol=3e-6, atol=1e-6)


INT_BINARY = [("add", INTS, NZ_INTS), ("floor_divide", INTS, NZ_INTS),
              ("remainder", INTS, NZ_INTS), ("fmod", INTS, NZ_INTS), ("maximum", INTS, NZ_INTS),
              ("bitwise_and", INTS, NZ_INTS), ("bitwise_or", INTS, NZ_INTS),
              ("bitwise_xor", INTS, NZ_INTS), ("left_shift", INTS, np.int32(2)),
              ("right_shift", INTS, np.int32(1)), ("multiply", INTS, NZ_INTS)]


@pytest.mark.parametrize("name,x,y", INT_BINARY, ids=[n for n, _, _ in INT_BINARY])
def test_binary_int_matches_numpy(name, x, y):
    expected = getattr(np, name)(x, y)
    check(getattr(jnp, name)(x, y), expected, dtype=np.int32)


def test_divmod_and_modf():
    q, r = jnp.divmod(INTS, NZ_INTS)
    eq, er = np.divmod(INTS, NZ_INTS)
    check(q, eq)
    check(r, er)
    q, r = jnp.divmod(X, POS)
    eq, er = np.divmod(X, POS)
    check(q, eq)
    check(r, er, atol=1e-6)
    frac, whole = jnp.modf(X)
    efrac, ewhole = np.modf(X)
    check(frac, efrac)
    check(whole, ewhole)


def test_integer_power():
    base = np.array([2, 3, -2, 5], np.int32)
    check(jnp.power(base, np.array([2, 3, 3, 0], np.int32)), np.array([4, 27, -8, 1]))
    assert jnp.power(np.int8(2), 3).dtype == np.int8
    assert jnp.power(2, 3).weak_type
    check(jnp.power(2, 3), 8)
    check(jnp.power(X, 2), X ** 2)
    check(jnp.power(X, 3), X ** 3, rtol=1e-6)
    check(jnp.pow(POS, 0.5), np.sqrt(POS))


def test_unsigned_right_shift_is_logical_and_signed_is_arithmetic():
    check(jnp.right_shift(np.int8(-8), 1), np.int8(-4))
    check(jnp.right_shift(np.uint8(200), 1), np.uint8(100))
    check(jnp.left_shift(1, 3), 8)
    check(jnp.invert(np.array([True, False])), [False, True])
    check(jnp.bitwise_not(np.int32(5)), np.int32(~5))


def test_logical_functions():
    a = np.array([0, 1, 2, 0])
    b = np.array([0.0, 0.0, 3.0, 1.0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        check(getattr(jnp, name)(a, b), getattr(np, name)(a, b), dtype=np.bool_)
    check(jnp.logical_not(b), np.logical_not(b), dtype=np.bool_)


def test_bool_arithmetic():
    t = np.array([True, False, True])
    f = np.array([True, True, False])
    check(jnp.add(t, f), t | f, dtype=np.bool_)
    check(jnp.multiply(t, f), t & f, dtype=np.bool_)
    with pytest.raises(TypeError, match="subtract"):
        jnp.subtract(t, f)
    with pytest.raises(TypeError, match="negative"):
        jnp.negative(t)
    with pytest.raises(TypeError, match="bitwise_and"):
        jnp.bitwise_and(X, X)


def test_weak_type_promotion():
    half = jnp.ones(3, jnp.float16)
    assert (jnp.add(half, 1.0)).dtype == np.float16
    assert jnp.multiply(np.ones(3, np.int32), 1.5).dtype == np.float32
    assert jnp.add(np.int8(1), 1).dtype == np.int8
    assert jnp.add(1, 2).weak_type
    out = jnp.add(1, 2.0)
    assert out.dtype == np.float32 and out.weak_type
    assert not jnp.add(np.float32(1), 1.0).weak_type
    assert jnp.add(np.uint8(1), np.int8(1)).dtype == np.int16
    assert jnp.add(np.int32(1), np.float16(1)).dtype == np.float16
    assert jnp.add(np.float16(1), np.float32(1)).dtype == np.float32
    assert jnp.true_divide(1, 2).weak_type
    assert jnp.divide(np.int32(1), 2).dtype == np.float32


def test_broadcasting():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.float32)
    check(jnp.add(a, b), a + b)
    check(jnp.multiply(a[:, :1], b), a[:, :1] * b)
    check(jnp.subtract(np.ones((2, 1, 3), np.float32), np.ones((4, 1), np.float32)),
          np.zeros((2, 4, 3)))
    with pytest.raises(TypeError, match="add got incompatible shapes"):
        jnp.add(np.ones(3), np.ones(4))


def test_accepts_lists_scalars_and_arrays():
    check(jnp.add([1, 2, 3], 1), [2, 3, 4], dtype=np.int32)
    check(jnp.multiply(jnp.array([1.0, 2.0]), [[1.0], [2.0]]), [[1, 2], [2, 4]])
    check(jnp.sin(0.5), np.sin(np.float32(0.5)))
    with pytest.raises(TypeError, match="argument x must be an array"):
        jnp.sin("hello")


def test_complex_functions():
    z = np.array([1 + 2j, -3 + 0.5j, 0j], np.complex64)
    check(jnp.real(z), z.real, dtype=np.float32)
    check(jnp.imag(z), z.imag, dtype=np.float32)
    check(jnp.conj(z), np.conj(z))
    check(jnp.conjugate(z), np.conj(z))
    check(jnp.angle(z), np.angle(z))
    check(jnp.angle(z, deg=True), np.angle(z, deg=True), rtol=1e-5)
    check(jnp.abs(z), np.abs(z), dtype=np.float32)
    check(jnp.sign(z), np.sign(z) if np.__version__ >= "2" else z / np.abs(z))
    check(jnp.real(X), X)
    check(jnp.imag(X), np.zeros_like(X))
    assert jnp.iscomplexobj(z) and not jnp.iscomplexobj(X)
    check(jnp.maximum(z, np.complex64(0.5)), np.maximum(z, np.complex64(0.5)))


def test_isclose_family():
    a = np.array([1.0, np.inf, -np.inf, np.nan, 1e-9, 1.0], np.float32)
    b = np.array([1.0 + 1e-6, np.inf, np.inf, np.nan, 0.0, 1.1], np.float32)
    check(jnp.isclose(a, b), np.isclose(a, b))
    check(jnp.isclose(a, b, equal_nan=True), np.isclose(a, b, equal_nan=True))
    check(jnp.isclose(a, b, rtol=0.2), np.isclose(a, b, rtol=0.2))
    assert bool(jnp.allclose(X, X * (1 + 1e-7)))
    assert not bool(jnp.allclose(X, X + 1))
    assert bool(jnp.array_equal(INTS, INTS.copy()))
    assert not bool(jnp.array_equal(INTS, INTS[:3]))
    assert bool(jnp.array_equal(np.array([np.nan]), np.array([np.nan]), equal_nan=True))
    assert bool(jnp.array_equiv(np.ones((2, 3)), np.ones(3)))
    assert not bool(jnp.array_equiv(np.ones((2, 3)), 2 * np.ones(3)))
    # Shapes that do not broadcast: JAX 0.10.2 raises (NumPy would say False).
    with pytest.raises(TypeError, match="array_equiv got incompatible shapes"):
        jnp.array_equiv(np.ones((2, 3)), np.ones(2))


def test_nan_to_num_and_friends():
    v = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    check(jnp.nan_to_num(v), np.nan_to_num(v))
    check(jnp.nan_to_num(v, nan=5.0, posinf=1.0, neginf=-1.0),
          np.nan_to_num(v, nan=5.0, posinf=1.0, neginf=-1.0))
    check(jnp.isposinf(v), np.isposinf(v))
    check(jnp.isneginf(v), np.isneginf(v))
    check(jnp.nan_to_num(INTS), INTS)
    check(jnp.maximum(np.float32(np.nan), 1.0), np.nan)
    check(jnp.fmax(np.float32(np.nan), 1.0), 1.0)
    check(jnp.signbit(np.float32(-0.0)), True)
    check(jnp.copysign(1.0, np.float32(-0.0)), -1.0)


def test_clip():
    check(jnp.clip(np.array([1, 5, 9]), 2, 7), [2, 5, 7], dtype=np.int32)
    check(jnp.clip(X, max=0.0), np.clip(X, None, 0.0))
    check(jnp.clip(X, min=UNIT), np.maximum(X, UNIT))
    check(jnp.clip(X, a_min=-1, a_max=1), np.clip(X, -1, 1))
    assert jnp.clip(np.arange(4), 1.5).dtype == np.float32


def test_ldexp_and_misc():
    check(jnp.ldexp(POS, np.array([1, 2, 3, 0, -1, 2], np.int32)),
          np.ldexp(POS, np.array([1, 2, 3, 0, -1, 2])))
    check(jnp.sinc(0.0), 1.0)
    check(jnp.logaddexp(-np.inf, -np.inf), -np.inf)
    check(jnp.hypot(np.inf, np.nan), np.inf)
    check(jnp.log2(8), 3.0)
    check(jnp.deg2rad(180), math.pi)


def test_integer_division_by_zero_matches_jax():
    check(jnp.remainder(np.array([-7, 7, 5]), np.array([2, -2, 0])), [1, -1, 0])
    check(jnp.fmod(np.array([5, -5]), np.array([0, 3])), [0, -2])
    check(jnp.floor_divide(np.array([5]), np.array([0])), [-2])
    check(jnp.heaviside(np.array([np.nan, 0.0, -1.0], np.float32), 0.5), [np.nan, 0.5, 0.0])
    # JAX 0.10.2: Python scalars alone give a weakly typed result
    assert jnp.heaviside(0.0, 0.5).weak_type
    assert not jnp.heaviside(np.float32(0.0), 0.5).weak_type



def test_isreal_iscomplex():
    z = np.array([1 + 0j, 1 + 1j], np.complex64)
    check(jnp.isreal(z), [True, False])
    check(jnp.iscomplex(z), [False, True])
    check(jnp.isreal(X), np.ones(6, bool))


def test_float_floor_divide_and_mod_as_jax() -> None:
    """One implementation for the operators and the functions; x // 0 is
    x / 0 (CPython's float_divmod, as JAX); a weak result stays weak."""
    x = jnp.array([1., -1., 0., -7.5, 7.])
    for floor_div in (lambda a, b: a // b, jnp.floor_divide):
        got = np.asarray(floor_div(x, 0.))
        assert np.isposinf(got[0]) and np.isneginf(got[1]) and np.isnan(got[2])
        np.testing.assert_array_equal(np.asarray(floor_div(x, 2.)), [0., -1., 0., -4., 3.])
    np.testing.assert_array_equal(np.asarray(jnp.mod(x, -2.)), [-1., -1., 0., -1.5, -1.])
    assert (jnp.arange(3) // 2.).weak_type and jnp.floor_divide(jnp.arange(3), 2.).weak_type
    assert not (jnp.arange(3.) // jnp.float32(2.)).weak_type


def test_top_k_returns_a_list_as_jax() -> None:
    import lamina as lx

    out = lx.lax.top_k(jnp.array([1., 3., 2.]), 2)
    assert type(out) is list and np.asarray(out[1]).tolist() == [1, 2]
    with pytest.raises(TypeError, match=r"integer_pow\(int32\[2\], -1\)"):
        lx.lax.integer_pow(jnp.arange(1, 3), -1)
