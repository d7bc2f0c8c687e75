"""The sharding-in-types rules of lax primitives under jit, against JAX 0.10.2.

Every expected string below was recorded from JAX 0.10.2 running the same
program (``typeof`` of the result, or the error's class and first line; lamina
adds a second line naming the operands). The arrays live on a (4, 2) mesh of
Explicit axes ``x`` and ``y``.
"""

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.sharding import PartitionSpec as P
from lamina.sharding import reshard

RESHAPE_ERR = ("ShardingTypeError: This reshape is not supported. Please specify the sharding "
               "of the output via the `out_sharding` argument of jax.lax.reshape. Got operand "
               "type: ")


@pytest.fixture
def arrays(devices8):
    """The operands, by name, under a (4, 2) Explicit mesh set for the test."""
    mesh = lx.make_mesh((4, 2), ("x", "y"))
    with lx.set_mesh(mesh):
        a32 = np.arange(32, dtype=np.float32)
        yield {
            "x": lx.device_put(a32.reshape(8, 4), P("x", "y")),
            "y": lx.device_put(a32.reshape(8, 4), P("x", None)),
            "z": lx.device_put(a32.reshape(4, 8), P("y", "x")),
            "w": lx.device_put(a32.reshape(8, 4), P(None, "y")),
            "v": lx.device_put(np.arange(8, dtype=np.float32), P("x")),
            "x3": lx.device_put(np.arange(64, dtype=np.float32).reshape(8, 2, 4),
                                P("x", None, "y")),
            "xy": lx.device_put(a32.reshape(8, 4), P(("x", "y"), None)),
            "b": lx.device_put(a32.reshape(8, 4) > 3, P("x", "y")),
        }


def outcome(fn, *args):
    """``typeof`` of ``jit(fn)(*args)`` as a string (a tuple of them for
    several results), or the error's class and first line."""
    try:
        out = lx.jit(fn)(*args)
    except Exception as e:  # noqa: BLE001 (the error is the answer)
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    if isinstance(out, (tuple, list)):
        return tuple(str(lx.typeof(o)) for o in out)
    return str(lx.typeof(out))


def check(arrays, cases):
    """Each case ``(fn, operand names, JAX's answer)``; all mismatches at once."""
    got = [outcome(fn, *(arrays[n] for n in names.split())) for fn, names, _ in cases]
    assert got == [want for _, _, want in cases]


def test_dot_general(arrays):
    nt = (((1,), (0,)), ((), ()))
    check(arrays, [
        (lambda y, z: y @ z, "y z",
         "ShardingTypeError: dot_general operation with inputs: f32[8@x,4], f32[4@y,8@x] "
         "produces an illegally sharded result: f32[8@x,8@x]"),
        (lambda x: x @ x.T, "x",
         "ShardingTypeError: Contracting dimensions are sharded and it is ambiguous how the "
         "output should be sharded. Please specify the output sharding via the `out_sharding` "
         "parameter. Got lhs_contracting_spec=('y',) and rhs_contracting_spec=('y',)"),
        (lambda x: lax.dot_general(x, x.T, nt, out_sharding=P("x", None)), "x",
         "float32[8@x,8]"),
        (lambda x3: lax.dot_general(x3, reshard(x3, P("y", None, "x")),
                                    (((2,), (2,)), ((0,), (0,)))), "x3",
         "ShardingTypeError: dot_general requires lhs batch dimensions and rhs batch "
         "dimensions to have the consistent sharding, got ('x',) and ('y',)."),
        (lambda y, w: lax.dot_general(reshard(y, P(None, "x")), w, (((1,), (1,)), ((), ()))),
         "y w",
         "ShardingTypeError: dot_general requires contracting dimensions to have consistent "
         "sharding, got ('x',) and ('y',)."),
        (lambda x3: lax.dot_general(x3, x3, (((1,), (1,)), ((0,), (0,)))), "x3",
         "ShardingTypeError: dot_general operation with inputs: f32[8@x,2,4@y], "
         "f32[8@x,2,4@y] produces an illegally sharded result: f32[8@x,4@y,4@y]"),
        (lambda y, w: y + reshard(w, P(None, "x")), "y w",
         "ShardingTypeError: add operation with inputs: f32[8@x,4], f32[8,4@x] produces an "
         "illegally sharded result: f32[8@x,4@x]"),
        (lambda x, w: x + reshard(w, P("y", None)), "x w",
         "ShardingTypeError: add got incompatible shardings for broadcasting: ('x', 'y'), "
         "('y', None)."),
    ])


def test_reshape(arrays):
    check(arrays, [
        (lambda x: x.reshape(32), "x", "float32[32@(x,y)]"),
        (lambda x: x.reshape(4, 2, 4), "x", "float32[4@x,2,4@y]"),
        (lambda x: x.reshape(2, 4, 4), "x", RESHAPE_ERR + "float32[8@x,4@y], new sizes: (2, 4, 4)"),
        (lambda x: x.reshape(8, 2, 2), "x", "float32[8@x,2@y,2]"),
        (lambda x: x.reshape(8, 4, 1), "x", "float32[8@x,4@y,1]"),
        (lambda x: x.reshape(1, 8, 4), "x", "float32[1,8@x,4@y]"),
        (lambda x: x.reshape(8, 1, 4), "x", "float32[8@x,1,4@y]"),
        (lambda x: x.reshape(4, 8), "x", RESHAPE_ERR + "float32[8@x,4@y], new sizes: (4, 8)"),
        (lambda x: x.reshape(16, 2), "x", RESHAPE_ERR + "float32[8@x,4@y], new sizes: (16, 2)"),
        (lambda x: x.reshape(2, 4, 2, 2), "x",
         RESHAPE_ERR + "float32[8@x,4@y], new sizes: (2, 4, 2, 2)"),
        (lambda y: y.reshape(32), "y", "float32[32@x]"),
        (lambda w: w.reshape(32), "w", RESHAPE_ERR + "float32[8,4@y], new sizes: (32,)"),
        (lambda z: z.reshape(32), "z", "float32[32@(y,x)]"),
        (lambda x3: x3.reshape(8, 8), "x3", RESHAPE_ERR + "float32[8@x,2,4@y], new sizes: (8, 8)"),
        (lambda x3: x3.reshape(16, 4), "x3", "float32[16@x,4@y]"),
        (lambda x3: x3.reshape(64), "x3", RESHAPE_ERR + "float32[8@x,2,4@y], new sizes: (64,)"),
        (lambda x3: x3.reshape(8, 1, 2, 4), "x3", "float32[8@x,1,2,4@y]"),
        (lambda x3: x3.reshape(8, 2, 4, 1), "x3", "float32[8@x,2,4@y,1]"),
        (lambda xy: xy.reshape(2, 4, 4), "xy",
         RESHAPE_ERR + "float32[8@(x,y),4], new sizes: (2, 4, 4)"),
        (lambda xy: xy.reshape(8, 2, 2), "xy", "float32[8@(x,y),2,2]"),
        (lambda xy: xy.reshape(32), "xy", "float32[32@(x,y)]"),
        (lambda v: v.reshape(2, 4), "v", RESHAPE_ERR + "float32[8@x], new sizes: (2, 4)"),
        (lambda v: v.reshape(4, 2), "v", "float32[4@x,2]"),
        (lambda v: v.reshape(8, 1), "v", "float32[8@x,1]"),
        (lambda v: v.reshape(2, 2, 2), "v", RESHAPE_ERR + "float32[8@x], new sizes: (2, 2, 2)"),
        (lambda x: x.reshape(8, 4, 1).reshape(32, 1), "x", "float32[32@(x,y),1]"),
        (lambda x: x.reshape(1, 8, 4).reshape(32), "x",
         RESHAPE_ERR + "float32[1,8@x,4@y], new sizes: (32,)"),
        (lambda x: x.reshape(8, 4, 1).reshape(8, 2, 2, 1), "x", "float32[8@x,2@y,2,1]"),
    ])


def test_reshape_of_resharded_values_and_out_sharding(arrays):
    def resharded(shape, spec):
        return reshard(jnp.zeros(shape), spec)

    check(arrays, [
        (lambda: resharded((16, 4), P("x")).reshape(2, 8, 4), "",
         RESHAPE_ERR + "float32[16@x,4], new sizes: (2, 8, 4)"),
        (lambda: resharded((16, 4), P(("x", "y"))).reshape(8, 2, 4), "",
         "float32[8@(x,y),2,4]"),
        (lambda: resharded((16, 4), P(("x", "y"))).reshape(4, 4, 4), "", "float32[4@x,4@y,4]"),
        (lambda: resharded((16, 4), P(("y", "x"))).reshape(2, 8, 4), "", "float32[2@y,8@x,4]"),
        (lambda: resharded((4, 8), P(None, "x")).reshape(32), "",
         RESHAPE_ERR + "float32[4,8@x], new sizes: (32,)"),
        (lambda: resharded((4, 2, 4), P("x", "y", None)).reshape(32), "", "float32[32@(x,y)]"),
        (lambda: resharded((4, 2, 4), P("x", "y", None)).reshape(8, 4), "",
         "float32[8@(x,y),4]"),
        (lambda: resharded((4, 2, 4), P("x", None, "y")).reshape(8, 4), "", "float32[8@x,4@y]"),
        (lambda: resharded((4, 2, 4), P("x", None, "y")).reshape(4, 8), "",
         RESHAPE_ERR + "float32[4@x,2,4@y], new sizes: (4, 8)"),
        (lambda: resharded((2, 8), P("y", "x")).reshape(16), "", "float32[16@(y,x)]"),
        (lambda: resharded((2, 8), P("y", None)).reshape(16), "", "float32[16@y]"),
        (lambda x: lax.reshape(x, (32,), out_sharding=P("x")), "x", "float32[32@x]"),
        (lambda x: lax.reshape(x, (32,), dimensions=(1, 0)), "x",
         RESHAPE_ERR + "float32[8@x,4@y], new sizes: (32,)"),
        (lambda y: lax.reshape(y, (4, 8), dimensions=(1, 0)), "y",
         RESHAPE_ERR + "float32[8@x,4], new sizes: (4, 8)"),
        (lambda x: lax.reshape(x, (32,), dimensions=(1, 0), out_sharding=P("y")), "x",
         "float32[32@y]"),
    ])


def test_concatenate(arrays):
    mesh_repr = ("AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, Explicit), "
                 "device_kind=cpu, num_cores=None, platform=cpu)")
    check(arrays, [
        (lambda x: jnp.concatenate([x, x], 0), "x", "float32[16@x,4@y]"),
        (lambda x: jnp.concatenate([x, x], 1), "x", "float32[8@x,8@y]"),
        (lambda x: lax.concatenate([x, np.ones((8, 4), np.float32)], 0), "x",
         "float32[16@x,4@y]"),
        (lambda x, y: lax.concatenate([x, y], 0), "x y",
         "ShardingTypeError: All operands should have the same sharding. Got shardings "
         f"NamedSharding(mesh={mesh_repr}, spec=P('x', 'y')), "
         f"NamedSharding(mesh={mesh_repr}, spec=P('x', None))"),
    ])


def test_cumulative_reductions_and_sort(arrays):
    sharding = ("NamedSharding(mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, "
                "Explicit), device_kind=cpu, num_cores=None, platform=cpu), spec=")
    unsharded_axis = "ShardingTypeError: Input should be unsharded over the axis being reduced."
    check(arrays, [
        (lambda x: jnp.cumsum(x, 0), "x",
         f"{unsharded_axis} Got input type=float32[8@x,4@y] and axis=0"),
        (lambda y: jnp.cumsum(y, 1), "y", "float32[8@x,4]"),
        (lambda x: lax.cummax(x, 0), "x",
         f"{unsharded_axis} Got input type=float32[8@x,4@y] and axis=0"),
        (lambda x: lax.cumprod(x, 1, reverse=True), "x",
         f"{unsharded_axis} Got input type=float32[8@x,4@y] and axis=1"),
        (lambda x: lax.cumlogsumexp(x, 0), "x",
         f"{unsharded_axis} Got input type=float32[8@x,4@y] and axis=0"),
        (lambda x: jnp.sort(x, 1), "x",
         "ShardingTypeError: Arguments to sort must be unsharded over the sorting dimension. "
         f"Got arg sharding={sharding}P('x', 'y')) and sorting dimension=1"),
        (lambda x: jnp.argsort(x, 0), "x",
         "ShardingTypeError: Arguments to sort must be unsharded over the sorting dimension. "
         f"Got arg sharding={sharding}P('x', 'y')) and sorting dimension=0"),
        (lambda y: jnp.sort(y, 1), "y", "float32[8@x,4]"),
        (lambda y: lax.sort((y, y * 2), dimension=1, num_keys=1), "y",
         ("float32[8@x,4]", "float32[8@x,4]")),
        (lambda y, w: lax.sort((y, w), dimension=1, num_keys=1), "y w",
         "ShardingTypeError: Arguments to sort must be unsharded over the sorting dimension. "
         f"Got arg sharding={sharding}P(None, 'y')) and sorting dimension=1"),
    ])


def test_slices_and_pads(arrays):
    def uneven(name, out, count, spec, operand, shape):
        return (f"ShardingTypeError: {name} on sharded dims where out dim ({out}) is not "
                f"divisible by mesh axes ({count}) with spec ({spec}) is not implemented. Got "
                f"input type={operand} and output shape={shape}")

    check(arrays, [
        (lambda x: lax.slice(x, (0, 0), (4, 4)), "x", "float32[4@x,4@y]"),
        (lambda x: lax.slice(x, (0, 0), (2, 4)), "x",
         uneven("slicing", 2, 4, "x", "f32[8@x,4@y]", "(2, 4)")),
        (lambda x: lax.slice(x, (0, 0), (8, 4), (2, 1)), "x", "float32[4@x,4@y]"),
        (lambda y: lax.slice(y, (0, 0), (8, 3)), "y", "float32[8@x,3]"),
        (lambda xy: lax.slice(xy, (0, 0), (4, 4)), "xy",
         uneven("slicing", 4, 8, "('x', 'y')", "f32[8@(x,y),4]", "(4, 4)")),
        (lambda x: x[:4], "x", "float32[4@x,4@y]"),
        (lambda x: x[0], "x", uneven("slicing", 1, 4, "x", "f32[8@x,4@y]", "(1, 4)")),
        (lambda y: y[:, 0], "y", "float32[8@x]"),
        (lambda y: y[1:3], "y", uneven("slicing", 2, 4, "x", "f32[8@x,4]", "(2, 4)")),
        (lambda w: w[2], "w", "float32[4@y]"),
        (lambda x: jnp.roll(x, 1, 0), "x",
         uneven("slicing", 1, 4, "x", "f32[8@x,4@y]", "(1, 4)")),
        (lambda w: jnp.roll(w, 1, 0), "w", "float32[8,4@y]"),
        (lambda x: lax.dynamic_slice(x, (0, 0), (4, 4)), "x", "float32[4@x,4@y]"),
        (lambda x: lax.dynamic_slice(x, (0, 0), (2, 4)), "x",
         uneven("dynamic_slice", 2, 4, "x", "f32[8@x,4@y]", "(2, 4)")),
        (lambda y: lax.dynamic_slice(y, (0, 1), (8, 3)), "y", "float32[8@x,3]"),
        (lambda x: lax.pad(x, 0.0, ((2, 2, 0), (0, 0, 0))), "x", "float32[12@x,4@y]"),
        (lambda x: lax.pad(x, 0.0, ((0, 0, 0), (1, 1, 0))), "x", "float32[8@x,6@y]"),
        (lambda x: lax.pad(x, 0.0, ((0, 0, 0), (1, 0, 0))), "x",
         uneven("padding", 5, 2, "y", "f32[8@x,4@y]", "(8, 5)")),
        (lambda x: lax.pad(x, 0.0, ((0, 0, 1), (0, 0, 0))), "x",
         uneven("padding", 15, 4, "x", "f32[8@x,4@y]", "(15, 4)")),
        (lambda x: lax.pad(x, 0.0, ((-4, 0, 0), (0, 0, 0))), "x", "float32[4@x,4@y]"),
        (lambda x: lax.rev(x, (0,)), "x", "float32[8@x,4@y]"),
        (lambda x: lax.dynamic_update_slice(x, x, (0, 0)), "x", "float32[8@x,4@y]"),
        (lambda x: lax.dynamic_update_slice(x, jnp.ones((2, 4)), (0, 0)), "x",
         "ShardingTypeError: dynamic_update_slice operand sharding must be equal to update "
         "sharding, got operand sharding float32[8@x,4@y]({Explicit: ('x', 'y')}) and update "
         "sharding float32[2,4]({Explicit: ('x', 'y')})."),
        (lambda x, y: lax.dynamic_update_slice(x, y, (0, 0)), "x y",
         "ShardingTypeError: dynamic_update_slice operand sharding must be equal to update "
         "sharding, got operand sharding float32[8@x,4@y]({Explicit: ('x', 'y')}) and update "
         "sharding float32[8@x,4]({Explicit: ('x', 'y')})."),
    ])


def test_gather(arrays):
    ambiguous = ("ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output "
                 "PartitionSpec for the gather indexing as out sharding could not be resolved "
                 "unambiguously (or would require collectives on inputs). Got ")
    check(arrays, [
        (lambda x: x[jnp.array([0, 1])], "x",
         ambiguous + "operand=ShapedArray(float32[8@x,4@y]), indices=ShapedArray(int32[2,1])"),
        (lambda x: x.at[jnp.arange(8), jnp.zeros(8, int)].get(), "x",
         ambiguous + "operand=ShapedArray(float32[8@x,4@y]), indices=ShapedArray(int32[8,2])"),
        (lambda y: y[:, jnp.array([0, 1])], "y", "float32[8@x,2]"),
        (lambda w: w[jnp.array([0, 1])], "w", "float32[2,4@y]"),
        (lambda w, v: w[v.astype(int)], "w v",
         ambiguous + "operand=ShapedArray(float32[8,4@y]), indices=ShapedArray(int32[8@x,1])"),
    ])


def test_select_clamp_and_shape_preserving_ops(arrays):
    sharding = ("NamedSharding(mesh=AbstractMesh('x': 4, 'y': 2, axis_types=(Explicit, "
                "Explicit), device_kind=cpu, num_cores=None, platform=cpu), spec=")
    check(arrays, [
        (lambda b, x: lax.select_n(b, x, x), "b x", "float32[8@x,4@y]"),
        (lambda b, x, y: lax.select_n(b, x, y), "b x y",
         f"ShardingTypeError: select cases must have the same shardings, got [{sharding}"
         f"P('x', 'y')), {sharding}P('x', None))]."),
        (lambda x, y: lax.select_n(y > 1, x, x), "x y",
         "ShardingTypeError: select `which` must be scalar or have the same sharding as cases, "
         f"got `which` sharding {sharding}P('x', None)) but case sharding {sharding}"
         "P('x', 'y'))."),
        (lambda x: lax.select_n(np.ones((8, 4), bool), x, x), "x", "float32[8@x,4@y]"),
        (lambda x: jnp.where(x > 1, x, 0.0), "x", "float32[8@x,4@y]"),
        (lambda x: lax.clamp(0.0, x, 1.0), "x", "float32[8@x,4@y]"),
        (lambda x, y: lax.clamp(y, x, y), "x y", "float32[8@x,4@y]"),
        (lambda x: jnp.argmax(x, 0), "x", "int32[4@y]"),
        (lambda x: lax.argmin(x, 1, np.int32), "x", "int32[8@x]"),
        (lambda x: x.max(0), "x", "float32[4@y]"),
        (lambda x: lax.reduce_precision(x, 5, 10), "x", "float32[8@x,4@y]"),
        (lambda x: lax.convert_element_type(x, np.int32), "x", "int32[8@x,4@y]"),
        (lambda x3: lax.transpose(x3, (2, 0, 1)), "x3", "float32[4@y,8@x,2]"),
        (lambda x: lax.squeeze(x[None], (0,)), "x", "float32[8@x,4@y]"),
        (lambda x: lax.expand_dims(x, (1,)), "x", "float32[8@x,1,4@y]"),
        (lambda v: lax.broadcast_in_dim(v, (8, 4), (0,)), "v", "float32[8@x,4]"),
        (lambda v: lax.broadcast_in_dim(v, (8, 4), (0,), out_sharding=P("x", "y")), "v",
         "float32[8@x,4@y]"),
    ])
