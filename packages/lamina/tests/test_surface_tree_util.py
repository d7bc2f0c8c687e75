"""The ``tree_util`` and ``tree`` names JAX 0.10.2 has that lamina added:
expected values are JAX's, recorded from ``jax.tree_util`` / ``jax.tree``."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest

import lamina
import lamina.numpy as jnp
from lamina import tree, tree_util
from lamina.tree_util import DictKey, GetAttrKey, SequenceKey


def test_tree_broadcast_grows_prefix_leaves() -> None:
    assert tree_util.tree_broadcast([1, {"a": 2}], [(3, 4), {"a": [5, 6]}]) == \
        [(1, 1), {"a": [2, 2]}]
    assert tree.broadcast(7, {"x": (1, 2), "y": None}) == {"x": (7, 7), "y": None}
    # is_leaf stops the prefix where the full tree goes on.
    assert tree.broadcast([(1, 2)], [((0, 0), [0, 0])],
                          is_leaf=lambda x: isinstance(x, tuple)) == \
        [(((1, 2), (1, 2)), [(1, 2), (1, 2)])]


def test_tree_broadcast_rejects_non_prefix() -> None:
    with pytest.raises(ValueError):
        tree.broadcast([1, 2], [1, 2, 3])


def test_reduce_associative_is_a_balanced_tree() -> None:
    # JAX: ((a+b)+(c+(d+e)))
    out = tree.reduce_associative(lambda a, b: f"({a}+{b})", list("abcde"))
    assert out == "((a+b)+(c+(d+e)))"
    assert tree_util.tree_reduce_associative(lambda a, b: a + b, {"x": 1, "y": (2, 3)}) == 6
    assert tree.reduce_associative(lambda a, b: a + b, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        tree.reduce_associative(lambda a, b: a + b, [])


def test_flatten_one_level_with_keys() -> None:
    children, aux = tree_util.flatten_one_level_with_keys({"a": 1, "b": (2, 3)})
    assert list(children) == [(DictKey("a"), 1), (DictKey("b"), (2, 3))]
    assert aux == ("a", "b")
    children, _ = tree_util.flatten_one_level_with_keys([4, 5])
    assert list(children) == [(SequenceKey(0), 4), (SequenceKey(1), 5)]
    # Namedtuple children are keyed by their fields (jaxlib repeats the first).
    point = collections.namedtuple("point", "x y")
    children, _ = tree_util.flatten_one_level_with_keys(point(1, 2))
    assert list(children) == [(GetAttrKey("x"), 1), (GetAttrKey("y"), 2)]
    with pytest.raises(ValueError, match="leaf"):
        tree_util.flatten_one_level_with_keys(3)
    children, aux = tree_util.flatten_one_level({"a": [1, 2], "b": {"c": 3}})
    assert list(children) == [[1, 2], {"c": 3}] and aux == ("a", "b")


def test_is_tree_node() -> None:
    assert tree_util.is_tree_node(tuple)
    assert tree_util.is_tree_node(type(None))
    assert tree_util.is_tree_node(collections.OrderedDict)
    assert tree_util.is_tree_node(collections.namedtuple("nt", "x"))
    assert not tree_util.is_tree_node(int)
    assert not tree_util.is_tree_node(type(jnp.zeros(2)))


def test_default_registry_flattens_like_tree_flatten() -> None:
    leaves, treedef = tree_util.default_registry.flatten({"a": (1, None), "b": [2]})
    assert leaves == [1, 2]
    assert treedef == tree_util.tree_structure({"a": (0, None), "b": [0]})


@tree_util.register_pytree_with_keys_class
class Pair:
    def __init__(self, left: Any, right: Any) -> None:
        self.left, self.right = left, right

    def tree_flatten_with_keys(self) -> tuple[Any, Any]:
        return ((GetAttrKey("left"), self.left), (GetAttrKey("right"), self.right)), None

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Any) -> Pair:
        return cls(*children)


@tree_util.register_pytree_with_keys_class
class Tagged:
    flattened_without_keys = 0

    def __init__(self, value: Any, tag: str) -> None:
        self.value, self.tag = value, tag

    def tree_flatten_with_keys(self) -> tuple[Any, Any]:
        return ((DictKey("value"), self.value),), self.tag

    def tree_flatten(self) -> tuple[Any, Any]:
        Tagged.flattened_without_keys += 1
        return (self.value,), self.tag

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Any) -> Tagged:
        return cls(children[0], aux)


def test_register_pytree_with_keys_class() -> None:
    pairs, _ = tree_util.tree_flatten_with_path(Pair(1, [2, 3]))
    assert [(tree_util.keystr(path), leaf) for path, leaf in pairs] == \
        [(".left", 1), (".right[0]", 2), (".right[1]", 3)]
    doubled = tree.map(lambda x: 2 * x, Pair(1, 2))
    assert isinstance(doubled, Pair) and (doubled.left, doubled.right) == (2, 4)
    out = lamina.jit(lambda p: p.left + p.right)(Pair(jnp.float32(1), jnp.float32(2)))
    assert float(out) == 3.0


def test_register_pytree_with_keys_class_uses_tree_flatten_without_keys() -> None:
    before = Tagged.flattened_without_keys
    assert tree.leaves(Tagged(5, "t")) == [5]
    assert Tagged.flattened_without_keys == before + 1
    pairs, _ = tree.flatten_with_path(Tagged(5, "t"))
    assert [tree_util.keystr(p) for p, _ in pairs] == ["['value']"]


def test_tree_static_marks_dataclass_fields() -> None:
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Op:
        x: Any
        y: Any
        op: str = tree.static(default="add")

    leaves, treedef = tree.flatten(Op(1, 2))
    assert leaves == [1, 2]
    assert tree.unflatten(treedef, [3, 4]) == Op(3, 4, "add")
    field = {f.name: f for f in dataclasses.fields(Op)}["op"]
    assert field.metadata["static"] is True


def test_jax_tree_names_are_all_present() -> None:
    jax_tree = ["all", "broadcast", "flatten", "flatten_with_path", "leaves",
                "leaves_with_path", "map", "map_with_path", "reduce", "reduce_associative",
                "static", "structure", "transpose", "unflatten"]
    assert [n for n in jax_tree if not hasattr(tree, n)] == []
    jax_tree_util = ["KeyEntry", "KeyPath", "default_registry", "flatten_one_level",
                     "flatten_one_level_with_keys", "is_tree_node",
                     "register_pytree_with_keys_class", "tree_broadcast",
                     "tree_reduce_associative"]
    assert [n for n in jax_tree_util if not hasattr(tree_util, n)] == []
