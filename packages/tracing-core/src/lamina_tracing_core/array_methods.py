"""``ArrayMethods``: the mixin behind the operators and methods of lamina
arrays, shared by tracers and the runtime's ``Array``.

The mixin itself holds only what needs no NumPy semantics (``ndim``,
``size``, ``len()``, ``reversed()``) and imports nothing of ``lax`` or
``numpy``, so ``core`` can derive ``Tracer`` from it at its top.
``lamina_tracing_core.numpy`` installs everything else when it is imported
(``+ - * / // % ** @`` and the reflected forms, comparisons, ``- + ~ abs``,
``x[idx]``, iteration, ``.at``, ``.T``, ``.sum()``, ``.reshape()``, ...), each
the ``lamina.numpy`` function of the same name, the way ``jax.numpy``
registers JAX's array methods. ``lamina_tracing_core`` imports its numpy
package, so the methods always exist.

The class provides ``aval``, ``shape`` and ``dtype``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

#: An installed operator or method (``lamina_tracing_core.numpy.array_methods``).
_Method = Callable[..., Any]


class ArrayMethods:
    """NumPy-style operators and methods for lamina's array types."""

    __slots__ = ()
    __array_priority__ = 100

    aval: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    # Installed by lamina_tracing_core.numpy at import (declared for type checkers).
    __add__: _Method
    __radd__: _Method
    __sub__: _Method
    __rsub__: _Method
    __mul__: _Method
    __rmul__: _Method
    __truediv__: _Method
    __rtruediv__: _Method
    __floordiv__: _Method
    __rfloordiv__: _Method
    __mod__: _Method
    __rmod__: _Method
    __pow__: _Method
    __rpow__: _Method
    __matmul__: _Method
    __rmatmul__: _Method
    __divmod__: _Method
    __rdivmod__: _Method
    __and__: _Method
    __rand__: _Method
    __or__: _Method
    __ror__: _Method
    __xor__: _Method
    __rxor__: _Method
    __lshift__: _Method
    __rlshift__: _Method
    __rshift__: _Method
    __rrshift__: _Method
    __lt__: _Method
    __le__: _Method
    __gt__: _Method
    __ge__: _Method
    __neg__: _Method
    __pos__: _Method
    __invert__: _Method
    __abs__: _Method
    __round__: _Method
    __getitem__: _Method
    __iter__: Callable[..., Iterator[Any]]
    T: Any
    mT: Any
    real: Any
    imag: Any
    at: Any
    all: _Method
    any: _Method
    argmax: _Method
    argmin: _Method
    argsort: _Method
    astype: _Method
    choose: _Method
    clip: _Method
    compress: _Method
    conj: _Method
    conjugate: _Method
    copy: _Method
    cumprod: _Method
    cumsum: _Method
    diagonal: _Method
    dot: _Method
    flatten: _Method
    max: _Method
    mean: _Method
    min: _Method
    nonzero: _Method
    prod: _Method
    ptp: _Method
    ravel: _Method
    repeat: _Method
    reshape: _Method
    round: _Method
    searchsorted: _Method
    sort: _Method
    squeeze: _Method
    std: _Method
    sum: _Method
    swapaxes: _Method
    take: _Method
    trace: _Method
    transpose: _Method
    var: _Method
    view: _Method

    def __len__(self) -> int:
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    def __reversed__(self) -> Iterator[Any]:
        n = len(self)
        return (self[i] for i in range(n - 1, -1, -1))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def install_method(name: str, method: Any) -> None:
    """Sets ``ArrayMethods.<name>`` (an operator, method or property); used
    by ``lamina_tracing_core.numpy`` when it is imported."""
    setattr(ArrayMethods, name, method)
