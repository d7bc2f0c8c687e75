"""The AOT stages of jit: Traced -> Lowered -> Compiled, cross-platform
lowering, and errors naming arguments by path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_interpreters_pxla.stages import ArgInfo, Compiled, Lowered, OutInfo, Traced
from lamina_sharded_jit.execution import CrossPlatformError
from lamina_tracing_core import api, lax
from lamina_tracing_core.avals import ShapedArray


def f(x: Any, y: Any) -> dict[str, Any]:
    return {"a": lax.sin(x["hi"]) + y}


ARGS = ({"hi": np.ones(3, np.float32)}, np.full(3, 2.0, np.float32))


def test_traced_stage() -> None:
    traced = sj.jit(f).trace(*ARGS)
    assert isinstance(traced, Traced) and traced.fun_name == "f"
    (x_info, y_info), kwargs = traced.args_info
    assert kwargs == {}
    assert isinstance(y_info, ArgInfo) and y_info.name == "y"
    assert x_info["hi"].name == "x['hi']" and x_info["hi"].shape == (3,)
    out = traced.out_info["a"]
    assert isinstance(out, OutInfo) and out.name == "result['a']" and out.dtype == np.float32
    assert traced.jaxpr.jaxpr.debug_info.arg_names == ("x['hi']", "y")
    assert [a.str_short() for a in traced.in_avals] == ["f32[3]", "f32[3]"]


def test_trace_accepts_shape_dtype_structs_and_tracers() -> None:
    s = sj.ShapeDtypeStruct((2, 3), np.float32)
    traced = sj.jit(lambda x: x.sum()).trace(s)
    assert traced.out_info.shape == ()

    def under_vmap(x: Any) -> Any:
        assert sj.jit(lambda y: y * 2).trace(x).out_info.shape == ()
        return x

    api.vmap(under_vmap)(np.ones(3, np.float32))


def test_traced_does_not_close_over_outer_tracers() -> None:
    def outer(x: Any) -> Any:
        # plain values trace as at top level, whatever transformation is around
        jaxpr = sj.jit(lambda y: y + 1).trace(1.0).jaxpr
        assert not jaxpr.consts and len(jaxpr.jaxpr.eqns) == 1
        return x

    api.vmap(outer)(np.ones(3, np.float32))
    api.grad(outer)(1.0)

    def captures(x: Any) -> Any:
        sj.jit(lambda y: y * x).trace(1.0)
        return x

    with pytest.raises(Exception, match="unexpected tracer"):
        api.vmap(captures)(np.ones(3, np.float32))
    # inner jits inside the traced function may close over its own values
    nested = sj.jit(lambda x: sj.jit(lambda y: y * x)(1.0)).trace(2.0)
    assert nested.jaxpr.jaxpr.eqns[0].params["jaxpr"].jaxpr.debug_info.arg_names == (None, "y")


def test_lowered_stage() -> None:
    lowered = sj.jit(f).lower(*ARGS)
    assert isinstance(lowered, Lowered)
    assert lowered.fun_name == "f" and lowered.platforms == ("cpu",)
    assert lowered.jaxpr.jaxpr.debug_info.result_paths == ("result['a']",)
    assert lowered.in_tree == px.tree_util.tree_structure((ARGS, {})) if hasattr(
        px, "tree_util") else True
    assert lowered.args_info[0][1].name == "y"
    assert lowered.out_info["a"].name == "result['a']"
    assert "stablehlo.sine" in lowered.as_text()
    assert "stablehlo.sine" in lowered.as_text("stablehlo")
    assert "loc(" in lowered.as_text(debug_info=True)
    assert "func.func public @main" in str(lowered.compiler_ir("stablehlo"))
    with pytest.raises(ValueError, match="unknown dialect"):
        lowered.as_text("mhlo")
    cost = lowered.cost_analysis()
    assert cost["flops"] >= 3.0


def test_compiled_stage() -> None:
    compiled = sj.jit(f).lower(*ARGS).compile()
    assert isinstance(compiled, Compiled)
    out = compiled(*ARGS)
    np.testing.assert_allclose(np.asarray(out["a"]), np.sin(1.0) + 2.0, rtol=1e-6)
    assert "HloModule jit_f" in compiled.as_text()
    assert compiled.cost_analysis()["flops"] >= 3.0
    assert compiled.memory_analysis().argument_size_in_bytes == 24
    device = px.devices()[0]
    ((x_sh, y_sh), kw) = compiled.input_shardings
    assert y_sh == px.SingleDeviceSharding(device) and kw == {}
    assert compiled.output_shardings["a"] == px.SingleDeviceSharding(device)
    assert compiled.runtime_executable() is not None
    assert sj.jit(f).lower(*ARGS).compile(compiler_options={})(*ARGS)["a"].shape == (3,)


def test_compiled_call_errors_name_the_argument() -> None:
    compiled = sj.jit(f).lower(*ARGS).compile()
    with pytest.raises(TypeError, match=r"at args\[0\], seen a dict with keys \['hi'\] but now "
                       r"given a dict with keys \['ho'\]"):
        compiled({"ho": np.ones(3, np.float32)}, ARGS[1])
    with pytest.raises(TypeError, match=r"Argument 'x\['hi'\]' compiled with float32\[3\] and "
                       r"called with float32\[4\]"):
        compiled({"hi": np.ones(4, np.float32)}, ARGS[1])
    static = sj.jit(lambda x, n: x * n, static_argnums=1).lower(ARGS[1], 3).compile()
    np.testing.assert_allclose(np.asarray(static(ARGS[1])), 6.0)


def test_cross_platform_lowering() -> None:
    traced = sj.jit(f).trace(*ARGS)
    tpu = traced.lower(lowering_platforms=("tpu",))
    assert tpu.platforms == ("tpu",) and "stablehlo.sine" in tpu.as_text()
    multi = traced.lower(lowering_platforms=("cpu", "cuda"))
    assert multi.platforms == ("cpu", "cuda")
    assert "_platform_index" in multi.as_text()
    for lowered in (tpu, multi):
        with pytest.raises(CrossPlatformError, match=r"was lowered for platforms .* only a "
                           r"module lowered for exactly \('cpu',\) can be compiled here"):
            lowered.compile()


def test_lowering_errors_name_the_function() -> None:
    with pytest.raises(TypeError, match=r"to jit\(f\) as an abstract array\. The problematic value is of type <class 'str'> \('nope'\) and was passed to the function at path y\."):
        sj.jit(f).lower(ARGS[0], "nope")
    with pytest.raises(ValueError, match="abstracted_axes"):
        sj.jit(f, abstracted_axes=("n",))


def test_hlo_dialect_and_shaped_array_repr_as_jax() -> None:
    lowered = sj.jit(lambda x: x * 2).lower(np.ones(3, np.float32))
    assert lowered.as_text("hlo").startswith("HloModule jit__lambda")
    assert type(lowered.compiler_ir("hlo")).__name__ == "XlaComputation"
    assert "stablehlo.multiply" in lowered.as_text("stablehlo")
    with pytest.raises(ValueError, match="unknown dialect 'xyz'"):
        lowered.compiler_ir("xyz")
    assert repr(lowered.args_info[0][0].aval) == "ShapedArray(float32[3])"
    assert repr(ShapedArray((), np.dtype(np.int32), True)) == \
        "ShapedArray(int32[], weak_type=True)"
