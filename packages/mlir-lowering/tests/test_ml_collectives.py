"""Collectives on 8 CPU devices: replica mode (pmap's ReplicaAxisContext,
nested axes, axis_index_groups) and SPMD mode (a ShardingAxisContext: the
per-device program inside a Shardy manual computation, or GSPMD's
full-to-shard custom calls)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from lamina_tracing_core import core
from lamina_tracing_core.lax import collectives as co
from lamina_tracing_core.lax import structural as st
from ml_build import JaxprBuilder
from ml_runner import run_replicas, run_spmd

import lamina_mlir_lowering as ml
from lamina_mlir_lowering import MeshShape, ReplicaAxisContext, ShardingAxisContext, ShardingSpec

F32 = np.float32
R = 8


@contextmanager
def axes(*env: tuple[str, int]) -> Iterator[None]:
    with core.extend_axis_env_nd(list(env)):
        yield


def _replica_module(build: Any, env: tuple[tuple[str, int], ...], shape: tuple[int, ...] = (3,),
                    dtype: Any = F32) -> ml.LoweringResult:
    b = JaxprBuilder("f", traced_for="pmap")
    x = b.arg(shape, dtype, "x")
    with axes(*env):
        outs = build(b, x)
    return ml.lower_jaxpr_to_module("pmap_f", b.build(outs), num_replicas=R,
                                    axis_context=ReplicaAxisContext(env))


def _per_replica(shape: tuple[int, ...] = (3,)) -> list[list[np.ndarray]]:
    return [[np.arange(np.prod(shape), dtype=F32).reshape(shape) + 10 * r] for r in range(R)]


def test_psum_pmax_pmin_over_one_axis() -> None:
    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        return [b.eqn(p, x, axes=("i",), axis_index_groups=None)
                for p in (co.psum_p, co.pmax_p, co.pmin_p)]

    res = _replica_module(build, (("i", R),))
    text = res.as_text()
    assert "stablehlo.all_reduce" in text and "replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>" in text
    ins = _per_replica()
    outs = run_replicas(res, ins)
    total = sum(a[0] for a in ins)
    for r in range(R):
        np.testing.assert_allclose(outs[r][0], total)
        np.testing.assert_allclose(outs[r][1], ins[-1][0])
        np.testing.assert_allclose(outs[r][2], ins[0][0])


def test_nested_axes_groups_and_axis_index() -> None:
    env = (("i", 2), ("j", 4))

    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        return [b.eqn(co.psum_p, x, axes=("j",), axis_index_groups=None),
                b.eqn(co.psum_p, x, axes=("i",), axis_index_groups=None),
                b.eqn(co.psum_p, x, axes=("j",), axis_index_groups=((0, 1), (2, 3))),
                b.eqn(co.axis_index_p, axis_name="i"),
                b.eqn(co.axis_index_p, axis_name="j"),
                b.eqn(co.axis_index_p, axis_name=("i", "j"))]

    res = _replica_module(build, env)
    text = res.as_text()
    assert "dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>" in text
    assert "dense<[[0, 4], [1, 5], [2, 6], [3, 7]]>" in text
    assert "dense<[[0, 1], [2, 3], [4, 5], [6, 7]]>" in text
    assert "stablehlo.replica_id" in text
    ins = _per_replica()
    outs = run_replicas(res, ins)
    for r in range(R):
        i, j = divmod(r, 4)
        np.testing.assert_allclose(outs[r][0], sum(ins[4 * i + k][0] for k in range(4)))
        np.testing.assert_allclose(outs[r][1], ins[j][0] + ins[4 + j][0])
        pair = [4 * i + (j // 2) * 2 + k for k in range(2)]
        np.testing.assert_allclose(outs[r][2], sum(ins[p][0] for p in pair))
        assert (outs[r][3], outs[r][4], outs[r][5]) == (i, j, r)


def test_all_gather_tiled_and_untiled() -> None:
    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        common = dict(axis_name=("i",), axis_index_groups=None, axis_size=R)
        return [b.eqn(co.all_gather_p, x, all_gather_dimension=0, tiled=False, **common),
                b.eqn(co.all_gather_p, x, all_gather_dimension=1, tiled=True, **common)]

    res = _replica_module(build, (("i", R),), shape=(2, 3))
    ins = _per_replica((2, 3))
    outs = run_replicas(res, ins)
    stacked = np.stack([a[0] for a in ins])
    for r in range(R):
        np.testing.assert_array_equal(outs[r][0], stacked)
        np.testing.assert_array_equal(outs[r][1], np.concatenate([a[0] for a in ins], axis=1))


def test_ppermute_rotates() -> None:
    perm = tuple((k, (k + 1) % R) for k in range(R))

    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        return [b.eqn(co.ppermute_p, x, axis_name=("i",), perm=perm)]

    res = _replica_module(build, (("i", R),))
    assert "stablehlo.collective_permute" in res.as_text()
    ins = _per_replica()
    outs = run_replicas(res, ins)
    for r in range(R):
        np.testing.assert_array_equal(outs[r][0], ins[(r - 1) % R][0])


def test_all_to_all_and_reduce_scatter() -> None:
    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        return [b.eqn(co.all_to_all_p, x, split_axis=0, concat_axis=1, axis_name=("i",),
                      axis_index_groups=None, tiled=True),
                b.eqn(co.reduce_scatter_p, x, scatter_dimension=0, axis_name=("i",),
                      axis_index_groups=None, axis_size=R, tiled=True)]

    res = _replica_module(build, (("i", R),), shape=(R, 2))
    ins = _per_replica((R, 2))
    outs = run_replicas(res, ins)
    total = sum(a[0] for a in ins)
    for r in range(R):
        # Block r of every device, concatenated along axis 1 in device order.
        np.testing.assert_array_equal(outs[r][0], np.concatenate([a[0][r:r + 1] for a in ins], 1))
        np.testing.assert_allclose(outs[r][1], total[r:r + 1])


def test_positional_psum_axes_reduce_locally() -> None:
    def build(b: JaxprBuilder, x: Any) -> list[Any]:
        return [b.eqn(co.psum_p, x, axes=(0, "i"), axis_index_groups=None)]

    res = _replica_module(build, (("i", R),), shape=(2, 3))
    ins = _per_replica((2, 3))
    outs = run_replicas(res, ins)
    np.testing.assert_allclose(outs[0][0], sum(a[0].sum(0) for a in ins))


def test_collective_without_axis_context_is_an_error() -> None:
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    with axes(("i", R)):
        y = b.eqn(co.psum_p, x, axes=("i",), axis_index_groups=None)
    with pytest.raises(ml.LoweringError, match="no axis context"):
        ml.lower_jaxpr_to_module("jit_f", b.build([y]))
    with pytest.raises(ml.LoweringError, match="unbound axis name: i "):
        ml.lower_jaxpr_to_module("jit_f", b.build([y]), num_replicas=R,
                                 axis_context=ReplicaAxisContext((("k", R),)))


MESH = MeshShape(("x", "y"), (2, 4))


def _spmd_module(fmt: str) -> ml.LoweringResult:
    b = JaxprBuilder("f")
    x = b.arg((1, 3), F32, "x")
    with axes(("x", 2), ("y", 4)):
        s_y = b.eqn(co.psum_p, x, axes=("y",), axis_index_groups=None)
        s_all = b.eqn(co.psum_p, x, axes=("x", "y"), axis_index_groups=None)
        ix = b.eqn(st.broadcast_in_dim_p, b.eqn(co.axis_index_p, axis_name="x"), shape=(1,),
                   broadcast_dimensions=(), sharding=None)
        iy = b.eqn(st.broadcast_in_dim_p, b.eqn(co.axis_index_p, axis_name="y"), shape=(1,),
                   broadcast_dimensions=(), sharding=None)
        g = b.eqn(co.all_gather_p, x, all_gather_dimension=0, axis_name=("y",),
                  axis_index_groups=None, axis_size=4, tiled=True)
        perm = tuple((k, (k + 1) % 4) for k in range(4))
        p = b.eqn(co.ppermute_p, x, axis_name=("y",), perm=perm)
    rows = ShardingSpec(MESH, (("x", "y"), ()))
    by_x = ShardingSpec(MESH, (("x",), ()))
    outs = [s_y, s_all, ix, iy, g, p]
    per_device = ShardingSpec(MESH, (("x", "y"),))
    out_specs = [rows, rows, per_device, per_device, by_x, rows]
    return ml.lower_jaxpr_to_module(
        "jit_f", b.build(outs), num_partitions=8, sharding_format=fmt,
        axis_context=ShardingAxisContext(MESH), arg_shardings=(rows,),
        result_shardings=tuple(out_specs))


@pytest.mark.parametrize("fmt", ["shardy", "gspmd"])
def test_spmd_manual_collectives(fmt: str) -> None:
    res = _spmd_module(fmt)
    text = res.as_text()
    assert "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>" in text
    assert "use_global_device_ids" in text
    assert "stablehlo.partition_id" in text
    if fmt == "shardy":
        assert "sdy.manual_computation" in text
    else:
        assert "SPMDFullToShardShape" in text and "SPMDShardToFullShape" in text
    assert res.in_avals[0].shape == (8, 3)          # global = per-device x 8 rows
    x = np.arange(24, dtype=F32).reshape(8, 3)
    s_y, s_all, ix, iy, g, p = run_spmd(res, x)
    for dev in range(8):
        gx, gy = divmod(dev, 4)
        group = [4 * gx + k for k in range(4)]
        np.testing.assert_allclose(s_y[dev], x[group].sum(0))
        np.testing.assert_allclose(s_all[dev], x.sum(0))
        np.testing.assert_array_equal(p[dev], x[4 * gx + (gy - 1) % 4])
    np.testing.assert_array_equal(ix, np.arange(8) // 4)
    np.testing.assert_array_equal(iy, np.arange(8) % 4)
    np.testing.assert_allclose(g[:4], x[:4])


def test_replica_axis_context_validation() -> None:
    ctx = ReplicaAxisContext((("i", 2), ("j", 4)))
    assert ctx.num_replicas == 8
    assert ctx.groups("j") == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert ctx.groups(("i", "j")) == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert ctx.axis_index_divisor("i") == 4 and ctx.axis_size("j") == 4
    outer = ReplicaAxisContext((("i", 4),), num_replicas=8)
    assert outer.groups("i") == ((0, 2, 4, 6), (1, 3, 5, 7))   # extra replicas innermost
    assert outer.axis_index_divisor("i") == 2
    with pytest.raises(ValueError, match="not a multiple"):
        ReplicaAxisContext((("i", 3),), num_replicas=8)
    with pytest.raises(ml.UnboundAxisError):
        ctx.groups("k")
    sctx = ShardingAxisContext(MESH, manual_axes=("y",))
    assert sctx.groups("y") == ((0, 1, 2, 3), (4, 5, 6, 7))
    with pytest.raises(ml.UnboundAxisError):
        sctx.groups("x")
