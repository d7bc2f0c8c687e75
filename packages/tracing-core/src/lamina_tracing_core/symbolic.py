"""The symbolic values autodiff rules see, and the type of tangents.

- ``Zero(aval)``: a tangent or cotangent known to be zero. Rules that see one
  skip work, and outputs no input tangent reaches cost nothing;
  ``base_primitives.instantiate_zeros`` makes actual zeros when a rule needs
  them.
- ``UndefinedPrimal(aval)``: a linear input of a transpose rule, whose value is
  unknown (only its type is).
- ``tangent_aval(aval)``: the type of the tangents of values of ``aval``;
  integer and boolean values have ``float0`` tangents (as in JAX), which carry
  no information and are always zeros.

These sit below every primitive, so that the rules of the base primitives and
the interpreters (``ad``, ``batching``) share them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval

__all__ = ["UndefinedPrimal", "Zero", "is_undefined_primal", "is_zero", "tangent_aval"]


class Zero:
    """A symbolic zero tangent/cotangent of type ``aval``."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"

    @staticmethod
    def from_primal_value(val: Any) -> Zero:
        """The symbolic zero tangent of a primal value (float0 for ints/bools)."""
        return Zero(tangent_aval(get_aval(val)))


def is_zero(t: Any) -> bool:
    return type(t) is Zero


class UndefinedPrimal:
    """Stands for a linear input of a transpose rule: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x: Any) -> bool:
    return type(x) is UndefinedPrimal


_INEXACT = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64,
                                            np.complex128, dtypes.bfloat16))


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The aval of tangents of ``aval``: float0 for integer/boolean values;
    an inexact aval is its own tangent aval, weak type included (as in JAX:
    the tangent of a weakly typed value promotes like the value)."""
    if aval.dtype in _INEXACT:  # the common case, without a call
        return aval
    return aval.to_tangent_aval()
