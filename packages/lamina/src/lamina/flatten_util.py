"""``lamina.flatten_util.ravel_pytree``: a pytree of arrays as one flat vector.

``flat, unravel = ravel_pytree(tree)`` concatenates the raveled leaves into a
1-D array of their common dtype (``result_type`` of the leaves' dtypes, Python
scalars counting as their default dtype); ``unravel(flat)`` rebuilds the tree,
each leaf with its own shape and dtype. With mixed dtypes ``unravel`` insists on
an input of the flat dtype, as JAX does.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval

import lamina.numpy as jnp
from lamina import tree_util

__all__ = ["ravel_pytree"]


def _pieces(flat: Any, ends: Sequence[int], shapes: Sequence[tuple[int, ...]]) -> list[Any]:
    starts = [0, *ends[:-1]]
    return [lax.reshape(lax.slice(flat, (lo,), (hi,)), shape)
            for lo, hi, shape in zip(starts, ends, shapes)]


def _unravel_same(ends: tuple[int, ...], shapes: tuple[tuple[int, ...], ...], flat: Any
                  ) -> list[Any]:
    return _pieces(jnp.asarray(flat), ends, shapes)


def _unravel_mixed(ends: tuple[int, ...], shapes: tuple[tuple[int, ...], ...],
                   leaf_dtypes: tuple[np.dtype[Any], ...], flat_dtype: np.dtype[Any], flat: Any
                   ) -> list[Any]:
    got = get_aval(flat).dtype
    if got != flat_dtype:
        raise TypeError(f"unravel function given array of dtype {got}, but expected dtype "
                        f"{flat_dtype}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex leaves stored as real: NumPy warns on the cast
        return [lax.convert_element_type(piece, dt)
                for piece, dt in zip(_pieces(jnp.asarray(flat), ends, shapes), leaf_dtypes)]


def _ravel_leaves(leaves: Sequence[Any]) -> tuple[Any, Callable[[Any], list[Any]]]:
    if not leaves:
        return jnp.array([], np.float32), lambda _: []
    leaf_dtypes = tuple(dtypes.canonicalize_dtype(get_aval(x).dtype) if not isinstance(
        x, (bool, int, float, complex)) else dtypes.canonicalize_dtype(np.result_type(type(x)))
        for x in leaves)
    flat_dtype = dtypes.result_type(*leaf_dtypes)
    shapes = tuple(tuple(np.shape(x)) for x in leaves)
    ends = tuple(int(e) for e in np.cumsum([int(np.prod(s, dtype=np.int64)) for s in shapes]))
    if all(dt == flat_dtype for dt in leaf_dtypes):
        flat = jnp.concatenate([jnp.ravel(x) for x in leaves])
        return flat, functools.partial(_unravel_same, ends, shapes)
    flat = jnp.concatenate([jnp.ravel(lax.convert_element_type(x, flat_dtype)) for x in leaves])
    return flat, functools.partial(_unravel_mixed, ends, shapes, leaf_dtypes, flat_dtype)


def _unravel_tree(treedef: Any, unravel_leaves: Callable[[Any], list[Any]], flat: Any) -> Any:
    return tree_util.tree_unflatten(treedef, unravel_leaves(flat))


def _check_numeric(pytree: Any, leaves: Sequence[Any]) -> None:
    """A leaf with an extended dtype (a typed key array) has no numeric dtype to
    ravel into: an error naming its path, as JAX refuses it too."""
    for leaf in leaves:
        dtype = getattr(leaf, "dtype", None)
        if getattr(dtype, "lamina_extended_dtype", False):
            path = next(tree_util.keystr(p) for p, x in tree_util.tree_leaves_with_path(pytree)
                        if x is leaf)
            raise TypeError(f"ravel_pytree: cannot determine the dtype of the leaf at "
                            f"pytree{path}: it has dtype {dtype}, not a numeric one (ravel "
                            "lamina.random.key_data(keys) for a key array's data)")


def ravel_pytree(pytree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(flat, unravel)``: the leaves of ``pytree`` raveled and concatenated, and
    the function that turns such a vector back into a pytree like ``pytree``."""
    leaves, treedef = tree_util.tree_flatten(pytree)
    _check_numeric(pytree, leaves)
    flat, unravel_leaves = _ravel_leaves(leaves)
    return flat, functools.partial(_unravel_tree, treedef, unravel_leaves)
