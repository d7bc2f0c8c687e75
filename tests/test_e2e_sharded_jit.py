"""Behaviour 14: ``sharded_jit`` with partition counts, end to end through
XLA's SPMD partitioner on 8 CPU devices."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from e2e_helpers import main_signature
from lamina.sharded_jit import PartitionSpec as P
from lamina.sharded_jit import sharded_jit, with_sharding_constraint

X = np.arange(16, dtype=np.float32).reshape(4, 4)
Y = np.linspace(0.0, 1.0, 16).astype(np.float32).reshape(4, 4)


def add(a, b):
    return a + b


def test_partition_spec_2_1_splits_dimension_0(devices8):
    out = sharded_jit(add, in_parts=(P(2, 1), None), out_parts=P(2, 1))(X, Y)
    np.testing.assert_allclose(np.asarray(out), X + Y)
    shards = out.addressable_shards
    assert len(shards) == 2
    assert sorted(s.data.shape for s in shards) == [(2, 4), (2, 4)]
    by_row = sorted(shards, key=lambda s: s.index[0].start or 0)
    np.testing.assert_allclose(np.asarray(by_row[0].data), (X + Y)[:2])
    np.testing.assert_allclose(np.asarray(by_row[1].data), (X + Y)[2:])


def test_partition_spec_2_2_uses_four_devices(devices8):
    out = sharded_jit(add, in_parts=(P(2, 2), P(2, 2)), out_parts=P(2, 2))(X, Y)
    assert sorted(s.data.shape for s in out.addressable_shards) == [(2, 2)] * 4
    np.testing.assert_allclose(np.asarray(out), X + Y)


def test_none_replicates(devices8):
    out = sharded_jit(add, in_parts=(P(2, 1), None), out_parts=None)(X, Y)
    assert [s.data.shape for s in out.addressable_shards] == [(4, 4)] * 2
    for s in out.addressable_shards:
        np.testing.assert_allclose(np.asarray(s.data), X + Y)


def test_lowered_module_names_and_shards_arguments(devices8):
    lowered = sharded_jit(add, in_parts=(P(2, 1), None), out_parts=P(2, 1)).lower(X, Y)
    text = lowered.as_text()
    assert "mhlo.num_partitions = 2" in text
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert sig.arg_infos == ("a", "b")
    assert sig.result_infos == ("result",)
    main = [ln for ln in text.splitlines() if "func.func public @main" in ln][0]
    a_part, b_part = main.split("%arg1")
    assert '[{"p0"}, {}]' in a_part          # a split on dim 0
    assert '[{}, {}]' in b_part.split("->")[0]  # b replicated


def test_mismatched_partition_counts_name_the_argument(devices8):
    with pytest.raises(ValueError) as info:  # at sharded_jit(...) or at the call
        sharded_jit(lambda d, b: d['u'] + b, in_parts=({'u': P(2, 1)}, P(4, 1)),
                    out_parts=None)({'u': X}, Y)
    message = str(info.value)
    assert "in_parts[1]" in message and "in_parts[0]['u']" in message
    assert "PartitionSpec(4, 1)" in message
    assert "<lambda>" in message


def test_a_constraint_disagreeing_with_the_specs_is_an_error(devices8):
    fun = sharded_jit(lambda a: with_sharding_constraint(a * 2, P(4, 1)), in_parts=(P(2, 1),),
                      out_parts=None)
    with pytest.raises(ValueError) as info:
        fun(X)
    message = str(info.value)
    assert "PartitionSpec(4, 1)" in message and "2" in message


def test_explicit_num_partitions_must_agree(devices8):
    with pytest.raises(ValueError):
        sharded_jit(add, in_parts=(P(2, 1), None), out_parts=None, num_partitions=4)(X, Y)


def test_keyword_arguments_are_rejected_and_say_so(devices8):
    fun = sharded_jit(add, in_parts=(P(2, 1), None), out_parts=None)
    # the old sharded_jit's class, naming kwargs (and here the function)
    with pytest.raises(NotImplementedError) as info:
        fun(X, b=Y)
    assert "over kwargs not yet supported" in str(info.value) and "add" in str(info.value)


def test_with_sharding_constraint_outside_sharded_jit_is_an_error():
    with pytest.raises(NotImplementedError, match=r"should only be called inside sharded_jit"):
        with_sharding_constraint(X, P(2, 1))
    with pytest.raises(NotImplementedError, match=r"should only be called inside sharded_jit"):
        lx.jit(lambda a: with_sharding_constraint(a, P(2, 1)))(X)


def constrained_loss(a):
    return jnp.sum(jnp.sin(with_sharding_constraint(a * 3.0, P(2, 1))))


def test_with_sharding_constraint_is_linear_under_grad(devices8):
    fun = sharded_jit(lx.grad(constrained_loss), in_parts=(P(2, 1),), out_parts=P(2, 1))
    np.testing.assert_allclose(np.asarray(fun(X)), 3.0 * np.cos(3.0 * X), rtol=1e-5)
    text = fun.lower(X).as_text()
    # one constraint on the primal, one on its cotangent (the transpose)
    assert text.count("sdy.sharding_constraint") == 2


def test_with_sharding_constraint_under_jvp_and_vmap(devices8):
    jvp_fun = sharded_jit(lambda a: lx.jvp(constrained_loss, (a,), (a,)), in_parts=(P(2, 1),),
                          out_parts=None)
    primal, tangent = jvp_fun(X)
    np.testing.assert_allclose(float(primal), np.sum(np.sin(3 * X)), rtol=1e-5)
    np.testing.assert_allclose(float(tangent), np.sum(np.cos(3 * X) * 3 * X), rtol=1e-4)
    vmap_fun = sharded_jit(lx.vmap(lambda r: jnp.sum(with_sharding_constraint(r * 2, P(2)))),
                           in_parts=(P(2, 1),), out_parts=None)
    np.testing.assert_allclose(np.asarray(vmap_fun(X)), (2 * X).sum(1))
