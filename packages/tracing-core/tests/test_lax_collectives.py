"""Collectives over named axes: effects, unbound-axis errors, abstract eval
under an axis environment, vmap over the named axis (the collective becomes
an array operation over the batch), and their transposes under vmap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from numpy_reference import assert_close

from lamina_tracing_core import api
from lamina_tracing_core import lax as lx
from lamina_tracing_core.effects import NamedAxisEffect
from lamina_tracing_core.errors import UnboundAxisNameError


RNG = np.random.RandomState(5)


def f32(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape).astype(np.float32)


def vmap_i(f: Any, **kw: Any) -> Any:
    return api.vmap(f, axis_name="i", **kw)


def test_effects_recorded_and_propagated() -> None:
    x = f32(4, 3)
    closed = api.make_jaxpr(lambda a: lx.psum(a, "i"), axis_env=[("i", 4)])(x)
    eqn = closed.eqns[0]
    assert eqn.primitive is lx.psum_p
    assert eqn.params == {"axes": ("i",), "axis_index_groups": None}
    assert NamedAxisEffect("i") in eqn.effects
    assert NamedAxisEffect("i") in closed.effects
    closed = api.make_jaxpr(lambda a: lx.all_gather(a, ("i", "j"), tiled=True),
                            axis_env=[("i", 2), ("j", 3)])(x)
    eqn = closed.eqns[0]
    assert eqn.params == {"all_gather_dimension": 0, "axis_name": ("i", "j"),
                          "axis_index_groups": None, "axis_size": 6, "tiled": True}
    assert closed.out_avals[0].shape == (24, 3)
    assert eqn.effects >= {NamedAxisEffect("i"), NamedAxisEffect("j")}


def test_unbound_axis_is_an_error() -> None:
    x = f32(3)
    for fun in (lambda a: lx.psum(a, "k"), lambda a: lx.pmax(a, "k"),
                lambda a: lx.ppermute(a, "k", [(0, 1)]), lambda a: lx.axis_index("k")):
        with pytest.raises(UnboundAxisNameError, match="'k'"):
            api.make_jaxpr(fun)(x)
    with pytest.raises(UnboundAxisNameError, match="'k'"):
        api.make_jaxpr(lambda a: lx.all_gather(a, "k"))(x)


def test_abstract_shapes_under_axis_env() -> None:
    x = f32(4, 6)
    env = [("i", 2)]
    shapes = api.make_jaxpr(lambda a: (lx.all_gather(a, "i"), lx.all_gather(a, "i", axis=1),
                                       lx.psum_scatter(a, "i", scatter_dimension=1, tiled=True),
                                       lx.all_to_all(a, "i", 1, 0, tiled=True),
                                       lx.axis_index("i"), lx.pmean(a, "i")),
                            axis_env=env)(x).out_avals
    assert [s.shape for s in shapes] == [(2, 4, 6), (4, 2, 6), (4, 3), (8, 3), (), (4, 6)]
    assert shapes[4].dtype == np.int32
    with pytest.raises(ValueError, match="must match shard count"):
        api.make_jaxpr(lambda a: lx.psum_scatter(a, "i"), axis_env=env)(x)
    with pytest.raises(ValueError, match="all_to_all requires the size"):
        api.make_jaxpr(lambda a: lx.all_to_all(a, "i", 1, 0), axis_env=env)(x)
    with pytest.raises(ValueError, match="sources and destinations must be unique"):
        api.make_jaxpr(lambda a: lx.ppermute(a, "i", [(0, 1), (1, 1)]), axis_env=env)(x)


def test_psum_pmax_pmin_pmean_under_vmap() -> None:
    x = f32(4, 3)
    assert_close(vmap_i(lambda a: lx.psum(a, "i"))(x), np.broadcast_to(x.sum(0), (4, 3)),
                 rtol=1e-6)
    assert_close(vmap_i(lambda a: lx.pmax(a, "i"))(x), np.broadcast_to(x.max(0), (4, 3)))
    assert_close(vmap_i(lambda a: lx.pmin(a, "i"))(x), np.broadcast_to(x.min(0), (4, 3)))
    assert_close(vmap_i(lambda a: lx.pmean(a, "i"))(x), np.broadcast_to(x.mean(0), (4, 3)),
                 rtol=1e-6)
    # An unbatched value summed over the axis is multiplied by its size.
    assert_close(vmap_i(lambda a: lx.psum(np.float32(2), "i"), in_axes=0)(x),
                 np.full((4,), 8, np.float32))
    assert_close(vmap_i(lambda a: lx.psum(1, "i"))(x), np.full((4,), 4, np.int32))
    # Batched along a different dim than 0, and a pytree.
    out = vmap_i(lambda a: lx.psum({"a": a, "b": a * 2}, "i"), in_axes=1)(x)
    assert_close(out["a"], np.broadcast_to(x.sum(1), (3, 4)), rtol=1e-6)
    # Booleans are summed as int32.
    b = np.array([True, False, True])
    assert_close(vmap_i(lambda a: lx.psum(a, "i"))(b), np.full((3,), 2, np.int32))


def test_nested_axes() -> None:
    x = f32(2, 3, 4)
    f = api.vmap(api.vmap(lambda a: lx.psum(a, ("i", "j")), axis_name="j"), axis_name="i")
    assert_close(f(x), np.broadcast_to(x.sum((0, 1)), x.shape), rtol=1e-5)
    g = api.vmap(api.vmap(lambda a: lx.psum(a, "i"), axis_name="j"), axis_name="i")
    assert_close(g(x), np.broadcast_to(x.sum(0), x.shape), rtol=1e-5)
    idx = api.vmap(api.vmap(lambda a: lx.axis_index(("i", "j")), axis_name="j"),
                   axis_name="i")(x)
    assert_close(idx, np.arange(6, dtype=np.int32).reshape(2, 3))


def test_all_gather_and_psum_scatter_under_vmap() -> None:
    x = f32(3, 2)
    assert_close(vmap_i(lambda a: lx.all_gather(a, "i"))(x), np.broadcast_to(x, (3, 3, 2)))
    tiled = vmap_i(lambda a: lx.all_gather(a, "i", tiled=True))(x)
    assert_close(tiled, np.broadcast_to(x.reshape(6), (3, 6)))
    ax1 = vmap_i(lambda a: lx.all_gather(a, "i", axis=1))(x)
    assert_close(ax1, np.broadcast_to(x.T, (3, 2, 3)))
    y = f32(3, 3, 2)
    assert_close(vmap_i(lambda a: lx.psum_scatter(a, "i"))(y), y.sum(0), rtol=1e-6)
    z = f32(3, 6)
    tiled_rs = vmap_i(lambda a: lx.psum_scatter(a, "i", tiled=True))(z)
    assert_close(tiled_rs, z.sum(0).reshape(3, 2), rtol=1e-6)


def test_ppermute_pshuffle_all_to_all_axis_index_under_vmap() -> None:
    x = f32(3, 2)
    perm = [(0, 1), (1, 2), (2, 0)]
    assert_close(vmap_i(lambda a: lx.ppermute(a, "i", perm))(x), x[[2, 0, 1]])
    assert_close(vmap_i(lambda a: lx.pshuffle(a, "i", [2, 0, 1]))(x), x[[2, 0, 1]])
    assert_close(vmap_i(lambda a: lx.axis_index("i"))(x), np.arange(3, dtype=np.int32))
    y = f32(3, 3, 4)
    out = vmap_i(lambda a: lx.all_to_all(a, "i", 0, 0))(y)
    assert_close(out, np.swapaxes(y, 0, 1))
    out = vmap_i(lambda a: lx.all_to_all(a, "i", 0, 1))(y)
    assert_close(out, np.transpose(y, (1, 2, 0)))


def test_collective_transposes_under_vmap() -> None:
    x = f32(4)
    # d/dx_i of psum(x) * x_i, with psum's transpose being psum: 2 * sum(x).
    g = vmap_i(api.grad(lambda a: lx.psum(a, "i") * a))(x)
    assert_close(g, np.full(4, 2 * x.sum(), np.float32), rtol=1e-5)
    w = f32(4)
    g = vmap_i(api.grad(lambda a: (lx.all_gather(a, "i") * w).sum()))(x)
    assert_close(g, 4 * w, rtol=1e-5)
    mine = lambda: lx.dynamic_index_in_dim(w, lx.axis_index("i"), keepdims=False)  # noqa
    # Instance j receives x[j-1], so d(sum_j x[j-1] w[j])/dx[i] = w[i+1].
    g = vmap_i(api.grad(lambda a: lx.ppermute(a, "i", [(0, 1), (1, 2), (2, 3), (3, 0)])
                        * mine()))(x)
    assert_close(g, w[[1, 2, 3, 0]])
    y = f32(4, 4)
    g = vmap_i(api.grad(lambda a: (lx.psum_scatter(a, "i") * 3.0)))(y)
    assert_close(g, np.full((4, 4), 3.0, np.float32) * 1.0, rtol=1e-6)
    g = vmap_i(api.grad(lambda a: (lx.all_to_all(a, "i", 0, 0) * w).sum()))(y)
    assert_close(g, np.broadcast_to(w[:, None], (4, 4)))


def test_collective_jvp_under_vmap() -> None:
    x, t = f32(3, 2), f32(3, 2)
    out, tan = vmap_i(lambda a, b: api.jvp(lambda c: lx.psum(c, "i"), (a,), (b,)))(x, t)
    assert_close(tan, np.broadcast_to(t.sum(0), (3, 2)), rtol=1e-6)
