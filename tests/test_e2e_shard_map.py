"""shard_map: every collective over 1-D, 2-D and 3-D meshes equals the
unsharded computation (written with jnp on the global array, block by block)
under jit, grad and vmap; output shardings; the varying-axes check; scan,
checkpoint and nesting; names in the lowered module; bad input."""

import functools
import itertools

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina.sharding import Mesh, NamedSharding
from lamina.sharding import PartitionSpec as P

MESHES = {"8": ((8,), ("i",)), "4x2": ((4, 2), ("x", "y")), "2x2x2": ((2, 2, 2), ("a", "b", "c"))}
BLOCK = 8  # rows per device (divisible by every axis size, for psum_scatter)


def _mesh(name, devices8):
    shape, names = MESHES[name]
    return Mesh(np.array(devices8).reshape(shape), names)


def _positions(mesh):
    return list(itertools.product(*[range(s) for s in mesh.axis_sizes]))


def _blocks(mesh, x):
    """The global array cut row-wise into one block per device (row-major mesh order)."""
    n = x.shape[0] // mesh.size
    return {pos: x[k * n:(k + 1) * n] for k, pos in enumerate(_positions(mesh))}


def _assemble(mesh, blocks):
    return jnp.concatenate([blocks[pos] for pos in _positions(mesh)], axis=0)


def _along(mesh, pos, j):
    """The devices that differ from ``pos`` only along mesh axis ``j``, in order."""
    return [pos[:j] + (k,) + pos[j + 1:] for k in range(mesh.axis_sizes[j])]


def reference(mesh, j, x):
    """The unsharded computation of the body below, on the global array."""
    b = _blocks(mesh, x)
    size = mesh.axis_sizes[j]
    out = {}
    for pos in _positions(mesh):
        group = [b[q] for q in _along(mesh, pos, j)]
        k = pos[j]
        stacked = jnp.stack(group)
        total = stacked.sum(0)
        chunk = BLOCK // size
        scattered = sum(g[k * chunk:(k + 1) * chunk] for g in group)
        to_all = jnp.concatenate([g[k * chunk:(k + 1) * chunk] for g in group], axis=0)
        out[pos] = dict(
            psum=total, pmean=total / size, pmax=stacked.max(0), pmin=stacked.min(0),
            gather=jnp.concatenate(group, axis=0), gather_stacked=stacked,
            scatter=scattered, permute=group[(k - 1) % size], to_all=to_all,
            index=b[pos] + k, bcast=group[0], vary=b[pos] * 2.0)
    keys = out[_positions(mesh)[0]].keys()
    result = {}
    for key in keys:
        parts = {pos: out[pos][key] for pos in out}
        if key == "gather_stacked":
            result[key] = jnp.concatenate([parts[p] for p in _positions(mesh)], axis=1)
        else:
            result[key] = _assemble(mesh, parts)
    return result


def body(axis, size, blk, extrema=True):
    k = lax.axis_index(axis)
    out = dict(
        psum=lax.psum(blk, axis), pmean=lax.pmean(blk, axis),
        gather=lax.all_gather(blk, axis, tiled=True),
        gather_stacked=lax.all_gather(blk, axis),
        scatter=lax.psum_scatter(blk, axis, scatter_dimension=0, tiled=True),
        permute=lax.ppermute(blk, axis, [(i, (i + 1) % size) for i in range(size)]),
        to_all=lax.all_to_all(blk, axis, 0, 0, tiled=True), index=blk + k,
        bcast=lax.pbroadcast(blk, axis, 0),
        vary=blk * lax.pcast(np.float32(2.0), axis, to="varying"))
    if extrema:  # pmax and pmin have no derivative (as in JAX)
        out.update(pmax=lax.pmax(blk, axis), pmin=lax.pmin(blk, axis))
    return out


def _mapped(mesh, j, extrema=True):
    axis = mesh.axis_names[j]
    every = tuple(mesh.axis_names)
    specs = {k: P(every) for k in ("psum", "pmean", "pmax", "pmin", "gather", "scatter",
                                   "permute", "to_all", "index", "bcast", "vary")}
    specs["gather_stacked"] = P(None, every)
    if not extrema:
        del specs["pmax"], specs["pmin"]
    return lx.shard_map(functools.partial(body, axis, mesh.axis_sizes[j], extrema=extrema),
                        mesh=mesh,
                        in_specs=P(every), out_specs=specs)


CASES = [("8", 0), ("4x2", 1), ("2x2x2", 1)]


@pytest.mark.parametrize("mesh_name,j", CASES)
def test_collectives_jit_grad_vmap(devices8, mesh_name, j):
    mesh = _mesh(mesh_name, devices8)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8 * BLOCK, 3)).astype(np.float32)
    f = _mapped(mesh, j)
    got = lx.jit(f)(x)
    want = reference(mesh, j, x)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5, err_msg=key)

    weights = {k: rng.normal(size=np.shape(v)).astype(np.float32) for k, v in want.items()
               if k not in ("pmax", "pmin")}

    def loss(fn, x):
        out = fn(x)
        return sum(jnp.sum(out[k] * w) for k, w in weights.items())

    g = lx.jit(lx.grad(functools.partial(loss, _mapped(mesh, j, extrema=False))))(x)
    g_ref = lx.jit(lx.grad(functools.partial(loss, lambda v: reference(mesh, j, v))))(x)
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-4)

    xs = np.stack([x, 2 * x + 1])
    batched = lx.jit(lx.vmap(f))(xs)
    for key in ("psum", "gather", "scatter", "permute", "to_all", "index"):
        np.testing.assert_allclose(batched[key][1], reference(mesh, j, xs[1])[key], rtol=1e-5,
                                   atol=1e-5, err_msg=key)


def test_eager_output_shardings_and_values(devices8):
    mesh = _mesh("4x2", devices8)
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    f = lx.shard_map(lambda a: (lax.psum(a, "x"), a * 2), mesh=mesh,
                     in_specs=P("x", "y"), out_specs=(P(None, "y"), P("x", "y")))
    total, doubled = f(x)
    assert total.sharding == NamedSharding(mesh, P(None, "y"))
    assert doubled.sharding == NamedSharding(mesh, P("x", "y"))
    np.testing.assert_allclose(total, x.reshape(4, 2, 8).sum(0))
    np.testing.assert_allclose(doubled, 2 * x)
    # a second call reuses the trace and the compiled program
    np.testing.assert_allclose(f(x + 1)[1], 2 * (x + 1))


def test_replicated_out_specs_are_checked(devices8):
    mesh = _mesh("8", devices8)
    x = np.ones((8, 2), np.float32)

    def unreduced(a):
        return a * 2

    with pytest.raises(ValueError, match=r"(?s)'unreduced'.*out_specs entry for the output "
                                         r"result is P\(\).*replicated across mesh axis 'i'"):
        lx.shard_map(unreduced, mesh=mesh, in_specs=P("i"), out_specs=P())(x)
    # without the check, each device's block is taken as the replicated value
    out = lx.shard_map(unreduced, mesh=mesh, in_specs=P("i"), out_specs=P(),
                       check_vma=False)(x)
    assert out.shape == (1, 2)
    # psum makes the value invariant: accepted
    ok = lx.shard_map(lambda a: lax.psum(a, "i"), mesh=mesh, in_specs=P("i"), out_specs=P())
    np.testing.assert_allclose(ok(x), np.full((1, 2), 8.0))


def test_scan_inside_and_outside_and_checkpoint(devices8):
    mesh = _mesh("8", devices8)
    x = np.arange(16, dtype=np.float32).reshape(8, 2)

    def inner(a):
        def step(c, _):
            c = lax.ppermute(c, "i", [(i, (i + 1) % 8) for i in range(8)])
            return c, lax.psum(c, "i")
        c, ys = lax.scan(step, a, None, length=3)
        return c, ys[-1]

    f = lx.shard_map(inner, mesh=mesh, in_specs=P("i"), out_specs=(P("i"), P()))
    c, total = lx.jit(f)(x)
    np.testing.assert_allclose(c, np.roll(x, 3, axis=0))
    np.testing.assert_allclose(total, x.sum(0, keepdims=True))

    g = lx.shard_map(lambda a: jnp.sin(a) * lax.psum(a, "i"), mesh=mesh, in_specs=P("i"),
                     out_specs=P("i"))

    def outer(x):
        def step(carry, _):
            return g(carry), None
        return jnp.sum(lax.scan(step, x, None, length=2)[0])

    def ref(x):
        for _ in range(2):
            x = jnp.sin(x) * jnp.sum(x, axis=0, keepdims=True)
        return jnp.sum(x)

    want = lx.jit(lx.grad(ref))(x / 50)
    np.testing.assert_allclose(lx.jit(outer)(x / 50), ref(x / 50), rtol=1e-5)
    np.testing.assert_allclose(lx.jit(lx.grad(outer))(x / 50), want, rtol=1e-4)
    remat = lx.checkpoint(lambda v: jnp.sum(g(v) ** 2))
    np.testing.assert_allclose(lx.jit(lx.grad(remat))(x / 50),
                               lx.jit(lx.grad(lambda v: jnp.sum((jnp.sin(v) * jnp.sum(
                                   v, 0, keepdims=True)) ** 2)))(x / 50), rtol=1e-4)


def test_jvp_and_nested_partial_axis_names(devices8):
    mesh = _mesh("4x2", devices8)
    x = np.arange(32, dtype=np.float32).reshape(8, 4) / 10

    def inner(b):
        return lax.psum(b, "y")

    def outer(a):
        # nested: the mesh is the context one (JAX refuses the concrete Mesh here)
        return lx.shard_map(inner, in_specs=P(None, "y"), out_specs=P(),
                            axis_names={"y"})(lax.psum(a, "x"))

    f = lx.shard_map(outer, mesh=mesh, in_specs=P("x", None), out_specs=P(),
                     axis_names={"x"}, check_vma=False)
    # per x-block: sum over x blocks (2 rows), then within it y-halves of columns summed
    s = x.reshape(4, 2, 4).sum(0)
    want = s[:, :2] + s[:, 2:]
    np.testing.assert_allclose(lx.jit(f)(x), want, rtol=1e-5)
    primal, tangent = lx.jvp(lx.jit(f), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(primal, want, rtol=1e-5)
    np.testing.assert_allclose(tangent, np.full((2, 2), 8.0))


def test_lowered_names_and_locations(devices8):
    mesh = _mesh("4x2", devices8)

    def block_sum(w, b):
        return lax.psum(w["k"] @ b, "y")

    f = lx.shard_map(block_sum, mesh=mesh, in_specs=({"k": P("x", "y")}, P("y", None)),
                     out_specs=P("x", None))

    def step(params, batch):
        return f(params, batch)

    w = {"k": np.ones((8, 4), np.float32)}
    b = np.ones((4, 2), np.float32)
    text = lx.jit(step).lower(w, b).as_text(debug_info=True)
    assert 'jax.arg_info = "params[\'k\']"' in text
    assert 'jax.arg_info = "batch"' in text
    assert "sdy.manual_computation" in text and 'manual_axes={"x", "y"}' in text
    assert 'in_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{"y"}, {}]>]' in text
    assert "jit(step)/shard_map(block_sum)/psum" in text
    assert "jit(step)/shard_map(block_sum)/dot_general" in text
    assert "test_e2e_shard_map.py" in text
    np.testing.assert_allclose(lx.jit(step)(w, b), np.full((8, 2), 4.0))


@pytest.mark.parametrize("spec,args,match", [
    # JAX 0.10.2's texts, with the argument named by its path
    (P("i", None, None), (np.ones((8, 2)),),
     r"(?s)shard_map applied to the function 'f' was given an in_specs entry which is too long"
     r".*in_specs is P\('i', None, None\) which has length 3, but the passed argument x has "
     r"shape float32\[8,2\], which has rank 2 \(and 2 < 3\)"),
    (P("k"), (np.ones((8, 2)),),
     r"(?s)shard_map in_specs argument must refer to an axis marked as manual "
     r"\(frozenset\(\{'i'\}\)\), but:\n\n  in_specs refers to 'k'.*in_specs for argument x"),
    (P("i"), (np.ones((6, 2)),),
     r"(?s)was given argument arrays with axis sizes that are not evenly divisible.*the passed "
     r"argument x of shape float32\[6,2\], corresponds to in_specs of value P\('i',\), which "
     r"maps array axis 0 \(of size 6\) to mesh axis 'i' \(of size 8\), but 8 does not evenly "
     r"divide 6"),
])
def test_bad_specs(devices8, spec, args, match):
    mesh = _mesh("8", devices8)

    def f(x):
        return x

    with pytest.raises(ValueError, match=match):
        lx.shard_map(f, mesh=mesh, in_specs=spec, out_specs=P("i"))(*args)


def test_collective_over_auto_axis_and_spec_on_auto_axis(devices8):
    mesh = _mesh("4x2", devices8)
    x = np.ones((8, 4), np.float32)

    def f(a):
        return lax.psum(a, "y")

    with pytest.raises(NameError, match=r"Found an unbound axis name: y\. "
                                        r"shard_map\(f\).*'y'.*not manual"):
        lx.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})(x)
    with pytest.raises(ValueError, match=r"(?s)must refer to an axis marked as manual "
                                         r"\(frozenset\(\{'x'\}\)\).*refers to 'y'.*argument a"):
        lx.shard_map(lambda a: a, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x"),
                     axis_names={"x"})(x)


def test_gspmd_form_when_shardy_is_off(devices8):
    mesh = _mesh("4x2", devices8)
    x = np.arange(64, dtype=np.float32).reshape(8, 8)

    def f(a):
        return lax.psum(a, "x"), lax.all_gather(a, "y", axis=1, tiled=True)

    # all_gather's result is typed varying (as JAX's), so the check is off
    g = lx.jit(lx.shard_map(f, mesh=mesh, in_specs=P("x", "y"), out_specs=(P(None, "y"), P("x")),
                            check_vma=False))
    lx.config.update("jax_use_shardy_partitioner", False)
    try:
        text = g.lower(x).as_text()
        total, gathered = g(x)
    finally:
        lx.config.update("jax_use_shardy_partitioner", True)
    assert "SPMDFullToShardShape" in text and "SPMDShardToFullShape" in text
    assert "sdy." not in text and 'mhlo.sharding = "{devices=[4,2]<=[8]}"' in text
    np.testing.assert_allclose(total, x.reshape(4, 2, 8).sum(0))
    np.testing.assert_allclose(gathered, x)
    assert "sdy.manual_computation" in g.lower(x).as_text()


def test_smap_maps_one_mesh_axis_of_the_current_mesh(devices8):
    mesh = lx.make_mesh((4, 2), ("x", "y"), axis_types=(lx.sharding.AxisType.Auto,) * 2,
                        devices=devices8)
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    b = np.arange(4, dtype=np.float32)
    with lx.set_mesh(mesh):
        f = lx.smap(lambda a, b: (a * b, lax.psum(a, "x")), in_axes=(0, None),
                    out_axes=(0, None), axis_name="x")
        prod, total = lx.jit(f)(a, b)
        np.testing.assert_allclose(prod, a * b)
        np.testing.assert_allclose(total, a.reshape(4, 2, 4).sum(0))
        g = lx.smap(lambda a: a + lax.axis_index("y").astype(a.dtype), in_axes=1, out_axes=1,
                    axis_name="y")
        np.testing.assert_allclose(g(a), a + np.repeat(np.arange(2), 2)[None, :])
        with pytest.raises(TypeError, match="in_specs is required"):
            lx.smap(lambda a: a, out_axes=0, axis_name="x")(a)
    with pytest.raises(TypeError, match="smap axis_name should be a `str`"):
        lx.smap(lambda a: a, in_axes=0, out_axes=0, axis_name=("x",))
