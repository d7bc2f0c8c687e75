"""Unreduced and reduced values in ``shard_map`` bodies
(``lax.pcast(x, axes, to='unreduced'|'reduced')``): their types, the sums and
casts they bind, the transposes that pair up, and the errors, as JAX 0.10.2
gives them (texts and values printed by JAX 0.10.2 on 8 CPU devices, the
values under ``set_mesh`` of an Explicit mesh)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import lamina as lx
import lamina.lax as lax
import lamina.numpy as jnp
from lamina.sharding import AxisType, NamedSharding, PartitionSpec as P


@pytest.fixture
def mesh() -> lx.sharding.Mesh:
    return lx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)


def _x(mesh: lx.sharding.Mesh) -> Any:
    return lx.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x")))


def _sm(mesh: lx.sharding.Mesh, body: Callable[..., Any], out: P) -> Any:
    return lx.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=out)


def _outcome(mesh: lx.sharding.Mesh, f: Callable[..., Any]) -> str:
    """``typeof`` of ``f(a, u, r)`` in a body over ``mesh`` (``u`` unreduced
    over 'x', ``r`` reduced over it), or the error's class and first line."""
    said: list[str] = []

    def body(a):  # type: ignore[no-untyped-def]
        u = lax.pcast(a, "x", to="unreduced")
        r = lax.pcast(lax.psum(a, "x"), "x", to="reduced")
        try:
            said.append(str(lx.typeof(f(a, u, r))))
        except Exception as e:  # noqa: BLE001  (the outcome is the error)
            said.append(f"{type(e).__name__}: {str(e).splitlines()[0]}")
        return a

    lx.make_jaxpr(_sm(mesh, body, P("x")))(_x(mesh))
    return said[0]


# JAX 0.10.2's outcomes (its NotImplementedError "unreduced rule for sin is not
# implemented" cases are lamina's ShardingTypeError naming the primitive).
CASES: dict[str, tuple[Callable[..., Any], str]] = {
    "r": (lambda a, u, r: r, "float32[4]{R:x}"),
    "u": (lambda a, u, r: u, "float32[4]{U:x}"),
    "u+u": (lambda a, u, r: u + u, "float32[4]{U:x}"),
    "u*r": (lambda a, u, r: u * r, "float32[4]{U:x}"),
    "r*u": (lambda a, u, r: r * u, "float32[4]{U:x}"),
    "r+r": (lambda a, u, r: r + r, "float32[4]{R:x}"),
    "sin r": (lambda a, u, r: jnp.sin(r), "float32[4]{R:x}"),
    "psum u y": (lambda a, u, r: lax.psum(u, "y"), "float32[4]{U:x}"),
    "psum u x": (lambda a, u, r: lax.psum(u, "x"), "float32[4]"),
    "r varying": (lambda a, u, r: lax.pcast(r, "x", to="varying"), "float32[4]{V:x}"),
    "sum u": (lambda a, u, r: jnp.sum(u), "float32[]{U:x}"),
    "u f16": (lambda a, u, r: u.astype(jnp.float16), "float16[4]{U:x}"),
    "u reshape": (lambda a, u, r: u.reshape(2, 2), "float32[2,2]{U:x}"),
    "a reduced y": (lambda a, u, r: lax.pcast(a, "y", to="reduced"), "float32[4]{V:x, R:y}"),
    "u+a": (lambda a, u, r: u + a, "ValueError: pvary cannot accept args which are unreduced. "
            "Got f32[4]{U:x} and axes={'x'}"),
    "pmax u": (lambda a, u, r: lax.pmax(u, "x"), "ValueError: pvary cannot accept args which "
               "are unreduced. Got f32[4]{U:x} and axes={'x'}"),
    "psum r": (lambda a, u, r: lax.psum(r, "x"), "ValueError: pvary cannot accept args which "
               "are reduced. Got f32[4]{R:x} and axes={'x'}"),
    "u*u": (lambda a, u, r: u * u, "ShardingTypeError: lhs and rhs to `mul` cannot be "
            "unreduced since mul is bilinear. Got lhs=frozenset({'x'}), rhs=frozenset({'x'})"),
    "u*2": (lambda a, u, r: u * 2.0, "ShardingTypeError: RHS should be reduced along the same "
            "axes LHS is unreduced on. Got lhs=float32[4]{U:x} and rhs=float32[]"),
    "r*2": (lambda a, u, r: r * 2.0, "ShardingTypeError: Inputs cannot be replicated on the "
            "same axes that another input is reduced on. Got input type: float32[] and "
            "reduced spec: frozenset({'x'})"),
    "psum u x,y": (lambda a, u, r: lax.psum(u, ("x", "y")), "ValueError: jax.lax.psum can only "
                   "accept axis_name which corresponds to one of varying, unreduced, reduced or "
                   "invarying state of the input. Got input type: float32[4]{U:x}, axes: "
                   "('x', 'y') and input state: {'unreduced', 'invarying'}"),
    "a reduced x": (lambda a, u, r: lax.pcast(a, "x", to="reduced"),
                    "ValueError: Unsupported pcast from=varying, to='reduced'"),
    "u unreduced": (lambda a, u, r: lax.pcast(u, "x", to="unreduced"),
                    "ValueError: Unsupported pcast from=unreduced, to='unreduced'"),
    "r reduced": (lambda a, u, r: lax.pcast(r, "x", to="reduced"),
                  "ValueError: Unsupported pcast from=reduced, to='reduced'"),
    "inv unreduced": (lambda a, u, r: lax.pcast(a, "y", to="unreduced"),
                      "ValueError: Unsupported pcast from=invarying, to='unreduced'"),
    "u varying": (lambda a, u, r: lax.pcast(u, "x", to="varying"),
                  "ValueError: Unsupported pcast from=unreduced, to='varying'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_types_and_errors_of_unreduced_and_reduced_values(mesh: lx.sharding.Mesh,
                                                          case: str) -> None:
    f, want = CASES[case]
    got = _outcome(mesh, f)
    if case == "psum u x,y":  # JAX prints a set: either order
        got = got.replace("{'invarying', 'unreduced'}", "{'unreduced', 'invarying'}")
    assert got == want


def test_unary_ops_refuse_unreduced_operands(mesh: lx.sharding.Mesh) -> None:
    for f, name in [(jnp.sin, "sin"), (lambda u: -u, "neg"), (lambda u: u - u, "sub")]:
        got = _outcome(mesh, lambda a, u, r, f=f: f(u))
        assert got.startswith(f"ShardingTypeError: {name} cannot take an operand unreduced "
                              f"over mesh axes: got f32[4]{{U:x}}")


def test_unexpected_to_is_refused() -> None:
    mesh = lx.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    with pytest.raises(ValueError, match=r"Got unexpected `to` value. Allowed `to` values are: "):
        lx.make_jaxpr(lx.shard_map(lambda a: lax.pcast(a, "x", to="foo"), mesh=mesh,
                                   in_specs=P("x"), out_specs=P("x")))(jnp.arange(8.0))


def test_casts_sums_and_their_transposes_as_jax(mesh: lx.sharding.Mesh) -> None:
    x = _x(mesh)
    sum_u = lambda a: lax.psum(lax.pcast(a, "x", to="unreduced"), "x")  # noqa: E731
    r_to_v = lambda a: lax.pcast(lax.pcast(a, "y", to="reduced"), "y", to="varying")  # noqa: E731
    text = str(lx.make_jaxpr(_sm(mesh, sum_u, P()))(x).eqns[0].params["jaxpr"])
    # JAX 0.10.2: d:f32[4]{U:x} = vary_unreduced_cast_p[axes=('x',)] c
    #             e:f32[4] = unreduced_psum[axes=('x',)] d
    assert ":f32[4]{U:x} = vary_unreduced_cast_p[axes=('x',)]" in text
    assert ":f32[4] = unreduced_psum[axes=('x',)]" in text
    # the transposes: JAX 0.10.2's grad jaxprs hold these bodies
    grad_text = str(lx.make_jaxpr(lx.grad(lambda x: _sm(mesh, sum_u, P())(x).sum()))(x))
    assert "{R:x} = preduced[axes=('x',)]" in grad_text
    assert "{V:x} = reduced_vary_cast_p[axes=('x',)]" in grad_text
    grad_text = str(lx.make_jaxpr(lx.grad(lambda x: _sm(mesh, r_to_v, P(("x", "y")))(x).sum()))(x))
    assert "{V:x, U:y} = vary_unreduced_cast_p[axes=('y',)]" in grad_text
    assert "{V:x} = unreduced_psum[axes=('y',)]" in grad_text

    def both(a):  # type: ignore[no-untyped-def]
        r = lax.pcast(lax.psum(a * a, "x"), "x", to="reduced")
        return lax.psum(lax.pcast(a, "x", to="unreduced") * r, "x")

    with lx.set_mesh(mesh):
        np.testing.assert_allclose(_sm(mesh, sum_u, P())(x), [4.0, 6.0, 8.0, 10.0])
        np.testing.assert_allclose(lx.grad(lambda x: _sm(mesh, sum_u, P())(x).sum())(x),
                                   np.ones(8))
        np.testing.assert_allclose(
            lx.grad(lambda x: _sm(mesh, r_to_v, P(("x", "y")))(x).sum())(x), np.full(8, 4.0))
        np.testing.assert_allclose(_sm(mesh, both, P())(x), [64.0, 156.0, 320.0, 580.0])
        np.testing.assert_allclose(
            lx.grad(lambda x: (_sm(mesh, both, P())(x) ** 2).sum())(x),
            [2048.0, 11856.0, 46080.0, 136880.0, 6144.0, 26832.0, 87040.0, 229680.0],
            rtol=1e-6)


def test_an_unreduced_result_is_not_replicated(mesh: lx.sharding.Mesh) -> None:
    f = _sm(mesh, lambda a: lax.pcast(a, "x", to="unreduced"), P())
    with pytest.raises(ValueError, match="shard_map applied to the function '<lambda>' was "
                                         "given out_specs which require replication"):
        lx.make_jaxpr(f)(_x(mesh))


def test_without_check_vma_reduced_is_nothing_and_unreduced_refused() -> None:
    mesh = lx.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)

    def sm(to: str) -> Any:
        return lx.shard_map(lambda a: lax.pcast(a, "y", to=to), mesh=mesh, in_specs=P("x"),
                            out_specs=P("x"), check_vma=False)

    # JAX 0.10.2: the body's jaxpr is { lambda ; c:f32[4]. let  in (c,) }
    text = str(lx.make_jaxpr(sm("reduced"))(jnp.arange(8.0)).eqns[0].params["jaxpr"])
    assert "preduced" not in text
    np.testing.assert_allclose(sm("reduced")(jnp.arange(8.0)), np.arange(8.0))
    with pytest.raises(ValueError, match=r"^Unsupported pcast from=invarying, to='unreduced'$"):
        lx.make_jaxpr(sm("unreduced"))(jnp.arange(8.0))
