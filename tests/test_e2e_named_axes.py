"""Behaviour 9: named axes used by equations are effects, propagated bottom-up
to the jaxprs holding them, removed by the transformation binding the axis;
an unbound axis name is a clear trace-time error."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
from e2e_helpers import walk_eqns
from lamina import lax
from lamina.errors import UnboundAxisNameError
from lamina_tracing_core.effects import NamedAxisEffect

X = np.arange(24, dtype=np.float32).reshape(8, 3)
I = NamedAxisEffect("i")


def _named(effects):
    return {e for e in effects if isinstance(e, NamedAxisEffect)}


def test_vmap_binding_the_axis_leaves_no_named_effect():
    closed = lx.make_jaxpr(lx.vmap(lambda x: lax.psum(x, "i"), axis_name="i"))(X)
    assert not _named(closed.jaxpr.effects)
    for eqn, holder in walk_eqns(closed):
        assert not _named(eqn.effects), eqn
        assert not _named(holder.effects)
    np.testing.assert_allclose(
        np.asarray(lx.vmap(lambda x: lax.psum(x, "i"), axis_name="i")(X)),
        np.broadcast_to(X.sum(0), X.shape))


def test_pmap_body_equation_carries_the_effect_and_the_pmap_removes_it(devices8):
    closed = lx.make_jaxpr(lx.pmap(lambda x: lax.psum(x, "i"), axis_name="i"))(X)
    assert not _named(closed.jaxpr.effects)
    (pmap_eqn,) = closed.jaxpr.eqns
    assert not _named(pmap_eqn.effects)
    body = pmap_eqn.params["call_jaxpr"]
    body = getattr(body, "jaxpr", body)
    assert _named(body.effects) == {I}
    (psum_eqn,) = [e for e in body.eqns if e.primitive.name == "psum"]
    assert _named(psum_eqn.effects) == {I}


def test_effects_propagate_bottom_up_through_an_inner_jit(devices8):
    fun = lx.pmap(lambda x: lx.jit(lambda y: lax.psum(y, "i"))(x) * 2, axis_name="i")
    closed = lx.make_jaxpr(fun)(X)
    assert not _named(closed.jaxpr.effects)
    by_prim = {}
    for eqn, holder in walk_eqns(closed):
        by_prim.setdefault(eqn.primitive.name, []).append((eqn, holder))
    (jit_eqn, jit_holder), = by_prim["jit"]
    assert _named(jit_eqn.effects) == {I}          # the jit equation uses axis i ...
    assert _named(jit_holder.effects) == {I}       # ... and so does the pmap body
    (psum_eqn, psum_holder), = by_prim["psum"]
    assert _named(psum_holder.effects) == {I}
    (mul_eqn, _), = by_prim["mul"]
    assert not _named(mul_eqn.effects)
    np.testing.assert_allclose(np.asarray(fun(X)), np.broadcast_to(2 * X.sum(0), X.shape))


def test_nested_binders_remove_only_their_own_axis():
    def body(x):
        return lax.psum(x, ("i", "j"))

    inner = lx.vmap(body, axis_name="j")
    closed = lx.make_jaxpr(lx.vmap(inner, axis_name="i"))(X.reshape(2, 4, 3))
    assert not _named(closed.jaxpr.effects)
    out = lx.vmap(inner, axis_name="i")(X.reshape(2, 4, 3))
    np.testing.assert_allclose(np.asarray(out),
                               np.broadcast_to(X.reshape(2, 4, 3).sum((0, 1)), (2, 4, 3)))


def test_unbound_axis_is_a_name_error_naming_the_axis():
    with pytest.raises(UnboundAxisNameError) as info:
        lx.make_jaxpr(lambda x: lax.psum(x, "j"))(X)
    assert issubclass(UnboundAxisNameError, NameError)
    assert "'j'" in str(info.value)


def test_unbound_axis_under_another_binder_names_both():
    with pytest.raises(NameError) as info:
        lx.make_jaxpr(lx.vmap(lambda x: lax.psum(x, "j"), axis_name="i"))(X)
    assert isinstance(info.value, UnboundAxisNameError)
    assert "'j'" in str(info.value) and "'i'" in str(info.value)


def test_unbound_axis_inside_jit_is_an_error_too():
    with pytest.raises(UnboundAxisNameError, match="'k'"):
        lx.jit(lambda x: lax.psum(x, "k"))(X)
