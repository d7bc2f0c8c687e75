"""Differences, integration and interpolation: ``diff``, ``ediff1d``,
``gradient``, ``trapezoid``, ``interp``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike
from lamina_tracing_core.numpy.indexing import take
from lamina_tracing_core.numpy.reductions import sum as _sum
from lamina_tracing_core.numpy.shape_ops import broadcast_to, concatenate, moveaxis, ravel
from lamina_tracing_core.numpy.sorting import argsort, searchsorted
from lamina_tracing_core.numpy.ufuncs import add, multiply, remainder, subtract


def _difference(a: Any, b: Any) -> Any:
    """``a - b`` (``a != b`` for booleans, as NumPy)."""
    if dtypes.is_boolean(get_aval(a).dtype):
        return lax.ne(a, b)
    return lax.sub(a, b)


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: ArrayLike | None = None,
         append: ArrayLike | None = None) -> Array:
    """The ``n``-th discrete difference along ``axis``."""
    x = _util.operand("diff", a, "a")
    n = _util.concrete_int("diff", n, "n")
    if n < 0:
        raise ValueError(f"lamina.numpy.diff: order must be non-negative but got {n}")
    nd = _util.ndim_of(x)
    if nd == 0:
        raise ValueError("lamina.numpy.diff requires input that is at least one dimensional")
    ax = _util.canonicalize_axis("diff", axis, nd)
    if prepend is not None or append is not None:
        pieces = []
        for extra in (prepend, x, append):
            if extra is None:
                continue
            v = _util.operand("diff", extra, "prepend/append")
            if _util.ndim_of(v) == 0:
                shape = list(_util.shape_of(x))
                shape[ax] = 1
                v = broadcast_to(v, tuple(shape))
            pieces.append(v)
        x = concatenate(pieces, axis=ax)
    for _ in range(n):
        size = _util.shape_of(x)[ax]
        if size == 0:
            break
        x = _difference(lax.slice_in_dim(x, 1, size, 1, ax),
                        lax.slice_in_dim(x, 0, size - 1, 1, ax))
    return x


def ediff1d(ary: ArrayLike, to_end: ArrayLike | None = None,
            to_begin: ArrayLike | None = None) -> Array:
    """Differences of the flattened array, with values put before and after."""
    x = ravel(_util.operand("ediff1d", ary, "ary"))
    size = _util.shape_of(x)[0]
    out = lax.sub(lax.slice_in_dim(x, 1, size, 1, 0),
                  lax.slice_in_dim(x, 0, size - 1, 1, 0)) if size else x
    pieces = []
    if to_begin is not None:
        pieces.append(_util.convert(ravel(_util.operand("ediff1d", to_begin, "to_begin")),
                                    get_aval(out).dtype))
    pieces.append(out)
    if to_end is not None:
        pieces.append(_util.convert(ravel(_util.operand("ediff1d", to_end, "to_end")),
                                    get_aval(out).dtype))
    return concatenate(pieces) if len(pieces) > 1 else out


def gradient(f: ArrayLike, *varargs: Any, axis: int | tuple[int, ...] | None = None,
             edge_order: int | None = None) -> Any:
    """Central differences in the interior, one-sided at the edges (unit or
    scalar spacing per axis)."""
    if edge_order not in (None, 1):
        raise _util.UnsupportedArgumentError("lamina.numpy.gradient: only edge_order=1 is "
                                             "supported")
    (x,) = _util.promote_dtypes_inexact("gradient", f)
    nd = _util.ndim_of(x)
    axes = _util.canonicalize_axes("gradient", axis, nd) if axis is not None else tuple(range(nd))
    if isinstance(axis, (int, np.integer)):
        axes = (_util.canonicalize_axis("gradient", axis, nd),)
    if len(varargs) == 0:
        spacings: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("lamina.numpy.gradient: give one spacing, or one per axis")
    out = []
    for ax, h in zip(axes, spacings):
        if _util.ndim_of(_util.operand("gradient", h, "spacing")) != 0:
            raise _util.UnsupportedArgumentError("lamina.numpy.gradient: only scalar spacings "
                                                 "are supported")
        n = _util.shape_of(x)[ax]
        if n < 2:
            raise ValueError("lamina.numpy.gradient: each axis needs at least 2 elements")
        step = _util.convert(_util.operand("gradient", h, "spacing"), get_aval(x).dtype)
        first = lax.sub(lax.slice_in_dim(x, 1, 2, 1, ax), lax.slice_in_dim(x, 0, 1, 1, ax))
        last = lax.sub(lax.slice_in_dim(x, n - 1, n, 1, ax),
                       lax.slice_in_dim(x, n - 2, n - 1, 1, ax))
        pieces = [first]
        if n > 2:
            middle = lax.sub(lax.slice_in_dim(x, 2, n, 1, ax), lax.slice_in_dim(x, 0, n - 2, 1, ax))
            pieces.append(lax.div(middle, _util.convert(2, get_aval(x).dtype)))
        pieces.append(last)
        out.append(lax.div(lax.concatenate(pieces, ax), step))
    return out[0] if len(out) == 1 else out


def trapezoid(y: ArrayLike, x: ArrayLike | None = None, dx: ArrayLike = 1.0,
              axis: int = -1) -> Array:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule; called
    eagerly, one compiled program, as JAX's."""
    ys = _util.operand("trapezoid", y, "y")
    ax = _util.canonicalize_axis("trapezoid", axis, _util.ndim_of(ys))
    if x is None:
        return _trapezoid_compiled(ys, None, _util.operand("trapezoid", dx, "dx"), ax)
    return _trapezoid_compiled(ys, _util.operand("trapezoid", x, "x"), None, ax)


def _trapezoid(y: Any, x: Any, dx: Any, axis: int) -> Array:
    """JAX's arithmetic: with equal steps ``dx * (sum(y) - (y[0] + y[-1]) / 2)``,
    else ``sum(dx * (y[1:] + y[:-1])) / 2``, along the last axis."""
    if x is None:
        (ys,) = _util.promote_dtypes_inexact("trapezoid", y)
        steps = dx
        if _util.ndim_of(steps) > 0:
            steps = lax.expand_dims(steps, tuple(range(_util.ndim_of(ys) - _util.ndim_of(steps))))
            steps = moveaxis(steps, axis, -1)
    else:
        ys, xs = _util.promote_dtypes_inexact("trapezoid", y, x)
        if _util.ndim_of(xs) == 1:
            steps = diff(xs)
        else:
            steps = moveaxis(diff(xs, axis=axis), axis, -1)
    ys = moveaxis(ys, axis, -1)
    n = _util.shape_of(ys)[-1]
    last = _util.ndim_of(ys) - 1
    if _util.ndim_of(steps) == 0 or _util.shape_of(steps)[-1] == 1:
        step = steps if _util.ndim_of(steps) == 0 else lax.index_in_dim(steps, 0, _util.ndim_of(steps) - 1, False)
        ends = add(lax.index_in_dim(ys, 0, last, False), lax.index_in_dim(ys, n - 1, last, False))
        return multiply(step, subtract(_sum(ys, axis=-1), multiply(0.5, ends)))
    pairs = add(lax.slice_in_dim(ys, 1, n, 1, last), lax.slice_in_dim(ys, 0, n - 1, 1, last))
    return multiply(0.5, _sum(multiply(steps, pairs), axis=-1))


_trapezoid_compiled = tc_api.compiled_when_eager(_trapezoid, static_argnums=(3,))


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | None = None,
           right: ArrayLike | None = None, period: ArrayLike | None = None) -> Array:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp``
    increasing) at ``x``; ``left``/``right`` outside the range (default the
    end values), or periodic with ``period``. Eagerly, one compiled program,
    as JAX's."""
    (fps,) = _util.promote_dtypes_inexact("interp", fp)
    xs, xps = _util.promote_dtypes_inexact("interp", x, xp)
    if _util.ndim_of(xps) != 1 or _util.ndim_of(fps) != 1:
        raise ValueError("lamina.numpy.interp: xp and fp must be one-dimensional")
    if _util.shape_of(xps) != _util.shape_of(fps):
        raise ValueError("lamina.numpy.interp: xp and fp must have the same length")
    if _util.shape_of(xps)[0] == 0:
        raise ValueError("lamina.numpy.interp: xp and fp must not be empty")
    if period is not None and (left is not None or right is not None):
        raise ValueError("lamina.numpy.interp: left and right are not used with period")
    left, right, period = (None if v is None else _util.operand("interp", v, name)
                           for v, name in ((left, "left"), (right, "right"), (period, "period")))
    return _interp_compiled(xs, xps, fps, left, right, period)


def _interp(xs: Any, xps: Any, fps: Any, left: Any, right: Any, period: Any) -> Array:
    dt = get_aval(xps).dtype
    if period is not None:
        p = _util.convert(period, dt)
        xs, xps = remainder(xs, p), remainder(xps, p)
        order = argsort(xps)
        xps, fps = take(xps, order), take(fps, order)
        m = _util.shape_of(xps)[0]
        period_1d = lax.reshape(p, (1,))
        xps = lax.concatenate([lax.sub(lax.slice_in_dim(xps, m - 1, m, 1, 0), period_1d), xps,
                               lax.add(lax.slice_in_dim(xps, 0, 1, 1, 0), period_1d)], 0)
        fps = lax.concatenate([lax.slice_in_dim(fps, m - 1, m, 1, 0), fps,
                               lax.slice_in_dim(fps, 0, 1, 1, 0)], 0)
    m = _util.shape_of(xps)[0]
    ints = dtypes.default_int_dtype()
    hi = searchsorted(xps, xs, side="right")
    hi = lax.clamp(np.asarray(1, ints), hi, np.asarray(max(m - 1, 1), ints))
    lo = lax.sub(hi, np.asarray(1, ints))
    if m == 1:
        hi = lo = lax.full_like(hi, 0)
    x_lo, x_hi = take(xps, lo, mode="clip"), take(xps, hi, mode="clip")
    f_lo, f_hi = take(fps, lo, mode="clip"), take(fps, hi, mode="clip")
    dx = lax.sub(x_hi, x_lo)
    tiny = lax.le(lax.abs(dx), lax.full_like(dx, np.spacing(dtypes.finfo(dt).eps)))
    safe_dx = lax.select(tiny, lax.full_like(dx, 1), dx)
    slope = lax.div(lax.sub(_util.convert(xs, dt), x_lo), safe_dx)
    f_dt = get_aval(fps).dtype
    out = lax.select(tiny, f_lo, lax.add(f_lo, lax.mul(_util.convert(slope, f_dt),
                                                       lax.sub(f_hi, f_lo))))
    if period is None:
        first_x = lax.index_in_dim(xps, 0, keepdims=False)
        last_x = lax.index_in_dim(xps, m - 1, keepdims=False)
        lo_val = lax.index_in_dim(fps, 0, keepdims=False) if left is None else \
            _util.convert(left, f_dt)
        hi_val = lax.index_in_dim(fps, m - 1, keepdims=False) if right is None else \
            _util.convert(right, f_dt)
        shape = _util.shape_of(out)
        out = lax.select(lax.lt(xs, lax.broadcast_in_dim(first_x, shape, ())),
                         _util.broadcast_to("interp", lo_val, shape), out)
        out = lax.select(lax.gt(xs, lax.broadcast_in_dim(last_x, shape, ())),
                         _util.broadcast_to("interp", hi_val, shape), out)
    return out


_interp_compiled = tc_api.compiled_when_eager(_interp)
