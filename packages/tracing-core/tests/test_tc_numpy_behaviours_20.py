"""NumPy behaviours found to differ from JAX 0.10.2 (issue 20, item 3): Fortran
order reshapes, integer-array indexing into a zero-size axis, Python ints
beyond the default integer type, and what ``iscomplexobj`` and the ``*_like``
functions accept. The expected values are JAX's."""

from __future__ import annotations

import numpy as np
import pytest

import lamina_tracing_core as tc
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.api import ShapeDtypeStruct


# --- reshape / ravel in Fortran order ----------------------------------------------------------
def test_reshape_order_f_function_and_method() -> None:
    x = np.arange(24, dtype=np.int32)
    expected = [[0, 4, 8, 12, 16, 20], [1, 5, 9, 13, 17, 21], [2, 6, 10, 14, 18, 22],
                [3, 7, 11, 15, 19, 23]]
    np.testing.assert_array_equal(jnp.reshape(x, (4, 6), order="F"), expected)
    # the methods, on tracers (eager values here are the reference interpreter's numpy arrays)
    for method in (lambda a: a.reshape((4, 6), order="F"), lambda a: a.reshape(4, 6, order="F")):
        closed = tc.make_jaxpr(method)(x)
        np.testing.assert_array_equal(tc.core.jaxpr_as_fun(closed)(x)[0], expected)
    # 3-D to 3-D, as JAX (and NumPy)
    y = x.reshape(2, 3, 4)
    np.testing.assert_array_equal(
        np.ravel(jnp.reshape(y, (4, 3, 2), order="F")),
        [0, 2, 8, 10, 5, 7, 12, 14, 20, 22, 17, 19, 4, 6, 1, 3, 9, 11, 16, 18, 13, 15, 21, 23])


def test_ravel_and_flatten_order_f() -> None:
    y = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    expected = [0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19,
                11, 23]
    np.testing.assert_array_equal(jnp.ravel(y, order="F"), expected)
    for method in (lambda a: a.ravel(order="F"), lambda a: a.flatten(order="F")):
        closed = tc.make_jaxpr(method)(y)
        np.testing.assert_array_equal(tc.core.jaxpr_as_fun(closed)(y)[0], expected)


def test_reshape_order_f_traces_and_rejects_unknown_orders() -> None:
    closed = tc.make_jaxpr(lambda a: jnp.reshape(a, (3, 2), order="F"))(
        np.arange(6, dtype=np.float32))
    assert [e.primitive.name for e in closed.eqns] == ["reshape", "transpose"]
    with pytest.raises(ValueError, match="Unexpected value for 'order' argument: X."):
        jnp.reshape(np.arange(6), (2, 3), order="X")


# --- integer-array indexing into a zero-size axis ----------------------------------------------
def test_empty_index_into_empty_axis_gives_empty_arrays() -> None:
    z = np.zeros((0, 3), np.float32)
    empty = np.zeros((0,), np.int32)
    for out, shape in [(jnp.asarray(np.zeros(0, np.float32))[jnp.asarray(empty)], (0,)),
                       (jnp.asarray(z)[empty], (0, 3)),
                       (jnp.asarray(z)[empty, 1], (0,)),
                       (jnp.asarray(z)[np.zeros((2, 0), np.int32)], (2, 0, 3)),
                       (jnp.asarray(z)[np.zeros((0,), bool)], (0, 3)),
                       (jnp.take(z, empty, axis=0), (0, 3)),
                       (jnp.take_along_axis(z, np.zeros((0, 3), np.int32), axis=0), (0, 3))]:
        assert out.shape == shape and out.dtype == np.float32
    closed = tc.make_jaxpr(lambda a, i: a.at[i].set(1.0))(z, empty)
    [out] = tc.core.jaxpr_as_fun(closed)(z, empty)
    assert out.shape == (0, 3) and "scatter" not in [e.primitive.name for e in closed.eqns]


def test_empty_index_into_empty_axis_traces_without_gather() -> None:
    closed = tc.make_jaxpr(lambda a, i: a[i])(np.zeros((0, 3), np.float32),
                                              np.zeros((0,), np.int32))
    assert "gather" not in [e.primitive.name for e in closed.eqns]
    assert closed.out_avals[0].shape == (0, 3)


def test_non_empty_index_into_empty_axis_is_still_an_error() -> None:
    z = np.zeros((0, 3), np.float32)
    with pytest.raises(IndexError, match=r"Cannot do a non-empty jnp.take\(\) from an empty axis"):
        jnp.take(z, np.array([0]), axis=0)
    with pytest.raises(TypeError, match="gather"):
        tc.make_jaxpr(lambda a: a[np.array([0, 1])])(z)


# --- Python ints beyond int32 in an explicit unsigned type -------------------------------------
def test_uint32_values_beyond_int32() -> None:
    for out, value in [(jnp.uint32(2998342421), 2998342421),
                       (jnp.array(2**32 - 1, dtype="uint32"), 2**32 - 1),
                       (jnp.asarray(2**32 - 1, dtype=jnp.uint32), 2**32 - 1)]:
        assert out.dtype == np.uint32 and int(out) == value
    full = jnp.full((2,), 2**32 - 1, dtype=jnp.uint32)
    assert full.dtype == np.uint32 and full.tolist() == [2**32 - 1] * 2
    assert tc.lax.full((2,), 2**32, np.uint32).tolist() == [0, 0]  # lax.full wraps, as JAX
    zeros = np.zeros(3, np.uint32)
    closed = tc.make_jaxpr(lambda a: a.at[0].set(2998342421))(zeros)
    assert tc.core.jaxpr_as_fun(closed)(zeros)[0].tolist() == [2998342421, 0, 0]


def test_out_of_range_python_ints_raise_as_jax() -> None:
    for call, text in [(lambda: jnp.uint32(2**32), "4294967296 out of bounds for uint32"),
                       (lambda: jnp.uint32(-1), "-1 out of bounds for uint32"),
                       (lambda: jnp.int32(2**31), "2147483648 out of bounds for int32"),
                       (lambda: jnp.uint8(300), "300 out of bounds for uint8"),
                       (lambda: jnp.array(2**31), "2147483648 too large to convert to int32"),
                       (lambda: tc.make_jaxpr(lambda a: a + 2998342421)(np.uint32(1)),
                        "2998342421 too large")]:
        with pytest.raises(OverflowError, match=text):
            call()


def test_uint64_and_int64_under_x64() -> None:
    with _x64():
        assert int(jnp.uint64(2**64 - 1)) == 2**64 - 1
        assert jnp.uint64(2**64 - 1).dtype == np.uint64
        assert int(jnp.array(2**63, dtype="uint64")) == 2**63
        assert int(jnp.int64(2**63 - 1)) == 2**63 - 1
        with pytest.raises(OverflowError):
            jnp.int64(2**63)
        with pytest.raises(OverflowError):
            jnp.uint64(2**64)


class _x64:
    def __enter__(self) -> None:
        self.before = tc.dtypes.x64_enabled()
        tc.dtypes.enable_x64(True)

    def __exit__(self, *exc: object) -> None:
        tc.dtypes.enable_x64(self.before)


# --- iscomplexobj and the *_like functions ------------------------------------------------------
def test_iscomplexobj_accepts_what_jax_does() -> None:
    assert jnp.iscomplexobj(jnp.complex64) is True
    assert jnp.iscomplexobj(jnp.float32) is False
    assert jnp.iscomplexobj(ShapeDtypeStruct((2,), np.complex64)) is True
    assert jnp.iscomplexobj(None) is False
    assert jnp.iscomplexobj("complex64") is False
    assert jnp.iscomplexobj(1j) is True
    with pytest.raises(TypeError):
        jnp.iscomplexobj(np.complex64)


def test_like_functions_accept_what_jax_does() -> None:
    sds = ShapeDtypeStruct((2, 3), np.int8)
    for fun, fill in [(jnp.zeros_like, 0), (jnp.ones_like, 1), (jnp.empty_like, 0)]:
        out = fun(sds)
        assert out.shape == (2, 3) and out.dtype == np.int8
        named = fun("float32")  # JAX reads a string as a scalar of the dtype it names
        assert named.shape == () and named.dtype == np.float32 and float(named) == fill
        for refused in (jnp.float32, np.float32, np.dtype("float32"), float, int):
            with pytest.raises(TypeError):
                fun(refused)
    full = jnp.full_like(sds, 7)
    assert full.dtype == np.int8 and full.tolist() == [[7, 7, 7], [7, 7, 7]]


def test_comparisons_order_complex_values_as_numpy() -> None:
    # JAX 0.10.2: real parts first, imaginary parts where the real parts tie
    # (optax compares complex gradients with `t > 0`)
    a = jnp.array([1 + 2j, 1 + 0j, 0 + 5j], dtype=np.complex64)
    b = jnp.array([1 + 1j, 1 + 1j, 1 + 0j], dtype=np.complex64)
    assert np.asarray(a > b).tolist() == [True, False, False]
    assert np.asarray(a >= b).tolist() == [True, False, False]
    assert np.asarray(a < b).tolist() == [False, True, True]
    assert np.asarray(jnp.less_equal(a, a)).tolist() == [True, True, True]
    jaxpr = tc.make_jaxpr(lambda x, y: x > y)(a, b)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns].count("select_n") == 1
