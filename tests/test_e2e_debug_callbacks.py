"""Run-time debugging: effects in jaxprs, host callbacks, ``lamina.debug``.

The printed output is captured at the file-descriptor level (``capfd``), as a
user sees it; ordered output is checked line by line, unordered output by
content. Expected lines follow JAX 0.10.2's (``jax.debug.print`` prints the
same ``str.format`` of the values; under ``vmap`` one line per element).
"""

from __future__ import annotations

import re
import sys

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.experimental import io_callback
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.callbacks import CallbackError
from lamina_tracing_core.effects import OrderedDebug, OrderedIO, UnorderedDebug


def _lines(capfd: pytest.CaptureFixture[str]) -> list[str]:
    lx.effects_barrier()
    return capfd.readouterr().out.splitlines()


# --- effects in the jaxpr ---------------------------------------------------------------
def test_effects_reach_the_jaxpr_through_control_flow_jit_and_checkpoint() -> None:
    def body(i, c):
        lx.debug.print("i={}", i, ordered=True)
        return c + 1.0

    def f(x):
        y = lx.lax.fori_loop(0, 2, body, x)
        z = lx.lax.cond(x > 0, lambda v: (lx.debug.print("pos"), v)[1], lambda v: v, y)
        w = lx.checkpoint(lambda v: (lx.debug.callback(lambda a: None, v), v * 2)[1])(z)
        return lx.jit(lambda v: (io_callback(lambda a: a, lx.ShapeDtypeStruct((), np.float32),
                                             v, ordered=True), v)[1])(w)

    closed = lx.make_jaxpr(f)(1.0)
    assert closed.effects == {OrderedDebug, UnorderedDebug, OrderedIO}
    # every equation that calls back is kept although nothing reads its results
    dced, _ = pe.dce_closed_jaxpr(closed, [True], instantiate=True)
    assert dced.effects == closed.effects
    g = lx.jit(lambda x: lx.lax.fori_loop(0, 2, body, x) * x)
    assert OrderedDebug in lx.make_jaxpr(lx.grad(g))(1.0).effects
    with pytest.raises(ValueError, match=r"io_callback\(<lambda>\).*cannot be differentiated"):
        lx.grad(f)(1.0)


def test_ordered_effects_thread_a_token_through_the_module() -> None:
    def f(x):
        lx.debug.print("a {}", x, ordered=True)
        x = lx.lax.fori_loop(0, 2, lambda i, c: (lx.debug.print("{}", i, ordered=True),
                                                 c + 1.0)[1], x)
        return x

    text = lx.jit(f).lower(1.0).as_text()
    assert "xla_ffi_python_cpu_callback" in text
    # main takes and returns the token (bool[0]); the loop carries a !stablehlo.token
    assert re.search(r"@main\(%arg0: tensor<0xi1> \{jax.token = true\}", text)
    assert "!stablehlo.token" in text.split("stablehlo.while")[1].split("cond")[0]


def test_ordered_prints_across_three_jitted_calls_come_in_program_order(capfd) -> None:
    @lx.jit
    def step(x):
        lx.debug.print("start {}", x, ordered=True)
        y = x * 2
        lx.debug.print("middle {y}", y=y, ordered=True)
        lx.debug.print("end {}", y + 1, ordered=True)
        return y

    for i in range(3):
        step(jnp.float32(i))
    assert _lines(capfd) == ["start 0.0", "middle 0.0", "end 1.0",
                             "start 1.0", "middle 2.0", "end 3.0",
                             "start 2.0", "middle 4.0", "end 5.0"]


# --- debug.print under every transformation ----------------------------------------------
def test_print_eager_jit_vmap_grad_and_control_flow(capfd) -> None:
    def f(x):
        lx.debug.print("x={} twice={t}", x, t=x * 2)
        return jnp.sin(x)

    f(1.0)
    lx.jit(f)(1.0)
    assert _lines(capfd) == ["x=1.0 twice=2.0"] * 2
    lx.vmap(lx.jit(f))(jnp.arange(3.0))  # one line per batch element, in order
    assert _lines(capfd) == ["x=0.0 twice=0.0", "x=1.0 twice=2.0", "x=2.0 twice=4.0"]
    g = lx.jit(lx.grad(f))(0.0)  # the forward pass prints (primal values)
    assert float(g) == 1.0
    assert _lines(capfd) == ["x=0.0 twice=0.0"]

    def loops(x):
        def body(c, t):
            lx.debug.print("scan t={} c={}", t, c, ordered=True)
            return c + t, c

        c, _ = lx.lax.scan(body, x, jnp.arange(3.0))
        c = lx.lax.while_loop(lambda c: c < 6.0, lambda c: (
            lx.debug.print("while {}", c, ordered=True), c + 2.0)[1], c)
        return lx.lax.cond(c > 5.0, lambda c: (lx.debug.print("big {}", c, ordered=True), c)[1],
                           lambda c: c, c)

    assert float(lx.jit(loops)(1.0)) == 6.0
    assert _lines(capfd) == ["scan t=0.0 c=1.0", "scan t=1.0 c=1.0", "scan t=2.0 c=2.0",
                             "while 4.0", "big 6.0"]


def test_print_inside_pmap_prints_once_per_device(capfd, devices8) -> None:
    @lx.pmap
    def f(x):
        lx.debug.print("device value {}", x)
        return x * 2

    out = f(jnp.arange(8.0))
    np.testing.assert_allclose(np.asarray(out), np.arange(8.0) * 2)
    lines = _lines(capfd)
    assert sorted(lines) == sorted(f"device value {float(i)}" for i in range(8))
    with pytest.raises(ValueError, match="Ordered effects not supported in `pmap`"):
        lx.pmap(lambda x: (lx.debug.print("{}", x, ordered=True), x)[1])(jnp.arange(8.0))



def test_print_and_pure_callback_inside_shard_map_run_per_block(capfd, devices8) -> None:
    # an Auto axis: under make_mesh's default Explicit axes in_specs P("i") must match the
    # argument's type (JAX 0.10's rule), and arange(8.0) is unsharded
    mesh = lx.make_mesh((8,), ("i",), axis_types=(lx.sharding.AxisType.Auto,))

    def body(x):
        lx.debug.print("block {}", x)
        y = lx.pure_callback(lambda a: a + 1, lx.ShapeDtypeStruct(x.shape, x.dtype), x)
        return lx.lax.psum(y, "i")

    f = lx.jit(lx.shard_map(body, mesh=mesh, in_specs=lx.P("i"), out_specs=lx.P()))
    np.testing.assert_allclose(np.asarray(f(jnp.arange(8.0))), [36.0])
    assert sorted(_lines(capfd)) == sorted(f"block [{i}.]" for i in range(8))


# --- callbacks -------------------------------------------------------------------------------
def test_pure_callback_jit_eager_and_vmap_methods() -> None:
    calls: list[tuple[int, ...]] = []

    def host_sin(a):
        calls.append(np.shape(a))
        return np.sin(a).astype(a.dtype)

    def f(x, vmap_method=None):
        return lx.pure_callback(host_sin, lx.ShapeDtypeStruct(x.shape, x.dtype), x,
                                vmap_method=vmap_method)

    x = jnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(lx.jit(f)(x)), np.sin(np.arange(3.0)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(np.arange(3.0)), rtol=1e-6)
    xs = jnp.arange(6.0).reshape(2, 3)
    for method, shapes in (("sequential", [(3,), (3,)]), ("expand_dims", [(2, 3)]),
                           ("broadcast_all", [(2, 3)])):
        calls.clear()
        out = lx.jit(lx.vmap(lambda v, m=method: f(v, m)))(xs)
        np.testing.assert_allclose(np.asarray(out), np.sin(np.arange(6.0)).reshape(2, 3),
                                   rtol=1e-6)
        assert calls == shapes, method
    with pytest.raises(ValueError, match="vmap_method"):
        lx.vmap(f)(xs)


def test_pure_callback_is_not_differentiable_unless_wrapped_in_custom_jvp() -> None:
    def f(x):
        return lx.pure_callback(np.sin, lx.ShapeDtypeStruct((), np.float32), x)

    with pytest.raises(ValueError, match=r"pure_callback\(sin\).*custom_jvp"):
        lx.grad(f)(1.0)

    @lx.custom_jvp
    def g(x):
        return f(x)

    g.defjvp(lambda p, t: (g(p[0]), jnp.cos(p[0]) * t[0]))
    assert abs(float(lx.jit(lx.grad(g))(0.5)) - float(np.cos(0.5))) < 1e-6


def test_io_callback_ordered_runs_in_order_and_is_kept() -> None:
    seen: list[float] = []

    def record(v):
        seen.append(float(v))
        return np.float32(v * 10)

    @lx.jit
    def f(x):
        io_callback(record, lx.ShapeDtypeStruct((), np.float32), x, ordered=True)  # unused
        return io_callback(record, lx.ShapeDtypeStruct((), np.float32), x + 1, ordered=True)

    assert float(f(1.0)) == 20.0
    assert float(f(5.0)) == 60.0
    assert seen == [1.0, 2.0, 5.0, 6.0]
    with pytest.raises(ValueError, match="ordered io_callback cannot be vmapped"):
        lx.vmap(f)(jnp.arange(2.0))


def test_callback_exception_names_the_callback_and_the_function() -> None:
    def exploding(v):
        raise KeyError("no such entry")

    def loss(params):
        lx.debug.callback(exploding, params["w"])
        return params["w"] * 2

    with pytest.raises(CallbackError) as info:
        lx.jit(loss)({"w": 1.0})
    message = str(info.value)
    assert "debug.callback(exploding)" in message and "jit(loss)" in message
    assert "test_e2e_debug_callbacks.py" in message
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(CallbackError, match="eagerly"):
        loss({"w": 1.0})
    # a wrong result type is an error naming the callback, not a wrong number
    with pytest.raises(CallbackError, match=r"result 0 is float32\[2\]"):
        lx.jit(lambda x: lx.pure_callback(lambda a: np.zeros(2, np.float32),
                                          lx.ShapeDtypeStruct((), np.float32), x))(1.0)


def test_callbacks_refuse_tpu_and_multi_platform_lowering() -> None:
    def f(x):
        lx.debug.print("{}", x)
        return x

    with pytest.raises(Exception, match="no host callback mechanism for platform 'tpu'"):
        lx.jit(f).trace(1.0).lower(lowering_platforms=("tpu",))
    with pytest.raises(Exception, match="several platforms"):
        lx.jit(f).trace(1.0).lower(lowering_platforms=("cpu", "cuda"))
    assert "xla_ffi_python_gpu_callback" in lx.jit(f).trace(1.0).lower(
        lowering_platforms=("cuda",)).as_text()


def test_breakpoint_stops_in_pdb_with_runtime_values(capfd, monkeypatch) -> None:
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.StringIO("p y\nc\n"))

    @lx.jit
    def f(x):
        y = x * 3
        lx.debug.breakpoint()
        return y

    f(2.0)
    out = capfd.readouterr().out
    assert "debug.breakpoint at" in out and "array(6., dtype=float32)" in out


def test_visualize_array_sharding_plain_text(capfd, devices8, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # the plain picture: as without the extra
    mesh = lx.sharding.Mesh(np.array(devices8).reshape(4, 2), ("a", "b"))
    x = lx.device_put(jnp.zeros((8, 4)), lx.NamedSharding(mesh, lx.P("a", "b")))
    lx.debug.visualize_array_sharding(x)
    out = capfd.readouterr().out
    assert out.count("CPU ") == 8 and "CPU 0 " in out and "CPU 7 " in out
    assert len(out.strip().splitlines()) == 9  # 4 rows of cells between 5 rules
    seen = []
    lx.debug.inspect_array_sharding(x, callback=seen.append)
    assert seen == [x.sharding]


def test_a_module_with_callbacks_refuses_export() -> None:
    def f(x):
        lx.debug.print("x={}", x)
        return x + 1

    with pytest.raises(ValueError, match=r"cannot export jit\(f\).*debug.print\('x=\{\}'\)"):
        lx.jit(f).trace(1.0).lower().export()
    with pytest.raises(ValueError, match="cannot export"):
        lx.export.export(lx.jit(f))(1.0)


def test_callbacks_in_an_spmd_program_run_once(capfd, devices8) -> None:
    mesh = lx.sharding.Mesh(np.array(devices8), ("a",))
    x = lx.device_put(jnp.arange(16.0), lx.NamedSharding(mesh, lx.P("a")))

    @lx.jit
    def f(x):
        lx.debug.print("sum {}", jnp.sum(x))
        return lx.pure_callback(lambda a: a * 2, lx.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    np.testing.assert_allclose(np.asarray(f(x)), np.arange(16.0) * 2 + 1)
    assert _lines(capfd) == ["sum 120.0"]
    # as JAX's: an ordered effect has no single order over several devices
    with pytest.raises(ValueError, match=r"ordered effects are not supported for more than 1 "
                                         r"device: \[OrderedDebug\] \(jit\(<lambda>\) runs on 8 "
                                         r"devices"):
        lx.jit(lambda x: (lx.debug.print("{}", x, ordered=True), x)[1])(x)


def test_inspect_array_sharding_inside_jit(devices8) -> None:
    mesh = lx.sharding.Mesh(np.array(devices8), ("a",))
    x = lx.device_put(jnp.arange(16.0), lx.NamedSharding(mesh, lx.P("a")))
    seen = []

    @lx.jit
    def f(v):
        lx.debug.inspect_array_sharding(v * 2, callback=seen.append)
        return v + 1

    f(x)
    assert len(seen) == 1 and seen[0].is_equivalent_to(x.sharding, 1)
    seen.clear()
    lx.jit(lambda v: (lx.debug.inspect_array_sharding(v, callback=seen.append), v)[1])(1.0)
    assert len(seen) == 1 and seen[0].num_devices == 1


def test_ordered_effects_with_donation_and_aot(capfd) -> None:
    def f(x):
        lx.debug.print("aot {}", x, ordered=True)
        return x * 2

    compiled = lx.jit(f).trace(1.0).lower().compile()
    assert float(compiled(3.0)) == 6.0
    x = jnp.arange(3.0)
    out = lx.jit(f, donate_argnums=0)(x)  # the alias skips the token result
    np.testing.assert_allclose(np.asarray(out), [0.0, 2.0, 4.0])
    assert x.is_deleted()
    assert _lines(capfd) == ["aot 3.0", "aot [0. 1. 2.]"]
