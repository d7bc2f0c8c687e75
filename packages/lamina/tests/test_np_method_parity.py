"""Every Array/tracer method and operator equals its ``lamina.numpy``
function: same dtype, same weak type and the same bits, eagerly, under
``jit`` and under ``vmap``, for int8/uint8/int32/bool/float16/bfloat16/
float32/complex64 operands. Then regression tests for the cases where the
methods once disagreed with ``jnp`` and JAX (expected values are JAX 0.10.2's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp

DTYPES = [np.int8, np.uint8, np.int32, np.bool_, np.float16, ml_dtypes.bfloat16, np.float32,
          np.complex64]
_BASE = np.array([[1.0, 2.0, 3.0], [4.0, 0.0, 2.0]])
_FRACTIONS = np.array([[0.5, -1.25, 2.75], [-3.5, 0.0, 1.5]])

Case = tuple[Callable[..., Any], Callable[..., Any]]


def _unary(f: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda x, y: f(x)


def _values(dtype: Any) -> np.ndarray[Any, Any]:
    dt = np.dtype(dtype)
    if dt.kind in "fc":
        values = _BASE + _FRACTIONS
        return (values + 0.5j * _BASE if dt.kind == "c" else values).astype(dt)
    return _BASE.astype(dt)


#: name -> (method form, function form); each takes the operands x (2x3) and y (2x3).
CASES: dict[str, Case] = {
    "add": (lambda x, y: x + y, jnp.add), "radd": (lambda x, y: 2 + x, lambda x, y: jnp.add(2, x)),
    "sub": (lambda x, y: x - y, jnp.subtract),
    "rsub": (lambda x, y: 1.5 - x, lambda x, y: jnp.subtract(1.5, x)),
    "mul": (lambda x, y: x * y, jnp.multiply),
    "mul_scalar": (lambda x, y: x * 2.0, lambda x, y: jnp.multiply(x, 2.0)),
    "truediv": (lambda x, y: x / (y + 1), lambda x, y: jnp.true_divide(x, y + 1)),
    "floordiv": (lambda x, y: x // (y + 1), lambda x, y: jnp.floor_divide(x, y + 1)),
    "mod": (lambda x, y: x % (y + 1), lambda x, y: jnp.remainder(x, y + 1)),
    "pow": (lambda x, y: x ** 2, lambda x, y: jnp.power(x, 2)),
    "pow_array": (lambda x, y: x ** y, jnp.power),
    "matmul": (lambda x, y: x @ y.T, lambda x, y: jnp.matmul(x, jnp.transpose(y))),
    "and": (lambda x, y: x & y, jnp.bitwise_and), "or": (lambda x, y: x | y, jnp.bitwise_or),
    "xor": (lambda x, y: x ^ y, jnp.bitwise_xor),
    "lshift": (lambda x, y: x << 1, lambda x, y: jnp.left_shift(x, 1)),
    "rshift": (lambda x, y: x >> 1, lambda x, y: jnp.right_shift(x, 1)),
    "lt": (lambda x, y: x < y, jnp.less), "le": (lambda x, y: x <= y, jnp.less_equal),
    "gt": (lambda x, y: x > y, jnp.greater), "ge": (lambda x, y: x >= y, jnp.greater_equal),
    "eq": (lambda x, y: x == y, jnp.equal), "ne": (lambda x, y: x != y, jnp.not_equal),
    "neg": (lambda x, y: -x, lambda x, y: jnp.negative(x)),
    "pos": (lambda x, y: +x, lambda x, y: jnp.positive(x)),
    "abs": (lambda x, y: abs(x), lambda x, y: jnp.absolute(x)),
    "invert": (lambda x, y: ~x, lambda x, y: jnp.invert(x)),
    "getitem": (lambda x, y: x[1], lambda x, y: jnp.take(x, 1, axis=0)),
    "getitem_slice": (lambda x, y: x[:, ::-2], lambda x, y: jnp.flip(x, 1)[:, ::2]),
    "at_set": (lambda x, y: x.at[0, 1].set(y[1, 1]),
               lambda x, y: jnp.where(jnp.arange(6).reshape(2, 3) == 1, y[1, 1], x)),
    "at_add": (lambda x, y: x.at[:, 2].add(y[0, 0]),
               lambda x, y: jnp.where(jnp.arange(3) == 2, jnp.add(x, y[0, 0]), x)),
    "sum": (lambda x, y: x.sum(), _unary(jnp.sum)), "sum_axis": (lambda x, y: x.sum(axis=0),
                                                         lambda x, y: jnp.sum(x, axis=0)),
    "prod": (lambda x, y: x.prod(axis=1), lambda x, y: jnp.prod(x, axis=1)),
    "mean": (lambda x, y: x.mean(), _unary(jnp.mean)),
    "mean_keepdims": (lambda x, y: x.mean(1, keepdims=True),
                      lambda x, y: jnp.mean(x, 1, keepdims=True)),
    "var": (lambda x, y: x.var(axis=0), lambda x, y: jnp.var(x, axis=0)),
    "std": (lambda x, y: x.std(ddof=1), lambda x, y: jnp.std(x, ddof=1)),
    "max": (lambda x, y: x.max(axis=1, keepdims=True), lambda x, y: jnp.max(x, 1, keepdims=True)),
    "min": (lambda x, y: x.min(), _unary(jnp.min)), "ptp": (lambda x, y: x.ptp(axis=0),
                                                    lambda x, y: jnp.ptp(x, axis=0)),
    "argmax": (lambda x, y: x.argmax(axis=0, keepdims=True),
               lambda x, y: jnp.argmax(x, 0, keepdims=True)),
    "argmin": (lambda x, y: x.argmin(), _unary(jnp.argmin)),
    "any": (lambda x, y: x.any(axis=0), lambda x, y: jnp.any(x, axis=0)),
    "all": (lambda x, y: x.all(), _unary(jnp.all)),
    "cumsum": (lambda x, y: x.cumsum(), _unary(jnp.cumsum)),
    "cumsum_axis": (lambda x, y: x.cumsum(axis=1), lambda x, y: jnp.cumsum(x, axis=1)),
    "cumprod": (lambda x, y: x.cumprod(axis=0), lambda x, y: jnp.cumprod(x, axis=0)),
    "clip": (lambda x, y: x.clip(1, 3), lambda x, y: jnp.clip(x, 1, 3)),
    "round": (lambda x, y: x.round(), _unary(jnp.round)),
    "round_decimals": (lambda x, y: x.round(1), lambda x, y: jnp.round(x, 1)),
    "builtin_round": (lambda x, y: round(x), _unary(jnp.round)),
    "conj": (lambda x, y: x.conj(), _unary(jnp.conj)), "conjugate": (lambda x, y: x.conjugate(),
                                                            _unary(jnp.conjugate)),
    "real": (lambda x, y: x.real, _unary(jnp.real)), "imag": (lambda x, y: x.imag, _unary(jnp.imag)),
    "T": (lambda x, y: x.T, _unary(jnp.transpose)), "mT": (lambda x, y: x.mT, _unary(jnp.matrix_transpose)),
    "transpose": (lambda x, y: x.transpose(1, 0), lambda x, y: jnp.transpose(x, (1, 0))),
    "swapaxes": (lambda x, y: x.swapaxes(0, 1), lambda x, y: jnp.swapaxes(x, 0, 1)),
    "reshape": (lambda x, y: x.reshape(3, 2), lambda x, y: jnp.reshape(x, (3, 2))),
    "reshape_tuple": (lambda x, y: x.reshape((-1,)), lambda x, y: jnp.reshape(x, (-1,))),
    "ravel": (lambda x, y: x.ravel(), _unary(jnp.ravel)), "flatten": (lambda x, y: x.flatten(),
                                                             _unary(jnp.ravel)),
    "squeeze": (lambda x, y: x[:1].squeeze(0), lambda x, y: jnp.squeeze(x[:1], 0)),
    "diagonal": (lambda x, y: x.diagonal(1), lambda x, y: jnp.diagonal(x, 1)),
    "trace": (lambda x, y: x.trace(), _unary(jnp.trace)),
    "dot": (lambda x, y: x.dot(y.T), lambda x, y: jnp.dot(x, y.T)),
    "sort": (lambda x, y: x.sort(axis=0), lambda x, y: jnp.sort(x, axis=0)),
    "argsort": (lambda x, y: x.argsort(), _unary(jnp.argsort)),
    "searchsorted": (lambda x, y: x[0].sort().searchsorted(y[1]),
                     lambda x, y: jnp.searchsorted(jnp.sort(x[0]), y[1])),
    "take": (lambda x, y: x.take(jnp.array([2, 0]), axis=1),
             lambda x, y: jnp.take(x, jnp.array([2, 0]), axis=1)),
    "repeat": (lambda x, y: x.repeat(2, axis=0), lambda x, y: jnp.repeat(x, 2, axis=0)),
    "nonzero": (lambda x, y: x.nonzero(size=4), lambda x, y: jnp.nonzero(x, size=4)),
    "compress": (lambda x, y: x.compress(jnp.array([True, False, True]), axis=1),
                 lambda x, y: jnp.compress(jnp.array([True, False, True]), x, axis=1)),
    "astype": (lambda x, y: x.astype(jnp.float32), lambda x, y: jnp.astype(x, jnp.float32)),
    "copy": (lambda x, y: x.copy(), _unary(jnp.copy)),
    "iter": (lambda x, y: list(x), lambda x, y: [x[0], x[1]]),
}


def _bits(x: Any) -> tuple[str, bool, tuple[int, ...], bytes]:
    """dtype, weak type, shape and raw bytes of an output."""
    aval = x.aval
    return (str(aval.dtype), bool(aval.weak_type), tuple(aval.shape),
            np.ascontiguousarray(np.asarray(x)).tobytes())


def _flat(out: Any) -> list[Any]:
    return lx.tree_util.tree_leaves(out)


def _eager(dtype: Any) -> dict[str, Case]:
    """Checks every case eagerly; returns the cases that run (those that fail
    must fail the same way in both forms)."""
    x, y = jnp.asarray(_values(dtype)), jnp.asarray(_values(dtype)[::-1])
    running: dict[str, Case] = {}
    for name, (method, function) in CASES.items():
        try:
            expected = function(x, y)
        except (TypeError, ValueError, NotImplementedError) as e:
            with pytest.raises(type(e)):
                method(x, y)
            continue
        got = method(x, y)
        assert [_bits(g) for g in _flat(got)] == [_bits(e) for e in _flat(expected)], name
        running[name] = (method, function)
    return running


def _both(cases: dict[str, Case]) -> Callable[[Any, Any], Any]:
    def f(x: Any, y: Any) -> Any:
        return {name: (m(x, y), fn(x, y)) for name, (m, fn) in cases.items()}
    return f


def _compare(outs: dict[str, Any]) -> None:
    for name, (got, expected) in outs.items():
        assert [_bits(g) for g in _flat(got)] == [_bits(e) for e in _flat(expected)], name


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_methods_equal_functions(dtype: Any) -> None:
    cases = _eager(dtype)
    assert len(cases) > len(CASES) // 2
    x, y = jnp.asarray(_values(dtype)), jnp.asarray(_values(dtype)[::-1])
    _compare(lx.jit(_both(cases))(x, y))  # one compilation for all the cases
    batched = {n: c for n, c in cases.items() if n not in ("iter", "nonzero")}
    xs, ys = jnp.stack([x, y]), jnp.stack([y, x])
    _compare(lx.jit(lx.vmap(_both(batched)))(xs, ys))


def test_methods_keep_weak_types() -> None:
    x = jnp.asarray(2.5)  # weakly typed
    for name in ("sum", "mean", "neg", "round", "mul_scalar", "astype", "clip"):
        method, function = CASES[name]
        got, expected = method(x, x), function(x, x)
        assert _bits(got) == _bits(expected), name


def test_numpy_calls_the_methods() -> None:
    x = jnp.asarray(np.array([[1.0, 2.0], [3.0, 5.0]], np.float32))
    for fun, expected in ((np.sum, 11.0), (np.mean, 2.75), (np.max, 5.0), (np.min, 1.0),
                          (np.prod, 30.0), (np.any, True), (np.all, True)):
        out = fun(x)
        assert isinstance(out, lx.Array) and float(out) == expected, fun.__name__
    np.testing.assert_allclose(np.asarray(np.std(x)), np.std(np.asarray(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(np.var(x)), np.var(np.asarray(x)), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(np.cumsum(x)), [1.0, 3.0, 6.0, 11.0])
    with pytest.raises(NotImplementedError, match="'out' argument to lamina.numpy.sum"):
        x.sum(out=np.zeros(()))


def test_jax_method_names_exist() -> None:
    names = ["T", "all", "any", "argmax", "argmin", "argsort", "astype", "at", "choose", "clip",
             "compress", "conj", "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot",
             "flatten", "imag", "mT", "max", "mean", "min", "ndim", "nonzero", "prod", "ptp",
             "ravel", "real", "repeat", "reshape", "round", "searchsorted", "size", "sort",
             "squeeze", "std", "sum", "swapaxes", "take", "trace", "transpose", "var", "view"]
    x = jnp.ones(3)
    assert [n for n in names if not hasattr(type(x), n)] == []
    assert jnp.ndarray.at is type(x).at


def test_view_reinterprets_bits() -> None:
    x = jnp.arange(4, dtype=jnp.int32)
    assert x.view(jnp.int8).tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]
    assert x.view(jnp.float32).dtype == np.float32 and x.view() is x
    np.testing.assert_array_equal(np.asarray(x.view(jnp.float32)),
                                  np.arange(4, dtype=np.int32).view(np.float32))


# --- the disagreements found between the methods and jnp (values from JAX 0.10.2) ---------
def test_small_int_cumulative_keeps_dtype() -> None:
    assert x_dtype(jnp.array([1, 2, 3], jnp.int8).cumsum()) == np.int8
    assert jnp.array([1, 2, 3], jnp.int8).cumsum().tolist() == [1, 3, 6]
    assert x_dtype(jnp.array([1, 2, 3], jnp.uint8).cumprod()) == np.uint8
    assert jnp.array([1, 2, 3], jnp.uint8).cumprod().tolist() == [1, 2, 6]
    assert x_dtype(jnp.array([1, 2, 3], jnp.int8).sum()) == np.int32  # sums widen, as JAX


def x_dtype(x: Any) -> np.dtype[Any]:
    return np.dtype(x.dtype)


def test_low_precision_reductions_accumulate_in_float32() -> None:
    assert np.asarray(jnp.full(4096, 0.1, jnp.float16).sum()).view(np.uint16) == 24166  # 409.5
    assert float(jnp.arange(100, dtype=jnp.bfloat16).mean()) == 49.5
    prod = (jnp.arange(1, 10, dtype=jnp.float16) * 0.7).prod()
    assert np.asarray(prod).view(np.uint16) == 29484  # 1.469e+04
    assert float(jnp.ones((100, 1000), jnp.float16).mean()) == 1.0


def test_integer_negative_powers() -> None:
    with pytest.raises(TypeError, match="Integers cannot be raised to negative powers"):
        jnp.arange(3) ** -1
    base, exponent = jnp.array([2, -1, 1, 0]), jnp.array([-1, -3, -1, -1])
    assert (base ** exponent).tolist() == [0, -1, 1, 0]
    assert lx.jit(lambda a, b: a ** b)(base, exponent).tolist() == [0, -1, 1, 0]


def test_round_on_bool_is_an_error() -> None:
    for f in (lambda b: b.round(), jnp.round, round):  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="bool is not inexact"):
            f(jnp.array([True, False]))


def test_broadcast_and_matmul_errors_are_worded_once() -> None:
    for f in (lambda a, b: a + b, jnp.add):
        with pytest.raises(TypeError, match=r"lamina.numpy.add got incompatible shapes for "
                                            r"broadcasting: \(3,\), \(4,\)\."):
            f(jnp.ones(3), jnp.ones(4))
    for f in (lambda a, b: a @ b, jnp.matmul):
        with pytest.raises(TypeError, match=r"lamina.numpy.matmul: dot_general requires "
                                            r"contracting dimensions to have the same shape, "
                                            r"got \(3,\) and \(4,\): shapes \(2, 3\) and "
                                            r"\(4, 2\) are not aligned"):
            f(jnp.ones((2, 3)), jnp.ones((4, 2)))


def test_boolean_mask_shape_must_match() -> None:
    x = jnp.arange(3.0)
    message = r"boolean index did not match shape of indexed array in index 0: got \(4,\)"
    with pytest.raises(IndexError, match=message):
        x[np.array([False, False, True, True])]
    with pytest.raises(IndexError, match=message):
        x[[False, False, True, True]]
    with pytest.raises(IndexError, match=r"got \(2,\), expected \[3\]"):
        x.at[np.array([True, False])].set(9.0)
    m = jnp.ones((2, 3))
    with pytest.raises(IndexError, match=r"index 1: got \(2,\), expected \[3\]"):
        m[:, np.array([True, False])]
    assert x.at[np.array([True, False, True])].set(9.0).tolist() == [9.0, 1.0, 9.0]
    assert m[np.array([True, False])].shape == (1, 3)
