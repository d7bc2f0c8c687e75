"""Small builders shared by the lowering rules.

They keep per-op overhead low (``make_op`` creates an operation from its name
and known result types, skipping type inference) and capture XLA semantics
that several rules need: comparison types by dtype, conversions to bool as
``x != 0``, numpy-style broadcasting of operands, min/max of complex values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray

from lamina_mlir_lowering.rules import LoweringRuleContext
from lamina_mlir_lowering.types import Value, ir_constant, type_cache

__all__ = [
    "make_op", "broadcast_in_dim", "comparison_type", "compare", "convert_hlo", "broadcast_operands",
    "broadcast_to_shape", "full_like", "zeros_like", "min_hlo", "max_hlo",
    "real_dtype", "is_unsigned", "is_signed", "is_complex", "is_floating", "is_inexact",
]


def make_op(name: str, result_types: Sequence[ir.Type], operands: Sequence[Value],
            attributes: dict[str, ir.Attribute] | None = None) -> ir.Operation:
    """``ir.Operation.create`` with known result types (two to four times as
    fast as the generated builders, which infer them or check their
    arguments in Python)."""
    return ir.Operation.create(
        name, results=result_types if type(result_types) is list else list(result_types),
        operands=operands if type(operands) is list else list(operands),
        attributes=attributes)


def broadcast_in_dim(result_type: ir.Type, x: Value, dims: Sequence[int]) -> Value:
    """``stablehlo.broadcast_in_dim`` of ``x`` to ``result_type`` (``dims``:
    where ``x``'s dimensions go)."""
    attrs: dict[str, ir.Attribute] = {"broadcast_dimensions": type_cache().i64_array(dims)}
    return make_op("stablehlo.broadcast_in_dim", [result_type], [x], attrs).result


_UNSIGNED = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
_SIGNED = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))


def is_unsigned(dtype: np.dtype[Any]) -> bool:
    return dtype in _UNSIGNED or dtype == dtypes.bool_ or dtype.name in ("uint2", "uint4")


def is_signed(dtype: np.dtype[Any]) -> bool:
    return dtype in _SIGNED or dtype.name in ("int2", "int4")


# ml_dtypes' floats report numpy kind 'V'; classify dtypes by set membership
# and kind (cheap, and total over every dtype lamina lowers).
_ML_FLOATS = frozenset(np.dtype(t) for t in (
    ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
    ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
    ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3, ml_dtypes.float8_e8m0fnu,
    ml_dtypes.float4_e2m1fn))


def is_complex(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "c"


def is_floating(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype in _ML_FLOATS


def is_inexact(dtype: np.dtype[Any]) -> bool:
    return dtype.kind in "fc" or dtype in _ML_FLOATS


def comparison_type(dtype: np.dtype[Any], total_order: bool = False) -> str:
    """XLA's comparison type for ``dtype``: FLOAT (or TOTALORDER), SIGNED or
    UNSIGNED (bool compares as unsigned)."""
    if is_signed(dtype):
        return "SIGNED"
    if is_unsigned(dtype) or dtype == dtypes.float0:
        return "UNSIGNED"
    return "TOTALORDER" if total_order else "FLOAT"


def compare(x: Value, y: Value, direction: str, dtype: np.dtype[Any],
            total_order: bool = False) -> Value:
    """``stablehlo.compare`` of same-shaped ``x``, ``y`` of ``dtype``."""
    return hlo.compare(x, y, hlo.ComparisonDirectionAttr.get(direction),
                       compare_type=hlo.ComparisonTypeAttr.get(comparison_type(dtype, total_order)))


def real_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    if dtype == dtypes.complex64:
        return dtypes.float32
    if dtype == dtypes.complex128:
        return dtypes.float64
    return dtype


def full_like(value: Any, aval: ShapedArray) -> Value:
    """A constant of ``aval``'s shape and dtype filled with ``value``."""
    scalar = ir_constant(np.asarray(value, aval.dtype))
    if not aval.shape:
        return scalar
    return broadcast_in_dim(type_cache().shaped(aval.shape, aval.dtype), scalar, ())


def zeros_like(aval: ShapedArray) -> Value:
    return full_like(0, aval)


def convert_hlo(x: Value, aval_in: ShapedArray, aval_out: ShapedArray) -> Value:
    """Converts ``x`` from ``aval_in``'s dtype to ``aval_out``'s with XLA's
    semantics, except that a conversion to bool is ``x != 0`` (XLA would
    truncate integers). Float to integer rounds toward zero, as XLA does."""
    if aval_in.dtype == aval_out.dtype:
        return x
    if aval_out.dtype == dtypes.bool_:
        return compare(x, zeros_like(aval_in), "NE", aval_in.dtype)
    return hlo.convert(type_cache().shaped(aval_out.shape, aval_out.dtype), x)


def broadcast_to_shape(x: Value, aval: ShapedArray, shape: Sequence[int]) -> Value:
    """``x`` (of ``aval``) broadcast numpy-style (trailing alignment) to ``shape``."""
    shape = tuple(shape)
    if aval.shape == shape:
        return x
    rank = len(shape)
    dims = range(rank - aval.ndim, rank)
    return broadcast_in_dim(type_cache().shaped(shape, aval.dtype), x, dims)


def broadcast_operands(ctx: LoweringRuleContext, operands: Sequence[Value]) -> list[Value]:
    """Operands broadcast to the (first) output's shape; jaxprs may apply an
    elementwise primitive to a scalar and an array."""
    shape = ctx.avals_out[0].shape
    return [x if a.shape == shape else broadcast_to_shape(x, a, shape)
            for x, a in zip(operands, ctx.avals_in)]


def _minmax(op: str, direction: str, x: Value, y: Value, dtype: np.dtype[Any],
            result_type: ir.Type) -> Value:
    if is_complex(dtype):
        # Complex numbers are ordered lexicographically by (real, imag), as in JAX.
        part = real_dtype(dtype)
        rx, ry = hlo.real(x), hlo.real(y)
        real_eq = compare(rx, ry, "EQ", part)
        real_cmp = compare(rx, ry, direction, part)
        imag_cmp = compare(hlo.imag(x), hlo.imag(y), direction, part)
        return hlo.select(hlo.select(real_eq, imag_cmp, real_cmp), x, y)
    return make_op(op, [result_type], [x, y]).result


def max_hlo(x: Value, y: Value, dtype: np.dtype[Any], result_type: ir.Type) -> Value:
    return _minmax("stablehlo.maximum", "GT", x, y, dtype, result_type)


def min_hlo(x: Value, y: Value, dtype: np.dtype[Any], result_type: ir.Type) -> Value:
    return _minmax("stablehlo.minimum", "LT", x, y, dtype, result_type)
