"""Dtype conversions: ``convert_element_type``, ``bitcast_convert_type``, and
``stop_gradient`` (an identity that autodiff treats as a constant).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from lamina_tracing_core import ad_util, dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax.common import ArrayLike, typeof
from lamina_tracing_core.pretty_print import hide_default_params, param_printers
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules

Array = Any

_PY_SCALARS = (bool, int, float, complex)
_FOLDABLE = (bool, int, float, complex, np.generic, np.ndarray)

# --- convert_element_type --------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")
_VALID_DTYPES = common.ANY | {dtypes.float0}


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(operand: ShapedArray, *, new_dtype: Any,
                                        weak_type: bool, sharding: Any) -> ShapedArray:
    if new_dtype not in _VALID_DTYPES:
        raise TypeError(f"convert_element_type: {new_dtype!r} is not a valid dtype")
    if new_dtype == operand.dtype and weak_type == operand.weak_type:
        return operand
    return ShapedArray(operand.shape, new_dtype, weak_type)


def convert_element_type_internal(operand: ArrayLike, new_dtype: Any = None,
                                  weak_type: bool = False, sharding: Any = None) -> Array:
    """Conversion that folds constants: a Python/numpy scalar or numpy array
    is converted here, with numpy, and stays a constant (no equation), as JAX's
    ``_convert_element_type`` does. Used by ``full``, constants in rules and the
    numpy helpers."""
    if type(operand) in _WEAK_PY_SCALARS and sharding is None and not weak_type \
            and type(new_dtype) in _NP_DTYPE_TYPES:
        # The operators' common case (``x * 2.0``): a Python scalar becomes a
        # strongly typed 0-d constant; these are memoized (read-only).
        return _scalar_constant(operand, dtypes.canonicalize_dtype(new_dtype))
    aval = typeof(operand)
    new = aval.dtype if new_dtype is None else dtypes.canonicalize_dtype(new_dtype)
    weak = bool(weak_type)
    if new == aval.dtype and weak == aval.weak_type and sharding is None:
        return operand
    if sharding is None and isinstance(operand, _FOLDABLE) and new != dtypes.float0:
        if not weak:
            return _fold(operand, new)
        py_type = common.python_scalar_for(new)
        if py_type is not None and isinstance(operand, _PY_SCALARS + (np.generic,)) \
                and np.ndim(operand) == 0:
            return py_type(_fold(operand, new).item())
    return convert_element_type_p.bind(operand, new_dtype=new, weak_type=weak,
                                       sharding=sharding)


_WEAK_PY_SCALARS = frozenset({int, float, complex})
_NP_DTYPE_TYPES = frozenset(type(np.dtype(t)) for t in set(np.sctypeDict.values()))
_scalar_constants: dict[tuple[Any, ...], np.ndarray[Any, Any]] = {}
_MAX_SCALAR_CONSTANTS = 4096


def _scalar_constant(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` (a Python scalar) as a read-only 0-d array of ``dtype``."""
    if dtype == dtypes.float0:
        return _fold(value, dtype)
    # 0.0 and -0.0 are equal keys, NaN is never equal to itself: key floats by
    # their bits
    key = (type(value), value.hex() if type(value) is float else value, dtype)
    try:
        const = _scalar_constants.get(key)
    except TypeError:  # complex NaN etc. are hashable; defensive only
        return _fold(value, dtype)
    if const is None:
        const = _fold(value, dtype)
        const.flags.writeable = False
        if len(_scalar_constants) >= _MAX_SCALAR_CONSTANTS:
            _scalar_constants.clear()
        _scalar_constants[key] = const
    return const


def _fold(value: Any, dtype: np.dtype[Any]) -> Any:
    if type(value) is int and dtype.kind in "iu":
        # As JAX 0.10: a Python int must fit the default integer type (it is
        # one, weakly typed); converting it to a narrower type then wraps like
        # a C cast (uint8 + 300 is uint8 + 44).
        default = dtypes.default_int_dtype()
        if not dtypes.python_int_fits(value, default):
            raise OverflowError(f"Python int {value} too large to convert to {default.name} "
                                f"(the default integer type)")
        return np.asarray(value, default).astype(dtype)
    arr = np.asarray(value)
    if arr.dtype.kind == "c" and dtype.kind != "c":
        arr = arr.real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return arr.astype(dtype)


def convert_element_type(operand: ArrayLike, new_dtype: Any) -> Array:
    """``operand`` converted to ``new_dtype`` (a strongly typed result).

    Like a C cast: floats to integers truncate; complex to real drops the
    imaginary part (with a ComplexWarning).
    """
    return _convert_element_type(operand, new_dtype, weak_type=False)


def _convert_element_type(operand: ArrayLike, new_dtype: Any = None, weak_type: bool = False,
                          sharding: Any = None, warn_on_complex_to_real_cast: bool = True
                          ) -> Array:
    aval = typeof(operand)
    new = aval.dtype if new_dtype is None else dtypes.canonicalize_dtype(new_dtype)
    weak = bool(weak_type)
    if warn_on_complex_to_real_cast and aval.dtype in common.COMPLEX \
            and new not in common.COMPLEX:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
    if new == aval.dtype and weak == aval.weak_type and sharding is None \
            and isinstance(getattr(operand, "aval", None), ShapedArray):
        return operand
    return convert_element_type_p.bind(operand, new_dtype=new, weak_type=weak,
                                       sharding=sharding)


def _convert_element_type_jvp(primals: Any, tangents: Any, *, new_dtype: Any,
                              weak_type: bool, sharding: Any) -> Any:
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type,
                                      sharding=sharding)
    out_tangent_aval = ad_util.tangent_aval(typeof(out))
    if helpers.is_zero(t) or out_tangent_aval.dtype == dtypes.float0 \
            or typeof(t).dtype == dtypes.float0:
        return out, helpers.Zero(out_tangent_aval)
    return out, convert_element_type_p.bind(t, new_dtype=out_tangent_aval.dtype,
                                            weak_type=weak_type, sharding=sharding)


def _convert_element_type_transpose(ct: Any, operand: Any, *, new_dtype: Any,
                                    weak_type: bool, sharding: Any) -> list[Any]:
    old = operand.aval
    if helpers.is_zero(ct):
        return [helpers.Zero(old)]
    if ad_util.tangent_aval(old).dtype == dtypes.float0:
        return [helpers.Zero(ad_util.tangent_aval(old))]
    return [convert_element_type_p.bind(ct, new_dtype=old.dtype, weak_type=old.weak_type,
                                        sharding=None)]


def _convert_element_type_batch(args: Any, dims: Any, **params: Any) -> Any:
    return convert_element_type_p.bind(args[0], **params), dims[0]


jvp_rules[convert_element_type_p] = _convert_element_type_jvp
param_printers[convert_element_type_p] = hide_default_params(sharding=None)
transpose_rules[convert_element_type_p] = _convert_element_type_transpose
batching_rules[convert_element_type_p] = _convert_element_type_batch


# --- bitcast_convert_type ----------------------------------------------------------
bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_abstract_eval(operand: ShapedArray, *, new_dtype: Any) -> ShapedArray:
    old = operand.dtype
    new = np.dtype(new_dtype)
    if new not in common.ANY:
        raise TypeError(f"bitcast_convert_type: {new_dtype!r} is not a valid dtype")
    if (old in common.BOOL | common.COMPLEX or new in common.BOOL | common.COMPLEX) \
            and old != new:
        raise TypeError("lax.bitcast_convert_type does not support bool or complex values "
                        "unless the operand and destination types match. Got operand "
                        f"dtype={old.name}, new_dtype={new.name}.")
    old_bits, new_bits = old.itemsize * 8, new.itemsize * 8
    if old_bits == new_bits:
        shape = operand.shape
    elif old_bits > new_bits:
        shape = operand.shape + (old_bits // new_bits,)
    else:
        last = operand.shape[-1] if operand.shape else 1
        if last * old_bits != new_bits:
            raise ValueError(f"Attempting to convert array of shape {operand.shape} from "
                             f"{old.name} of size {old_bits} bits to {new.name} of size "
                             f"{new_bits} bits, but {last} * {old_bits} != {new_bits}")
        shape = operand.shape[:-1]
    return ShapedArray(shape, new, False)


def bitcast_convert_type(operand: ArrayLike, new_dtype: Any) -> Array:
    """Reinterprets the bits of ``operand`` as ``new_dtype`` (a narrower type adds a
    trailing dimension; a wider one consumes it)."""
    return bitcast_convert_type_p.bind(operand, new_dtype=dtypes.canonicalize_dtype(new_dtype))


def _bitcast_batch(args: Any, dims: Any, *, new_dtype: Any) -> Any:
    (x,), (d,) = args, dims
    aval = typeof(x)
    if aval.dtype.itemsize != np.dtype(new_dtype).itemsize and d == len(aval.shape) - 1:
        x, d = helpers.moveaxis(x, d, 0), 0
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


batching_rules[bitcast_convert_type_p] = _bitcast_batch


# --- stop_gradient ---------------------------------------------------------------------
stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)


def _stop_gradient_leaf(x: Any) -> Any:
    from lamina_tracing_core import ad
    jvp_tracer = getattr(ad, "JVPTracer", None)
    while jvp_tracer is not None and isinstance(x, jvp_tracer):
        x = x.primal
    return stop_gradient_p.bind(x)


def stop_gradient(x: Any) -> Any:
    """The identity on a pytree of arrays, seen as a constant by autodiff: no
    gradient flows through it (at any nesting depth of ``grad``)."""
    from lamina_linear_util import tree_util
    return tree_util.tree_map(_stop_gradient_leaf, x)


def _stop_gradient_jvp(primals: Any, tangents: Any) -> Any:
    (x,) = primals
    out = stop_gradient(x)
    return out, helpers.zero_from_primal(out)


def _stop_gradient_batch(args: Any, dims: Any) -> Any:
    return stop_gradient(args[0]), dims[0]


jvp_rules[stop_gradient_p] = _stop_gradient_jvp
batching_rules[stop_gradient_p] = _stop_gradient_batch

__all__ = ["convert_element_type_p", "bitcast_convert_type_p", "stop_gradient_p",
           "convert_element_type", "bitcast_convert_type", "stop_gradient",
           "convert_element_type_internal"]
