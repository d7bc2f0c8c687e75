"""The operators and methods of lamina arrays, shared by tracers and the
runtime's ``Array``: ``+ - * / // % ** @`` (and reflected forms), comparisons,
``- + ~ abs``, ``x[idx]``, and ``.reshape/.astype/.sum/.at[...]...``.

``ArrayMethods`` is a stateless mixin: the class it is mixed into provides
``aval``, ``shape`` and ``dtype``. Everything is NumPy semantics implemented
with lax (``numpy_helpers``), so it works on any array lamina can trace.

This module is imported by ``core`` while ``core`` itself is being imported
(``Tracer`` derives from ``ArrayMethods``), so it must not import the lax
layer at import time: ``_np`` is bound to ``numpy_helpers`` on first use.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class _LazyNumpyHelpers:
    """Stands in for ``numpy_helpers`` until first used, then replaces itself."""

    def __getattr__(self, name: str) -> Any:
        global _np
        from lamina_tracing_core import numpy_helpers
        _np = numpy_helpers
        return getattr(numpy_helpers, name)


_np: Any = _LazyNumpyHelpers()

_ACCEPTED_SCALARS = (bool, int, float, complex, np.ndarray, np.generic)


def _accepts(other: Any) -> bool:
    """Binary operators defer (return NotImplemented) to unknown types."""
    if isinstance(other, _ACCEPTED_SCALARS):
        return True
    return getattr(other, "aval", None) is not None or hasattr(other, "__jax_array__")


def _binop(name: str, reflected: bool = False) -> Any:
    def op(self: Any, other: Any) -> Any:
        if not _accepts(other):
            return NotImplemented
        fun = getattr(_np, name)
        return fun(other, self) if reflected else fun(self, other)
    op.__name__ = name
    return op


class ArrayMethods:
    """NumPy-style operators and methods for lamina's array types."""

    __slots__ = ()
    __array_priority__ = 100

    aval: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    # --- arithmetic ----------------------------------------------------------------
    __add__ = _binop("add")
    __radd__ = _binop("add", True)
    __sub__ = _binop("subtract")
    __rsub__ = _binop("subtract", True)
    __mul__ = _binop("multiply")
    __rmul__ = _binop("multiply", True)
    __truediv__ = _binop("true_divide")
    __rtruediv__ = _binop("true_divide", True)
    __floordiv__ = _binop("floor_divide")
    __rfloordiv__ = _binop("floor_divide", True)
    __mod__ = _binop("remainder")
    __rmod__ = _binop("remainder", True)
    __pow__ = _binop("power")
    __rpow__ = _binop("power", True)
    __matmul__ = _binop("matmul")
    __rmatmul__ = _binop("matmul", True)
    __divmod__ = _binop("divmod_")
    __rdivmod__ = _binop("divmod_", True)
    __and__ = _binop("bitwise_and")
    __rand__ = _binop("bitwise_and", True)
    __or__ = _binop("bitwise_or")
    __ror__ = _binop("bitwise_or", True)
    __xor__ = _binop("bitwise_xor")
    __rxor__ = _binop("bitwise_xor", True)
    __lshift__ = _binop("left_shift")
    __rlshift__ = _binop("left_shift", True)
    __rshift__ = _binop("right_shift")
    __rrshift__ = _binop("right_shift", True)

    # --- comparisons -----------------------------------------------------------------
    __eq__ = _binop("equal")
    __ne__ = _binop("not_equal")
    __lt__ = _binop("less")
    __le__ = _binop("less_equal")
    __gt__ = _binop("greater")
    __ge__ = _binop("greater_equal")

    # --- unary -----------------------------------------------------------------------
    def __neg__(self) -> Any:
        return _np.negative(self)

    def __pos__(self) -> Any:
        return _np.positive(self)

    def __invert__(self) -> Any:
        return _np.invert(self)

    def __abs__(self) -> Any:
        return _np.absolute(self)

    def __round__(self, ndigits: int | None = None) -> Any:
        return _np.round(self, ndigits or 0)

    # --- indexing and iteration -----------------------------------------------------------
    def __getitem__(self, idx: Any) -> Any:
        return _np.getitem(self, idx)

    def __iter__(self) -> Any:
        return _np.iterate(self)

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    def __reversed__(self) -> Any:
        n = len(self)
        return (self[i] for i in range(n - 1, -1, -1))

    @property
    def at(self) -> Any:
        """``x.at[idx].set(v)`` / ``.add`` / ``.mul`` / ``.min`` / ``.max`` /
        ``.get()``: functional index updates."""
        return _np._IndexUpdateHelper(self)

    # --- properties -----------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def T(self) -> Any:
        return _np.transpose(self)

    @property
    def mT(self) -> Any:
        return _np.matrix_transpose(self)

    @property
    def real(self) -> Any:
        return _np.real(self)

    @property
    def imag(self) -> Any:
        return _np.imag(self)

    # --- methods ----------------------------------------------------------------------------
    def astype(self, dtype: Any) -> Any:
        return _np.astype(self, dtype)

    def reshape(self, *shape: Any, order: str = "C") -> Any:
        return _np.reshape(self, *shape, order=order)

    def transpose(self, *axes: Any) -> Any:
        if not axes or (len(axes) == 1 and axes[0] is None):
            return _np.transpose(self)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            return _np.transpose(self, axes[0])
        return _np.transpose(self, axes)

    def swapaxes(self, axis1: int, axis2: int) -> Any:
        return _np.swapaxes(self, axis1, axis2)

    def squeeze(self, axis: Any = None) -> Any:
        return _np.squeeze(self, axis)

    def ravel(self, order: str = "C") -> Any:
        return _np.ravel(self)

    def flatten(self, order: str = "C") -> Any:
        return _np.ravel(self)

    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
        return _np.sum(self, axis, dtype, keepdims, initial, where)

    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False,
             initial: Any = None, where: Any = None) -> Any:
        return _np.prod(self, axis, dtype, keepdims, initial, where)

    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False,
             where: Any = None) -> Any:
        return _np.mean(self, axis, dtype, keepdims, where)

    def max(self, axis: Any = None, keepdims: bool = False, initial: Any = None,
            where: Any = None) -> Any:
        return _np.max(self, axis, keepdims, initial, where)

    def min(self, axis: Any = None, keepdims: bool = False, initial: Any = None,
            where: Any = None) -> Any:
        return _np.min(self, axis, keepdims, initial, where)

    def any(self, axis: Any = None, keepdims: bool = False, where: Any = None) -> Any:
        return _np.any(self, axis, keepdims, where)

    def all(self, axis: Any = None, keepdims: bool = False, where: Any = None) -> Any:
        return _np.all(self, axis, keepdims, where)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Any:
        return _np.argmax(self, axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Any:
        return _np.argmin(self, axis, keepdims)

    def cumsum(self, axis: int | None = None, dtype: Any = None) -> Any:
        return _np.cumsum(self, axis, dtype)

    def cumprod(self, axis: int | None = None, dtype: Any = None) -> Any:
        return _np.cumprod(self, axis, dtype)

    def sort(self, axis: int | None = -1, *, stable: bool = True,
             descending: bool = False) -> Any:
        return _np.sort(self, axis, stable=stable, descending=descending)

    def argsort(self, axis: int | None = -1, *, stable: bool = True,
                descending: bool = False) -> Any:
        return _np.argsort(self, axis, stable=stable, descending=descending)

    def clip(self, min: Any = None, max: Any = None) -> Any:
        return _np.clip(self, min, max)

    def round(self, decimals: int = 0) -> Any:
        return _np.round(self, decimals)

    def dot(self, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
        return _np.dot(self, b, precision=precision,
                       preferred_element_type=preferred_element_type)

    def conj(self) -> Any:
        return _np.conjugate(self)

    def conjugate(self) -> Any:
        return _np.conjugate(self)
