"""NumPy semantics on top of lax: type promotion with weak types, rank
promotion and broadcasting, the arithmetic/reduction functions behind the
array operators and methods, and NumPy-style indexing (``x[idx]`` and
``x.at[idx].set(...)``).

``array_methods.ArrayMethods`` is built on these; ``lamina.numpy`` reuses them
(the names follow ``jax.numpy``: ``add``, ``true_divide``, ``sum``, ...).

Promotion follows JAX: the result dtype of mixing values is
``dtypes.result_type`` (Python scalars are weakly typed and take the other
operand's type), and operands of different ranks get leading size-1 dims
(the lax primitives broadcast size-1 and rank-0 operands themselves).
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core import lax as lx
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.errors import LaminaTypeError
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax.common import typeof

Array = Any
ArrayLike = Any


class NonConcreteBooleanIndexError(IndexError):
    """A boolean mask used as an index has a traced (unknown) value, so the
    shape of the result is unknown."""

    def __init__(self, tracer: Any):
        self.tracer = tracer
        origin = ""
        describe = getattr(tracer, "_origin_message", None)
        if describe is not None:
            try:
                origin = "\n" + str(describe())
            except Exception:  # the error message must never itself fail
                origin = ""
        super().__init__(
            "Array boolean indices must be concrete; got "
            f"{typeof(tracer).str_short()}. The shape of x[mask] depends on the values in "
            "mask, which are not known while tracing; use lx.numpy.where(mask, x, 0) or "
            "x.at[...] with a fixed-size index instead." + origin)


# --- recognizing array-likes ---------------------------------------------------------------
_SCALAR_TYPES = (bool, int, float, complex)


def is_array_like(x: Any) -> bool:
    """Can ``x`` take part in array arithmetic (scalars, numpy values, lamina
    arrays and tracers)?"""
    if isinstance(x, _SCALAR_TYPES) or isinstance(x, (np.ndarray, np.generic)):
        return True
    return isinstance(getattr(x, "aval", None), ShapedArray) or hasattr(x, "__jax_array__")


def check_arraylike(fun_name: str, *args: Any) -> None:
    for i, a in enumerate(args):
        if not is_array_like(a):
            raise TypeError(f"{fun_name} requires ndarray or scalar arguments, got "
                            f"{type(a).__name__} at position {i}.")


def concrete_value(x: Any) -> Any:
    """The numpy value of ``x``, or ``None`` when ``x`` is traced."""
    from lamina_tracing_core import core
    if isinstance(x, core.Tracer):
        val = x.to_concrete_value()
        return None if val is None else np.asarray(val)
    return np.asarray(x)


# --- promotion -------------------------------------------------------------------------------
def result_type(*args: Any) -> tuple[np.dtype[Any], bool]:
    """The promoted ``(dtype, weak_type)`` of ``args``."""
    dtype, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    return dtype, weak


def promote_dtypes(*args: ArrayLike) -> list[Array]:
    """``args`` converted to their common (weak-aware) dtype."""
    if len(args) < 2:
        return list(args)
    avals = [typeof(x) for x in args]
    first = avals[0]
    if builtins.all(a.dtype == first.dtype and a.weak_type == first.weak_type for a in avals[1:]):
        return list(args)
    dtype, weak = dtypes.promote_types_weak(*((a.dtype, a.weak_type) for a in avals))
    return [x if a.dtype == dtype and a.weak_type == weak
            else lx.convert_element_type_internal(x, dtype, weak)
            for x, a in zip(args, avals)]


def _to_inexact(dtype: np.dtype[Any]) -> np.dtype[Any]:
    if dtype in common.INEXACT:
        return dtype
    return dtypes.default_float_dtype()


def promote_dtypes_inexact(*args: ArrayLike) -> list[Array]:
    """Like ``promote_dtypes``, but integers and booleans become the default float."""
    dtype, weak = result_type(*args)
    inexact = _to_inexact(dtype)
    return [lx.convert_element_type_internal(x, inexact, weak) for x in args]


def promote_dtypes_numeric(*args: ArrayLike) -> list[Array]:
    """Like ``promote_dtypes``, but booleans become the default int."""
    dtype, weak = result_type(*args)
    if dtype == dtypes.bool_:
        dtype = dtypes.default_int_dtype()
    return [lx.convert_element_type_internal(x, dtype, weak) for x in args]


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcast of ``shapes`` (a ValueError when incompatible)."""
    if len(shapes) == 2:
        a, b = shapes
        if type(a) is tuple and type(b) is tuple:
            if a == b:
                return a
            known = _broadcasts.get((a, b))
            if known is None:
                known = _broadcast_shapes([a, b])
                if len(_broadcasts) >= 1024:
                    _broadcasts.clear()
                _broadcasts[(a, b)] = known
            return known
    return _broadcast_shapes([tuple(s) for s in shapes])


#: (shape, shape) -> their broadcast: the binary operators' common case.
_broadcasts: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] = {}


def _broadcast_shapes(tshapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    if len(tshapes) == 1:
        return tshapes[0]
    if builtins.all(s == tshapes[0] for s in tshapes[1:]):
        return tshapes[0]
    nd = builtins.max(len(s) for s in tshapes)
    padded = [(1,) * (nd - len(s)) + s for s in tshapes]
    out = []
    for sizes in zip(*padded):
        non_one = {d for d in sizes if d != 1}
        if len(non_one) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={tshapes}")
        out.append(non_one.pop() if non_one else 1)
    return tuple(out)


def promote_shapes(fun_name: str, *args: ArrayLike) -> list[Array]:
    """Operands of lower rank get leading size-1 dims (rank-0 ones are left
    alone: the lax primitives broadcast scalars and size-1 dims)."""
    if len(args) < 2:
        return list(args)
    shapes = [typeof(a).shape for a in args]
    if builtins.all(s == shapes[0] for s in shapes[1:]):
        return list(args)
    nonscalar = [s for s in shapes if s]
    if not nonscalar or builtins.all(len(s) == len(nonscalar[0]) for s in nonscalar[1:]):
        if len(nonscalar) > 1:
            broadcast_shapes(*nonscalar)  # errors on incompatible shapes, naming numpy's rule
        return list(args)
    rank = len(broadcast_shapes(*nonscalar))
    return [a if not s or len(s) == rank else lx.broadcast_to_rank(a, rank)
            for a, s in zip(args, shapes)]


def promote_args(fun_name: str, *args: ArrayLike) -> list[Array]:
    """Checks ``args`` are array-like, then promotes their ranks and dtypes."""
    if len(args) == 2:
        fast = _promote_pair(args[0], args[1])
        if fast is not None:
            return fast
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes(*args))


_PY_SCALAR_TYPES = frozenset({bool, int, float, complex})
#: (dtype, weak, dtype, weak, x64) -> promoted (dtype, weak): memoized for
#: the binary operators' fast path.
_pair_promotions: dict[tuple[Any, ...], tuple[np.dtype[Any], bool]] = {}


def _fast_aval(x: Any) -> ShapedArray | None:
    """The aval of a tracer/array or Python scalar; None for anything else
    (which takes the general path, with its checks and errors)."""
    if type(x) in _PY_SCALAR_TYPES:
        return get_aval(x)
    aval = getattr(x, "aval", None)
    return aval if type(aval) is ShapedArray else None


#: The strong dtypes a Python scalar of each type simply takes (``x * 2.0``
#: with ``x`` float32 is a float32 product).
_SCALAR_TAKES = {
    float: frozenset(common.INEXACT),
    int: frozenset(common.INEXACT | common.INT),
}


def _scalar_operand(aval: Any, scalar: Any) -> Any:
    """The strongly typed constant a Python scalar becomes beside an array of
    type ``aval``, when it simply takes the array's dtype; else ``None``."""
    if type(aval) is not ShapedArray or aval.weak_type:
        return None
    takes = _SCALAR_TAKES.get(type(scalar))
    if takes is None or aval.dtype not in takes:
        return None
    return lx.convert_element_type_internal(scalar, aval.dtype, False)


def _promote_pair(x: Any, y: Any) -> list[Array] | None:
    """``promote_args`` of two operands (tracers, arrays or Python scalars)
    without the general machinery; ``None`` for other operands, which take the
    general path with its checks and errors. Same result: dtypes promoted
    first, then ranks."""
    ty = type(y)
    if ty is float or ty is int:  # the operators' commonest case: x * 2.0
        const = _scalar_operand(getattr(x, "aval", None), y)
        if const is not None:
            return [x, const]
    elif type(x) is float or type(x) is int:
        const = _scalar_operand(getattr(y, "aval", None), x)
        if const is not None:
            return [const, y]
    ax, ay = _fast_aval(x), _fast_aval(y)
    if ax is None or ay is None:
        return None
    xs, ys = ax.shape, ay.shape
    rank = -1  # no rank promotion
    if xs != ys and xs and ys:
        if len(xs) == len(ys):
            broadcast_shapes(xs, ys)  # errors on incompatible sizes
        else:
            rank = len(broadcast_shapes(xs, ys))
    if ax.dtype is not ay.dtype or ax.weak_type is not ay.weak_type:
        if ax.dtype != ay.dtype or ax.weak_type != ay.weak_type:
            key = (ax.dtype, ax.weak_type, ay.dtype, ay.weak_type, dtypes.x64_state.enabled)
            promoted = _pair_promotions.get(key)
            if promoted is None:
                promoted = dtypes.promote_types_weak((ax.dtype, ax.weak_type),
                                                     (ay.dtype, ay.weak_type))
                _pair_promotions[key] = promoted
            dtype, weak = promoted
            if ax.dtype != dtype or ax.weak_type != weak:
                x = lx.convert_element_type_internal(x, dtype, weak)
            if ay.dtype != dtype or ay.weak_type != weak:
                y = lx.convert_element_type_internal(y, dtype, weak)
    if rank >= 0:
        # the lower-rank operand gets leading size-1 dims
        if len(xs) < rank:
            x = lx.broadcast_to_rank(x, rank)
        else:
            y = lx.broadcast_to_rank(y, rank)
    return [x, y]


def promote_args_inexact(fun_name: str, *args: ArrayLike) -> list[Array]:
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes_inexact(*args))


def promote_args_numeric(fun_name: str, *args: ArrayLike) -> list[Array]:
    check_arraylike(fun_name, *args)
    return promote_shapes(fun_name, *promote_dtypes_numeric(*args))


def asarray(x: ArrayLike, dtype: Any = None) -> Array:
    """``x`` as an array value (lists/tuples become numpy constants)."""
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if dtype is not None:
        return lx.convert_element_type_internal(x, dtypes.canonicalize_dtype(dtype), False)
    return x


def broadcast_to(x: ArrayLike, shape: Sequence[int]) -> Array:
    """``x`` broadcast to ``shape`` by NumPy's rules."""
    shape = common.canonicalize_shape(shape)
    x_shape = typeof(x).shape
    if x_shape == shape:
        return x
    if len(x_shape) > len(shape) or broadcast_shapes(x_shape, shape) != shape:
        raise ValueError(f"Incompatible shapes for broadcasting: {x_shape} and requested "
                         f"shape {shape}")
    diff = len(shape) - len(x_shape)
    keep = [i for i, d in enumerate(x_shape) if d == shape[i + diff]]
    if len(keep) != len(x_shape):
        x = lx.reshape(x, tuple(x_shape[i] for i in keep))
    return lx.broadcast_in_dim(x, shape, tuple(i + diff for i in keep))


def broadcast_arrays(*args: ArrayLike) -> list[Array]:
    shape = broadcast_shapes(*(typeof(a).shape for a in args))
    return [broadcast_to(a, shape) for a in args]


def _dtype_of(x: Any) -> np.dtype[Any]:
    return typeof(x).dtype


# --- elementwise arithmetic --------------------------------------------------------------------
def _binary(name: str, op: Callable[[Any, Any], Any], promote: Callable[..., list[Any]]
            ) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fun(x: ArrayLike, y: ArrayLike) -> Array:
        a, b = promote(name, x, y)
        return op(a, b)
    fun.__name__ = fun.__qualname__ = name
    fun.__doc__ = f"NumPy's ``{name}`` with lamina's type promotion."
    return fun


add = _binary("add", lambda a, b: lx.bitwise_or(a, b) if _dtype_of(a) == dtypes.bool_
              else lx.add(a, b), promote_args)
multiply = _binary("multiply", lambda a, b: lx.bitwise_and(a, b)
                   if _dtype_of(a) == dtypes.bool_ else lx.mul(a, b), promote_args)
maximum = _binary("maximum", lx.max, promote_args)
minimum = _binary("minimum", lx.min, promote_args)
equal = _binary("equal", lx.eq, promote_args)
not_equal = _binary("not_equal", lx.ne, promote_args)
less = _binary("less", lx.lt, promote_args)
less_equal = _binary("less_equal", lx.le, promote_args)
greater = _binary("greater", lx.gt, promote_args)
greater_equal = _binary("greater_equal", lx.ge, promote_args)
true_divide = _binary("true_divide", lx.div, promote_args_inexact)
divide = true_divide
arctan2 = _binary("arctan2", lx.atan2, promote_args_inexact)


def _check_int_or_bool(name: str, *args: Any) -> None:
    for a in args:
        if _dtype_of(a) not in common.BOOL_OR_INT:
            raise TypeError(f"{name} is only defined for integer and boolean arrays, got "
                            f"{_dtype_of(a).name}")


def _bitwise(name: str, op: Callable[[Any, Any], Any]) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fun(x: ArrayLike, y: ArrayLike) -> Array:
        a, b = promote_args(name, x, y)
        _check_int_or_bool(name, a)
        return op(a, b)
    fun.__name__ = fun.__qualname__ = name
    return fun


bitwise_and = _bitwise("bitwise_and", lx.bitwise_and)
bitwise_or = _bitwise("bitwise_or", lx.bitwise_or)
bitwise_xor = _bitwise("bitwise_xor", lx.bitwise_xor)


def _shift(name: str, op: Callable[[Any, Any], Any]) -> Callable[[ArrayLike, ArrayLike], Array]:
    def fun(x: ArrayLike, y: ArrayLike) -> Array:
        a, b = promote_args_numeric(name, x, y)
        if _dtype_of(a) not in common.INT:
            raise TypeError(f"{name} is only defined for integer arrays, got "
                            f"{_dtype_of(a).name}")
        return op(a, b)
    fun.__name__ = fun.__qualname__ = name
    return fun


left_shift = _shift("left_shift", lx.shift_left)


def _right_shift(a: Any, b: Any) -> Any:
    if _dtype_of(a) in common.UNSIGNED:
        return lx.shift_right_logical(a, b)
    return lx.shift_right_arithmetic(a, b)


right_shift = _shift("right_shift", _right_shift)


def subtract(x: ArrayLike, y: ArrayLike) -> Array:
    a, b = promote_args("subtract", x, y)
    if _dtype_of(a) == dtypes.bool_:
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the "
                        "bitwise_xor, the `^` operator, or the logical_xor function instead.")
    return lx.sub(a, b)


def floor_divide(x: ArrayLike, y: ArrayLike) -> Array:
    """Division rounding towards minus infinity."""
    a, b = promote_args_numeric("floor_divide", x, y)
    dtype = _dtype_of(a)
    if dtype in common.UNSIGNED:
        return lx.div(a, b)
    if dtype in common.INT:
        quotient = lx.div(a, b)
        fix = lx.bitwise_and(lx.ne(lx.sign(a), lx.sign(b)),
                             lx.ne(lx.rem(a, b), common.const(a, 0)))
        return lx.select(fix, lx.sub(quotient, common.const(quotient, 1)), quotient)
    if dtype in common.COMPLEX:
        raise TypeError("floor_divide does not support complex-valued inputs")
    return float_divmod(a, b)[0]


def float_divmod(a: Any, b: Any) -> tuple[Any, Any]:
    """Floor division and modulus of floats, NumPy-exact (the modulus has the
    sign of the divisor)."""
    mod = lx.rem(a, b)
    # as CPython's float_divmod (and JAX): x // 0 is x / 0 (inf, or nan for 0)
    shape = common.broadcasting_shape("floor_divide", typeof(a).shape, typeof(b).shape)
    a_full = helpers.maybe_broadcast(shape, a)
    zero_divisor = helpers.maybe_broadcast(shape, lx.eq(b, lx.full_like(b, 0)))
    corrected = lx.select(zero_divisor, a_full, lx.sub(a, mod))
    div = lx.div(corrected, b)
    fix = lx.bitwise_and(lx.ne(mod, common.const(mod, 0)), lx.ne(lx.sign(b), lx.sign(mod)))
    mod = lx.select(fix, lx.add(mod, b), mod)
    # full_like keeps div's weak type (a numpy 1 would make the result strong)
    div = lx.select(fix, lx.sub(div, lx.full_like(div, 1)), div)
    return lx.round(div), mod


def remainder(x: ArrayLike, y: ArrayLike) -> Array:
    """Remainder with the sign of the divisor (Python's ``%``)."""
    a, b = promote_args_numeric("remainder", x, y)
    dtype = _dtype_of(a)
    if dtype in common.COMPLEX:
        raise TypeError("remainder does not support complex-valued inputs")
    zero = common.const(a, 0)
    if dtype in common.INT:
        b = lx.select(lx.eq(b, common.const(b, 0)), lx.full_like(b, 1), b)
    trunc = lx.rem(a, b)
    nonzero = lx.ne(trunc, zero)
    if dtype in common.UNSIGNED:
        return trunc
    fix = lx.bitwise_and(lx.ne(lx.lt(trunc, zero), lx.lt(b, common.const(b, 0))), nonzero)
    return lx.select(fix, lx.add(trunc, b), trunc)


mod = remainder


def divmod_(x: ArrayLike, y: ArrayLike) -> tuple[Array, Array]:
    return floor_divide(x, y), remainder(x, y)


def _pow_int_int(x: Any, y: Any) -> Any:
    """Integer power by binary exponentiation over the low 6 bits of ``y``
    (larger exponents overflow for any base other than 0, 1 and -1)."""
    one_y, zero_y = common.const(y, 1), common.const(y, 0)
    acc = lx.select(lx.bitwise_and(lx.lt(y, zero_y), lx.ne(x, common.const(x, 1))),
                    lx.full_like(x, 0), lx.full_like(x, 1)) if _dtype_of(y) in common.SIGNED \
        else lx.full_like(x, 1)
    for _ in range(6):
        acc = lx.select(lx.ne(lx.bitwise_and(y, one_y), zero_y), lx.mul(acc, x), acc)
        x = lx.mul(x, x)
        y = lx.shift_right_logical(y, one_y)
    return acc


def power(x: ArrayLike, y: ArrayLike) -> Array:
    """``x ** y``: a static Python int exponent uses ``integer_pow``."""
    check_arraylike("power", x, y)
    if type(y) is int and not isinstance(x, _SCALAR_TYPES):
        (a,) = promote_dtypes_numeric(x)
        if _dtype_of(a) in common.INT and y < 0:
            raise ValueError("Integers to negative integer powers are not allowed.")
        return lx.integer_pow(a, y)
    a, b = promote_args_numeric("power", x, y)
    dtype = _dtype_of(a)
    if dtype in common.INT:
        return _pow_int_int(*promote_shapes("power", *broadcast_arrays(a, b)))
    return lx.pow(a, b)


def negative(x: ArrayLike) -> Array:
    check_arraylike("negative", x)
    if _dtype_of(x) == dtypes.bool_:
        raise TypeError("The numpy boolean negative, the `-` operator, is not supported, use "
                        "the `~` operator or the logical_not function instead.")
    return lx.neg(x)


def positive(x: ArrayLike) -> Array:
    check_arraylike("positive", x)
    return x


def invert(x: ArrayLike) -> Array:
    check_arraylike("invert", x)
    _check_int_or_bool("invert", x)
    return lx.bitwise_not(x)


def absolute(x: ArrayLike) -> Array:
    check_arraylike("absolute", x)
    dtype = _dtype_of(x)
    if dtype in common.UNSIGNED or dtype == dtypes.bool_:
        return x
    return lx.abs(x)


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Array:
    """``x`` where ``condition`` else ``y``, broadcasting all three."""
    check_arraylike("where", condition, x, y)
    x, y = promote_dtypes(x, y)
    if _dtype_of(condition) != dtypes.bool_:
        condition = lx.ne(condition, common.const(condition, 0))
    condition, x, y = broadcast_arrays(condition, x, y)
    return lx.select(condition, x, y)


def clip(x: ArrayLike, min: ArrayLike | None = None, max: ArrayLike | None = None) -> Array:
    """``x`` limited to ``[min, max]`` (either bound may be ``None``)."""
    check_arraylike("clip", x)
    if min is not None:
        x = maximum(min, x)
    if max is not None:
        x = minimum(max, x)
    return x


def round(x: ArrayLike, decimals: int = 0) -> Array:
    """Round half to even, to ``decimals`` places."""
    check_arraylike("round", x)
    decimals = operator.index(decimals)
    dtype = _dtype_of(x)
    if dtype in common.BOOL_OR_INT:
        if decimals < 0:
            raise NotImplementedError("integer np.round not implemented for decimals < 0")
        return x
    if dtype in common.COMPLEX:
        return lx.complex(round(lx.real(x), decimals), round(lx.imag(x), decimals))
    if decimals == 0:
        return lx.round(x, lx.RoundingMethod.TO_NEAREST_EVEN)
    factor = common.const(x, 10.0 ** decimals)
    return lx.div(lx.round(lx.mul(x, factor), lx.RoundingMethod.TO_NEAREST_EVEN), factor)


def conjugate(x: ArrayLike) -> Array:
    return lx.conj(x) if _dtype_of(x) in common.COMPLEX else x


def real(x: ArrayLike) -> Array:
    return lx.real(x) if _dtype_of(x) in common.COMPLEX else x


def imag(x: ArrayLike) -> Array:
    return lx.imag(x) if _dtype_of(x) in common.COMPLEX else lx.full_like(x, 0)


def astype(x: ArrayLike, dtype: Any) -> Array:
    """``x`` converted to ``dtype`` (complex to real keeps the real part)."""
    new = dtypes.canonicalize_dtype(dtype)
    return lx.convert._convert_element_type(x, new, False, warn_on_complex_to_real_cast=False)


# --- shapes -------------------------------------------------------------------------------------
def _canonical_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(common.canonicalize_axis(a, ndim) for a in axis)
    else:
        axes = (common.canonicalize_axis(axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis: {axis}")
    return axes


def reshape(x: ArrayLike, *shape: Any, order: str = "C") -> Array:
    """``x`` reshaped (one dimension may be -1)."""
    if order != "C":
        raise NotImplementedError("only C-order reshape is supported")
    new_shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    new = [operator.index(d) for d in new_shape]
    size = math.prod(typeof(x).shape)
    if new.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in new:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or size % known:
            raise TypeError(f"cannot reshape array of shape {typeof(x).shape} (size {size}) "
                            f"into shape {tuple(new_shape)}")
        new[new.index(-1)] = size // known
    if math.prod(new) != size:
        raise TypeError(f"cannot reshape array of shape {typeof(x).shape} (size {size}) into "
                        f"shape {tuple(new_shape)} (size {math.prod(new)})")
    return lx.reshape(x, tuple(new))


def ravel(x: ArrayLike) -> Array:
    return lx.reshape(x, (math.prod(typeof(x).shape),))


def transpose(x: ArrayLike, axes: Sequence[int] | None = None) -> Array:
    nd = len(typeof(x).shape)
    if axes is None:
        perm = tuple(range(nd - 1, -1, -1))
    else:
        perm = tuple(common.canonicalize_axis(a, nd) for a in axes)
        if sorted(perm) != list(range(nd)):
            raise ValueError(f"axes {tuple(axes)} don't match array of rank {nd}")
    return lx.transpose(x, perm)


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Array:
    nd = len(typeof(x).shape)
    a, b = common.canonicalize_axis(axis1, nd), common.canonicalize_axis(axis2, nd)
    perm = list(range(nd))
    perm[a], perm[b] = perm[b], perm[a]
    return lx.transpose(x, tuple(perm))


def matrix_transpose(x: ArrayLike) -> Array:
    nd = len(typeof(x).shape)
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions; got {nd}")
    return swapaxes(x, -1, -2)


def squeeze(x: ArrayLike, axis: int | Sequence[int] | None = None) -> Array:
    shape = typeof(x).shape
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = _canonical_axes(axis, len(shape))
        for a in axes:
            if shape[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 f"equal to one, got shape={shape} and dimensions={axes}")
    return lx.squeeze(x, axes)


def expand_dims(x: ArrayLike, axis: int | Sequence[int]) -> Array:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return lx.expand_dims(x, axes)


# --- reductions -------------------------------------------------------------------------------
def _sum_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """NumPy's accumulation type for sum/prod: small ints widen to the default."""
    if dtype == dtypes.bool_:
        return dtypes.default_int_dtype()
    if dtype in common.SIGNED and dtype.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.default_int_dtype()
    if dtype in common.UNSIGNED and dtype.itemsize < dtypes.default_uint_dtype().itemsize:
        return dtypes.default_uint_dtype()
    return dtype


def _keepdims(out: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    return lx.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _reduction(name: str, x: ArrayLike, axis: Any, dtype: Any, keepdims: bool,
               initial: Any, where_: Any, reducer: Callable[[Any, tuple[int, ...]], Any],
               identity: Any, combine: Callable[[Any, Any], Any] | None,
               result_dtype: np.dtype[Any] | None) -> Array:
    check_arraylike(name, x)
    shape = typeof(x).shape
    axes = _canonical_axes(axis, len(shape))
    if result_dtype is not None:
        x = lx.convert_element_type_internal(x, result_dtype, typeof(x).weak_type)
    if where_ is not None:
        if identity is None:
            if initial is None:
                raise ValueError(f"reduction operation {name} does not have an identity, so "
                                 "to use a where mask one has to specify 'initial'")
            fill = initial
        else:
            fill = identity
        x = where(where_, x, lx.convert_element_type_internal(fill, _dtype_of(x),
                                                              typeof(x).weak_type))
        shape = typeof(x).shape
    if identity is None and initial is None and builtins.any(shape[a] == 0 for a in axes):
        raise ValueError(f"zero-size array to reduction operation {name} which has no "
                         "identity")
    out = reducer(x, axes)
    if initial is not None and combine is not None:
        out = combine(out, lx.convert_element_type_internal(initial, _dtype_of(out), False))
    if keepdims:
        out = _keepdims(out, shape, axes)
    return out


def sum(x: ArrayLike, axis: Any = None, dtype: Any = None, keepdims: bool = False,
        initial: Any = None, where: Any = None) -> Array:
    rd = dtypes.canonicalize_dtype(dtype) if dtype is not None else _sum_dtype(_dtype_of(x))
    if rd == dtypes.bool_:
        return _reduction("sum", x, axis, None, keepdims, initial, where, lx.reduce_or,
                          False, lx.bitwise_or, None)
    return _reduction("sum", x, axis, dtype, keepdims, initial, where, lx.reduce_sum, 0,
                      lx.add, rd)


def prod(x: ArrayLike, axis: Any = None, dtype: Any = None, keepdims: bool = False,
         initial: Any = None, where: Any = None) -> Array:
    rd = dtypes.canonicalize_dtype(dtype) if dtype is not None else _sum_dtype(_dtype_of(x))
    return _reduction("prod", x, axis, dtype, keepdims, initial, where, lx.reduce_prod, 1,
                      lx.mul, rd)


def max(x: ArrayLike, axis: Any = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Array:
    return _reduction("max", x, axis, None, keepdims, initial, where, lx.reduce_max, None,
                      lx.max, None)


def min(x: ArrayLike, axis: Any = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Array:
    return _reduction("min", x, axis, None, keepdims, initial, where, lx.reduce_min, None,
                      lx.min, None)


def _as_bool(x: Any) -> Any:
    return x if _dtype_of(x) == dtypes.bool_ else lx.ne(x, common.const(x, 0))


def any(x: ArrayLike, axis: Any = None, keepdims: bool = False, where: Any = None) -> Array:
    check_arraylike("any", x)
    return _reduction("any", _as_bool(x), axis, None, keepdims, None, where, lx.reduce_or,
                      False, None, None)


def all(x: ArrayLike, axis: Any = None, keepdims: bool = False, where: Any = None) -> Array:
    check_arraylike("all", x)
    return _reduction("all", _as_bool(x), axis, None, keepdims, None, where, lx.reduce_and,
                      True, None, None)


def mean(x: ArrayLike, axis: Any = None, dtype: Any = None, keepdims: bool = False,
         where: Any = None) -> Array:
    check_arraylike("mean", x)
    shape = typeof(x).shape
    axes = _canonical_axes(axis, len(shape))
    if dtype is None:
        rd = _to_inexact(_dtype_of(x))
    else:
        rd = dtypes.canonicalize_dtype(dtype)
    weak = typeof(x).weak_type
    total = sum(lx.convert_element_type_internal(x, rd, weak), axis, None, keepdims, None, where)
    if where is None:
        count: Any = math.prod(shape[a] for a in axes)
        return lx.div(total, common.const(total, count))
    mask = broadcast_to(where, shape)
    count = sum(mask, axis, rd, keepdims)
    return lx.div(total, count)


def _index_dtype() -> np.dtype[Any]:
    return dtypes.default_int_dtype()


def argmax(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Array:
    check_arraylike("argmax", x)
    if axis is None:
        out = lx.argmax(ravel(x), 0, _index_dtype())
        return lx.reshape(out, (1,) * len(typeof(x).shape)) if keepdims else out
    nd = len(typeof(x).shape)
    a = common.canonicalize_axis(axis, nd)
    out = lx.argmax(x, a, _index_dtype())
    return lx.expand_dims(out, (a,)) if keepdims else out


def argmin(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Array:
    check_arraylike("argmin", x)
    if axis is None:
        out = lx.argmin(ravel(x), 0, _index_dtype())
        return lx.reshape(out, (1,) * len(typeof(x).shape)) if keepdims else out
    nd = len(typeof(x).shape)
    a = common.canonicalize_axis(axis, nd)
    out = lx.argmin(x, a, _index_dtype())
    return lx.expand_dims(out, (a,)) if keepdims else out


def cumsum(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Array:
    check_arraylike("cumsum", x)
    if axis is None:
        x, axis = ravel(x), 0
    rd = dtypes.canonicalize_dtype(dtype) if dtype is not None else _sum_dtype(_dtype_of(x))
    x = lx.convert_element_type_internal(x, rd, typeof(x).weak_type)
    return lx.cumsum(x, common.canonicalize_axis(axis, len(typeof(x).shape)))


def cumprod(x: ArrayLike, axis: int | None = None, dtype: Any = None) -> Array:
    check_arraylike("cumprod", x)
    if axis is None:
        x, axis = ravel(x), 0
    rd = dtypes.canonicalize_dtype(dtype) if dtype is not None else _sum_dtype(_dtype_of(x))
    x = lx.convert_element_type_internal(x, rd, typeof(x).weak_type)
    return lx.cumprod(x, common.canonicalize_axis(axis, len(typeof(x).shape)))


def sort(x: ArrayLike, axis: int | None = -1, *, stable: bool = True,
         descending: bool = False) -> Array:
    check_arraylike("sort", x)
    if axis is None:
        x, axis = ravel(x), 0
    dim = common.canonicalize_axis(axis, len(typeof(x).shape))
    out = lx.sort(x, dim, is_stable=stable)
    return lx.rev(out, (dim,)) if descending else out


def argsort(x: ArrayLike, axis: int | None = -1, *, stable: bool = True,
            descending: bool = False) -> Array:
    check_arraylike("argsort", x)
    if axis is None:
        x, axis = ravel(x), 0
    shape = typeof(x).shape
    dim = common.canonicalize_axis(axis, len(shape))
    iota = lx.broadcasted_iota(_index_dtype(), shape, dim)
    if descending:
        # Reversing keeps equal keys in their original order (stable descending).
        keys = lx.rev(x, (dim,))
        _, idx = lx.sort([keys, iota], dim, is_stable=stable, num_keys=1)
        n = shape[dim]
        return lx.sub(common.const(idx, n - 1), lx.rev(idx, (dim,)))
    _, idx = lx.sort([x, iota], dim, is_stable=stable, num_keys=1)
    return idx


# --- products ---------------------------------------------------------------------------------
def dot(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
        preferred_element_type: Any = None) -> Array:
    """NumPy's ``dot``: a product of scalars, or a contraction of ``a``'s last
    axis with ``b``'s second-to-last (its only axis if 1-D)."""
    check_arraylike("dot", a, b)
    a, b = promote_dtypes(a, b)
    a_nd, b_nd = len(typeof(a).shape), len(typeof(b).shape)
    if a_nd == 0 or b_nd == 0:
        return multiply(a, b)
    contract_b = 0 if b_nd == 1 else b_nd - 2
    return lx.dot_general(a, b, (((a_nd - 1,), (contract_b,)), ((), ())), precision=precision,
                          preferred_element_type=_preferred(a, preferred_element_type))


def _preferred(a: Any, preferred_element_type: Any) -> Any:
    """As JAX's ``dot``/``matmul``: the product accumulates in the promoted
    dtype unless told otherwise (it shows as ``preferred_element_type``)."""
    return _dtype_of(a) if preferred_element_type is None else preferred_element_type


_MATMUL_2D = (((1,), (0,)), ((), ()))


def matmul(a: ArrayLike, b: ArrayLike, *, precision: Any = None,
           preferred_element_type: Any = None) -> Array:
    """NumPy's ``matmul`` (``@``): batched matrix product with broadcast batch dims."""
    aa, ab = _fast_aval(a), _fast_aval(b)
    if aa is not None and ab is not None and aa.dtype == ab.dtype \
            and aa.weak_type == ab.weak_type and len(aa.shape) == 2 and len(ab.shape) == 2:
        # the common case: two matrices of one type
        if aa.shape[1] != ab.shape[0]:
            raise ValueError(f"matmul: dimension mismatch with signature (n,k),(k,m)->(n,m): "
                             f"got {aa.shape[1]} and {ab.shape[0]}")
        return lx.dot_general(a, b, _MATMUL_2D, precision=precision,
                              preferred_element_type=aa.dtype if preferred_element_type
                              is None else preferred_element_type)
    check_arraylike("matmul", a, b)
    a, b = promote_dtypes(a, b)
    a_shape, b_shape = typeof(a).shape, typeof(b).shape
    if not a_shape or not b_shape:
        raise ValueError(f"matmul: inputs must have at least 1 dimension, got shapes "
                         f"{a_shape} and {b_shape}")
    a_vec, b_vec = len(a_shape) == 1, len(b_shape) == 1
    if a_vec:
        a = lx.expand_dims(a, (0,))
    if b_vec:
        b = lx.expand_dims(b, (1,))
    a_shape, b_shape = typeof(a).shape, typeof(b).shape
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"matmul: dimension mismatch with signature (n,k),(k,m)->(n,m): "
                         f"got {a_shape[-1]} and {b_shape[-2]}")
    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    if a_shape[:-2] != batch:
        a = broadcast_to(a, batch + a_shape[-2:])
    if b_shape[:-2] != batch:
        b = broadcast_to(b, batch + b_shape[-2:])
    nb = len(batch)
    bd = tuple(range(nb))
    out = lx.dot_general(a, b, (((nb + 1,), (nb,)), (bd, bd)), precision=precision,
                         preferred_element_type=_preferred(a, preferred_element_type))
    squeeze_axes = ((nb,) if a_vec else ()) + ((len(typeof(out).shape) - 1,) if b_vec else ())
    return lx.squeeze(out, squeeze_axes) if squeeze_axes else out


# --- indexing -----------------------------------------------------------------------------------
def _is_int_scalar(e: Any) -> bool:
    return isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))


def _is_index_array(e: Any) -> bool:
    """An array-valued (or traced scalar) index, as opposed to int/slice/None."""
    if isinstance(e, (slice, type(None), type(Ellipsis))) or _is_int_scalar(e):
        return False
    if isinstance(e, (bool, np.bool_)):
        return False
    return True


def _expand_index(shape: tuple[int, ...], idx: Any) -> list[Any]:
    """``idx`` as a list with Ellipsis expanded, lists/tuples of ints as arrays,
    and boolean masks as integer arrays (one per masked axis)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out: list[Any] = []
    for e in idx:
        if isinstance(e, np.ndarray) and e.ndim == 0 and e.dtype.kind in "iu":
            e = int(e)
        if isinstance(e, (list, tuple)) and not isinstance(e, str):
            e = np.asarray(e)
            if e.dtype == object or e.dtype.kind not in "biu":
                if e.size == 0:
                    e = e.astype(np.int32)
                else:
                    raise IndexError(f"Using a non-integer sequence as an index is not "
                                     f"supported: {idx!r}")
        out.append(e)
    n_ellipsis = builtins.sum(1 for e in out if e is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = 0
    for e in out:
        if e is None or e is Ellipsis:
            continue
        if isinstance(e, (bool, np.bool_)):
            continue
        if _is_index_array(e) and typeof(e).dtype == dtypes.bool_:
            consumed += len(typeof(e).shape)
        else:
            consumed += 1
    if consumed > len(shape):
        raise IndexError(f"Too many indices for array: {consumed} non-None/Ellipsis indices "
                         f"for dim {len(shape)}.")
    if n_ellipsis:
        i = out.index(Ellipsis)
        out[i:i + 1] = [slice(None)] * (len(shape) - consumed)
    else:
        out.extend([slice(None)] * (len(shape) - consumed))
    # Boolean masks -> integer index arrays (their values must be known).
    expanded: list[Any] = []
    for e in out:
        if _is_index_array(e) and typeof(e).dtype == dtypes.bool_:
            val = concrete_value(e)
            if val is None:
                raise NonConcreteBooleanIndexError(e)
            expanded.extend(np.nonzero(val) if val.ndim else [np.nonzero(val)[0]])
            if val.ndim == 0:
                raise IndexError("a scalar boolean array index is not supported; use "
                                 "x[None] or an empty slice")
        else:
            expanded.append(e)
    return expanded


def _check_index_dtype(e: Any) -> None:
    dtype = typeof(e).dtype
    if dtype not in common.INT:
        # a TypeError, as JAX; a Python float is named by its own type (float64)
        named = np.asarray(e).dtype if isinstance(e, (float, complex)) else dtype
        raise TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                        f"{named.name}")


def _normalize_index(i: Any, size: int) -> Any:
    """A (traced) integer index with negative values counted from the end."""
    dtype = typeof(i).dtype
    if dtype in common.UNSIGNED:
        return i
    if size > np.iinfo(dtype).max:
        i = lx.convert_element_type(i, dtypes.int64 if dtypes.x64_enabled() else dtypes.int32)
        dtype = typeof(i).dtype
    return lx.select(lx.lt(i, common.const(dtype, 0)), lx.add(i, common.const(dtype, size)), i)


def _static_slice(x: Any, axis: int, s: slice) -> Any:
    size = typeof(x).shape[axis]
    start, stop, step = s.indices(size)
    if step > 0:
        if start == 0 and stop >= size and step == 1:
            return x
        return lx.slice_in_dim(x, start, builtins.max(start, stop), step, axis)
    # A negative step: take the forward slice of the same elements, then reverse.
    n = len(range(start, stop, step))
    if n == 0:
        return lx.slice_in_dim(x, 0, 0, 1, axis)
    first = start + (n - 1) * step
    fwd = lx.slice_in_dim(x, first, start + 1, -step, axis)
    return lx.rev(fwd, (axis,))


def _static_index(x: Any, entries: list[Any]) -> Any:
    """``x`` indexed by static ints and slices only: as JAX, one ``slice`` of
    every axis, a ``rev`` of the axes with negative steps, and a ``squeeze``
    of the int-indexed axes (each only when needed)."""
    shape = typeof(x).shape
    starts, limits, strides = [], [], []
    rev_axes, int_axes = [], []
    for axis, e in enumerate(entries):
        size = shape[axis]
        if isinstance(e, slice):
            start, stop, step = e.indices(size)
            if step > 0:
                starts.append(start)
                limits.append(builtins.max(start, stop))
                strides.append(step)
                continue
            # a negative step: the forward slice of the same elements, reversed
            n = len(range(start, stop, step))
            if n == 0:
                starts.append(0)
                limits.append(0)
                strides.append(1)
                continue
            starts.append(start + (n - 1) * step)
            limits.append(start + 1)
            strides.append(-step)
            rev_axes.append(axis)
            continue
        i = operator.index(e)
        if not -size <= i < size:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {size}")
        i = i + size if i < 0 else i
        starts.append(i)
        limits.append(i + 1)
        strides.append(1)
        int_axes.append(axis)
    if builtins.any(starts) or tuple(limits) != shape or builtins.any(s != 1 for s in strides):
        x = lx.slice(x, starts, limits,
                     None if builtins.all(s == 1 for s in strides) else strides)
    if rev_axes:
        x = lx.rev(x, tuple(rev_axes))
    return lx.squeeze(x, tuple(int_axes)) if int_axes else x


_EMPTY = object()  # a False scalar index: a new axis of size 0


def _getitem_core(x: Any, idx: Any, mode: Any = None, fill_value: Any = None) -> Any:
    shape = typeof(x).shape
    entries = _expand_index(shape, idx)
    # None (and Python bools, which index like a new axis of size 1 for True,
    # 0 for False): insert a size-1 axis and index it with a full slice.
    new_axes = [i for i, e in enumerate(entries) if e is None or isinstance(e, (bool, np.bool_))]
    if new_axes:
        x = lx.expand_dims(x, tuple(new_axes))
        entries = [slice(None) if e is None or (isinstance(e, (bool, np.bool_)) and e)
                   else slice(0, 0) if isinstance(e, (bool, np.bool_)) else e
                   for e in entries]
    has_array_nd = builtins.any(_is_index_array(e) and typeof(e).shape for e in entries)
    has_scalar_array = builtins.any(_is_index_array(e) for e in entries)
    if mode == lx.GatherScatterMode.FILL_OR_DROP:
        # Static ints too are gathered, so out-of-range ones read the fill value.
        has_scalar_array = has_scalar_array or builtins.any(_is_int_scalar(e) for e in entries)
    if not has_array_nd and not has_scalar_array:
        return _static_index(x, entries)
    # Static slices first (they keep their axes).
    for axis, e in enumerate(entries):
        if isinstance(e, slice):
            x = _static_slice(x, axis, e)
    shape = typeof(x).shape
    if has_array_nd or (has_scalar_array and mode == lx.GatherScatterMode.FILL_OR_DROP):
        return _advanced_gather(x, entries, mode, fill_value)
    # Scalar (possibly traced) ints: a dynamic slice, clamped into range.
    starts: list[Any] = []
    sizes = list(shape)
    squeeze_axes = []
    for axis, e in enumerate(entries):
        if isinstance(e, slice):
            starts.append(0)
            continue
        squeeze_axes.append(axis)
        sizes[axis] = 1
        if _is_int_scalar(e):
            i = operator.index(e)
            if not -shape[axis] <= i < shape[axis]:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size "
                                 f"{shape[axis]}")
            starts.append(i + shape[axis] if i < 0 else i)
        else:
            _check_index_dtype(e)
            starts.append(e)
    idx_dtype = next((typeof(s).dtype for s in starts if not isinstance(s, int)), dtypes.int32)
    starts = [np.array(s, idx_dtype) if isinstance(s, int) else s for s in starts]
    out = lx.dynamic_slice(x, starts, sizes)
    return lx.squeeze(out, tuple(squeeze_axes))


def _advanced_gather(x: Any, entries: list[Any], mode: Any, fill_value: Any) -> Any:
    """NumPy advanced indexing (arrays, with ints as 0-d arrays) after all
    slices are full: one gather."""
    shape = typeof(x).shape
    adv_pos = [i for i, e in enumerate(entries) if not isinstance(e, slice)]
    arrays = []
    for i in adv_pos:
        e = entries[i]
        if _is_int_scalar(e):
            e = np.array(e, dtypes.int32 if -2 ** 31 <= e < 2 ** 31 else dtypes.int64)
        elif isinstance(e, np.ndarray) and e.dtype.kind in "iu":
            e = e.astype(dtypes.canonicalize_dtype(e.dtype))
        _check_index_dtype(e)
        arrays.append(_normalize_index(e, shape[i]))
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    adv_shape = broadcast_shapes(*(typeof(a).shape for a in arrays))
    arrays = promote_dtypes(*arrays)
    arrays = [broadcast_to(a, adv_shape) for a in arrays]
    nb = len(adv_shape)
    indices = lx.concatenate([lx.expand_dims(a, (nb,)) for a in arrays], nb) \
        if len(arrays) > 1 else lx.expand_dims(arrays[0], (nb,))
    rest = [i for i in range(len(shape)) if i not in adv_pos]
    first = adv_pos[0] if contiguous else 0
    # Output: rest dims before `first`, the advanced block, then the other rest dims.
    n_before = builtins.sum(1 for r in rest if r < first) if contiguous else 0
    offset_dims = tuple(list(range(n_before)) +
                        list(range(n_before + nb, n_before + nb + len(rest) - n_before)))
    dnums = lx.GatherDimensionNumbers(offset_dims=offset_dims,
                                      collapsed_slice_dims=tuple(sorted(adv_pos)),
                                      start_index_map=tuple(adv_pos))
    slice_sizes = tuple(1 if i in adv_pos else d for i, d in enumerate(shape))
    return lx.gather(x, indices, dnums, slice_sizes, mode=mode, fill_value=fill_value)


def getitem(x: Any, idx: Any) -> Array:
    """``x[idx]`` with NumPy semantics (ints, slices, None, Ellipsis, integer and
    boolean arrays); traced integer indices are clamped into range."""
    if isinstance(idx, int) and not isinstance(idx, bool) and _fast_int_ok(x):
        return _getitem_int(x, idx)
    return _getitem_core(x, idx, mode=lx.GatherScatterMode.PROMISE_IN_BOUNDS)


def _fast_int_ok(x: Any) -> bool:
    return len(typeof(x).shape) >= 1


def _getitem_int(x: Any, i: int) -> Any:
    shape = typeof(x).shape
    size = shape[0]
    if not -size <= i < size:
        raise IndexError(f"index {i} is out of bounds for axis 0 with size {size}")
    i = i + size if i < 0 else i
    return lx.squeeze(lx.slice_in_dim(x, i, i + 1, 1, 0), (0,))


_SCATTERS: dict[str, Callable[..., Any]] = {
    "set": lx.scatter, "add": lx.scatter_add, "mul": lx.scatter_mul, "min": lx.scatter_min,
    "max": lx.scatter_max}


def index_update(x: Any, idx: Any, values: ArrayLike, op: str, *,
                 indices_are_sorted: bool = False, unique_indices: bool = False,
                 mode: Any = None) -> Array:
    """``x`` with ``x[idx]`` combined with ``values`` by ``op`` ('set', 'add',
    'mul', 'min', 'max'); out-of-bounds updates are dropped unless
    ``mode='clip'``.

    The positions are found by indexing a flat iota of ``x``'s size with
    ``idx`` (so every NumPy index form works), then one 1-D scatter updates
    the flattened ``x``.
    """
    check_arraylike(f"at[...].{op}", values)
    shape = typeof(x).shape
    dtype = _dtype_of(x)
    box = _static_box(shape, idx)
    if box is not None:
        return _box_update(x, box, values, op)
    size = math.prod(shape)
    pos_dtype = dtypes.int32 if size < 2 ** 31 else dtypes.int64
    iota = lx.reshape(lx.iota(pos_dtype, size), shape) if shape else \
        np.zeros((), pos_dtype)
    parsed = lx.GatherScatterMode.from_any(mode)
    if parsed == lx.GatherScatterMode.CLIP:
        positions = _getitem_core(iota, idx, mode=lx.GatherScatterMode.CLIP)
    else:
        # Out-of-bounds windows read as `size`, which the scatter then drops.
        positions = _getitem_core(iota, idx, mode=lx.GatherScatterMode.FILL_OR_DROP,
                                  fill_value=size)
    pos_shape = typeof(positions).shape
    values = lx.convert_element_type_internal(asarray(values), dtype, typeof(x).weak_type)
    values = broadcast_to(values, pos_shape)
    flat = lx.reshape(x, (size,))
    n = len(pos_shape)
    dnums = lx.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
    out = _SCATTERS[op](flat, lx.expand_dims(positions, (n,)), values, dnums,
                        indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                        mode=lx.GatherScatterMode.FILL_OR_DROP
                        if parsed != lx.GatherScatterMode.CLIP else parsed)
    return lx.reshape(out, shape)


_BOX_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: lx.bitwise_or(a, b) if _dtype_of(a) == dtypes.bool_ else lx.add(a, b),
    "mul": lambda a, b: lx.bitwise_and(a, b) if _dtype_of(a) == dtypes.bool_ else lx.mul(a, b),
    "min": lx.min, "max": lx.max}


def _static_box(shape: tuple[int, ...], idx: Any) -> tuple[list[int], list[int], list[int]] | None:
    """For an index of in-range static ints and unit-step slices (and
    Ellipsis): the box it selects as (starts, sizes, int axes); else None."""
    entries = idx if isinstance(idx, tuple) else (idx,)
    if builtins.any(e is Ellipsis for e in entries):
        if builtins.sum(1 for e in entries if e is Ellipsis) > 1:
            return None
        i = entries.index(Ellipsis)
        entries = entries[:i] + (slice(None),) * (len(shape) - len(entries) + 1) + \
            entries[i + 1:]
    if len(entries) > len(shape):
        return None
    entries = entries + (slice(None),) * (len(shape) - len(entries))
    starts, sizes, int_axes = [], [], []
    for axis, (e, d) in enumerate(zip(entries, shape)):
        if _is_int_scalar(e):
            i = operator.index(e)
            if not -d <= i < d:
                return None
            starts.append(i + d if i < 0 else i)
            sizes.append(1)
            int_axes.append(axis)
        elif isinstance(e, slice) and e.step in (None, 1):
            start, stop, _ = e.indices(d)
            starts.append(start)
            sizes.append(builtins.max(stop - start, 0))
        else:
            return None
    return starts, sizes, int_axes


def _box_update(x: Any, box: tuple[list[int], list[int], list[int]], values: ArrayLike,
                op: str) -> Array:
    """A static-box index update as slice/combine/dynamic_update_slice."""
    starts, sizes, int_axes = box
    shape = typeof(x).shape
    if 0 in sizes:
        return x
    view_shape = tuple(s for i, s in enumerate(sizes) if i not in int_axes)
    values = lx.convert_element_type_internal(asarray(values), _dtype_of(x), typeof(x).weak_type)
    values = lx.reshape(broadcast_to(values, view_shape), tuple(sizes))
    if op != "set":
        current = lx.slice(x, starts, [s + n for s, n in zip(starts, sizes)])
        values = _BOX_OPS[op](current, values)
    if tuple(sizes) == shape:
        return values
    idx_starts = [np.array(s, dtypes.int32) for s in starts]
    return lx.dynamic_update_slice(x, values, idx_starts)


class _IndexUpdateRef:
    """``x.at[idx]``: the functional counterpart of ``x[idx] = ...``."""

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any):
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False,
            mode: Any = None, fill_value: Any = None) -> Array:
        if mode is None:
            return getitem(self.array, self.index)
        return _getitem_core(self.array, self.index, lx.GatherScatterMode.from_any(mode),
                             fill_value)

    def set(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "set",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def add(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "add",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def subtract(self, values: ArrayLike, *, indices_are_sorted: bool = False,
                 unique_indices: bool = False, mode: Any = None) -> Array:
        return self.add(negative(asarray(values)), indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)

    def mul(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "mul",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    multiply = mul

    def divide(self, values: ArrayLike, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None) -> Array:
        if _dtype_of(self.array) not in common.INEXACT:
            raise TypeError("x.at[...].divide requires an inexact (float or complex) array")
        recip = true_divide(common.const(self.array, 1), asarray(values))
        return self.mul(recip, indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)

    def min(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "min",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)

    def max(self, values: ArrayLike, *, indices_are_sorted: bool = False,
            unique_indices: bool = False, mode: Any = None) -> Array:
        return index_update(self.array, self.index, values, "max",
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode)


class _IndexUpdateHelper:
    """The object ``x.at`` returns; ``x.at[idx]`` is an ``_IndexUpdateRef``."""

    __slots__ = ("array",)

    def __init__(self, array: Any):
        self.array = array

    def __getitem__(self, index: Any) -> _IndexUpdateRef:
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


def iterate(x: Any) -> Any:
    """``iter(x)``: the sub-arrays along the first axis."""
    shape = typeof(x).shape
    if not shape:
        raise TypeError("iteration over a 0-d array")
    return (_getitem_int(x, i) for i in range(shape[0]))


__all__ = [
    "NonConcreteBooleanIndexError", "is_array_like", "check_arraylike", "concrete_value",
    "result_type", "promote_dtypes", "promote_dtypes_inexact", "promote_dtypes_numeric",
    "broadcast_shapes", "promote_shapes", "promote_args", "promote_args_inexact",
    "promote_args_numeric", "asarray", "broadcast_to", "broadcast_arrays", "add", "subtract",
    "multiply", "true_divide", "divide", "floor_divide", "remainder", "mod", "divmod_",
    "power", "negative", "positive", "invert", "absolute", "maximum", "minimum", "equal",
    "not_equal", "less", "less_equal", "greater", "greater_equal", "bitwise_and",
    "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "arctan2", "where", "clip",
    "round", "conjugate", "real", "imag", "astype", "reshape", "ravel", "transpose",
    "swapaxes", "matrix_transpose", "squeeze", "expand_dims", "sum", "prod", "max", "min",
    "any", "all", "mean", "argmax", "argmin", "cumsum", "cumprod", "sort", "argsort", "dot",
    "matmul", "getitem", "index_update", "iterate", "LaminaTypeError", "get_aval"]
