"""Argument handling shared by every ``lamina.numpy`` function.

lax never promotes or broadcasts; NumPy does both. The helpers here turn what
users pass (Python scalars, nested lists, numpy arrays, lamina Arrays,
tracers) into lax operands following JAX's rules:

- Python scalars are *weakly typed*: they take the dtype of the strongly typed
  values they meet (``x_f16 + 1.0`` is float16), see ``tracing_core.dtypes``.
- numpy arrays are strongly typed, in their canonical dtype (float64 becomes
  float32 unless x64 is on).
- Shapes broadcast as in NumPy: lower-rank operands get leading size-1 axes
  (rank-0 operands are left alone; lax broadcasts those), and size-1 axes are
  expanded by lax's degenerate broadcasting.

Errors name the numpy function and the argument.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import core, dtypes, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray, get_aval, has_no_value
from lamina_tracing_core.lax.convert import convert_element_type_internal, convert_element_type_p
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray
from lamina_tracing_core.mesh import TypeSharding
from lamina_tracing_core.out_sharding import resolve_out_sharding
from lamina_tracing_core.trace_settings import state as _settings

Array = Any
ArrayLike = Any
DType = np.dtype[Any]

_PY_SCALARS = (bool, int, float, complex)


class UnsupportedArgumentError(NotImplementedError):
    """A NumPy argument lamina does not implement (``out=``, ``order='F'``...).

    A subclass of NotImplementedError, as JAX raises for ``out=``; raised
    instead of silently ignoring the argument."""


# --- what a value is ------------------------------------------------------------------
def is_lamina_array(x: Any) -> bool:
    """A tracer or runtime Array (anything carrying a ShapedArray aval)."""
    return isinstance(getattr(x, "aval", None), ShapedArray)


def shape_of(x: Any) -> tuple[int, ...]:
    return get_aval(x).shape


def ndim_of(x: Any) -> int:
    return len(get_aval(x).shape)


def qualified(fun: str) -> str:
    """``lamina.numpy.sum`` for ``sum`` (names already qualified stay as they are)."""
    return fun if fun.startswith("lamina.") else f"lamina.numpy.{fun}"


# --- turning user values into lax operands ---------------------------------------------
def operand(fun: str, x: Any, name: str = "x") -> ArrayLike:
    """``x`` as a value lax accepts: tracers, Arrays and Python scalars pass
    through, numpy values are cast to their canonical dtype, (nested) lists
    and tuples become arrays."""
    if is_lamina_array(x) or type(x) in _PY_SCALARS:
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        canon = user_dtype(fun, x.dtype)  # rejects object/string arrays
        return x if x.dtype == canon else np.asarray(x, canon)
    if isinstance(x, (list, tuple)):
        return from_nested(fun, x, name)
    if isinstance(x, _PY_SCALARS):  # bool/int subclasses (IntEnum...)
        return _builtin_scalar(x)
    if hasattr(x, "__jax_array__"):
        return operand(fun, x.__jax_array__(), name)
    if has_no_value(x):  # traces like an array; running it is the dispatch's error
        return x
    if isinstance(x, PRNGKeyArray):
        raise TypeError(f"{qualified(fun)}: argument {name} is a typed PRNG key array "
                        f"(dtype {x.dtype}, shape {x.shape}), which this function does not "
                        "take; lamina.random.key_data(keys) gives its uint32 data")
    raise TypeError(f"{qualified(fun)}: argument {name} must be an array, a scalar or a "
                    f"(nested) list of them, got a value of type {type(x).__name__}")


def _builtin_scalar(x: Any) -> Any:
    """An instance of a Python scalar subclass (``IntEnum``...) as the plain
    scalar it extends, so that it is weakly typed like one."""
    if isinstance(x, bool):
        return bool(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    return complex(x)


def host_array(value: np.ndarray[Any, Any], weak_type: bool) -> Array:
    """A host value as an array of the eval trace: with the runtime loaded, an
    uncommitted device Array on the default device. It is converted on a
    fresh eval trace, so under ``jit`` it stays a constant (no equation), as
    in JAX."""
    with core.new_main(core.EvalTrace, dynamic=True, transform="host constant"):
        return convert_element_type_p.bind(value, new_dtype=value.dtype, weak_type=weak_type,
                                           sharding=None)


def as_array(x: ArrayLike) -> Array:
    """``x`` as a lamina array of its dtype and weak type: a function's result
    is an array even where it computed nothing (``floor(1)``, ``real(0.5)``),
    as JAX's are; tracers and arrays pass through."""
    if is_lamina_array(x) or has_no_value(x):
        return x
    aval = get_aval(x)
    return host_array(np.asarray(x, aval.dtype), aval.weak_type)


def operands(fun: str, *args: Any, names: Sequence[str] | None = None) -> list[ArrayLike]:
    names = names or [f"x{i + 1}" if len(args) > 1 else "x" for i in range(len(args))]
    return [operand(fun, a, n) for a, n in zip(args, names)]


def _nested_leaves(x: Any, out: list[Any]) -> None:
    if isinstance(x, (list, tuple)):
        for v in x:
            _nested_leaves(v, out)
    else:
        out.append(x)


def nested_dtype(fun: str, x: Any) -> tuple[DType, bool]:
    """The ``(dtype, weak)`` of a (nested) list: its leaves promoted; a list
    is strongly typed even when all its leaves are Python scalars (as JAX)."""
    leaves: list[Any] = []
    _nested_leaves(x, leaves)
    if not leaves:
        return dtypes.default_float_dtype(), False
    for leaf in leaves:
        if not (is_lamina_array(leaf) or isinstance(leaf, (*_PY_SCALARS, np.ndarray, np.generic))
                or hasattr(leaf, "__jax_array__")):
            raise TypeError(f"{qualified(fun)}: a list element must be an array or a scalar, "
                            f"got a value of type {type(leaf).__name__}")
    return dtypes.result_type(*leaves), False


def from_nested(fun: str, x: Any, name: str = "x", dtype: DType | None = None) -> ArrayLike:
    """A (nested) list/tuple as one array of ``dtype`` (inferred if None)."""
    if dtype is None:
        dtype = nested_dtype(fun, x)[0]
    leaves: list[Any] = []
    _nested_leaves(x, leaves)
    if not any(is_lamina_array(v) for v in leaves):
        try:
            return np.array(x, dtype=dtype)
        except ValueError as e:
            raise ValueError(f"{qualified(fun)}: argument {name} is a ragged nested sequence "
                             f"({e})") from None
    return _stack_nested(fun, x, dtype)


def _stack_nested(fun: str, x: Any, dtype: DType) -> Array:
    if not isinstance(x, (list, tuple)):
        return lax.convert_element_type(operand(fun, x), dtype)
    parts = [_stack_nested(fun, v, dtype) for v in x]
    shapes = {shape_of(p) for p in parts}
    if len(shapes) > 1:
        raise ValueError(f"{qualified(fun)}: a nested sequence has elements of different shapes "
                         f"{sorted(shapes)}")
    if not parts:
        return np.zeros((0,), dtype)
    return lax.concatenate([lax.expand_dims(p, (0,)) for p in parts], 0)


def user_dtype(fun: str, dtype: Any) -> DType | None:
    """A dtype argument (numpy dtype, type, name or ``jnp.float32``) in its
    canonical form; None stays None."""
    if dtype is None:
        return None
    if isinstance(dtype, type) and not issubclass(dtype, np.generic) and hasattr(dtype, "dtype"):
        dtype = dtype.dtype
    name = qualified(fun)
    try:
        dt: DType = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{name}: {dtype!r} is not a valid dtype") from e
    if dt == dtypes.bfloat16:  # numpy files ml_dtypes' bfloat16 under kind 'V'
        return dt
    return dtypes.check_user_dtype(dt, fun_name=name)


def convert(x: ArrayLike, dtype: Any, weak_type: bool = False) -> ArrayLike:
    """``x`` as ``dtype``; constants are converted here, without an equation."""
    return convert_element_type_internal(x, dtypes.canonicalize_dtype(dtype), weak_type)


def strip_weak(x: ArrayLike) -> ArrayLike:
    """``x`` as a strongly typed value of the same dtype."""
    aval = get_aval(x)
    if not aval.weak_type:
        return x
    return convert_element_type_internal(x, aval.dtype, False)


# --- dtype promotion ----------------------------------------------------------------------
def promote_dtypes(fun: str, *args: Any) -> list[ArrayLike]:
    """The arguments converted to their common (possibly weak) dtype."""
    ops = operands(fun, *args)
    if len(ops) < 2:
        return ops
    dtype, weak = dtypes.result_type(*ops, return_weak_type_flag=True)
    return [convert_element_type_internal(x, dtype, weak) for x in ops]


def promote_dtypes_inexact(fun: str, *args: Any) -> list[ArrayLike]:
    """Promotion, then integers and bools to their inexact dtype (``dtypes.to_inexact_dtype``;
    weakness kept)."""
    ops = operands(fun, *args)
    if ops:
        dtype, weak = dtypes.result_type(*ops, return_weak_type_flag=True)
    else:
        dtype, weak = dtypes.default_float_dtype(), False
    new = dtypes.to_inexact_dtype(dtype)
    return [convert_element_type_internal(x, new, weak) for x in ops]


def promote_dtypes_numeric(fun: str, *args: Any) -> list[ArrayLike]:
    """Promotion, then bools to int32 (JAX's numeric dtype of bool, also with
    x64 on; weakness kept)."""
    ops = operands(fun, *args)
    dtype, weak = dtypes.result_type(*ops, return_weak_type_flag=True)
    new = dtypes.int32 if dtypes.is_boolean(dtype) else dtype
    return [convert_element_type_internal(x, new, weak) for x in ops]


def check_no_complex(fun: str, *args: Any) -> None:
    for x in args:
        if dtypes.is_complex(get_aval(x).dtype):
            raise TypeError(f"{qualified(fun)} does not support complex-valued inputs")


# --- broadcasting --------------------------------------------------------------------------
def broadcast_shapes(fun: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcast shape of ``shapes``, or a ValueError naming ``fun``."""
    if len(shapes) == 2:
        a, b = shapes
        if type(a) is tuple and type(b) is tuple:
            if a == b:
                return a
            known = _broadcasts.get((a, b))
            if known is None:
                known = _broadcast_shapes(fun, [a, b])
                if len(_broadcasts) >= 1024:
                    _broadcasts.clear()
                _broadcasts[(a, b)] = known
            return known
    return _broadcast_shapes(fun, [tuple(s) for s in shapes])


#: (shape, shape) -> their broadcast: the binary operators' common case.
_broadcasts: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] = {}


def _broadcast_shapes(fun: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{qualified(fun)}: incompatible shapes for broadcasting: "
                         f"shapes={[tuple(s) for s in shapes]}") from None


def elementwise_shape(fun: str, *shapes: Sequence[int],
                      operands: Sequence[Any] = ()) -> tuple[int, ...]:
    """The broadcast shape of an elementwise function's operands; incompatible
    ones are a TypeError, as in JAX (its lax ops raise it; code matches on the
    class), while explicit broadcasting (``broadcast_shapes``, ``where``) keeps
    NumPy's ValueError. Under a staging transformation the message also names
    the arguments the ``operands`` come from and the function being traced."""
    try:
        return broadcast_shapes(fun, *shapes)
    except ValueError:
        listed = ", ".join(str(tuple(s)) for s in shapes)
        raise TypeError(f"{qualified(fun)} got incompatible shapes for broadcasting: "
                        f"{listed}." + operands_note(operands)) from None


def operands_note(operands: Sequence[Any]) -> str:
    """`` The operands are float32[3] (from x['a']) and float32[4] (from y)
    while tracing f at file.py:3 for jit.``: appended to a shape error under a
    transformation (empty when no operand is a tracer that can tell)."""
    context = pe.describe_staged_operands(operands)
    if not context:
        return ""
    return f" The operand is {context}." if len(operands) == 1 else f" The operands are {context}."


def with_operands_note(message: str, operands: Sequence[Any]) -> str:
    """``message`` (JAX's words, unchanged when no operand can tell more),
    then :func:`operands_note`."""
    note = operands_note(operands)
    return f"{message}.{note}" if note else message


def check_rank_promotion(fun: str, shapes: Sequence[tuple[int, ...]],
                         operands: Sequence[Any] = ()) -> None:
    """Under ``numpy_rank_promotion='warn'`` or ``'raise'``, warns about or
    refuses the implicit rank promotion of non-scalar operands of different
    ranks (JAX's texts, plus the arguments they come from while tracing)."""
    mode = _settings.numpy_rank_promotion
    if mode == "allow":
        return
    listed = " ".join(str(tuple(s)) for s in shapes)
    short = fun.removeprefix("lamina.numpy.")
    if mode == "raise":
        raise ValueError(with_operands_note(
            f"Operands could not be broadcast together for {short} on shapes {listed} and with "
            f"the config option jax_numpy_rank_promotion='raise'. For more information, see "
            f"https://docs.jax.dev/en/latest/rank_promotion_warning.html", operands))
    warnings.warn(f"Following NumPy automatic rank promotion for {short} on shapes {listed}. "
                  f"Set the jax_numpy_rank_promotion config option to 'allow' to disable this "
                  f"warning; for more information, see "
                  f"https://docs.jax.dev/en/latest/rank_promotion_warning.html.", stacklevel=4)


def promote_shapes(fun: str, *args: ArrayLike) -> list[ArrayLike]:
    """Operands with equal ranks (leading size-1 axes added; scalars kept)."""
    if len(args) < 2:
        return list(args)
    shapes = [shape_of(x) for x in args]
    ranks = {len(s) for s in shapes if s}
    if len(ranks) < 2:
        if len(ranks) == 1 and len({s for s in shapes if s}) > 1:
            elementwise_shape(fun, *shapes, operands=args)  # only for the error message
        return list(args)
    rank = len(elementwise_shape(fun, *shapes, operands=args))
    check_rank_promotion(fun, shapes, args)
    return [x if not s else lax.broadcast_to_rank(x, rank) for x, s in zip(args, shapes)]


def promote_args(fun: str, *args: Any) -> list[ArrayLike]:
    """Dtype promotion and NumPy broadcasting of elementwise arguments."""
    if len(args) == 2:
        pair = _promote_pair(fun, args[0], args[1])
        if pair is not None:
            return pair
    return promote_shapes(fun, *promote_dtypes(fun, *args))


#: The strong dtypes a Python scalar of each type simply takes (``x * 2.0``
#: with ``x`` float32 is a float32 product).
_SCALAR_TAKES = {
    float: frozenset(lax.common.INEXACT),
    int: frozenset(lax.common.INEXACT | lax.common.INT),
}
#: (dtype, weak, dtype, weak, x64) -> the promoted (dtype, weak) of a pair.
_pair_promotions: dict[tuple[Any, ...], tuple[DType, bool]] = {}


def _pair_aval(x: Any) -> ShapedArray | None:
    """The aval of a lamina array or an exact Python scalar; None for anything
    else (which takes the general path, with its conversions and errors)."""
    if type(x) in _PY_SCALAR_TYPES:
        return get_aval(x)
    aval = getattr(x, "aval", None)
    return aval if type(aval) is ShapedArray else None


_PY_SCALAR_TYPES = frozenset(_PY_SCALARS)


def _scalar_operand(aval: Any, scalar: Any) -> Any:
    """The strongly typed constant a Python scalar becomes beside an array of
    type ``aval`` when it simply takes the array's dtype; else None."""
    if type(aval) is not ShapedArray or aval.weak_type:
        return None
    takes = _SCALAR_TAKES.get(type(scalar))
    if takes is None or aval.dtype not in takes:
        return None
    return convert_element_type_internal(scalar, aval.dtype, False)


def _promote_pair(fun: str, x: Any, y: Any) -> list[ArrayLike] | None:
    """``promote_args`` of two lamina arrays or Python scalars without the
    general machinery (the operators' path; same result); None for other
    operands."""
    ty = type(y)
    if ty is float or ty is int:  # the commonest case: x * 2.0
        const = _scalar_operand(getattr(x, "aval", None), y)
        if const is not None:
            return [x, const]
    elif type(x) is float or type(x) is int:
        const = _scalar_operand(getattr(y, "aval", None), x)
        if const is not None:
            return [const, y]
    ax, ay = _pair_aval(x), _pair_aval(y)
    if ax is None or ay is None:
        return None
    xs, ys = ax.shape, ay.shape
    rank = -1  # no rank promotion
    if xs != ys and xs and ys:
        full = elementwise_shape(fun, xs, ys, operands=(x, y))  # errors on incompatible shapes
        if len(xs) != len(ys):
            rank = len(full)
            check_rank_promotion(fun, (xs, ys), (x, y))
    if ax.dtype != ay.dtype or ax.weak_type != ay.weak_type:
        key = (ax.dtype, ax.weak_type, ay.dtype, ay.weak_type, dtypes.x64_state.enabled,
               _settings.numpy_dtype_promotion)
        promoted = _pair_promotions.get(key)
        if promoted is None:
            promoted = dtypes.promote_types_weak((ax.dtype, ax.weak_type),
                                                 (ay.dtype, ay.weak_type))
            _pair_promotions[key] = promoted
        dtype, weak = promoted
        if ax.dtype != dtype or ax.weak_type != weak:
            x = convert_element_type_internal(x, dtype, weak)
        if ay.dtype != dtype or ay.weak_type != weak:
            y = convert_element_type_internal(y, dtype, weak)
    if rank >= 0:  # the lower-rank operand gets leading size-1 axes
        if len(xs) < rank:
            x = lax.broadcast_to_rank(x, rank)
        else:
            y = lax.broadcast_to_rank(y, rank)
    return [x, y]


def promote_args_inexact(fun: str, *args: Any) -> list[ArrayLike]:
    return promote_shapes(fun, *promote_dtypes_inexact(fun, *args))


def promote_args_numeric(fun: str, *args: Any) -> list[ArrayLike]:
    return promote_shapes(fun, *promote_dtypes_numeric(fun, *args))


def out_sharding(fun: str, value: Any, shape: Sequence[int], *,
                 keep_replicated: bool = False) -> TypeSharding | None:
    """``jnp.<fun>``'s ``out_sharding`` (a ``PartitionSpec`` over the current
    mesh or a ``NamedSharding``) for a result of ``shape``, as the sharding of
    the result's type; errors name the function and the argument."""
    return resolve_out_sharding(value, shape, f"jnp.{fun}", keep_replicated=keep_replicated)


def broadcast_to(fun: str, x: ArrayLike, shape: Sequence[int],
                 sharding: TypeSharding | None = None) -> Array:
    """``x`` broadcast to ``shape`` with NumPy's rules (split as ``sharding``
    says when given)."""
    shape = tuple(int(d) for d in shape)
    x_shape = shape_of(x)
    if x_shape == shape and sharding is None:
        return x
    lead = len(shape) - len(x_shape)
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x_shape)):
        raise ValueError(f"{qualified(fun)}: cannot broadcast an array of shape {x_shape} to "
                         f"shape {shape}")
    kept = [i for i, d in enumerate(x_shape) if d == shape[lead + i]]
    if len(kept) != len(x_shape):
        x = lax.reshape(x, tuple(x_shape[i] for i in kept))
    return lax.broadcast_in_dim(x, shape, tuple(lead + i for i in kept), out_sharding=sharding)


# --- axes ------------------------------------------------------------------------------------
def canonicalize_axis(fun: str, axis: Any, ndim: int, name: str = "axis") -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{qualified(fun)}: {name} must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"{qualified(fun)}: {name} {a} is out of bounds for array of "
                         f"dimension {ndim}")
    return a + ndim if a < 0 else a


def canonicalize_axes(fun: str, axis: Any, ndim: int, name: str = "axis") -> tuple[int, ...]:
    """``None`` -> all axes; an int or a sequence -> sorted distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        return (canonicalize_axis(fun, axis, ndim, name),)
    try:
        items = tuple(axis)
    except TypeError:
        raise TypeError(f"{qualified(fun)}: {name} must be None, an int or a tuple of ints, got "
                        f"{axis!r}") from None
    axes = tuple(canonicalize_axis(fun, a, ndim, name) for a in items)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{qualified(fun)}: repeated axis in {name}={axis!r}")
    return tuple(sorted(axes))


def check_unsupported(fun: str, **kwargs: Any) -> None:
    """Raises for any NumPy-only argument given a non-default value.

    ``kwargs`` maps an argument name to ``(value, default)``."""
    for name, (value, default) in kwargs.items():
        if value is not default and value != default:
            raise UnsupportedArgumentError(
                f"The {name!r} argument to {qualified(fun)} is not supported "
                f"(got {name}={value!r}); lamina arrays are immutable and laid out in "
                "C order")


def check_out(fun: str, out: Any) -> None:
    if out is not None:
        raise UnsupportedArgumentError(
            f"The 'out' argument to {qualified(fun)} is not supported: lamina arrays "
            "are immutable; use the return value (or x.at[...].set(...))")


# --- concrete values --------------------------------------------------------------------------
def concrete(fun: str, x: Any, what: str) -> np.ndarray[Any, Any]:
    """The value of ``x`` as numpy when it is known at trace time, else a
    ConcretizationTypeError naming ``fun`` and ``what`` needs it."""
    value = core.concrete_or_error(
        None, x, f"The problem arose in {qualified(fun)}: {what} must be concrete "
                 "(known at trace time).")
    return np.asarray(value)


def concrete_int(fun: str, x: Any, what: str) -> int:
    """A Python int known at trace time."""
    value = concrete(fun, x, what)
    if value.shape != () or not (dtypes.is_integer(value.dtype) or value.dtype == np.bool_):
        if value.shape == () and dtypes.is_floating(value.dtype) and float(value).is_integer():
            return int(value)
        raise TypeError(f"{qualified(fun)}: {what} must be an integer scalar, got {x!r}")
    return int(value)


def is_concrete(x: Any) -> bool:
    return not isinstance(x, core.Tracer) or x.to_concrete_value() is not None
