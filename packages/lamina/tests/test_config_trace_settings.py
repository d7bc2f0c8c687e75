"""The config options that change what tracing produces: numpy rank promotion,
numpy dtype promotion and the default matmul precision (flags, context
managers, and jit caches that do not reuse a trace made under another value).

Expected texts and dtypes were recorded from JAX 0.10.2."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import lamina as lx
import lamina.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from lamina.dtypes import TypePromotionError


@pytest.fixture(autouse=True)
def _restore_settings() -> Iterator[None]:
    yield
    lx.config.update("jax_numpy_rank_promotion", "allow")
    lx.config.update("jax_numpy_dtype_promotion", "standard")
    lx.config.update("jax_default_matmul_precision", None)


def test_rank_promotion_raise_names_function_and_shapes() -> None:
    lx.config.update("jax_numpy_rank_promotion", "raise")
    assert lx.config.jax_numpy_rank_promotion == "raise"
    with pytest.raises(ValueError, match=r"Operands could not be broadcast together for add on "
                                         r"shapes \(3,\) \(2, 3\) and with the config option "
                                         r"jax_numpy_rank_promotion='raise'"):
        jnp.zeros((3,)) + jnp.zeros((2, 3))
    # scalars and equal ranks are not rank promotion
    assert (jnp.zeros((3,)) + 1.0).shape == (3,)
    assert (jnp.zeros((1, 3)) * jnp.zeros((2, 1))).shape == (2, 3)


def test_rank_promotion_raise_under_jit_names_arguments_and_retraces() -> None:
    f = lx.jit(lambda x, y: x * y)
    assert f(jnp.zeros((3,)), jnp.zeros((2, 3))).shape == (2, 3)  # cached under 'allow'
    with lx.numpy_rank_promotion("raise"):
        with pytest.raises(ValueError, match=r"for multiply on shapes \(3,\) \(2, 3\).*"
                                             r"float32\[3\] \(from x\) and float32\[2,3\] "
                                             r"\(from y\)"):
            f(jnp.zeros((3,)), jnp.zeros((2, 3)))
    assert lx.numpy_rank_promotion.value == "allow"
    assert f(jnp.zeros((3,)), jnp.zeros((2, 3))).shape == (2, 3)


def test_rank_promotion_warn() -> None:
    with lx.numpy_rank_promotion("warn"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jnp.zeros((3,)) - jnp.zeros((2, 3))
        jnp.zeros((3,)) - 1.0
    assert [str(w.message).split(".")[0] for w in caught] == [
        "Following NumPy automatic rank promotion for subtract on shapes (3,) (2, 3)"]


def test_bad_values_name_the_choices() -> None:
    with pytest.raises(ValueError, match=r"numpy_rank_promotion.*\['allow', 'warn', 'raise'\], "
                                         r"got 'yes'"):
        lx.config.update("jax_numpy_rank_promotion", "yes")
    with pytest.raises(ValueError, match="numpy_dtype_promotion"):
        lx.config.update("jax_numpy_dtype_promotion", "loose")
    with pytest.raises(ValueError, match="default_matmul_precision"):
        lx.config.update("jax_default_matmul_precision", "fastest-ever")


def test_strict_dtype_promotion() -> None:
    x32, i32 = jnp.zeros(3, np.float32), jnp.zeros(3, np.int32)
    with lx.numpy_dtype_promotion("strict"):
        with pytest.raises(TypePromotionError, match=r"Input dtypes \('float32', 'int32'\) have "
                                                     r"no available implicit dtype promotion "
                                                     r"path when jax_numpy_dtype_promotion="
                                                     r"strict"):
            x32 + i32
        with pytest.raises(TypePromotionError):
            jnp.promote_types(np.float16, np.float32)
        # Python scalars still promote (JAX's strict lattice)
        assert (jnp.zeros(3, np.int8) + 1).dtype == np.int8
        assert (jnp.zeros(3, np.float16) + 1.0).dtype == np.float16
        with pytest.raises(TypePromotionError):
            i32 + 1.5  # a Python float does not promote an integer array
        assert jnp.result_type(1, 1.0) == np.float32
        assert jnp.result_type(np.uint8, np.uint8) == np.uint8
        with pytest.raises(TypePromotionError):
            jnp.result_type(True, 1)
    assert (x32 + i32).dtype == np.float32


def test_strict_promotion_retraces_jit() -> None:
    f = lx.jit(lambda x, y: x + y)
    args = (jnp.zeros(3, np.float32), jnp.zeros(3, np.int32))
    assert f(*args).dtype == np.float32
    with lx.numpy_dtype_promotion("strict"), pytest.raises(TypePromotionError):
        f(*args)


def test_narrow_dtypes_in_the_lattice() -> None:
    assert jnp.result_type(ml_dtypes.float8_e4m3fn, np.int8) == ml_dtypes.float8_e4m3fn
    assert jnp.result_type(ml_dtypes.int4, True) == ml_dtypes.int4
    with pytest.raises(TypePromotionError, match="8-bit floats do not support implicit"):
        jnp.promote_types(ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)
    with pytest.raises(TypePromotionError, match=r"1-bit, 2-bit and 4-bit integers do not "
                                                 r"support implicit promotion"):
        jnp.promote_types(ml_dtypes.int4, np.int8)


def test_default_matmul_precision() -> None:
    def precision_of(fun: object) -> object:
        jaxpr = lx.make_jaxpr(fun)(jnp.ones((2, 2))).jaxpr
        return jaxpr.eqns[0].params["precision"]

    assert precision_of(lambda a: a @ a) is None
    with lx.default_matmul_precision("float32"):
        assert lx.config.jax_default_matmul_precision == "float32"
        assert precision_of(lambda a: a @ a) == (lx.lax.Precision.HIGHEST,) * 2
    with lx.default_matmul_precision("tensorfloat32"):
        assert precision_of(lambda a: jnp.dot(a, a)) == (lx.lax.Precision.HIGH,) * 2
        # an explicit precision wins
        assert precision_of(lambda a: jnp.dot(a, a, precision="default")) == (
            lx.lax.Precision.DEFAULT,) * 2
    assert lx.default_matmul_precision.value is None
