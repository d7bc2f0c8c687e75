"""``lamina.tree``: the short pytree names (``lamina.tree.map``, ``flatten``, ...)."""

from __future__ import annotations

import dataclasses
from typing import Any

from lamina_linear_util.tree_util import tree_unflatten as unflatten
from lamina_linear_util.tree_util import user_trees as _trees

all = _trees.tree_all  # noqa: A001
broadcast = _trees.tree_broadcast
flatten = _trees.tree_flatten
flatten_with_path = _trees.tree_flatten_with_path
leaves = _trees.tree_leaves
leaves_with_path = _trees.tree_leaves_with_path
map = _trees.tree_map  # noqa: A001
map_with_path = _trees.tree_map_with_path
reduce = _trees.tree_reduce
reduce_associative = _trees.tree_reduce_associative
structure = _trees.tree_structure
transpose = _trees.tree_transpose

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field(**kwargs)`` marked static (``metadata={'static':
    True}``), so :func:`lamina.tree_util.register_dataclass` makes it aux data,
    not a child."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)
