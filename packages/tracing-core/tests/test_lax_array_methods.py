"""The operator/method mixin (``array_methods.ArrayMethods``) and the numpy
functions installed on it: NumPy semantics (promotion with weak types, broadcasting,
indexing, ``.at`` updates, reductions) checked against numpy on tracers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close

from lamina_linear_util import tree_util
from lamina_tracing_core import api
from lamina_tracing_core import numpy as lnp
from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy import indexing as np_indexing
from lamina_tracing_core.array_methods import ArrayMethods
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import Tracer


RNG = np.random.RandomState(6)


def traced(f: Callable[..., Any], *args: Any) -> Any:
    """Runs ``f`` on tracers (staged with make_jaxpr, then evaluated)."""
    closed, shapes = api.make_jaxpr(f, return_shape=True)(*args)
    flat = api.eval_jaxpr(closed, closed.consts, *tree_util.tree_leaves(list(args)))
    return tree_util.tree_unflatten(tree_util.tree_structure(shapes), flat)


def out_aval(f: Callable[..., Any], *args: Any) -> ShapedArray:
    return api.make_jaxpr(f)(*args).out_avals[0]


F = RNG.standard_normal((2, 3)).astype(np.float32)
G = RNG.standard_normal((2, 3)).astype(np.float32)
I = RNG.randint(-9, 9, (2, 3)).astype(np.int32)
J = RNG.randint(1, 5, (2, 3)).astype(np.int32)


def test_tracers_use_the_mixin() -> None:
    assert issubclass(Tracer, ArrayMethods)
    assert ArrayMethods.__array_priority__ == 100


BINOPS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("truediv", lambda a, b: a / b), ("floordiv", lambda a, b: a // b),
    ("mod", lambda a, b: a % b), ("pow", lambda a, b: a ** b),
    ("lt", lambda a, b: a < b), ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b),
    ("ge", lambda a, b: a >= b), ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize("name,op", BINOPS, ids=[b[0] for b in BINOPS])
def test_binary_operators(name: str, op: Callable[[Any, Any], Any]) -> None:
    a, b = np.abs(F) + 0.5, np.abs(G) + 0.5
    assert_close(traced(op, a, b), op(a, b), rtol=1e-5)
    assert_close(traced(lambda x: op(x, 2.0), a), op(a, np.float32(2.0)), rtol=1e-5)
    assert_close(traced(lambda x: op(3.0, x), a), op(np.float32(3.0), a), rtol=1e-5)
    if name != "pow":
        # numpy's int / int is float64; lamina's is the default float (float32).
        cast = (lambda r: r.astype(np.float32)) if name == "truediv" else (lambda r: r)
        assert_close(traced(op, I, J), cast(op(I, J)), rtol=1e-6)
        assert_close(traced(lambda x: op(x, -4), I), cast(op(I, np.int32(-4))), rtol=1e-6)
        assert_close(traced(lambda x: op(7, x), J), cast(op(np.int32(7), J)), rtol=1e-6)


def test_int_pow() -> None:
    assert_close(traced(lambda x: x ** 2, I), I ** 2)
    assert_close(traced(lambda x, y: x ** y, J, np.abs(J)), J ** np.abs(J))
    assert api.make_jaxpr(lambda x: x ** 3)(F).eqns[0].params == {"y": 3}


def test_bitwise_and_shift_operators() -> None:
    u = RNG.randint(0, 100, (4,)).astype(np.uint8)
    s = np.array([1, 2, 3, 0], np.uint8)
    for op in (lambda a, b: a & b, lambda a, b: a | b, lambda a, b: a ^ b,
               lambda a, b: a << b, lambda a, b: a >> b):
        assert_close(traced(op, u, s), op(u, s))
    assert_close(traced(lambda x: x >> 2, I), I >> 2)
    assert_close(traced(lambda x: ~x, I), ~I)
    b = np.array([True, False, True])
    assert_close(traced(lambda x: ~x & True, b), ~b & True)


def test_unary_operators() -> None:
    assert_close(traced(lambda x: -x, F), -F)
    assert_close(traced(lambda x: +x, F), F)
    assert_close(traced(abs, I), np.abs(I))
    assert_close(traced(lambda x: round(x), F * 3), np.round(F * 3))
    with pytest.raises(TypeError, match="negative: .*booleans"):
        traced(lambda x: -x, np.array([True]))


def test_promotion_and_weak_types() -> None:
    f16 = np.ones(2, np.float16)
    assert out_aval(lambda x: x + 1.0, f16) == ShapedArray((2,), np.float16)
    assert out_aval(lambda x: x * 2, np.ones(2, np.uint8)) == ShapedArray((2,), np.uint8)
    assert out_aval(lambda x: x / 2, I) == ShapedArray((2, 3), np.float32)
    assert out_aval(lambda x: x + 1.5, I) == ShapedArray((2, 3), np.float32, True) or \
        out_aval(lambda x: x + 1.5, I).dtype == np.float32
    assert out_aval(lambda x: x + np.float16(1), np.ones(2, np.int8)).dtype == np.float16
    assert out_aval(lambda x: x + x, 1.0) == ShapedArray((), np.float32, True)
    assert out_aval(lambda x, y: x + y, np.int8(1), np.uint8(1)).dtype == np.int16
    b = np.array([True, False])
    assert_close(traced(lambda x: x + x, b), b | b)
    assert_close(traced(lambda x: x * x, b), b & b)
    with pytest.raises(TypeError, match="boolean subtract"):
        traced(lambda x: x - x, b)


def test_broadcasting() -> None:
    col = RNG.standard_normal((2, 1)).astype(np.float32)
    row = RNG.standard_normal((3,)).astype(np.float32)
    assert_close(traced(lambda a, b: a + b, col, row), col + row, rtol=1e-6)
    big = RNG.standard_normal((4, 2, 3)).astype(np.float32)
    assert_close(traced(lambda a, b: a * b, F, big), F * big, rtol=1e-6)
    with pytest.raises(TypeError, match="add got incompatible shapes for broadcasting"):
        traced(lambda a, b: a + b, F, np.ones(4, np.float32))


def test_unknown_operand_types_defer() -> None:
    with pytest.raises(TypeError):
        traced(lambda a: a + "x", F)
    with pytest.raises(TypeError):
        traced(lambda a: a + [1.0, 2.0, 3.0], F)


def test_matmul_and_dot() -> None:
    m, v = F, RNG.standard_normal(3).astype(np.float32)
    b3 = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    for a, b in ((m, v), (v, m.T), (m, m.T), (m, b3), (v, v)):
        assert_close(traced(lambda x, y: x @ y, a, b), a @ b, rtol=1e-5, atol=1e-6)
    assert_close(traced(lambda x, y: x.dot(y), m, v), m.dot(v), rtol=1e-5)
    assert_close(traced(lambda x, y: x.dot(y), b3, m), b3.dot(m), rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="matmul: dot_general requires contracting dimensions"):
        traced(lambda x, y: x @ y, m, m)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
INDICES: list[Any] = [
    0, -1, (1, 2), (slice(None), 1), slice(1, None), (Ellipsis, 2), (None, 0),
    (slice(None, None, -1), slice(0, 3, 2)), (0, Ellipsis, None), (slice(None), None, 1),
    np.array([1, 0, 1]), (np.array([0, 1]), np.array([2, 0])),
    (slice(None), np.array([[0, 2], [1, 1]])), (np.array([1, 0]), slice(None), np.array([3, 2])),
    (0, np.array([2, 1])), (np.array([0, 1])[:, None], np.array([1, 2])),
    np.array([True, False]), (slice(None), np.array([True, False, True])),
    [0, 1], (Ellipsis, np.array([-1, 0])), (1, slice(None, None, 2), -2), np.int64(1),
]


@pytest.mark.parametrize("idx", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_getitem(idx: Any) -> None:
    expected = X[idx]
    assert_close(traced(lambda a: a[idx], X), expected)


def test_getitem_traced_indices() -> None:
    assert_close(traced(lambda a, i: a[i], X, np.int32(1)), X[1])
    assert_close(traced(lambda a, i: a[:, i], X, np.int32(-1)), X[:, -1])
    assert_close(traced(lambda a, i: a[i, 1:], X, np.array([1, 0], np.int32)), X[[1, 0], 1:])
    eqns = api.make_jaxpr(lambda a, i: a[i])(X, np.int32(1)).eqns
    assert any(e.primitive.name == "dynamic_slice" for e in eqns)


def test_static_out_of_range_indices_are_clamped_as_in_jax() -> None:
    assert_close(traced(lambda a: a[5], X), X[-1])
    assert_close(traced(lambda a: a[-9], X), X[0])
    assert_close(traced(lambda a: a[:, 9], X), X[:, -1])
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        traced(lambda a: a[0], np.zeros((0, 2), np.float32))


def test_getitem_errors() -> None:
    with pytest.raises(IndexError, match="Too many indices"):
        traced(lambda a: a[0, 0, 0, 0], X)
    with pytest.raises(np_indexing.NonConcreteBooleanIndexError, match="concrete"):
        traced(lambda a, m: a[m], X, np.array([True, False]))
    with pytest.raises(TypeError, match="integer or boolean"):
        traced(lambda a, i: a[i], X, np.float32(1))
    with pytest.raises(IndexError, match="single ellipsis"):
        traced(lambda a: a[..., ...], X)


@pytest.mark.parametrize("op,ref", [
    ("set", lambda x, i, v: _np_set(x, i, v)),
    ("add", lambda x, i, v: _np_at(np.add, x, i, v)),
    ("mul", lambda x, i, v: _np_at(np.multiply, x, i, v)),
    ("min", lambda x, i, v: _np_at(np.minimum, x, i, v)),
    ("max", lambda x, i, v: _np_at(np.maximum, x, i, v)),
])
@pytest.mark.parametrize("idx", [1, (0, slice(1, None)), (Ellipsis, np.array([0, 2, 0])),
                                 (np.array([1, 0]), 2), (slice(None), slice(None, None, 2))])
def test_at_updates(op: str, ref: Callable[..., Any], idx: Any) -> None:
    values = np.float32(2.5) if op != "set" else np.float32(-7)
    got = traced(lambda a: getattr(a.at[idx], op)(values), X)
    assert_close(got, ref(X, idx, values))


def _np_set(x: Any, idx: Any, v: Any) -> Any:
    y = x.copy()
    y[idx] = v
    return y


def _np_at(ufunc: Any, x: Any, idx: Any, v: Any) -> Any:
    y = x.copy()
    flat_pos = np.arange(x.size).reshape(x.shape)[idx]
    ufunc.at(y.reshape(-1), np.asarray(flat_pos).reshape(-1), v)
    return y


def test_at_more() -> None:
    v = np.arange(4, dtype=np.float32)
    assert_close(traced(lambda a, b: a.at[0, 1].set(b), X, v), _np_set(X, (0, 1), v))
    assert_close(traced(lambda a: a.at[0].get(), X), X[0])
    # Out-of-bounds updates are dropped (or clipped with mode='clip').
    x = np.zeros(4, np.float32)
    assert_close(traced(lambda a, i: a.at[i].set(1.0), x, np.int32(7)), x)
    assert_close(traced(lambda a: a.at[7].set(1.0), x), x)
    assert_close(traced(lambda a: a.at[-1].set(1.0), x), np.array([0, 0, 0, 1], np.float32))
    # A static box is updated with slice + dynamic_update_slice, not a scatter.
    names = [e.primitive.name for e in api.make_jaxpr(lambda a: a.at[0, 1:].add(1.0))(X).eqns]
    assert "dynamic_update_slice" in names and not any("scatter" in n for n in names)
    assert_close(traced(lambda a, i: a.at[i].add(1.0, mode="clip"), x, np.int32(7)),
                 np.array([0, 0, 0, 1], np.float32))
    assert_close(traced(lambda a: a.at[1].subtract(2.0), x), np.array([0, -2, 0, 0],
                                                                      np.float32))
    # Gradients flow through index updates.
    g = api.grad(lambda a: a.at[np.array([0, 0, 2])].add(a[1] * 2.0).sum())(
        np.ones(3, np.float32))
    assert_close(g, np.array([1, 7, 1], np.float32))


def test_reductions() -> None:
    for name in ("sum", "mean", "max", "min", "prod"):
        for axis in (None, 0, (0, 2), -1):
            for keepdims in (False, True):
                got = traced(lambda a, n=name, ax=axis, k=keepdims: getattr(a, n)(
                    axis=ax, keepdims=k), X)
                assert_close(got, getattr(np, name)(X, axis=axis, keepdims=keepdims),
                             rtol=1e-5, err_msg=f"{name} {axis} {keepdims}")
    b = X > 10
    assert_close(traced(lambda a: a.any(axis=1), b), b.any(axis=1))
    assert_close(traced(lambda a: a.all(), b), b.all())
    assert out_aval(lambda a: a.sum(), np.ones(3, np.int8)).dtype == np.int32
    assert out_aval(lambda a: a.sum(), np.ones(3, bool)).dtype == np.int32
    assert out_aval(lambda a: a.mean(), I).dtype == np.float32
    assert_close(traced(lambda a: a.sum(where=a > 3.0), X), X.sum(where=X > 3.0))
    assert_close(traced(lambda a: a.max(initial=100.0), X), np.max(X, initial=100.0))
    assert_close(traced(lambda a: a.argmax(), X), np.argmax(X).astype(np.int32))
    assert_close(traced(lambda a: a.argmin(axis=1), X), np.argmin(X, axis=1).astype(np.int32))
    with pytest.raises(ValueError, match="zero-size array"):
        traced(lambda a: a.max(), np.zeros((0,), np.float32))


def test_shape_methods() -> None:
    assert_close(traced(lambda a: a.reshape(4, -1), X), X.reshape(4, -1))
    assert_close(traced(lambda a: a.reshape((6, 4)), X), X.reshape(6, 4))
    assert_close(traced(lambda a: a.T, X), X.T)
    assert_close(traced(lambda a: a.mT, X), np.swapaxes(X, -1, -2))
    assert_close(traced(lambda a: a.transpose(1, 0, 2), X), X.transpose(1, 0, 2))
    assert_close(traced(lambda a: a.transpose((2, 0, 1)), X), X.transpose(2, 0, 1))
    assert_close(traced(lambda a: a[:, :1].squeeze(), X), X[:, :1].squeeze())
    assert_close(traced(lambda a: a.ravel(), X), X.ravel())
    assert_close(traced(lambda a: a.flatten(), X), X.flatten())
    assert_close(traced(lambda a: a.swapaxes(0, 2), X), X.swapaxes(0, 2))
    with pytest.raises(TypeError, match="cannot reshape"):
        traced(lambda a: a.reshape(5, -1), X)

    def check_props(a: Any) -> Any:
        assert a.shape == (2, 3, 4) and a.ndim == 3 and a.size == 24
        assert a.dtype == np.float32 and len(a) == 2
        return [row for row in a]

    assert_close(traced(check_props, X), list(X))


def test_value_methods() -> None:
    assert_close(traced(lambda a: a.astype(np.int32), F * 4), (F * 4).astype(np.int32))
    assert_close(traced(lambda a: a.astype(bool), I), I.astype(bool))
    assert_close(traced(lambda a: a.clip(-0.5, 0.5), F), np.clip(F, -0.5, 0.5))
    assert_close(traced(lambda a: a.clip(max=0.1), F), np.clip(F, None, 0.1))
    assert_close(traced(lambda a: a.round(1), F), np.round(F, 1), rtol=1e-6)
    assert_close(traced(lambda a: a.cumsum(axis=1), X), X.cumsum(axis=1))
    assert_close(traced(lambda a: a.cumsum(), I), I.cumsum().astype(np.int32))
    assert_close(traced(lambda a: a.cumprod(axis=0), F), F.cumprod(axis=0), rtol=1e-6)
    assert_close(traced(lambda a: a.sort(), F), np.sort(F))
    assert_close(traced(lambda a: a.sort(axis=0, descending=True), F), -np.sort(-F, axis=0))
    assert_close(traced(lambda a: a.argsort(), F), np.argsort(F).astype(np.int32))
    ties = np.array([2.0, 1.0, 2.0, 1.0], np.float32)
    assert_close(traced(lambda a: a.argsort(descending=True), ties),
                 np.array([0, 2, 1, 3], np.int32))
    z = (F + 1j * G).astype(np.complex64)
    assert_close(traced(lambda a: a.conj(), z), np.conj(z))
    assert_close(traced(lambda a: a.real, z), z.real)
    assert_close(traced(lambda a: a.imag, z), z.imag)
    assert_close(traced(lambda a: a.imag, F), np.zeros_like(F))
    assert_close(traced(lambda a: a.conj(), F), F)


def test_divmod_semantics() -> None:
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    assert_close(traced(lambda x, y: x // y, a, b), a // b)
    assert_close(traced(lambda x, y: x % y, a, b), a % b)
    q, r = traced(lambda x, y: divmod(x, y), a, b)
    assert_close(q, a // b)
    assert_close(r, a % b)
    fa, fb = a.astype(np.float32), b.astype(np.float32) * 0.75
    assert_close(traced(lambda x, y: x // y, fa, fb), fa // fb)
    assert_close(traced(lambda x, y: x % y, fa, fb), fa % fb, rtol=1e-6)


def test_numpy_util_api() -> None:
    assert _util.broadcast_shapes("f", (2, 1), (3,)) == (2, 3)
    with pytest.raises(ValueError, match="f: incompatible shapes"):
        _util.broadcast_shapes("f", (2,), (3,))
    avals = api.make_jaxpr(lambda a: _util.promote_args("f", a, 1.0, np.int8(2)))(
        I).out_avals
    assert [a.dtype for a in avals] == [np.float32] * 3
    assert_close(traced(lambda a: lnp.where(a > 0, a, 0), I), np.where(I > 0, I, 0))
    assert_close(traced(lambda a: lnp.broadcast_to(a, (4, 2, 3)), F),
                 np.broadcast_to(F, (4, 2, 3)))


def test_vmap_over_methods() -> None:
    f = lambda a: (a[1:] * 2.0 + a.sum()).at[0].set(-1.0)  # noqa: E731
    xs = RNG.standard_normal((3, 4)).astype(np.float32)
    got = api.vmap(f)(xs)
    assert_close(got, np.stack([_np_set(x[1:] * 2 + x.sum(), 0, -1) for x in xs]), rtol=1e-5)
