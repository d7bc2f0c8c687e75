"""The AOT stage classes: Traced -> Lowered -> Compiled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import SingleDeviceSharding
from lamina_interpreters_pxla.stages import ArgInfo, Compiled, Lowered, OutInfo, Traced
from lamina_linear_util import tree_util
from lamina_mlir_lowering import lower_jaxpr_to_module
from lamina_tracing_core import api, lax


def f(x: dict[str, Any], y: Any) -> dict[str, Any]:
    return {"a": lax.sin(x["hi"]), "b": lax.add(x["hi"], y)}


ARGS = ({"hi": np.ones(4, np.float32)}, np.full(4, 2.0, np.float32))


def _traced() -> Traced:
    closed = api.make_jaxpr(f)(*ARGS)
    dbg = closed.jaxpr.debug_info
    assert dbg is not None
    device = px.devices()[0]
    s = SingleDeviceSharding(device)
    in_tree = tree_util.tree_structure((ARGS, {}))
    out_tree = tree_util.tree_structure({"a": 0, "b": 0})
    args_info = [ArgInfo(v.aval, False, n, s) for v, n in zip(closed.jaxpr.invars,
                                                                dbg.arg_names)]
    out_info = [OutInfo(v.aval, n, s) for v, n in zip(closed.jaxpr.outvars, dbg.result_paths)]

    def lower(platforms: tuple[str, ...] | None) -> Lowered:
        lowering = lower_jaxpr_to_module("jit_f", closed, platforms=platforms or ("cpu",))
        return Lowered(lowering, fun_name="f", jaxpr=closed, platforms=lowering.platforms,
                       in_tree=in_tree, out_tree=out_tree, args_info=args_info,
                       out_info=out_info, devices=[device], out_shardings=[s, s])

    return Traced(closed, fun_name="f", in_tree=in_tree, out_tree=out_tree,
                  args_info=args_info, out_info=out_info, lower_fn=lower)


def test_traced_and_lowered_carry_names_and_platforms() -> None:
    traced = _traced()
    assert [a.name for a in traced.args_info] == ["x['hi']", "y"]
    assert traced.in_avals[0].str_short() == "f32[4]"
    lowered = traced.lower()
    assert lowered.platforms == ("cpu",) and lowered.fun_name == "f"
    assert lowered.jaxpr is traced.jaxpr
    text = lowered.as_text()
    assert "jax.arg_info = \"x['hi']\"" in text and "jax.result_info = \"result['b']\"" in text
    assert "loc(" in lowered.as_text(debug_info=True)
    assert lowered.compiler_ir("stablehlo") is lowered.module
    assert lowered.as_text("hlo").startswith("HloModule")
    with pytest.raises(ValueError, match="unknown dialect"):
        lowered.as_text("mhlo")
    costs = lowered.cost_analysis()
    assert costs["flops"] > 0
    assert traced.lower(lowering_platforms=("tpu",)).platforms == ("tpu",)


def test_compiled_calls_and_reports() -> None:
    compiled = _traced().lower().compile()
    assert isinstance(compiled, Compiled)
    out = compiled(*ARGS)
    assert out["b"].tolist() == [3.0] * 4
    np.testing.assert_allclose(np.asarray(out["a"]), np.sin(np.ones(4)), rtol=1e-6)
    s = SingleDeviceSharding(px.devices()[0])
    assert compiled.input_shardings == (({"hi": s}, s), {})
    assert compiled.output_shardings == {"a": s, "b": s}
    assert "sine" in compiled.as_text()
    assert compiled.cost_analysis()["flops"] > 0
    assert compiled.memory_analysis().argument_size_in_bytes == 32
    assert compiled.runtime_executable() is compiled.executable.loaded
    with pytest.raises(TypeError, match="compiled for arguments of structure"):
        compiled(ARGS[0])
    with pytest.raises(px.executable.ExecutableCallError, match="argument 'y' has type "
                                                                 "f32\\[3\\]"):
        compiled(ARGS[0], np.ones(3, np.float32))


def test_lowered_for_another_platform_cannot_compile_here() -> None:
    lowered = _traced().lower(lowering_platforms=("tpu",))
    with pytest.raises(ValueError, match="lowered for \\('tpu',\\), but the devices are cpu"):
        lowered.compile()
