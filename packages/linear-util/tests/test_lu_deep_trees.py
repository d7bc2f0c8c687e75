"""Pytrees nested past the C++ flattening's recursion limit raise a clear
``RecursionError`` naming what was flattened (jaxlib alone gives nanobind's
``SystemError: ... returned a result with an exception set``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.errors import PyTreeTooDeepError


def _nest(depth: int) -> Any:
    x: Any = 1.0
    for _ in range(depth):
        x = [x]
    return x


TOO_DEEP = sys.getrecursionlimit() + 10

FLATTENERS: dict[str, Callable[[Any], Any]] = {
    "tree_flatten": tu.tree_flatten,
    "tree_leaves": tu.tree_leaves,
    "tree_structure": tu.tree_structure,
    "tree_flatten_with_path": tu.tree_flatten_with_path,
    "tree_map": lambda t: tu.tree_map(lambda v: v, t),
}


@pytest.mark.parametrize("name", sorted(FLATTENERS))
def test_too_deep_tree_is_a_recursion_error_naming_the_function(name: str) -> None:
    with pytest.raises(PyTreeTooDeepError, match=rf"^{name}: the tree is a pytree nested too "
                                                  r"deeply.*sys.getrecursionlimit\(\) = "):
        FLATTENERS[name](_nest(TOO_DEEP))


def test_a_tree_that_contains_itself_is_the_same_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(RecursionError, match="contains itself"):
        tu.tree_leaves(cyclic)


def test_deep_trees_below_the_limit_still_flatten() -> None:
    assert tu.tree_leaves(_nest(sys.getrecursionlimit() // 2)) == [1.0]


def test_debug_info_names_the_argument_too_deep() -> None:
    def f(x: Any, y: Any, *rest: Any, **kw: Any) -> Any:
        return x

    deep = _nest(TOO_DEEP)
    for args, kwargs, name in [((1.0, deep), {}, "y"), ((1.0, 2.0, 3.0, deep), {}, r"rest\[1\]"),
                               ((1.0, 2.0), {"k": deep}, r"kw\['k'\]")]:
        with pytest.raises(PyTreeTooDeepError, match=rf"^jit\(f\): argument {name} is a pytree"):
            api_util.debug_info("jit", f, args, kwargs)


def test_deep_argument_error_is_none_when_every_argument_flattens() -> None:
    assert api_util.deep_argument_error("jit(f)", lambda x: x, (1.0,), {}) is None
