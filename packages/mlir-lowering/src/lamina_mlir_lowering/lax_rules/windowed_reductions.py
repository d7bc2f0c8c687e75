"""Lowerings of the windowed reductions: ``reduce_window_sum/max/min`` and
the general ``reduce_window`` to ``stablehlo.reduce_window``;
``select_and_gather_add`` to a two-operand ``reduce_window`` over (value,
tangent) pairs; ``select_and_scatter_add`` to ``stablehlo.select_and_scatter``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import windowed_reductions as wr
from lamina_tracing_core.primitives import Primitive

from lamina_mlir_lowering.hlo_helpers import compare
from lamina_mlir_lowering.lax_rules.reductions import (
    identity_value,
    reduce_window_lowering,
    reduce_window_monoid_lowering,
)
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, dense_int_elements, ir_constant

__all__: list[str] = []


def _direction(select_prim: Primitive) -> str:
    return "GE" if select_prim is ew.ge_p else "LE"


def _pads(padding: Sequence[tuple[int, int]]) -> ir.Attribute:
    return dense_int_elements(np.asarray(padding, np.int64).reshape(len(padding), 2))


def _select_and_gather_add(ctx: LoweringRuleContext, tangents: Value, operand: Value, *,
                           select_prim: Primitive, window_dimensions: Sequence[int],
                           window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                           base_dilation: Sequence[int], window_dilation: Sequence[int],
                           **params: Any) -> Sequence[Value]:
    t_aval, x_aval = ctx.avals_in
    types = ctx.module_context.types
    direction = _direction(select_prim)
    x_init = ir_constant(identity_value("max" if direction == "GE" else "min", x_aval.dtype))
    t_init = ir_constant(np.zeros((), t_aval.dtype))
    out_x = types.shaped(ctx.avals_out[0].shape, x_aval.dtype)
    op = hlo.ReduceWindowOp([out_x, ctx.out_type()], [operand, tangents], [x_init, t_init],
                            dense_i64_array(window_dimensions),
                            window_strides=dense_i64_array(window_strides),
                            base_dilations=dense_i64_array(base_dilation),
                            window_dilations=dense_i64_array(window_dilation),
                            padding=_pads(padding))
    xs, ts = types.shaped((), x_aval.dtype), types.shaped((), t_aval.dtype)
    block = op.regions[0].blocks.append(xs, ts, xs, ts)
    with ir.InsertionPoint(block):
        acc_x, acc_t, x, t = block.arguments
        keep = compare(acc_x, x, direction, x_aval.dtype)
        hlo.return_([hlo.select(keep, acc_x, x), hlo.select(keep, acc_t, t)])
    return [op.results[1]]


def _select_and_scatter_add(ctx: LoweringRuleContext, source: Value, operand: Value, *,
                            select_prim: Primitive, window_dimensions: Sequence[int],
                            window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                            **params: Any) -> Sequence[Value]:
    s_aval, x_aval = ctx.avals_in
    types = ctx.module_context.types
    init = ir_constant(np.zeros((), s_aval.dtype))
    op = hlo.SelectAndScatterOp(ctx.out_type(), operand, source, init,
                                window_dimensions=dense_i64_array(window_dimensions),
                                window_strides=dense_i64_array(window_strides),
                                padding=_pads(padding))
    xs, ss = types.shaped((), x_aval.dtype), types.shaped((), s_aval.dtype)
    select = op.select.blocks.append(xs, xs)
    with ir.InsertionPoint(select):
        a, b = select.arguments
        hlo.return_([compare(a, b, _direction(select_prim), x_aval.dtype)])
    scatter = op.scatter.blocks.append(ss, ss)
    with ir.InsertionPoint(scatter):
        a, b = scatter.arguments
        hlo.return_([hlo.add(a, b)])
    return [op.result]


register_lowering(wr.reduce_window_sum_p, reduce_window_monoid_lowering("add"))
register_lowering(wr.reduce_window_max_p, reduce_window_monoid_lowering("max"))
register_lowering(wr.reduce_window_min_p, reduce_window_monoid_lowering("min"))
register_lowering(wr.reduce_window_p, reduce_window_lowering)
register_lowering(wr.select_and_gather_add_p, _select_and_gather_add)
register_lowering(wr.select_and_scatter_add_p, _select_and_scatter_add)
