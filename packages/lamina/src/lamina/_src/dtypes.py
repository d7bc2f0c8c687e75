"""``jax._src.dtypes`` under the alias: :mod:`lamina.dtypes` plus the names
libraries read from JAX's private module when they load.

- ``TypePromotionError``: the error of a forbidden dtype mix (lamina.dtypes').
- ``DType``: the type of a dtype object (``numpy.dtype``).
- ``ExtendedDType``: the base of dtype objects that are not NumPy dtypes
  (flax's fp8 metadata dtype subclasses it). An instance names its scalar
  class in ``type`` (a subclass of ``extended``), and
  ``lamina.dtypes.issubdtype(instance, dtypes.extended)`` is True. lamina's
  arrays cannot have such a dtype.
- ``supports_inf(dtype)``: whether the floating dtype has infinities.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from lamina.dtypes import TypePromotionError as TypePromotionError
from lamina.dtypes import bfloat16 as bfloat16
from lamina.dtypes import canonicalize_dtype as canonicalize_dtype
from lamina.dtypes import extended as extended
from lamina.dtypes import finfo as finfo
from lamina.dtypes import float0 as float0
from lamina.dtypes import iinfo as iinfo
from lamina.dtypes import issubdtype as issubdtype
from lamina.dtypes import prng_key as prng_key
from lamina.dtypes import result_type as result_type
from lamina.dtypes import scalar_type_of as scalar_type_of

__all__ = [
    "DType", "ExtendedDType", "TypePromotionError", "bfloat16", "canonicalize_dtype",
    "extended", "finfo", "float0", "iinfo", "issubdtype", "prng_key", "result_type",
    "scalar_type_of", "supports_inf",
]

DType = np.dtype


class ExtendedDType:
    """Base of dtype objects that are not NumPy dtypes (see the module docstring)."""

    #: ``lamina.dtypes.issubdtype`` compares an extended dtype by its ``type``.
    lamina_extended_dtype: ClassVar[bool] = True
    type: Any
    name: Any


def supports_inf(dtype: Any) -> bool:
    """Whether values of ``dtype`` can be infinite (floating dtypes with an
    infinity; not ``float8_e4m3fn`` and the other finite-only float8 types)."""
    dt = np.dtype(dtype)
    if not issubdtype(dt, np.floating) and not issubdtype(dt, np.complexfloating):
        return False
    return bool(np.isinf(np.array(np.inf).astype(dt)))
