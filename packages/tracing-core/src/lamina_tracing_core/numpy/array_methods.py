"""The operators and methods of lamina arrays, installed onto
``lamina_tracing_core.array_methods.ArrayMethods`` (the base of tracers and of
the runtime's ``Array``) by :func:`install_methods`, which the package runs
when it is imported.

Each one is the ``lamina.numpy`` function of the same name with the array as
its first argument (``x.sum(axis)`` is ``sum(x, axis)``, ``x + y`` is
``add(x, y)``), so a method and its function always agree: same dtype, same
weak type, same values, eagerly and under every transformation. The methods
take NumPy's keywords (``out=None``, ``dtype=``...), so ``numpy.sum(x)`` and
friends, which call the method, work on lamina arrays; an ``out`` array is
an error naming the function, as in JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.array_methods import ArrayMethods, install_method
from lamina_tracing_core.avals import get_aval

from lamina_tracing_core.numpy import (
    creation,
    indexing,
    products,
    reductions,
    shape_ops,
    sorting,
    ufuncs,
)
from lamina_tracing_core.numpy.dtypes import ndarray

_ACCEPTED_SCALARS = (bool, int, float, complex, np.ndarray, np.generic)


def _accepts(other: Any) -> bool:
    """Binary operators defer (return NotImplemented) to unknown types."""
    if isinstance(other, _ACCEPTED_SCALARS):
        return True
    return getattr(other, "aval", None) is not None or hasattr(other, "__jax_array__")


def _operator(fun: Callable[[Any, Any], Any], name: str, reflected: bool) -> Callable[..., Any]:
    if reflected:
        def op(self: Any, other: Any) -> Any:
            return fun(other, self) if _accepts(other) else NotImplemented
    else:
        def op(self: Any, other: Any) -> Any:
            return fun(self, other) if _accepts(other) else NotImplemented
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``{fun.__name__}`` with the array as the {'second' if reflected else 'first'} operand."
    return op


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": ufuncs.add, "sub": ufuncs.subtract, "mul": ufuncs.multiply,
    "truediv": ufuncs.true_divide, "floordiv": ufuncs.floor_divide, "mod": ufuncs.remainder,
    "pow": ufuncs.power, "matmul": products.matmul, "divmod": ufuncs.divmod,
    "and": ufuncs.bitwise_and, "or": ufuncs.bitwise_or, "xor": ufuncs.bitwise_xor,
    "lshift": ufuncs.left_shift, "rshift": ufuncs.right_shift,
}
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": ufuncs.equal, "ne": ufuncs.not_equal, "lt": ufuncs.less, "le": ufuncs.less_equal,
    "gt": ufuncs.greater, "ge": ufuncs.greater_equal,
}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": ufuncs.negative, "pos": ufuncs.positive, "invert": ufuncs.invert,
    "abs": ufuncs.absolute,
}


def _method(fun: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``x.name(*args, **kwargs)`` as ``fun(x, *args, **kwargs)``."""
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return fun(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``lamina.numpy.{fun.__name__}`` of this array (same arguments)."
    return method


#: Methods that are the function of the same name with the array first.
_FORWARDED: dict[str, Callable[..., Any]] = {
    "all": reductions.all, "any": reductions.any, "argmax": reductions.argmax,
    "argmin": reductions.argmin, "argsort": sorting.argsort, "choose": indexing.choose,
    "clip": ufuncs.clip, "conj": ufuncs.conjugate, "conjugate": ufuncs.conjugate,
    "cumprod": reductions.cumprod, "cumsum": reductions.cumsum,
    "diagonal": products.diagonal, "dot": products.dot, "max": reductions.max,
    "mean": reductions.mean, "min": reductions.min, "nonzero": indexing.nonzero,
    "prod": reductions.prod, "ptp": reductions.ptp, "ravel": shape_ops.ravel,
    "flatten": shape_ops.ravel, "repeat": shape_ops.repeat, "round": ufuncs.round,
    "searchsorted": sorting.searchsorted, "sort": sorting.sort, "squeeze": shape_ops.squeeze,
    "std": reductions.std, "sum": reductions.sum, "swapaxes": shape_ops.swapaxes,
    "take": indexing.take, "trace": reductions.trace, "var": reductions.var,
}


def _astype(self: Any, dtype: Any, copy: bool = False, device: Any = None) -> Any:
    """``lamina.numpy.astype`` of this array."""
    return creation.astype(self, dtype, copy=copy, device=device)


def _copy(self: Any) -> Any:
    """A copy of this array (``lamina.numpy.copy``)."""
    return creation.copy(self)


def _compress(self: Any, condition: Any, axis: int | None = None, *, out: None = None,
              size: int | None = None, fill_value: Any = 0) -> Any:
    """``lamina.numpy.compress(condition, self, axis)``."""
    return indexing.compress(condition, self, axis, size=size, fill_value=fill_value, out=out)


def _reshape(self: Any, *args: Any, order: str = "C", out_sharding: Any = None) -> Any:
    """``x.reshape(2, 3)`` or ``x.reshape((2, 3))``: ``lamina.numpy.reshape``."""
    shape = args[0] if len(args) == 1 else args
    return shape_ops.reshape(self, shape, order, out_sharding=out_sharding)


def _transpose(self: Any, *axes: Any) -> Any:
    """``x.transpose()``, ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
    if not axes or (len(axes) == 1 and axes[0] is None):
        return shape_ops.transpose(self)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        return shape_ops.transpose(self, axes[0])
    return shape_ops.transpose(self, axes)


def _view(self: Any, dtype: Any = None, type: None = None) -> Any:  # noqa: A002 - NumPy's name
    """The same bits read as ``dtype`` (the last axis scales by the ratio of
    the item sizes), as ``numpy.ndarray.view``."""
    if type is not None:
        raise ValueError("lamina arrays do not support view(type=...)")
    if dtype is None:
        return self
    aval = get_aval(self)
    new = dtypes.canonicalize_dtype(dtype)
    old_size, new_size = aval.dtype.itemsize, new.itemsize
    if new == aval.dtype:
        return self
    if aval.dtype == dtypes.bool_ or new == dtypes.bool_:
        # bitcasts do not take bool: go through uint8 (one byte each)
        as_bytes = self if aval.dtype != dtypes.bool_ else lax.convert_element_type(self, np.uint8)
        out = _view(as_bytes, np.uint8)
        return lax.ne(out, lax.full_like(out, 0)) if new == dtypes.bool_ else _view(out, new)
    if not aval.shape and old_size != new_size:
        raise ValueError("Changing the dtype of a 0d array is only supported if the itemsize "
                         "is unchanged")
    if old_size == new_size:
        return lax.bitcast_convert_type(self, new)
    if old_size > new_size:
        out = lax.bitcast_convert_type(self, new)
        return lax.reshape(out, aval.shape[:-1] + (aval.shape[-1] * (old_size // new_size),))
    ratio = new_size // old_size
    if aval.shape[-1] % ratio:
        raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                         "total size in bytes of the last axis of the array.")
    grouped = lax.reshape(self, aval.shape[:-1] + (aval.shape[-1] // ratio, ratio))
    return lax.bitcast_convert_type(grouped, new)


def _round(self: Any, ndigits: int | None = None) -> Any:
    return ufuncs.round(self, ndigits or 0)


def _properties() -> dict[str, property]:
    return {
        "T": property(lambda self: shape_ops.transpose(self), doc="The reversed-axes transpose."),
        "mT": property(lambda self: shape_ops.matrix_transpose(self),
                       doc="The transpose of the last two axes."),
        "real": property(lambda self: ufuncs.real(self), doc="The real part."),
        "imag": property(lambda self: ufuncs.imag(self), doc="The imaginary part."),
        "at": property(lambda self: indexing.IndexUpdateHelper(self),
                       doc="``x.at[idx].set(v)`` / ``.add`` / ``.mul`` / ``.min`` / ``.max`` / "
                           "``.get()``: functional index updates."),
    }


def install_methods() -> None:
    """Installs every operator, method and property onto ``ArrayMethods``
    (idempotent)."""
    for name, fun in _BINARY.items():
        install_method(f"__{name}__", _operator(fun, f"__{name}__", False))
        install_method(f"__r{name}__", _operator(fun, f"__r{name}__", True))
    for name, fun in _COMPARISONS.items():
        install_method(f"__{name}__", _operator(fun, f"__{name}__", False))
    for name, unary in _UNARY.items():
        install_method(f"__{name}__", _method(unary, f"__{name}__"))
    install_method("__round__", _round)
    install_method("__getitem__", _method(indexing.getitem, "__getitem__"))
    install_method("__iter__", _method(indexing.iterate, "__iter__"))
    for name, fun in _FORWARDED.items():
        install_method(name, _method(fun, name))
    for name, method in (("astype", _astype), ("copy", _copy), ("compress", _compress),
                         ("reshape", _reshape), ("transpose", _transpose), ("view", _view)):
        install_method(name, method)
    for name, prop in _properties().items():
        install_method(name, prop)
    ndarray.at = ArrayMethods.at
