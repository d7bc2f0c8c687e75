"""``lamina.experimental.shard_map``: ``shard_map`` under its older home.

``shard_map(f, mesh, in_specs, out_specs, check_rep=True, auto=frozenset())``
is the top-level :func:`lamina.shard_map` with the older spelling of its
options: ``check_rep`` is ``check_vma``, and ``auto`` lists the axes that stay
automatic (the others are manual).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lamina_sharded_jit.shard_map import shard_map as _shard_map

__all__ = ["shard_map"]


def shard_map(f: Callable[..., Any] | None = None, mesh: Any = None, in_specs: Any = None,
              out_specs: Any = None, check_rep: bool = True, auto: Any = frozenset(), *,
              check_vma: bool | None = None, axis_names: Any = None) -> Any:
    """``f`` mapped over the blocks of its arguments (see :func:`lamina.shard_map`)."""
    if out_specs is None:
        raise TypeError("shard_map: out_specs is required")
    if axis_names is None:
        axis_names = frozenset() if not auto or mesh is None else frozenset(
            a for a in mesh.axis_names if a not in set(auto))
    check = check_rep if check_vma is None else check_vma
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                      axis_names=axis_names, check_vma=check)
