"""Compiling and calling executables: checks before jaxlib, donation, caching."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import (
    BuildOptions,
    Executable,
    Mesh,
    NamedSharding,
    P,
    SingleDeviceSharding,
    compile_module,
)
from lamina_interpreters_pxla import executable as ex
from lamina_interpreters_pxla.executable import CompileError, ExecutableCallError
from lamina_tracing_core.avals import ShapedArray

pytestmark = pytest.mark.skipif(px.device_count() < 8, reason="needs 8 CPU devices")

F32_4 = ShapedArray((4,), np.float32)
F32_8 = ShapedArray((8,), np.float32)

ADD = """
module @jit_add attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32> {jax.arg_info = "x"},
                         %b: tensor<4xf32> {jax.arg_info = "y['hi']"}) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

DOUBLE_DONATED = """
module @jit_double attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

SPMD_SIN = """
module @jit_sin attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @main(%a: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
      -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    %0 = stablehlo.sine %a : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""


def _add_executable(device_index: int = 0, **kwargs: object) -> Executable:
    d = px.devices()[device_index]
    loaded = compile_module(ADD, [d], name="jit_add")
    s = SingleDeviceSharding(d)
    return Executable(loaded, name="jit(add)", in_avals=[F32_4, F32_4], out_avals=[F32_4],
                      in_shardings=[s, s], out_shardings=[s], devices=[d],
                      arg_names=["x", "y['hi']"], **kwargs)  # type: ignore[arg-type]


def test_single_device_call_and_results() -> None:
    exe = _add_executable(2)
    x = px.device_put(np.arange(4, dtype=np.float32), px.devices()[2])
    out, = exe.call(x, np.ones(4, np.float32))
    assert isinstance(out, px.Array) and out.committed
    assert out.sharding == SingleDeviceSharding(px.devices()[2])
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert exe(x, x)[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert "add" in exe.as_text()
    assert "flops" in exe.cost_analysis()
    assert exe.memory_analysis().output_size_in_bytes == 16
    assert exe.runtime_executable() is exe.loaded


def test_uncommitted_arguments_are_moved_committed_ones_are_not() -> None:
    exe = _add_executable(2)
    uncommitted = px.device_put(np.ones(4, np.float32))  # on the default device
    assert exe.call(uncommitted, uncommitted)[0].tolist() == [2.0] * 4
    elsewhere = px.device_put(np.ones(4, np.float32), px.devices()[5])
    with pytest.raises(ExecutableCallError, match=r"argument 'y\['hi'\]' .* committed to "
                                                  r"SingleDeviceSharding\(device=CpuDevice"
                                                  r"\(id=5\)"):
        exe.call(uncommitted, elsewhere)


def test_argument_checks_name_the_argument() -> None:
    exe = _add_executable()
    good = px.device_put(np.ones(4, np.float32), px.devices()[0])
    with pytest.raises(ExecutableCallError, match=r"argument 'y\['hi'\]' has type f32\[3\] "
                                                  r"but the program expects f32\[4\]"):
        exe.call(good, np.ones(3, np.float32))
    with pytest.raises(ExecutableCallError, match=r"argument 'x' has type i32\[4\]"):
        exe.call(px.device_put(np.ones(4, np.int32), px.devices()[0]), good)
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        exe.call(good)
    dead = px.device_put(np.ones(4, np.float32), px.devices()[0])
    dead.delete()
    with pytest.raises(px.DeletedArrayError, match=r"jit\(add\): argument 'x': Array has been "
                                                   r"deleted with shape=f32\[4\]"):
        exe.call(dead, good)
    with pytest.raises(ExecutableCallError, match=r"argument 'x' is not a valid array"):
        exe.call("nope", good)


def test_device_order_is_checked_before_jaxlib() -> None:
    devs = px.devices()
    mesh = Mesh(np.array(devs), ("x",))
    sharding = NamedSharding(mesh, P("x"))
    loaded = compile_module(SPMD_SIN, devs, BuildOptions(num_partitions=8), name="jit_sin")
    exe = Executable(loaded, name="jit(sin)", in_avals=[F32_8], out_avals=[F32_8],
                     in_shardings=[sharding], out_shardings=[sharding], devices=devs,
                     options=BuildOptions(num_partitions=8), arg_names=["x"])
    x = px.device_put(np.arange(8, dtype=np.float32), sharding)
    out, = exe.call(x)
    np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(8)), rtol=1e-6)
    assert out.sharding == sharding
    np.testing.assert_allclose(np.asarray(exe.call(np.arange(8, dtype=np.float32))[0]),
                               np.sin(np.arange(8)), rtol=1e-6)
    # same devices, other order: jaxlib would crash; lamina refuses with a clear error
    reversed_sharding = NamedSharding(Mesh(np.array(devs[::-1]), ("x",)), P("x"))
    y = px.device_put(np.arange(8, dtype=np.float32), reversed_sharding)
    with pytest.raises(ExecutableCallError, match="argument 'x' of type f32\\[8\\] is "
                                                  "committed to"):
        exe.call(y)
    with pytest.raises(ExecutableCallError, match="not the program's devices"):
        Executable(loaded, name="bad", in_avals=[F32_8], out_avals=[F32_8],
                   in_shardings=[reversed_sharding], out_shardings=[sharding], devices=devs,
                   options=BuildOptions(num_partitions=8))
    # without out_shardings the executable reports XLA's choice
    chosen = Executable(loaded, name="jit(sin)", in_avals=[F32_8], out_avals=[F32_8],
                        in_shardings=[sharding], out_shardings=None, devices=devs,
                        options=BuildOptions(num_partitions=8))
    assert chosen.out_shardings[0].is_equivalent_to(sharding, 1)


def test_compile_checks_and_cache() -> None:
    d = px.devices()[1]
    before = dict(ex.compile_stats)
    a = compile_module(ADD, [d])
    b = compile_module(ADD, [d])
    assert a is b
    assert ex.compile_stats["hits"] >= before["hits"] + 1
    assert compile_module(ADD, [px.devices()[2]]) is not a
    with pytest.raises(CompileError, match="2 devices were given for 1 replicas x 1 "
                                           "partitions"):
        compile_module(ADD, px.devices()[:2])
    with pytest.raises(CompileError, match="appears twice"):
        compile_module(SPMD_SIN, [d] * 8, BuildOptions(num_partitions=8))
    with pytest.raises(CompileError, match="XLA could not compile jit_bad"):
        compile_module(ADD.replace("4xf32>\n    return", "5xf32>\n    return"), [d],
                       name="jit_bad")


def test_donation_deletes_inputs_and_later_use_names_the_call() -> None:
    d = px.devices()[0]
    loaded = compile_module(DOUBLE_DONATED, [d], name="jit_double")
    s = SingleDeviceSharding(d)
    exe = Executable(loaded, name="jit(double)", in_avals=[F32_4], out_avals=[F32_4],
                     in_shardings=[s], out_shardings=[s], devices=[d], arg_names=["x"],
                     donated_invars=[True])
    x = px.device_put(np.arange(4, dtype=np.float32), d)
    out, = exe.call(x)
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert x.is_deleted()
    with pytest.raises(px.DeletedArrayError, match=r"donated to jit\(double\)"):
        np.asarray(x)
    with pytest.raises(px.DeletedArrayError, match=r"argument 'x': Array has been deleted.*"
                                                   r"donated to jit\(double\)"):
        exe.call(x)
    with pytest.raises(ExecutableCallError, match="same buffer is passed"):
        two = _add_executable(0, donated_invars=[True, False])
        y = px.device_put(np.ones(4, np.float32), d)
        two.call(y, y)


def test_unusable_donation_is_a_warning() -> None:
    exe = _add_executable(3, donated_invars=[True, False])
    x = px.device_put(np.ones(4, np.float32), px.devices()[3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, = exe.call(x, x + 0)
    assert out.tolist() == [2.0] * 4
    assert not x.is_deleted()
    assert any("donated buffers were not usable" in str(w.message) for w in caught)


def test_kept_var_idx_prunes_unused_arguments() -> None:
    d = px.devices()[0]
    loaded = compile_module(ADD, [d])
    s = SingleDeviceSharding(d)
    exe = Executable(loaded, name="jit(f)", in_avals=[F32_4, ShapedArray((), np.int32), F32_4],
                     out_avals=[F32_4], in_shardings=[s, s, s], out_shardings=[s],
                     devices=[d], kept_var_idx=[0, 2])
    out, = exe.call(np.ones(4, np.float32), "ignored", np.ones(4, np.float32))
    assert out.tolist() == [2.0] * 4


def test_async_dispatch_and_block_until_ready() -> None:
    exe = _add_executable()
    x = px.device_put(np.ones(4, np.float32), px.devices()[0])
    outs = [exe.call(x, x)[0] for _ in range(5)]
    tree = {"outs": outs, "other": 3}
    assert px.block_until_ready(tree) is tree
    assert all(o.is_ready() for o in outs)
    dead = exe.call(x, x)[0]
    dead.delete()
    with pytest.raises(px.DeletedArrayError, match="block_until_ready"):
        px.block_until_ready([dead])
