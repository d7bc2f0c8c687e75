"""Tangent-space utilities shared by autodiff rules: symbolic zeros and adding.

A tangent or cotangent that is known to be zero is represented *symbolically*
by ``Zero(aval)``: rules that see one can skip work, and outputs that no input
tangent reaches cost nothing. ``instantiate_zeros`` turns a symbolic zero into
an actual array when a rule needs one.

Tangents of integer and boolean values have dtype ``float0`` (as in JAX):
they carry no information and are always zeros.

A value that is a leaf to users but a node to transformations (a typed key
array, see ``tree_util.register_transform_node``) is not differentiable: as in
JAX, its tangent is one float0 array of its shape, while transformations carry
float0 tangents of the data it holds. ``node_tangents_flat`` and
``user_tangents`` convert between the two at the API boundary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_linear_util import tree_util as tu

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import (  # the zeros the rules build
    bdim_at_front,
    instantiate_zeros,
    typed_array,
    zeros_like_aval,
)
from lamina_tracing_core.core import staging
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core.symbolic import Zero, is_zero, tangent_aval

__all__ = [
    "Zero", "add_jaxvals", "add_jaxvals_p", "add_tangents", "instantiate_zeros",
    "is_transform_node", "is_zero", "node_tangents_flat", "staging", "tangent_aval", "typed_array", "user_tangents", "zeros_like_aval",
    "zeros_like_jaxval",
]


add_jaxvals_p = Primitive("add_any")
"""Adds two tangents (or cotangents) of the same type; linear in both."""


def _add_jaxvals_abstract_eval(a: ShapedArray, b: ShapedArray) -> ShapedArray:
    if a.shape != b.shape or a.dtype != b.dtype:
        raise TypeError(f"add_any: tangents must have equal types, got {a.str_short()} "
                        f"and {b.str_short()}")
    return a if not a.weak_type else b


add_jaxvals_p.def_abstract_eval(_add_jaxvals_abstract_eval)


def add_jaxvals(a: Any, b: Any) -> Any:
    return add_jaxvals_p.bind(a, b)


def add_tangents(a: Any, b: Any) -> Any:
    """Sum of two tangents, either of which may be a symbolic ``Zero``."""
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    if a is None:
        return b
    if b is None:
        return a
    aval = get_aval(a) if not hasattr(a, "aval") else a.aval
    if aval.dtype == dtypes.float0:
        return a
    return add_jaxvals_p.bind(a, b)


# --- rules of add_any (the tangent adder) ---------------------------------------------------
def _add_jaxvals_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    x, y = primals
    return add_jaxvals_p.bind(x, y), add_tangents(*tangents)


def _add_jaxvals_transpose(ct: Any, x: Any, y: Any) -> list[Any]:
    return [ct, ct]


jvp_rules[add_jaxvals_p] = _add_jaxvals_jvp
transpose_rules[add_jaxvals_p] = _add_jaxvals_transpose


def _add_jaxvals_batch(args: Sequence[Any], dims: Sequence[int | None]) -> tuple[Any, Any]:
    x, y = args
    dx, dy = dims
    if dx == dy:
        return add_jaxvals_p.bind(x, y), dx
    size = next(get_aval(a).shape[d] for a, d in zip(args, dims) if d is not None)
    x = bdim_at_front(x, dx, size)
    y = bdim_at_front(y, dy, size)
    return add_jaxvals_p.bind(x, y), 0


batching_rules[add_jaxvals_p] = _add_jaxvals_batch


def zeros_like_jaxval(x: Any) -> Any:
    return zeros_like_aval(get_aval(x))


def is_transform_node(x: Any) -> bool:
    """Whether ``x`` is a leaf to users but a node to transformations."""
    return bool(tu.is_tree_node(type(x))) and not tu.user_trees.is_tree_node(type(x))


def node_tangents_flat(primals: Any, tangents: Any) -> list[Any] | None:
    """``tangents`` flattened as transformations flatten ``primals``, where
    ``tangents`` gives each transformation-only node of ``primals`` a float0
    tangent of the node's shape (as JAX users write it); None when it does not
    (the caller's own checks then report what is wrong)."""
    primal_leaves, user_tree = tu.user_trees.tree_flatten(primals)
    if not any(is_transform_node(p) for p in primal_leaves):
        return None
    try:
        tangent_leaves = user_tree.flatten_up_to(tangents)
    except (ValueError, TypeError):
        return None
    flat: list[Any] = []
    for p, t in zip(primal_leaves, tangent_leaves):
        if not is_transform_node(p) or is_transform_node(t):
            flat.extend(tu.tree_leaves(t))
            continue
        if getattr(t, "dtype", None) != dtypes.float0 or tuple(np.shape(t)) != tuple(p.shape):
            return None
        flat.extend(np.zeros(get_aval(d).shape, dtypes.float0) for d in tu.tree_leaves(p))
    return flat


def user_tangents(tree: Any) -> Any:
    """``tree`` (tangents or cotangents rebuilt by transformations) with each
    transformation-only node whose data are all float0 shown as one float0
    array of its shape, as JAX gives the tangent of a key array."""
    if tu.user_trees.tree_structure(tree).num_nodes == tu.tree_structure(tree).num_nodes:
        return tree  # no such node: no Python work per leaf

    def one(x: Any) -> Any:
        if is_transform_node(x) and all(getattr(d, "dtype", None) == dtypes.float0
                                         for d in tu.tree_leaves(x)):
            return np.zeros(x.shape, dtypes.float0)
        return x
    return tu.user_trees.tree_map(one, tree)
