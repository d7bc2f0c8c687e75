"""vmap's out_axes out of range under jit and inside pmap raise JAX's error
(they used to be taken modulo the rank); pmap's own out_axes check stays."""

from __future__ import annotations

import pytest

import lamina
import lamina.numpy as jnp


@pytest.mark.parametrize("out_axes,message", [
    (2, "axis 2 is out of bounds for array of dimension 1"),
    (-3, "axis -3 is out of bounds for array of dimension 1"),
    ((0, 2), "axis 2 is out of bounds for array of dimension 1"),
])
def test_vmap_out_axes_out_of_range_under_jit(out_axes, message) -> None:
    f = lamina.vmap(lambda x: (x, x) if isinstance(out_axes, tuple) else x, out_axes=out_axes)
    with pytest.raises(ValueError) as info:
        lamina.jit(f)(jnp.ones(3))
    # JAX's text first, then which output of which function
    assert str(info.value).startswith(message + " (out_axes of "), info.value
    assert "for vmap)" in str(info.value)


def test_vmap_out_axes_out_of_range_inside_pmap() -> None:
    f = lamina.pmap(lamina.vmap(lambda x: x, out_axes=2))
    with pytest.raises(ValueError, match=r"^axis 2 is out of bounds for array of dimension 1 "
                                         r"\(out_axes of .* for vmap\)$"):
        f(jnp.ones((1, 3)))


def test_pmap_out_axes_out_of_range_still_raise() -> None:
    with pytest.raises(ValueError, match="out_axes entry 2"):
        lamina.pmap(lambda x: x, out_axes=2)(jnp.ones((1,)))


def test_in_range_out_axes_under_jit() -> None:
    out = lamina.jit(lamina.vmap(lambda x: x * 2, out_axes=-1))(jnp.ones((3, 4)))
    assert out.shape == (4, 3)
    assert float(out.sum()) == 24.0
