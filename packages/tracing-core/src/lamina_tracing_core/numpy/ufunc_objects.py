"""NumPy's ``ufunc`` objects: ``add``, ``multiply``, ``maximum``... as
instances of ``ufunc`` that call the elementwise function and offer
``outer``, ``reduce``, ``accumulate``, ``at`` and ``reduceat`` (the set
``jax.numpy`` gives its binary ufuncs, and ``negative``).

Reductions and scans with a dedicated lax operation (sum, product, max, min,
and, or) use it; the others fold the function along the axis with ``scan``
or ``fori_loop``, so any ``frompyfunc`` ufunc works under ``jit``, ``vmap``
and ``grad``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import control_flow  # its loops load at the first loop
from lamina_tracing_core.numpy import _util, reductions, ufuncs
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.creation import asarray
from lamina_tracing_core.numpy.indexing import getitem, index_update
from lamina_tracing_core.numpy.shape_ops import moveaxis

_AT_INPLACE = ("{name}.at: lamina arrays are immutable, so at() cannot update in place; pass "
               "inplace=False and use the result: arr = {name}.at(arr, indices, values, "
               "inplace=False)")


class ufunc:  # noqa: N801 - NumPy's name
    """A universal function: elementwise on broadcast arrays, with the
    methods ``outer``, ``reduce``, ``accumulate``, ``at`` and ``reduceat``.

    ``ufunc(func, nin, nout, identity=...)`` wraps ``func``; the optional
    ``reduce``/``accumulate``/``at``/``reduceat`` callables replace the
    generic loop-based implementations."""

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *,
                 name: str | None = None, nargs: int | None = None, identity: Any = None,
                 call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None,
                 accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None,
                 reduceat: Callable[..., Any] | None = None):
        if not callable(func):
            raise TypeError(f"lamina.numpy.ufunc: func must be callable, got {func!r}")
        self._func = func
        self.__name__ = name if name is not None else getattr(func, "__name__", repr(func))
        self.__doc__ = getattr(func, "__doc__", None)
        self.nin = operator_index("nin", nin)
        self.nout = operator_index("nout", nout)
        self.nargs = self.nin if nargs is None else operator_index("nargs", nargs)
        self.identity = identity
        self._call = call
        self._reduce = reduce
        self._accumulate = accumulate
        self._at = at
        self._reduceat = reduceat

    def __hash__(self) -> int:
        return hash((self._func, self.__name__, self.nin, self.nout, self.nargs))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and (
            (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)
            == (other._func, other.__name__, other.identity, other.nin, other.nout, other.nargs))

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: ArrayLike, out: None = None, where: None = None) -> Any:
        if out is not None:
            raise _util.UnsupportedArgumentError(
                f"lamina.numpy.{self.__name__}: the out argument is not supported "
                "(arrays are immutable)")
        if where is not None:
            raise _util.UnsupportedArgumentError(
                f"lamina.numpy.{self.__name__}: the where argument is not supported")
        if len(args) != self.nin:
            raise TypeError(f"lamina.numpy.{self.__name__} takes {self.nin} positional "
                            f"arguments, got {len(args)}")
        fun = self._call if self._call is not None else self._func
        return fun(*args)

    def _check_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"lamina.numpy.{self.__name__}.{method}: {method} only supported "
                             "for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"lamina.numpy.{self.__name__}.{method}: {method} only supported "
                             "for functions returning a single value")

    # --- outer --------------------------------------------------------------------------------
    def outer(self, A: ArrayLike, B: ArrayLike, /) -> Array:  # noqa: N803 - NumPy's names
        """``self(A[..., None...], B)``: every pair of elements of ``A`` and ``B``."""
        self._check_binary("outer")
        a, b = _util.operands(f"{self.__name__}.outer", A, B)
        sa, sb = _util.shape_of(a), _util.shape_of(b)
        shape = sa + sb
        a_b = lax.broadcast_in_dim(a, shape, tuple(range(len(sa))))
        b_b = lax.broadcast_in_dim(b, shape, tuple(range(len(sa), len(shape))))
        return self(a_b, b_b)

    # --- reduce -------------------------------------------------------------------------------
    def reduce(self, a: ArrayLike, axis: Any = 0, dtype: Any = None, out: None = None,
               keepdims: bool = False, initial: Any = None, where: Any = None) -> Array:
        """Fold the ufunc along ``axis`` (``None``: all axes)."""
        fun = f"{self.__name__}.reduce"
        self._check_binary("reduce")
        _util.check_out(fun, out)
        if where is not None:
            if self.identity is None and initial is None:
                raise ValueError(f"lamina.numpy.{fun}: reduction operation {self.__name__!r} "
                                 "has no identity; give initial= to use where=")
            (w,) = _util.operands(fun, where, names=("where",))
            if get_aval(w).dtype != np.bool_:
                raise ValueError(f"lamina.numpy.{fun}: where must have dtype bool, got "
                                 f"{get_aval(w).dtype}")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        return self._reduce_by_scan(a, axis, dtype, keepdims, initial, where)

    def _reduce_by_scan(self, a: ArrayLike, axis: Any, dtype: Any, keepdims: bool,
                        initial: Any, where: Any) -> Array:
        fun = f"{self.__name__}.reduce"
        (x,) = _util.operands(fun, a, names=("a",))
        dt = _util.user_dtype(fun, dtype)
        if dt is None:
            dt = get_aval(self(x, x)).dtype
        if initial is None and where is not None:
            initial = self.identity
        shape = _util.shape_of(x)
        w = None if where is None else _util.broadcast_to(fun, asarray(where), shape)
        if isinstance(axis, (tuple, list)):
            raise _util.UnsupportedArgumentError(
                f"lamina.numpy.{fun}: a tuple of axes is not supported for this ufunc")
        if axis is None:
            n = math.prod(shape)
            x = lax.reshape(x, (n,))
            w = None if w is None else lax.reshape(w, (n,))
            final = tuple(1 for _ in shape) if keepdims else ()
            ax = 0
        else:
            ax = _util.canonicalize_axis(fun, axis, len(shape))
            final = tuple(1 if i == ax else d for i, d in enumerate(shape)) if keepdims else \
                tuple(d for i, d in enumerate(shape) if i != ax)
            x = moveaxis(x, ax, 0)
            w = None if w is None else moveaxis(w, ax, 0)
        x = _util.convert(x, dt)
        length = _util.shape_of(x)[0]
        if length == 0:
            if initial is None:
                raise ValueError(f"lamina.numpy.{fun}: zero-size array to reduction operation "
                                 f"{self.__name__} which has no identity")
            return lax.full(final, initial, dt)
        if initial is None:
            init = lax.index_in_dim(x, 0, keepdims=False)
            rest = lax.slice_in_dim(x, 1, length, 1, 0)
            w_rest = None if w is None else lax.slice_in_dim(w, 1, length, 1, 0)
        else:
            init = lax.full(_util.shape_of(x)[1:], initial, dt)
            rest, w_rest = x, w

        def step(carry: Any, elems: Any) -> tuple[Any, None]:
            if w_rest is None:
                return _util.convert(self(carry, elems), dt), None
            value, keep = elems
            return lax.select(keep, _util.convert(self(carry, value), dt), carry), None

        result, _ = control_flow.scan(step, init, rest if w_rest is None else (rest, w_rest))
        return lax.reshape(result, final)

    # --- accumulate ---------------------------------------------------------------------------
    def accumulate(self, a: ArrayLike, axis: int = 0, dtype: Any = None,
                   out: None = None) -> Array:
        """The running fold of the ufunc along ``axis``."""
        fun = f"{self.__name__}.accumulate"
        self._check_binary("accumulate")
        _util.check_out(fun, out)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError(f"lamina.numpy.{fun}: accumulate does not allow multiple axes")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        (x,) = _util.operands(fun, a, names=("a",))
        dt = _util.user_dtype(fun, dtype)
        if dt is None:
            dt = get_aval(self(x, x)).dtype
        shape = _util.shape_of(x)
        ax = _util.canonicalize_axis(fun, axis, len(shape))
        if math.prod(shape) == 0:
            return lax.full(shape, 0, dt)
        x = moveaxis(_util.convert(x, dt), ax, 0)

        def step(carry: Any, elem: Any) -> tuple[Any, Any]:
            y = _util.convert(self(carry, elem), dt)
            return y, y

        first = lax.index_in_dim(x, 0, keepdims=False)
        _, rest = control_flow.scan(step, first, lax.slice_in_dim(x, 1, shape[ax], 1, 0))
        result = lax.concatenate([lax.expand_dims(first, (0,)), rest], 0)
        return moveaxis(result, 0, ax)

    # --- at -----------------------------------------------------------------------------------
    def at(self, a: ArrayLike, indices: Any, b: ArrayLike | None = None, /, *,
           inplace: bool = True) -> Array:
        """``a`` with ``self(a[indices], b)`` applied at ``indices``, repeated indices
        applied once per occurrence (needs ``inplace=False``)."""
        if inplace:
            raise _util.UnsupportedArgumentError(_AT_INPLACE.format(name=self.__name__))
        if self._at is not None:
            return self._at(a, indices) if b is None else self._at(a, indices, b)
        fun = f"{self.__name__}.at"
        (x,) = _util.operands(fun, a, names=("a",))
        args = () if b is None else tuple(_util.operands(fun, b, names=("b",)))
        if len(args) + 1 != self.nin:
            raise TypeError(f"lamina.numpy.{fun}: {self.__name__} takes {self.nin} inputs")
        idx = indices if isinstance(indices, tuple) else (indices,)
        if not idx:
            return x
        arrays = [asarray(i) for i in idx if not isinstance(i, slice) and i is not None
                  and i is not Ellipsis]
        bshape = _util.broadcast_shapes(fun, *(_util.shape_of(i) for i in arrays))
        if not bshape:
            current = getitem(x, indices)
            return index_update(x, indices, self(current, *args), "set")
        n = math.prod(bshape)
        flat = [i if isinstance(i, slice) or i is None or i is Ellipsis
                else lax.reshape(_util.broadcast_to(fun, asarray(i), bshape), (n,)) for i in idx]
        vals = [lax.reshape(_util.broadcast_to(fun, v, bshape), (n,)) if _util.ndim_of(v) else v
                for v in args]

        def body(k: Any, arr: Any) -> Any:
            where_k = tuple(e if isinstance(e, slice) or e is None or e is Ellipsis
                            else getitem(e, k) for e in flat)
            rest = tuple(getitem(v, k) if _util.ndim_of(v) else v for v in vals)
            return index_update(arr, where_k, self(getitem(arr, where_k), *rest), "set")

        return control_flow.fori_loop(0, n, body, x)

    # --- reduceat -----------------------------------------------------------------------------
    def reduceat(self, a: ArrayLike, indices: Any, axis: int = 0, dtype: Any = None,
                 out: None = None) -> Array:
        """Reductions over the slices ``a[indices[i]:indices[i+1]]`` along ``axis``
        (``a[indices[i]]`` where the next index is not larger), as NumPy."""
        fun = f"{self.__name__}.reduceat"
        self._check_binary("reduceat")
        _util.check_out(fun, out)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError(f"lamina.numpy.{fun}: reduceat requires a single integer axis")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        x, ind = _util.operands(fun, a, indices, names=("a", "indices"))
        if _util.ndim_of(x) == 0:
            raise ValueError(f"lamina.numpy.{fun}: a must have 1 or more dimensions, got shape "
                             f"{_util.shape_of(x)}")
        if _util.ndim_of(ind) != 1:
            raise ValueError(f"lamina.numpy.{fun}: indices must be one-dimensional, got shape "
                             f"{_util.shape_of(ind)}")
        dt = _util.user_dtype(fun, dtype)
        if dt is None:
            dt = get_aval(x).dtype
        ax = _util.canonicalize_axis(fun, axis, _util.ndim_of(x))
        x = moveaxis(_util.convert(x, dt), ax, 0)
        length = _util.shape_of(x)[0]
        m = _util.shape_of(ind)[0]
        starts = _util.convert(ind, np.int32)
        nxt = lax.concatenate([lax.slice_in_dim(starts, 1, m, 1, 0),
                               np.asarray([length], np.int32)], 0)
        ends = lax.max(nxt, lax.add(starts, np.asarray(1, np.int32)))
        out0 = getitem(x, starts)
        rest_shape = _util.shape_of(x)[1:]
        nd = len(rest_shape)

        def body(i: Any, acc: Any) -> Any:
            inside = lax.bitwise_and(lax.gt(i, starts), lax.lt(i, ends))
            inside = lax.broadcast_in_dim(inside, (m, *rest_shape), (0,))
            row = lax.broadcast_in_dim(lax.dynamic_index_in_dim(x, i, 0, keepdims=False),
                                       (m, *rest_shape), tuple(range(1, nd + 1)))
            return lax.select(inside, _util.convert(self(acc, row), dt), acc)

        result = control_flow.fori_loop(0, length, body, out0)
        return moveaxis(result, 0, ax)


def operator_index(name: str, value: Any) -> int:
    try:
        return int(value.__index__())
    except AttributeError:
        raise TypeError(f"lamina.numpy.ufunc: {name} must be an integer, got {value!r}") from None


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *,
               identity: Any = None) -> ufunc:
    """A ``ufunc`` from a function of ``nin`` array arguments (with an optional
    ``identity`` for reductions of empty or masked arrays)."""
    return ufunc(func, nin, nout, identity=identity)


# --- the dedicated reductions and scans --------------------------------------------------------
def _reducer(name: str, fn: Callable[..., Any], takes_dtype: bool,
             pass_initial: bool = True) -> Callable[..., Any]:
    def reduce(a: ArrayLike, *, axis: Any, dtype: Any, keepdims: bool, initial: Any,
               where: Any) -> Array:
        kwargs: dict[str, Any] = {"axis": axis, "keepdims": keepdims, "where": where}
        if takes_dtype:
            kwargs["dtype"] = dtype
        elif dtype is not None:
            (x,) = _util.operands(f"{name}.reduce", a, names=("a",))
            a = _util.convert(x, _util.user_dtype(f"{name}.reduce", dtype))
        if pass_initial:
            kwargs["initial"] = initial
            return fn(a, **kwargs)
        result = fn(a, **kwargs)
        if initial is not None:
            result = _BINARY[name](result, initial)
        return result

    return reduce


def _accumulator(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def accumulate(a: ArrayLike, *, axis: int, dtype: Any) -> Array:
        return fn(a, axis=axis, dtype=dtype)

    return accumulate


def _lax_accumulator(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def accumulate(a: ArrayLike, *, axis: int, dtype: Any) -> Array:
        (x,) = _util.operands(f"{name}.accumulate", a, names=("a",))
        if dtype is not None:
            x = _util.convert(x, _util.user_dtype(f"{name}.accumulate", dtype))
        ax = _util.canonicalize_axis(f"{name}.accumulate", axis, _util.ndim_of(x))
        return fn(x, axis=ax)

    return accumulate


def _index_at(name: str, op: str) -> Callable[..., Any]:
    def at(a: ArrayLike, indices: Any, *args: Any) -> Array:
        if len(args) != 1:
            raise TypeError(f"lamina.numpy.{name}.at: {name} takes 2 inputs (give b)")
        (x,) = _util.operands(f"{name}.at", a, names=("a",))
        return index_update(x, indices, args[0], op)

    return at


_BINARY: dict[str, Callable[..., Any]] = {
    "add": ufuncs.add, "multiply": ufuncs.multiply, "maximum": ufuncs.maximum,
    "minimum": ufuncs.minimum, "logical_and": ufuncs.logical_and,
    "logical_or": ufuncs.logical_or,
}


add = ufunc(ufuncs.add, 2, 1, name="add", identity=0,
            reduce=_reducer("add", reductions.sum, True),
            accumulate=_accumulator("add", reductions.cumsum), at=_index_at("add", "add"))
multiply = ufunc(ufuncs.multiply, 2, 1, name="multiply", identity=1,
                 reduce=_reducer("multiply", reductions.prod, True),
                 accumulate=_accumulator("multiply", reductions.cumprod),
                 at=_index_at("multiply", "mul"))
maximum = ufunc(ufuncs.maximum, 2, 1, name="maximum", identity=None,
                reduce=_reducer("maximum", reductions.max, False),
                accumulate=_lax_accumulator("maximum", lax.cummax),
                at=_index_at("maximum", "max"))
minimum = ufunc(ufuncs.minimum, 2, 1, name="minimum", identity=None,
                reduce=_reducer("minimum", reductions.min, False),
                accumulate=_lax_accumulator("minimum", lax.cummin),
                at=_index_at("minimum", "min"))
logical_and = ufunc(ufuncs.logical_and, 2, 1, name="logical_and", identity=True,
                    reduce=_reducer("logical_and", reductions.all, False, pass_initial=False))
logical_or = ufunc(ufuncs.logical_or, 2, 1, name="logical_or", identity=False,
                   reduce=_reducer("logical_or", reductions.any, False, pass_initial=False))
logical_xor = ufunc(ufuncs.logical_xor, 2, 1, name="logical_xor", identity=False)
subtract = ufunc(ufuncs.subtract, 2, 1, name="subtract", identity=None)
bitwise_and = ufunc(ufuncs.bitwise_and, 2, 1, name="bitwise_and", identity=-1)
bitwise_or = ufunc(ufuncs.bitwise_or, 2, 1, name="bitwise_or", identity=0)
bitwise_xor = ufunc(ufuncs.bitwise_xor, 2, 1, name="bitwise_xor", identity=0)
logaddexp = ufunc(ufuncs.logaddexp, 2, 1, name="logaddexp", identity=-np.inf)
logaddexp2 = ufunc(ufuncs.logaddexp2, 2, 1, name="logaddexp2", identity=-np.inf)
negative = ufunc(ufuncs.negative, 1, 1, name="negative", identity=None)
