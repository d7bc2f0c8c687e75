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

#: What lax functions accept as an array: tracers, runtime arrays, numpy
#: arrays and Python/numpy scalars.
ArrayLike = Any
DType = np.dtype[Any]
Shape = tuple[int, ...]

# --- dtype categories ----------------------------------------------------------
BOOL: frozenset[DType] = frozenset({dtypes.bool_})
SIGNED: frozenset[DType] = frozenset({dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64})
UNSIGNED: frozenset[DType] = frozenset({dtypes.uint8, dtypes.uint16, dtypes.uint32,
                                        dtypes.uint64})
INT: frozenset[DType] = SIGNED | UNSIGNED
FLOAT: frozenset[DType] = frozenset({dtypes.bfloat16, dtypes.float16, dtypes.float32,
                                     dtypes.float64})
COMPLEX: frozenset[DType] = frozenset({dtypes.complex64, dtypes.complex128})
INEXACT: frozenset[DType] = FLOAT | COMPLEX
NUM: frozenset[DType] = INT | INEXACT
ANY: frozenset[DType] = NUM | BOOL
ORDERED: frozenset[DType] = INT | FLOAT | BOOL
BOOL_OR_INT: frozenset[DType] = INT | BOOL
#: The element types ``complex`` accepts (XLA has no f16/bf16 complex).
COMPLEX_ELEMENT: frozenset[DType] = frozenset({dtypes.float32, dtypes.float64})

_CATEGORY_NAMES: list[tuple[frozenset[DType], str]] = [
    (BOOL, "bool"), (SIGNED, "signedinteger"), (UNSIGNED, "unsignedinteger"),
    (FLOAT, "floating"), (COMPLEX, "complexfloating")]


def category_names(accepted: frozenset[DType]) -> str:
    """``floating, complexfloating``: how error messages name a category."""
    names = []
    rest = set(accepted)
    if INT <= accepted:
        names.append("integer")
        rest -= INT
    for cat, name in _CATEGORY_NAMES:
        if cat <= rest:
            names.append(name)
            rest -= cat
    names.extend(sorted(str(d) for d in rest))
    return ", ".join(names)


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
def typeof(x: Any) -> ShapedArray:
    """The aval of a value: a tracer's ``.aval``, or ``get_aval`` for others."""
    aval = getattr(x, "aval", None)
    if isinstance(aval, ShapedArray):
        return aval
    return get_aval(x)


def dtype_of(x: Any) -> DType:
    return typeof(x).dtype


def shape_of(x: Any) -> Shape:
    return typeof(x).shape


def ndim_of(x: Any) -> int:
    return len(typeof(x).shape)


def const(example: Any, value: Any) -> Any:
    """``value`` in the type of ``example`` (a value, an aval or a dtype), for
    the constants of rules: a Python scalar when ``example`` is a weakly typed
    scalar (so ``x * 2`` in a derivative stays as weak as ``x``, as in JAX),
    else a strongly typed numpy array of its dtype."""
    if isinstance(example, np.dtype):
        return np.array(value, example)
    aval = example if isinstance(example, ShapedArray) else typeof(example)
    if aval.weak_type and not aval.shape:
        py_type = python_scalar_for(aval.dtype)
        if py_type is not None:
            return py_type(value)
    return np.array(value, aval.dtype)


def python_scalar_for(dtype: np.dtype[Any]) -> type | None:
    """The Python scalar type whose weak aval has ``dtype`` (if any)."""
    if dtype == dtypes.default_int_dtype():
        return int
    if dtype == dtypes.default_float_dtype():
        return float
    if dtype == dtypes.default_complex_dtype():
        return complex
    return None


# --- checks --------------------------------------------------------------------
_FLOAT0_MSG = ("float0s do not support any operations by design, because they are "
               "not compatible with non-trivial vector spaces; if you did not expect "
               "a float0 you may have taken a gradient with respect to an integer "
               "argument")


def check_dtype(name: str, aval: ShapedArray, accepted: frozenset[DType],
                position: int | None = None) -> None:
    """Raises a TypeError naming ``name`` when ``aval``'s dtype is not accepted."""
    if aval.dtype in accepted:
        return
    where = "" if position is None else f" at position {position}"
    if aval.dtype == dtypes.float0:
        raise TypeError(f"{name} was called with a float0 argument{where}: {_FLOAT0_MSG}.")
    raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{where}. Accepted "
                    f"dtypes{where} are subtypes of {category_names(accepted)}.")


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


def canonicalize_shape(shape: Any, context: str = "") -> Shape:
    """A shape given by the user as a tuple of non-negative ints."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        what = f"{context} " if context else ""
        raise TypeError(f"{what}shapes must be 1D sequences of concrete values of integer "
                        f"type, got {shape!r}.") from None
    if any(d < 0 for d in out):
        what = f"{context}: " if context else ""
        raise TypeError(f"{what}shape dimensions must be non-negative, got {out}")
    return out


def as_int_tuple(name: str, arg_name: str, value: Any) -> tuple[int, ...]:
    """A parameter that must be a sequence of Python ints (axes, strides...)."""
    if isinstance(value, (int, np.integer)):
        return (operator.index(value),)
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{name}: {arg_name} must be a sequence of integers, got "
                        f"{value!r}") from None


def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``, counting negative axes from the end."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis
