"""Meshes with axis types, set_mesh, and shardings in types (JAX 0.10's
explicit sharding): typeof, the propagation rules of jnp operations, their
errors naming the operands, reshard / with_sharding_constraint inside jit,
auto_axes / explicit_axes, and the lamina.sharding names. Expected strings
are JAX 0.10.2's (typeof forms and error wording recorded from it)."""

import re

import lamina as lx
import lamina.core
import lamina.lax as lax
import lamina.numpy as jnp
import lamina.sharding as shd
import numpy as np
import pytest
from lamina.sharding import AxisType, NamedSharding, reshard
from lamina.sharding import PartitionSpec as P


@pytest.fixture
def mesh(devices8):
    return lx.make_mesh((4, 2), ("X", "Y"))


def test_mesh_axis_types(devices8):
    explicit = lx.make_mesh((4, 2), ("X", "Y"))
    assert explicit.axis_types == (AxisType.Explicit, AxisType.Explicit)
    # JAX 0.10.2's texts
    assert repr(explicit) == ("Mesh(axis_sizes=(4, 2), axis_names=('X', 'Y'), "
                              "axis_types=(Explicit, Explicit))")
    assert str(explicit) == "Mesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit))"
    auto = shd.Mesh(np.array(devices8).reshape(4, 2), ("X", "Y"))
    assert auto.axis_types == (AxisType.Auto, AxisType.Auto)
    assert auto != explicit
    mixed = lx.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
    assert mixed.auto_axes == ("i",) and mixed.explicit_axes == ()
    assert repr(explicit.abstract_mesh) == \
        "AbstractMesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, " \
        "num_cores=None, platform=cpu)"
    assert repr(shd.AbstractMesh((2, 4), ("x", "y"))) == \
        "AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto))"
    assert repr(explicit.abstract_mesh.abstract_device) == \
        "AbstractDevice(device_kind=cpu, num_cores=None, platform=cpu)"
    assert repr(shd.get_abstract_mesh()) == "AbstractMesh((), axis_types=())"
    with lx.set_mesh(explicit) as m:
        assert m is explicit and shd.get_mesh() is explicit
        assert shd.get_abstract_mesh() == explicit.abstract_mesh
    assert shd.get_abstract_mesh().empty
    with pytest.raises(ValueError, match=r"Number of devices 8 must be >= the product of "
                                         r"mesh_shape \(4, 4\)"):
        lx.make_mesh((4, 4), ("a", "b"))


def test_typeof_and_propagation(mesh):
    with lx.set_mesh(mesh):
        x = lx.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("X", None))
        w = lx.device_put(np.ones((4, 6), np.float32), P(None, "Y"))
        assert str(lx.typeof(x)) == "float32[8@X,4]"
        assert str(lx.typeof(w)) == "float32[4,6@Y]"
        seen = {}

        @lx.jit
        def f(a, b):
            c = a @ b
            seen.update(c=str(lx.typeof(c)), s=str(lx.typeof(jnp.sum(c, axis=0))),
                        e=str(lx.typeof(jnp.sin(c) * 2 + 1)), t=str(lx.typeof(c.T)))
            return c

        out = f(x, w)
        assert seen == {"c": "float32[8@X,6@Y]", "s": "float32[6@Y]",
                        "e": "float32[8@X,6@Y]", "t": "float32[6@Y,8@X]"}
        assert str(lx.typeof(out)) == "float32[8@X,6@Y]"
        assert out.sharding == NamedSharding(mesh, P("X", "Y"))
        np.testing.assert_allclose(out, np.asarray(x) @ np.ones((4, 6)))


def test_typeof_of_unsharded_values_is_replicated_over_the_mesh(devices8):
    # JAX 0.10.2 types every value over a mesh: replicated over the current
    # abstract mesh (empty outside set_mesh) unless its type is split; an
    # array laid out over an Auto mesh shows that mesh's abstract form
    empty = "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None,))"
    committed = lx.device_put(jnp.ones(3), devices8[0])
    seen = []

    @lx.jit
    def f(a):
        seen.append(repr(lx.typeof(a).sharding))
        return a

    f(jnp.ones(3))
    lx.vmap(lambda a: seen.append(repr(lx.typeof(a).sharding)))(jnp.ones((2, 3)))
    assert [repr(lx.typeof(v).sharding) for v in (jnp.ones(3), committed, np.ones(3))] \
        == [empty] * 3
    assert seen == [empty, empty]
    assert repr(lx.typeof(1.0).sharding) == \
        "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P())"
    assert repr(lx.typeof(jnp.ones((2, 3))).sharding) == \
        "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None, None))"
    s = lx.typeof(committed).sharding
    assert s.is_fully_replicated and s.memory_kind is None and s.mesh.empty
    # the replicated sharding shown is no part of the type's identity
    assert lx.typeof(committed) == lamina.core.ShapedArray((3,), np.float32)
    assert str(lx.typeof(committed)) == "float32[3]"

    auto = lx.make_mesh((2,), ("x",), axis_types=(AxisType.Auto,))
    split = lx.device_put(jnp.ones(4), NamedSharding(auto, P("x")))
    on_auto = ("NamedSharding(mesh=AbstractMesh('x': 2, axis_types=(Auto,), device_kind=cpu, "
               "num_cores=None, platform=cpu), spec=P(None,))")
    assert repr(lx.typeof(split).sharding) == on_auto
    with lx.set_mesh(auto):
        assert repr(lx.typeof(jnp.ones(3)).sharding) == on_auto
    explicit = lx.make_mesh((2,), ("x",))
    typed = lx.typeof(lx.device_put(jnp.ones(4), NamedSharding(explicit, P("x")))).sharding
    assert repr(typed) == ("NamedSharding(mesh=AbstractMesh('x': 2, axis_types=(Explicit,), "
                           "device_kind=cpu, num_cores=None, platform=cpu), spec=P('x',))")
    assert not typed.is_fully_replicated


def test_reshard_and_constraint_inside_jit(mesh):
    with lx.set_mesh(mesh):
        x = lx.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("X", None))
        types = []

        @lx.jit
        def f(a):
            b = reshard(a, P(None, "Y"))
            c = lax.with_sharding_constraint(a * 2, P("X", None))
            types.extend([str(lx.typeof(b)), str(lx.typeof(c))])
            return b, c

        b, c = f(x)
        assert types == ["float32[8,4@Y]", "float32[8@X,4]"]
        assert b.sharding == NamedSharding(mesh, P(None, "Y"))
        assert c.sharding == NamedSharding(mesh, P("X", None))
        # Over all-Explicit axes a constraint asserts the type (JAX 0.10.2's text)
        for run in (lx.jit(lambda a: lax.with_sharding_constraint(a, P("Y", None))),
                    lambda a: lax.with_sharding_constraint(a, P("Y", None))):
            with pytest.raises(AssertionError, match=re.escape(
                    "`with_sharding_constraint` acts as an assert when all axes of mesh are of "
                    "type `Explicit`. The array sharding: P('X', None) did not match the "
                    "sharding provided: P('Y', None). Please use `jax.sharding.reshard` to "
                    "shard your input to the sharding you want.\n"
                    "(with_sharding_constraint: argument x: f32[8@X,4])")):
                run(x)
        eager = reshard(x, P())
        assert eager.sharding == NamedSharding(mesh, P(None, None))  # JAX: the full spec
        assert str(lx.typeof(eager)) == "float32[8,4]"


def test_ambiguous_results_name_the_operands(mesh):
    with lx.set_mesh(mesh):
        x = lx.device_put(np.ones((8, 4), np.float32), P("X", "Y"))
        z = lx.device_put(np.ones((4, 6), np.float32), P("Y", None))

        def matmul(lhs, rhs):
            return lhs @ rhs

        with pytest.raises(TypeError, match=r"(?s)Contracting dimensions are sharded and it is "
                           r"ambiguous.*lhs_contracting_spec=\('Y',\) and "
                           r"rhs_contracting_spec=\('Y',\).*float32\[8@X,4@Y\] \(from lhs\) and "
                           r"float32\[4@Y,6\] \(from rhs\) while tracing matmul"):
            lx.jit(matmul)(x, z)
        # an explicit out_sharding settles it
        out = lx.jit(lambda a, b: jnp.matmul(a, b, out_sharding=P("X", None)))(x, z)
        assert str(lx.typeof(out)) == "float32[8@X,6]"
        np.testing.assert_allclose(out, np.full((8, 6), 4.0))

        def add(a, b):
            return a + b

        y = lx.device_put(np.ones((8, 4), np.float32), P(None, "X"))
        with pytest.raises(TypeError, match=r"(?s)add operation with inputs: f32\[8@X,4\], "
                           r"f32\[8,4@X\] produces an illegally sharded result: "
                           r"f32\[8@X,4@X\].*\(from a\).*\(from b\)"):
            lx.jit(add)(lx.device_put(np.ones((8, 4), np.float32), P("X", None)), y)


def test_auto_and_explicit_axes(mesh):
    with lx.set_mesh(mesh):
        x = lx.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("X", None))
        inside = []

        def body(a):
            inside.append(str(lx.typeof(a)))
            return a * 2

        out = lx.jit(shd.auto_axes(body, out_sharding=P(None, "Y")))(x)
        assert inside == ["float32[8,4]"]
        assert str(lx.typeof(out)) == "float32[8,4@Y]"
        np.testing.assert_allclose(out, 2 * np.asarray(x))
    auto = lx.make_mesh((4, 2), ("X", "Y"), axis_types=(AxisType.Auto, AxisType.Auto))
    with lx.set_mesh(auto):
        x = lx.device_put(np.ones((8, 4), np.float32), P("X", None))
        assert str(lx.typeof(x)) == "float32[8,4]"
        seen = []

        def body2(a):
            seen.append(str(lx.typeof(a)))
            return a + 1

        out = lx.jit(shd.explicit_axes(body2, in_sharding=P("X", "Y")))(x)
        assert seen == ["float32[8@X,4@Y]"]
        np.testing.assert_allclose(out, 2.0)


def test_shard_map_under_set_mesh(mesh):
    with lx.set_mesh(mesh):
        x = lx.device_put(np.arange(32, dtype=np.float32).reshape(8, 4), P("X", None))
        f = lx.shard_map(lambda a: lax.psum(a, "X"), in_specs=P("X"), out_specs=P())
        y = lx.jit(f)(x)
        assert str(lx.typeof(y)) == "float32[2,4]"
        np.testing.assert_allclose(y, np.asarray(x).reshape(4, 2, 4).sum(0))
    with pytest.raises(ValueError, match=r"The context mesh cannot be empty\. Use "
                                         r"`jax\.set_mesh\(mesh\)` to enter into a mesh "
                                         r"context \(shard_map\(<lambda>\): no mesh was given"):
        lx.shard_map(lambda a: a, in_specs=P(), out_specs=P())(np.ones(8))


def test_sharding_module_names(devices8):
    jax_names = {"AbstractDevice", "AbstractMesh", "AxisType", "Mesh", "NamedSharding",
                 "PartitionSpec", "Sharding", "SingleDeviceSharding", "auto_axes",
                 "explicit_axes", "get_abstract_mesh", "get_mesh", "make_single_device_sharding",
                 "reshard", "set_mesh", "use_abstract_mesh"}
    assert jax_names <= set(dir(shd))
    s = shd.make_single_device_sharding(devices8[1])
    assert isinstance(s, shd.SingleDeviceSharding) and isinstance(s, shd.Sharding)
    assert s.memory_kind == "device"
    assert lx.P is shd.PartitionSpec
    with shd.use_abstract_mesh(shd.AbstractMesh((2,), ("i",), AxisType.Explicit)):
        assert shd.get_abstract_mesh().explicit_axes == ("i",)


def test_structural_rules_match_jax(mesh):
    # JAX 0.10.2 prints these types for the same program
    want = ["float32[8@X,4,2@Y,3]", "float32[8@X,1,4,6@Y]", "float32[8,24]",
            "float32[8@X,2,6@Y]", "float32[8@X,8,6@Y]", "int32[8@X,6@Y]",
            "float32[1,8@X,4,6@Y]", "float32[8@X,4,6@Y]", "float32[8@X,4,6@Y]"]
    with lx.set_mesh(mesh):
        x = lx.device_put(np.ones((8, 4, 6), np.float32), P("X", None, "Y"))
        got = []

        def f(a):
            outs = [a.reshape(8, 4, 2, 3), a.reshape(8, 1, 4, 6),
                    jnp.ones((8, 4, 6)).reshape(8, 24) + 0, a[:, 1:3],
                    jnp.concatenate([a, a], axis=1), jnp.argmax(a, axis=1),
                    jnp.expand_dims(a, 0), a[:, :, None].squeeze(2), jnp.cumsum(a, axis=1)]
            got.extend(str(lx.typeof(v)) for v in outs)
            with pytest.raises(TypeError, match=r"This reshape is not supported\. .* Got "
                                                r"operand type: float32\[8@X,4,6@Y\], new "
                                                r"sizes: \(2, 4, 4, 6\)"):
                a.reshape(2, 4, 4, 6)
            return outs

        lx.jit(f)(x)
        assert got == want


def test_shard_map_in_specs_must_match_explicit_types(devices8):
    mesh = lx.make_mesh((8,), ("i",), devices=devices8)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    f = lx.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    with pytest.raises(ValueError, match=r"in_specs passed to shard_map: P\('i', None\) does "
                                         r"not match the specs of the input: P\(None, None\) "
                                         r"for arg a: float32\[8,4\]"):
        f(x)
    with lx.set_mesh(mesh):
        xs = lx.reshard(x, P("i"))
        np.testing.assert_allclose(f(xs), 2 * x)
        np.testing.assert_allclose(lx.jit(f)(xs), 2 * x)
        # omitted in_specs are read from the arguments' types
        g = lx.shard_map(lambda a: a + lax.axis_index("i").astype(a.dtype), mesh=mesh,
                         out_specs=P("i"))
        out = g(xs)
        assert str(lx.typeof(out)) == "float32[8@i,4]"
        np.testing.assert_allclose(out, x + np.arange(8, dtype=np.float32)[:, None])
    auto = lx.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,), devices=devices8)
    with pytest.raises(TypeError, match="in_specs is required"):
        lx.shard_map(lambda a: a, mesh=auto, out_specs=P("i"))(x)


def test_grad_of_a_batch_sharded_dense_layer(mesh):
    """The gradient of replicated weights contracts over the batch, which the
    data split on both sides (JAX's SPMD MNIST example): the transpose of
    dot_general gives each cotangent its primal's sharding, as JAX does, so
    the weight gradient is summed into a replicated value instead of being an
    ambiguous contraction."""
    rng = np.random.RandomState(0)
    w_np = rng.randn(6, 3).astype(np.float32)
    x_np = rng.randn(16, 6).astype(np.float32)

    def loss(w, x):
        return jnp.sum(jnp.tanh(jnp.dot(x, w)) ** 2)

    with lx.set_mesh(mesh):
        w = lx.device_put(w_np, P())
        x = lx.device_put(x_np, P("X", None))
        gw, gx = lx.jit(lx.grad(loss, argnums=(0, 1)))(w, x)
        assert str(lx.typeof(gw)) == "float32[6,3]"
        assert str(lx.typeof(gx)) == "float32[16@X,6]"
    ew, ex = lx.grad(loss, argnums=(0, 1))(w_np, x_np)
    np.testing.assert_allclose(np.asarray(gw), ew, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gx), ex, rtol=1e-5, atol=1e-5)
