"""``lamina.typing``: the annotation aliases of JAX's ``jax.typing``.

``ArrayLike`` is what lamina's functions accept where an array is expected (a
lamina ``Array``, a NumPy array or scalar, or a Python scalar); ``DTypeLike``
is what they accept as a dtype (a name, a scalar type, a ``np.dtype``, or any
object with a ``dtype`` attribute).
"""

from __future__ import annotations

from typing import Any, Protocol, Union

import numpy as np
from lamina_interpreters_pxla.array import Array

__all__ = ["ArrayLike", "DTypeLike"]


class SupportsDType(Protocol):
    """Anything with a ``dtype`` attribute (``ShapeDtypeStruct``, arrays, ...)."""

    @property
    def dtype(self) -> np.dtype[Any]: ...


ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]  # noqa: UP007 - a runtime alias, as JAX's
DTypeLike = Union[str, type[Any], np.dtype, SupportsDType]  # noqa: UP007 - a runtime alias, as JAX's
