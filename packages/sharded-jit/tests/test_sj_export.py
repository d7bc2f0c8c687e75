"""Exporting: StableHLO bytecode plus the calling convention, round-tripped
through bytes and called back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_sharded_jit as sj
from lamina_interpreters_pxla import Mesh, NamedSharding
from lamina_interpreters_pxla import PartitionSpec as P
from lamina_sharded_jit.export import Exported, deserialize, export
from lamina_tracing_core import lax


def f(x: Any, y: Any) -> dict[str, Any]:
    return {"a": lax.sin(x["hi"]) * y, "b": [x["hi"] + 1]}


ARGS = ({"hi": np.linspace(0, 1, 4).astype(np.float32)}, np.float32(3.0))


def _expected() -> dict[str, Any]:
    x = ARGS[0]["hi"]
    return {"a": np.sin(x) * 3.0, "b": [x + 1]}


def _check(out: Any) -> None:
    exp = _expected()
    np.testing.assert_allclose(np.asarray(out["a"]), exp["a"], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["b"][0]), exp["b"][0], rtol=1e-6)


def test_export_round_trip() -> None:
    exp = export(sj.jit(f))(*ARGS)
    assert isinstance(exp, Exported)
    assert exp.fun_name == "f" and exp.platforms == ("cpu",)
    assert exp.arg_names == ("x['hi']", "y") and exp.result_names == ("result['a']",
                                                                      "result['b'][0]")
    assert "stablehlo.sine" in exp.mlir_module()
    blob = exp.serialize()
    back = deserialize(blob)
    assert back.in_tree == exp.in_tree and back.out_tree == exp.out_tree
    assert back.in_avals == exp.in_avals
    _check(back.call(*ARGS))
    _check(back(*ARGS))
    assert deserialize(bytearray(blob)).fun_name == "f"


def test_lowered_export_and_multi_platform() -> None:
    lowered = sj.jit(f).trace(*ARGS).lower(lowering_platforms=("cpu", "cuda"))
    back = deserialize(lowered.export().serialize())
    assert back.platforms == ("cpu", "cuda")
    _check(back(*ARGS))
    tpu_only = deserialize(export(sj.jit(f), platforms=("tpu",))(*ARGS).serialize())
    with pytest.raises(ValueError, match=r"lowered for platforms \('tpu',\) but it is used on "
                       "'cpu'"):
        tpu_only(*ARGS)


def test_exported_call_checks_arguments() -> None:
    back = deserialize(export(sj.jit(f))(*ARGS).serialize())
    with pytest.raises(TypeError, match=r"Argument 'x\['hi'\]' compiled with float32\[4\]"):
        back({"hi": np.ones(5, np.float32)}, np.float32(1.0))
    with pytest.raises(TypeError, match="input pytree does not match"):
        back({"ho": np.ones(4, np.float32)}, np.float32(1.0))
    with pytest.raises(ValueError, match="not a lamina exported function"):
        deserialize(b"garbage")


def test_export_keeps_shardings(devices8: list[Any]) -> None:
    mesh = Mesh(np.array(devices8), ("x",))
    rows = NamedSharding(mesh, P("x"))
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    exp = export(sj.jit(lambda a: a * 2, in_shardings=rows, out_shardings=rows))(x)
    assert exp.nr_devices == 8 and exp.in_shardings_hlo == ("{devices=[8,1]<=[8]}",)
    back = deserialize(exp.serialize())
    out = back(x)
    np.testing.assert_allclose(np.asarray(out), x * 2)
    assert len(out.addressable_shards) == 8
