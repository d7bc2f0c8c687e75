"""Behaviour 4: ``device_put`` of a pytree is one operation (one equation with
N operands when staged), eagerly and under jit, with names kept."""

from __future__ import annotations

import numpy as np

import lamina as lx

TREE = {'a': np.arange(3, dtype=np.float32),
        'b': [np.zeros((2, 2), np.float32), np.float32(1.5)],
        'c': (np.int32(7),)}


def _device_put_eqns(closed):
    return [e for e in closed.jaxpr.eqns if e.primitive.name == "device_put"]


def test_pytree_device_put_is_one_equation_with_n_operands():
    closed = lx.make_jaxpr(lambda t: lx.device_put(t))(TREE)
    (eqn,) = _device_put_eqns(closed)
    n = len(lx.tree_util.tree_leaves(TREE))
    assert len(eqn.invars) == n and len(eqn.outvars) == n
    assert len(closed.jaxpr.eqns) == 1
    dbg = closed.jaxpr.debug_info
    assert dbg.arg_names == ("t['a']", "t['b'][0]", "t['b'][1]", "t['c'][0]")
    assert dbg.result_paths == ("result['a']", "result['b'][0]", "result['b'][1]",
                                "result['c'][0]")


def test_pytree_device_put_to_a_device_is_one_equation():
    device = lx.devices()[-1]
    closed = lx.make_jaxpr(lambda t: lx.device_put(t, device))(TREE)
    (eqn,) = _device_put_eqns(closed)
    assert len(eqn.invars) == 4


def test_eager_pytree_device_put_places_every_leaf():
    device = lx.devices()[-1]
    out = lx.device_put(TREE, device)
    assert lx.tree_util.tree_structure(out) == lx.tree_util.tree_structure(TREE)
    for leaf, ref in zip(lx.tree_util.tree_leaves(out), lx.tree_util.tree_leaves(TREE)):
        assert isinstance(leaf, lx.Array)
        assert leaf.devices() == {device}
        np.testing.assert_array_equal(np.asarray(leaf), ref)
        assert leaf.dtype == np.asarray(ref).dtype


def test_device_put_inside_jit_keeps_values():
    out = lx.jit(lambda t: lx.device_put(t))(TREE)
    np.testing.assert_array_equal(np.asarray(out['b'][0]), TREE['b'][0])
    assert float(out['b'][1]) == 1.5
