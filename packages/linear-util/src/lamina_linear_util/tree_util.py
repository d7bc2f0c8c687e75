"""Pytrees for lamina, on jaxlib's C++ pytree implementation.

lamina owns its registries (``jaxlib._jax.pytree.PyTreeRegistry()``), never
jaxlib's default one, so that registering a type in lamina cannot interfere
with JAX in the same process and vice versa.

Semantics match ``jax.tree_util``: tuples, lists, dicts (children in sorted key
order), namedtuples, ``None`` (a node with no children), ``OrderedDict`` and
``defaultdict`` are built-in nodes; other types are leaves unless registered
with :func:`register_pytree_node`, :func:`register_pytree_with_keys`,
:func:`register_dataclass` or :func:`register_static`. Every registration goes
into every registry: :data:`default_registry` (users' trees),
:data:`registry` (transformations' trees, ``None`` an empty subtree),
:data:`none_leaf_registry` (``None`` a leaf, for axis specifications) and
:data:`dispatch_registry` (the C++ jit path).

Two views of one tree. A type registered with :func:`register_transform_node`
is a node for transformations only: users see it as a leaf (as JAX users see
a typed key array), while ``jit``, ``vmap``, ``grad``, control flow... flatten
it into the arrays it holds. The module's functions (``tree_flatten``,
``tree_map``, ...) are the transformations' view, :data:`transform_trees`;
the users' view is :data:`user_trees`, which ``lamina.tree_util`` publishes.

The functions are thin wrappers over the C++ registry: flattening does no
Python work per leaf.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from jaxlib import _jax  # type: ignore[attr-defined]

from lamina_linear_util.errors import PyTreeTooDeepError

__all__ = [
    "DictKey",
    "FlattenedIndexKey",
    "GetAttrKey",
    "KeyEntry",
    "KeyPath",
    "Partial",
    "PrefixMismatch",
    "Pytrees",
    "PyTreeDef",
    "SequenceKey",
    "Unspecified",
    "all_leaves",
    "broadcast_prefix",
    "debug_keystr",
    "default_registry",
    "user_treedef",
    "dispatch_registry",
    "first_prefix_mismatch",
    "flatten_one_level",
    "flatten_one_level_with_keys",
    "is_too_deep",
    "is_tree_node",
    "keystr",
    "none_leaf_registry",
    "register_dataclass",
    "register_pytree_node",
    "register_pytree_node_class",
    "register_pytree_with_keys",
    "register_pytree_with_keys_class",
    "register_static",
    "register_transform_node",
    "registry",
    "tree_all",
    "tree_broadcast",
    "tree_flatten",
    "tree_flatten_with_path",
    "tree_leaves",
    "tree_leaves_with_path",
    "tree_map",
    "tree_map_with_path",
    "tree_reduce",
    "tree_reduce_associative",
    "tree_structure",
    "tree_transpose",
    "too_deep_error",
    "tree_unflatten",
    "treedef_children",
    "treedef_is_leaf",
    "treedef_is_strict_leaf",
    "treedef_tuple",
    "transform_trees",
    "user_trees",
]

_pytree: Any = _jax.pytree

T = TypeVar("T")
TypeT = TypeVar("TypeT", bound=type[Any])

if TYPE_CHECKING:
    # Typed views of the C++ classes (jaxlib ships no stubs for them). At run
    # time the names below are jaxlib's own classes.

    class PyTreeDef:
        """The structure of a pytree (jaxlib's C++ ``PyTreeDef``)."""

        @property
        def num_leaves(self) -> int: ...
        @property
        def num_nodes(self) -> int: ...
        def unflatten(self, leaves: Iterable[Any], /) -> Any: ...
        def flatten_up_to(self, tree: Any, /) -> list[Any]: ...
        def children(self) -> list[PyTreeDef]: ...
        def node_data(self) -> tuple[type[Any], Any] | None: ...
        def compose(self, inner: PyTreeDef, /) -> PyTreeDef: ...
        def walk(self, f_node: Callable[[tuple[Any, ...], Any], Any],
                 f_leaf: Callable[[Any], Any] | None, leaves: Iterable[Any], /) -> Any: ...
        def serialize_using_proto(self) -> bytes: ...
        @staticmethod
        def deserialize_using_proto(registry: Any, data: bytes, /) -> PyTreeDef: ...
        @staticmethod
        def from_node_data_and_children(registry: Any, node_data: Any,
                                        children: Iterable[PyTreeDef], /) -> PyTreeDef: ...
        def __hash__(self) -> int: ...
        def __eq__(self, other: object) -> bool: ...

    class DictKey(Hashable):
        """Key of a dict child: ``str()`` is ``['k']``."""

        key: Hashable
        def __init__(self, key: Hashable) -> None: ...
        def __hash__(self) -> int: ...

    class SequenceKey(Hashable):
        """Key of a tuple/list child: ``str()`` is ``[0]``."""

        idx: int
        def __init__(self, idx: int) -> None: ...
        def __hash__(self) -> int: ...

    class GetAttrKey(Hashable):
        """Key of an attribute child (namedtuple/dataclass field): ``str()`` is ``.x``."""

        name: str
        def __init__(self, name: str) -> None: ...
        def __hash__(self) -> int: ...

    class FlattenedIndexKey(Hashable):
        """Key of a custom node registered without keys: ``str()`` is ``[<flat index 0>]``."""

        key: int
        def __init__(self, key: int) -> None: ...
        def __hash__(self) -> int: ...
else:
    PyTreeDef = _pytree.PyTreeDef
    DictKey = _pytree.DictKey
    SequenceKey = _pytree.SequenceKey
    GetAttrKey = _pytree.GetAttrKey
    FlattenedIndexKey = _pytree.FlattenedIndexKey

KeyEntry: TypeAlias = Any
"""One step of a key path: usually a DictKey, SequenceKey, GetAttrKey or
FlattenedIndexKey; custom nodes registered with keys may use any object."""

KeyPath: TypeAlias = tuple[KeyEntry, ...]


def _new_registry(*, none_is_node: bool) -> Any:
    return _pytree.PyTreeRegistry(enable_none=none_is_node, enable_tuple=True,
                                  enable_namedtuple=True, enable_list=True,
                                  enable_dict=True)


default_registry: Any = _new_registry(none_is_node=True)
"""The registry users' trees are read with (JAX's name): every registration
except transformation-only nodes (:func:`register_transform_node`), which are
leaves here. ``lamina.tree_util`` flattens with it."""

registry: Any = _new_registry(none_is_node=True)
"""The registry transformations flatten with: every registration, including
transformation-only nodes (``None`` is an empty subtree). Pass it to jaxlib
APIs that take a registry."""

none_leaf_registry: Any = _new_registry(none_is_node=False)
"""As :data:`registry`, but ``None`` is a leaf (for axis specifications)."""

dispatch_registry: Any = _new_registry(none_is_node=True)
"""As :data:`registry`, plus nodes that the dispatch layers add for jaxlib's
C++ jit path, which parses arguments with this registry: there, lamina's array
wrapper is a node around the jaxlib array it holds."""

_TRANSFORM_REGISTRIES: tuple[Any, ...] = (registry, none_leaf_registry, dispatch_registry)
# The users' registry last: a registration the others refuse leaves it unchanged.
_ALL_REGISTRIES: tuple[Any, ...] = (*_TRANSFORM_REGISTRIES, default_registry)


# --------------------------------------------------------------------------
# Trees too deep to flatten
# --------------------------------------------------------------------------

def is_too_deep(error: BaseException) -> bool:
    """Whether ``error`` is jaxlib's report of a tree nested past the
    recursion limit: the C++ flattening raises a ``RecursionError`` that
    nanobind turns into a ``SystemError`` (the RecursionError as its cause)."""
    # When the C++ jit function calls its miss handler with the error still
    # pending, the handler's first C call wraps it in another SystemError:
    # follow the chain down to the RecursionError.
    if isinstance(error, RecursionError):  # raised as it is on some call paths
        return "in flatten" in str(error)
    seen: BaseException | None = error
    for _ in range(8):
        if not isinstance(seen, SystemError):
            return False
        cause = seen.__cause__ or seen.__context__
        if isinstance(cause, RecursionError):
            return True
        seen = cause
    return False


def too_deep_error(what: str) -> PyTreeTooDeepError:
    """The error for ``what`` (``tree_flatten: the tree``, ``jit(f): argument
    x``) being a pytree too deeply nested to flatten."""
    limit = sys.getrecursionlimit()
    return PyTreeTooDeepError(
        f"{what} is a pytree nested too deeply to flatten: flattening follows at most "
        f"about {limit - 2} levels of nesting (Python's recursion limit, "
        f"sys.getrecursionlimit() = {limit}), or the tree contains itself. Use a "
        "flatter structure (an array, or a list of leaves), or raise the limit with "
        "sys.setrecursionlimit.")



def _checked(error: SystemError, fun: str) -> BaseException:
    """What to raise for a ``SystemError`` out of the C++ flattening of the
    tree passed to ``fun``: the clear error when it is a tree too deep,
    otherwise the error itself."""
    return too_deep_error(f"{fun}: the tree") if is_too_deep(error) else error


# --------------------------------------------------------------------------
# Structures
# --------------------------------------------------------------------------

def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """Rebuild a pytree of structure ``treedef`` from ``leaves``."""
    return treedef.unflatten(leaves)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root node's children."""
    return treedef.children()


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """True for a single leaf, and also for ``None`` (a node with no children)."""
    return treedef.num_nodes == 1


def treedef_is_strict_leaf(treedef: PyTreeDef) -> bool:
    """True only for a single leaf."""
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


# --------------------------------------------------------------------------
# Key paths
# --------------------------------------------------------------------------

def _simple_entrystr(key: KeyEntry) -> str:
    if isinstance(key, DictKey):
        return str(key.key)
    if isinstance(key, SequenceKey):
        return str(key.idx)
    if isinstance(key, GetAttrKey):
        return str(key.name)
    if isinstance(key, FlattenedIndexKey):
        return str(key.key)
    return str(key)


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """Render a key path: ``['a'][0].x``; ``simple=True`` gives ``a0x`` (with
    ``separator`` between entries, e.g. ``a/0/x``)."""
    render = _simple_entrystr if simple else str
    return separator.join(map(render, keys))


_FLAT_INDEX = re.compile(r"<flat index ([^>]+)>")


def debug_keystr(keys: KeyPath) -> str:
    """``keystr`` as used in argument names and result paths: keys of custom
    nodes registered without keys print as plain indices (``[0]``, not
    ``[<flat index 0>]``), as JAX does."""
    text = "".join(map(str, keys))
    if "<flat index" in text:
        text = _FLAT_INDEX.sub(r"\1", text)
    return text


# --------------------------------------------------------------------------
# Structure mismatches
# --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PrefixMismatch:
    """Where a tree fails to be a prefix of another, and what each has there."""

    path: KeyPath
    prefix_node: str  # a description, e.g. "a dict with keys ['a']"
    full_node: str

    def where(self, root: str = "") -> str:
        """The path as text below ``root`` (``vmap in_axes[1]['a']``); "the root"
        for an empty path without a root name."""
        text = root + keystr(self.path)
        return text or "the root"

    def where_in_tree(self) -> str:
        """``tree['a'][0]``, or "the root"."""
        return self.where("tree") if self.path else "the root"


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _describe_node(x: Any, node: tuple[list[tuple[KeyEntry, Any]], Any] | None) -> str:
    if node is None:
        if isinstance(x, _PytreeLeaf):
            return "a leaf"
        return f"a leaf of type {type(x).__name__}"
    keyed, aux = node
    if x is None:
        return "None"
    if isinstance(x, dict):
        return f"a {type(x).__name__} with keys {list(aux)!r}"
    if _is_namedtuple(x):
        return f"a namedtuple {type(x).__name__} with fields {list(type(x)._fields)!r}"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(keyed)}"
    meta = "" if aux is None else f" with metadata {aux!r}"
    return f"a {type(x).__name__} node with {len(keyed)} children{meta}"


def _same_aux(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # e.g. arrays in metadata: equality is not a bool
        return False


class _PytreeLeaf:
    """Stands for a leaf when only a treedef (no values) is at hand."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "*"


PYTREE_LEAF = _PytreeLeaf()


class _NoInitializer:
    __slots__ = ()


_NO_INITIALIZER = _NoInitializer()


class Unspecified:
    """The default of ``identity`` in :func:`tree_reduce_associative`: no
    identity was given."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Unspecified()"


_UNSPECIFIED = Unspecified()


# --------------------------------------------------------------------------
# The functions over one registry
# --------------------------------------------------------------------------

class Pytrees:
    """The pytree functions (``tree_flatten``, ``tree_map``, ...) over one
    registry. The module's functions are :data:`transform_trees`' (what
    transformations see); ``lamina.tree_util`` offers :data:`user_trees`'."""

    __slots__ = ("registry", "_flatten", "_flatten_with_path")

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        # Bound once: each function then costs one Python call over the C++ one.
        self._flatten = registry.flatten
        self._flatten_with_path = registry.flatten_with_path

    def __reduce__(self) -> str:
        """The module global this is (pickle's by-name form): a bound method such
        as ``lamina.tree_util.tree_map`` pickles, and the persistent trace cache
        fingerprints it, by that name."""
        for name in ("transform_trees", "user_trees"):
            if globals().get(name) is self:
                return name
        raise TypeError("Pytrees.__reduce__: only the module's own Pytrees "
                        "(transform_trees, user_trees) can be pickled, not one over "
                        f"{self.registry!r}")

    def tree_flatten(self, tree: Any, is_leaf: Callable[[Any], bool] | None = None
                     ) -> tuple[list[Any], PyTreeDef]:
        """Flatten ``tree`` into its leaves and its structure.

        ``is_leaf(x)`` returning true stops the traversal at ``x`` (it becomes a leaf).
        """
        try:
            leaves, treedef = self._flatten(tree, is_leaf)
        except SystemError as e:
            raise _checked(e, "tree_flatten") from None
        return leaves, treedef

    def tree_leaves(self, tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
        """The leaves of ``tree`` in flatten order."""
        try:
            leaves: list[Any] = self._flatten(tree, is_leaf)[0]
        except SystemError as e:
            raise _checked(e, "tree_leaves") from None
        return leaves

    def tree_structure(self, tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
        """The structure (``PyTreeDef``) of ``tree``."""
        try:
            treedef: PyTreeDef = self._flatten(tree, is_leaf)[1]
        except SystemError as e:
            raise _checked(e, "tree_structure") from None
        return treedef

    def tree_flatten_with_path(self, tree: Any, is_leaf: Callable[..., bool] | None = None,
                               is_leaf_takes_path: bool = False
                               ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
        """Flatten ``tree`` into ``(key_path, leaf)`` pairs and its structure.

        ``is_leaf`` takes the node, or ``(key_path, node)`` when ``is_leaf_takes_path``.
        """
        predicate: Callable[[Any, Any], bool] | None = is_leaf
        if is_leaf is not None and not is_leaf_takes_path:
            leaf_test = is_leaf
            predicate = lambda _path, x: leaf_test(x)
        try:
            pairs, treedef = self._flatten_with_path(tree, predicate)
        except SystemError as e:
            raise _checked(e, "tree_flatten_with_path") from None
        return pairs, treedef

    def tree_leaves_with_path(self, tree: Any, is_leaf: Callable[..., bool] | None = None,
                              is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
        """The ``(key_path, leaf)`` pairs of ``tree`` in flatten order."""
        return self.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]

    def all_leaves(self, iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
        """True if every element of ``iterable`` is a leaf."""
        if is_leaf is None:
            return bool(_pytree.all_leaves(self.registry, iterable))
        items = list(iterable)
        return items == self.tree_leaves(items, is_leaf)

    def flatten_one_level(self, tree: Any) -> tuple[list[Any], Any]:
        """The children and auxiliary data of the pytree node ``tree``.

        Raises ``ValueError`` if ``tree`` is a leaf.
        """
        out = self.registry.flatten_one_level(tree)
        if out is None:
            raise ValueError(f"flatten_one_level: {tree!r} of type {type(tree).__name__} is "
                             f"a leaf, not a pytree node")
        children, aux = out
        return list(children), aux

    def treedef_tuple(self, treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
        """The structure of a tuple whose children have structures ``treedefs``."""
        treedef: PyTreeDef = _pytree.treedef_tuple(self.registry, list(treedefs))
        return treedef

    def _keyed_children(self, x: Any) -> tuple[list[tuple[KeyEntry, Any]], Any] | None:
        out = self.registry.flatten_one_level_with_keys(x)
        if out is None:
            return None
        keyed, aux = out
        keyed = list(keyed)
        if _is_namedtuple(x):
            # jaxlib 0.10's one-level flattening repeats the first field's key for
            # namedtuples; the field names are the right keys.
            keyed = [(GetAttrKey(name), child)
                     for name, (_, child) in zip(type(x)._fields, keyed)]
        return keyed, aux

    def first_prefix_mismatch(self, prefix_tree: Any, full_tree: Any,
                              is_leaf: Callable[[Any], bool] | None = None
                              ) -> PrefixMismatch | None:
        """The first place (in flatten order) where ``prefix_tree`` is not a tree
        prefix of ``full_tree``, or ``None`` if it is one.

        A leaf of ``prefix_tree`` (or a node for which ``is_leaf`` is true) matches
        any subtree; a node must match a node of the same type, arity and metadata.
        """
        return self._mismatch_below((), prefix_tree, full_tree, is_leaf)

    def _mismatch_below(self, path: KeyPath, prefix: Any, full: Any,
                        is_leaf: Callable[[Any], bool] | None) -> PrefixMismatch | None:
        if is_leaf is not None and is_leaf(prefix):
            return None
        prefix_node = self._keyed_children(prefix)
        if prefix_node is None:
            return None
        full_node = self._keyed_children(full)
        if (full_node is None or type(prefix) is not type(full)
                or len(prefix_node[0]) != len(full_node[0])
                or not _same_aux(prefix_node[1], full_node[1])):
            return PrefixMismatch(path, _describe_node(prefix, prefix_node),
                                  _describe_node(full, full_node))
        for (key, prefix_child), (_, full_child) in zip(prefix_node[0], full_node[0]):
            found = self._mismatch_below(path + (key,), prefix_child, full_child, is_leaf)
            if found is not None:
                return found
        return None

    def _structure_error(self, api: str, trees: Sequence[Any], is_leaf: Callable[[Any], bool] | None,
                         cause: Exception) -> ValueError:
        for i, other in enumerate(trees[1:], start=1):
            mismatch = self.first_prefix_mismatch(trees[0], other, is_leaf)
            if mismatch is not None:
                return ValueError(
                    f"{api}: tree argument {i} does not have the structure of the first tree: "
                    f"at {mismatch.where_in_tree()}, the first tree has {mismatch.prefix_node} "
                    f"but tree argument {i} has {mismatch.full_node}")
        return ValueError(f"{api}: the trees do not have the same structure: {cause}")

    def tree_map(self, f: Callable[..., Any], tree: Any, *rest: Any,
                 is_leaf: Callable[[Any], bool] | None = None) -> Any:
        """Apply ``f`` leaf-wise to ``tree`` and the trees in ``rest``.

        Each tree in ``rest`` must have ``tree``'s structure, or have it as a prefix
        (then ``f`` receives the corresponding subtrees). A mismatch raises a
        ``ValueError`` naming the key path where the structures differ.
        """
        try:
            leaves, treedef = self._flatten(tree, is_leaf)
        except SystemError as e:
            raise _checked(e, "tree_map") from None
        if not rest:
            return treedef.unflatten(map(f, leaves))
        try:
            others = [treedef.flatten_up_to(other) for other in rest]
        except (ValueError, TypeError) as e:
            raise self._structure_error("tree_map", (tree, *rest), is_leaf, e) from None
        return treedef.unflatten(map(f, leaves, *others))

    def tree_map_with_path(self, f: Callable[..., Any], tree: Any, *rest: Any,
                           is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False) -> Any:
        """Like :func:`tree_map`, but ``f`` receives the key path first."""
        pairs, treedef = self.tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
        paths = [path for path, _ in pairs]
        leaves = [leaf for _, leaf in pairs]
        try:
            others = [treedef.flatten_up_to(other) for other in rest]
        except (ValueError, TypeError) as e:
            leaf_test = None if is_leaf_takes_path else is_leaf
            raise self._structure_error("tree_map_with_path", (tree, *rest), leaf_test, e) from None
        return treedef.unflatten(map(f, paths, leaves, *others))

    def tree_transpose(self, outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                       pytree_to_transpose: Any) -> Any:
        """Turn a tree of structure outer-of-inner into one of inner-of-outer.

        With ``inner_treedef=None`` the inner structure is read from the first
        outer leaf.
        """
        flat, treedef = self._flatten(pytree_to_transpose)
        if inner_treedef is None:
            inner_treedef = self.tree_structure(outer_treedef.flatten_up_to(pytree_to_transpose)[0])
        inner_size = inner_treedef.num_leaves
        outer_size = outer_treedef.num_leaves
        if treedef.num_leaves != inner_size * outer_size:
            expected = outer_treedef.compose(inner_treedef)
            raise TypeError(f"tree_transpose: the tree has structure {treedef}, but the outer "
                            f"and inner structures make {expected}")
        rows = [flat[i * inner_size:(i + 1) * inner_size] for i in range(outer_size)]
        subtrees = [outer_treedef.unflatten(column) for column in zip(*rows)]
        if not rows:
            subtrees = [outer_treedef.unflatten([]) for _ in range(inner_size)]
        return inner_treedef.unflatten(subtrees)

    def tree_reduce(self, function: Callable[[T, Any], T], tree: Any,
                    initializer: T | _NoInitializer = _NO_INITIALIZER,
                    is_leaf: Callable[[Any], bool] | None = None) -> T:
        """``functools.reduce`` over the leaves of ``tree``."""
        leaves = self.tree_leaves(tree, is_leaf)
        result: T
        if isinstance(initializer, _NoInitializer):
            result = functools.reduce(function, leaves)
        else:
            result = functools.reduce(function, leaves, initializer)
        return result

    def tree_all(self, tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
        """True if every leaf of ``tree`` is truthy."""
        return all(self.tree_leaves(tree, is_leaf))

    def broadcast_prefix(self, prefix_tree: Any, full_tree: Any,
                         is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
        """Repeat each leaf of ``prefix_tree`` once per leaf of the matching subtree
        of ``full_tree``. A ``ValueError`` names where ``prefix_tree`` is not a prefix."""
        prefix_leaves, prefix_treedef = self._flatten(prefix_tree, is_leaf)
        try:
            subtrees = prefix_treedef.flatten_up_to(full_tree)
        except (ValueError, TypeError) as e:
            mismatch = self.first_prefix_mismatch(prefix_tree, full_tree, is_leaf)
            if mismatch is None:
                raise ValueError(f"broadcast_prefix: not a tree prefix: {e}") from None
            raise ValueError(
                f"broadcast_prefix: the prefix tree is not a tree prefix of the full tree: at "
                f"{mismatch.where_in_tree()}, the prefix has {mismatch.prefix_node} but the "
                f"full tree has {mismatch.full_node}") from None
        result: list[Any] = []
        for leaf, subtree in zip(prefix_leaves, subtrees):
            result.extend([leaf] * self._flatten(subtree)[1].num_leaves)
        return result

    def tree_broadcast(self, prefix_tree: Any, full_tree: Any,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
        """``prefix_tree`` grown to the structure of ``full_tree``: each of its
        leaves is repeated at every leaf of the matching subtree of ``full_tree``
        (``tree_broadcast([1, 2], [(3, 4), 5])`` is ``[(1, 1), 2]``). A
        ``ValueError`` names where ``prefix_tree`` is not a prefix."""
        leaves = self.broadcast_prefix(prefix_tree, full_tree, is_leaf)
        return self.tree_structure(full_tree).unflatten(leaves)

    def tree_reduce_associative(self, operation: Callable[[T, T], T], tree: Any, *,
                                identity: T | Unspecified = _UNSPECIFIED,
                                is_leaf: Callable[[Any], bool] | None = None) -> T:
        """Reduce the leaves of ``tree`` with the associative ``operation`` as a
        balanced binary tree (the left half of the leaves, then the right half,
        then ``operation`` of the two). An empty tree gives ``identity``; without
        one it is a ``TypeError``."""
        leaves = self.tree_leaves(tree, is_leaf)
        if not leaves:
            if isinstance(identity, Unspecified):
                raise TypeError("tree_reduce_associative: the tree has no leaves and no "
                                "identity was given; pass identity= for empty trees")
            return identity

        def halves(lo: int, hi: int) -> T:
            if hi - lo == 1:
                leaf: T = leaves[lo]
                return leaf
            mid = lo + (hi - lo) // 2
            return operation(halves(lo, mid), halves(mid, hi))

        return halves(0, len(leaves))

    def flatten_one_level_with_keys(self, tree: Any) -> tuple[list[tuple[KeyEntry, Any]], Any]:
        """The ``(key, child)`` pairs and auxiliary data of the pytree node
        ``tree`` (namedtuple children are keyed by their field names). Raises
        ``ValueError`` if ``tree`` is a leaf."""
        out = self._keyed_children(tree)
        if out is None:
            raise ValueError(f"flatten_one_level_with_keys: {tree!r} of type "
                             f"{type(tree).__name__} is a leaf, not a pytree node")
        return out

    def is_tree_node(self, typ: type[Any]) -> bool:
        """Whether instances of ``typ`` are pytree nodes (built in, a namedtuple,
        or registered), not leaves."""
        return bool(self.registry.is_node(typ))

transform_trees = Pytrees(registry)
"""The pytree functions transformations use: nodes registered with
:func:`register_transform_node` are nodes, so transformations reach their data."""

user_trees = Pytrees(default_registry)
"""The pytree functions users see (``lamina.tree_util``): nodes registered with
:func:`register_transform_node` are leaves, as in JAX."""



class _Slot:
    """A leaf standing for any value while a structure is rebuilt."""

    __slots__ = ()


@functools.lru_cache(maxsize=256)
def user_treedef(treedef: Any) -> Any:
    """The structure users see (:data:`user_trees`) of values whose structure
    for transformations is ``treedef``: each node registered with
    :func:`register_transform_node` is one leaf there (``*``), as JAX shows
    a key array in ``Lowered.in_tree``."""
    slots = [_Slot()] * treedef.num_leaves
    return user_trees.tree_structure(treedef.unflatten(slots))


tree_flatten = transform_trees.tree_flatten
tree_leaves = transform_trees.tree_leaves
tree_structure = transform_trees.tree_structure
tree_flatten_with_path = transform_trees.tree_flatten_with_path
tree_leaves_with_path = transform_trees.tree_leaves_with_path
all_leaves = transform_trees.all_leaves
flatten_one_level = transform_trees.flatten_one_level
treedef_tuple = transform_trees.treedef_tuple
first_prefix_mismatch = transform_trees.first_prefix_mismatch
tree_map = transform_trees.tree_map
tree_map_with_path = transform_trees.tree_map_with_path
tree_transpose = transform_trees.tree_transpose
tree_reduce = transform_trees.tree_reduce
tree_all = transform_trees.tree_all
broadcast_prefix = transform_trees.broadcast_prefix
tree_broadcast = transform_trees.tree_broadcast
tree_reduce_associative = transform_trees.tree_reduce_associative
flatten_one_level_with_keys = transform_trees.flatten_one_level_with_keys
is_tree_node = transform_trees.is_tree_node


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------

def _register_everywhere(register: Callable[[Any], None], nodetype: type[Any]) -> None:
    try:
        for reg in _ALL_REGISTRIES:
            register(reg)
    except ValueError as e:
        raise ValueError(f"cannot register {nodetype!r} as a pytree node: {e}") from None


def register_pytree_node(nodetype: type[T],
                         flatten_func: Callable[[T], tuple[Iterable[Any], Any]],
                         unflatten_func: Callable[[Any, Iterable[Any]], T],
                         flatten_with_keys_func: Callable[
                             [T], tuple[Iterable[tuple[KeyEntry, Any]], Any]] | None = None,
                         ) -> None:
    """Make ``nodetype`` a pytree node.

    ``flatten_func(x)`` returns ``(children, aux_data)`` (aux hashable, compared
    by equality); ``unflatten_func(aux_data, children)`` rebuilds the node.
    Without ``flatten_with_keys_func`` the children's keys are
    ``FlattenedIndexKey(i)``. Registering a type twice is a ``ValueError``.
    """
    _register_everywhere(
        lambda reg: reg.register_node(nodetype, flatten_func, unflatten_func,
                                      flatten_with_keys_func), nodetype)


def register_transform_node(nodetype: type[T],
                            flatten_func: Callable[[T], tuple[Iterable[Any], Any]],
                            unflatten_func: Callable[[Any, Iterable[Any]], T],
                            flatten_with_keys_func: Callable[
                                [T], tuple[Iterable[tuple[KeyEntry, Any]], Any]] | None = None,
                            ) -> None:
    """Make ``nodetype`` a node for transformations and a leaf for users.

    Transformations (the functions of this module, :data:`registry`,
    :data:`none_leaf_registry`, :data:`dispatch_registry`) flatten an instance
    into the children ``flatten_func`` gives and rebuild it with
    ``unflatten_func``, as for :func:`register_pytree_node`; the users' view
    (:data:`user_trees`, :data:`default_registry`) keeps it whole, a leaf. For
    values that hold arrays but are one array to the user (a typed key array);
    such a value has a ``shape`` and a ``dtype``, and autodiff gives it one
    ``float0`` tangent of its shape, as JAX does for key arrays.
    ``flatten_with_keys_func`` gives the children's keys, which argument names
    and result paths show (default ``FlattenedIndexKey(i)``). Registering a
    type twice is a ``ValueError``.
    """
    try:
        for reg in _TRANSFORM_REGISTRIES:
            reg.register_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)
    except ValueError as e:
        raise ValueError(f"cannot register {nodetype!r} as a transformation node: {e}") from None


def register_pytree_with_keys(nodetype: type[T],
                              flatten_with_keys: Callable[
                                  [T], tuple[Iterable[tuple[KeyEntry, Any]], Any]],
                              unflatten_func: Callable[[Any, Iterable[Any]], T],
                              flatten_func: Callable[[T], tuple[Iterable[Any], Any]] | None = None,
                              ) -> None:
    """Make ``nodetype`` a pytree node whose children have keys.

    ``flatten_with_keys(x)`` returns ``(((key, child), ...), aux_data)``.
    ``flatten_func`` (faster, without keys) is derived when not given.
    """
    if flatten_func is None:
        def flatten_func(x: T) -> tuple[Iterable[Any], Any]:
            keyed, aux = flatten_with_keys(x)
            return [child for _, child in keyed], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls: TypeT) -> TypeT:
    """Class decorator: register a class with ``tree_flatten(self)`` and
    ``tree_unflatten(cls, aux, children)`` methods."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: TypeT) -> TypeT:
    """Class decorator: register a class with ``tree_flatten_with_keys(self)``
    (returning ``(((key, child), ...), aux)``) and ``tree_unflatten(cls, aux,
    children)`` methods; a ``tree_flatten(self)`` method, when the class has
    one, is used where no keys are needed."""
    def flatten_with_keys(x: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Any]:
        out: tuple[Iterable[tuple[KeyEntry, Any]], Any] = x.tree_flatten_with_keys()
        return out

    flatten: Callable[[Any], tuple[Iterable[Any], Any]] | None = None
    if hasattr(cls, "tree_flatten"):
        def flatten(x: Any) -> tuple[Iterable[Any], Any]:
            out: tuple[Iterable[Any], Any] = x.tree_flatten()
            return out
    register_pytree_with_keys(cls, flatten_with_keys, cls.tree_unflatten, flatten)
    return cls

def register_static(cls: TypeT) -> TypeT:
    """Class decorator: instances are pytrees with no leaves (they are static)."""
    register_pytree_with_keys(cls, lambda x: ((), x), lambda x, _children: x)
    return cls


def register_dataclass(nodetype: TypeT, data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None,
                       drop_fields: Sequence[str] = ()) -> TypeT:
    """Make a dataclass (or a class built from keyword fields) a pytree node.

    ``data_fields`` are children (leaves or subtrees) with keys ``.name``;
    ``meta_fields`` are static aux data. For a dataclass both may be omitted:
    fields with ``metadata={'static': True}`` are meta, the other ``init``
    fields data. Returns ``nodetype`` so it can be used as a decorator.
    """
    if data_fields is None or meta_fields is None:
        if (data_fields is None) != (meta_fields is None):
            raise TypeError("register_dataclass: give both data_fields and meta_fields, "
                            "or neither (to infer them from the dataclass)")
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype!r} is not a dataclass, so "
                            f"data_fields and meta_fields must be given")
        fields = [f for f in dataclasses.fields(nodetype)
                  if f.init and f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    data = tuple(data_fields)
    meta = tuple(meta_fields)
    if overlap := set(data) & set(meta):
        raise ValueError(f"register_dataclass: data_fields and meta_fields of {nodetype!r} "
                         f"overlap: {sorted(overlap)}")
    if dataclasses.is_dataclass(nodetype):
        init_fields = {f.name for f in dataclasses.fields(nodetype) if f.init}
        init_fields.difference_update(drop_fields)
        if missing := init_fields - {*data, *meta}:
            raise ValueError(f"register_dataclass: fields {sorted(missing)} of {nodetype!r} "
                             f"are neither data nor meta fields; add them to drop_fields "
                             f"to leave them out")
        if unexpected := {*data, *meta} - init_fields:
            raise ValueError(f"register_dataclass: {sorted(unexpected)} are not init "
                             f"fields of {nodetype!r}")
    _register_everywhere(
        lambda reg: reg.register_dataclass_node(nodetype, list(data), list(meta)), nodetype)
    return nodetype


# OrderedDict keeps insertion order; defaultdict sorts like dict (as JAX does).
register_pytree_with_keys(
    collections.OrderedDict,
    lambda d: (tuple((DictKey(k), v) for k, v in d.items()), tuple(d)),
    lambda keys, values: collections.OrderedDict(zip(keys, values, strict=True)),
)


def _flatten_defaultdict(d: collections.defaultdict[Any, Any]
                         ) -> tuple[tuple[tuple[KeyEntry, Any], ...], Any]:
    keys = tuple(sorted(d))
    return tuple((DictKey(k), d[k]) for k in keys), (d.default_factory, keys)


register_pytree_with_keys(
    collections.defaultdict,
    _flatten_defaultdict,
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values, strict=True)),
)


# --------------------------------------------------------------------------
# Partial
# --------------------------------------------------------------------------

class _HashableCallableShim:
    """Hides a ``functools.partial`` from ``partial.__new__``'s flattening of
    nested partials, while calling, hashing and comparing like it."""

    __slots__ = ("fun", "func", "args", "keywords")

    # Set by Partial.__new__ after construction (see there).
    func: Callable[..., Any]
    args: tuple[Any, ...]
    keywords: dict[str, Any]

    def __init__(self, fun: Callable[..., Any]) -> None:
        self.fun = fun

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fun(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.fun)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _HashableCallableShim):
            return bool(self.fun == other.fun)
        return bool(self.fun == other)

    def __repr__(self) -> str:
        return f"_HashableCallableShim({self.fun!r})"


class Partial(functools.partial[Any]):
    """``functools.partial`` as a pytree: the bound positional and keyword
    arguments are the children, the function is static aux data.

    ``Partial(f, *args, **kwargs)`` can be passed into transformed functions;
    its arguments are traced like any other leaves. A ``functools.partial``
    given as ``func`` is kept whole (its own arguments stay static).
    """

    def __new__(cls, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Partial:
        if isinstance(func, functools.partial):
            # partial.__new__ would merge an inner partial's arguments into
            # this one, making them leaves; the shim keeps them static.
            shim = _HashableCallableShim(func)
            out = super().__new__(cls, shim, *args, **kwargs)
            # Set only now: partial.__new__ merges any argument with a `func`.
            shim.func = func.func
            shim.args = func.args
            shim.keywords = func.keywords
            return out
        return super().__new__(cls, func, *args, **kwargs)


def _unflatten_partial(func: Callable[..., Any], children: Any) -> Partial:
    args, keywords = children
    return Partial(func, *args, **keywords)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func), _unflatten_partial)
