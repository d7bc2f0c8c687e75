"""Dtypes as ``lamina.numpy`` spells them: scalar types, promotion, type info,
and ``ndarray`` for ``isinstance`` checks.

``jnp.float32`` is both a dtype (``jnp.zeros(3, jnp.float32)``,
``np.dtype(jnp.float32)``) and a constructor of strongly typed arrays
(``jnp.float32(1.0)`` is a 0-d float32 Array), as in JAX.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from lamina_tracing_core import dtypes as _dt
from lamina_tracing_core.array_methods import ArrayMethods
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray

# numpy's abstract scalar hierarchy, for issubdtype.
generic = np.generic
number = np.number
inexact = np.inexact
floating = np.floating
complexfloating = np.complexfloating
integer = np.integer
signedinteger = np.signedinteger
unsignedinteger = np.unsignedinteger
flexible = np.flexible
character = np.character
object_ = np.object_

dtype = np.dtype


class _ScalarMeta(type):
    """The metaclass of ``jnp.float32`` and friends: equal and hashed like the
    numpy scalar type, callable to make a 0-d (or n-d) lamina array."""

    dtype: np.dtype[Any]

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __eq__(cls, other: object) -> builtins.bool:
        return cls is other or cls.dtype.type is other

    def __ne__(cls, other: object) -> builtins.bool:
        return not cls == other

    def __call__(cls, x: Any = 0) -> Any:
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: object) -> builtins.bool:
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'lamina.numpy.{cls.__name__}'>"


def _scalar_type(name: str, np_dtype: Any) -> _ScalarMeta:
    doc = f"The {np.dtype(np_dtype).name} scalar type: a dtype, and ``{name}(x)`` makes an array."
    return _ScalarMeta(name, (), {"dtype": np.dtype(np_dtype), "__doc__": doc,
                                  "__module__": "lamina.numpy"})


bool_ = _scalar_type("bool_", np.bool_)
int8 = _scalar_type("int8", np.int8)
int16 = _scalar_type("int16", np.int16)
int32 = _scalar_type("int32", np.int32)
int64 = _scalar_type("int64", np.int64)
uint8 = _scalar_type("uint8", np.uint8)
uint16 = _scalar_type("uint16", np.uint16)
uint32 = _scalar_type("uint32", np.uint32)
uint64 = _scalar_type("uint64", np.uint64)
float16 = _scalar_type("float16", np.float16)
float32 = _scalar_type("float32", np.float32)
float64 = _scalar_type("float64", np.float64)
bfloat16 = _scalar_type("bfloat16", ml_dtypes.bfloat16)
# The narrow floating and integer types of ml_dtypes, as jax.numpy names them.
float8_e3m4 = _scalar_type("float8_e3m4", ml_dtypes.float8_e3m4)
float8_e4m3 = _scalar_type("float8_e4m3", ml_dtypes.float8_e4m3)
float8_e4m3b11fnuz = _scalar_type("float8_e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz)
float8_e4m3fn = _scalar_type("float8_e4m3fn", ml_dtypes.float8_e4m3fn)
float8_e4m3fnuz = _scalar_type("float8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz)
float8_e5m2 = _scalar_type("float8_e5m2", ml_dtypes.float8_e5m2)
float8_e5m2fnuz = _scalar_type("float8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz)
float8_e8m0fnu = _scalar_type("float8_e8m0fnu", ml_dtypes.float8_e8m0fnu)
float6_e2m3fn = _scalar_type("float6_e2m3fn", ml_dtypes.float6_e2m3fn)
float6_e3m2fn = _scalar_type("float6_e3m2fn", ml_dtypes.float6_e3m2fn)
float4_e2m1fn = _scalar_type("float4_e2m1fn", ml_dtypes.float4_e2m1fn)
int1 = _scalar_type("int1", ml_dtypes.int1)
int2 = _scalar_type("int2", ml_dtypes.int2)
int4 = _scalar_type("int4", ml_dtypes.int4)
uint1 = _scalar_type("uint1", ml_dtypes.uint1)
uint2 = _scalar_type("uint2", ml_dtypes.uint2)
uint4 = _scalar_type("uint4", ml_dtypes.uint4)
complex64 = _scalar_type("complex64", np.complex64)
complex128 = _scalar_type("complex128", np.complex128)
bool = bool_  # noqa: A001 - numpy 2 and JAX spell it both ways
int_ = int64
uint = uint64
float_ = float64
complex_ = complex128
single, double, half = float32, float64, float16
csingle, cdouble = complex64, complex128

_SCALAR_TYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16,
                 float32, float64, bfloat16, complex64, complex128)


def _np_type(x: Any) -> Any:
    """numpy's view of a dtype-like: lamina scalar types become numpy types."""
    if isinstance(x, _ScalarMeta):
        return x.dtype.type
    return x


def _as_dtype(x: Any) -> np.dtype[Any]:
    if isinstance(x, _ScalarMeta):
        return x.dtype
    source = x.dtype if hasattr(x, "dtype") and not isinstance(x, (type, np.dtype)) else x
    out: np.dtype[Any] = np.dtype(source)
    return out


def issubdtype(arg1: Any, arg2: Any) -> builtins.bool:
    """``np.issubdtype`` that knows lamina's scalar types and bfloat16."""
    if getattr(arg1, "lamina_extended_dtype", False):
        # An extended dtype (a typed key's): its scalar type's classes decide.
        return isinstance(arg2, type) and issubclass(arg1.type, arg2)
    a, b = _np_type(arg1), _np_type(arg2)
    if isinstance(b, type) and issubclass(b, np.generic) and b in (
            np.generic, np.number, np.inexact, np.floating, np.complexfloating, np.integer,
            np.signedinteger, np.unsignedinteger, np.flexible, np.character):
        return _dt.issubdtype(_as_dtype(a), b)
    try:
        b_dtype = _as_dtype(b)
    except TypeError:
        if isinstance(b, type) and issubclass(b, np.generic):
            # An abstract scalar class with no dtype (an extended dtype's
            # class, such as prng_key): no NumPy dtype is under it.
            return False
        raise
    return builtins.bool(_as_dtype(a) == b_dtype)


def result_type(*args: Any) -> np.dtype[Any]:
    """The dtype NumPy-style promotion of ``args`` (values or dtypes) gives."""
    return _dt.result_type(*(_dtype_or_value(a) for a in args))  # type: ignore[no-any-return]


def _dtype_or_value(x: Any) -> Any:
    """Dtype-likes (types, names, ``jnp.float32``) as numpy dtypes; values as is."""
    if isinstance(x, (type, str, np.dtype)):
        return _as_dtype(x)
    return x


def promote_types(a: Any, b: Any) -> np.dtype[Any]:
    """The dtype two dtypes promote to (JAX's lattice, not NumPy's)."""
    return _dt.promote_types(_as_dtype(a), _as_dtype(b))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> builtins.bool:
    """``np.can_cast`` on dtypes (values are not inspected)."""
    try:
        rule: Any = casting
        return builtins.bool(np.can_cast(_as_dtype(from_), _as_dtype(to), casting=rule))
    except TypeError:
        # numpy has no casting table for some ml_dtypes pairs: safe means the
        # promotion of the two is the target.
        return builtins.bool(promote_types(from_, to) == _as_dtype(to))


def iinfo(int_type: Any) -> Any:
    """Machine limits of an integer dtype."""
    return ml_dtypes.iinfo(_as_dtype(int_type))  # type: ignore[no-untyped-call]


def finfo(dtype: Any) -> Any:
    """Machine limits of a floating dtype (bfloat16 included)."""
    dt = _as_dtype(dtype)
    if dt.kind == "c":
        dt = np.dtype(np.float32 if dt == np.complex64 else np.float64)
    return ml_dtypes.finfo(dt)  # type: ignore[no-untyped-call]


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    """The array-API ``isdtype``: ``kind`` is a dtype, a kind name or a tuple."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    dt = _as_dtype(dtype)
    names: dict[str, Callable[[np.dtype[Any]], builtins.bool]] = {
        "bool": _dt.is_boolean, "signed integer": lambda d: _dt.issubdtype(d, np.signedinteger),
             "unsigned integer": lambda d: _dt.issubdtype(d, np.unsignedinteger),
             "integral": _dt.is_integer, "real floating": _dt.is_floating,
             "complex floating": _dt.is_complex,
             "numeric": lambda d: not _dt.is_boolean(d)}
    for k in kinds:
        if isinstance(k, str):
            if k not in names:
                raise ValueError(f"isdtype: unknown kind {k!r}; known kinds are {sorted(names)}")
            if names[k](dt):
                return True
        elif dt == _as_dtype(k):
            return True
    return False


# --- ndarray: the type of lamina arrays, for isinstance checks ---------------------------
class _ArrayMeta(type):
    """``isinstance(x, jnp.ndarray)`` holds for lamina Arrays *and* tracers
    (every class built on ``ArrayMethods``), so user code checking for arrays
    works under jit/grad/vmap, as in JAX; and for typed key arrays, which are
    arrays in JAX (``jnp.ndarray`` is ``jax.Array`` there)."""

    def __instancecheck__(cls, instance: object) -> builtins.bool:
        return isinstance(instance, (ArrayMethods, PRNGKeyArray))

    def __subclasscheck__(cls, subclass: type) -> builtins.bool:
        return subclass is cls or issubclass(subclass, (ArrayMethods, PRNGKeyArray))


class ndarray(metaclass=_ArrayMeta):  # noqa: N801 - NumPy's name
    """The type of lamina arrays (device Arrays and traced values alike).

    Use it for ``isinstance`` checks and annotations; arrays are made by
    ``lamina.numpy.array`` and friends, never by calling ``ndarray``.
    ``ndarray.at`` is the ``.at`` property of arrays (set when the methods
    are installed).
    """

    at: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("lamina.numpy.ndarray cannot be instantiated; use "
                        "lamina.numpy.array or lamina.numpy.zeros")


Array = ndarray
