"""lamina.numpy array creation and dtypes against NumPy (and JAX's typing rules)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from lamina_tracing_core import api, core

import lamina.numpy as jnp
from lamina.numpy import UnsupportedArgumentError


def check(actual, expected, dtype=None):
    actual_np = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual_np.shape == expected.shape, (actual_np.shape, expected.shape)
    if dtype is not None:
        assert actual_np.dtype == np.dtype(dtype), (actual_np.dtype, dtype)
    np.testing.assert_allclose(actual_np, expected.astype(actual_np.dtype), rtol=1e-6,
                               atol=1e-6)


def test_array_from_lists_and_scalars():
    check(jnp.array([1, 2, 3]), [1, 2, 3], np.int32)
    check(jnp.array([1, 2.5]), [1, 2.5], np.float32)
    check(jnp.array([[1, 2], [3, 4]], dtype=jnp.float16), [[1, 2], [3, 4]], np.float16)
    check(jnp.array([True, 2]), [1, 2], np.int32)
    check(jnp.array([1, np.float16(2)]), [1, 2], np.float16)
    assert jnp.array(1.0).weak_type and jnp.asarray(2).weak_type
    assert not jnp.array([1.0]).weak_type
    assert not jnp.array(True).weak_type
    assert not jnp.array(np.float64(1)).weak_type
    assert jnp.array(np.float64(1)).dtype == np.float32
    assert jnp.array(np.arange(3)).dtype == np.int32
    assert jnp.array(1, ndmin=3).shape == (1, 1, 1)
    assert jnp.array([]).dtype == np.float32
    assert isinstance(jnp.array([1.0]), jnp.ndarray)


def test_array_of_lamina_values_and_tracers():
    x = jnp.array([1.0, 2.0])
    assert jnp.asarray(x) is x
    check(jnp.array(x, dtype=jnp.int32), [1, 2], np.int32)
    check(jnp.array([x, x]), [[1, 2], [1, 2]], np.float32)

    def f(t):
        return jnp.array([t, 2.0])

    jaxpr = api.make_jaxpr(f)(1.0)
    assert "concatenate" in str(jaxpr)
    check(f(3.0), [3.0, 2.0], np.float32)


def test_array_errors():
    with pytest.raises(UnsupportedArgumentError, match="order='F'"):
        jnp.array([1, 2], order="F")
    with pytest.raises(ValueError, match="ragged"):
        jnp.array([[1, 2], [3]])
    with pytest.raises(TypeError, match="must be an array or a scalar"):
        jnp.array(["a", "b"])
    with pytest.raises(TypeError, match="not a valid"):
        jnp.array(np.array(["a", "b"]))


def test_filled_arrays():
    check(jnp.zeros((2, 3)), np.zeros((2, 3)), np.float32)
    check(jnp.ones(3, jnp.int8), np.ones(3), np.int8)
    check(jnp.empty((2,)), np.zeros(2), np.float32)
    check(jnp.full((2, 2), 7), np.full((2, 2), 7), np.int32)
    out = jnp.full(3, 1.0)
    assert out.dtype == np.float32 and out.weak_type
    check(jnp.full((2, 3), [1, 2, 3]), np.full((2, 3), [1, 2, 3]))
    x = jnp.ones((2, 2), jnp.float16)
    check(jnp.zeros_like(x), np.zeros((2, 2)), np.float16)
    check(jnp.ones_like(x, dtype=jnp.int32), np.ones((2, 2)), np.int32)
    check(jnp.full_like(x, 3, shape=(3,)), np.full(3, 3), np.float16)
    check(jnp.empty_like(np.arange(3)), np.zeros(3), np.int32)
    assert jnp.zeros_like(1.0).weak_type
    assert not jnp.zeros(3).weak_type
    with pytest.raises(ValueError, match="negative dimensions"):
        jnp.zeros(-1)


def test_shape_must_be_concrete():
    def f(n):
        return jnp.zeros(n)

    with pytest.raises(core.ConcretizationTypeError):
        api.make_jaxpr(f)(3)


def test_arange():
    check(jnp.arange(5), np.arange(5), np.int32)
    check(jnp.arange(2, 10, 3), np.arange(2, 10, 3), np.int32)
    check(jnp.arange(10, 2, -3), np.arange(10, 2, -3), np.int32)
    check(jnp.arange(0.0, 1.0, 0.1), np.arange(0.0, 1.0, 0.1, dtype=np.float32), np.float32)
    check(jnp.arange(0.1, 1.3, 0.3), np.arange(0.1, 1.3, 0.3, dtype=np.float32), np.float32)
    check(jnp.arange(1.0, 5.0), np.arange(1.0, 5.0), np.float32)
    check(jnp.arange(5, dtype=jnp.float32), np.arange(5), np.float32)
    check(jnp.arange(0), np.arange(0), np.int32)
    assert not jnp.arange(5).weak_type
    assert "iota" in str(api.make_jaxpr(lambda: jnp.arange(3))())


def test_linspace_logspace():
    check(jnp.linspace(0, 1, 5), np.linspace(0, 1, 5), np.float32)
    check(jnp.linspace(2, 3, 4, endpoint=False), np.linspace(2, 3, 4, endpoint=False))
    check(jnp.linspace(0, 10, 7, dtype=int), [0, 1, 3, 5, 6, 8, 10], np.int32)
    out, step = jnp.linspace(0, 1, 5, retstep=True)
    check(step, 0.25)
    check(jnp.linspace(np.array([0.0, 1.0]), np.array([1.0, 3.0]), 3),
          np.linspace(np.array([0.0, 1.0]), np.array([1.0, 3.0]), 3))
    check(jnp.linspace(np.array([0.0, 1.0]), 2.0, 3, axis=1),
          np.linspace(np.array([0.0, 1.0]), 2.0, 3, axis=1))
    check(jnp.linspace(1, 2, 1), [1.0])
    check(jnp.linspace(1, 2, 0), np.zeros(0))
    check(jnp.logspace(0, 2, 3), [1, 10, 100])
    check(jnp.logspace(0, 3, 4, base=2.0), [1, 2, 4, 8])


def test_matrices():
    check(jnp.eye(3), np.eye(3), np.float32)
    check(jnp.eye(3, 4, k=1, dtype=int), np.eye(3, 4, k=1), np.int32)
    check(jnp.eye(3, k=-2), np.eye(3, k=-2))
    check(jnp.identity(2, dtype=jnp.bool_), np.identity(2, bool), np.bool_)
    check(jnp.tri(3, 4, 1), np.tri(3, 4, 1), np.float32)
    m = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    for k in (-1, 0, 2):
        check(jnp.tril(m, k), np.tril(m, k))
        check(jnp.triu(m, k), np.triu(m, k))
    check(jnp.tril(np.ones((2, 3, 3))), np.tril(np.ones((2, 3, 3))))
    rows, cols = jnp.tril_indices(3)
    erows, ecols = np.tril_indices(3)
    check(rows, erows)
    check(cols, ecols)
    check(jnp.triu_indices(3, 1)[1], np.triu_indices(3, 1)[1])


def test_diag():
    v = np.array([1, 2, 3], np.int32)
    for k in (-2, 0, 1):
        check(jnp.diag(v, k), np.diag(v, k), np.int32)
    m = np.arange(12).reshape(3, 4)
    for k in (-1, 0, 2, 5):
        check(jnp.diag(m, k), np.diag(m, k))
    check(jnp.diagflat([[1, 2], [3, 4]]), np.diagflat([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match="1-D or 2-D"):
        jnp.diag(np.ones((2, 2, 2)))


def test_meshgrid_and_indices():
    x, y = np.arange(3), np.arange(2) * 10
    for indexing in ("xy", "ij"):
        for sparse in (False, True):
            got = jnp.meshgrid(x, y, indexing=indexing, sparse=sparse)
            want = np.meshgrid(x, y, indexing=indexing, sparse=sparse)
            for g, w in zip(got, want):
                check(g, w)
    check(jnp.indices((2, 3)), np.indices((2, 3)))
    for g, w in zip(jnp.indices((2, 3), sparse=True), np.indices((2, 3), sparse=True)):
        check(g, w)


# --- dtypes -----------------------------------------------------------------------------------
def test_scalar_types_are_dtypes_and_constructors():
    x = jnp.float32(1.0)
    assert x.dtype == np.float32 and x.shape == () and not x.weak_type
    assert isinstance(x, jnp.ndarray)
    assert np.dtype(jnp.float32) == np.float32
    assert jnp.float32.dtype == np.dtype(np.float32)
    assert jnp.float32 == np.float32
    assert hash(jnp.int8) == hash(np.int8)
    assert jnp.zeros(2, jnp.int16).dtype == np.int16
    assert jnp.bfloat16.dtype == np.dtype(ml_dtypes.bfloat16)
    check(jnp.int32([1.7, 2.2]), [1, 2], np.int32)
    assert jnp.float64(1).dtype == np.float32  # 64-bit off: canonicalized
    assert jnp.bool_ is jnp.bool
    assert isinstance(np.float32(1), jnp.float32)
    assert jnp.ones(2).astype(jnp.int8).dtype == np.int8


def test_ndarray_isinstance_for_arrays_and_tracers():
    assert isinstance(jnp.ones(2), jnp.ndarray)
    assert not isinstance(np.ones(2), jnp.ndarray)
    seen = []

    def f(t):
        seen.append(isinstance(t, jnp.ndarray))
        return t

    api.make_jaxpr(f)(1.0)
    api.grad(lambda t: jnp.sin(f(t)))(1.0)
    assert seen == [True, True]
    with pytest.raises(TypeError, match="cannot be instantiated"):
        jnp.ndarray()
    assert jnp.ndarray.at is not None


def test_promotion_functions():
    assert jnp.result_type(jnp.int32, jnp.float16) == np.float16
    assert jnp.result_type(1, 2.0) == np.float32
    assert jnp.result_type(np.ones(2, np.int8), 1) == np.int8
    assert jnp.promote_types(jnp.uint8, jnp.int8) == np.int16
    assert jnp.promote_types(np.float16, jnp.bfloat16) == np.float32
    assert jnp.can_cast(jnp.int8, jnp.int32)
    assert not jnp.can_cast(np.float32, np.int32)
    assert jnp.issubdtype(jnp.float32, jnp.floating)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.issubdtype(np.dtype("int8"), jnp.integer)
    assert not jnp.issubdtype(jnp.int8, jnp.floating)
    assert jnp.issubdtype(jnp.float32, np.float32)
    assert jnp.isdtype(np.float32, "real floating")
    assert jnp.isdtype(np.int8, ("bool", "integral"))
    assert jnp.finfo(jnp.bfloat16).bits == 16
    assert jnp.finfo(np.float32).eps == np.finfo(np.float32).eps
    assert jnp.finfo(jnp.ones(2)).max == np.finfo(np.float32).max
    assert jnp.iinfo(jnp.int8).min == -128


def test_constants_and_shape_helpers():
    assert jnp.pi == np.pi and jnp.e == np.e and jnp.inf == np.inf and np.isnan(jnp.nan)
    assert jnp.newaxis is None
    x = jnp.ones((2, 3))
    assert jnp.shape(x) == (2, 3) and jnp.ndim(x) == 2 and jnp.size(x) == 6
    assert jnp.size(x, 1) == 3
    assert jnp.shape([[1, 2]]) == (1, 2)
    assert jnp.isscalar(1.0) and jnp.isscalar(jnp.float32(1)) and not jnp.isscalar(x)
    check(jnp.astype(x, jnp.int32), np.ones((2, 3)), np.int32)
    check(jnp.copy(x), np.ones((2, 3)))


def test_python_ints_wrap_in_arithmetic_but_not_in_array() -> None:
    """As JAX 0.10: a weakly typed Python int that fits the default integer
    type wraps like a C cast when it meets a narrower integer array; one
    beyond it, or one given to ``array`` with a dtype it does not fit, is an
    OverflowError."""
    import lamina as lx

    u8 = jnp.ones(2, jnp.uint8)
    assert (u8 + 300).dtype == np.uint8 and (u8 + 300).tolist() == [45, 45]
    assert (jnp.ones(2, jnp.int8) + 200).tolist() == [-55, -55]
    assert (u8 * -1).tolist() == [255, 255]
    assert jnp.full(2, 300, jnp.uint8).tolist() == [44, 44]
    assert lx.jit(lambda a: a + 300)(u8).tolist() == [45, 45]
    with pytest.raises(OverflowError, match="2147483648 too large to convert to int32"):
        jnp.ones(2, jnp.int32) + 2**31
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        jnp.array(300, jnp.uint8)
    with pytest.raises(OverflowError, match="out of bounds for int8"):
        jnp.asarray(300, jnp.int8)
    assert jnp.array(3, jnp.uint8).dtype == np.uint8
