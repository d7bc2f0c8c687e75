"""Tangent-space utilities shared by autodiff rules: symbolic zeros and adding.

A tangent or cotangent that is known to be zero is represented *symbolically*
by ``Zero(aval)``: rules that see one can skip work, and outputs that no input
tangent reaches cost nothing. ``instantiate_zeros`` turns a symbolic zero into
an actual array when a rule needs one.

Tangents of integer and boolean values have dtype ``float0`` (as in JAX):
they carry no information and are always zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.primitives import Primitive


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


_INEXACT = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64,
                                            np.complex128, dtypes.bfloat16))


def tangent_aval(aval: ShapedArray) -> ShapedArray:
    """The aval of tangents of ``aval``: float0 for integer/boolean values;
    an inexact aval is its own tangent aval, weak type included (as in JAX:
    the tangent of a weakly typed value promotes like the value)."""
    dtype = aval.dtype
    if dtype in _INEXACT or dtypes.is_inexact(dtype) or dtype == dtypes.float0:
        return aval
    return ShapedArray(aval.shape, dtypes.float0, False)


#: ``maker(aval) -> array``: how to build actual zeros while staging; the
#: default broadcasts a scalar zero with lax (so big zeros are an equation, not
#: an embedded constant). A layer may install its own.
zeros_maker: list[Callable[[ShapedArray], Any]] = []


def _lax_zeros(aval: ShapedArray) -> Any:
    from lamina_tracing_core.lax import structural
    return structural.broadcast_in_dim(np.zeros((), aval.dtype), aval.shape, ())


def zeros_like_aval(aval: ShapedArray) -> Any:
    """An array of zeros of type ``aval``: a numpy array when evaluating
    eagerly (and for scalars and float0), a staged broadcast while tracing."""
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, aval.dtype)
    if aval.weak_type:  # numpy has no weak types
        return typed_array(0, aval)
    if not aval.shape or not staging():
        return np.zeros(aval.shape, aval.dtype)
    return (zeros_maker[-1] if zeros_maker else _lax_zeros)(aval)


def typed_array(value: Any, aval: ShapedArray) -> Any:
    """Host ``value`` as an array of exactly ``aval``'s type, weak type
    included: one conversion, which runs eagerly or is staged."""
    from lamina_tracing_core.lax import convert
    return convert.convert_element_type_p.bind(
        np.broadcast_to(np.asarray(value, aval.dtype), aval.shape), new_dtype=aval.dtype,
        weak_type=aval.weak_type, sharding=None)


def staging() -> bool:
    """True while some trace stages equations (jit, make_jaxpr, a pmap body)."""
    from lamina_tracing_core import core
    return core._state.dynamic.level > 0 or not isinstance(core._state.dynamic.trace,
                                                             core.EvalTrace)


def instantiate_zeros(t: Any) -> Any:
    """``t`` itself, or actual zeros when ``t`` is a symbolic ``Zero``."""
    if type(t) is Zero:
        return zeros_like_aval(t.aval)
    return t


def is_zero(t: Any) -> bool:
    return type(t) is Zero


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
