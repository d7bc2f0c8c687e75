"""Pytrees on jaxlib's C++ registry (lamina's own registries)."""

import collections
import dataclasses
import functools
import operator
from typing import Any, NamedTuple

import pytest
from jaxlib import _jax  # type: ignore[attr-defined]

from lamina_linear_util import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    Partial,
    SequenceKey,
    all_leaves,
    broadcast_prefix,
    debug_keystr,
    first_prefix_mismatch,
    flatten_one_level,
    keystr,
    none_leaf_registry,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_static,
    registry,
    tree_all,
    tree_flatten,
    tree_flatten_with_path,
    tree_leaves,
    tree_leaves_with_path,
    tree_map,
    tree_map_with_path,
    tree_reduce,
    tree_structure,
    tree_transpose,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    treedef_is_strict_leaf,
    treedef_tuple,
)


class Point(NamedTuple):
    u: Any
    v: Any


class Box:
    """A custom node without keys."""

    def __init__(self, a: Any, b: Any, name: str = "box") -> None:
        self.a, self.b, self.name = a, b, name

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Box) and (self.a, self.b, self.name)
                == (other.a, other.b, other.name))


def unflatten_box(name: str, children: Any) -> Box:
    a, b = children
    return Box(a, b, name)


register_pytree_node(Box, lambda b: ((b.a, b.b), b.name), unflatten_box)


class KeyedBox:
    """A custom node with keys."""

    def __init__(self, w: Any, b: Any) -> None:
        self.w, self.b = w, b


register_pytree_with_keys(
    KeyedBox,
    lambda k: (((GetAttrKey("w"), k.w), (GetAttrKey("b"), k.b)), None),
    lambda _, ch: KeyedBox(*ch))


@register_dataclass
@dataclasses.dataclass
class Layer:
    weight: Any
    bias: Any
    act: str = dataclasses.field(default="relu", metadata=dict(static=True))


def test_builtin_containers_round_trip() -> None:
    tree = {"b": [1, (2, None)], "a": Point(3, {"z": 4, "y": 5})}
    leaves, treedef = tree_flatten(tree)
    assert leaves == [3, 5, 4, 1, 2]      # dict keys sorted
    assert tree_unflatten(treedef, leaves) == tree
    assert type(tree_unflatten(treedef, leaves)["a"]) is Point
    assert treedef.num_leaves == 5


def test_none_is_an_empty_subtree() -> None:
    assert tree_leaves([None, 1, (None,)]) == [1]
    assert tree_structure(None).num_leaves == 0
    assert treedef_is_leaf(tree_structure(None))
    assert not treedef_is_strict_leaf(tree_structure(None))
    assert treedef_is_strict_leaf(tree_structure(1.0))
    assert none_leaf_registry.flatten([None, 1])[0] == [None, 1]


def test_is_leaf() -> None:
    tree = {"a": (1, 2), "b": [3]}
    assert tree_leaves(tree, is_leaf=lambda x: isinstance(x, tuple)) == [(1, 2), 3]
    assert tree_map(len, tree, is_leaf=lambda x: isinstance(x, (tuple, list))) == {"a": 2, "b": 1}


def test_custom_nodes_and_dataclasses() -> None:
    tree = [Box(1, 2, "lin"), KeyedBox(3, 4), Layer(5, (6, 7))]
    leaves, treedef = tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5, 6, 7]
    back = tree_unflatten(treedef, [x * 10 for x in leaves])
    assert back[0] == Box(10, 20, "lin")
    assert back[2] == Layer(50, (60, 70), "relu")
    assert "lin" in str(treedef)
    # The static field is metadata: changing it changes the structure.
    assert tree_structure(Layer(1, 2, "tanh")) != tree_structure(Layer(1, 2))


def test_registration_errors() -> None:
    with pytest.raises(ValueError, match="cannot register .*Box.* Duplicate"):
        register_pytree_node(Box, lambda b: ((), None), lambda a, c: Box(1, 2))

    @dataclasses.dataclass
    class Half:
        a: int
        b: int

    with pytest.raises(ValueError, match=r"fields \['b'\] .* are neither data nor meta"):
        register_dataclass(Half, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="overlap"):
        register_dataclass(Half, data_fields=["a", "b"], meta_fields=["a"])
    with pytest.raises(TypeError, match="is not a dataclass"):
        register_dataclass(Box)


def test_registration_reaches_both_registries_but_not_jaxlibs_default() -> None:
    assert registry.flatten(Box(1, 2))[0] == [1, 2]
    assert none_leaf_registry.flatten(Box(None, 2))[0] == [None, 2]
    default = _jax.pytree.default_registry()
    assert default.flatten(Box(1, 2))[0] == [Box(1, 2)]
    assert registry is not default


def test_register_pytree_node_class_and_static() -> None:
    @register_pytree_node_class
    class Pair:
        def __init__(self, x: Any, y: Any) -> None:
            self.x, self.y = x, y

        def tree_flatten(self) -> tuple[tuple[Any, Any], None]:
            return (self.x, self.y), None

        @classmethod
        def tree_unflatten(cls, aux: None, children: Any) -> "Pair":
            return cls(*children)

    @register_static
    class Flag:
        def __eq__(self, other: object) -> bool:
            return isinstance(other, Flag)

        def __hash__(self) -> int:
            return 0

    assert tree_leaves(Pair(1, [2])) == [1, 2]
    assert tree_leaves([Flag(), 1]) == [1]
    assert tree_map(lambda x: x + 1, Pair(1, 2)).y == 3


def test_ordered_and_default_dicts() -> None:
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert tree_leaves(od) == [1, 2]
    assert tree_map(lambda x: x, od) == od and list(tree_map(lambda x: x, od)) == ["b", "a"]
    dd: collections.defaultdict[str, Any] = collections.defaultdict(list, {"b": 1, "a": 2})
    back = tree_map(lambda x: -x, dd)
    assert tree_leaves(dd) == [2, 1]
    assert isinstance(back, collections.defaultdict) and back.default_factory is list


def test_paths_and_keystr() -> None:
    tree = {"m": KeyedBox(1, [2]), "n": Point(3, Box(4, 5)), "o": Layer(6, 7)}
    pairs, _ = tree_flatten_with_path(tree)
    assert [keystr(p) for p, _ in pairs] == [
        "['m'].w", "['m'].b[0]", "['n'].u", "['n'].v[<flat index 0>]",
        "['n'].v[<flat index 1>]", "['o'].weight", "['o'].bias"]
    assert [debug_keystr(p) for p, _ in pairs][3] == "['n'].v[0]"
    assert [leaf for _, leaf in pairs] == [1, 2, 3, 4, 5, 6, 7]
    path = pairs[1][0]
    assert keystr(path, simple=True, separator="/") == "m/b/0"
    assert tree_leaves_with_path([1])[0][0] == (SequenceKey(0),)
    assert keystr((DictKey("a"), SequenceKey(1), GetAttrKey("x"), FlattenedIndexKey(2))) == \
        "['a'][1].x[<flat index 2>]"
    assert keystr((DictKey("a"), SequenceKey(1), GetAttrKey("x"), FlattenedIndexKey(2)),
                  simple=True, separator=".") == "a.1.x.2"


def test_flatten_with_path_is_leaf() -> None:
    tree = {"a": (1, 2), "b": 3}
    pairs, _ = tree_flatten_with_path(tree, is_leaf=lambda x: isinstance(x, tuple))
    assert [leaf for _, leaf in pairs] == [(1, 2), 3]
    pairs, _ = tree_flatten_with_path(tree, is_leaf=lambda p, x: len(p) == 1,
                                      is_leaf_takes_path=True)
    assert [leaf for _, leaf in pairs] == [(1, 2), 3]


def test_tree_map_with_several_trees_and_prefixes() -> None:
    assert tree_map(operator.add, {"a": 1, "b": [2]}, {"a": 10, "b": [20]}) == \
        {"a": 11, "b": [22]}
    # The first tree may be a prefix of the others.
    assert tree_map(lambda x, y: (x, y), [1], [(2, 3)]) == [(1, (2, 3))]
    out = tree_map_with_path(lambda p, x, y: (keystr(p), x + y), {"a": 1}, {"a": 2})
    assert out == {"a": ("['a']", 3)}


@pytest.mark.parametrize("first, second, message", [
    ({"a": 1, "b": [2]}, {"a": 1, "b": [2, 3]},
     r"at tree\['b'\], the first tree has a list of length 1 but tree argument 1 has a list "
     r"of length 2"),
    ({"a": 1}, {"b": 1},
     r"at the root, the first tree has a dict with keys \['a'\] but tree argument 1 has a "
     r"dict with keys \['b'\]"),
    ([(1, 2)], [[1, 2]], r"at tree\[0\], the first tree has a tuple of length 2 but tree "
                         r"argument 1 has a list of length 2"),
    ([None], [3], r"at tree\[0\], the first tree has None but tree argument 1 has a leaf of "
                  r"type int"),
    (Point(1, 2), Point(1, (2,)), None),
])
def test_tree_map_mismatch_names_the_path(first: Any, second: Any, message: str | None
                                          ) -> None:
    if message is None:  # a leaf is a prefix of a subtree: fine
        assert tree_map(lambda x, y: y, first, second) == second
        return
    with pytest.raises(ValueError, match=message):
        tree_map(lambda x, y: x, first, second)


def test_first_prefix_mismatch_details() -> None:
    found = first_prefix_mismatch({"a": Point(1, 2)}, {"a": Point(1, 2)})
    assert found is None
    found = first_prefix_mismatch({"a": Box(1, 2, "x")}, {"a": Box(1, 2, "y")})
    assert found is not None
    assert found.where("spec") == "spec['a']"
    assert "metadata 'x'" in found.prefix_node and "metadata 'y'" in found.full_node
    found = first_prefix_mismatch(Point(1, [1, 2]), Point(1, [1]))
    assert found is not None and found.where() == ".v"


def test_broadcast_prefix() -> None:
    assert broadcast_prefix((1, 2), ([3, 4], {"a": 5})) == [1, 1, 2]
    assert broadcast_prefix((1, None), (3, [4, 5]), is_leaf=lambda x: x is None) == \
        [1, None, None]
    with pytest.raises(ValueError, match=r"at tree\[1\]"):
        broadcast_prefix((1, [2]), (3, (4,)))


def test_treedef_helpers() -> None:
    treedef = tree_structure(((1, 2), {"a": 3}))
    children = treedef_children(treedef)
    assert [c.num_leaves for c in children] == [2, 1]
    assert treedef_tuple(children) == treedef
    assert flatten_one_level({"b": 1, "a": 2}) == ([2, 1], ("a", "b"))
    with pytest.raises(ValueError, match="is a leaf"):
        flatten_one_level(3)
    assert all_leaves([1, 2.0]) and not all_leaves([1, (2,)])
    assert all_leaves([(1,)], is_leaf=lambda x: isinstance(x, tuple))


def test_transpose_reduce_all() -> None:
    outer = tree_structure([0, 0])
    inner = tree_structure({"a": 0, "b": 0})
    tree = [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    assert tree_transpose(outer, inner, tree) == {"a": [1, 3], "b": [2, 4]}
    assert tree_transpose(outer, None, tree) == {"a": [1, 3], "b": [2, 4]}
    with pytest.raises(TypeError, match="tree_transpose"):
        tree_transpose(outer, tree_structure((0, 0, 0)), tree)
    assert tree_reduce(operator.add, tree) == 10
    assert tree_reduce(operator.add, tree, 100) == 110
    assert tree_reduce(operator.add, [], 5) == 5
    assert tree_all([True, {"a": 1}]) and not tree_all([True, (0,)])
    assert tree_all([])


def test_partial_is_a_pytree() -> None:
    p = Partial(operator.add, 1.0)
    leaves, treedef = tree_flatten(p)
    assert leaves == [1.0]
    q = tree_unflatten(treedef, [10.0])
    assert isinstance(q, Partial) and q(2.0) == 12.0
    assert tree_leaves(Partial(max)) == []
    # A functools.partial inside keeps its own arguments static.
    inner = functools.partial(operator.sub, 100)
    wrapped = Partial(inner, 1)
    assert wrapped() == 99
    assert tree_leaves(wrapped) == [1]
    assert tree_structure(Partial(inner, 1)) == tree_structure(Partial(inner, 2))
    assert tree_map(lambda x: x * 3, Partial(operator.mul, 2, y=0)).keywords == {"y": 0}


class _Boxed:
    """One value to users, a node over its contents to transformations."""

    def __init__(self, contents: Any) -> None:
        self.contents = contents


def test_transform_node_is_a_leaf_for_users() -> None:
    from lamina_linear_util import tree_util as tu

    tu.register_transform_node(_Boxed, lambda b: ((b.contents,), None),
                               lambda _, children: _Boxed(*children))
    tree = {"b": _Boxed(7), "x": 1}
    assert tree_leaves(tree) == [7, 1]  # the module's functions: transformations' view
    assert tu.transform_trees.tree_leaves(tree) == [7, 1]
    user_leaves = tu.user_trees.tree_leaves(tree)
    assert user_leaves[0] is tree["b"] and user_leaves[1] == 1
    assert str(tu.user_trees.tree_structure(tree)) == "PyTreeDef({'b': *, 'x': *})"
    assert len(tu.default_registry.flatten(tree)[0]) == 2
    assert tu.dispatch_registry.flatten(tree)[0] == [7, 1]
    assert none_leaf_registry.flatten([_Boxed(None)])[0] == [None]
    assert tu.is_tree_node(_Boxed) and not tu.user_trees.is_tree_node(_Boxed)
    assert tu.user_trees.tree_map(lambda v: type(v).__name__, tree) == {"b": "_Boxed",
                                                                          "x": "int"}
    with pytest.raises(ValueError, match="leaf"):
        tu.user_trees.flatten_one_level(tree["b"])
    # one registration per type, in either view
    with pytest.raises(ValueError, match="_Boxed"):
        register_pytree_node(_Boxed, lambda b: ((), None), lambda _, c: _Boxed(None))
    assert not tu.user_trees.is_tree_node(_Boxed)  # the refused registration left no trace
    with pytest.raises(ValueError, match="transformation node"):
        tu.register_transform_node(_Boxed, lambda b: ((), None), lambda _, c: _Boxed(None))
