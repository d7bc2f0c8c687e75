"""Device-free sharding descriptions and their Shardy / GSPMD forms."""

from __future__ import annotations

import pickle

import pytest
from jaxlib.mlir import ir

import lamina_mlir_lowering as ml
from lamina_mlir_lowering import UNSPECIFIED, MeshShape, ShardingSpec

MESH = MeshShape(("x", "y"), (4, 2))

# Checked against jax 0.10's NamedSharding._to_xla_hlo_sharding on a (4, 2) mesh.
HLO_STRINGS = [
    ((("x",), ()), "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"),
    ((("x", "y"),), "{devices=[8]<=[8]}"),
    (((), ("x",)), "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"),
    ((("y",), ()), "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    (((), ()), "{replicated}"),
    ((("x",), ("y",)), "{devices=[4,2]<=[8]}"),
    ((("y",), ("x",)), "{devices=[2,4]<=[4,2]T(1,0)}"),
    ((("y", "x"),), "{devices=[8]<=[4,2]T(1,0)}"),
]


@pytest.mark.parametrize("dims,expected", HLO_STRINGS, ids=[s for _, s in HLO_STRINGS])
def test_hlo_sharding_strings_match_jax(dims: tuple[tuple[str, ...], ...], expected: str) -> None:
    assert ShardingSpec(MESH, dims).to_hlo_sharding_str() == expected


def test_sdy_attributes() -> None:
    with ml.default_context():
        assert str(ShardingSpec(MESH, (("x",), ())).to_sdy_attr()) == \
            '#sdy.sharding<@mesh, [{"x"}, {}]>'
        spec = ShardingSpec(MESH, (("x",),), replicated=("y",))
        assert str(spec.to_sdy_attr("m")) == '#sdy.sharding<@m, [{"x"}], replicated={"y"}>'
        assert str(MESH.to_sdy_mesh_attr()) == '#sdy.mesh<["x"=4, "y"=2]>'
        permuted = MeshShape(("a",), (4,), device_ids=(3, 2, 1, 0))
        assert "device_ids=[3, 2, 1, 0]" in str(permuted.to_sdy_mesh_attr())
        assert MeshShape(("a",), (4,), device_ids=(0, 1, 2, 3)).is_iota()


def test_shapes_and_counts() -> None:
    spec = ShardingSpec(MESH, (("x",), ("y",)))
    assert spec.tile_counts() == (4, 2)
    assert spec.shard_shape((8, 6)) == (2, 3)
    assert spec.global_shape((2, 3)) == (8, 6)
    assert not spec.is_fully_replicated()
    assert ShardingSpec.replicate(MESH, 2).is_fully_replicated()
    with pytest.raises(ValueError, match="does not split evenly"):
        spec.shard_shape((6, 6))
    with pytest.raises(ValueError, match="rank 3"):
        spec.shard_shape((8, 6, 1))


def test_validation() -> None:
    with pytest.raises(ValueError, match="axis 'z' is not in mesh"):
        ShardingSpec(MESH, (("z",),))
    with pytest.raises(ValueError, match="used twice"):
        ShardingSpec(MESH, (("x",), ("x",)))
    with pytest.raises(ValueError, match="repeat a name"):
        MeshShape(("x", "x"), (2, 2))
    with pytest.raises(ValueError, match="2 axis_names"):
        MeshShape(("x", "y"), (2,))
    with pytest.raises(ValueError, match="distinct ids"):
        MeshShape(("x",), (2,), device_ids=(0, 0))
    # a single axis name in place of a tuple is accepted
    assert ShardingSpec(MESH, ("x", ())).dims == (("x",), ())  # type: ignore[arg-type]


def test_unspecified_is_a_singleton() -> None:
    assert ml.Unspecified() is UNSPECIFIED
    assert pickle.loads(pickle.dumps(UNSPECIFIED)) is UNSPECIFIED
    assert repr(UNSPECIFIED) == "UNSPECIFIED"


def test_context_is_shared_per_thread_and_parses_all_dialects() -> None:
    import threading
    ctx = ml.default_context()
    assert ml.default_context() is ctx
    other: list[ir.Context] = []
    t = threading.Thread(target=lambda: other.append(ml.default_context()))
    t.start()
    t.join()
    assert other[0] is not ctx
    text = ('module { sdy.mesh @m = <["x"=2]> func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {'
            ' %0 = chlo.erf_inv %a : tensor<2xf32> -> tensor<2xf32>'
            ' %1 = stablehlo.add %0, %a : tensor<2xf32> return %1 : tensor<2xf32> } }')
    assert "chlo.erf_inv" in str(ml.parse_module(text))
    fresh = ml.make_context()
    assert "sdy.mesh" in str(ml.parse_module(text, fresh))
