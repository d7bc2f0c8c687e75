"""Memory kinds and memory spaces on CPU, as JAX 0.10.2 has them.

Every expected value below is JAX 0.10.2's answer to the same program on a
CPU client with eight devices (``device``, ``pinned_host`` and
``unpinned_host`` memories): types of ``pinned_host`` data are in the
``Host`` memory space (``float32<host>[4]``), a primitive's results take
their operands' common space, and compiled programs put their results in
the memory the types or the ``out_shardings`` say.
"""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as lnp
from lamina.core import ShapedArray
from lamina.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

Space = lx.memory.Space


def _host(d: object = None) -> SingleDeviceSharding:
    return SingleDeviceSharding(d or lx.devices()[0], memory_kind="pinned_host")


def _device() -> SingleDeviceSharding:
    return SingleDeviceSharding(lx.devices()[0], memory_kind="device")


def _on_host(x: object) -> lx.Array:
    return lx.device_put(x, _host())


def _body(closed: object) -> str:
    """A jaxpr's text without lamina's ``# args: ...`` header line."""
    return "\n".join(line for line in str(closed).splitlines() if not line.startswith("#"))


# --- the memory-space enum ----------------------------------------------------------
def test_memory_space_enum():
    assert list(Space) == [Space.Device, Space.Host, Space.Any]
    assert repr(Space.Host) == "MemorySpace.Host"
    assert str(Space.Device) == "MemorySpace.Device"


def test_memory_is_no_importable_module_under_the_alias():
    from lamina.compat import NOT_IMPORTABLE
    assert "memory" in NOT_IMPORTABLE


def test_shaped_array_memory_space():
    host = ShapedArray((3,), np.float32, memory_space=Space.Host)
    assert repr(host) == "ShapedArray(float32<host>[3])"
    assert str(host) == "float32<host>[3]"
    assert host != ShapedArray((3,), np.float32)
    assert ShapedArray((3,), np.float32).memory_space is Space.Device
    assert str(ShapedArray((3,), np.float32).update(memory_space=Space.Host)) == \
        "float32<host>[3]"
    assert host.update(shape=(2,)).memory_space is Space.Host


def test_shaped_array_rejects_a_non_space():
    with pytest.raises(TypeError, match="memory_space must be a MemorySpace"):
        ShapedArray((3,), np.float32, memory_space="pinned_host")  # type: ignore[arg-type]


# --- types of placed arrays ---------------------------------------------------------------
def test_memories_of_a_cpu_device():
    d = lx.devices()[0]
    assert [m.kind for m in d.addressable_memories()] == ["device", "pinned_host",
                                                           "unpinned_host"]


def test_types_of_arrays_in_host_memory():
    x = _on_host(lnp.arange(4.0))
    assert x.sharding.memory_kind == "pinned_host"
    assert str(lx.typeof(x)) == "float32<host>[4]"
    assert repr(lx.typeof(x)) == "ShapedArray(float32<host>[4])"
    assert str(x.aval) == "float32<host>[4]"
    assert x.aval.memory_space is Space.Host
    assert repr(x) == "Array([0., 1., 2., 3.], dtype=float32)"
    assert np.asarray(x).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert lnp.ones(2).aval.memory_space is Space.Device


def test_unpinned_host_is_the_device_space():
    d = lx.devices()[0]
    xu = lx.device_put(lnp.arange(4.0), SingleDeviceSharding(d, memory_kind="unpinned_host"))
    assert xu.sharding.memory_kind == "unpinned_host"
    assert str(lx.typeof(xu)) == "float32[4]"


def test_unknown_memory_kind():
    d = lx.devices()[0]
    with pytest.raises(ValueError, match="Could not find memory addressable by device cpu. "
                       "Device cpu can address the following memory kinds: device, "
                       "pinned_host, unpinned_host. Got memory kind: hbm"):
        SingleDeviceSharding(d, memory_kind="hbm")


def test_back_to_device_memory():
    y = lx.device_put(_on_host(lnp.arange(4.0)), _device())
    assert y.sharding.memory_kind == "device"
    assert str(lx.typeof(y)) == "float32[4]"


# --- jaxprs -------------------------------------------------------------------------------
def test_jaxpr_prints_host_types():
    x = _on_host(lnp.arange(4.0))
    assert _body(lx.make_jaxpr(lambda a: a * 2)(x)) == (
        "{ lambda ; a:f32<host>[4]. let b:f32<host>[4] = mul a 2.0:f32[] in (b,) }")
    assert _body(lx.make_jaxpr(lambda a: a.sum())(x)) == (
        "{ lambda ; a:f32<host>[4]. let\n"
        "    b:f32<host>[] = reduce_sum[axes=(0,) out_sharding=None] a\n"
        "  in (b,) }")
    assert _body(lx.make_jaxpr(lambda a, b: a * b)(x, lnp.ones(()))) == (
        "{ lambda ; a:f32<host>[4] b:f32[]. let c:f32<host>[4] = mul a b in (c,) }")
    assert _body(lx.make_jaxpr(lx.vmap(lambda a: a * 2))(x)) == (
        "{ lambda ; a:f32<host>[4]. let b:f32<host>[4] = mul a 2.0:f32[] in (b,) }")


def test_scalars_do_not_carry_their_space():
    s = _on_host(lnp.float32(3))
    assert _body(lx.make_jaxpr(lambda a: a * 2)(s)) == (
        "{ lambda ; a:f32<host>[]. let b:f32[] = mul a 2.0:f32[] in (b,) }")
    assert (s * 2).sharding.memory_kind == "device"


def test_a_result_without_operands_is_on_the_device():
    closed = lx.make_jaxpr(lambda: lx.lax.iota(np.float32, 4))()
    assert closed.out_avals[0].memory_space is Space.Device


def test_control_flow_keeps_the_space():
    x = _on_host(lnp.arange(4.0))
    closed = lx.make_jaxpr(lambda a: lx.lax.cond(True, lambda v: v * 2, lambda v: v, a))(x)
    assert str(closed.out_avals[0]) == "float32<host>[4]"
    assert "e:f32<host>[4] = mul" in str(closed) or "f:f32<host>[4] = mul" in str(closed)


def test_device_put_sets_the_space_under_jit():
    text = _body(lx.make_jaxpr(lambda a: lx.device_put(a * 2, _host()))(lnp.ones(3)))
    assert "c:f32<host>[3] = device_put[" in text
    back = _body(lx.make_jaxpr(lambda a: lx.device_put(a, _device()))(_on_host(lnp.ones(4))))
    assert back.startswith("{ lambda ; a:f32<host>[4]. let\n    b:f32[4] = device_put[")


MIXED = ("memory_space of all inputs passed to `mul` must be the same. Got one operand with "
         "type: float32<host>[4] and another operand with type: float32[4]")


@pytest.mark.parametrize("how", ["eager", "jit", "make_jaxpr"])
def test_operands_in_different_spaces(how):
    x = _on_host(lnp.arange(4.0))
    f = lambda a, b: a * b  # noqa: E731
    run = {"eager": f, "jit": lx.jit(f), "make_jaxpr": lx.make_jaxpr(f)}[how]
    with pytest.raises(ValueError) as e:
        run(x, lnp.ones(4))
    assert str(e.value).startswith(MIXED)
    if how == "eager":
        xu = lx.device_put(lnp.arange(4.0), SingleDeviceSharding(lx.devices()[0],
                                                                 memory_kind="unpinned_host"))
        with pytest.raises(ValueError, match="memory_space of all inputs passed to `mul`"):
            x * xu


# --- execution ------------------------------------------------------------------------------
def test_eager_results_stay_in_host_memory():
    x = _on_host(lnp.arange(4.0))
    y = x + 1
    assert y.sharding.memory_kind == "pinned_host"
    assert str(y.aval) == "float32<host>[4]"
    assert np.asarray(y).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert x.sum().sharding.memory_kind == "pinned_host"
    xu = lx.device_put(lnp.arange(4.0), SingleDeviceSharding(lx.devices()[0],
                                                             memory_kind="unpinned_host"))
    assert (xu + 1).sharding.memory_kind == "device"


def test_jit_results():
    x = _on_host(lnp.arange(4.0))
    assert lx.jit(lambda a: a * 2)(x).sharding.memory_kind == "pinned_host"
    outs = lx.jit(lambda a, b: (a, b * 2))(x, lnp.ones(3))
    assert [o.sharding.memory_kind for o in outs] == ["pinned_host", "device"]
    assert lx.jit(lambda a: lx.device_put(a, _device()) * 3)(x).sharding.memory_kind == "device"


def test_jit_out_shardings_in_host_memory():
    out = lx.jit(lambda a: a * 2, out_shardings=_host())(lnp.ones(3))
    assert out.sharding.memory_kind == "pinned_host"
    assert np.asarray(out).tolist() == [2.0, 2.0, 2.0]
    back = lx.jit(lambda a: a * 2, out_shardings=_device())(_on_host(lnp.arange(4.0)))
    assert back.sharding.memory_kind == "device"


def test_device_put_to_host_inside_jit():
    out = lx.jit(lambda a: lx.device_put(a * 2, _host()))(lnp.ones(3))
    assert out.sharding.memory_kind == "pinned_host"
    assert np.asarray(out).tolist() == [2.0, 2.0, 2.0]


def test_named_sharding_in_host_memory(devices8):
    mesh = lx.make_mesh((8,), ("x",))
    s = NamedSharding(mesh, P("x"), memory_kind="pinned_host")
    x = lx.device_put(lnp.arange(8.0), s)
    assert x.sharding.memory_kind == "pinned_host"
    assert str(lx.typeof(x)) == "float32<host>[8@x]"
    y = x + 1
    assert y.sharding == s
    assert lx.jit(lambda a: a + 1)(x).sharding.memory_kind == "pinned_host"


# --- lowering -------------------------------------------------------------------------------
def _main_signature(lowered: object) -> str:
    return next(line.strip() for line in lowered.as_text().splitlines()  # type: ignore[attr-defined]
                if "func.func public @main" in line)


def test_lowering_of_host_arguments_and_results():
    x = _on_host(lnp.arange(4.0))
    sig = _main_signature(lx.jit(lambda a: a * 2).lower(x))
    # JAX: mhlo.memory_kind on the argument and the result; lamina keeps its names
    assert sig == ('func.func public @main(%arg0: tensor<4xf32> {jax.arg_info = "a", '
                   'mhlo.memory_kind = "pinned_host"}) -> (tensor<4xf32> {jax.result_info = '
                   '"result", mhlo.memory_kind = "pinned_host"}) {')
    text = lx.jit(lambda a: a * 2).lower(x).as_text()
    assert "annotate_device_placement" not in text


def test_lowering_of_host_out_shardings():
    text = lx.jit(lambda a: a * 2, out_shardings=_host()).lower(lnp.ones(3)).as_text()
    assert ('-> (tensor<3xf32> {jax.result_info = "result", mhlo.memory_kind = '
            '"pinned_host"})') in text
    assert ('stablehlo.custom_call @annotate_device_placement(%1) {backend_config = "", '
            'has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = '
            '"pinned_host"}} : (tensor<3xf32>) -> tensor<3xf32>') in text
    assert 'jax.arg_info = "a"' in text


def test_lowering_of_mixed_results_and_unpinned_arguments():
    x = _on_host(lnp.arange(4.0))
    sig = _main_signature(lx.jit(lambda a, b: (a, b * 2)).lower(x, lnp.ones(3)))
    assert '"result[0]", mhlo.memory_kind = "pinned_host"' in sig
    assert '"result[1]", mhlo.memory_kind = "device"' in sig
    xu = lx.device_put(lnp.arange(4.0), SingleDeviceSharding(lx.devices()[0],
                                                             memory_kind="unpinned_host"))
    sig = _main_signature(lx.jit(lambda a: a * 2).lower(xu))
    assert 'mhlo.memory_kind = "unpinned_host"' in sig
    assert '"result", mhlo.memory_kind = "device"' in sig


def test_lowering_in_device_memory_names_no_memory_kind():
    xd = lx.device_put(lnp.arange(4.0), _device())
    assert "memory_kind" not in lx.jit(lambda a: a * 2).lower(xd).as_text()
