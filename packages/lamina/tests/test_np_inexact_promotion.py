"""Integers and bools promoted to an inexact dtype give JAX 0.10.2's dtypes.

JAX computes an integer narrower than 64 bits (and bool) in float32 even with
``jax_enable_x64`` on, and a 64-bit integer in float64.  The expected dtypes
below were recorded with JAX 0.10.2 (x64 on) over strongly typed 1-d inputs;
``*`` marks a weakly typed result.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina_tracing_core import dtypes

_INPUT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def _pair(x: Any) -> Any:
    return jnp.stack([x, x[::-1]])


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "sin": jnp.sin, "exp": jnp.exp, "log1p": jnp.log1p, "sqrt": jnp.sqrt, "cbrt": jnp.cbrt,
    "arccos": jnp.arccos, "tanh": jnp.tanh, "sinc": jnp.sinc, "i0": jnp.i0,
    "deg2rad": jnp.deg2rad, "reciprocal": jnp.reciprocal,
    "true_divide": lambda x: jnp.true_divide(x, 2), "operator /": lambda x: x / 2,
    "float_power": lambda x: jnp.float_power(x, 2), "arctan2": lambda x: jnp.arctan2(x, x),
    "hypot": lambda x: jnp.hypot(x, x), "logaddexp": lambda x: jnp.logaddexp(x, x),
    "nextafter": lambda x: jnp.nextafter(x, x), "copysign": lambda x: jnp.copysign(x, x),
    "ldexp": lambda x: jnp.ldexp(x, 2), "frexp": lambda x: jnp.frexp(x)[0],
    "mean": jnp.mean, "var": jnp.var, "std": jnp.std, "average": jnp.average,
    "nanmean": jnp.nanmean, "nanvar": jnp.nanvar, "nanstd": jnp.nanstd, "median": jnp.median,
    "nanmedian": jnp.nanmedian, "quantile": lambda x: jnp.quantile(x, 0.5),
    "nanquantile": lambda x: jnp.nanquantile(x, 0.5),
    "percentile": lambda x: jnp.percentile(x, 50),
    "linspace": lambda x: jnp.linspace(x, x * 2, 5),
    "geomspace": lambda x: jnp.geomspace(1, 4, 3, dtype=x.dtype),
    "logspace": lambda x: jnp.logspace(0, 2, 3, dtype=x.dtype),
    "corrcoef": lambda x: jnp.corrcoef(_pair(x)), "cov": lambda x: jnp.cov(_pair(x)),
    "histogram": lambda x: jnp.histogram(x, bins=2)[1], "trapezoid": jnp.trapezoid,
    "gradient": jnp.gradient, "fft": jnp.fft.fft, "poly": jnp.poly,
    "convolve": lambda x: jnp.convolve(x, x), "correlate": lambda x: jnp.correlate(x, x),
    "angle": jnp.angle, "rint": jnp.rint, "sort_complex": jnp.sort_complex,
}

_NARROW_F32 = "f32 f32 f32 f32 f64 f32 f32 f32 f64"
#: JAX 0.10.2, x64 on: the result dtype for each input dtype of _INPUT_DTYPES.
_JAX_X64: dict[str, str] = {
    **{name: _NARROW_F32 for name in (
        "sin", "exp", "log1p", "sqrt", "cbrt", "arccos", "tanh", "sinc", "i0", "deg2rad",
        "reciprocal", "arctan2", "hypot", "logaddexp", "nextafter", "copysign", "ldexp", "frexp",
        "mean", "var", "std", "average", "nanmean", "nanvar", "nanstd", "median", "nanmedian",
        "quantile", "nanquantile", "percentile", "corrcoef", "cov", "histogram", "trapezoid",
        "gradient", "poly", "convolve", "correlate")},
    # bool / 2: bool and a Python int promote to a weak int64 first.
    "true_divide": "f64* f32 f32 f32 f64 f32 f32 f32 f64",
    "operator /": "f64* f32 f32 f32 f64 f32 f32 f32 f64",
    "float_power": "f64* f32 f32 f32 f64 f32 f32 f32 f64",
    # bool * 2 is a weak int64 bound.
    "linspace": "f64 f32 f32 f32 f64 f32 f32 f32 f64",
    "geomspace": "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64",
    "logspace": "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64",
    "fft": "c64 c64 c64 c64 c128 c64 c64 c64 c128",
    "sort_complex": "c64 c64 c64 c64 c128 c64 c64 c64 c128",
    # angle and rint take the default float for integers, not float32.
    "angle": "f64 f64 f64 f64 f64 f64 f64 f64 f64",
    "rint": "f64 f64 f64 f64 f64 f64 f64 f64 f64",
}

#: JAX 0.10.2, x64 on, Python scalars: ``True`` is a strong bool, ``3`` a weak int64.
_JAX_X64_SCALARS: dict[str, tuple[str, str]] = {
    "sin": ("f32", "f64*"), "sqrt": ("f32", "f64*"), "arctan2": ("f32", "f64*"),
    "true_divide": ("f64*", "f64*"), "float_power": ("f64*", "f64*"), "mean": ("f32", "f64"),
    "var": ("f32", "f64"), "quantile": ("f32", "f64"), "ldexp": ("f32", "f64"),
    "angle": ("f64", "f64"), "rint": ("f64", "f64"),
}

_SHORT = {"f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128"}


@pytest.fixture
def x64() -> Iterator[None]:
    before = dtypes.x64_enabled()
    dtypes.enable_x64(True)
    try:
        yield
    finally:
        dtypes.enable_x64(before)


def _described(r: Any) -> str:
    name = {v: k for k, v in _SHORT.items()}.get(r.dtype.name, r.dtype.name)
    return name + ("*" if r.weak_type else "")


def _result_type(name: str, x: Any) -> str:
    """The result's dtype, traced abstractly (no program is compiled)."""
    fun = _FUNCTIONS[name]
    if isinstance(x, (bool, int)):
        return _described(lamina.eval_shape(lambda: fun(x)))
    return _described(lamina.eval_shape(fun, x))


def _input(dtype: str) -> Any:
    if dtype == "bool":
        return jnp.asarray(np.arange(1, 5) % 2 == 0)
    return jnp.asarray(np.arange(1, 5), dtype=dtype)


@pytest.mark.parametrize("name", sorted(_JAX_X64))
def test_result_dtypes_under_x64_are_jax(name: str, x64: None) -> None:
    got = " ".join(_result_type(name, _input(d)) for d in _INPUT_DTYPES)
    assert got == _JAX_X64[name]


@pytest.mark.parametrize("name", sorted(_JAX_X64_SCALARS))
def test_python_scalar_result_dtypes_under_x64_are_jax(name: str, x64: None) -> None:
    got = tuple(_result_type(name, v) for v in (True, 3))
    assert got == _JAX_X64_SCALARS[name]


@pytest.mark.parametrize("name", ["sin", "mean", "true_divide", "linspace", "cov", "angle"])
def test_result_dtypes_without_x64_are_float32(name: str) -> None:
    # JAX 0.10.2 with x64 off: every integer and bool computes in float32.
    got = {_result_type(name, _input(d)) for d in _INPUT_DTYPES}
    # bool / 2 promotes to a weak int32 first, so its quotient is weak.
    assert got == ({"f32", "f32*"} if name == "true_divide" else {"f32"})


def test_to_inexact_dtype(x64: None) -> None:
    assert dtypes.to_inexact_dtype(np.int32) == np.float32
    assert dtypes.to_inexact_dtype(np.uint64) == np.float64
    assert dtypes.to_inexact_dtype(np.bool_) == np.float32
    assert dtypes.to_inexact_dtype(jnp.bfloat16) == jnp.bfloat16
    assert dtypes.to_inexact_dtype(np.complex64) == np.complex64


def test_values_are_jax(x64: None) -> None:
    # JAX 0.10.2 (x64): the integer geomspace is exact, and an int32 mean is
    # computed in float32.
    got = jnp.geomspace(1, 256, 9, dtype=jnp.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [1, 2, 4, 8, 16, 32, 64, 128, 256])
    mean = jnp.mean(jnp.arange(5, dtype=jnp.int32))
    assert mean.dtype == np.float32 and float(mean) == 2.0
    quotient = jnp.arange(3, dtype=jnp.int32) / jnp.arange(1, 4, dtype=jnp.int32)
    assert quotient.dtype == np.float32
    np.testing.assert_array_equal(quotient, np.array([0, 0.5, 2 / 3], np.float32))
    assert lamina.jit(jnp.sin)(jnp.arange(3, dtype=jnp.int16)).dtype == np.float32
