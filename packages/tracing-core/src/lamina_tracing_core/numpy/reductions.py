"""Reductions with NumPy's ``axis``/``keepdims``/``where``/``dtype``/``initial``
arguments: ``sum``, ``prod``, ``max``, ``min``, ``all``, ``any``, ``mean``,
``var``, ``std``, ``argmax``, ``argmin``, ``cumsum``, ``cumprod``, the
``nan*`` variants, ``median``, ``quantile``, ``percentile``, ``average``,
``ptp``, ``count_nonzero``, ``cov`` and ``corrcoef``.

As in JAX: sums and products of small integers and bools accumulate in the
default int (``promote_integers``), float16/bfloat16 accumulate in float32,
results are strongly typed, and ``max``/``min`` need ``initial`` to use a
``where`` mask (they have no identity).
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.out_sharding import takes_out_sharding

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.products import diagonal, matmul
from lamina_tracing_core.numpy.shape_ops import matrix_transpose

Axis = int | tuple[int, ...] | None

_SMALL_FLOATS = frozenset({dtypes.float16, dtypes.bfloat16})


def _upcast_small_float(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtypes.float32 if dtype in _SMALL_FLOATS else dtype


def _promoted_int(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """Bools and ints narrower than the default accumulate in the default
    (signed or unsigned) int, as NumPy's sum does."""
    if dtypes.is_boolean(dtype):
        return dtypes.default_int_dtype()
    if dtypes.issubdtype(dtype, np.unsignedinteger):
        default = dtypes.default_uint_dtype()
        return default if dtype.itemsize < default.itemsize else dtype
    if dtypes.issubdtype(dtype, np.signedinteger):
        default = dtypes.default_int_dtype()
        return default if dtype.itemsize < default.itemsize else dtype
    return dtype


def _keep(x: Any, axes: tuple[int, ...], ndim: int, keepdims: bool) -> Any:
    """The reduced ``x`` with the reduced axes put back as size 1 if asked."""
    if not keepdims or not axes:
        return x
    return lax.expand_dims(x, axes) if ndim else x


def _masked(fun: str, x: Any, where: Any, fill: Any) -> Any:
    """``x`` with ``fill`` where the mask is False (the reduction's identity)."""
    if where is None:
        return x
    mask = _util.operand(fun, where, "where")
    if not dtypes.is_boolean(get_aval(mask).dtype):
        mask = lax.ne(mask, lax.full_like(mask, 0))
    shape = _util.shape_of(x)
    mask = _util.broadcast_to(fun, mask, _util.broadcast_shapes(fun, _util.shape_of(mask), shape))
    if _util.shape_of(mask) != shape:
        raise ValueError(f"lamina.numpy.{fun}: the where mask of shape {_util.shape_of(mask)} "
                         f"does not broadcast to the array's shape {shape}")
    return lax.select(mask, x, lax.full_like(x, fill))


def _reduction(fun: str, a: Any, axis: Axis, dtype: Any, out: Any, keepdims: bool,
               initial: Any, where: Any, *, reducer: Callable[[Any, tuple[int, ...]], Any],
               combine: Callable[[Any, Any], Any], identity: Any | None,
               result_dtype: Callable[[np.dtype[Any]], np.dtype[Any]],
               upcast_small_floats: bool) -> Array:
    """The shared body of the monoid reductions (sum, prod, max, min, all, any)."""
    _util.check_out(fun, out)
    x = _util.operand(fun, a, "a")
    aval = get_aval(x)
    axes = _util.canonicalize_axes(fun, axis, aval.ndim)
    wanted = _util.user_dtype(fun, dtype) or result_dtype(aval.dtype)
    compute = _upcast_small_float(wanted) if upcast_small_floats else wanted
    x = _util.convert(x, compute)
    if identity is None and initial is None:
        if where is not None:
            raise ValueError(f"reduction operation {fun} does not have an identity, so to use "
                             "a where mask one has to specify 'initial'")
        if builtins.any(aval.shape[i] == 0 for i in axes):
            raise ValueError(f"zero-size array to reduction operation {fun} which has no "
                             "identity")
    if where is not None:
        fill = identity if identity is not None else _util.concrete(fun, initial, "initial")
        x = _masked(fun, x, where, _util.convert(fill, compute))
    result = reducer(x, axes)
    if initial is not None:
        init = _util.convert(_util.operand(fun, initial, "initial"), compute)
        if _util.ndim_of(init):
            raise ValueError(f"lamina.numpy.{fun}: initial must be a scalar, got shape "
                             f"{_util.shape_of(init)}")
        result = combine(result, init)
    result = _keep(result, axes, aval.ndim, keepdims)
    return _util.convert(result, wanted)


def _sum_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return _promoted_int(dtype)


def _same_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype


def _bool_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtypes.bool_


def _bool_aware(op_bool: Callable[..., Any], op: Callable[..., Any]) -> Callable[..., Any]:
    def reducer(x: Any, axes: tuple[int, ...]) -> Any:
        return (op_bool if dtypes.is_boolean(get_aval(x).dtype) else op)(x, axes)
    return reducer


def _bool_aware_combine(op_bool: Callable[..., Any], op: Callable[..., Any]
                        ) -> Callable[[Any, Any], Any]:
    def combine(x: Any, y: Any) -> Any:
        return (op_bool if dtypes.is_boolean(get_aval(x).dtype) else op)(x, y)
    return combine


def sum(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,  # noqa: A001
        keepdims: bool = False, initial: ArrayLike | None = None,
        where: ArrayLike | None = None, promote_integers: bool = True) -> Array:
    """The sum over ``axis`` (all axes by default)."""
    return _reduction("sum", a, axis, dtype, out, keepdims, initial, where,
                      reducer=_bool_aware(lax.reduce_or, lax.reduce_sum),
                      combine=_bool_aware_combine(lax.bitwise_or, lax.add), identity=0,
                      result_dtype=_sum_dtype if promote_integers else _same_dtype,
                      upcast_small_floats=True)


def prod(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
         keepdims: bool = False, initial: ArrayLike | None = None,
         where: ArrayLike | None = None, promote_integers: bool = True) -> Array:
    """The product over ``axis``."""
    return _reduction("prod", a, axis, dtype, out, keepdims, initial, where,
                      reducer=_bool_aware(lax.reduce_and, lax.reduce_prod),
                      combine=_bool_aware_combine(lax.bitwise_and, lax.mul), identity=1,
                      result_dtype=_sum_dtype if promote_integers else _same_dtype,
                      upcast_small_floats=True)


def max(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The maximum over ``axis`` (NaN if any element is NaN)."""
    return _reduction("max", a, axis, None, out, keepdims, initial, where,
                      reducer=_bool_aware(lax.reduce_or, lax.reduce_max),
                      combine=_bool_aware_combine(lax.bitwise_or, lax.max), identity=None,
                      result_dtype=_same_dtype, upcast_small_floats=False)


def min(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,  # noqa: A001
        initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """The minimum over ``axis`` (NaN if any element is NaN)."""
    return _reduction("min", a, axis, None, out, keepdims, initial, where,
                      reducer=_bool_aware(lax.reduce_and, lax.reduce_min),
                      combine=_bool_aware_combine(lax.bitwise_and, lax.min), identity=None,
                      result_dtype=_same_dtype, upcast_small_floats=False)


amax = max
amin = min


def _truth(fun: str, a: Any) -> Any:
    x = _util.operand(fun, a, "a")
    return x if dtypes.is_boolean(get_aval(x).dtype) else lax.ne(x, lax.full_like(x, 0))


def all(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,  # noqa: A001
        *, where: ArrayLike | None = None) -> Array:
    """True if every element over ``axis`` is non-zero."""
    return _reduction("all", _truth("all", a), axis, None, out, keepdims, None, where,
                      reducer=lax.reduce_and, combine=lax.bitwise_and, identity=True,
                      result_dtype=_bool_dtype, upcast_small_floats=False)


def any(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,  # noqa: A001
        *, where: ArrayLike | None = None) -> Array:
    """True if any element over ``axis`` is non-zero."""
    return _reduction("any", _truth("any", a), axis, None, out, keepdims, None, where,
                      reducer=lax.reduce_or, combine=lax.bitwise_or, identity=False,
                      result_dtype=_bool_dtype, upcast_small_floats=False)


def count_nonzero(a: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """The number of non-zero elements over ``axis`` (default int dtype)."""
    return sum(_truth("count_nonzero", a), axis=axis, keepdims=keepdims,
               dtype=dtypes.default_int_dtype())


# --- statistics ---------------------------------------------------------------------------
def _count(fun: str, x: Any, axis: Axis, where: Any, dtype: np.dtype[Any],
           keepdims: bool) -> Any:
    """How many elements each reduction over ``axis`` sees, as ``dtype``."""
    shape = _util.shape_of(x)
    axes = _util.canonicalize_axes(fun, axis, len(shape))
    if where is None:
        return np.asarray(math.prod(shape[i] for i in axes), dtype)
    mask = _util.broadcast_to(fun, _truth(fun, where), shape)
    return sum(mask, axis=axes, dtype=dtype, keepdims=keepdims)


def _static_axis(fun: str, x: Any, axis: Axis) -> Axis:
    """``axis`` checked against ``x`` and made hashable: a static argument of
    the program a reduction compiles to when called eagerly."""
    if axis is None:
        return None
    return _util.canonicalize_axes(fun, axis, len(_util.shape_of(x)))


def mean(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
         keepdims: bool = False, *, where: ArrayLike | None = None) -> Array:
    """The arithmetic mean over ``axis`` (integers average as floats). Called
    eagerly it runs as one compiled program, as JAX's (XLA then divides by the
    count as JAX users see it)."""
    _util.check_out("mean", out)
    x = _util.operand("mean", a, "a")
    return _mean_compiled(x, _static_axis("mean", x, axis), _util.user_dtype("mean", dtype),
                          bool(keepdims), where)


def _mean(x: Any, axis: Axis, dtype: Any, keepdims: bool, where: Any) -> Array:
    wanted = dtype or dtypes.to_inexact_dtype(get_aval(x).dtype)
    compute = _upcast_small_float(wanted)
    total = sum(x, axis=axis, dtype=compute, keepdims=keepdims, where=where)
    count = _count("mean", x, axis, where, compute, keepdims)
    return _util.convert(lax.div(total, count), wanted)


_mean_compiled = tc_api.compiled_when_eager(_mean, static_argnums=(1, 2, 3))


def _var_dtypes(fun: str, x: Any, dtype: Any) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """``(computation dtype, result dtype)``; complex input has a real variance."""
    given = _util.user_dtype(fun, dtype)
    a_dtype = get_aval(x).dtype
    if given is None:
        result = dtypes.to_inexact_dtype(a_dtype)
        if dtypes.is_complex(result):
            result = lax.common.real_dtype(result)
        compute = _upcast_small_float(dtypes.to_inexact_dtype(a_dtype))
    elif not dtypes.is_inexact(given):
        # as JAX: an integer dtype computes in integers (a truncated mean and quotient)
        compute = result = given
    else:
        result = given
        compute = _upcast_small_float(dtypes.promote_types(dtypes.to_inexact_dtype(a_dtype),
                                                           given))
    return compute, result


def var(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: int | float | None = None) -> Array:
    """The variance over ``axis``: ``sum(|x - mean|**2) / (N - ddof)``; called
    eagerly, one compiled program (``ddof`` one of its operands), as JAX's.
    ``mean``, when given, is used instead of computing it: a scalar or an
    array of ``a``'s rank that broadcasts to it (``keepdims=True``'s shape)."""
    _util.check_out("var", out)
    if correction is not None:
        ddof = correction  # type: ignore[assignment]
    x = _util.operand("var", a, "a")
    compute, result = _var_dtypes("var", x, dtype)
    given = None if mean is None else _given_mean("var", mean, x)
    return _var_compiled(x, _static_axis("var", x, axis), compute, result, bool(keepdims),
                         where, _util.operand("var", ddof, "ddof"), given)


def _given_mean(fun: str, mean: Any, x: Any) -> Any:
    """A user's ``mean`` for ``var``/``std`` as an operand: JAX's TypeError
    (from its subtraction) when it is neither a scalar nor of ``x``'s rank."""
    m = _util.operand(fun, mean, "mean")
    ranks = {_util.ndim_of(m), _util.ndim_of(x)}
    if len(ranks) > 1 and 0 not in ranks:
        raise TypeError(f"sub: arrays must have the same number of dimensions, got {ranks} "
                        f"(the mean of {_util.qualified(fun)})")
    return m


def _var(x: Any, axis: Axis, compute: Any, result: Any, keepdims: bool, where: Any,
         ddof: Any, given_mean: Any = None) -> Array:
    x = _util.convert(x, compute)
    if given_mean is None:
        center = mean(x, axis=axis, dtype=compute, keepdims=True, where=where)
    else:
        center = _util.broadcast_to("var", _util.convert(given_mean, compute),
                                    _util.shape_of(x))
    centered = lax.sub(x, center)
    if dtypes.is_complex(compute):
        squares = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        squares = lax.square(centered)
    part = get_aval(squares).dtype
    total = sum(squares, axis=axis, dtype=part, keepdims=keepdims, where=where)
    count = _count("var", x, axis, where, part, keepdims)
    count = lax.sub(count, _util.convert(ddof, part))
    out = _util.convert(lax.div(total, count), result)
    if not dtypes.is_inexact(result):
        # JAX's NaN for "no degrees of freedom" makes an integer variance a weak float
        out = _util.convert(out, dtypes.default_float_dtype(), weak_type=True)
    # No degrees of freedom left (ddof >= N): NaN, as JAX's.
    positive = lax.gt(count, lax.full_like(count, 0))
    return lax.select(lax.broadcast_in_dim(positive, _util.shape_of(out), ()) if
                      _util.ndim_of(positive) == 0 else positive, out, lax.full_like(out, np.nan))


_var_compiled = tc_api.compiled_when_eager(_var, static_argnums=(1, 2, 3, 4))


def std(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
        ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
        mean: ArrayLike | None = None, correction: int | float | None = None) -> Array:
    """The standard deviation: ``sqrt(var(...))`` (``mean`` as ``var``'s)."""
    _util.check_out("std", out)
    given = _util.user_dtype("std", dtype)
    if given is not None and not dtypes.is_inexact(given):
        raise ValueError(f"lamina.numpy.std: the dtype argument must be inexact; got {given}")
    if mean is not None:
        _given_mean("std", mean, _util.operand("std", a, "a"))
    v = var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where, mean=mean,
            correction=correction)
    return lax.sqrt(v)


def average(a: ArrayLike, axis: Axis = None, weights: ArrayLike | None = None,
            returned: bool = False, keepdims: bool = False) -> Any:
    """The (weighted) average over ``axis``; with ``returned`` also the sum of
    weights. Eagerly, one compiled program, as JAX's."""
    if weights is None:
        x = _util.operand("average", a, "a")
        avg = mean(x, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        count = _count("average", x, axis, None, get_aval(avg).dtype, keepdims)
        return avg, lax.full_like(avg, count)
    x, w = _util.promote_dtypes_inexact("average", a, weights)
    x_shape, w_shape = _util.shape_of(x), _util.shape_of(w)
    if x_shape != w_shape:
        if axis is None or not isinstance(axis, (int, np.integer)) or len(w_shape) != 1:
            raise ValueError("lamina.numpy.average: weights of a different shape than a must "
                             "be 1-D and given with an integer axis")
        ax = _util.canonicalize_axis("average", axis, len(x_shape))
        if w_shape[0] != x_shape[ax]:
            raise ValueError(f"lamina.numpy.average: the length of weights ({w_shape[0]}) "
                             f"differs from a.shape[{ax}] ({x_shape[ax]})")
        # Summed as given (not broadcast first), as JAX does: other bits otherwise.
        w = lax.reshape(w, tuple(w_shape[0] if i == ax else 1 for i in range(len(x_shape))))
    static_axis = axis if axis is None or isinstance(axis, (int, np.integer)) else tuple(axis)
    return _weighted_average_compiled(x, w, static_axis, bool(returned), bool(keepdims))


def _weighted_average(x: Any, w: Any, axis: Axis, returned: bool, keepdims: bool) -> Any:
    x_shape = _util.shape_of(x)
    weight_sum = sum(w, axis=axis, keepdims=keepdims)
    total = sum(lax.mul(x, _util.broadcast_to("average", w, x_shape)), axis=axis,
                keepdims=keepdims)
    weight_sum = _util.broadcast_to("average", weight_sum, _util.shape_of(total))
    avg = lax.div(total, weight_sum)
    return (avg, weight_sum) if returned else avg


_weighted_average_compiled = tc_api.compiled_when_eager(_weighted_average,
                                                        static_argnums=(2, 3, 4))


def ptp(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False) -> Array:
    """The range ``max - min`` over ``axis``."""
    _util.check_out("ptp", out)
    return lax.sub(max(a, axis=axis, keepdims=keepdims), min(a, axis=axis, keepdims=keepdims))


# --- arg reductions -------------------------------------------------------------------------
def _arg_reduction(fun: str, op: Callable[..., Any], a: Any, axis: int | None, out: Any,
                   keepdims: bool | None) -> Array:
    _util.check_out(fun, out)
    x = _util.operand(fun, a, "a")
    shape = _util.shape_of(x)
    if axis is None:
        if 0 in shape:
            raise ValueError(f"attempt to get {fun} of an empty sequence")
        flat = lax.reshape(x, (math.prod(shape),))
        result = op(flat, 0, dtypes.default_int_dtype())
        return lax.reshape(result, (1,) * len(shape)) if keepdims else result
    ax = _util.canonicalize_axis(fun, axis, len(shape))
    if shape[ax] == 0:
        raise ValueError(f"attempt to get {fun} of an empty sequence")
    result = op(x, ax, dtypes.default_int_dtype())
    return lax.expand_dims(result, (ax,)) if keepdims else result


def argmax(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """The index of the first maximum along ``axis`` (of the flat array if None)."""
    return _arg_reduction("argmax", lax.argmax, a, axis, out, keepdims)


def argmin(a: ArrayLike, axis: int | None = None, out: None = None,
           keepdims: bool | None = None) -> Array:
    """The index of the first minimum along ``axis`` (of the flat array if None)."""
    return _arg_reduction("argmin", lax.argmin, a, axis, out, keepdims)


# --- cumulative ---------------------------------------------------------------------------------
def _cumulative(fun: str, op: Callable[..., Any], a: Any, axis: int | None, dtype: Any,
                out: Any) -> Array:
    _util.check_out(fun, out)
    x = _util.operand(fun, a, "a")
    if axis is None:
        x = lax.reshape(x, (math.prod(_util.shape_of(x)),))
        axis = 0
    ax = _util.canonicalize_axis(fun, axis, _util.ndim_of(x))
    a_dtype = get_aval(x).dtype
    wanted = _util.user_dtype(fun, dtype) or (
        dtypes.default_int_dtype() if dtypes.is_boolean(a_dtype) else a_dtype)
    x = _util.convert(x, wanted)
    return op(x, axis=ax)


def cumsum(a: ArrayLike, axis: int | None = None, dtype: Any = None, out: None = None) -> Array:
    """Cumulative sums along ``axis`` (of the flat array if None)."""
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, out)


def cumprod(a: ArrayLike, axis: int | None = None, dtype: Any = None,
            out: None = None) -> Array:
    """Cumulative products along ``axis`` (of the flat array if None)."""
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, out)


def _array_api_cumulative(fun: str, op: Callable[..., Any], initial: int, x: ArrayLike,
                          axis: int | None, dtype: Any, include_initial: bool) -> Array:
    """The array API's cumulative reductions: ``x`` must have an axis, and
    ``axis`` may be left out only for 1-D input (JAX's errors);
    ``include_initial`` prepends the identity."""
    v = _util.operand(fun, x, "x")
    nd = _util.ndim_of(v)
    if nd == 0:
        raise ValueError(f"lamina.numpy.{fun}: the input must be non-scalar to take a "
                         "cumulative reduction, however a scalar value or scalar array was given")
    if axis is None:
        if nd > 1:
            raise ValueError(f"lamina.numpy.{fun}: the input array has rank {nd}, however axis "
                             "was not set to an explicit value; it is only optional for "
                             "one-dimensional arrays")
        axis = 0
    ax = _util.canonicalize_axis(fun, axis, nd)
    out = _cumulative(fun, op, v, ax, _widened_int_dtype(v) if dtype is None else dtype, None)
    if not include_initial:
        return out
    edge = list(_util.shape_of(out))
    edge[ax] = 1
    return lax.concatenate([lax.full(tuple(edge), initial, get_aval(out).dtype), out], ax)


def _widened_int_dtype(x: Any) -> Any:
    """As JAX's array-API cumulative reductions: bools and integers narrower
    than the default integer accumulate in it (unsigned ones in the default
    unsigned integer); other dtypes are kept (None)."""
    dt = get_aval(x).dtype
    wide = dtypes.default_int_dtype()
    if dtypes.is_boolean(dt) or (dt in dtypes.SIGNED and dt.itemsize < wide.itemsize):
        return wide
    if dt in dtypes.UNSIGNED and dt.itemsize < wide.itemsize:
        return np.dtype(f"uint{wide.itemsize * 8}")
    return None


def cumulative_sum(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Array:
    """The array API's cumulative sum along ``axis`` (optional for 1-D ``x``)."""
    return _array_api_cumulative("cumulative_sum", lax.cumsum, 0, x, axis, dtype,
                                 include_initial)


def cumulative_prod(x: ArrayLike, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Array:
    """The array API's cumulative product along ``axis`` (optional for 1-D ``x``)."""
    return _array_api_cumulative("cumulative_prod", lax.cumprod, 1, x, axis, dtype,
                                 include_initial)


# --- NaN-ignoring variants ----------------------------------------------------------------------
def _nan_replaced(fun: str, a: Any, fill: Any) -> Any:
    x = _util.operand(fun, a, "a")
    if not dtypes.is_inexact(get_aval(x).dtype):
        return x
    return lax.select(lax.ne(x, x), lax.full_like(x, fill), x)


def nansum(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
           keepdims: bool = False, initial: ArrayLike | None = None,
           where: ArrayLike | None = None) -> Array:
    """``sum`` treating NaNs as zero."""
    return sum(_nan_replaced("nansum", a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, initial: ArrayLike | None = None,
            where: ArrayLike | None = None) -> Array:
    """``prod`` treating NaNs as one."""
    return prod(_nan_replaced("nanprod", a, 1), axis, dtype, out, keepdims, initial, where)


def _not_nan(fun: str, a: Any) -> Any:
    x = _util.operand(fun, a, "a")
    if not dtypes.is_inexact(get_aval(x).dtype):
        return lax.full_like(x, True, dtypes.bool_)
    return lax.eq(x, x)


def _nan_extremum(fun: str, reduce: Callable[..., Any], fill: float, a: Any, axis: Axis,
                  out: Any, keepdims: bool, initial: Any, where: Any) -> Array:
    x = _util.operand(fun, a, "a")
    if not dtypes.is_inexact(get_aval(x).dtype):
        return reduce(x, axis, out, keepdims, initial, where)
    result = reduce(_nan_replaced(fun, x, fill), axis, out, keepdims, initial, where)
    all_nan = all(lax.ne(x, x), axis=axis, keepdims=keepdims)
    return lax.select(all_nan, lax.full_like(result, np.nan), result)


def nanmax(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``max`` ignoring NaNs (NaN where all are NaN)."""
    return _nan_extremum("nanmax", max, -np.inf, a, axis, out, keepdims, initial, where)


def nanmin(a: ArrayLike, axis: Axis = None, out: None = None, keepdims: bool = False,
           initial: ArrayLike | None = None, where: ArrayLike | None = None) -> Array:
    """``min`` ignoring NaNs (NaN where all are NaN)."""
    return _nan_extremum("nanmin", min, np.inf, a, axis, out, keepdims, initial, where)


def nanmean(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
            keepdims: bool = False, *, where: ArrayLike | None = None) -> Array:
    """``mean`` of the non-NaN elements."""
    _util.check_out("nanmean", out)
    x = _util.operand("nanmean", a, "a")
    wanted = _util.user_dtype("nanmean", dtype) or dtypes.to_inexact_dtype(get_aval(x).dtype)
    compute = _upcast_small_float(wanted)
    valid = _not_nan("nanmean", x)
    if where is not None:
        valid = lax.bitwise_and(valid, _util.broadcast_to("nanmean", _truth("nanmean", where),
                                                          _util.shape_of(x)))
    total = nansum(x, axis=axis, dtype=compute, keepdims=keepdims, where=valid)
    count = sum(valid, axis=axis, dtype=compute, keepdims=keepdims)
    return _util.convert(lax.div(total, count), wanted)


def nanvar(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
           mean: ArrayLike | None = None) -> Array:
    """``var`` of the non-NaN elements (NaN where no more than ``ddof`` are
    left); ``mean``, if given, is their mean with the reduced axes kept.
    Eagerly, one compiled program, as JAX's."""
    _util.check_out("nanvar", out)
    x = _util.operand("nanvar", a, "a")
    compute, result = _var_dtypes("nanvar", x, dtype)
    return _nanvar_compiled(x, _static_axis("nanvar", x, axis), compute, result, bool(keepdims),
                            None if where is None else _truth("nanvar", where),
                            _util.operand("nanvar", ddof, "ddof"),
                            None if mean is None else _util.operand("nanvar", mean, "mean"))


def _nanvar(x: Any, axis: Axis, compute: Any, result: Any, keepdims: bool, where: Any,
            ddof: Any, mean: Any) -> Array:
    # JAX's order of operations: the count of non-NaN elements stays an
    # integer until the final division.
    x = _util.convert(x, compute)
    if mean is None:
        mean = nanmean(x, axis=axis, dtype=compute, keepdims=True, where=where)
    else:
        mean = _util.convert(mean, compute)
    is_nan = lax.ne(x, x)
    diff = lax.sub(x, _util.broadcast_to("nanvar", mean, _util.shape_of(x)))
    centered = lax.select(is_nan, lax.full_like(diff, 0), diff)
    if dtypes.is_complex(compute):
        squares = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        squares = lax.square(centered)
    count = sum(lax.bitwise_not(is_nan), axis=axis, keepdims=keepdims, where=where)
    count = lax.sub(count, _util.convert(ddof, get_aval(count).dtype))
    empty = lax.le(count, lax.full_like(count, 0))
    total = sum(squares, axis=axis, keepdims=keepdims, where=where)
    total = lax.select(empty, lax.full_like(total, np.nan), total)
    divisor = lax.select(empty, lax.full_like(count, 1), count)
    return _util.convert(lax.div(total, _util.convert(divisor, get_aval(total).dtype)), result)


_nanvar_compiled = tc_api.compiled_when_eager(_nanvar, static_argnums=(1, 2, 3, 4))


def nanstd(a: ArrayLike, axis: Axis = None, dtype: Any = None, out: None = None,
           ddof: int = 0, keepdims: bool = False, *, where: ArrayLike | None = None,
           mean: ArrayLike | None = None) -> Array:
    """``std`` of the non-NaN elements: ``sqrt(nanvar(...))``."""
    return lax.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean))


# --- order statistics ---------------------------------------------------------------------------
def _moved_last(fun: str, a: Any, axis: Axis) -> tuple[Any, tuple[int, ...]]:
    """``a`` with the reduced axes flattened into one last axis, and those axes."""
    x = _util.operand(fun, a, "a")
    shape = _util.shape_of(x)
    axes = _util.canonicalize_axes(fun, axis, len(shape))
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    x = lax.transpose(x, kept + axes)
    flat_shape = tuple(shape[i] for i in kept) + (math.prod(shape[i] for i in axes),)
    return lax.reshape(x, flat_shape), axes


def quantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: None = None,
             overwrite_input: bool = False, method: str = "linear",
             keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """The ``q``-th quantiles (``0 <= q <= 1``) over ``axis``; NaN if any element
    is NaN. Methods: linear, lower, higher, nearest, midpoint, inverted_cdf
    (the only one taking ``weights``, one per element or per reduced position)."""
    _util.check_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, weights=weights)


@takes_out_sharding("jnp.percentile")
def percentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: None = None,
               overwrite_input: bool = False, method: str = "linear",
               keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """The ``q``-th percentiles (``0 <= q <= 100``) over ``axis`` (``weights``
    as :func:`quantile`'s); ``out_sharding`` lays out the result, computed
    with the mesh's Explicit axes made Auto, as JAX's."""
    _util.check_out("percentile", out)
    return _quantile("percentile", a, q, axis, method, keepdims, percent=True, weights=weights)


_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf")


def _scalar_as_vector(x: Any, axis: Axis) -> Any:
    """A 0-d ``x`` reduced over every axis as a 1-d array of one element, as
    JAX's quantiles and medians (``keepdims`` then keeps shape ``(1,)``)."""
    return lax.reshape(x, (1,)) if _util.ndim_of(x) == 0 and axis is None else x


def _quantile(fun: str, a: Any, q: Any, axis: Axis, method: str, keepdims: bool,
              skip_nans: bool = False, percent: bool = False, weights: Any = None) -> Array:
    """Checks the arguments, then runs :func:`_quantile_of` (one compiled
    program when called eagerly, as JAX's)."""
    if method not in _METHODS:
        raise ValueError("method can only be 'linear', 'lower', 'higher', 'midpoint', "
                         f"'nearest' or 'inverted_cdf' (lamina.numpy.{fun} got {method!r})")
    if weights is None:
        (x,) = _util.promote_dtypes_inexact(fun, a)
        w = None
    else:
        x, w = _promoted_with_weights(fun, a, weights, method)
    x = _util.strip_weak(x)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError(f"lamina.numpy.{fun} does not support complex input, as the "
                         "operation is poorly defined")
    (qs,) = _util.promote_dtypes_inexact(fun, _util.operand(fun, q, "q"))
    x = _scalar_as_vector(x, axis)
    axes = _util.canonicalize_axes(fun, axis, _util.ndim_of(x))
    if math.prod(_util.shape_of(x)[i] for i in axes) == 0:
        raise ValueError(f"lamina.numpy.{fun} of an empty array")
    if w is not None:
        w = _weights_like(fun, w, x, axis, axes)
    return _quantile_compiled(x, qs, axes, method, bool(keepdims), skip_nans, percent, w)


def _promoted_with_weights(fun: str, a: Any, weights: Any, method: str) -> tuple[Any, Any]:
    """``a`` and ``weights`` promoted together (JAX's checks and messages)."""
    w = _util.operand(fun, weights, "weights")
    if dtypes.is_complex(get_aval(w).dtype):
        raise ValueError(f"Weights cannot be complex types. (lamina.numpy.{fun})")
    if method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights. Only method "
                                  f"'inverted_cdf' supports weights. (lamina.numpy.{fun})")
    x, w = _util.promote_dtypes_inexact(fun, a, w)
    return x, _util.strip_weak(w)


def _weights_like(fun: str, w: Any, x: Any, axis: Axis, axes: tuple[int, ...]) -> Any:
    """Weights of ``x``'s shape: given so, or one per reduced position."""
    shape, w_shape = _util.shape_of(x), _util.shape_of(w)
    if w_shape == shape:
        return w
    if axis is None:
        raise ValueError(f"Weights shape must match 'a' shape when axis is None. "
                         f"(lamina.numpy.{fun}: weights of shape {w_shape}, a of {shape})")
    reduced = tuple(shape[i] for i in axes)
    if w_shape != reduced:
        raise ValueError(f"Weights shape {w_shape} must match reduction axes {reduced} "
                         f"(lamina.numpy.{fun})")
    return lax.broadcast_in_dim(w, shape, axes)


def _quantile_of(x: Any, qs: Any, axes: tuple[int, ...], method: str, keepdims: bool,
                 skip_nans: bool, percent: bool, weights: Any = None) -> Array:
    """JAX's arithmetic: positions ``q * (count - 1)`` and the interpolation
    ``low * (1 - w) + high * w`` in the dtype of ``q``, the result converted
    to the dtype of ``x`` (``inverted_cdf``: the first value whose cumulative
    weight reaches ``q`` of the total)."""
    qdt = get_aval(qs).dtype
    if percent:
        qs = lax.div(qs, _util.convert(100, qdt))
    shape = _util.shape_of(x)
    if skip_nans:
        # every NaN positive, so that all sort last
        x = lax.select(lax.ne(x, x), lax.full_like(x, np.nan), x)
    flat, _ = _moved_last("quantile", x, axes)
    n = _util.shape_of(flat)[-1]
    batch = _util.shape_of(flat)[:-1]
    q_shape = _util.shape_of(qs)
    q_flat = lax.reshape(qs, (math.prod(q_shape),))
    out_shape = batch + _util.shape_of(q_flat)
    q_b = lax.broadcast_in_dim(q_flat, out_shape, (len(batch),))
    if method == "inverted_cdf":
        w = lax.full_like(flat, 1) if weights is None else _moved_last("quantile", weights, axes)[0]
        result = _inverted_cdf(flat, w, q_b, skip_nans)
        return _quantiles_laid_out(result, shape, batch, q_shape, axes, keepdims)
    ordered = lax.sort(flat, dimension=-1)
    one = _util.convert(1, qdt)
    if skip_nans:
        # NaNs sort last: each slice interpolates over its own non-NaN count.
        valid = sum(lax.eq(flat, flat), axis=-1, dtype=qdt)
        last = lax.broadcast_in_dim(lax.sub(valid, one), out_shape, tuple(range(len(batch))))
    else:
        last = lax.full(out_shape, n - 1, qdt)
    pos = lax.mul(q_b, last)
    lo, hi = lax.floor(pos), lax.ceil(pos)
    high_weight = lax.sub(pos, lo)
    low_weight = lax.sub(lax.full_like(high_weight, 1), high_weight)
    zero = lax.full(out_shape, 0, qdt)
    lo = lax.max(zero, lax.min(lo, last))
    hi = lax.max(zero, lax.min(hi, last))
    ints = dtypes.default_int_dtype()

    def at(index: Any) -> Any:
        return lax.take_along_axis(ordered, lax.convert_element_type(index, ints), len(batch))

    low, high = at(lo), at(hi)
    if method == "linear":
        result = lax.add(lax.mul(_util.convert(low, qdt), low_weight),
                         lax.mul(_util.convert(high, qdt), high_weight))
    elif method == "lower":
        result = low
    elif method == "higher":
        result = high
    elif method == "midpoint":
        result = lax.mul(lax.add(low, high), _util.convert(0.5, get_aval(low).dtype))
    else:
        # As JAX: the lower neighbour up to a weight of one half (NumPy rounds to even).
        result = lax.select(lax.le(high_weight, lax.full_like(high_weight, 0.5)), low, high)
    result = _util.convert(result, get_aval(ordered).dtype)
    if skip_nans:
        has_nan = all(lax.ne(flat, flat), axis=-1, keepdims=True)
    else:
        has_nan = any(lax.ne(flat, flat), axis=-1, keepdims=True)
    result = lax.select(lax.broadcast_in_dim(has_nan, _util.shape_of(result),
                                             tuple(range(len(batch) + 1))),
                        lax.full_like(result, np.nan), result)
    return _quantiles_laid_out(result, shape, batch, q_shape, axes, keepdims)


def _quantiles_laid_out(result: Any, shape: tuple[int, ...], batch: tuple[int, ...],
                        q_shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    """(batch..., q) -> (q..., batch...), with the reduced axes kept if asked."""
    result = lax.reshape(result, batch + q_shape)
    nb = len(batch)
    result = lax.transpose(result, tuple(range(nb, nb + len(q_shape))) + tuple(range(nb)))
    if keepdims:
        kept_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
        result = lax.reshape(result, q_shape + kept_shape)
    return result


def _inverted_cdf(flat: Any, w: Any, q_b: Any, skip_nans: bool) -> Any:
    """Per slice of ``flat`` (batch..., n) with weights ``w``: for each ``q``
    (``q_b``: batch..., Q) the smallest value whose cumulative weight is not
    below ``q`` times the total, in JAX's steps; NaN for a slice with a
    negative or NaN weight, or (unless ``skip_nans``) a NaN, or only NaNs."""
    if not skip_nans:  # a NaN makes its whole slice NaN, as JAX's sort-based path
        nan_slice = any(lax.ne(flat, flat), axis=-1, keepdims=True)
        flat = lax.select(lax.broadcast_in_dim(nan_slice, _util.shape_of(flat),
                                               tuple(range(_util.ndim_of(flat)))),
                          lax.full_like(flat, np.nan), flat)
    ordered, w = lax.sort((flat, w), dimension=-1, num_keys=1)
    zero = lax.full_like(w, 0)
    bad = lax.bitwise_or(lax.lt(w, zero), lax.ne(w, w))
    nan_data = lax.ne(ordered, ordered)
    cum = lax.cumsum(lax.select(lax.bitwise_or(bad, nan_data), zero, w), axis=_util.ndim_of(w) - 1)
    nb = _util.ndim_of(cum) - 1
    total = lax.slice_in_dim(cum, _util.shape_of(cum)[-1] - 1, None, axis=nb)  # (batch..., 1)
    qdt = get_aval(q_b).dtype
    target = lax.mul(q_b, _util.convert(total, qdt))  # (batch..., Q)
    below = lax.lt(lax.broadcast_in_dim(_util.convert(cum, qdt), _util.shape_of(target)[:-1]
                                        + _util.shape_of(target)[-1:] + _util.shape_of(cum)[-1:],
                                        tuple(range(nb)) + (nb + 1,)),
                   lax.broadcast_in_dim(target, _util.shape_of(target) + _util.shape_of(cum)[-1:],
                                        tuple(range(nb + 1))))
    ints = dtypes.default_int_dtype()
    idx = sum(lax.convert_element_type(below, ints), axis=-1)  # (batch..., Q)
    n = _util.shape_of(ordered)[-1]
    if skip_nans:
        valid = sum(lax.bitwise_not(nan_data), axis=-1, keepdims=True, dtype=ints)
    else:
        valid = lax.full(_util.shape_of(total), n, ints)
    limit = lax.broadcast_in_dim(lax.sub(valid, lax.full_like(valid, 1)), _util.shape_of(idx),
                                 tuple(range(nb + 1)))
    idx = lax.max(lax.full_like(idx, 0), lax.min(idx, limit))
    result = lax.take_along_axis(ordered, idx, nb)
    force_nan = any(bad, axis=-1, keepdims=True)
    if skip_nans:
        force_nan = lax.bitwise_or(force_nan, lax.eq(valid, lax.full_like(valid, 0)))
    else:
        force_nan = lax.bitwise_or(force_nan, any(nan_data, axis=-1, keepdims=True))
    return lax.select(lax.broadcast_in_dim(force_nan, _util.shape_of(result), tuple(range(nb + 1))),
                      lax.full_like(result, np.nan), result)


_quantile_compiled = tc_api.compiled_when_eager(_quantile_of, static_argnums=(2, 3, 4, 5, 6))



def median(a: ArrayLike, axis: Axis = None, out: None = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Array:
    """The median over ``axis`` (mean of the two middle values for even counts)."""
    _util.check_out("median", out)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims)


def nanquantile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: None = None,
                overwrite_input: bool = False, method: str = "linear",
                keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """The ``q``-th quantiles (``0 <= q <= 1``) over ``axis``, ignoring NaNs
    (NaN where a slice has only NaNs)."""
    _util.check_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, skip_nans=True,
                     weights=weights)


def nanpercentile(a: ArrayLike, q: ArrayLike, axis: Axis = None, out: None = None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights: ArrayLike | None = None) -> Array:
    """The ``q``-th percentiles (``0 <= q <= 100``) over ``axis``, ignoring NaNs."""
    _util.check_out("nanpercentile", out)
    return _quantile("nanpercentile", a, q, axis, method, keepdims, skip_nans=True,
                     percent=True, weights=weights)


def nanmedian(a: ArrayLike, axis: Axis = None, out: None = None,
              overwrite_input: bool = False, keepdims: bool = False) -> Array:
    """The median ignoring NaNs (NaNs sort last; each slice uses its non-NaN count)."""
    _util.check_out("nanmedian", out)
    x = _util.promote_dtypes_inexact("nanmedian", a)[0]
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError("lamina.numpy.nanmedian does not support complex input, as the "
                         "operation is poorly defined")
    x = _scalar_as_vector(x, axis)
    flat, axes = _moved_last("nanmedian", x, axis)
    ordered = lax.sort(flat, dimension=-1)
    valid = sum(lax.eq(flat, flat), axis=-1, keepdims=True, dtype=dtypes.default_int_dtype())
    ints = dtypes.default_int_dtype()
    lo = lax.div(lax.sub(lax.max(valid, np.asarray(1, ints)), np.asarray(1, ints)),
                 np.asarray(2, ints))
    hi = lax.div(lax.max(valid, np.asarray(1, ints)), np.asarray(2, ints))
    axis_last = _util.ndim_of(ordered) - 1
    low = lax.take_along_axis(ordered, lo, axis_last)
    high = lax.take_along_axis(ordered, hi, axis_last)
    result = lax.mul(lax.add(low, high), _util.convert(0.5, get_aval(low).dtype))
    result = lax.select(lax.eq(valid, np.asarray(0, ints)), lax.full_like(result, np.nan), result)
    shape = _util.shape_of(x)
    if keepdims:
        return lax.reshape(result, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return lax.reshape(result, tuple(d for i, d in enumerate(shape) if i not in axes))


def _nan_arg_reduction(fun: str, op: Callable[..., Any], fill: float, a: Any,
                       axis: int | None, keepdims: bool | None) -> Array:
    x = _util.operand(fun, a, "a")
    if not dtypes.is_inexact(get_aval(x).dtype):
        return _arg_reduction(fun, op, x, axis, None, keepdims)
    nan = lax.ne(x, x)
    result = _arg_reduction(fun, op, lax.select(nan, lax.full_like(x, fill), x), axis, None,
                            keepdims)
    all_nan = all(nan, axis=axis, keepdims=bool(keepdims))
    if axis is None and keepdims:
        all_nan = lax.reshape(all_nan, _util.shape_of(result))
    return lax.select(all_nan, lax.full_like(result, -1), result)


def nanargmax(a: ArrayLike, axis: int | None = None, out: None = None,
              keepdims: bool | None = None) -> Array:
    """``argmax`` ignoring NaNs (-1 where all are NaN, as JAX)."""
    _util.check_out("nanargmax", out)
    return _nan_arg_reduction("nanargmax", lax.argmax, -np.inf, a, axis, keepdims)


def nanargmin(a: ArrayLike, axis: int | None = None, out: None = None,
              keepdims: bool | None = None) -> Array:
    """``argmin`` ignoring NaNs (-1 where all are NaN, as JAX)."""
    _util.check_out("nanargmin", out)
    return _nan_arg_reduction("nanargmin", lax.argmin, np.inf, a, axis, keepdims)


def nancumsum(a: ArrayLike, axis: int | None = None, dtype: Any = None,
              out: None = None) -> Array:
    """``cumsum`` treating NaNs as zero."""
    return cumsum(_nan_replaced("nancumsum", a, 0), axis, dtype, out)


def nancumprod(a: ArrayLike, axis: int | None = None, dtype: Any = None,
               out: None = None) -> Array:
    """``cumprod`` treating NaNs as one."""
    return cumprod(_nan_replaced("nancumprod", a, 1), axis, dtype, out)


def cov(m: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True, bias: bool = False,
        ddof: int | None = None, fweights: ArrayLike | None = None,
        aweights: ArrayLike | None = None, dtype: Any = None) -> Array:
    """The covariance matrix of the variables in the rows (or columns, if not
    ``rowvar``) of ``m`` (and ``y``); a single variable gives a scalar.
    ``dtype`` (a float or complex dtype) is the one the observations are
    converted to and computed in, as JAX's. ``fweights`` (integer counts)
    and ``aweights`` (importance) weigh the observations, as NumPy's (their
    absolute values, as JAX's)."""
    (x,) = _util.promote_dtypes_inexact("cov", m)
    x = _as_variables(x, rowvar)
    wanted = _inexact_dtype_arg("cov", dtype)
    if y is not None:
        (extra,) = _util.promote_dtypes_inexact("cov", y)
        x = lax.concatenate(_util.promote_dtypes("cov", x, _as_variables(extra, rowvar)), 0)
    n = _util.shape_of(x)[1]
    correction = (0 if bias else 1) if ddof is None else ddof
    w, aw = _observation_weights(fweights, aweights, n)
    if wanted is not None:
        x = _util.convert(x, wanted)
        w = None if w is None else _util.convert(w, wanted)
    if w is not None:
        return _weighted_cov(x, w, aw, correction)
    centered = lax.sub(x, mean(x, axis=1, keepdims=True))
    conj = lax.conj(centered) if dtypes.is_complex(get_aval(centered).dtype) else centered
    prod_ = matmul(centered, matrix_transpose(conj))
    out = lax.div(prod_, np.asarray(n - correction, get_aval(prod_).dtype))
    return lax.reshape(out, ()) if _util.shape_of(out) == (1, 1) else out


def _observation_weights(fweights: Any, aweights: Any, n: int) -> tuple[Any, Any]:
    """``cov``'s combined weights and its (absolute) ``aweights`` (None each
    when not given); JAX's checks and messages."""
    w = aw = None
    for name, given in (("fweights", fweights), ("aweights", aweights)):
        if given is None:
            continue
        v = _util.operand("cov", given, name)
        if _util.ndim_of(v) > 1:
            raise RuntimeError(f"cannot handle multidimensional {name}")
        if _util.shape_of(v)[0] != n:
            raise RuntimeError(f"incompatible numbers of samples and {name}")
        if name == "fweights" and not dtypes.is_integer(get_aval(v).dtype):
            raise TypeError("fweights must be integer.")
        v = lax.abs(v)
        if name == "aweights":
            aw = v
        w = v if w is None else w * v
    return w, aw


def _weighted_cov(x: Any, w: Any, aw: Any, correction: int) -> Any:
    """The weighted covariance of the rows of ``x``, NumPy's normalization:
    the sum of weights less ``ddof`` (scaled by the aweights when given)."""
    avg, w_sum = average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if correction == 0:
        f = w_sum
    elif aw is None:
        f = w_sum - correction
    else:
        f = w_sum - correction * sum(w * aw) / w_sum
    centered = x - avg[:, None]
    scaled = centered * w
    out = matmul(centered, matrix_transpose(lax.conj(scaled) if dtypes.is_complex(
        get_aval(scaled).dtype) else scaled)) / f
    return lax.reshape(out, ()) if _util.shape_of(out) == (1, 1) else out


def _inexact_dtype_arg(fun: str, dtype: Any) -> Any:
    """``cov``'s and ``corrcoef``'s ``dtype`` (None stays None); JAX's
    ValueError for one that is not a float or complex dtype."""
    given = _util.user_dtype(fun, dtype)
    if given is not None and not dtypes.is_inexact(given):
        raise ValueError(f"{_util.qualified(fun)}: dtype must be a subclass of float or "
                         f"complex; got dtype={dtype!r}")
    return given


def _as_variables(x: Any, rowvar: bool) -> Any:
    """Observations as a 2-D ``(variables, observations)`` array."""
    nd = _util.ndim_of(x)
    if nd > 2:
        raise ValueError("lamina.numpy.cov: m has more than 2 dimensions")
    if nd < 2:
        return lax.reshape(x, (1, math.prod(_util.shape_of(x))))
    return x if rowvar else lax.transpose(x, (1, 0))


def corrcoef(x: ArrayLike, y: ArrayLike | None = None, rowvar: bool = True,
             dtype: Any = None) -> Array:
    """Pearson correlation coefficients (``cov`` divided by the standard
    deviation of the row, then of the column, clipped to [-1, 1]), computed
    in ``dtype`` when given (as ``cov``'s); called eagerly, one compiled
    program, as JAX's."""
    wanted = _inexact_dtype_arg("corrcoef", dtype)
    xs = _util.operand("corrcoef", x, "x")
    ys = None if y is None else _util.operand("corrcoef", y, "y")
    return _corrcoef_compiled(xs, ys, bool(rowvar), wanted)


def _corrcoef(x: Any, y: Any, rowvar: bool, dtype: Any = None) -> Array:
    c = cov(x, y, rowvar, dtype=dtype)
    if _util.ndim_of(c) == 0:
        return lax.div(c, c)
    d = lax.real(diagonal(c)) if dtypes.is_complex(get_aval(c).dtype) else diagonal(c)
    std_dev = _util.convert(lax.sqrt(d), get_aval(c).dtype)
    n = _util.shape_of(d)[0]
    # Two divisions by the deviations as a column, then as a row, each
    # broadcast from its (n, 1) / (1, n) shape, as JAX's program has them:
    # XLA then rewrites them as JAX users see it (a division by the product,
    # or by a (n, n) broadcast of the vector, rounds differently).
    column = lax.broadcast_in_dim(std_dev, (n, 1), (0,))
    row = lax.broadcast_in_dim(std_dev, (1, n), (1,))
    out = lax.div(c, lax.broadcast_in_dim(column, (n, n), (0, 1)))
    out = lax.div(out, lax.broadcast_in_dim(row, (n, n), (0, 1)))
    if dtypes.is_complex(get_aval(out).dtype):
        return out
    return lax.clamp(np.asarray(-1, get_aval(out).dtype), out, np.asarray(1, get_aval(out).dtype))


_corrcoef_compiled = tc_api.compiled_when_eager(_corrcoef, static_argnums=(2, 3))




def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
          out: None = None) -> Array:
    """The sum along the ``offset`` diagonal."""
    _util.check_out("trace", out)
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)
