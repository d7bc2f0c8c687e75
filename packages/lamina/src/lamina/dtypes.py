"""``lamina.dtypes``: dtype names and rules (JAX's ``jax.dtypes``).

The rules themselves (canonicalization under ``enable_x64``, the weak-type
promotion lattice) live in tracing-core; this module adds JAX's public names
around them: the abstract ``extended`` and ``prng_key`` classes (the dtype of
a typed key array, ``lamina.random.key``, is one: ``issubdtype(k.dtype,
dtypes.prng_key)``), ``scalar_type_of`` and ``itemsize_bits``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from lamina_tracing_core import dtypes as _core
from lamina_tracing_core.dtypes import (
    TypePromotionError,
    finfo,
    float0,
    iinfo,
    result_type,
)
from lamina_tracing_core.numpy.key_arrays import extended, prng_key

#: The scalar type, as JAX's ``jax.dtypes.bfloat16`` (callable: ``bfloat16(1)``
#: is a scalar; ``np.dtype(bfloat16)`` the dtype, which compares equal to it).
bfloat16 = ml_dtypes.bfloat16

__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo", "float0",
           "iinfo", "issubdtype", "itemsize_bits", "prng_key", "result_type", "scalar_type_of"]


def _is_extended_class(x: Any) -> bool:
    return isinstance(x, type) and issubclass(x, extended)


def canonicalize_dtype(dtype: Any, allow_extended_dtype: bool = False) -> np.dtype[Any]:
    """The dtype lamina uses for ``dtype``: 64-bit types become 32-bit ones unless
    x64 is enabled (``canonicalize_dtype(float)`` is ``float32`` by default)."""
    if getattr(dtype, "lamina_extended_dtype", False):
        if allow_extended_dtype:
            return dtype  # type: ignore[no-any-return]
        raise ValueError(f"canonicalize_dtype: dtype {dtype} is an extended dtype; pass "
                         "allow_extended_dtype=True to accept it")
    return _core.canonicalize_dtype(dtype)


def issubdtype(a: Any, b: Any) -> bool:
    """``np.issubdtype`` that also knows ml_dtypes' types (``bfloat16`` is a
    ``np.floating``) and JAX's ``extended``/``prng_key`` classes."""
    if getattr(a, "lamina_extended_dtype", False):  # a typed key's dtype: its scalar type
        a = a.type
    if _is_extended_class(a) or _is_extended_class(b):
        return _is_extended_class(a) and isinstance(b, type) and issubclass(a, b)
    return _core.issubdtype(a, b)


def scalar_type_of(x: Any) -> type:
    """The Python scalar type (``bool``, ``int``, ``float`` or ``complex``) of a
    value's dtype: ``scalar_type_of(np.float32(1))`` is ``float``."""
    raw = getattr(x, "dtype", None)
    dtype = np.dtype(raw) if raw is not None else np.asarray(x).dtype
    if not _core.is_valid_array_dtype(dtype):
        raise TypeError(f"Value {x!r} with dtype {dtype} is not a valid JAX array type. Only "
                        "arrays of numeric types are supported by JAX.")
    if dtype == np.bool_:
        return bool
    if _core.is_integer(dtype):
        return int
    if _core.is_floating(dtype):
        return float
    if _core.is_complex(dtype):
        return complex
    raise TypeError(f"scalar_type_of: no Python scalar type for dtype {dtype}")


def itemsize_bits(dtype: Any) -> int:
    """How many bits one element of ``dtype`` takes (4 for ``int4``, 16 for ``bfloat16``)."""
    if dtype is None:
        raise ValueError("dtype cannot be None.")
    dt = np.dtype(dtype)
    if dt.type.__module__ == "ml_dtypes":
        if dt.name.startswith(("int", "uint")):
            return int(ml_dtypes.iinfo(dt).bits)  # type: ignore[no-untyped-call]
        return int(ml_dtypes.finfo(dt).bits)  # type: ignore[no-untyped-call]
    return int(dt.itemsize) * 8
