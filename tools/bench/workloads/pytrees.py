"""Pytree flattening and argument debug info: work done on every trace/call."""

from __future__ import annotations

from typing import Any

from ..adapters import Adapter
from ..registry import DISPATCH, TRACING, Bench, workload

OUTER, MIDDLE = 10, 50  # 10 * 50 * ('w', 'b') = 1000 leaves
DEBUG_INFO_ARGS = 100


def nested_tree() -> dict[str, Any]:
    """A 1000-leaf dict of dicts of dicts with int leaves."""
    return {
        f"block{i}": {f"layer{j:02d}": {"w": i * MIDDLE + j, "b": -j} for j in range(MIDDLE)}
        for i in range(OUTER)
    }


@workload(
    "pytree_flatten_unflatten",
    area="pytree",
    goal=DISPATCH,
    clock="cpu",
    description="tree_flatten + tree_unflatten of a 1000-leaf nested dict",
)
def pytree_flatten_unflatten(a: Adapter) -> Bench:
    tu = a.tree_util
    tree = nested_tree()

    def run() -> object:
        leaves, treedef = tu.tree_flatten(tree)
        return tu.tree_unflatten(treedef, leaves)

    def info() -> dict[str, Any]:
        leaves, _ = tu.tree_flatten(tree)
        rebuilt = tu.tree_unflatten(tu.tree_structure(tree), leaves)
        return {"leaves": len(leaves), "round_trip_equal": rebuilt == tree}

    return Bench(run=run, info=info)


def hundred_arg_function() -> Any:
    """``def f(a0, ..., a99)``: a real signature for the argument-name logic."""
    params = ", ".join(f"a{i}" for i in range(DEBUG_INFO_ARGS))
    namespace: dict[str, Any] = {}
    exec(f"def f({params}):\n    return a0\n", namespace)
    return namespace["f"]


@workload(
    "debug_info_100_args",
    area="debug_info",
    goal=TRACING,
    clock="cpu",
    description="debug_info (arg names, source info) of a 100-argument call",
)
def debug_info_100_args(a: Adapter) -> Bench:
    debug_info = a.debug_info
    fun = hundred_arg_function()
    args = tuple(float(i) for i in range(DEBUG_INFO_ARGS))

    def run() -> object:
        info = debug_info("jit", fun, args, {}, static_argnums=(), static_argnames=())
        # Force the names in case an implementation computes them lazily.
        return tuple(info.arg_names)

    def info() -> dict[str, Any]:
        names = tuple(debug_info("jit", fun, args, {}, static_argnums=(), static_argnames=()).arg_names)
        return {"arg_names": len(names), "first": names[0], "last": names[-1]}

    return Bench(run=run, info=info)
