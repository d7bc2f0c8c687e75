"""The per-context caches behind fast lowering: attributes and scalar
constants built once per context, locations found by SourceInfo identity
and value."""

from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.source_info import Frame, NameStack, SourceInfo
from ml_build import JaxprBuilder

import lamina_mlir_lowering as ml
from lamina_mlir_lowering.locations import LocationCache
from lamina_mlir_lowering.types import dense_i64_array, type_cache

F32 = np.float32


def test_i64_arrays_and_attributes_are_built_once_per_context() -> None:
    with ml.default_context():
        types = type_cache()
        first = types.i64_array([1, 0])
        assert types.i64_array((1, 0)) is first
        assert first == dense_i64_array((1, 0))
        assert str(first) == "array<i64: 1, 0>"
        calls = []

        def build() -> ir.Attribute:
            calls.append(1)
            return ir.StringAttr.get("x")

        a = types.attribute(("test", 1), build)
        assert types.attribute(("test", 1), build) is a and calls == [1]


def test_type_cache_follows_the_current_context() -> None:
    other = ml.make_context()
    with ml.default_context():
        default = type_cache()
    with other:
        assert type_cache() is not default
        assert type_cache().context is other
    with ml.default_context():
        assert type_cache() is default


def test_scalar_constants_tell_apart_signed_zeros_and_keep_nans() -> None:
    with ml.default_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            types = type_cache()
            zero = types.scalar_constant(np.asarray(0.0, F32))
            neg = types.scalar_constant(np.asarray(-0.0, F32))
            nan = types.scalar_constant(np.asarray(np.nan, F32))
            one = types.scalar_constant(np.asarray(1, np.uint8))
        assert "0.000000e+00" in str(zero.owner) and "-0.000000e+00" in str(neg.owner)
        assert "0x7FC00000" in str(nan.owner)
        assert str(one.type) == "tensor<ui8>"
        assert module.operation.verify()


def test_equal_source_infos_share_a_location_distinct_ones_do_not() -> None:
    with ml.default_context():
        cache = LocationCache()
        a = SourceInfo(Frame("u.py", 3, "f"), NameStack(("scope",)))
        b = SourceInfo(Frame("u.py", 3, "f"), NameStack(("scope",)))  # equal, distinct
        c = SourceInfo(Frame("u.py", 4, "f"), NameStack(("scope",)))
        loc_a = cache.for_equation("jit(f)", a, "sin")
        assert cache.for_equation("jit(f)", a, "sin") is loc_a
        assert cache.for_equation("jit(f)", b, "sin") is loc_a
        assert cache.for_equation("jit(f)", c, "sin") is not loc_a
        assert str(cache.for_equation("jit(f)", a, "cos")) == \
            'loc(fused["u.py":3:0, "jit(f)/scope/cos"])'
        assert str(cache.for_equation("jit(g)", a, "sin")) == \
            'loc(fused["u.py":3:0, "jit(g)/scope/sin"])'


def test_equations_with_equal_source_infos_get_the_same_op_location() -> None:
    b = JaxprBuilder("f")
    x = b.arg((3,), F32, "x")
    v = x
    for _ in range(2):  # one source line: equal SourceInfos
        v = b.eqn(ew.sin_p, v)
    closed = b.build([v])
    first, second = closed.jaxpr.eqns
    assert first.source_info == second.source_info
    result = ml.lower_jaxpr_to_module("jit_f", closed)
    text = result.as_text(debug_info=True)
    sines = [line for line in text.splitlines() if "stablehlo.sine" in line]
    assert len(sines) == 2
    locs = {line[line.index("loc("):] for line in sines}
    assert len(locs) == 1
