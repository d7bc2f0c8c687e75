"""What a ``shard_map`` body sees of its mesh, as JAX 0.10.2 shows it: the
order of varying manual axes in types (a property of each value, from the mesh
it was made under), ``get_abstract_mesh()`` inside bodies, an ``AbstractMesh``
as ``mesh=``, ``vmap(spmd_axis_name=...)`` inside a body, and the reprs of
meshes. The expected texts were printed by JAX 0.10.2 on 8 CPU devices."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
from lamina.sharding import AbstractMesh, AxisType, PartitionSpec as P


def _mesh(shape: tuple[int, ...], names: tuple[str, ...]) -> lx.sharding.Mesh:
    return lx.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


def _body_jaxpr_text(closed: object) -> str:
    return str(closed.eqns[0].params["jaxpr"])  # type: ignore[attr-defined]


# --- the order of varying axes --------------------------------------------------------------
def test_varying_axes_print_in_the_order_of_the_mesh_each_value_was_made_under() -> None:
    xy, yx = _mesh((2, 4), ("x", "y")), _mesh((4, 2), ("y", "x"))
    seen = []

    def body(a):  # type: ignore[no-untyped-def]
        seen.append(str(lx.typeof(a)))
        return a * 2

    def jaxpr_over(mesh):  # type: ignore[no-untyped-def]
        f = lx.shard_map(body, mesh=mesh, in_specs=P(("x", "y")), out_specs=P(("x", "y")))
        return lx.make_jaxpr(f)(jnp.arange(8.0))

    first, second = jaxpr_over(xy), jaxpr_over(yx)
    # JAX 0.10.2: float32[1]{V:(x,y)} and float32[1]{V:(y,x)}
    assert seen == ["float32[1]{V:(x,y)}", "float32[1]{V:(y,x)}"]
    # printed after both traces, each keeps its own mesh's order
    assert "c:f32[1]{V:(x,y)}" in _body_jaxpr_text(first)
    assert "c:f32[1]{V:(y,x)}" in _body_jaxpr_text(second)
    again = jaxpr_over(xy)
    assert str(first) == str(again) and "{V:(y,x)}" not in str(again)


# --- the context mesh in bodies -------------------------------------------------------------
def test_get_abstract_mesh_in_a_body_is_the_manual_context_mesh() -> None:
    mesh = _mesh((2, 4), ("x", "y"))
    seen: dict[str, str] = {}

    def inner(b):  # type: ignore[no-untyped-def]
        seen["nested"] = repr(lx.sharding.get_abstract_mesh())
        seen["nested type"] = str(lx.typeof(b))
        return b * 2

    def outer(a):  # type: ignore[no-untyped-def]
        seen["partial"] = repr(lx.sharding.get_abstract_mesh())
        context = lx.sharding.get_abstract_mesh()
        return lx.shard_map(inner, mesh=context, in_specs=P("y"), out_specs=P("y"),
                            axis_names={"y"})(a)

    f = lx.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"), axis_names={"x"})
    np.testing.assert_allclose(lx.jit(f)(jnp.arange(8.0)), 2 * np.arange(8.0))
    np.testing.assert_allclose(f(jnp.arange(8.0)), 2 * np.arange(8.0))
    device = "device_kind=cpu, num_cores=None, platform=cpu"
    assert seen == {
        "partial": f"AbstractMesh('x': 2, 'y': 4, axis_types=(Manual, Auto), {device})",
        "nested": f"AbstractMesh('x': 2, 'y': 4, axis_types=(Manual, Manual), {device})",
        "nested type": "float32[1]{V:(x,y)}",
    }
    assert repr(lx.sharding.get_abstract_mesh()) == "AbstractMesh((), axis_types=())"

    with lx.set_mesh(mesh):
        def full(a):  # type: ignore[no-untyped-def]
            seen["full"] = repr(lx.sharding.get_abstract_mesh())
            return a

        lx.shard_map(full, in_specs=P("x"), out_specs=P("x"))(jnp.arange(8.0))
        assert seen["full"] == \
            f"AbstractMesh('x': 2, 'y': 4, axis_types=(Manual, Manual), {device})"
        # the set mesh's abstract mesh names it
        g = lx.shard_map(lambda a: a * 2, mesh=mesh.abstract_mesh, in_specs=P("x"),
                         out_specs=P("x"))
        np.testing.assert_allclose(lx.jit(g)(jnp.arange(8.0)), 2 * np.arange(8.0))
        np.testing.assert_allclose(g(jnp.arange(8.0)), 2 * np.arange(8.0))


def test_a_mesh_other_than_the_context_one_is_refused_with_jax_text() -> None:
    mesh = _mesh((2, 4), ("x", "y"))
    device = "device_kind=cpu, num_cores=None, platform=cpu"
    user = AbstractMesh((2, 4), ("x", "y"))
    for given, shown in [(user, "AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto))"),
                         (mesh, "Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))")]:
        def outer(a, given=given):  # type: ignore[no-untyped-def]
            return lx.shard_map(lambda b: b, mesh=given, in_specs=P("y"), out_specs=P("y"),
                                axis_names={"y"})(a)

        f = lx.shard_map(outer, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                         axis_names={"x"})
        want = (f"The context mesh AbstractMesh('x': 2, 'y': 4, axis_types=(Manual, Auto), "
                f"{device}) should match the mesh passed to shard_map {shown}")
        with pytest.raises(ValueError) as info:
            lx.jit(f)(jnp.arange(8.0))
        assert str(info.value) == want
    with lx.set_mesh(mesh), pytest.raises(ValueError) as info:
        lx.jit(lx.shard_map(lambda a: a, mesh=user, in_specs=P("x"),
                            out_specs=P("x")))(jnp.arange(8.0))
    assert str(info.value) == (
        f"The context mesh AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), {device}) "
        f"should match the mesh passed to shard_map AbstractMesh('x': 2, 'y': 4, "
        f"axis_types=(Auto, Auto))")
    with pytest.raises(ValueError, match=r"shard_map\(<lambda>\): the mesh given is "
                                         r"AbstractMesh\(.*\), abstract, and none is set"):
        lx.shard_map(lambda a: a, mesh=user, in_specs=P("x"), out_specs=P("x"))(
            jnp.arange(8.0))


# --- vmap(spmd_axis_name=...) in a body -------------------------------------------------------
def test_vmap_spmd_axis_name_in_a_body_types_each_operation() -> None:
    mesh = _mesh((2, 4), ("x", "y"))
    seen: list[str] = []

    def body(a, w):  # type: ignore[no-untyped-def]
        def per(r):  # type: ignore[no-untyped-def]
            s = jnp.sin(r) * 2.0
            t = s + w
            u = lax.psum(t, "y")
            seen.extend(str(lx.typeof(v)) for v in (r, s, w, t, u))
            return u, jnp.ones(3)

        outs = lx.vmap(per, spmd_axis_name="x")(a)
        seen.extend(str(lx.typeof(o)) for o in outs)
        return outs

    f = lx.shard_map(body, mesh=mesh, in_specs=(P(None, "y"), P()), out_specs=P("x", "y"))
    text = _body_jaxpr_text(lx.make_jaxpr(f)(jnp.ones((4, 8)), jnp.ones(2)))
    # JAX 0.10.2: an element's type leaves the spmd axes out; the batch's has them
    assert seen == ["float32[2]{V:y}", "float32[2]{V:y}", "float32[2]", "float32[2]{V:y}",
                    "float32[2]", "float32[4,2]{V:x}", "float32[4,3]{V:x}"]
    # each operation on the batch varies over 'x' (JAX: c:f32[4,2]{V:(x,y)} = sin a,
    # k:f32[4,2]{V:x} = psum_invariant[axes=('y',)] j)
    assert "f32[4,2]{V:(x,y)} = sin" in text
    assert "f32[4,2]{V:x} = psum_invariant[axes=('y',)]" in text
    got = f(jnp.arange(32.0).reshape(4, 8), jnp.ones(2))[0]
    local = np.sin(np.arange(32.0).reshape(4, 4, 2)) * 2 + 1
    np.testing.assert_allclose(got, np.tile(local.sum(1), (2, 4)), rtol=1e-5)


def test_psum_over_the_spmd_axis_inside_the_vmap_is_refused_as_in_jax() -> None:
    mesh = _mesh((2, 4), ("x", "y"))
    f = lx.shard_map(lambda a: lx.vmap(lambda r: lax.psum(r, "x"), spmd_axis_name="x")(a),
                     mesh=mesh, in_specs=P(None, "y"), out_specs=P("x", "y"))
    with pytest.raises(ValueError) as info:
        lx.make_jaxpr(f)(jnp.ones((4, 8)))
    assert str(info.value) == (
        "pvary is a invariant->variant collective. This means that the axis names mentioned "
        "in `axes` passed to `pvary` must not be present in `jax.typeof(inp).mat.varying`. "
        "Got axes=('x',) and jax.typeof(inp)=float32[4,2]{V:(x,y)}")


# --- reprs ---------------------------------------------------------------------------------
def test_mesh_reprs_are_jax_ones() -> None:
    mesh = _mesh((2, 4), ("x", "y"))
    assert repr(mesh) == "Mesh(axis_sizes=(2, 4), axis_names=('x', 'y'), axis_types=(Auto, Auto))"
    assert str(mesh) == "Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))"
    one = lx.sharding.Mesh(np.array(lx.devices()), ("a",))
    assert repr(one) == "Mesh(axis_sizes=(8,), axis_names=('a',), axis_types=(Auto,))"
    assert repr(one.abstract_mesh) == ("AbstractMesh('a': 8, axis_types=(Auto,), "
                                       "device_kind=cpu, num_cores=None, platform=cpu)")
    assert repr(AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))) \
        == "AbstractMesh('x': 2, 'y': 4, axis_types=(Explicit, Auto))"
    assert repr(lx.sharding.NamedSharding(mesh, P("x"))) == (
        "NamedSharding(mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto)), spec=P('x',), "
        "memory_kind=device)")
    text = str(lx.make_jaxpr(lx.shard_map(lambda a: a, mesh=mesh, in_specs=P("x"),
                                          out_specs=P("x")))(jnp.arange(8.0)))
    # the params as JAX 0.10.2 prints them: the mesh as given (concrete here;
    # under set_mesh without one, the context's abstract mesh)
    assert "mesh=Mesh('x': 2, 'y': 4, axis_types=(Auto, Auto))" in text
    assert "in_specs=(P('x',),)" in text and "out_specs=(P('x',),)" in text
    assert "newly_manual_axes=frozenset({'x', 'y'})" in text
    assert "manual_axes=(" not in text and "name=" not in text
    with lx.set_mesh(mesh):
        text = str(lx.make_jaxpr(lx.shard_map(lambda a: a, in_specs=P("x"),
                                              out_specs=P("x")))(jnp.arange(8.0)))
    assert ("mesh=AbstractMesh('x': 2, 'y': 4, axis_types=(Auto, Auto), device_kind=cpu, "
            "num_cores=None, platform=cpu)") in text
