"""``lamina.tree``: the short pytree names (``lamina.tree.map``, ``flatten``, ...)."""

from __future__ import annotations

import dataclasses
from typing import Any

from lamina_linear_util.tree_util import (
    tree_all as all,  # noqa: A001
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,  # noqa: A001
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path",
           "map", "map_with_path", "reduce", "reduce_associative", "static", "structure",
           "transpose", "unflatten"]


def static(**kwargs: Any) -> Any:
    """A ``dataclasses.field(**kwargs)`` marked static (``metadata={'static':
    True}``), so :func:`lamina.tree_util.register_dataclass` makes it aux data,
    not a child."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)
