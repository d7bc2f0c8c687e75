"""pmap's values against numpy: maps, in_axes/out_axes, static arguments,
device subsets, donation, both shard layouts, and the errors that name the
argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_config import chunked_shards, chunked_shards_scope
from lamina_interpreters_pxla.sharding import NamedSharding, PartitionSpec, PmapSharding
from lamina_tracing_core import lax

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N,
                                reason="needs 8 devices: run with XLA_FLAGS="
                                       "--xla_force_host_platform_device_count=8")

X = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
Y = np.linspace(1.0, 2.0, N * 3, dtype=np.float32).reshape(N, 3)


@pytest.fixture(params=[True, False], ids=["chunked", "classic"])
def layout(request: Any) -> Any:
    with chunked_shards_scope(request.param):
        yield request.param


def test_chunked_is_the_default() -> None:
    assert chunked_shards() is True


def test_elementwise_map(layout: bool) -> None:
    out = pmap(lambda x, y: lax.sin(x) * y + 1.0)(X, Y)
    assert isinstance(out, Array) and out.shape == (N, 3)
    np.testing.assert_allclose(np.asarray(out), np.sin(X) * Y + 1.0, rtol=1e-6)


def test_pytree_arguments_and_results(layout: bool) -> None:
    def f(p: dict[str, Any], xs: list[Any]) -> Any:
        return {"sum": p["a"] + xs[0], "prod": (p["b"] * xs[1],)}

    out = pmap(f)({"a": X, "b": Y}, [Y, X])
    np.testing.assert_allclose(np.asarray(out["sum"]), X + Y)
    np.testing.assert_allclose(np.asarray(out["prod"][0]), X * Y)


def test_chunked_layout_keeps_rank() -> None:
    with chunked_shards_scope(True):
        out = pmap(lambda x: x * 2, axis_name="i")(np.ones((N, 100), np.float32))
    sharding = out.sharding
    assert isinstance(sharding, NamedSharding)
    assert sharding.mesh.axis_names == ("i",) and sharding.spec == PartitionSpec("i")
    assert [s.data.shape for s in out.addressable_shards] == [(1, 100)] * N
    assert [d.id for d in sharding.mesh.devices.flat] == [d.id for d in px.devices()[:N]]


def test_chunked_layout_names_anonymous_axis_pmap() -> None:
    with chunked_shards_scope(True):
        out = pmap(lambda x: x * 2)(X)
    assert out.sharding.spec == PartitionSpec("_pmap")


def test_classic_layout_drops_the_axis() -> None:
    with chunked_shards_scope(False):
        out = pmap(lambda x: x * 2)(np.ones((N, 100), np.float32))
    assert isinstance(out.sharding, PmapSharding)
    assert out.sharding.sharding_spec.chunked is False
    assert [s.data.shape for s in out.addressable_shards] == [(100,)] * N
    np.testing.assert_allclose(np.asarray(out), 2.0)


def test_chunked_output_feeds_device_put_without_copies() -> None:
    with chunked_shards_scope(True):
        out = pmap(lambda x: x + 1)(X)
    again = px.device_put(out, out.sharding)
    assert again._arr is out._arr or all(
        a._arr.unsafe_buffer_pointer() == b._arr.unsafe_buffer_pointer()
        for a, b in zip(again.addressable_shards, out.addressable_shards))


@pytest.mark.parametrize("chunked_in", [True, False])
@pytest.mark.parametrize("chunked_call", [True, False])
def test_outputs_of_either_layout_feed_either_layout(chunked_in: bool,
                                                     chunked_call: bool) -> None:
    with chunked_shards_scope(chunked_in):
        first = pmap(lambda x: x * 2)(X)
    with chunked_shards_scope(chunked_call):
        second = pmap(lambda x: x + 1)(first)
    np.testing.assert_allclose(np.asarray(second), X * 2 + 1)
    # the input is untouched
    np.testing.assert_allclose(np.asarray(first), X * 2)


def test_in_axes_and_out_axes(layout: bool) -> None:
    xt = np.ascontiguousarray(X.T)  # [3, N]
    out = pmap(lambda a, b: a * b, in_axes=(1, 0), out_axes=1)(xt, Y)
    assert out.shape == (3, N)
    np.testing.assert_allclose(np.asarray(out), xt * Y.T)


def test_negative_in_axes(layout: bool) -> None:
    xt = np.ascontiguousarray(X.T)
    out = pmap(lambda a: a * 2, in_axes=-1)(xt)
    np.testing.assert_allclose(np.asarray(out), X * 2)


def test_broadcast_arguments_and_unmapped_results(layout: bool) -> None:
    w = np.array([1.0, 2.0, 3.0], np.float32)

    def f(x: Any, w: Any) -> Any:
        total = lax.psum(x * w, "i")
        return x + w, total

    mapped, total = pmap(f, axis_name="i", in_axes=(0, None), out_axes=(0, None))(X, w)
    np.testing.assert_allclose(np.asarray(mapped), X + w)
    assert total.shape == (3,)
    np.testing.assert_allclose(np.asarray(total), (X * w).sum(0), rtol=1e-6)


def test_pytree_in_axes_prefix(layout: bool) -> None:
    def f(p: dict[str, Any]) -> Any:
        return p["mapped"] + p["shared"]

    shared = np.array([10.0, 20.0, 30.0], np.float32)
    out = pmap(f, in_axes=({"mapped": 0, "shared": None},))({"mapped": X, "shared": shared})
    np.testing.assert_allclose(np.asarray(out), X + shared)


def test_keyword_arguments_are_mapped_over_axis_zero(layout: bool) -> None:
    out = pmap(lambda x, *, y: x - y)(X, y=Y)
    np.testing.assert_allclose(np.asarray(out), X - Y)


def test_static_broadcasted_argnums(layout: bool) -> None:
    calls = []

    def f(x: Any, power: int, y: Any) -> Any:
        calls.append(power)
        out = x
        for _ in range(power - 1):
            out = out * x
        return out + y

    g = pmap(f, static_broadcasted_argnums=(1,), in_axes=(0, None, 0))
    np.testing.assert_allclose(np.asarray(g(X, 2, Y)), X ** 2 + Y, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g(X, 3, Y)), X ** 3 + Y, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g(X, 2, Y)), X ** 2 + Y, rtol=1e-6)
    assert calls == [2, 3]


def test_static_broadcasted_argnums_must_be_passed_positionally() -> None:
    g = pmap(lambda x, k: x * k, static_broadcasted_argnums=(1,))
    with pytest.raises(ValueError, match=r"pmapped function has static_broadcasted_argnums="
                                         r"\(1,\) but was called with only 1 positional "
                                         r"argument\. All static broadcasted arguments must "
                                         r"be passed positionally\."):
        g(X)


def test_unhashable_static_argument_is_an_error() -> None:
    g = pmap(lambda x, k: x, static_broadcasted_argnums=1)
    with pytest.raises(ValueError, match=r"Non-hashable static arguments.*(?s:.*)"
                                         r"static_broadcasted_argnums=\(1,\) must be hashable"):
        g(X, [1, 2])


def test_docstring_speaks_of_static_broadcasted_argnums() -> None:
    assert pmap.__doc__ is not None and "static_broadcasted_argnums" in pmap.__doc__
    assert "static_argnums" not in pmap.__doc__.replace("static_broadcasted_argnums", "")


def test_subset_of_devices(layout: bool) -> None:
    devices = px.devices()[2:6]
    out = pmap(lambda x: x + lax.axis_index("i").astype(np.float32), axis_name="i",
               devices=devices)(X[:4])
    np.testing.assert_allclose(np.asarray(out), X[:4] + np.arange(4, dtype=np.float32)[:, None])
    assert [d.id for d in out.sharding._device_assignment] == [d.id for d in devices]


def test_fewer_entries_than_devices_uses_the_first_devices() -> None:
    out = pmap(lambda x: x * 3)(X[:3])
    np.testing.assert_allclose(np.asarray(out), X[:3] * 3)
    assert {d.id for d in out.devices()} == {d.id for d in px.devices()[:3]}


def test_explicit_axis_size_without_mapped_arguments(layout: bool) -> None:
    out = pmap(lambda: lax.axis_index("i"), axis_name="i", axis_size=4)()
    np.testing.assert_array_equal(np.asarray(out), np.arange(4))


def test_donated_argument_is_consumed(layout: bool) -> None:
    a = pmap(lambda x: x * 2)(X)
    b = pmap(lambda x: x + 1, donate_argnums=0)(a)
    np.testing.assert_allclose(np.asarray(b), X * 2 + 1)
    assert a.is_deleted()
    with pytest.raises(Exception, match="deleted"):
        pmap(lambda x: x + 1)(a)


def test_donation_counts_positions_with_static_arguments() -> None:
    a = pmap(lambda x: x * 2)(X)
    b = pmap(lambda x: x * 3)(X)
    out = pmap(lambda k, x, y: x * k + y["v"], static_broadcasted_argnums=0,
               donate_argnums=2)(2.0, a, {"v": b})
    np.testing.assert_allclose(np.asarray(out), X * 4 + X * 3)
    assert not a.is_deleted() and b.is_deleted()


def test_the_layout_setting() -> None:
    from lamina_interpreters_pxla import pmap_config
    from lamina_interpreters_pxla.config import _parse_flag as parse
    assert parse("X", None, True) is True
    assert parse("X", "0", True) is False and parse("X", " Off ", True) is False
    assert parse("X", "yes", False) is True
    with pytest.raises(ValueError, match="LAMINA_PMAP_CHUNKED_SHARDS"):
        parse("LAMINA_PMAP_CHUNKED_SHARDS", "maybe", True)
    with pytest.raises(TypeError, match="must be a bool"):
        pmap_config.set_chunked_shards(1)  # type: ignore[arg-type]
    previous = pmap_config.set_chunked_shards(False)
    try:
        assert chunked_shards() is False
    finally:
        pmap_config.set_chunked_shards(previous)
    assert chunked_shards() is previous


def test_python_and_numpy_scalars_broadcast(layout: bool) -> None:
    out = pmap(lambda x, s, t: x * s + t, in_axes=(0, None, None))(X, 2.0, np.float32(1.0))
    np.testing.assert_allclose(np.asarray(out), X * 2 + 1)


def test_integer_and_boolean_values(layout: bool) -> None:
    xi = np.arange(N * 2, dtype=np.int32).reshape(N, 2)
    out_i, out_b = pmap(lambda a: (a * 3, a > 4))(xi)
    np.testing.assert_array_equal(np.asarray(out_i), xi * 3)
    np.testing.assert_array_equal(np.asarray(out_b), xi > 4)


def test_pmap_as_a_decorator_keeps_the_name() -> None:
    @pmap
    def double(x: Any) -> Any:
        """Doubles."""
        return x * 2

    assert double.__name__ == "double" and double.__doc__ == "Doubles."
    np.testing.assert_allclose(np.asarray(double(X)), X * 2)


# --- errors naming the argument -----------------------------------------------------------
def test_inconsistent_mapped_sizes_name_both_arguments() -> None:
    def f(x: Any, y: Any) -> Any:
        return x

    with pytest.raises(ValueError) as err:
        pmap(f)(X, {"hi": np.ones((4, 3), np.float32)})
    assert str(err.value) == ("pmap got inconsistent sizes for array axes to be mapped: the "
                              "argument y['hi'] has size 4 on axis 0, x has size 8")


def test_more_entries_than_devices() -> None:
    with pytest.raises(ValueError, match=r"compiling computation that requires 16 logical "
                                         r"devices, but only 8 XLA devices are available "
                                         r"\(num_replicas=16\)"):
        pmap(lambda x: x)(np.ones((16, 3), np.float32))


def test_more_entries_than_given_devices() -> None:
    with pytest.raises(ValueError, match="requires 4 logical devices, but only 2"):
        pmap(lambda x: x, devices=px.devices()[:2])(X[:4])


def test_in_axes_not_matching_the_arguments() -> None:
    with pytest.raises(ValueError, match=r"pmap in_axes specification must be a tree prefix"):
        pmap(lambda x: x, in_axes=({"a": 0},))(X)
    with pytest.raises(ValueError, match=r"pmap in_axes has a tuple of length 3, but the full "
                       r"pytree \(the tuple of arguments passed positionally\) has length 2"):
        pmap(lambda x, y: x, in_axes=(0, 0, 0))(X, Y)


def test_in_axes_beyond_the_rank_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"map its argument y along axis 2, .* is only 2"):
        pmap(lambda x, y: x, in_axes=(0, 2))(X, Y)


def test_bad_axis_specs() -> None:
    with pytest.raises(TypeError, match="pmap in_axes must be an int, None"):
        pmap(lambda x: x, in_axes="0")
    with pytest.raises(TypeError, match="pmap out_axes must be an int, None"):
        pmap(lambda x: x, out_axes=1.5)


def test_out_axes_beyond_the_rank_names_the_result(layout: bool) -> None:
    with pytest.raises(ValueError, match=r"out_axes entry 2 for result\['b'\]"):
        pmap(lambda x: {"a": x, "b": x.sum()}, out_axes={"a": 0, "b": 2})(X)


def test_no_mapped_argument_without_axis_size() -> None:
    with pytest.raises(ValueError, match="requires at least one argument with a mapped axis"):
        pmap(lambda x: x, in_axes=None)(X)


def test_axis_size_mismatch() -> None:
    with pytest.raises(ValueError, match="Specified axis_size 4 doesn't match received "
                                         "axis_size 8"):
        pmap(lambda x: x, axis_size=4)(X)


def test_empty_devices_is_an_error() -> None:
    with pytest.raises(ValueError, match="'devices' argument to pmap must be non-empty"):
        pmap(lambda x: x, devices=[])


def test_wrong_argument_type_names_the_argument() -> None:
    with pytest.raises(TypeError, match="not a valid lamina"):
        pmap(lambda x, y: x, in_axes=(0, None))(X, "a string")
