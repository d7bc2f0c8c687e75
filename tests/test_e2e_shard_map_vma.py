"""Varying manual axes (``check_vma``) in ``shard_map`` bodies: the types, the
implicit ``pvary``, and the gradients they give (a replicated parameter's
gradient inside a body is summed over the devices, as JAX's), checked against
the unsharded computation and, in the peer environment, against JAX 0.10.2."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
from lamina.sharding import AxisType, PartitionSpec as P

from e2e_helpers import peer_python, run_python

# Written once, run with either library (``LIB`` is ``jax`` or ``lamina``); the
# last line printed is the JSON of every figure.
PROGRAM = """
import json
import numpy as np
import LIB as jx
import LIB.numpy as jnp
from LIB.sharding import AxisType, PartitionSpec as P

rng = np.random.default_rng(0)
W = rng.normal(size=(4, 6)).astype(np.float32)
b = rng.normal(size=(6,)).astype(np.float32)
x = rng.normal(size=(16, 4)).astype(np.float32)
out = {}

def local_loss(W, b, x):
    return jnp.sum(jnp.tanh(x @ W + b) ** 2)

mesh1 = jx.make_mesh((8,), ("i",), axis_types=(AxisType.Auto,))
types = []
def body1(W, b, x):
    types.append([str(jx.typeof(v)) for v in (W, b, x, x @ W)])
    return jx.grad(local_loss, argnums=(0, 1))(W, b, x)
g = jx.jit(jx.shard_map(body1, mesh=mesh1, in_specs=(P(), P(), P("i")),
                        out_specs=P()))(W, b, x)
out["1d"] = [np.asarray(v).tolist() for v in g]
out["types"] = types[0]
g = jx.shard_map(body1, mesh=mesh1, in_specs=(P(), P(), P("i")), out_specs=P("i"),
                 check_vma=False)(W, b, x)
out["1d_nocheck"] = [np.asarray(v).tolist() for v in g]

mesh2 = jx.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
def body2(W, b, x):
    return jx.grad(local_loss, argnums=(0, 1))(W, b, x)
g = jx.jit(jx.shard_map(body2, mesh=mesh2, in_specs=(P(None, "model"), P("model"), P("data")),
                        out_specs=(P(None, "model"), P("model"))))(W, b, x)
out["2d"] = [np.asarray(v).tolist() for v in g]
g = jx.jit(jx.shard_map(body2, mesh=mesh2, in_specs=(P(None, "model"), P("model"), P("data")),
                        out_specs=(P("data", "model"), P(("data", "model"),)),
                        check_vma=False))(W, b, x)
out["2d_nocheck"] = [np.asarray(v).tolist() for v in g]

def global_loss(W, b, x):
    f = jx.shard_map(lambda W, b, x: jx.lax.psum(local_loss(W, b, x), ("data", "model")),
                     mesh=mesh2, in_specs=(P(None, "model"), P("model"), P("data")),
                     out_specs=P())
    return f(W, b, x)
for check in (True, False):
    f = jx.shard_map(lambda W, b, x: jx.lax.psum(local_loss(W, b, x), "i"), mesh=mesh1,
                     in_specs=(P(), P(), P("i")), out_specs=P(), check_vma=check)
    g = jx.jit(jx.grad(f, argnums=(0, 1)))(W, b, x)
    out[f"outer_{check}"] = [np.asarray(v).tolist() for v in g]
g = jx.jit(jx.grad(global_loss, argnums=(0, 1)))(W, b, x)
out["outer_2d"] = [np.asarray(v).tolist() for v in g]

# vmap(..., spmd_axis_name=...) of a shard_map: the batch is split over 'data'
h = jx.shard_map(lambda W, x: jx.lax.psum(jnp.sum(jnp.tanh(x @ W)), "model"), mesh=mesh2,
                 in_specs=(P(), P("model")), out_specs=P())
xs = x.reshape(4, 4, 4)
for spmd in (None, "data"):
    loss = lambda W, xs: jnp.sum(jx.vmap(h, in_axes=(None, 0), spmd_axis_name=spmd)(W, xs))
    out[f"spmd_{spmd}"] = [np.asarray(jx.jit(jx.grad(loss))(W, xs)).tolist()]
print(json.dumps(out))
"""


def _figures(python: str, lib: str) -> dict[str, object]:
    proc = run_python(python, PROGRAM.replace("LIB", lib), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def _assert_close(a: object, b: object) -> None:
    for u, v in zip(a, b):  # type: ignore[call-overload]
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=2e-5, atol=2e-5)


@pytest.mark.peer
def test_grads_inside_and_outside_shard_map_equal_jax() -> None:
    ours = _figures(peer_python(), "lamina")
    theirs = _figures(peer_python(), "jax")
    assert ours["types"] == theirs["types"]
    for key in theirs:
        if key != "types":
            _assert_close(ours[key], theirs[key])


# --- in-process checks against the unsharded computation -----------------------------------
def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.normal(size=(4, 6)).astype(np.float32),
            rng.normal(size=(6,)).astype(np.float32),
            rng.normal(size=(16, 4)).astype(np.float32))


def _local_loss(W, b, x):  # type: ignore[no-untyped-def]
    return jnp.sum(jnp.tanh(x @ W + b) ** 2)


def _mesh(shape: tuple[int, ...], names: tuple[str, ...]) -> lx.sharding.Mesh:
    return lx.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


def test_grad_inside_body_sums_replicated_param_grads() -> None:
    W, b, x = _data()
    mesh = _mesh((8,), ("i",))
    body = lambda W, b, x: lx.grad(_local_loss, argnums=(0, 1))(W, b, x)  # noqa: E731
    got = lx.jit(lx.shard_map(body, mesh=mesh, in_specs=(P(), P(), P("i")),
                              out_specs=P()))(W, b, x)
    _assert_close(got, lx.grad(_local_loss, argnums=(0, 1))(W, b, x))
    # without the check each device's own gradient comes back
    per_device = lx.shard_map(body, mesh=mesh, in_specs=(P(), P(), P("i")),
                              out_specs=P("i"), check_vma=False)(W, b, x)
    first = lx.grad(_local_loss, argnums=(0, 1))(W, b, x[:2])
    _assert_close([per_device[0][:4], per_device[1][:6]], first)


def test_grad_inside_body_on_a_2d_mesh() -> None:
    W, b, x = _data()
    mesh = _mesh((4, 2), ("data", "model"))
    body = lambda W, b, x: lx.grad(_local_loss, argnums=(0, 1))(W, b, x)  # noqa: E731
    got = lx.jit(lx.shard_map(body, mesh=mesh, in_specs=(P(None, "model"), P("model"),
                                                         P("data")),
                              out_specs=(P(None, "model"), P("model"))))(W, b, x)
    # columns are independent, so the column blocks' gradients are the global one's
    _assert_close(got, lx.grad(_local_loss, argnums=(0, 1))(W, b, x))


def test_types_show_varying_axes_and_jaxpr_has_pvary_and_psum_invariant() -> None:
    mesh = _mesh((8,), ("i",))
    seen = []

    def body(p, x):  # type: ignore[no-untyped-def]
        seen.append((str(lx.typeof(p)), str(lx.typeof(x)), str(lx.typeof(p * x))))
        return lx.grad(lambda p: jnp.sum(jnp.sin(p * x)))(p)

    f = lx.shard_map(body, mesh=mesh, in_specs=(P(), P("i")), out_specs=P())
    text = str(lx.make_jaxpr(f)(jnp.ones(4), jnp.ones((8, 4))))
    assert seen[0] == ("float32[4]", "float32[1,4]{V:i}", "float32[1,4]{V:i}")
    assert "pvary[axes=('i',)]" in text and "psum_invariant[axes=('i',)]" in text


def test_psum_of_an_invariant_value_counts_devices_and_pcast() -> None:
    mesh = _mesh((8,), ("i",))
    f = lx.shard_map(lambda p: lax.psum(p, "i"), mesh=mesh, in_specs=P(), out_specs=P())
    np.testing.assert_allclose(f(jnp.ones(3)), np.full(3, 8.0))

    def twice(x):  # type: ignore[no-untyped-def]
        return lax.pcast(x, "i", to="varying")

    with pytest.raises(ValueError, match="from=varying"):
        lx.shard_map(twice, mesh=mesh, in_specs=P("i"), out_specs=P("i"))(jnp.ones(8))
    with pytest.raises(ValueError, match="unexpected `to` value"):
        lx.shard_map(lambda x: lax.pcast(x, "i", to="sideways"), mesh=mesh, in_specs=P(),
                     out_specs=P())(jnp.ones(8))


def test_replication_error_names_each_output_path() -> None:
    mesh = _mesh((4, 2), ("x", "y"))

    def f(a):  # type: ignore[no-untyped-def]
        return {"ok": lax.psum(a, ("x", "y")), "bad": [a, a * 2]}

    with pytest.raises(ValueError, match=r"(?s)'f'.*\(4, 2\).*\* out_specs entry for the output "
                                         r"result\['bad'\]\[0\] is P\(\) which implies.*only "
                                         r"varying across mesh axes \{\} and not \{x,y\}"):
        lx.shard_map(f, mesh=mesh, in_specs=P("x", "y"),
                     out_specs={"ok": P(), "bad": [P(), P("x")]})(jnp.ones((8, 4)))


def test_scan_carry_that_becomes_varying_is_refused() -> None:
    mesh = _mesh((8,), ("i",))

    def body(p, x):  # type: ignore[no-untyped-def]
        return lax.scan(lambda c, _: (c * x[0], None), p, None, length=2)[0]

    with pytest.raises(TypeError, match=r"V:i"):
        lx.shard_map(body, mesh=mesh, in_specs=(P(), P("i")), out_specs=P("i"))(
            jnp.ones(4), jnp.ones((8, 4)))
    # the carry typed varying from the start is accepted
    ok = lx.shard_map(lambda p, x: body(lax.pcast(p, "i", to="varying"), x), mesh=mesh,
                      in_specs=(P(), P("i")), out_specs=P("i"))
    np.testing.assert_allclose(ok(jnp.ones(4), 2 * jnp.ones((8, 4))), np.full(32, 4.0))


def test_vmap_spmd_axis_name_splits_the_batch_over_the_mesh_axis() -> None:
    mesh = _mesh((4, 2), ("x", "y"))
    rng = np.random.default_rng(1)
    w = rng.normal(size=(3,)).astype(np.float32)
    xs = rng.normal(size=(4, 4, 3)).astype(np.float32)
    h = lx.shard_map(lambda w, a: lax.psum(jnp.sum(jnp.sin(a * w)), "y"), mesh=mesh,
                     in_specs=(P(), P("y")), out_specs=P())

    def loss(spmd):  # type: ignore[no-untyped-def]
        return lambda w, xs: jnp.sum(lx.vmap(h, in_axes=(None, 0), spmd_axis_name=spmd)(w, xs))

    text = lx.jit(loss("x")).lower(w, xs).as_text()
    assert 'in_shardings=[<@mesh, [{}]>, <@mesh, [{"x"}, {"y"}, {}]>]' in text
    want = lx.grad(lambda w, xs: jnp.sum(jnp.sin(xs * w)))(w, xs)
    for spmd in (None, "x"):
        np.testing.assert_allclose(lx.jit(lx.grad(loss(spmd)))(w, xs), want, rtol=1e-5)
    with pytest.raises(ValueError, match="spmd_axis_name cannot appear in shard_map in_specs"):
        lx.vmap(h, in_axes=(None, 0), spmd_axis_name="y")(w, xs)


def test_auto_pcast_off_makes_mismatches_errors() -> None:
    mesh = _mesh((8,), ("i",))
    p, x = np.ones(4, np.float32), np.ones((8, 4), np.float32)
    f = lx.shard_map(lambda p, x: p * x, mesh=mesh, in_specs=(P(), P("i")), out_specs=P("i"))
    np.testing.assert_allclose(f(p, x), np.ones((8, 4)))
    with lx.auto_pcast(False):
        assert lx.config.read("jax_auto_pcast") is False
        with pytest.raises(ValueError, match=r"Primitive mul requires varying manual axes to "
                                             r"match, but got \[set\(\), \{'i'\}\]"):
            f(p, x)
        g = lx.shard_map(lambda p, x: lax.pcast(p, "i", to="varying") * x, mesh=mesh,
                         in_specs=(P(), P("i")), out_specs=P("i"))
        np.testing.assert_allclose(g(p, x), np.ones((8, 4)))
        with pytest.raises(ValueError, match="psum is a varying->invariant collective"):
            lx.shard_map(lambda p: lax.psum(p, "i"), mesh=mesh, in_specs=P(), out_specs=P())(p)
    np.testing.assert_allclose(lx.jit(f)(p, x), np.ones((8, 4)))


def test_types_list_varying_axes_in_mesh_order() -> None:
    # JAX 0.10.2 prints these for a mesh ('y', 'x') and one ('b', 'a'): mesh order,
    # parenthesized when there are several axes
    seen = []

    def body(a):  # type: ignore[no-untyped-def]
        seen.append(str(lx.typeof(a)))
        b = lax.pcast(a, ("x",), to="varying")
        seen.append(str(lx.typeof(b)))
        return b

    lx.shard_map(body, mesh=_mesh((2, 4), ("y", "x")), in_specs=P("y"),
                 out_specs=P(("y", "x")))(jnp.arange(16.0))
    lx.shard_map(lambda a: seen.append(str(lx.typeof(a))) or a, mesh=_mesh((2, 4), ("b", "a")),
                 in_specs=P(("a", "b")), out_specs=P(("a", "b")))(jnp.arange(16.0))
    assert seen == ["float32[8]{V:y}", "float32[8]{V:(y,x)}", "float32[2]{V:(b,a)}"]


def test_nested_shard_map_refuses_the_concrete_mesh() -> None:
    mesh = _mesh((2, 4), ("y", "x"))

    def outer(a):  # type: ignore[no-untyped-def]
        return lx.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                            axis_names={"x"})(a)

    f = lx.shard_map(outer, mesh=mesh, in_specs=P("y"), out_specs=P("y"), axis_names={"y"})
    # JAX 0.10.2: "The context mesh AbstractMesh('y': 2, 'x': 4, axis_types=(Manual, Auto),
    # device_kind=cpu, num_cores=None, platform=cpu) should match the mesh passed to
    # shard_map Mesh('y': 2, 'x': 4, axis_types=(Auto, Auto))"
    with pytest.raises(ValueError, match=r"The context mesh AbstractMesh\('y': 2, 'x': 4, "
                                         r"axis_types=\(Manual, Auto\).*should match the mesh "
                                         r"passed to shard_map Mesh\('y': 2, 'x': 4"):
        f(jnp.arange(16.0))
    # without a mesh the nested one takes the context's, as in JAX
    nested = lambda a: lx.shard_map(lambda b: b * 2, in_specs=P("x"),  # noqa: E731
                                    out_specs=P("x"), axis_names={"x"})(a)
    got = lx.shard_map(nested, mesh=mesh, in_specs=P("y"), out_specs=P("y"),
                       axis_names={"y"})(jnp.arange(16.0))
    np.testing.assert_allclose(got, np.arange(16.0) * 2)


def test_vmap_spmd_axis_name_inside_a_body_types_results_varying() -> None:
    mesh = _mesh((2, 4), ("y", "x"))
    seen = []

    def body(a):  # type: ignore[no-untyped-def]
        out = lx.vmap(lambda r: r * 2, spmd_axis_name="x")(a)
        seen.append(str(lx.typeof(out)))
        return out

    x = jnp.ones((4, 8))
    # JAX 0.10.2: the result is float32[2,8]{V:(y,x)}, so out_specs P('y') is refused
    # ("... out_specs is P('y',) which implies that the corresponding output value is
    # replicated across mesh axis 'x', but could not infer replication over any axes")
    with pytest.raises(ValueError, match="replicated across mesh axis 'x', but could not "
                                         "infer replication over any axes"):
        lx.shard_map(body, mesh=mesh, in_specs=P("y"), out_specs=P("y"))(x)
    assert seen == ["float32[2,8]{V:(y,x)}"]
    got = lx.jit(lx.shard_map(body, mesh=mesh, in_specs=P("y"), out_specs=P("y", "x")))(x)
    np.testing.assert_allclose(got, np.full((4, 32), 2.0))


def test_vmap_spmd_axis_name_inside_a_body_must_name_manual_axes() -> None:
    mesh = _mesh((2, 4), ("y", "x"))
    body = lambda a: lx.vmap(lambda r: r * 2, spmd_axis_name="x")(a)  # noqa: E731
    # JAX 0.10.2: "Axes mentioned in `manual_axis_type` field of ShapedArray should be of
    # type `Manual`. ... with axis: x of type AxisType.Auto" ('x' is not manual here)
    with pytest.raises(ValueError, match=r"vmap .*spmd_axis_name='x' inside a shard_map body "
                                         r"names 'x', not among the body's manual axes"):
        lx.shard_map(body, mesh=mesh, axis_names={"y"}, in_specs=P("y"),
                     out_specs=P("y"))(jnp.ones((4, 8)))


def test_all_gather_to_invarying(devices8):
    """JAX 0.10.2's ``all_gather(..., to='invarying')``: the gathered value is
    typed the same on every device (so it may leave through ``P()``), its
    transpose takes each device's block; values recorded from JAX."""
    import re

    mesh = lx.make_mesh((4, 2), ("x", "y"), axis_types=(lx.sharding.AxisType.Auto,) * 2)
    x = jnp.arange(32.0).reshape(8, 4)

    def gathered(a):
        return lax.all_gather(a, "x", tiled=True, to="invarying")

    f = lx.shard_map(gathered, mesh=mesh, in_specs=P("x"), out_specs=P())
    np.testing.assert_array_equal(f(x), x)
    np.testing.assert_array_equal(lx.jit(f)(x), x)
    np.testing.assert_array_equal(lx.vmap(f)(jnp.stack([x, x + 1])), jnp.stack([x, x + 1]))
    np.testing.assert_array_equal(lx.grad(lambda a: (f(a) ** 2).sum())(x), 2 * x)
    stacked = lx.shard_map(lambda b: lax.all_gather(b, "x", axis=1, to="invarying"),
                           mesh=mesh, in_specs=P("x"), out_specs=P())
    np.testing.assert_array_equal(lx.grad(lambda a: (stacked(a) ** 3).sum())(x), 3 * x ** 2)
    assert "all_gather_invariant[" in str(lx.make_jaxpr(f)(x))
    with pytest.raises(ValueError, match=re.escape(
            "Got unexpected `to` value for `jax.lax.all_gather`.")):
        lx.shard_map(lambda a: lax.all_gather(a, "x", to="foo"), mesh=mesh, in_specs=P("x"),
                     out_specs=P("x"))(x)
