"""sort (multi-operand, lexicographic on the first ``num_keys`` operands) and
top_k (chlo.top_k along the last axis, transposing other axes there)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import lax

from lamina_mlir_lowering.hlo_helpers import is_complex, is_floating, compare, real_dtype
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, ir_constant

__all__: list[str] = []


def _canonical_float(x: Value, dtype: np.dtype[Any]) -> Value:
    """-0.0 becomes 0.0 and every NaN the positive NaN, so the total order
    used by the comparator keeps sorts stable across equal values."""
    zero = ir_constant(np.array(0, dtype))
    nan = ir_constant(np.array(np.nan, dtype))
    x = hlo.select(compare(x, zero, "EQ", dtype), zero, x)
    return hlo.select(compare(x, x, "NE", dtype), nan, x)


def _keys(x: Value, dtype: np.dtype[Any]) -> list[tuple[Value, np.dtype[Any]]]:
    if is_complex(dtype):
        part = real_dtype(dtype)
        return [(_canonical_float(hlo.real(x), part), part),
                (_canonical_float(hlo.imag(x), part), part)]
    if is_floating(dtype):
        return [(_canonical_float(x, dtype), dtype)]
    return [(x, dtype)]


def _sort(ctx: LoweringRuleContext, *operands: Value, dimension: int, is_stable: bool,
          num_keys: int = 1, **params: Any) -> Sequence[Value]:
    types = ctx.module_context.types
    avals = ctx.avals_in
    op = hlo.SortOp(ctx.out_types(), list(operands), dimension=ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64), dimension), is_stable=ir.BoolAttr.get(bool(is_stable)))
    scalar_types = []
    for a in avals:
        t = types.shaped((), a.dtype)
        scalar_types += [t, t]
    block = op.regions[0].blocks.append(*scalar_types)
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        x_keys: list[tuple[Value, np.dtype[Any]]] = []
        y_keys: list[tuple[Value, np.dtype[Any]]] = []
        for k in range(num_keys):
            x_keys += _keys(args[2 * k], avals[k].dtype)
            y_keys += _keys(args[2 * k + 1], avals[k].dtype)
        # Lexicographic "less than": the last key decides only on ties before it.
        result: Value | None = None
        for (xk, dt), (yk, _) in zip(reversed(x_keys), reversed(y_keys)):
            lt = compare(xk, yk, "LT", dt, total_order=True)
            if result is None:
                result = lt
            else:
                eq = compare(xk, yk, "EQ", dt, total_order=True)
                result = hlo.or_(lt, hlo.and_(eq, result))
        assert result is not None
        hlo.return_([result])
    return list(op.results)


def _top_k(ctx: LoweringRuleContext, x: Value, *, k: int, axis: int = -1,
           **params: Any) -> Sequence[Value]:
    aval = ctx.avals_in[0]
    ndim = aval.ndim
    axis = axis % ndim if ndim else 0
    types = ctx.module_context.types
    if axis == ndim - 1:
        values, indices = chlo.top_k(x, k)
        return [values, indices]
    perm = list(range(ndim))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = hlo.transpose(x, dense_i64_array(perm))
    values, indices = chlo.top_k(moved, k)
    out_idx = ctx.avals_out[1]
    vals_t = hlo.transpose(values, dense_i64_array(perm))
    idx_t = hlo.transpose(indices, dense_i64_array(perm))
    if ir.RankedTensorType(idx_t.type).element_type != types.element(out_idx.dtype):
        idx_t = hlo.convert(types.tensor(out_idx), idx_t)
    return [vals_t, idx_t]


register_lowering(lax.sort_p, _sort)
register_lowering(lax.top_k_p, _top_k)
