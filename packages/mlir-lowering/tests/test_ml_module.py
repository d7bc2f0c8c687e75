"""The module as a whole: names, locations, attributes, pruning, donation,
shardings, multi-platform modules, errors and serialization. Structural
checks parse the produced text back and walk the module."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.source_info import NameStack
from ml_build import JaxprBuilder, aval, lit
from ml_runner import run

import lamina_mlir_lowering as ml
from lamina_mlir_lowering import (
    UNSPECIFIED,
    LoweringError,
    MeshShape,
    ShardingSpec,
    lower_jaxpr_to_module,
)

F32 = np.float32


def _two_arg_program(name: str = "f") -> Any:
    b = JaxprBuilder(name)
    x = b.arg((4,), F32, "x")
    y = b.arg((4,), F32, "y['hi']")
    s = b.eqn(ew.sin_p, x)
    m = b.eqn(ew.mul_p, s, y)
    return b.build([m, s], ["result['a']", "result['b'][0]"])


def _main(module: ir.Module) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(
                op.attributes["sym_name"]).value == "main":
            return op
    raise AssertionError("no main")


def _arg_dicts(fn: Any) -> list[dict[str, str]]:
    attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
    return [{a.name: str(a.attr) for a in ir.DictAttr(d)} for d in attrs]


def _res_dicts(fn: Any) -> list[dict[str, str]]:
    attrs = ir.ArrayAttr(fn.attributes["res_attrs"])
    return [{a.name: str(a.attr) for a in ir.DictAttr(d)} for d in attrs]


def _reparsed(result: ml.LoweringResult) -> ir.Module:
    return ml.parse_module(result.as_text(debug_info=True))


def test_names_and_result_info_reach_main() -> None:
    result = lower_jaxpr_to_module("jit_f", _two_arg_program())
    assert result.arg_names == ("x", "y['hi']")
    assert result.result_names == ("result['a']", "result['b'][0]")
    with ml.default_context():
        module = _reparsed(result)
        fn = _main(module)
        assert [d["jax.arg_info"] for d in _arg_dicts(fn)] == ['"x"', '"y[\'hi\']"']
        assert [d["jax.result_info"] for d in _res_dicts(fn)] == [
            '"result[\'a\']"', '"result[\'b\'][0]"']
    text = result.as_text()
    assert 'jax.result_info = "result[\'a\']"' in text
    assert "mhlo.num_partitions = 1 : i32" in text and "mhlo.num_replicas = 1 : i32" in text


def test_argument_locations_are_their_names() -> None:
    result = lower_jaxpr_to_module("jit_f", _two_arg_program())
    text = result.as_text(debug_info=True)
    assert re.search(r'%arg0: tensor<4xf32> \{jax.arg_info = "x"\} loc\("x"\)', text), text
    assert "loc(\"y['hi']\")" in text
    with ml.default_context():
        module = _reparsed(result)
        block = _main(module).regions[0].blocks[0]
        assert [str(a.location) for a in block.arguments] == ['loc("x")', "loc(\"y['hi']\")"]


def test_op_locations_carry_name_stack_file_and_line() -> None:
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    b.name_stack = NameStack(("jvp(g)",))
    line = 1 + __import__("inspect").currentframe().f_lineno  # the next line
    y = b.eqn(ew.sin_p, x)
    result = lower_jaxpr_to_module("jit_f", b.build([y]))
    with ml.default_context():
        module = _reparsed(result)
        ops = [op for op in _main(module).regions[0].blocks[0].operations]
        sine = next(op for op in ops if op.operation.name == "stablehlo.sine")
        loc = str(sine.location)
    assert loc == f'loc(fused["{__file__}":{line}:0, "jit(f)/jvp(g)/sin"])'


def test_compiled_hlo_metadata_has_op_name_and_source_line() -> None:
    from ml_runner import compile_result
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    line = 1 + __import__("inspect").currentframe().f_lineno
    y = b.eqn(ew.sin_p, x)
    exe = compile_result(lower_jaxpr_to_module("jit_f", b.build([y])))
    hlo_text = exe.hlo_modules()[0].to_string()
    assert f'op_name="jit(f)/sin" source_file="{__file__}" source_line={line}' in hlo_text


def test_name_stack_override_and_sanitized_module_names() -> None:
    cj = _two_arg_program("<lambda>")
    result = lower_jaxpr_to_module("jit_<lambda>", cj, name_stack="pmap(g)")
    assert result.module_name == "jit__lambda"
    assert "module @jit__lambda" in result.as_text()
    assert '"pmap(g)/sin"' in result.as_text(debug_info=True)
    assert ml.sanitize_module_name("jit_f.<locals>.g") == "jit_f._locals.g"
    assert ml.sanitize_module_name("jit f/x") == "jit_f_x"


def test_keep_unused_false_prunes_arguments() -> None:
    b = JaxprBuilder("f")
    x = b.arg((2,), F32, "x")
    b.arg((3,), F32, "unused")
    z = b.arg((2,), F32, "z")
    out = b.eqn(ew.add_p, x, z)
    cj = b.build([out])
    kept = lower_jaxpr_to_module("jit_f", cj, keep_unused=True)
    assert kept.kept_var_idx == (0, 1, 2)
    pruned = lower_jaxpr_to_module("jit_f", cj, keep_unused=False,
                                   donated_args=(True, True, False))
    assert pruned.kept_var_idx == (0, 2)
    assert pruned.arg_names == ("x", "z")
    assert pruned.donated_args == (True, False)
    assert "unused" not in pruned.as_text()
    out_v, = run(pruned, np.ones(2, F32), np.full(2, 2.0, F32))
    np.testing.assert_array_equal(out_v, [3.0, 3.0])


def test_donation_aliases_or_marks_buffer_donor() -> None:
    b = JaxprBuilder("f")
    x = b.arg((4,), F32, "x")
    y = b.arg((4,), F32, "y")
    w = b.arg((2,), np.int32, "w")
    out = b.eqn(ew.add_p, x, y)
    result = lower_jaxpr_to_module("jit_f", b.build([out]), donated_args=(True, True, True))
    assert result.output_aliases == (0, None, None)
    assert result.buffer_donors == (False, True, True)
    text = result.as_text()
    assert "tf.aliasing_output = 0 : i32" in text
    assert text.count("jax.buffer_donor = true") == 2
    del w


MESH = MeshShape(("x", "y"), (4, 2))


def test_shardy_shardings_and_mesh() -> None:
    b = JaxprBuilder("f")
    a = b.arg((8, 4), F32, "a")
    c = b.arg((8,), F32, "c")
    out = b.eqn(ew.add_p, a, lit(1.0, F32))
    result = lower_jaxpr_to_module(
        "jit_f", b.build([out, c]), num_partitions=8,
        arg_shardings=(ShardingSpec(MESH, (("x",), ())), ShardingSpec(MESH, (("x", "y"),))),
        result_shardings=(ShardingSpec(MESH, (("x", "y"), ())), ShardingSpec(MESH, ((),))))
    text = result.as_text()
    assert 'sdy.mesh @mesh = <["x"=4, "y"=2]>' in text
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>' in text
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}]>' in text
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{}]>' in text
    assert "mhlo.num_partitions = 8 : i32" in text
    assert result.mesh == MESH


def test_gspmd_sharding_strings() -> None:
    b = JaxprBuilder("f")
    a = b.arg((8, 4), F32, "a")
    result = lower_jaxpr_to_module(
        "jit_f", b.build([a]), num_partitions=8, sharding_format="gspmd",
        arg_shardings=(ShardingSpec(MESH, (("y",), ())),),
        result_shardings=(UNSPECIFIED,))
    text = result.as_text()
    assert 'mhlo.sharding = "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"' in text
    assert "sdy" not in text


def test_sharding_errors_name_the_argument() -> None:
    cj = _two_arg_program()
    with pytest.raises(ValueError, match=r"y\['hi'\]"):
        lower_jaxpr_to_module("jit_f", cj, arg_shardings=(
            None, ShardingSpec(MESH, (("x",), ()))))
    with pytest.raises(ValueError, match="different meshes"):
        lower_jaxpr_to_module("jit_f", cj, arg_shardings=(
            ShardingSpec(MESH, (("x",),)), ShardingSpec(MeshShape(("z",), (8,)), (("z",),))))
    with pytest.raises(ValueError, match="arg_names has 1 entries for 2"):
        lower_jaxpr_to_module("jit_f", cj, arg_names=("x",))


def test_single_platform_for_accelerators_verifies_on_this_host() -> None:
    for platforms in (("tpu",), ("cuda",), ("rocm",), ("cpu", "cuda"), ("tpu", "cpu", "rocm")):
        result = lower_jaxpr_to_module("jit_f", _two_arg_program(), platforms=platforms)
        assert result.platforms == platforms
        result.module.operation.verify()
        main_text = result.as_text()
        if len(platforms) == 1:
            assert "_platform_index" not in main_text
        else:
            assert re.search(r'%arg0: tensor<i32> \{jax.global_constant = "_platform_index"\}',
                             main_text)
            assert "stablehlo.case" not in main_text   # no rule differs


def test_multi_platform_module_runs_on_cpu() -> None:
    result = lower_jaxpr_to_module("jit_f", _two_arg_program(), platforms=("cpu", "cuda"))
    x, y = np.arange(4, dtype=F32), np.full(4, 3.0, F32)
    m, s = run(result, x, y)
    np.testing.assert_allclose(m, np.sin(x) * 3, rtol=1e-6)
    assert result.has_platform_index_arg


def test_per_platform_rules_select_with_case() -> None:
    prim = Primitive("ml_test_platform_dependent")
    prim.def_abstract_eval(lambda x: x)

    def plus(k: float) -> ml.LoweringRule:
        def rule(ctx: ml.LoweringRuleContext, x: Any) -> list[Any]:
            return [hlo.add(x, ml.ir_constant(np.full(ctx.avals_in[0].shape, k, F32)))]
        return rule

    ml.register_lowering(prim, plus(1.0))
    ml.register_lowering(prim, plus(100.0), platform="tpu")
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    out = b.eqn(prim, x)
    cj = b.build([out])
    result = lower_jaxpr_to_module("jit_f", cj, platforms=("cpu", "tpu", "cuda"))
    text = result.as_text()
    assert text.count("stablehlo.case") == 1
    xv = np.zeros(3, F32)
    for index, expected in [(0, 1.0), (1, 100.0), (2, 1.0)]:
        out_v, = run(result, xv, platform_index=index)
        np.testing.assert_array_equal(out_v, np.full(3, expected))
    single = lower_jaxpr_to_module("jit_f", cj, platforms=("tpu",))
    assert "stablehlo.case" not in single.as_text()
    np.testing.assert_array_equal(run(single, xv)[0], np.full(3, 100.0))


def test_missing_rule_error_names_primitive_platform_and_line() -> None:
    prim = Primitive("ml_test_no_rule")
    prim.def_abstract_eval(lambda x: x)
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    line = 1 + __import__("inspect").currentframe().f_lineno
    out = b.eqn(prim, x)
    with pytest.raises(LoweringError) as info:
        lower_jaxpr_to_module("jit_f", b.build([out]), platforms=("tpu",))
    message = str(info.value)
    assert "'ml_test_no_rule'" in message and "'tpu'" in message
    assert f"{__file__}:{line}" in message


def test_platform_only_rule_fails_for_other_platforms() -> None:
    prim = Primitive("ml_test_cpu_only")
    prim.def_abstract_eval(lambda x: x)
    ml.register_lowering(prim, lambda ctx, x: [x], platform="cpu")
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    cj = b.build([b.eqn(prim, x)])
    lower_jaxpr_to_module("jit_f", cj, platforms=("cpu",))
    with pytest.raises(LoweringError, match="'ml_test_cpu_only'.*'cuda'"):
        lower_jaxpr_to_module("jit_f", cj, platforms=("cpu", "cuda"))


def test_invalid_module_error_names_op_and_equation() -> None:
    prim = Primitive("ml_test_bad_rule")
    prim.def_abstract_eval(lambda x: x)

    def bad(ctx: ml.LoweringRuleContext, x: Any) -> list[Any]:
        wrong = ctx.module_context.types.shaped((7,), F32)
        return [ir.Operation.create("stablehlo.negate", results=[wrong], operands=[x]).result]

    ml.register_lowering(prim, bad)
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    out = b.eqn(prim, x)
    with pytest.raises(LoweringError) as info:
        lower_jaxpr_to_module("jit_f", b.build([out]))
    message = str(info.value)
    assert "stablehlo.negate" in message
    assert "ml_test_bad_rule" in message and "test_ml_module.py" in message


def test_rule_returning_wrong_count_is_reported() -> None:
    prim = Primitive("ml_test_two_outs")
    prim.def_abstract_eval(lambda x: x)
    ml.register_lowering(prim, lambda ctx, x: [x, x])
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    with pytest.raises(LoweringError, match="returned 2 values for 1 outputs"):
        lower_jaxpr_to_module("jit_f", b.build([b.eqn(prim, x)]))


def test_bad_platform_and_format_arguments() -> None:
    cj = _two_arg_program()
    with pytest.raises(ValueError, match="unknown platform 'gpux'"):
        lower_jaxpr_to_module("jit_f", cj, platforms=("gpux",))
    with pytest.raises(ValueError, match="repeat"):
        lower_jaxpr_to_module("jit_f", cj, platforms=("cpu", "cpu"))
    with pytest.raises(ValueError, match="sharding_format"):
        lower_jaxpr_to_module("jit_f", cj, sharding_format="xla")


def test_serialization_round_trips() -> None:
    result = lower_jaxpr_to_module("jit_f", _two_arg_program())
    text = ml.module_to_text(result.module)
    assert str(ml.parse_module(text)) == text
    data = ml.module_to_bytecode(result.module)
    assert isinstance(data, bytes) and data.startswith(b"ML\xefR")
    again = ml.parse_module(data)
    assert ml.module_to_text(again, debug_info=True) == result.as_text(debug_info=True)
    x, y = np.ones(4, F32), np.ones(4, F32)
    np.testing.assert_allclose(run(result, x, y)[0], np.sin(1.0) * np.ones(4), rtol=1e-6)


def test_a_result_from_bytecode_parses_its_module_on_first_use() -> None:
    import dataclasses

    result = lower_jaxpr_to_module("jit_f", _two_arg_program())
    data = result.as_bytecode()
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
              if f.name != "module"}
    stored = ml.LoweringResult.from_bytecode(data, **fields)
    assert stored.as_bytecode() == data and "module" not in vars(stored)  # not parsed
    assert stored.arg_names == ("x", "y['hi']") and stored.module_name == "jit_f"
    assert stored.as_text(debug_info=True) == result.as_text(debug_info=True)
    assert isinstance(stored.module, ir.Module) and stored.module is stored.module
    assert stored.as_bytecode() == data
    with pytest.raises(AttributeError, match="no attribute 'modul'"):
        stored.modul  # noqa: B018
    x, y = np.ones(4, F32), np.ones(4, F32)
    np.testing.assert_allclose(run(stored, x, y)[0], np.sin(1.0) * np.ones(4), rtol=1e-6)


def test_consts_literals_and_dropped_outputs() -> None:
    b = JaxprBuilder("f")
    x = b.arg((2, 3), F32, "x")
    c = b.const(np.arange(6, dtype=F32).reshape(2, 3))
    big = b.const(np.broadcast_to(np.float32(2.0), (2, 3)))
    s = b.eqn(ew.add_p, x, c)
    t = b.eqn(ew.mul_p, s, big)
    result = lower_jaxpr_to_module("jit_f", b.build([t, lit(5, np.int32)]))
    out, five = run(result, np.ones((2, 3), F32))
    np.testing.assert_array_equal(out, (1 + np.arange(6).reshape(2, 3)) * 2)
    assert five == 5
    # A zero-stride constant is a broadcast scalar, not a 6-element literal.
    assert "dense<2.000000e+00> : tensor<f32>" in result.as_text()


def test_float0_and_unsigned_types() -> None:
    from lamina_tracing_core import dtypes
    b = JaxprBuilder("f")
    u = b.arg((3,), np.uint32, "u")
    z = b.arg((2,), dtypes.float0, "z")
    result = lower_jaxpr_to_module("jit_f", b.build([u, z]))
    text = result.as_text()
    assert "tensor<3xui32>" in text and "tensor<2xi1>" in text
    assert ml.aval_to_ir_type  # exported


def test_type_mapping() -> None:
    import ml_dtypes
    with ml.default_context():
        cases = {np.bool_: "i1", np.int8: "i8", np.int64: "i64", np.uint16: "ui16",
                 ml_dtypes.bfloat16: "bf16", np.float16: "f16", np.float64: "f64",
                 np.complex64: "complex<f32>", np.complex128: "complex<f64>",
                 ml_dtypes.float8_e4m3fn: "f8E4M3FN"}
        for dt, name in cases.items():
            assert str(ml.dtype_to_ir_type(dt)) == name
        assert str(ml.aval_to_ir_type(aval((2, 3), F32))) == "tensor<2x3xf32>"
        with pytest.raises(TypeError, match="no MLIR type"):
            ml.dtype_to_ir_type(np.dtype("U3"))


def test_ir_constants_of_every_kind() -> None:
    import ml_dtypes
    with ml.default_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            texts = [str(ml.ir_constant(v).owner) for v in (
                np.array([1, 2**32 - 1], np.uint32), np.array(1.5, ml_dtypes.bfloat16),
                np.array([True, False]), np.array(1 + 2j, np.complex64))]
    assert texts[0].endswith("dense<[1, 4294967295]> : tensor<2xui32>")
    assert texts[1].endswith("dense<1.500000e+00> : tensor<bf16>")
    assert texts[2].endswith("dense<[true, false]> : tensor<2xi1>")
    assert texts[3].endswith("dense<(1.000000e+00,2.000000e+00)> : tensor<complex<f32>>")
