"""Shardings: meshes, partition specs, HLO forms, index maps and errors."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import sharding as sh
from lamina_interpreters_pxla._jaxlib import xc
from lamina_interpreters_pxla.sharding import (
    UNCONSTRAINED,
    GSPMDSharding,
    Mesh,
    NamedSharding,
    P,
    PartitionSpec,
    PmapSharding,
    PmapShardingSpec,
    ShardingError,
    SingleDeviceSharding,
)

pytestmark = pytest.mark.skipif(px.device_count() < 8, reason="needs 8 CPU devices")


@pytest.fixture
def mesh() -> Mesh:
    return Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))


# --- PartitionSpec -------------------------------------------------------------
def test_partition_spec_is_a_tuple() -> None:
    spec = P("x", None, ("y", "z"))
    assert isinstance(spec, tuple) and len(spec) == 3
    assert spec == ("x", None, ("y", "z"))
    assert P is PartitionSpec
    assert repr(P("x")) == "P('x',)"
    assert repr(P()) == "P()"
    assert repr(P(None, ("x", "y"))) == "P(None, ('x', 'y'))"
    assert P.UNCONSTRAINED is UNCONSTRAINED and repr(UNCONSTRAINED) == "UNCONSTRAINED"
    assert pickle.loads(pickle.dumps(P("x", None))) == P("x", None)
    assert hash(P("x")) == hash(P("x"))
    with pytest.raises(TypeError, match="entry 1 is 3"):
        P("x", 3)


# --- Mesh ------------------------------------------------------------------------
def test_mesh_basics(mesh: Mesh) -> None:
    assert mesh.shape == {"x": 2, "y": 4}
    assert mesh.axis_sizes == (2, 4) and mesh.size == 8
    # JAX 0.10.2's repr and str
    assert repr(mesh) == "Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), axis_types=(Auto, Auto))"
    assert str(mesh) == "Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))"
    assert repr(mesh.abstract_mesh) == ("AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), "
                                        "device_kind=cpu, num_cores=None, platform=cpu)")
    assert mesh.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert mesh == Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y"))
    assert hash(mesh) == hash(Mesh(np.array(px.devices()).reshape(2, 4), ("x", "y")))
    assert mesh != Mesh(np.array(px.devices()).reshape(2, 4), ("a", "b"))
    assert mesh.local_devices == px.devices()
    assert not mesh.is_multi_process


def test_mesh_errors() -> None:
    devs = px.devices()
    with pytest.raises(ShardingError, match="2 dimensions .* 1 axis names"):
        Mesh(np.array(devs).reshape(2, 4), ("x",))
    with pytest.raises(ShardingError, match="distinct"):
        Mesh(np.array(devs).reshape(2, 4), ("x", "x"))
    with pytest.raises(ShardingError, match="more than once"):
        Mesh(np.array([devs[0], devs[0]]), ("x",))


def test_mesh_context_resolves_bare_specs(mesh: Mesh) -> None:
    assert sh.get_current_mesh() is None
    with mesh:
        assert sh.get_current_mesh() is mesh
        assert sh.resolve_partition_spec(P("x")) == NamedSharding(mesh, P("x"))
        other = Mesh(np.array(px.devices()[:2]), ("z",))
        with other:
            assert sh.get_current_mesh() is other
        assert sh.get_current_mesh() is mesh
    assert sh.get_current_mesh() is None
    with pytest.raises(ShardingError, match="needs a mesh"):
        sh.resolve_partition_spec(P("x"))


# --- NamedSharding -----------------------------------------------------------------
# The HLO shardings JAX 0.10 computes for the same mesh and specs.
JAX_HLO = {
    P("x", "y"): "{devices=[2,4]<=[8]}",
    P("x"): "{devices=[2,1,4]<=[8] last_tile_dim_replicate}",
    P("y"): "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
    P(("y", "x")): "{devices=[8,1]<=[2,4]T(1,0)}",
    P(None, "y"): "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
    P(): "{replicated}",
}


@pytest.mark.parametrize("spec", list(JAX_HLO))
def test_hlo_sharding_matches_jax(mesh: Mesh, spec: PartitionSpec) -> None:
    s = NamedSharding(mesh, spec)
    assert s.hlo_sharding_string(2) == JAX_HLO[spec]
    assert str(s._to_xla_hlo_sharding(2)) == JAX_HLO[spec]


def test_named_sharding_repr_eq_hash(mesh: Mesh) -> None:
    s = NamedSharding(mesh, P("x"))
    assert repr(s) == ("NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), "
                       "spec=P('x',), "
                       "memory_kind=device)")
    one_axis = NamedSharding(Mesh(np.array(px.devices()), ("x",)), P("x"))
    assert repr(one_axis) == ("NamedSharding(mesh=Mesh('x': 8, axis_types=(Auto,)), spec=P('x',), "
                              "memory_kind=device)")
    assert s == NamedSharding(mesh, P("x")) and hash(s) == hash(NamedSharding(mesh, P("x")))
    assert s != NamedSharding(mesh, P("y"))
    assert s != NamedSharding(mesh, P("x"), memory_kind="pinned_host")
    assert s.memory_kind == "device"
    assert s.with_memory_kind("pinned_host").memory_kind == "pinned_host"
    assert s.num_devices == 8 and s.device_set == set(px.devices())
    assert s._device_assignment == tuple(px.devices())
    assert s.addressable_devices == set(px.devices())
    assert s.is_fully_addressable and not s.is_fully_replicated
    assert NamedSharding(mesh, P()).is_fully_replicated
    assert NamedSharding(mesh, P(None, None)).is_fully_replicated


def test_named_sharding_errors(mesh: Mesh) -> None:
    with pytest.raises(ShardingError, match="Resource axis: z .* not found in mesh"):
        NamedSharding(mesh, P("z"))
    with pytest.raises(sh.DuplicateSpecError, match="duplicate entries for `x`"):
        NamedSharding(mesh, P("x", "x"))
    with pytest.raises(sh.DuplicateSpecError):
        NamedSharding(mesh, P(("x", "y"), "y"))
    s = NamedSharding(mesh, P("x", "y"))
    with pytest.raises(ShardingError, match="rank at least 2.*rank 1"):
        s.shard_shape((8,))
    with pytest.raises(ShardingError, match="partitioned 2 times.*dimension size is 3"):
        s.shard_shape((3, 8))
    with pytest.raises(TypeError, match="lamina Mesh"):
        NamedSharding("mesh", P())  # type: ignore[arg-type]


def test_devices_indices_map_and_shard_shape(mesh: Mesh) -> None:
    s = NamedSharding(mesh, P("x"))
    indices = s.devices_indices_map((4, 4))
    devs = px.devices()
    for d in devs[:4]:
        assert indices[d] == (slice(0, 2), slice(None))
    for d in devs[4:]:
        assert indices[d] == (slice(2, 4), slice(None))
    assert s.shard_shape((4, 4)) == (2, 4)
    s2 = NamedSharding(mesh, P("y", "x"))
    idx2 = s2.devices_indices_map((8, 4))
    # device at mesh position (x=1, y=2) is devs[6]: rows block 2, cols block 1
    assert idx2[devs[6]] == (slice(4, 6), slice(2, 4))
    assert s2.shard_shape((8, 4)) == (2, 2)
    replica = sh.indices_to_shard_ids(indices)
    assert [replica[d] for d in devs] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_unconstrained_is_unsplit_for_placement(mesh: Mesh) -> None:
    s = NamedSharding(mesh, P(UNCONSTRAINED, "y"))
    assert s.shard_shape((4, 8)) == (4, 2)
    assert s.to_sharding_spec(2).dims == ((), ("y",))


def test_is_equivalent_to(mesh: Mesh) -> None:
    named = NamedSharding(mesh, P("x", "y"))
    gspmd = GSPMDSharding(px.devices(), xc.HloSharding.iota_tile([2, 4]))
    assert named.is_equivalent_to(gspmd, 2) and gspmd.is_equivalent_to(named, 2)
    assert named != gspmd
    assert not named.is_equivalent_to(NamedSharding(mesh, P("y", "x")), 2)
    single = SingleDeviceSharding(px.devices()[0])
    one_dev = NamedSharding(Mesh(np.array(px.devices()[:1]), ("a",)), P("a"))
    assert single.is_equivalent_to(one_dev, 1) and one_dev.is_equivalent_to(single, 1)
    assert not single.is_equivalent_to(SingleDeviceSharding(px.devices()[1]), 1)
    assert not single.is_equivalent_to("not a sharding", 1)


def test_to_sharding_spec(mesh: Mesh) -> None:
    from lamina_mlir_lowering.sharding import MeshShape, ShardingSpec
    spec = NamedSharding(mesh, P("x")).to_sharding_spec(2)
    assert spec == ShardingSpec(MeshShape(("x", "y"), (2, 4)), (("x",), ()))
    assert spec.to_hlo_sharding_str() == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    reordered = list(reversed(px.devices()))
    spec_r = NamedSharding(mesh, P("x")).to_sharding_spec(2, device_order=reordered)
    assert spec_r.mesh.device_ids == (7, 6, 5, 4, 3, 2, 1, 0)
    gspmd = GSPMDSharding(px.devices(), xc.HloSharding.iota_tile([4, 2]))
    g = gspmd.to_sharding_spec(2)
    assert g.mesh.axis_sizes == (4, 2) and g.dims == (("_d0",), ("_d1",))
    assert g.to_hlo_sharding_str() == "{devices=[4,2]<=[8]}"
    assert SingleDeviceSharding(px.devices()[3]).to_sharding_spec(1).is_fully_replicated()
    with pytest.raises(ShardingError, match="not among the program's devices"):
        NamedSharding(mesh, P("x")).to_sharding_spec(2, device_order=px.devices()[:4])


@pytest.mark.parametrize("spec", [P("x", "y"), P("y"), P(("y", "x")), P(None, ("x", "y")),
                                  P(), P("x")])
def test_named_sharding_from_hlo_roundtrip(mesh: Mesh, spec: PartitionSpec) -> None:
    hlo = NamedSharding(mesh, spec)._to_xla_hlo_sharding(2)
    found = sh.named_sharding_from_hlo(mesh, hlo, 2)
    assert found is not None
    assert found._to_xla_hlo_sharding(2) == hlo


def test_gspmd_sharding() -> None:
    devs = px.devices()
    g = GSPMDSharding(devs, "{devices=[8,1]<=[8]}")
    assert repr(g) == "GSPMDSharding({devices=[8,1]<=[8]}, memory_kind=device)"
    assert g == GSPMDSharding(devs, xc.HloSharding.iota_tile([8, 1]))
    assert hash(g) == hash(GSPMDSharding(devs, xc.HloSharding.iota_tile([8, 1])))
    assert g.shard_shape((16, 3)) == (2, 3)
    assert g.devices_indices_map((16, 3))[devs[5]] == (slice(10, 12), slice(None))
    assert GSPMDSharding.get_replicated(devs).is_fully_replicated
    with pytest.raises(ShardingError, match="needs 8 devices but 4"):
        GSPMDSharding(devs[:4], "{devices=[8,1]<=[8]}")
    with pytest.raises(ShardingError, match="rank 2"):
        g.devices_indices_map((16,))


def test_single_device_sharding() -> None:
    d = px.devices()[3]
    s = SingleDeviceSharding(d)
    assert repr(s) == "SingleDeviceSharding(device=CpuDevice(id=3), memory_kind=device)"
    assert s == SingleDeviceSharding(d) and hash(s) == hash(SingleDeviceSharding(d))
    assert s.devices_indices_map((2, 3)) == {d: (slice(None), slice(None))}
    assert s.shard_shape((2, 3)) == (2, 3) and s.is_fully_replicated
    assert s.num_devices == 1 and s._device_assignment == (d,)
    assert s.with_memory_kind("pinned_host").memory_kind == "pinned_host"
    with pytest.raises(ValueError, match="memory kind"):
        SingleDeviceSharding(d, memory_kind="nonsense")


def test_pmap_sharding() -> None:
    devs = px.devices()
    chunked = PmapSharding.default((8, 3))
    assert chunked.sharding_spec == PmapShardingSpec(8, 0, True)
    assert chunked.shard_shape((8, 3)) == (1, 3)
    assert chunked.devices_indices_map((8, 3))[devs[2]] == (slice(2, 3), slice(None))
    assert chunked.hlo_sharding_string(2) == "{devices=[8,1]<=[8]}"
    unstacked = PmapSharding(devs, PmapShardingSpec(8, 0, chunked=False))
    assert unstacked.shard_shape((8, 3)) == (3,)
    assert unstacked.devices_indices_map((8, 3))[devs[2]] == (2, slice(None))
    with pytest.raises(ShardingError, match="splits axis 0 over 8 devices"):
        unstacked.shard_shape((4, 3))
    rep = PmapSharding.default((3,), None, devs[:4])
    assert rep.is_fully_replicated and rep.shard_shape((3,)) == (3,)
    assert chunked == PmapSharding.default((8, 3)) and chunked != unstacked
    with pytest.raises(ShardingError, match="8 shards need as many devices"):
        PmapSharding(devs[:4], PmapShardingSpec(8))


def test_single_device_shardings_are_interned() -> None:
    import threading

    devices = px.devices()
    a = px.SingleDeviceSharding(devices[0])
    b = px.SingleDeviceSharding(devices[0], memory_kind=a.memory_kind)
    assert a is b and a == b and hash(a) == hash(b)
    if len(devices) > 1:
        c = px.SingleDeviceSharding(devices[1])
        assert c is not a and c != a and len({a, b, c}) == 2
    found: list[Any] = []

    def make() -> None:
        found.extend(px.SingleDeviceSharding(devices[-1]) for _ in range(200))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in found}) == 1
