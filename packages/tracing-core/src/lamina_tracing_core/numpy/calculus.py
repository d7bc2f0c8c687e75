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
from lamina_tracing_core.numpy.indexing import take, where
from lamina_tracing_core.numpy.reductions import sum as _sum
from lamina_tracing_core.numpy.shape_ops import broadcast_to, concatenate, moveaxis, ravel
from lamina_tracing_core.numpy.sorting import argsort, searchsorted
from lamina_tracing_core.numpy.ufuncs import (absolute, add, clip, divide, greater, less, multiply,
                                              remainder, subtract)


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


def interp(x: ArrayLike, xp: ArrayLike, fp: ArrayLike, left: ArrayLike | str | None = None,
           right: ArrayLike | str | None = None, period: ArrayLike | None = None) -> Array:
    """Piecewise-linear interpolation of the points ``(xp, fp)`` (``xp``
    increasing) at ``x``; ``left``/``right`` outside the range (default the
    end values; ``'extrapolate'`` continues the end segments), or periodic
    with ``period`` (then ``left``/``right`` are not used).

    The result's dtype and weakness are JAX's: the promotion of ``fp``'s
    inexact dtype with ``x``/``xp``'s (and ``period``'s), then with
    ``left``/``right``. Eagerly, one compiled program, as JAX's (its bits)."""
    xs, xps, fps = _util.operands("interp", x, xp, fp, names=("x", "xp", "fp"))
    if _util.shape_of(xps) != _util.shape_of(fps) or _util.ndim_of(xps) != 1:
        raise ValueError("lamina.numpy.interp: xp and fp must be one-dimensional arrays of "
                         f"equal size, got shapes {_util.shape_of(xps)} and "
                         f"{_util.shape_of(fps)}")
    xs, xps = _util.promote_dtypes_inexact("interp", xs, xps)
    (fps,) = _util.promote_dtypes_inexact("interp", fps)
    extrapolate_left = _extrapolates("left", left)
    extrapolate_right = _extrapolates("right", right)
    if dtypes.is_complex(get_aval(xs).dtype):
        raise ValueError("lamina.numpy.interp: complex x values are not supported")
    if _util.shape_of(xps)[0] == 0:
        # JAX fails here in its gather, with a TypeError.
        raise TypeError("lamina.numpy.interp: xp and fp must not be empty")
    ends = (None if extrapolate_left else left, None if extrapolate_right else right)
    return _interp_compiled(xs, xps, fps, *ends, period, extrapolate_left, extrapolate_right)


def _interp(xs: Any, xps: Any, fps: Any, left: Any, right: Any, period: Any,
            extrapolate_left: bool, extrapolate_right: bool) -> Array:
    if period is not None:
        xs, xps, fps = _periodic_points(xs, xps, fps, period)
    m = _util.shape_of(xps)[0]
    hi = clip(searchsorted(xps, xs, side="right"), 1, m - 1)
    lo = subtract(hi, 1)
    f_lo = take(fps, lo, mode="wrap")
    df = subtract(take(fps, hi, mode="wrap"), f_lo)
    x_lo = take(xps, lo, mode="wrap")
    dx = subtract(take(xps, hi, mode="wrap"), x_lo)
    delta = subtract(xs, x_lo)
    epsilon = np.spacing(dtypes.finfo(get_aval(xps).dtype).eps)
    flat = lax.le(lax.abs(dx), lax.full_like(dx, epsilon))  # no NaN gradient where dx ~ 0
    out = where(flat, f_lo, add(f_lo, multiply(divide(delta, where(flat, 1, dx)), df)))
    if period is None:
        if not extrapolate_left:
            low = take(fps, 0) if left is None else left
            out = where(less(xs, take(xps, 0)), low, out)
        if not extrapolate_right:
            high = take(fps, m - 1) if right is None else right
            out = where(greater(xs, take(xps, m - 1)), high, out)
    return out


def _extrapolates(name: str, end: Any) -> bool:
    """Whether ``left``/``right`` asks for extrapolation (``'extrapolate'``,
    the one string taken)."""
    if not isinstance(end, str):
        return False
    if end != "extrapolate":
        raise ValueError(f"lamina.numpy.interp: the only valid string value of {name} is "
                         f"'extrapolate', got {end!r}")
    return True


def _periodic_points(xs: Any, xps: Any, fps: Any, period: ArrayLike) -> tuple[Any, Any, Any]:
    """``x`` and the points reduced modulo ``|period|``, the points sorted and
    padded by one period on each side."""
    p = _util.operand("interp", period, "period")
    if _util.ndim_of(p) != 0:
        raise ValueError("lamina.numpy.interp: period must be a scalar, got an array of shape "
                         f"{_util.shape_of(p)}")
    p = absolute(p)
    xs, xps = remainder(xs, p), remainder(xps, p)
    order = argsort(xps)
    xps, fps = take(xps, order), take(fps, order)
    m = _util.shape_of(xps)[0]
    xps = concatenate([subtract(lax.slice_in_dim(xps, m - 1, m, 1, 0), p), xps,
                       add(lax.slice_in_dim(xps, 0, 1, 1, 0), p)])
    fps = concatenate([lax.slice_in_dim(fps, m - 1, m, 1, 0), fps,
                       lax.slice_in_dim(fps, 0, 1, 1, 0)])
    return xs, xps, fps


_interp_compiled = tc_api.compiled_when_eager(_interp, static_argnums=(6, 7))
