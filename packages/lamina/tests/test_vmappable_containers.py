"""``batching.register_vmappable``: a container type ``vmap`` takes and
returns whole, mapping the arrays it holds along the axes its spec names.
The expected values are JAX 0.10.2's for the same programs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lamina as lx
import numpy as np
import pytest
from lamina.interpreters import batching


class Padded:
    """An array with a static valid length (not a pytree: vmap sees it whole)."""

    def __init__(self, data: Any, length: int):
        self.data, self.length = data, length


class PaddedAxis:
    """The in_axes/out_axes entry of a ``Padded``: the axis of its data."""

    def __init__(self, axis: int):
        self.axis = axis


def _axis(spec: Any) -> Any:
    return spec.axis if isinstance(spec, PaddedAxis) else spec


def _to_elt(cont: Any, get_idx: Any, x: Padded, spec: Any) -> Padded:
    return Padded(cont(x.data, _axis(spec)), x.length)


def _from_elt(cont: Any, size: int, elt: Padded, spec: Any) -> Padded:
    return Padded(cont(size, elt.data, _axis(spec)), elt.length)


@pytest.fixture
def padded() -> Iterator[None]:
    batching.register_vmappable(Padded, PaddedAxis, int, _to_elt, _from_elt, None)
    yield
    batching.unregister_vmappable(Padded)


def _scaled(q: Padded, y: Any) -> tuple[Padded, Any]:
    assert q.data.shape == (3,), q.data.shape
    return Padded(q.data * y, q.length + 1), q.data.sum()


@pytest.mark.usefixtures("padded")
def test_container_in_and_out_with_its_specs() -> None:
    p = Padded(np.arange(12.0, dtype=np.float32).reshape(3, 4), 4)
    out, sums = lx.vmap(_scaled, in_axes=(PaddedAxis(1), None),
                        out_axes=(PaddedAxis(1), 0), axis_size=4)(p, 2.0)
    assert isinstance(out, Padded) and out.length == 5
    np.testing.assert_array_equal(out.data, [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]])
    np.testing.assert_array_equal(sums, [12, 15, 18, 21])
    # out_axes=0 (an int) for the container: its data batched at the front
    out0, _ = lx.vmap(_scaled, in_axes=(PaddedAxis(1), None), axis_size=4)(p, 2.0)
    assert out0.data.shape == (4, 3)
    # an int in_axes entry is handed to to_elt as is
    np.testing.assert_array_equal(
        lx.vmap(lambda q: q.data, in_axes=(0,), axis_size=3)(p), p.data)


@pytest.mark.usefixtures("padded")
def test_container_size_from_other_arguments_under_jit_and_grad() -> None:
    p = Padded(np.arange(6.0, dtype=np.float32).reshape(2, 3), 3)
    w = np.float32([1.0, 2.0, 3.0])

    def weighted(q: Padded, v: Any) -> Any:
        return (q.data * v).sum()

    f = lx.vmap(weighted, in_axes=(PaddedAxis(1), 0))
    # (a Padded is no pytree: jit takes it by closure, as in JAX)
    np.testing.assert_allclose(lx.jit(lambda v: f(p, v))(w), [3.0, 10.0, 21.0])
    np.testing.assert_allclose(lx.grad(lambda v: f(p, v).sum())(w), [3.0, 5.0, 7.0])


@pytest.mark.usefixtures("padded")
def test_nested_containers() -> None:
    class Boxed:
        def __init__(self, inner: Padded):
            self.inner = inner

    def to_elt(cont: Any, get_idx: Any, x: Boxed, spec: Any) -> Boxed:
        return Boxed(cont(x.inner, spec))

    def from_elt(cont: Any, size: int, elt: Boxed, spec: Any) -> Boxed:
        return Boxed(cont(size, elt.inner, spec))

    batching.register_vmappable(Boxed, PaddedAxis, int, to_elt, from_elt, None)
    try:
        b = Boxed(Padded(np.ones((2, 3), np.float32), 2))
        out = lx.vmap(lambda x: Boxed(Padded(x.inner.data * 2, 0)), in_axes=(PaddedAxis(0),),
                      out_axes=PaddedAxis(1), axis_size=2)(b)
        assert isinstance(out, Boxed) and isinstance(out.inner, Padded)
        np.testing.assert_array_equal(out.inner.data, 2 * np.ones((3, 2)))
    finally:
        batching.unregister_vmappable(Boxed)


class Indexed:
    def __init__(self, data: Any, index: Any = None):
        self.data, self.index = data, index


def test_get_idx_is_the_example_index() -> None:
    def to_elt(cont: Any, get_idx: Any, x: Indexed, spec: Any) -> Indexed:
        return Indexed(cont(x.data, spec), get_idx())

    def from_elt(cont: Any, size: int, elt: Indexed, spec: Any) -> Indexed:
        return Indexed(cont(size, elt.data, spec))

    batching.register_vmappable(Indexed, PaddedAxis, int, to_elt, from_elt, None)
    try:
        x = Indexed(np.full((3, 2), 10.0, np.float32))
        out = lx.jit(lambda: lx.vmap(lambda e: e.data.sum() + e.index, in_axes=(0,),
                                     axis_size=3)(x))()
        np.testing.assert_allclose(out, [20.0, 21.0, 22.0])
    finally:
        batching.unregister_vmappable(Indexed)


@pytest.mark.usefixtures("padded")
def test_errors_name_the_missing_size_and_a_part_of_the_wrong_size() -> None:
    p = Padded(np.ones((3, 4), np.float32), 4)
    # JAX's message: a container does not give the size of the mapped axis
    with pytest.raises(ValueError, match="vmap must have at least one non-None value in "
                                         "in_axes or axis_size must be specified"):
        lx.vmap(_scaled, in_axes=(PaddedAxis(1), None))(p, 2.0)
    # (JAX fails at run time here)
    with pytest.raises(ValueError, match=r"maps a part of shape \(3, 4\) along axis 1, but "
                                         r"the mapped axis has size 5"):
        lx.vmap(_scaled, in_axes=(PaddedAxis(1), None), axis_size=5)(p, 2.0)


def test_unregistered_containers_are_not_vmappable() -> None:
    # (JAX's unregister_vmappable does nothing; lamina's undoes the registration)
    batching.register_vmappable(Padded, PaddedAxis, int, _to_elt, _from_elt, None)
    batching.unregister_vmappable(Padded)
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None"):
        lx.vmap(lambda q: q, in_axes=(PaddedAxis(0),))(Padded(np.ones(2), 2))
