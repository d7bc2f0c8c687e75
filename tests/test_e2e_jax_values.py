"""Values and result types JAX-written code relies on (expected values are
JAX 0.10.2's)."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp


@pytest.mark.parametrize("jit", [False, True])
def test_static_out_of_bounds_indices_clamp(jit: bool) -> None:
    def run(f, x):  # type: ignore[no-untyped-def]
        return (lx.jit(f) if jit else f)(x)

    a = jnp.arange(6).reshape(2, 3)
    assert run(lambda x: x[5], jnp.arange(3)).tolist() == 2
    assert run(lambda x: x[-4], jnp.arange(3)).tolist() == 0
    assert run(lambda x: x[5], a).tolist() == [3, 4, 5]
    assert run(lambda x: x[-9, 1], a).tolist() == 1
    assert run(lambda x: x[:, 9], a).tolist() == [2, 5]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        run(lambda x: x[0], jnp.ones((0, 2)))


def test_zero_trip_loops_return_arrays() -> None:
    out = lx.lax.fori_loop(0, 0, lambda i, c: c + 1, 1.0)
    assert isinstance(out, lx.Array) and out.weak_type and out.tolist() == 1.0
    carry, ys = lx.lax.scan(lambda c, x: (c + 1, x), 1.0, None, length=0)
    assert isinstance(carry, lx.Array) and ys is None
    # a carry the body passes through comes back as given, as in JAX
    kept = lx.lax.fori_loop(0, 0, lambda i, c: (c[0] + 1, c[1]), (1.0, 2))
    assert isinstance(kept[0], lx.Array) and kept[1] == 2 and type(kept[1]) is int
    assert type(lx.lax.fori_loop(0, 0, lambda i, c: c, 1.0)) is float


def test_switch_with_a_concrete_index_returns_an_array() -> None:
    out = lx.lax.switch(1, [lambda x: x, lambda x: x + 1], 1.0)
    assert isinstance(out, lx.Array) and out.weak_type and out.tolist() == 2.0
    out = lx.lax.switch(np.int32(0), [lambda x: x, lambda x: x + 1], np.float32(1))
    assert isinstance(out, lx.Array) and out.dtype == np.float32


def test_a_python_int_beyond_the_default_int_is_a_clear_overflow_error() -> None:
    with pytest.raises(OverflowError, match=r"lamina.numpy.array: Python int "
                                            r"1267650600228229401496703205376 too large to "
                                            r"convert to int32"):
        jnp.asarray(2 ** 100)
    assert jnp.asarray(2 ** 31 - 1).tolist() == 2 ** 31 - 1
