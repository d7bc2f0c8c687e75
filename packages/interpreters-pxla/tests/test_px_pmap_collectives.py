"""Collectives inside pmap, over one or several named axes and nested pmaps,
against numpy; named-axis effects and unbound-axis errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla.pmap import pmap, pmap_p
from lamina_interpreters_pxla.pmap_config import chunked_shards_scope
from lamina_tracing_core import api, lax
from lamina_tracing_core.effects import NamedAxisEffect
from lamina_tracing_core.errors import UnboundAxisNameError

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N,
                                reason="needs 8 devices: run with XLA_FLAGS="
                                       "--xla_force_host_platform_device_count=8")

X = np.arange(N * 3, dtype=np.float32).reshape(N, 3) - 7.0


@pytest.fixture(params=[True, False], ids=["chunked", "classic"])
def layout(request: Any) -> Any:
    with chunked_shards_scope(request.param):
        yield request.param


def pm(f: Any, **kw: Any) -> Any:
    return pmap(f, axis_name="i", **kw)


def test_psum_pmean_pmax_pmin(layout: bool) -> None:
    out = pm(lambda x: (lax.psum(x, "i"), lax.pmean(x, "i"), lax.pmax(x, "i"),
                        lax.pmin(x, "i")))(X)
    for got, want in zip(out, (X.sum(0), X.mean(0), X.max(0), X.min(0))):
        np.testing.assert_allclose(np.asarray(got), np.broadcast_to(want, X.shape), rtol=1e-6)


def test_psum_of_a_pytree_and_of_integers(layout: bool) -> None:
    xi = np.arange(N, dtype=np.int32)
    out = pm(lambda a, b: lax.psum({"a": a, "b": b}, "i"))(X, xi)
    np.testing.assert_allclose(np.asarray(out["a"]), np.broadcast_to(X.sum(0), X.shape))
    np.testing.assert_array_equal(np.asarray(out["b"]), np.full(N, xi.sum()))


def test_psum_with_axis_index_groups(layout: bool) -> None:
    groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
    out = pm(lambda x: lax.psum(x, "i", axis_index_groups=groups))(X)
    want = np.concatenate([np.broadcast_to(X[:4].sum(0), (4, 3)),
                           np.broadcast_to(X[4:].sum(0), (4, 3))])
    np.testing.assert_allclose(np.asarray(out), want)


def test_psum_of_a_constant_is_the_axis_size(layout: bool) -> None:
    out = pm(lambda x: x * 0 + lax.psum(1, "i"))(X)
    np.testing.assert_allclose(np.asarray(out), np.full(X.shape, N))


def test_axis_index(layout: bool) -> None:
    out = pm(lambda x: lax.axis_index("i"))(X)
    np.testing.assert_array_equal(np.asarray(out), np.arange(N))


@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (0, True)])
def test_all_gather(layout: bool, axis: int, tiled: bool) -> None:
    out = pm(lambda x: lax.all_gather(x, "i", axis=axis, tiled=tiled))(X)
    if tiled:
        want = X.reshape(-1)
    else:
        want = np.moveaxis(X, 0, axis)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(want, (N,) + want.shape))


def test_ppermute_ring(layout: bool) -> None:
    perm = [(j, (j + 1) % N) for j in range(N)]
    out = pm(lambda x: lax.ppermute(x, "i", perm))(X)
    np.testing.assert_allclose(np.asarray(out), np.roll(X, 1, axis=0))


def test_ppermute_partial_permutation_gives_zeros(layout: bool) -> None:
    out = pm(lambda x: lax.ppermute(x, "i", [(0, 1)]))(X)
    want = np.zeros_like(X)
    want[1] = X[0]
    np.testing.assert_allclose(np.asarray(out), want)


def test_pshuffle(layout: bool) -> None:
    perm = [3, 0, 7, 1, 2, 6, 4, 5]
    out = pm(lambda x: lax.pshuffle(x, "i", perm))(X)
    np.testing.assert_allclose(np.asarray(out), X[perm])


def test_all_to_all(layout: bool) -> None:
    a = np.arange(N * N * 2, dtype=np.float32).reshape(N, N, 2)
    out = pm(lambda x: lax.all_to_all(x, "i", 0, 0))(a)
    np.testing.assert_allclose(np.asarray(out), a.transpose(1, 0, 2))


def test_psum_scatter(layout: bool) -> None:
    a = np.arange(N * N, dtype=np.float32).reshape(N, N)
    out = pm(lambda x: lax.psum_scatter(x, "i", scatter_dimension=0, tiled=True))(a)
    np.testing.assert_allclose(np.asarray(out), a.sum(0)[:, None])


# --- nested pmaps: several named axes --------------------------------------------------------
XS = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


def nested(f: Any) -> Any:
    return pmap(pmap(f, axis_name="j"), axis_name="i")


def test_nested_pmap_axis_indices_and_sums(layout: bool) -> None:
    def f(v: Any) -> Any:
        i = lax.axis_index("i").astype(np.float32)
        j = lax.axis_index("j").astype(np.float32)
        return lax.psum(v, "j") + 100 * i + 10 * j, lax.psum(v, "i"), lax.psum(v, ("i", "j"))

    by_j, by_i, total = nested(f)(XS)
    ij = 100 * np.arange(2)[:, None, None] + 10 * np.arange(4)[None, :, None]
    np.testing.assert_allclose(np.asarray(by_j), XS.sum(1, keepdims=True) + ij)
    np.testing.assert_allclose(np.asarray(by_i), np.broadcast_to(XS.sum(0), XS.shape))
    np.testing.assert_allclose(np.asarray(total), np.broadcast_to(XS.sum((0, 1)), XS.shape))


def test_nested_pmap_multi_axis_index_and_gather(layout: bool) -> None:
    out = nested(lambda v: (lax.axis_index(("i", "j")), lax.all_gather(v, "j")))(XS)
    np.testing.assert_array_equal(np.asarray(out[0]), np.arange(8).reshape(2, 4))
    np.testing.assert_allclose(np.asarray(out[1]),
                               np.broadcast_to(XS[:, None], (2, 4, 4, 3)))


def test_nested_pmap_with_broadcast_inner_argument(layout: bool) -> None:
    w = np.array([1.0, 2.0, 3.0], np.float32)
    inner = pmap(lambda v, w: v * w, axis_name="j", in_axes=(0, None))
    out = pmap(lambda v: inner(v, w), axis_name="i")(XS)
    np.testing.assert_allclose(np.asarray(out), XS * w)


def test_nested_pmap_inner_out_axes(layout: bool) -> None:
    inner = pmap(lambda v: v * 2, axis_name="j", out_axes=1)
    out = pmap(inner, axis_name="i")(XS)
    np.testing.assert_allclose(np.asarray(out), XS.transpose(0, 2, 1) * 2)


def test_nested_pmap_needs_the_product_of_sizes() -> None:
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        nested(lambda v: v)(np.ones((4, 4, 2), np.float32))


# --- named-axis effects and unbound axes --------------------------------------------------------
def test_pmap_removes_its_axis_from_the_effects() -> None:
    closed = api.make_jaxpr(pm(lambda x: lax.psum(x, "i")))(X)
    eqn, = closed.jaxpr.eqns
    assert eqn.primitive is pmap_p
    assert NamedAxisEffect("i") in eqn.params["call_jaxpr"].effects
    assert NamedAxisEffect("i") not in eqn.effects
    assert not closed.jaxpr.effects


def test_inner_pmap_exposes_the_outer_axis() -> None:
    closed = api.make_jaxpr(nested(lambda v: lax.psum(v, ("i", "j"))))(XS)
    outer, = closed.jaxpr.eqns
    inner, = outer.params["call_jaxpr"].eqns
    assert inner.effects == frozenset({NamedAxisEffect("i")})
    assert not outer.effects


def test_unbound_axis_is_a_trace_time_error_naming_it() -> None:
    with pytest.raises(UnboundAxisNameError, match=r"unbound axis name: j\..*bound here are 'i'"):
        pm(lambda x: lax.psum(x, "j"))(X)


def test_collective_without_axis_name_is_unbound() -> None:
    with pytest.raises(UnboundAxisNameError, match=r"unbound axis name: i\."):
        pmap(lambda x: lax.psum(x, "i"))(X)
