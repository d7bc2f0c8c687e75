"""``check_p``: a run-time assertion that ``checkify`` turns into values.

``check(pred, *fmt_operands, message=..., fmt_tree=..., source=...)`` has
no results (``fmt_tree`` rebuilds ``(args, kwargs)`` for ``message.format``
from the operands) and the
``UserCheckEffect`` (so dead-code elimination keeps it). ``checkify``
(lamina.experimental.checkify) interprets the equation: the program then
returns whether the predicate held and the operands to format the message
with. A program that still holds a check when it is lowered is an error
(there is nothing to report it to); eagerly a check raises at once.

Under ``vmap`` the predicate and operands stay batched (checkify reports the
first failing element); under JVP it is applied to the primals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_linear_util import tree_util as tu

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects, UserCheckEffect
from lamina_tracing_core.primitives import Primitive

__all__ = ["CheckFailure", "check_p", "format_message"]

check_p = Primitive("check", multiple_results=True)
_EFFECTS: Effects = frozenset({UserCheckEffect()})


class CheckFailure(ValueError):
    """A ``checkify.check`` failed outside ``checkify`` (eagerly)."""


def format_message(message: str, fmt_tree: Any, operands: Sequence[Any]) -> str:
    """``message.format(*args, **kwargs)`` with the operands' values."""
    args, kwargs = tu.tree_unflatten(fmt_tree, list(operands))
    return message.format(*args, **kwargs)


@check_p.def_impl
def _check_impl(pred: Any, *operands: Any, message: str, fmt_tree: Any,
                source: Any) -> list[Any]:
    if not bool(np.all(np.asarray(pred))):
        raise CheckFailure(f"{format_message(message, fmt_tree, operands)} (check at {source})")
    return []


@check_p.def_abstract_eval
def _check_abstract_eval(pred: ShapedArray, *operands: ShapedArray, message: str,
                         fmt_tree: Any, source: Any) -> list[ShapedArray]:
    if pred.dtype.kind != "b":
        raise TypeError(f"checkify.check: the predicate must be a bool array, got "
                        f"{pred.str_short()} (at {source})")
    return []


check_p.def_effects(lambda **_: _EFFECTS)


@check_p.def_jvp
def _check_jvp(primals: Sequence[Any], tangents: Sequence[Any],
               **params: Any) -> tuple[list[Any], list[Any]]:
    check_p.bind(*primals, **params)
    return [], []


@check_p.def_batching
def _check_batch(args: Sequence[Any], dims: Sequence[int | None],
                 **params: Any) -> tuple[list[Any], list[Any]]:
    # checkify reduces the predicate over every axis: a batched one stays batched
    check_p.bind(*args, **params)
    return [], []
