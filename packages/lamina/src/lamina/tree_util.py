"""``lamina.tree_util``: pytrees (JAX's names, on lamina's own registry).

These are the users' view of trees (``lamina_linear_util.tree_util.user_trees``):
a typed key array is a leaf, as in JAX, although transformations see its data.
"""

from lamina_linear_util.tree_util import (
    DictKey,
    FlattenedIndexKey,
    GetAttrKey,
    KeyEntry,
    KeyPath,
    Partial,
    PyTreeDef,
    SequenceKey,
    default_registry,
    keystr,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    register_pytree_with_keys,
    register_pytree_with_keys_class,
    register_static,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
    user_trees,
)

all_leaves = user_trees.all_leaves
flatten_one_level = user_trees.flatten_one_level
flatten_one_level_with_keys = user_trees.flatten_one_level_with_keys
is_tree_node = user_trees.is_tree_node
tree_all = user_trees.tree_all
tree_broadcast = user_trees.tree_broadcast
tree_flatten = user_trees.tree_flatten
tree_flatten_with_path = user_trees.tree_flatten_with_path
tree_leaves = user_trees.tree_leaves
tree_leaves_with_path = user_trees.tree_leaves_with_path
tree_map = user_trees.tree_map
tree_map_with_path = user_trees.tree_map_with_path
tree_reduce = user_trees.tree_reduce
tree_reduce_associative = user_trees.tree_reduce_associative
tree_structure = user_trees.tree_structure
tree_transpose = user_trees.tree_transpose
treedef_tuple = user_trees.treedef_tuple

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial",
    "PyTreeDef", "SequenceKey", "all_leaves", "default_registry", "flatten_one_level",
    "flatten_one_level_with_keys", "is_tree_node", "keystr", "register_dataclass",
    "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "register_pytree_with_keys_class", "register_static", "tree_all", "tree_broadcast",
    "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_reduce_associative",
    "tree_structure", "tree_transpose", "tree_unflatten", "treedef_children",
    "treedef_is_leaf", "treedef_tuple",
]
