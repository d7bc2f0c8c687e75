"""Shared pieces of the lax primitives: dtype categories, checks, shape utils.

Everything here is pure (no primitive is bound): abstract-evaluation rules are
built from these, so they are kept cheap. Dtype questions are answered by set
membership on precomputed frozensets rather than ``np.issubdtype`` calls.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.avals import canonicalize_axis as canonicalize_axis
from lamina_tracing_core.avals import canonicalize_shape as canonicalize_shape
# the dtype categories and checks live in dtypes, shared with the base primitives
from lamina_tracing_core.dtypes import BOOL as BOOL
from lamina_tracing_core.dtypes import SIGNED as SIGNED
from lamina_tracing_core.dtypes import UNSIGNED as UNSIGNED
from lamina_tracing_core.dtypes import INT as INT
from lamina_tracing_core.dtypes import FLOAT as FLOAT
from lamina_tracing_core.dtypes import COMPLEX as COMPLEX
from lamina_tracing_core.dtypes import INEXACT as INEXACT
from lamina_tracing_core.dtypes import NUM as NUM
from lamina_tracing_core.dtypes import ANY as ANY
from lamina_tracing_core.dtypes import ORDERED as ORDERED
from lamina_tracing_core.dtypes import BOOL_OR_INT as BOOL_OR_INT
from lamina_tracing_core.dtypes import COMPLEX_ELEMENT as COMPLEX_ELEMENT
from lamina_tracing_core.dtypes import category_names as category_names
from lamina_tracing_core.dtypes import check_dtype as check_dtype
from lamina_tracing_core.dtypes import python_scalar_for as python_scalar_for

#: What lax functions accept as an array: tracers, runtime arrays, numpy
#: arrays and Python/numpy scalars.
ArrayLike = Any
DType = np.dtype[Any]
Shape = tuple[int, ...]

_REAL_OF_COMPLEX: dict[DType, DType] = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_COMPLEX_OF_REAL: dict[DType, DType] = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def real_dtype(dtype: DType) -> DType:
    """The element type of a complex dtype (identity on real dtypes)."""
    return _REAL_OF_COMPLEX.get(dtype, dtype)


def complex_dtype(dtype: DType) -> DType:
    """The complex dtype whose parts have ``dtype`` (identity on complex)."""
    if dtype in COMPLEX:
        return dtype
    return _COMPLEX_OF_REAL.get(dtype, dtypes.complex64)


# --- values and their avals ----------------------------------------------------
def shape_of(x: Any) -> Shape:
    return get_aval(x).shape


def ndim_of(x: Any) -> int:
    return len(get_aval(x).shape)


def const(example: Any, value: Any) -> Any:
    """``value`` in the type of ``example`` (a value, an aval or a dtype), for
    the constants of rules: a Python scalar when ``example`` is a weakly typed
    scalar (so ``x * 2`` in a derivative stays as weak as ``x``, as in JAX),
    else a strongly typed numpy array of its dtype."""
    if isinstance(example, np.dtype):
        return np.array(value, example)
    aval = example if isinstance(example, ShapedArray) else get_aval(example)
    if aval.weak_type and not aval.shape:
        py_type = python_scalar_for(aval.dtype)
        if py_type is not None:
            return py_type(value)
    return np.array(value, aval.dtype)


#: lax names -> the jnp function that promotes (quoted in dtype errors, as JAX).
JNP_EQUIVALENTS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "rem": "remainder",
    "max": "maximum", "min": "minimum", "pow": "float_power", "atan2": "arctan2",
    "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal", "gt": "greater",
    "ge": "greater_equal", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
    "nextafter": "nextafter", "shift_left": "left_shift",
    "shift_right_arithmetic": "right_shift", "select_n": "where", "clamp": "clip",
    "concatenate": "concatenate", "complex": "complex", "dot_general": "dot"}


def check_same_dtypes(name: str, *avals: ShapedArray) -> None:
    """lax never promotes: every argument must have the same dtype."""
    first = avals[0].dtype
    for aval in avals[1:]:
        if aval.dtype != first:
            msg = (f"lax.{name} requires arguments to have the same dtypes, got "
                   f"{', '.join(a.dtype.name for a in avals)}.")
            equiv = JNP_EQUIVALENTS.get(name)
            if equiv is not None:
                msg += (f" (Tip: jnp.{equiv} is a similar function that does automatic "
                        "type promotion on inputs).")
            raise TypeError(msg)


def broadcasting_shape(name: str, *shapes: Shape) -> Shape:
    """The result shape of an n-ary elementwise primitive.

    As in JAX, rank-0 operands broadcast against anything, and otherwise all
    operands have the same rank and each dimension is either the common size
    or 1 (degenerate broadcasting, which the lowering expands).
    """
    nonscalar = [s for s in shapes if s]
    if not nonscalar:
        return ()
    first = nonscalar[0]
    if all(s == first for s in nonscalar[1:]):
        return first
    ranks = {len(s) for s in nonscalar}
    if len(ranks) != 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got "
                        f"{', '.join(map(str, nonscalar))}")
    out = []
    for sizes in zip(*nonscalar):
        non_one = {d for d in sizes if d != 1}
        if len(non_one) > 1:
            raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                            f"{', '.join(map(str, nonscalar))}.")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


def as_int_tuple(name: str, arg_name: str, value: Any) -> tuple[int, ...]:
    """A parameter that must be a sequence of Python ints (axes, strides...)."""
    if isinstance(value, (int, np.integer)):
        return (operator.index(value),)
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{name}: {arg_name} must be a sequence of integers, got "
                        f"{value!r}") from None
