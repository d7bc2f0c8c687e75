"""``out_sharding`` on jnp's and lax's creation and contraction functions,
and the ``*_like`` functions' sharding, under a mesh of Explicit axes. The
expected types (``typeof`` inside jit) and error texts are JAX 0.10.2's,
recorded from it (lamina's errors add which function's argument it was)."""

import re

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.sharding import NamedSharding
from lamina.sharding import PartitionSpec as P


@pytest.fixture
def mesh(devices8):
    return lx.make_mesh((4, 2), ("x", "y"))


@pytest.fixture
def arrays(mesh):
    with lx.set_mesh(mesh):
        base = jnp.arange(32.).reshape(8, 4)
        return {"x": lx.device_put(base, P("x", "y")), "y": lx.device_put(base, P("x", None)),
                "z": lx.device_put(base.reshape(4, 8), P("y", "x")), "u": base,
                "v": lx.device_put(jnp.arange(8.), P("x"))}


def typed_in_jit(fn, *args):
    """``typeof`` of ``fn``'s result while it is traced for jit."""
    seen = []

    def traced(*a):
        out = fn(*a)
        seen.append(str(lx.typeof(out)))
        return out
    lx.jit(traced)(*args)
    return seen[0]


# (label, function of the named arrays, their names, JAX 0.10.2's type)
CASES = [
    ("dot P", lambda x: jnp.dot(x, x.T, out_sharding=P("x", None)), "x", "float32[8@x,8]"),
    ("dot y", lambda y: jnp.dot(y, y.T, out_sharding=P(None, "y")), "y", "float32[8,8@y]"),
    ("dot vec", lambda v: jnp.dot(v, v, out_sharding=P()), "v", "float32[]"),
    ("dot rank+None", lambda x: jnp.dot(x, x.T, out_sharding=P("x", None, None)), "x",
     "float32[8@x,8]"),
    ("matmul", lambda x: jnp.matmul(x, x.T, out_sharding=P("x", None)), "x", "float32[8@x,8]"),
    ("einsum", lambda y, z: jnp.einsum("ij,jk->ik", y, z, out_sharding=P("x", "y")), "yz",
     "float32[8@x,8@y]"),
    ("einsum xx", lambda x: jnp.einsum("ij,kj->ik", x, x, out_sharding=P("x")), "x",
     "float32[8@x,8]"),
    ("einsum unary", lambda x: jnp.einsum("ij->ji", x, out_sharding=P("y", "x")), "x",
     "float32[4@y,8@x]"),
    ("tensordot", lambda y: jnp.tensordot(y, y, ((1,), (1,)), out_sharding=P("x", None)), "y",
     "float32[8@x,8]"),
    ("zeros P", lambda: jnp.zeros((8, 4), out_sharding=P("x")), "", "float32[8@x,4]"),
    ("zeros int", lambda: jnp.zeros((8, 4), jnp.int32, out_sharding=P("x", "y")), "",
     "int32[8@x,4@y]"),
    ("ones", lambda: jnp.ones((8, 4), out_sharding=P(None, "y")), "", "float32[8,4@y]"),
    ("full", lambda: jnp.full((8, 4), 3, out_sharding=P("x", "y")), "", "~int32[8@x,4@y]"),
    ("empty", lambda: jnp.empty((8, 4), out_sharding=P("x")), "", "float32[8@x,4]"),
    ("zeros none", lambda: jnp.zeros((8, 4)), "", "float32[8,4]"),
    ("zeros_like x", jnp.zeros_like, "x", "float32[8@x,4@y]"),
    ("zeros_like y", jnp.zeros_like, "y", "float32[8@x,4]"),
    ("ones_like x", jnp.ones_like, "x", "float32[8@x,4@y]"),
    ("full_like x", lambda x: jnp.full_like(x, 2.), "x", "float32[8@x,4@y]"),
    ("empty_like x", jnp.empty_like, "x", "float32[8@x,4@y]"),
    ("zeros_like out", lambda x: jnp.zeros_like(x, out_sharding=P(None, "x")), "x",
     "float32[8,4@x]"),
    ("ones_like out", lambda u: jnp.ones_like(u, out_sharding=P("x")), "u", "float32[8@x,4]"),
    ("full_like out", lambda u: jnp.full_like(u, 1, out_sharding=P("x", "y")), "u",
     "float32[8@x,4@y]"),
    ("zeros_like shape", lambda x: jnp.zeros_like(x, shape=(4, 8)), "x", "float32[4,8]"),
    ("zeros_like dtype", lambda x: jnp.zeros_like(x, dtype=jnp.int32), "x", "int32[8@x,4@y]"),
    ("zeros_like shape out",
     lambda x: jnp.zeros_like(x, shape=(4, 8), out_sharding=P("y", "x")), "x",
     "float32[4@y,8@x]"),
    ("zeros_like np", lambda: jnp.zeros_like(np.ones((8, 4))), "", "float32[8,4]"),
    ("arange", lambda: jnp.arange(8, out_sharding=P("x")), "", "int32[8@x]"),
    ("arange f", lambda: jnp.arange(0., 4., 0.5, out_sharding=P("x")), "", "float32[8@x]"),
    ("reshape", lambda x: jnp.reshape(x, (32,), out_sharding=P("x")), "x", "float32[32@x]"),
    ("reshape2", lambda x: jnp.reshape(x, (4, 8), out_sharding=P("x", "y")), "x",
     "float32[4@x,8@y]"),
    ("x.reshape", lambda x: x.reshape(4, 8, out_sharding=P(None, "x")), "x", "float32[4,8@x]"),
    ("x.reshape tuple", lambda x: x.reshape((2, 16), out_sharding=P(None, ("x", "y"))), "x",
     "float32[2,16@(x,y)]"),
    ("reshape u", lambda u: u.reshape(32, out_sharding=P("x")), "u", "float32[32@x]"),
    ("ravel", lambda x: jnp.ravel(x, out_sharding=P("x")), "x", "float32[32@x]"),
    ("broadcast_to", lambda v: jnp.broadcast_to(v, (4, 8), out_sharding=P("y", "x")), "v",
     "float32[4@y,8@x]"),
    ("iota", lambda: lax.broadcasted_iota(jnp.int32, (8, 4), 0, out_sharding=P("x")), "",
     "int32[8@x,4]"),
    ("lax.iota", lambda: lax.iota(jnp.int32, 8), "", "int32[8]"),
    ("lax.full_like x", lambda x: lax.full_like(x, 1.), "x", "float32[8@x,4@y]"),
    ("lax.full_like shape", lambda x: lax.full_like(x, 1., shape=(4, 8)), "x", "float32[4,8]"),
    ("lax.full_like same shape", lambda x: lax.full_like(x, 1., shape=(8, 4)), "x",
     "float32[8,4]"),
]


@pytest.mark.parametrize("fn,names,expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_types_in_jit(mesh, arrays, fn, names, expected):
    with lx.set_mesh(mesh):
        assert typed_in_jit(fn, *(arrays[n] for n in names)) == expected


def test_named_sharding_arguments(mesh, arrays):
    with lx.set_mesh(mesh):
        ns = NamedSharding(mesh, P(None, "x"))
        assert typed_in_jit(lambda: jnp.zeros((8, 4), out_sharding=ns)) == "float32[8,4@x]"
        assert typed_in_jit(lambda x: jnp.dot(x, x.T, out_sharding=ns), arrays["x"]) == \
            "float32[8,8@x]"
        assert typed_in_jit(lambda: jnp.arange(16, out_sharding=NamedSharding(
            mesh, P(("x", "y")))) ) == "int32[16@(x,y)]"
        # lax.full's sharding over a concrete mesh is ignored while tracing (JAX's)
        assert typed_in_jit(lambda: lax.full((8, 4), 1., sharding=NamedSharding(
            mesh, P("x")))) == "~float32[8,4]"


def test_like_of_a_closed_over_array_in_jit(mesh, arrays):
    # JAX: a concrete array's sharding is a concrete one, ignored while tracing
    with lx.set_mesh(mesh):
        assert typed_in_jit(lambda: jnp.zeros_like(arrays["x"])) == "float32[8,4]"


def test_eager_like_keeps_the_type(mesh, arrays):
    with lx.set_mesh(mesh):
        assert str(lx.typeof(jnp.zeros_like(arrays["x"]))) == "float32[8@x,4@y]"
        assert str(lx.typeof(jnp.zeros((8, 4), out_sharding=P("x")))) == "float32[8@x,4]"


ERRORS = [
    (lambda: jnp.zeros((8, 4), out_sharding=P("z")), ValueError,
     "Resource axis: z of P('z',) is not found in mesh: ('x', 'y'). "
     "(the out_sharding of jnp.zeros)"),
    (lambda: jnp.zeros((6, 4), out_sharding=P("x")), ValueError,
     "Sharding spec ('x',) implies that array axis 0 is partitioned 4 times, but does not "
     "evenly divide the dimension size 6. Got shape: (6, 4) and sharding NamedSharding("
     "mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
     "num_cores=None, platform=cpu), spec=P('x', None)) (the out_sharding of jnp.zeros)"),
    (lambda: jnp.zeros((8, 4), out_sharding=P("x", "x")), ValueError,
     "A single NamedSharding spec specification can map every mesh axis to at most one "
     "positional dimension, but P('x', 'x') has duplicate entries for `x` "
     "(the out_sharding of jnp.zeros)"),
    # JAX 0.10.2 fails an assertion here
    (lambda: jnp.zeros((8,), out_sharding=P("x", "y")), ValueError,
     "jnp.zeros: out_sharding P('x', 'y') splits dimensions beyond the result's rank 1"),
    (lambda: lax.broadcasted_iota(jnp.int32, (8,), 0, out_sharding=P("q")), ValueError,
     "Resource axis: q of P('q',) is not found in mesh: ('x', 'y'). "
     "(the out_sharding of lax.broadcasted_iota)"),
    (lambda: jnp.arange(6, out_sharding=P("x")), ValueError,
     "Sharding spec ('x',) implies that array axis 0 is partitioned 4 times, but does not "
     "evenly divide the dimension size 6. Got shape: (6,) and sharding NamedSharding("
     "mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
     "num_cores=None, platform=cpu), spec=P('x',)) (the out_sharding of jnp.arange)"),
    (lambda: jnp.ones((8, 4), out_sharding="x"), TypeError,
     "`out_sharding` argument of jnp.ones only supports instances of `NamedSharding` or "
     "`PartitionSpec`. Got x of type: <class 'str'>"),
]


@pytest.mark.parametrize("fn,cls,message", ERRORS)
def test_bad_out_sharding(mesh, fn, cls, message):
    with lx.set_mesh(mesh):
        with pytest.raises(cls) as e:
            lx.jit(fn)()
    assert str(e.value) == message


def test_partition_spec_outside_a_mesh(devices8):
    with pytest.raises(ValueError) as e:
        jnp.zeros((8, 4), out_sharding=P("x"))
    assert str(e.value) == (
        "Using PartitionSpec when you are not under a mesh context is not allowed. Please "
        "pass a NamedSharding instance or enter into a mesh context via `jax.set_mesh`. "
        "Got P('x',) (the out_sharding of jnp.zeros)")


def test_tile_and_unsharded_contraction_types(mesh, arrays):
    """JAX 0.10.2: tiling keeps the operand's split where a dimension is tiled
    once and refuses a tiled split dimension; a contraction of unsharded
    operands takes its ``out_sharding``; eager results are laid out so."""
    with lx.set_mesh(mesh):
        y, v, x = arrays["y"], arrays["v"], arrays["x"]
        for run in (lambda f: f(), lambda f: lx.jit(f)()):
            assert str(lx.typeof(run(lambda: jnp.tile(y, (1, 2))))) == "float32[8@x,8]"
            assert str(lx.typeof(run(lambda: jnp.tile(v, (3, 1))))) == "float32[3,8@x]"
            out = run(lambda: jnp.dot(jnp.ones((8, 4)), jnp.ones((4, 4)), out_sharding=P("x")))
            assert str(lx.typeof(out)) == "float32[8@x,4]"
            assert out.sharding.spec == P("x", None)
            for operand, reps, shown in ((x, (2, 1), "float32[8@x,4@y]"),
                                         (v, 2, "float32[8@x]")):
                with pytest.raises(TypeError, match=re.escape(
                        "Operand cannot be sharded on dimension 0 when the tiling is "
                        f"non-trivial. Got input type: {shown} with reps: "
                        f"{reps if isinstance(reps, tuple) else (reps,)}")):
                    run(lambda operand=operand, reps=reps: jnp.tile(operand, reps))


def test_random_samplers_take_out_sharding(mesh):
    """JAX 0.10.2's samplers take ``out_sharding``: the same bits, laid out as
    asked (values recorded from JAX), eagerly and under jit."""
    with lx.set_mesh(mesh):
        key = lx.random.key(0)
        cases = [
            (lambda: lx.random.normal(key, (8, 4), out_sharding=P("x")), "float32[8@x,4]",
             P("x", None), [1.6226422, 2.0252647, -0.43359444]),
            (lambda: lx.random.uniform(key, (8, 4), out_sharding=P("x", "y")),
             "float32[8@x,4@y]", P("x", "y"), [0.947667, 0.9785799, 0.33229148]),
            (lambda: lx.random.randint(key, (8, 4), 0, 10, out_sharding=P(None, "y")),
             "int32[8,4@y]", P(None, "y"), [9, 0, 2]),
            (lambda: lx.random.bits(key, (8,), out_sharding=P("x")), "uint32[8@x]", P("x"),
             [4070199207, 4202968722, 1427181096]),
            (lambda: lx.random.permutation(key, 8, out_sharding=P("x")), "int32[8@x]", P("x"),
             [0, 1, 5]),
        ]
        for make, typed, spec, first in cases:
            for out in (make(), lx.jit(make)()):
                assert str(lx.typeof(out)) == typed
                assert out.sharding.spec == spec
                np.testing.assert_allclose(np.asarray(out).ravel()[:3], first, rtol=1e-6)
    auto = lx.make_mesh((4, 2), ("x", "y"), axis_types=(lx.sharding.AxisType.Auto,) * 2)
    with lx.set_mesh(auto), pytest.raises(ValueError, match=re.escape(
            "PartitionSpec passed to normal cannot contain axis names that are of type Auto or "
            "Manual. Got PartitionSpec: P('x',) with axis name: x of type: AxisType.Auto.")):
        lx.random.normal(lx.random.key(0), (8, 4), out_sharding=P("x"))
    with lx.set_mesh(auto), pytest.raises(ValueError, match="PartitionSpec passed to reshard "
                                                            "cannot contain axis names"):
        lx.sharding.reshard(jnp.ones((8, 4)), P("x"))


def test_eager_reshard_lays_out_by_the_full_spec(mesh):
    with lx.set_mesh(mesh):
        x = jnp.ones((8, 4))
        assert lx.sharding.reshard(x, P("x")).sharding.spec == P("x", None)
        assert lx.device_put(x, P("x")).sharding.spec == P("x")
