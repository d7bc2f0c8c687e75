"""dot_general and conv_general_dilated.

The result type is the output aval's (``preferred_element_type`` is already
folded into it); operands of different dtypes are first converted to the
result dtype, as JAX does on CPU and GPU. ``precision`` (None, one value or a
pair for lhs/rhs; lax ``Precision`` members or their names) becomes the
op's ``precision_config``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import dtypes, lax

from lamina_mlir_lowering.hlo_helpers import convert_hlo, make_op
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, dense_int_elements

__all__ = ["precision_attr"]

_PRECISION_NAMES = {
    "DEFAULT": "DEFAULT", "FASTEST": "DEFAULT", "BFLOAT16": "DEFAULT",
    "HIGH": "HIGH", "TENSORFLOAT32": "HIGH", "BFLOAT16_3X": "HIGH",
    "HIGHEST": "HIGHEST", "FLOAT32": "HIGHEST",
}
_PRECISION_BY_VALUE = {0: "DEFAULT", 1: "HIGH", 2: "HIGHEST"}


def _precision_name(p: Any) -> str:
    name = getattr(p, "name", None)
    if isinstance(name, str):
        return _PRECISION_NAMES[name.upper()]
    if isinstance(p, str):
        return _PRECISION_NAMES[p.upper()]
    return _PRECISION_BY_VALUE[int(p)]


def precision_attr(precision: Any) -> ir.ArrayAttr | None:
    """``[#stablehlo<precision X>, #stablehlo<precision Y>]`` or None."""
    if precision is None:
        return None
    pair = tuple(precision) if isinstance(precision, (tuple, list)) else (precision, precision)
    if all(p is None for p in pair):
        return None
    names = [_precision_name(p) if p is not None else "DEFAULT" for p in pair]
    return ir.ArrayAttr.get([hlo.PrecisionAttr.get(n) for n in names])


def _convert_operands(ctx: LoweringRuleContext, lhs: Value, rhs: Value) -> tuple[Value, Value]:
    lhs_aval, rhs_aval = ctx.avals_in[:2]
    out = ctx.avals_out[0]
    if lhs_aval.dtype != rhs_aval.dtype:
        lhs = convert_hlo(lhs, lhs_aval, lhs_aval.update(dtype=out.dtype))
        rhs = convert_hlo(rhs, rhs_aval, rhs_aval.update(dtype=out.dtype))
    return lhs, rhs


def _dot_general(ctx: LoweringRuleContext, lhs: Value, rhs: Value, *,
                 dimension_numbers: Any, precision: Any = None,
                 **params: Any) -> Sequence[Value]:
    lhs, rhs = _convert_operands(ctx, lhs, rhs)
    dnums = _dot_dimension_numbers(ctx, dimension_numbers)
    out = ctx.avals_out[0]
    result_type = ctx.out_type()
    if out.dtype == dtypes.bool_:
        # XLA has no boolean dot: compute in int32 and compare with zero.
        int_type = ctx.module_context.types.shaped(out.shape, np.int32)
        li = hlo.convert(ctx.module_context.types.shaped(ctx.avals_in[0].shape, np.int32), lhs)
        ri = hlo.convert(ctx.module_context.types.shaped(ctx.avals_in[1].shape, np.int32), rhs)
        res = hlo.dot_general(int_type, li, ri, dnums, precision_config=precision_attr(precision))
        return [convert_hlo(res, out.update(dtype=np.dtype(np.int32)), out)]
    attrs = {"dot_dimension_numbers": dnums}
    config = precision_attr(precision)
    if config is not None:
        attrs["precision_config"] = config
    return [make_op("stablehlo.dot_general", [result_type], [lhs, rhs], attrs).result]


def _dot_dimension_numbers(ctx: LoweringRuleContext, dimension_numbers: Any) -> Any:
    """``#stablehlo.dot<...>`` for lax's ``((lc, rc), (lb, rb))``, built once
    per distinct value in the context."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    key = ("dot", tuple(lhs_contract), tuple(rhs_contract), tuple(lhs_batch),
           tuple(rhs_batch))
    return ctx.module_context.types.attribute(key, lambda: hlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lhs_batch), rhs_batching_dimensions=list(rhs_batch),
        lhs_contracting_dimensions=list(lhs_contract),
        rhs_contracting_dimensions=list(rhs_contract)))


def _conv_general_dilated(ctx: LoweringRuleContext, lhs: Value, rhs: Value, *,
                          window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                          lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
                          dimension_numbers: Any, feature_group_count: int = 1,
                          batch_group_count: int = 1, precision: Any = None,
                          **params: Any) -> Sequence[Value]:
    lhs_spec, rhs_spec, out_spec = _conv_specs(dimension_numbers, ctx.avals_in[0].ndim)
    lhs, rhs = _convert_operands(ctx, lhs, rhs)
    dnums = hlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
        input_spatial_dimensions=list(lhs_spec[2:]),
        kernel_output_feature_dimension=rhs_spec[0],
        kernel_input_feature_dimension=rhs_spec[1],
        kernel_spatial_dimensions=list(rhs_spec[2:]),
        output_batch_dimension=out_spec[0], output_feature_dimension=out_spec[1],
        output_spatial_dimensions=list(out_spec[2:]))
    n_spatial = len(lhs_spec) - 2
    pad = dense_int_elements(np.asarray(padding, np.int64).reshape(n_spatial, 2))
    i64 = ir.IntegerType.get_signless(64)
    return [hlo.convolution(
        ctx.out_type(), lhs, rhs, dimension_numbers=dnums,
        feature_group_count=ir.IntegerAttr.get(i64, feature_group_count),
        batch_group_count=ir.IntegerAttr.get(i64, batch_group_count),
        window_strides=dense_i64_array(window_strides), padding=pad,
        lhs_dilation=dense_i64_array(lhs_dilation), rhs_dilation=dense_i64_array(rhs_dilation),
        precision_config=precision_attr(precision))]


def _conv_specs(dimension_numbers: Any, ndim: int) -> tuple[Sequence[int], Sequence[int], Sequence[int]]:
    """(lhs_spec, rhs_spec, out_spec) from lax's ConvDimensionNumbers (None
    means the default NCHW/OIHW/NCHW layout)."""
    if dimension_numbers is None:
        default = tuple(range(ndim))
        return default, default, default
    if hasattr(dimension_numbers, "lhs_spec"):
        return (dimension_numbers.lhs_spec, dimension_numbers.rhs_spec,
                dimension_numbers.out_spec)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    return lhs_spec, rhs_spec, out_spec


register_lowering(lax.dot_general_p, _dot_general)
register_lowering(lax.conv_general_dilated_p, _conv_general_dilated)
