"""Array creation: ``array``, ``asarray``, ``zeros``/``ones``/``full``/``empty``
(and ``*_like``), ``arange``, ``linspace``, ``logspace``, ``eye``,
``identity``, ``tri``, ``tril``, ``triu``, ``meshgrid`` (``diag`` and
``diagflat`` are in ``products``, beside ``diagonal``).

Host data (lists, numpy arrays, scalars) becomes a device Array; inside a
trace such an Array is a constant of the traced function, as in JAX. Values
computed from a shape (``zeros``, ``arange`` of ints, ``eye``) are built with
lax ops, so under ``jit`` they are staged rather than embedded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_tracing_core.avals import check_shape_size, get_aval
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import core, dtypes, lax
from lamina_tracing_core.out_sharding import takes_out_sharding

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array
from lamina_tracing_core.numpy.key_arrays import is_key_array

__all__ = [
    "arange", "array", "asarray", "astype", "copy", "empty", "empty_like", "eye",
    "full", "full_like", "identity", "indices", "linspace", "logspace", "meshgrid", "ones",
    "ones_like", "tri", "tril", "tril_indices", "tril_indices_from", "triu", "triu_indices",
    "triu_indices_from", "zeros", "zeros_like",
]


_place = _util.host_array

#: JAX's ``device_put(x, device)``, registered by the runtime (the layer with
#: devices): the ``device=`` of the creation functions places through it.
device_put_impl: list[Callable[[Any, Any], Any]] = []


def _check_device_or_out_sharding(fun: str, device: Any, out_sharding: Any) -> None:
    """JAX's ValueError when both ``device`` and ``out_sharding`` are given."""
    if device is not None and out_sharding is not None:
        raise ValueError(f"Only one of `device` or `out_sharding` can be set. Got "
                         f"device={device!r} and out_sharding={out_sharding!r} (the device "
                         f"and out_sharding of jnp.{fun})")


def _placed(fun: str, x: Any, device: Any, *, traced: bool) -> Any:
    """``x`` put on ``device`` (a Device or a Sharding; None leaves ``x`` as
    it is), as JAX's ``device=``: an eager result is committed there; a
    traced one is placed only where JAX's function places it (``traced``),
    else ``device`` is ignored under the trace, as in JAX. An eager result
    placed by the ``full`` family (not ``traced``) is strongly typed, as JAX's."""
    if device is None or (not traced and isinstance(x, core.Tracer)):
        return x
    if not device_put_impl:
        raise RuntimeError(f"lamina.numpy.{fun}: device= needs lamina's runtime; import "
                           "lamina first")
    if not traced:
        # JAX builds these shard by shard from a concrete fill: strongly typed
        x = _util.strip_weak(x)
    return device_put_impl[0](x, device)


def _check_order(fun: str, order: Any, allowed: tuple[Any, ...] = ("K", "A", "C", None)) -> None:
    if order not in allowed:
        raise _util.UnsupportedArgumentError(
            f"lamina.numpy.{fun}: order={order!r} is not supported; lamina arrays are in C "
            "order (order='C' or 'K')")


def _user_dtype(fun: str, dtype: Any) -> np.dtype[Any] | None:
    return _util.user_dtype(fun, dtype)


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = "K",
          ndmin: int = 0, *, device: Any = None, out_sharding: Any = None) -> Array:
    """A lamina array from ``object`` (array, scalar or nested lists of them).

    Python scalars give weakly typed arrays; lists are strongly typed, with
    the promoted dtype of their elements; ``ndmin`` prepends size-1 axes.
    ``device`` (a Device or Sharding) places the result there, also under a
    trace; ``out_sharding`` (a ``PartitionSpec`` or ``NamedSharding``)
    reshards it, as JAX's; not both."""
    _check_device_or_out_sharding("array", device, out_sharding)
    out = _array(object, dtype, copy, order, ndmin)
    if out_sharding is not None:
        _util.out_sharding("array", out_sharding, _util.shape_of(out))  # JAX's checks first
        return _resharded(out, out_sharding=out_sharding)
    return _placed("array", out, device, traced=True)


def _array(object: Any, dtype: Any, copy: bool, order: str | None, ndmin: int) -> Array:
    """``array`` without placement."""
    _check_order("array", order)
    if is_key_array(object):
        if dtype is not None and dtype != object.dtype:
            raise TypeError(f"lamina.numpy.array: argument object is a key array of dtype "
                            f"{object.dtype}; it cannot be converted to dtype {dtype}")
        return object.copy() if copy else object
    dt = _user_dtype("array", dtype)
    if isinstance(object, (list, tuple)):
        dt = dt if dt is not None else _util.nested_dtype("array", object)[0]
        out = _util.from_nested("array", object, "object", dt)
        weak = False
    else:
        if type(object) is int and dt is not None:
            _check_int_fits(object, dt)
        if type(object) is int and dt is not None and dt.kind in "iu":
            # Made in the requested type directly: `array(2**32 - 1, uint32)`
            # holds a value the default integer type cannot.
            out = np.asarray(object, dt)
        else:
            out = _util.operand("array", object, "object")
        aval = get_aval(out)
        if type(object) is int and dt is None and not dtypes.python_int_fits(object, aval.dtype):
            # JAX's words for a Python int beyond the default integer type
            raise OverflowError(f"lamina.numpy.array: Python int {object} too large to "
                                f"convert to {aval.dtype.name}")
        weak = aval.weak_type if dt is None else False
        dt = aval.dtype if dt is None else dt
    out = _util.convert(out, dt, weak)
    ndim = _util.ndim_of(out)
    if ndmin > ndim:
        out = lax.reshape(out, (1,) * (ndmin - ndim) + _util.shape_of(out))
    if not _util.is_lamina_array(out):
        return _place(np.asarray(out, dt), weak)
    if copy and not isinstance(out, core.Tracer) and out is object:
        return lax.structural.copy_p.bind(out)
    return out


def _same(x: Array) -> Array:
    """``x`` itself (laid out by the ``out_sharding`` ``takes_out_sharding`` adds)."""
    return x


_resharded: Callable[..., Array] = takes_out_sharding("jnp.array")(_same)


def _check_int_fits(value: int, dtype: Any) -> None:
    """``array(300, uint8)`` is an error, as in NumPy and JAX (arithmetic
    with a weakly typed 300 wraps instead)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu" and not dtypes.python_int_fits(value, dt):
        raise OverflowError(f"lamina.numpy.array: Python integer {value} out of bounds for "
                            f"{dt.name}")


def asarray(a: Any, dtype: Any = None, order: str | None = None, *,
            copy: bool | None = None, device: Any = None, out_sharding: Any = None) -> Array:
    """``a`` as a lamina array, without copying an existing Array (placed or
    resharded as ``array``'s ``device`` and ``out_sharding`` say)."""
    _check_device_or_out_sharding("asarray", device, out_sharding)
    return array(a, dtype=dtype, copy=bool(copy), order=order, device=device,
                 out_sharding=out_sharding)


def astype(x: Any, dtype: Any, /, *, copy: bool = False,
           device: Any = None) -> Any:
    """``x`` converted to ``dtype`` (placed on ``device`` when given)."""
    return array(x, dtype=dtype, copy=copy, device=device)


def copy(a: Any, order: str | None = None) -> Array:
    """A copy of ``a``."""
    return array(a, copy=True, order=order)


# --- filled arrays ----------------------------------------------------------------------
def _shape(fun: str, shape: Any, dtype: Any = None) -> tuple[int, ...]:
    """A concrete shape from an int or a sequence of ints (one an array of
    ``dtype`` can have, when ``dtype`` is given)."""
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "ndim") and np.ndim(shape) == 0):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"lamina.numpy.{fun}: shape must be an int or a sequence of ints, got "
                        f"{shape!r}") from None
    if any(_is_inexact_dim(d) for d in dims):
        # as JAX: no float dimensions, even integral ones (a window length may be one)
        raise TypeError(f"lamina.numpy.{fun}: shapes must be 1D sequences of concrete values "
                        f"of integer type, got {dims!r}")
    out = tuple(_util.concrete_int(fun, d, "each shape dimension") for d in dims)
    if any(d < 0 for d in out):
        raise ValueError(f"lamina.numpy.{fun}: negative dimensions are not allowed, got {out}")
    if dtype is not None:
        check_shape_size(out, dtype, f"lamina.numpy.{fun}")
    return out


def _is_inexact_dim(d: Any) -> bool:
    dtype = getattr(d, "dtype", None)
    if dtype is None:
        return isinstance(d, (float, complex))
    return dtypes.is_inexact(dtype)


def _filled(fun: str, shape: Any, value: int, dtype: Any, device: Any,
            out_sharding: Any) -> Array:
    _check_device_or_out_sharding(fun, device, out_sharding)
    dt = _user_dtype(fun, dtype) or dtypes.default_float_dtype()
    dims = _shape(fun, shape, dt)
    out = lax.full(dims, value, dt, sharding=_util.out_sharding(fun, out_sharding, dims))
    return _placed(fun, out, device, traced=False)


def zeros(shape: Any, dtype: Any = None, *, device: Any = None,
          out_sharding: Any = None) -> Array:
    """An array of zeros (default dtype float32, or float64 with x64), split
    as ``out_sharding`` says (a ``PartitionSpec`` or ``NamedSharding``), or
    placed on ``device`` (a Device or Sharding; as JAX's, ignored under a
    trace); not both."""
    return _filled("zeros", shape, 0, dtype, device, out_sharding)


def ones(shape: Any, dtype: Any = None, *, device: Any = None,
         out_sharding: Any = None) -> Array:
    """An array of ones, split or placed as ``zeros``'s."""
    return _filled("ones", shape, 1, dtype, device, out_sharding)


def empty(shape: Any, dtype: Any = None, *, device: Any = None,
          out_sharding: Any = None) -> Array:
    """An array of zeros (lamina has no uninitialised memory), split or
    placed as ``zeros``'s."""
    return _filled("empty", shape, 0, dtype, device, out_sharding)


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None,
         out_sharding: Any = None) -> Array:
    """An array of ``shape`` filled with ``fill_value`` (broadcast if an
    array), split or placed as ``zeros``'s."""
    _check_device_or_out_sharding("full", device, out_sharding)
    return _placed("full", _full(shape, fill_value, dtype, out_sharding), device, traced=False)


def _full(shape: Any, fill_value: Any, dtype: Any, out_sharding: Any) -> Array:
    dims = _shape("full", shape)
    dt = _user_dtype("full", dtype)
    # A Python int goes to lax.full as it is, which converts it to `dtype` as
    # JAX does (`full(2, 2**32 - 1, uint32)`); as an operand it would first
    # have to fit the default integer type.
    fill = fill_value if type(fill_value) is int and dt is not None else \
        _util.operand("full", fill_value, "fill_value")
    check_shape_size(dims, get_aval(fill).dtype if dt is None else dt, "lamina.numpy.full")
    sharding = _util.out_sharding("full", out_sharding, dims)
    if _util.ndim_of(fill) == 0:
        return lax.full(dims, fill, dt, sharding=sharding)
    fill = _util.convert(fill, dt) if dt is not None else fill
    return _util.as_array(_util.broadcast_to("full", fill, dims, sharding))


def _like(fun: str, a: Any, fill_value: Any, dtype: Any, shape: Any,
          out_sharding: Any = None) -> Array:
    # As JAX: a string is a scalar whose dtype it names (`zeros_like('int8')`
    # is an int8 0); other values as `operand` (a ShapeDtypeStruct traces like
    # an array), so a dtype or a scalar type is refused.
    x = np.zeros((), _user_dtype(fun, a)) if isinstance(a, str) else _util.operand(fun, a, "a")
    dt = _user_dtype(fun, dtype)
    aval = get_aval(x)
    dims = None if shape is None else _shape(fun, shape, aval.dtype if dt is None else dt)
    # No out_sharding: lax.full_like splits the result like `a` (as JAX's).
    sharding = _util.out_sharding(fun, out_sharding, aval.shape if dims is None else dims)
    if type(fill_value) is int and (dt is not None or aval.dtype.kind in "iu"):
        return lax.full_like(x, fill_value, dt, dims, sharding)  # converted as in `full`
    fill = _util.operand(fun, fill_value, "fill_value")
    if _util.ndim_of(fill) == 0:
        return lax.full_like(x, fill, dt, dims, sharding)
    fill = _util.convert(fill, aval.dtype if dt is None else dt)
    return _util.as_array(_util.broadcast_to(fun, fill, aval.shape if dims is None else dims,
                                             sharding))


def _placed_like(fun: str, a: Any, fill_value: Any, dtype: Any, shape: Any, device: Any,
                 out_sharding: Any = None) -> Array:
    """``_like``'s result placed on ``device`` (ignored under a trace, as JAX's)."""
    _check_device_or_out_sharding(fun, device, out_sharding)
    out = _like(fun, a, fill_value, dtype, shape, out_sharding)
    return _placed(fun, out, device, traced=False)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None,
               out_sharding: Any = None) -> Array:
    """Zeros with the shape and dtype of ``a`` (weak type kept), split as
    ``out_sharding`` says, else like ``a`` (see ``lax.full_like``), or placed
    on ``device`` as ``zeros``'s; not both."""
    return _placed_like("zeros_like", a, 0, dtype, shape, device, out_sharding)


def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None,
              out_sharding: Any = None) -> Array:
    """Ones with the shape and dtype of ``a``, split or placed as ``zeros_like``'s."""
    return _placed_like("ones_like", a, 1, dtype, shape, device, out_sharding)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *,
               device: Any = None) -> Array:
    """Zeros with the shape and dtype of ``prototype`` (split like it, or
    placed on ``device``; JAX's takes no ``out_sharding``)."""
    return _placed_like("empty_like", prototype, 0, dtype, shape, device)


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *,
              device: Any = None, out_sharding: Any = None) -> Array:
    """``fill_value`` with the shape and dtype of ``a``, split or placed as
    ``zeros_like``'s."""
    return _placed_like("full_like", a, fill_value, dtype, shape, device, out_sharding)


# --- ranges -----------------------------------------------------------------------------
def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *,
           device: Any = None, out_sharding: Any = None) -> Array:
    """Evenly spaced values in ``[start, stop)``; the bounds must be concrete.
    ``out_sharding`` splits the result (its iota; the scaling follows);
    ``device`` places it, also under a trace (as JAX's); not both."""
    _check_device_or_out_sharding("arange", device, out_sharding)
    return _placed("arange", _arange(start, stop, step, dtype, out_sharding), device,
                   traced=True)


def _arange(start: Any, stop: Any, step: Any, dtype: Any, out_sharding: Any) -> Array:
    bounds = [start, stop, step]
    names = ["start", "stop", "step"]
    values = [None if b is None else _util.concrete("arange", b, f"the {n} argument")
              for b, n in zip(bounds, names)]
    for v, n in zip(values, names):
        if v is not None and v.shape != ():
            raise TypeError(f"lamina.numpy.arange: {n} must be a scalar, got shape {v.shape}")
    given = [b for b in bounds if b is not None]
    dt = _user_dtype("arange", dtype) or dtypes.result_type(*given)
    if dtypes.is_complex(dt):
        raise TypeError("lamina.numpy.arange does not support complex dtypes")
    lo, hi, inc = values
    if hi is None:
        lo, hi = np.asarray(0), lo
    assert hi is not None and lo is not None
    inc = np.asarray(1) if inc is None else inc
    if inc == 0:
        raise ValueError("lamina.numpy.arange: step must not be zero")
    if all(dtypes.is_integer(v.dtype) or v.dtype == np.bool_ for v in (lo, hi, inc)):
        size = len(range(int(lo), int(hi), int(inc)))
    else:
        size = max(0, math.ceil((float(hi) - float(lo)) / float(inc)))
    sharding = _util.out_sharding("arange", out_sharding, (size,))
    out = lax.iota(dt, size) if sharding is None else \
        lax.broadcasted_iota(dt, (size,), 0, out_sharding=sharding)
    if int(inc) != 1 or not float(inc).is_integer():
        out = lax.mul(np.asarray(inc).astype(dt), out)
    if lo != 0:
        out = lax.add(np.asarray(lo).astype(dt), out)
    return out


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0, *,
             device: Any = None) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (array bounds
    broadcast; the samples go along ``axis``); ``device`` places the values
    (not the step), also under a trace, as JAX's."""
    num = _util.concrete_int("linspace", num, "the num argument")
    if num < 0:
        raise ValueError(f"lamina.numpy.linspace: number of samples, {num}, must be non-negative")
    out = _linspace_compiled(start, stop, num, bool(endpoint), bool(retstep),
                             _user_dtype("linspace", dtype), int(axis))
    if retstep:
        return _placed("linspace", out[0], device, traced=True), out[1]
    return _placed("linspace", out, device, traced=True)


def _linspace(start: Any, stop: Any, num: int, endpoint: bool, retstep: bool,
              user_dt: np.dtype[Any] | None, axis: int) -> Any:
    lo, hi = _util.promote_dtypes("linspace", start, stop)
    out_dt = user_dt or dtypes.to_inexact_dtype(dtypes.result_type(lo, hi))
    comp = dtypes.to_inexact_dtype(out_dt)
    lo, hi = _util.convert(lo, comp), _util.convert(hi, comp)
    bounds = _util.broadcast_shapes("linspace", _util.shape_of(lo), _util.shape_of(hi))
    lo, hi = _util.broadcast_to("linspace", lo, bounds), _util.broadcast_to("linspace", hi, bounds)
    axis = _util.canonicalize_axis("linspace", axis, len(bounds) + 1)
    sample_shape = bounds[:axis] + (1,) + bounds[axis:]
    div = num - 1 if endpoint else num
    if num > 1:
        delta = lax.div(lax.sub(hi, lo), np.asarray(div, comp))
        frac_shape = [1] * len(sample_shape)
        frac_shape[axis] = div
        frac = lax.div(lax.reshape(lax.iota(comp, div), tuple(frac_shape)),
                       np.asarray(div, comp))
        lo_b, hi_b = lax.reshape(lo, sample_shape), lax.reshape(hi, sample_shape)
        out = lax.add(lax.mul(lo_b, lax.sub(np.asarray(1, comp), frac)), lax.mul(hi_b, frac))
        if endpoint:
            out = lax.concatenate([out, lax.reshape(hi, sample_shape)], axis)
    elif num == 1:
        delta = lax.full(bounds, np.nan, comp) if endpoint else lax.sub(hi, lo)
        out = lax.reshape(lo, sample_shape)
    else:
        delta = lax.full(bounds, np.nan, comp)
        out = lax.full(bounds[:axis] + (0,) + bounds[axis:], 0, comp)
    if dtypes.is_integer(out_dt):
        out = lax.floor(out)
    out = _util.convert(out, out_dt)
    return (out, delta) if retstep else out


#: Eagerly one compiled program, as JAX's (XLA's fused arithmetic gives the
#: last bits JAX users see).
_linspace_compiled = tc_api.compiled_when_eager(_linspace, static_argnums=(2, 3, 4, 5, 6))


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: Any = 10.0,
             dtype: Any = None, axis: int = 0) -> Array:
    """``base ** linspace(start, stop, num)``; called eagerly, one compiled
    program, as JAX's."""
    num = _util.concrete_int("logspace", num, "the num argument")
    if num < 0:
        raise ValueError(f"lamina.numpy.logspace: number of samples, {num}, must be non-negative")
    return _logspace_compiled(start, stop, num, bool(endpoint),
                              _util.operand("logspace", base, "base"),
                              _user_dtype("logspace", dtype), int(axis))


def _logspace(start: Any, stop: Any, num: int, endpoint: bool, base: Any,
              user_dt: np.dtype[Any] | None, axis: int) -> Array:
    lo, hi = _util.promote_dtypes("logspace", start, stop)
    out_dt = user_dt or dtypes.to_inexact_dtype(dtypes.result_type(lo, hi))
    comp = dtypes.to_inexact_dtype(out_dt)
    exponents = linspace(lo, hi, num, endpoint=endpoint, dtype=comp, axis=axis)
    b = _util.convert(base, comp)
    b = lax.expand_dims(b, (axis,)) if _util.ndim_of(b) else b
    b, exponents = _util.promote_shapes("logspace", b, exponents)
    # converted as JAX converts: toward zero for an integer dtype
    return _util.convert(lax.pow(b, exponents), out_dt)


_logspace_compiled = tc_api.compiled_when_eager(_logspace, static_argnums=(2, 3, 5, 6))


# --- matrices ---------------------------------------------------------------------------
def diagonal_mask(n: int, m: int, k: int, compare: Any) -> Array:
    """``compare(row + k, col)`` over an ``(n, m)`` grid."""
    rows = lax.broadcasted_iota(dtypes.default_int_dtype(), (n, m), 0)
    cols = lax.broadcasted_iota(dtypes.default_int_dtype(), (n, m), 1)
    return compare(lax.add(rows, np.asarray(k, dtypes.default_int_dtype())), cols)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *,
        device: Any = None) -> Array:
    """An ``N x M`` array with ones on the ``k``-th diagonal, placed on
    ``device`` when given (ignored under a trace)."""
    return _placed("eye", _eye(N, M, k, dtype), device, traced=False)


def _eye(N: int, M: int | None, k: int, dtype: Any) -> Array:
    n = _util.concrete_int("eye", N, "N")
    m = n if M is None else _util.concrete_int("eye", M, "M")
    k = _util.concrete_int("eye", k, "k")
    if n < 0 or m < 0:
        raise ValueError(f"lamina.numpy.eye: negative dimensions are not allowed, got {(n, m)}")
    dt = _user_dtype("eye", dtype) or dtypes.default_float_dtype()
    return lax.convert_element_type(diagonal_mask(n, m, k, lax.eq), dt)


def identity(n: int, dtype: Any = None) -> Array:
    """The ``n x n`` identity matrix."""
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Array:
    """Ones at and below the ``k``-th diagonal, zeros above."""
    n = _util.concrete_int("tri", N, "N")
    m = n if M is None else _util.concrete_int("tri", M, "M")
    k = _util.concrete_int("tri", k, "k")
    dt = _user_dtype("tri", dtype) or dtypes.default_float_dtype()
    return lax.convert_element_type(diagonal_mask(n, m, k, lax.ge), dt)


def _triangle(fun: str, m: Any, k: int, compare: Any) -> Array:
    x = _util.operand(fun, m, "m")
    shape = _util.shape_of(x)
    if len(shape) < 2:
        raise ValueError(f"lamina.numpy.{fun}: the argument must be at least 2-D, got shape "
                         f"{shape}")
    k = _util.concrete_int(fun, k, "k")
    mask = diagonal_mask(shape[-2], shape[-1], k, compare)
    mask = lax.broadcast_in_dim(mask, shape, (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, x, lax.full_like(x, 0))


def tril(m: Any, k: int = 0) -> Array:
    """``m`` with the elements above the ``k``-th diagonal zeroed."""
    return _triangle("tril", m, k, lax.ge)


def triu(m: Any, k: int = 0) -> Array:
    """``m`` with the elements below the ``k``-th diagonal zeroed."""
    return _triangle("triu", m, k - 1, lax.lt)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """The row and column indices of the lower triangle of an ``n x m`` array."""
    rows, cols = np.tril_indices(n, k, m)
    ints = dtypes.default_int_dtype()
    return _place(rows.astype(ints), False), _place(cols.astype(ints), False)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Array, Array]:
    """The row and column indices of the upper triangle of an ``n x m`` array."""
    rows, cols = np.triu_indices(n, k, m)
    ints = dtypes.default_int_dtype()
    return _place(rows.astype(ints), False), _place(cols.astype(ints), False)


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Array, Array]:
    """``tril_indices`` for the shape of the 2-D ``arr``."""
    shape = _util.shape_of(_util.operand("tril_indices_from", arr, "arr"))
    if len(shape) != 2:
        raise ValueError("lamina.numpy.tril_indices_from: arr must be 2-D")
    return tril_indices(shape[0], k, shape[1])


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Array, Array]:
    """``triu_indices`` for the shape of the 2-D ``arr``."""
    shape = _util.shape_of(_util.operand("triu_indices_from", arr, "arr"))
    if len(shape) != 2:
        raise ValueError("lamina.numpy.triu_indices_from: arr must be 2-D")
    return triu_indices(shape[0], k, shape[1])


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> list[Array]:
    """Coordinate arrays from 1-D coordinate vectors (``indexing`` 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"lamina.numpy.meshgrid: indexing must be 'xy' or 'ij', got "
                         f"{indexing!r}")
    args = [_util.operand("meshgrid", x, f"xi[{i}]") for i, x in enumerate(xi)]
    for i, x in enumerate(args):
        if _util.ndim_of(x) != 1:
            raise ValueError(f"lamina.numpy.meshgrid: xi[{i}] must be 1-D, got shape "
                             f"{_util.shape_of(x)}")
    sizes = [_util.shape_of(x)[0] for x in args]
    if indexing == "xy" and len(args) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(args):
        dim = i
        if indexing == "xy" and len(args) >= 2 and i < 2:
            dim = 1 - i
        if sparse:
            shape = tuple(s if d == dim else 1 for d, s in enumerate(sizes))
            out.append(lax.reshape(x, shape))
        else:
            out.append(lax.broadcast_in_dim(x, tuple(sizes), (dim,)))
    return out


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """Index grids: ``out[i]`` counts along axis ``i`` of ``dimensions``."""
    dims = _shape("indices", dimensions)
    dt = _user_dtype("indices", dtype) or dtypes.default_int_dtype()
    grids = []
    for i, n in enumerate(dims):
        if sparse:
            shape = tuple(n if j == i else 1 for j in range(len(dims)))
            grids.append(lax.broadcasted_iota(dt, shape, i))
        else:
            grids.append(lax.broadcasted_iota(dt, dims, i))
    if sparse:
        return tuple(grids)
    if not grids:
        return lax.full((0,), 0, dt)
    return lax.concatenate([lax.expand_dims(g, (0,)) for g in grids], 0)

