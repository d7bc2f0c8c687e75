"""Property tests: random stacks of transformations on random pytrees of
arguments produce jaxprs that validate, type-check, evaluate like the eager
stack, and name their inputs as ``debug_info`` does."""

from __future__ import annotations

from typing import Any

import numpy as np
import tc_testing as T
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina_tracing_core as tc
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core import core, lax
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

LEAF_SHAPE = (2, 2, 2, 2)  # one axis per possible vmap

leaf = st.integers(0, 10_000).map(
    lambda seed: np.random.RandomState(seed).uniform(0.2, 1.0, LEAF_SHAPE).astype(np.float32))
pytrees = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=2).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "hi"]), children, min_size=1, max_size=2)),
    max_leaves=3)
transforms = st.lists(st.sampled_from(["jvp", "vjp", "grad", "vmap"]), min_size=1,
                      max_size=4)


def base(*args: Any) -> Any:
    leaves = tu.tree_leaves(args)
    acc = T.t_sin(leaves[0])
    for x in leaves[1:]:
        acc = T.t_add(T.t_mul(acc, x), T.t_cos(x))
    return {"out": acc, "pair": [T.t_mul(leaves[0], acc)]}


def _ones_like(tree: Any) -> Any:
    return tu.tree_map(lambda x: np.ones(np.shape(x), np.float32), tree)


def _total(tree: Any) -> Any:
    leaves = tu.tree_leaves(tree)
    acc = lax.reduce_sum(leaves[0], tuple(range(np.ndim(leaves[0]))))
    for x in leaves[1:]:
        acc = T.t_add(acc, lax.reduce_sum(x, tuple(range(np.ndim(x)))))
    return acc


def _shapes(tree: Any) -> Any:
    return tu.tree_map(lambda x: np.shape(x), tree)


def apply(name: str, g: Any) -> Any:
    if name == "jvp":
        return lambda *a: tc.jvp(g, a, _ones_like(a))[1]
    if name == "vjp":
        def vjp_fn(*a: Any) -> Any:
            out, pullback = tc.vjp(g, *a)
            return pullback(_ones_like(out))
        return vjp_fn
    if name == "grad":
        return lambda *a: tc.grad(lambda *b: _total(g(*b)), argnums=tuple(range(len(a))))(*a)
    return tc.vmap(g)


@settings(max_examples=30, deadline=None)
@given(args=st.lists(pytrees, min_size=1, max_size=2).map(tuple), stack=transforms)
def test_transformation_stacks_keep_debug_info(args: tuple[Any, ...], stack: list[str]) -> None:
    fun = base
    for name in stack:
        fun = apply(name, fun)

    def top(*a: Any) -> Any:
        return fun(*a)

    closed = tc.make_jaxpr(top)(*args)
    validate_jaxpr_debug_info(closed)
    core.check_jaxpr(closed)
    expected = api_util.debug_info("make_jaxpr", top, args, {})
    dbg = closed.jaxpr.debug_info
    assert dbg is not None
    assert dbg.arg_names == expected.arg_names
    assert len(dbg.arg_names) == len(tu.tree_leaves(args))
    eager = top(*args)
    out_leaves, out_tree = tu.tree_flatten(eager)
    assert dbg.result_paths == tuple(
        "result" + tu.keystr(path) for path, _ in tu.tree_flatten_with_path(eager)[0])
    staged = core.eval_jaxpr(closed.jaxpr, closed.consts, *tu.tree_leaves(args))
    for a, b in zip(staged, out_leaves):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(args=st.lists(pytrees, min_size=1, max_size=3).map(tuple))
def test_make_jaxpr_names_match_debug_info(args: tuple[Any, ...]) -> None:
    def f(*a: Any) -> Any:
        return {"y": base(*a), "n": [T.t_neg(tu.tree_leaves(a)[-1])]}

    closed = tc.make_jaxpr(f)(*args)
    validate_jaxpr_debug_info(closed)
    dbg = closed.jaxpr.debug_info
    assert dbg is not None
    assert dbg.arg_names == api_util.debug_info("make_jaxpr", f, args, {}).arg_names
    assert dbg.result_paths[0] == "result['n'][0]"
    assert str(closed).splitlines()[0].startswith("# args: a[0]")
