"""``set_mesh``'s mesh is where computations without committed inputs run
(JAX 0.10's context mesh), eagerly and under jit; ``with mesh:`` is not.
Expected shardings, committed flags and error texts are JAX 0.10.2's."""

import re

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.sharding import AxisType, NamedSharding
from lamina.sharding import PartitionSpec as P


def _mesh(kind):
    return lx.make_mesh((4, 2), ("x", "y"), axis_types=(kind, kind))


@pytest.mark.parametrize("kind, replicated", [(AxisType.Explicit, P(None)),
                                              (AxisType.Auto, P())])
def test_uncommitted_work_runs_on_the_context_mesh(devices8, kind, replicated):
    mesh = _mesh(kind)
    with lx.set_mesh(mesh):
        made = {
            "zeros": jnp.zeros(4),
            "arange": jnp.arange(4),
            "jit without arguments": lx.jit(lambda: jnp.zeros(4))(),
            "jit of a host array": lx.jit(lambda a: a * 2)(np.ones(3)),
            "op on uncommitted": jnp.ones(3) + 1,
        }
        for what, value in made.items():
            assert value.sharding == NamedSharding(mesh, replicated), what
            assert value.sharding.spec == replicated, what
            assert value.committed, what
        # a host array becomes a committed, replicated array on the mesh
        host = jnp.asarray(np.ones(3))
        assert host.committed and host.sharding == NamedSharding(mesh, P())
        # device_put without a sharding keeps its single-device meaning
        assert not lx.device_put(np.ones(3)).committed
        x = lx.device_put(jnp.arange(32.0).reshape(8, 4), P("x", "y"))
        assert x.sum().sharding.spec == P()
        assert lx.jit(lambda a: a.sum())(x).sharding.spec == P()
        assert (x + 1).sharding.spec == P("x", "y")
        assert x.T.sharding.spec == P("y", "x")
    # outside the block: back to the default device
    assert jnp.zeros(2).sharding == lx.sharding.SingleDeviceSharding(lx.devices()[0])


def test_with_mesh_is_not_a_context_mesh(devices8):
    mesh = _mesh(AxisType.Auto)
    with pytest.warns(DeprecationWarning, match=re.escape(
            "`with mesh:` context manager has been deprecated. Please use `with "
            "jax.set_mesh(mesh):` instead.")), mesh:
        assert jnp.zeros(4).sharding == lx.sharding.SingleDeviceSharding(lx.devices()[0])
        assert lx.jit(lambda: jnp.zeros(4))().sharding == \
            lx.sharding.SingleDeviceSharding(lx.devices()[0])


def test_committed_inputs_elsewhere_are_an_error(devices8):
    mesh = _mesh(AxisType.Explicit)
    elsewhere = lx.device_put(np.ones(8, np.float32), lx.devices()[3])
    with lx.set_mesh(mesh):
        context = ("and with device ids [3] on platform CPU and jit's context mesh with device "
                   "ids [0, 1, 2, 3, 4, 5, 6, 7] on platform CPU")
        with pytest.raises(ValueError, match=re.escape(
                "Received incompatible devices for jitted computation. Got argument a of "
                "<lambda> with shape float32[8] " + context)):
            lx.jit(lambda a: a + 1)(elsewhere)
        with pytest.raises(ValueError, match=re.escape(
                "Received incompatible devices for jitted computation. Got argument 0 of add "
                "with shape f32[8] " + context)):
            elsewhere + 1


def test_jit_follows_a_changed_context_mesh(devices8):
    """A function jitted under one mesh and called under another is placed
    (and its bare PartitionSpecs resolved) by the second."""
    whole = lx.make_mesh((8,), ("i",))
    half = lx.make_mesh((4,), ("i",), devices=lx.devices()[4:])
    f = lx.jit(lambda a: lx.sharding.reshard(a, P("i")))
    x = np.arange(8.0)
    with lx.set_mesh(whole):
        assert f(x).sharding == NamedSharding(whole, P("i"))
    with lx.set_mesh(half):
        assert f(x).sharding == NamedSharding(half, P("i"))
    with lx.set_mesh(whole):
        assert f(x).sharding == NamedSharding(whole, P("i"))
