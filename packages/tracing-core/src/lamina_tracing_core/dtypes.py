"""Dtypes and type promotion, as JAX users expect them.

lamina computes in 32 bits unless x64 is enabled: a 64-bit request is
*canonicalized* to its 32-bit sibling. Python scalars are *weakly typed*: they
take the dtype of whatever strongly typed value they meet (``x_f16 + 1.0`` stays
float16). Promotion follows a lattice: the result of mixing two types is their
least upper bound, and the bound of two weak types is weak.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np

from lamina_tracing_core.trace_settings import state as _settings

if TYPE_CHECKING:
    from lamina_tracing_core.avals import ShapedArray

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

#: The narrow types of ml_dtypes that JAX's lattice holds: each promotes only
#: with itself, booleans and Python scalars (8-bit and 4-bit floats also with
#: integers, which sit below every float).
NARROW_FLOATS: tuple[np.dtype[Any], ...] = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
    "float4_e2m1fn", "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"))
NARROW_INTS: tuple[np.dtype[Any], ...] = tuple(
    np.dtype(getattr(ml_dtypes, n)) for n in ("int2", "int4", "uint2", "uint4"))

#: The tangent dtype of integer and boolean values (as in JAX).
float0 = np.dtype([("float0", np.void, 0)])


class _X64State:
    """The process-wide ``enable_x64`` switch (config layers set it)."""

    def __init__(self) -> None:
        self.enabled = os.environ.get("LAMINA_ENABLE_X64", "0").lower() in ("1", "true", "yes")


x64_state = _X64State()

#: Called with the new value whenever :func:`enable_x64` runs (jit's C++
#: fast path keys its cache on the flag).
x64_hooks: list[Callable[[bool], None]] = []


def enable_x64(enabled: bool = True) -> None:
    """Turns 64-bit computation on or off for the whole process."""
    x64_state.enabled = bool(enabled)
    _canonicalize_cached.cache_clear()
    for hook in x64_hooks:
        hook(x64_state.enabled)


def x64_enabled() -> bool:
    return x64_state.enabled


_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


@functools.lru_cache(maxsize=256)
def _canonicalize_cached(dtype: np.dtype[Any], x64: bool) -> np.dtype[Any]:
    return dtype if x64 else _TO_32.get(dtype, dtype)


def canonicalize_dtype(dtype: Any) -> np.dtype[Any]:
    """The dtype lamina actually computes in for a requested ``dtype``."""
    return _canonicalize_cached(np.dtype(dtype), x64_state.enabled)


def python_int_fits(value: int, dtype: np.dtype[Any]) -> bool:
    """Whether Python int ``value`` is in the range of integer ``dtype``."""
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


def default_int_dtype() -> np.dtype[Any]:
    return int64 if x64_state.enabled else int32


def default_uint_dtype() -> np.dtype[Any]:
    return uint64 if x64_state.enabled else uint32


def default_float_dtype() -> np.dtype[Any]:
    return float64 if x64_state.enabled else float32


def default_complex_dtype() -> np.dtype[Any]:
    return complex128 if x64_state.enabled else complex64


#: The float an integer or boolean computes in where a function needs an
#: inexact dtype (JAX 0.10.2): every integer narrower than 64 bits and bool
#: take float32 even under x64, so ``sin`` of an int32 array stays single
#: precision; 2-bit integers have no such float and stay as they are.
_INEXACT_OF_NARROW: dict[np.dtype[Any], np.dtype[Any]] = {
    dt: float32 for dt in (bool_, int8, int16, int32, uint8, uint16, uint32,
                           np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))}


def to_inexact_dtype(dtype: Any) -> np.dtype[Any]:
    """The inexact dtype ``dtype`` computes in where a function needs one:
    inexact dtypes unchanged, 64-bit integers the default float, narrower
    integers and bool float32 (as JAX 0.10.2, x64 on or off)."""
    dt: np.dtype[Any] = np.dtype(dtype)
    if is_inexact(dt):
        return dt
    if dt in (int64, uint64):
        return default_float_dtype()
    return _INEXACT_OF_NARROW.get(dt, dt)


def python_scalar_for(dtype: np.dtype[Any]) -> type | None:
    """The Python scalar type whose weak aval has ``dtype`` (if any)."""
    if dtype == default_int_dtype():
        return int
    if dtype == default_float_dtype():
        return float
    if dtype == default_complex_dtype():
        return complex
    return None


def is_float0(dtype: Any) -> bool:
    return bool(np.dtype(dtype) == float0)


def issubdtype(a: Any, b: Any) -> bool:
    """``np.issubdtype`` that also knows ml_dtypes' types: bfloat16 and the
    8- and 4-bit floats are ``np.floating``, int2/int4 ``np.signedinteger``
    and uint2/uint4 ``np.unsignedinteger`` (numpy's abstract classes do not
    know them: their kind is 'V')."""
    dt = np.dtype(a)
    classes = _ML_CLASSES.get(dt)
    if classes is None:
        return bool(np.issubdtype(dt, b))
    if isinstance(b, type) and issubclass(b, np.generic) and b in _ABSTRACT:
        return b in classes
    try:
        return bool(np.dtype(b) == dt)
    except TypeError:  # another abstract class
        return False


_ABSTRACT = frozenset({np.generic, np.number, np.inexact, np.floating, np.complexfloating,
                       np.integer, np.signedinteger, np.unsignedinteger, np.flexible,
                       np.character, np.bool_})
_FLOAT_CLASSES = frozenset({np.floating, np.inexact, np.number, np.generic})
_ML_CLASSES: dict[np.dtype[Any], frozenset[type]] = {
    **{d: _FLOAT_CLASSES for d in (bfloat16, *NARROW_FLOATS)},
    **{d: frozenset({np.signedinteger if d.name.startswith("int") else np.unsignedinteger,
                     np.integer, np.number, np.generic}) for d in NARROW_INTS},
}


# The category questions are asked of a handful of dtypes over and over: the
# answers for concrete dtypes are memoized.
_FLOATING: dict[Any, bool] = {}
_COMPLEX: dict[Any, bool] = {}


def is_floating(dtype: Any) -> bool:
    known = _FLOATING.get(dtype) if isinstance(dtype, np.dtype) else None
    if known is None:
        known = issubdtype(np.dtype(dtype), np.floating)
        if isinstance(dtype, np.dtype):
            _FLOATING[dtype] = known
    return known


def is_complex(dtype: Any) -> bool:
    known = _COMPLEX.get(dtype) if isinstance(dtype, np.dtype) else None
    if known is None:
        known = issubdtype(np.dtype(dtype), np.complexfloating)
        if isinstance(dtype, np.dtype):
            _COMPLEX[dtype] = known
    return known


def is_inexact(dtype: Any) -> bool:
    return is_floating(dtype) or is_complex(dtype)


def is_integer(dtype: Any) -> bool:
    return issubdtype(np.dtype(dtype), np.integer)


def is_boolean(dtype: Any) -> bool:
    return bool(np.dtype(dtype) == bool_)


def finfo(dtype: Any) -> Any:
    return ml_dtypes.finfo(np.dtype(dtype))  # type: ignore[no-untyped-call]


def iinfo(dtype: Any) -> Any:
    return ml_dtypes.iinfo(np.dtype(dtype))  # type: ignore[no-untyped-call]


# --- the promotion lattice --------------------------------------------------
# Nodes are dtypes plus three weak categories: Python int, float and complex.
WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = "int*", "float*", "complex*"
_Node = Any  # a np.dtype or one of the weak category strings

_UPPER: dict[_Node, list[_Node]] = {
    bool_: [WEAK_INT],
    WEAK_INT: [uint8, int8, *NARROW_INTS],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64],
    uint64: [WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [WEAK_FLOAT],
    WEAK_FLOAT: [float16, bfloat16, WEAK_COMPLEX, *NARROW_FLOATS],
    float16: [float32], bfloat16: [float32], float32: [float64, complex64],
    float64: [complex128],
    WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
    **{t: [] for t in NARROW_FLOATS + NARROW_INTS},
}

#: ``numpy_dtype_promotion='strict'``: only Python scalars (the weak
#: categories) promote, to any dtype of their kind or above; two different
#: dtypes never mix.
_STRICT_UPPER: dict[_Node, list[_Node]] = {
    **{t: [] for t in _UPPER if not isinstance(t, str)},
    WEAK_INT: [WEAK_FLOAT, uint8, uint16, uint32, uint64, int8, int16, int32, int64,
               *NARROW_INTS],
    WEAK_FLOAT: [WEAK_COMPLEX, float16, bfloat16, float32, float64, *NARROW_FLOATS],
    WEAK_COMPLEX: [complex64, complex128],
}


class TypePromotionError(ValueError):
    """Two dtypes have no implicit promotion path (JAX's ``TypePromotionError``)."""


def _ancestors(upper: dict[_Node, list[_Node]], node: _Node) -> frozenset[_Node]:
    seen: set[_Node] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(upper[n])
    return frozenset(seen)


#: promotion mode -> node -> every node it promotes to (itself included).
_ANCESTORS = {mode: {n: _ancestors(upper, n) for n in upper}
              for mode, upper in (("standard", _UPPER), ("strict", _STRICT_UPPER))}


def _least_upper_bound(nodes: Sequence[_Node], mode: str) -> _Node:
    ancestors = _ANCESTORS[mode]
    unknown = [n for n in nodes if n not in ancestors]
    if unknown:
        raise TypePromotionError(f"dtype={unknown[0]} is not a valid dtype for JAX type "
                                 f"promotion.")
    common = frozenset.intersection(*(ancestors[n] for n in set(nodes)))
    # The least element of `common` is the one whose ancestors are all of `common`.
    for candidate in common:
        if ancestors[candidate] == common:
            return candidate
    raise TypePromotionError(_no_promotion_message(nodes, mode))


def _no_promotion_message(nodes: Sequence[_Node], mode: str) -> str:
    names = tuple(str(n) for n in nodes)
    start = f"Input dtypes {names} have no available implicit dtype promotion path"
    if mode == "strict":
        return (f"{start} when jax_numpy_dtype_promotion=strict. Try explicitly casting inputs "
                f"to the desired output type, or set jax_numpy_dtype_promotion=standard.")
    narrow = next((kind for kind, members, _ in _NARROW_KINDS
                   if any(n in members for n in nodes)), None)
    if narrow is not None:
        target = next(t for kind, _, t in _NARROW_KINDS if kind == narrow)
        return (f"{start}. To avoid unintended promotion, {narrow} do not support implicit "
                f"promotion. If you'd like your inputs to be promoted to another type, you can "
                f"do so explicitly using e.g. x.astype('{target}')")
    return f"{start}. Try explicitly casting inputs to the desired output type."


#: How JAX's promotion error names each family of narrow types (the first
#: family among the inputs is named), and the cast it suggests.
_NARROW_KINDS: tuple[tuple[str, frozenset[Any], str], ...] = (
    ("8-bit floats", frozenset(d for d in NARROW_FLOATS if d.itemsize == 1
                               and not d.name.startswith("float4")), "float32"),
    ("4-bit floats", frozenset(d for d in NARROW_FLOATS if d.name.startswith("float4")),
     "float32"),
    ("1-bit, 2-bit and 4-bit integers", frozenset(NARROW_INTS), "int32"),
)


_WEAK_DEFAULT = {WEAK_INT: default_int_dtype, WEAK_FLOAT: default_float_dtype,
                 WEAK_COMPLEX: default_complex_dtype}


def _node_of(dtype: np.dtype[Any], weak: bool) -> _Node:
    if not weak:
        return dtype
    if is_boolean(dtype):
        return bool_
    if is_integer(dtype):
        return WEAK_INT
    if is_floating(dtype):
        return WEAK_FLOAT
    return WEAK_COMPLEX


@functools.lru_cache(maxsize=1024)
def _promote_cached(key: tuple[tuple[np.dtype[Any], bool], ...], x64: bool, mode: str
                    ) -> tuple[np.dtype[Any], bool]:
    nodes = [_node_of(dt, weak) for dt, weak in key]
    bound = _least_upper_bound(nodes, mode)
    if isinstance(bound, str):
        return canonicalize_dtype(_WEAK_DEFAULT[bound]()), True
    return canonicalize_dtype(bound), False


def promote_types_weak(*typed: tuple[np.dtype[Any], bool]) -> tuple[np.dtype[Any], bool]:
    """The promoted ``(dtype, weak_type)`` of several ``(dtype, weak_type)`` pairs."""
    if not typed:
        raise TypeError("at least one dtype is required for promotion")
    key = tuple((np.dtype(d), bool(w)) for d, w in typed)
    return _promote_cached(key, x64_state.enabled, _settings.numpy_dtype_promotion)


def promote_types(a: Any, b: Any) -> np.dtype[Any]:
    """``jnp.promote_types``: the promoted dtype of two strong dtypes."""
    return promote_types_weak((np.dtype(a), False), (np.dtype(b), False))[0]


_PYTHON_SCALAR_DTYPES: dict[type, Any] = {
    bool: bool_, int: default_int_dtype, float: default_float_dtype,
    complex: default_complex_dtype,
}


def dtype_and_weakness(x: Any) -> tuple[np.dtype[Any], bool]:
    """The ``(dtype, weak_type)`` of a value, a dtype, or anything with ``.dtype``."""
    aval = getattr(x, "aval", None)  # tracers and arrays: their aval says it
    if aval is not None and hasattr(aval, "weak_type") and hasattr(aval, "dtype"):
        return canonicalize_dtype(aval.dtype), bool(aval.weak_type)
    if type(x) in _PYTHON_SCALAR_DTYPES:
        entry = _PYTHON_SCALAR_DTYPES[type(x)]
        return (entry if isinstance(entry, np.dtype) else entry()), type(x) is not bool
    if isinstance(x, np.generic):  # np.float64 and np.complex128 subclass float and complex
        return canonicalize_dtype(x.dtype), False
    if isinstance(x, bool):
        return bool_, False
    if isinstance(x, int):
        return default_int_dtype(), True
    if isinstance(x, float):
        return default_float_dtype(), True
    if isinstance(x, complex):
        return default_complex_dtype(), True
    if isinstance(x, (np.dtype, type, str)):  # a dtype or a scalar type like np.int32
        return canonicalize_dtype(np.dtype(x)), False
    dtype = getattr(x, "dtype", None)
    if dtype is not None:
        return canonicalize_dtype(dtype), bool(getattr(getattr(x, "aval", x), "weak_type", False))
    return canonicalize_dtype(np.dtype(x)), False


def result_type(*args: Any, return_weak_type_flag: bool = False) -> Any:
    """``jnp.result_type``: the dtype that mixing ``args`` (values or dtypes) produces."""
    if not args:
        raise TypeError("result_type requires at least one argument")
    dtype, weak = promote_types_weak(*(dtype_and_weakness(a) for a in args))
    return (dtype, weak) if return_weak_type_flag else dtype


def is_valid_array_dtype(dtype: Any) -> bool:
    """Whether lamina arrays can have ``dtype`` (not object/str/void; ml_dtypes' are fine)."""
    dt = np.dtype(dtype)
    return dt.kind not in "OSUVMm" or dt == float0 or dt.type.__module__ == "ml_dtypes"


def check_user_dtype(dtype: Any, *, fun_name: str = "lamina") -> np.dtype[Any]:
    """Validates a user-given dtype, returning its canonical form."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{fun_name}: {dtype!r} is not a valid dtype") from e
    if not is_valid_array_dtype(dt):
        raise TypeError(f"{fun_name}: dtype {dt} is not a valid lamina array type")
    return canonicalize_dtype(dt)


# --- dtype categories ----------------------------------------------------------
BOOL: frozenset[np.dtype[Any]] = frozenset({bool_})
# ml_dtypes' narrow types belong to their categories (as in JAX: lax accepts
# them wherever it accepts an integer or a float)
SIGNED: frozenset[np.dtype[Any]] = frozenset(
    {int8, int16, int32, int64, *(d for d in NARROW_INTS if d.name.startswith("int"))})
UNSIGNED: frozenset[np.dtype[Any]] = frozenset(
    {uint8, uint16, uint32, uint64, *(d for d in NARROW_INTS if d.name.startswith("uint"))})
INT: frozenset[np.dtype[Any]] = SIGNED | UNSIGNED
FLOAT: frozenset[np.dtype[Any]] = frozenset({bfloat16, float16, float32, float64,
                                             *NARROW_FLOATS})
COMPLEX: frozenset[np.dtype[Any]] = frozenset({complex64, complex128})
INEXACT: frozenset[np.dtype[Any]] = FLOAT | COMPLEX
NUM: frozenset[np.dtype[Any]] = INT | INEXACT
ANY: frozenset[np.dtype[Any]] = NUM | BOOL
ORDERED: frozenset[np.dtype[Any]] = INT | FLOAT | BOOL
BOOL_OR_INT: frozenset[np.dtype[Any]] = INT | BOOL
#: The element types ``complex`` accepts (XLA has no f16/bf16 complex).
COMPLEX_ELEMENT: frozenset[np.dtype[Any]] = frozenset({float32, float64})

_CATEGORY_NAMES: list[tuple[frozenset[np.dtype[Any]], str]] = [
    (BOOL, "bool"), (SIGNED, "signedinteger"), (UNSIGNED, "unsignedinteger"),
    (FLOAT, "floating"), (COMPLEX, "complexfloating")]


def category_names(accepted: frozenset[np.dtype[Any]]) -> str:
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


# --- extreme values --------------------------------------------------------------
def lowest(dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The smallest value of ``dtype`` (the identity of ``max``): -inf for
    floats that have it, else their most negative finite value (the 8- and
    4-bit floats without infinities), the minimum integer, False."""
    return _extreme(dtype, -1)


def highest(dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """The largest value of ``dtype`` (the identity of ``min``), as :func:`lowest`."""
    return _extreme(dtype, 1)


def _extreme(dtype: np.dtype[Any], sign: int) -> np.ndarray[Any, Any]:
    dtype = np.dtype(dtype)
    if dtype == bool_:
        return np.array(sign > 0)
    if dtype in INEXACT:
        inf = np.array(sign * np.inf, dtype)
        if np.isinf(np.real(inf).astype(np.float64)):  # the real part: no ComplexWarning
            return inf
        info = finfo(dtype)
        return np.array(info.max if sign > 0 else info.min, dtype)
    ints = iinfo(dtype)  # ml_dtypes: also knows int2/int4/uint2/uint4
    return np.array(ints.max if sign > 0 else ints.min, dtype)


# --- checks --------------------------------------------------------------------
_FLOAT0_MSG = ("float0s do not support any operations by design, because they are "
               "not compatible with non-trivial vector spaces; if you did not expect "
               "a float0 you may have taken a gradient with respect to an integer "
               "argument")


def check_dtype(name: str, aval: ShapedArray, accepted: frozenset[np.dtype[Any]],
                position: int | None = None) -> None:
    """Raises a TypeError naming ``name`` when ``aval``'s dtype is not accepted."""
    if aval.dtype in accepted:
        return
    where = "" if position is None else f" at position {position}"
    if aval.dtype == float0:
        raise TypeError(f"{name} was called with a float0 argument{where}: {_FLOAT0_MSG}.")
    raise TypeError(f"{name} does not accept dtype {aval.dtype.name}{where}. Accepted "
                    f"dtypes{where} are subtypes of {category_names(accepted)}.")
