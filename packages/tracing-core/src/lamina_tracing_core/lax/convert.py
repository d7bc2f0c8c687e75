"""Dtype conversions: ``convert_element_type``, ``bitcast_convert_type``, and
``stop_gradient`` (an identity that autodiff treats as a constant).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_linear_util import tree_util
from lamina_tracing_core import dtypes
from lamina_tracing_core.ad import JVPTracer
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import (  # re-exported: lax.convert_element_type_p etc.
    _convert_element_type as _convert_element_type,
    convert_element_type,
    convert_element_type_internal,
    convert_element_type_p,
)
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules

Array = Any

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
    aval = get_aval(x)
    if aval.dtype.itemsize != np.dtype(new_dtype).itemsize and d == len(aval.shape) - 1:
        x, d = helpers.moveaxis(x, d, 0), 0
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype), d


batching_rules[bitcast_convert_type_p] = _bitcast_batch


# --- stop_gradient ---------------------------------------------------------------------
stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)


def _stop_gradient_leaf(x: Any) -> Any:
    while isinstance(x, JVPTracer):
        x = x.primal
    return stop_gradient_p.bind(x)


def stop_gradient(x: Any) -> Any:
    """The identity on a pytree of arrays, seen as a constant by autodiff: no
    gradient flows through it (at any nesting depth of ``grad``)."""
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
