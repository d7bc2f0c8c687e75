"""Control flow and calls.

- ``cond`` (params ``branches``: ClosedJaxprs) becomes ``stablehlo.case`` on
  the index (first operand; a bool predicate is converted to 0/1). XLA runs
  the last branch for an out-of-range index, which is what lax.switch's
  clamping promises anyway.
- ``while`` (``cond_jaxpr``, ``body_jaxpr``, ``cond_nconsts``,
  ``body_nconsts``) becomes ``stablehlo.while``; the consts travel in the loop
  state (XLA's loop bodies are separate computations).
- ``scan`` (``jaxpr``, ``length``, ``reverse``, ``num_consts``,
  ``num_carry``, ...) becomes ``stablehlo.while`` over an ``i32`` counter:
  each iteration slices ``xs`` at the counter (from the end when
  ``reverse``), runs the body and writes ``ys`` with dynamic_update_slice.
- ordered effects inside a branch or loop body thread the module's token:
  the ``case`` returns it from every branch, the loops carry it.
- custom_jvp/vjp calls and ``checkpoint`` are inlined (their other params
  matter to transformations only). Call-like primitives (``jit``) are defined
  above this package and register a rule from ``make_call_rule``.
- ``optimization_barrier_lowering`` and ``platform_index_lowering`` are the
  rules of JAX primitives tracing-core does not define; a layer that defines
  one registers the rule with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.checkpoint import remat_p
from lamina_tracing_core.control_flow import cond_p, scan_p, while_p
from lamina_tracing_core.control_flow.solves import linear_solve_p
from lamina_tracing_core.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from lamina_tracing_core.effects import has_ordered_effects
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr

from lamina_mlir_lowering.hlo_helpers import compare, full_like
from lamina_mlir_lowering.lowering import lower_sub_jaxpr
from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value, dense_i64_array, ir_constant

__all__ = ["optimization_barrier_lowering", "platform_index_lowering"]


def _cond(ctx: LoweringRuleContext, index: Value, *operands: Value,
          branches: Sequence[ClosedJaxpr], **params: Any) -> Sequence[Value]:
    index_aval = ctx.avals_in[0]
    mctx = ctx.module_context
    types = mctx.types
    if index_aval.dtype != np.dtype(np.int32):
        index = hlo.convert(types.shaped((), np.int32), index)
    threaded = any(has_ordered_effects(b.effects) for b in branches)
    token = mctx.take_token() if threaded else None
    token_types: list[ir.Type] = [hlo.TokenType.get()] if threaded else []
    case = hlo.CaseOp([*token_types, *ctx.out_types()], index, len(branches))
    for i, branch in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            mctx.token = token
            outs = lower_sub_jaxpr(ctx, branch, operands, name=f"branch_{i}_fun")
            hlo.return_([mctx.take_token(), *outs] if threaded else outs)
    results: list[Value] = list(case.results)
    if threaded:
        mctx.token = results.pop(0)
    return results


def _while(ctx: LoweringRuleContext, *operands: Value, cond_jaxpr: ClosedJaxpr,
           body_jaxpr: ClosedJaxpr, cond_nconsts: int, body_nconsts: int,
           **params: Any) -> Sequence[Value]:
    n_consts = cond_nconsts + body_nconsts
    mctx = ctx.module_context
    threaded = has_ordered_effects(body_jaxpr.effects) or has_ordered_effects(
        cond_jaxpr.effects)
    # the token rides last in the loop state
    state = list(operands) + ([mctx.take_token()] if threaded else [])
    state_types = [v.type for v in state]
    loop = hlo.WhileOp(state_types, state)
    cond_block = loop.regions[0].blocks.append(*state_types)
    with ir.InsertionPoint(cond_block):
        args = list(cond_block.arguments)
        if threaded:
            mctx.token = args.pop()
        pred, = lower_sub_jaxpr(ctx, cond_jaxpr, args[:cond_nconsts] + args[n_consts:],
                                name="cond")
        pred_aval = cond_jaxpr.jaxpr.outvars[0].aval
        if pred_aval.shape:
            raise ctx.error(f"while's cond_jaxpr returns {pred_aval.str_short()}, "
                            f"not a scalar bool")
        hlo.return_([pred])
    body_block = loop.regions[1].blocks.append(*state_types)
    with ir.InsertionPoint(body_block):
        args = list(body_block.arguments)
        if threaded:
            mctx.token = args.pop()
        new_carry = lower_sub_jaxpr(ctx, body_jaxpr, args[cond_nconsts:], name="body")
        hlo.return_(args[:n_consts] + new_carry + ([mctx.take_token()] if threaded else []))
    results: list[Value] = list(loop.results)
    if threaded:
        mctx.token = results.pop()
    return results[n_consts:]


def _scan(ctx: LoweringRuleContext, *operands: Value, jaxpr: ClosedJaxpr, length: int,
          reverse: bool = False, num_consts: int, num_carry: int,
          **params: Any) -> Sequence[Value]:
    types = ctx.module_context.types
    consts = list(operands[:num_consts])
    init = list(operands[num_consts:num_consts + num_carry])
    xs = list(operands[num_consts + num_carry:])
    xs_avals = ctx.avals_in[num_consts + num_carry:]
    ys_avals = ctx.avals_out[num_carry:]
    ys_init = [full_like(0, a) for a in ys_avals]
    if length == 0:
        return init + ys_init
    i32 = np.dtype(np.int32)
    mctx = ctx.module_context
    threaded = has_ordered_effects(jaxpr.effects)
    state = [ir_constant(np.array(0, i32)), *consts, *init, *ys_init, *xs]
    if threaded:  # the token rides last in the loop state
        state.append(mctx.take_token())
    state_types = [v.type for v in state]
    loop = hlo.WhileOp(state_types, state)
    cond_block = loop.regions[0].blocks.append(*state_types)
    with ir.InsertionPoint(cond_block):
        i = cond_block.arguments[0]
        hlo.return_([compare(i, ir_constant(np.array(length, i32)), "LT", i32)])
    body_block = loop.regions[1].blocks.append(*state_types)
    n_c, n_k, n_y = len(consts), len(init), len(ys_init)
    with ir.InsertionPoint(body_block):
        args = list(body_block.arguments)
        if threaded:
            mctx.token = args.pop()
        i = args[0]
        c_vals = args[1:1 + n_c]
        carry = args[1 + n_c:1 + n_c + n_k]
        ys = args[1 + n_c + n_k:1 + n_c + n_k + n_y]
        xs_vals = args[1 + n_c + n_k + n_y:]
        pos = hlo.subtract(ir_constant(np.array(length - 1, i32)), i) if reverse else i
        zero = ir_constant(np.array(0, i32))
        x_t = []
        for x, a in zip(xs_vals, xs_avals):
            piece = hlo.dynamic_slice(x, [pos] + [zero] * (a.ndim - 1),
                                      dense_i64_array((1,) + a.shape[1:]))
            x_t.append(hlo.reshape(types.shaped(a.shape[1:], a.dtype), piece))
        outs = lower_sub_jaxpr(ctx, jaxpr, [*c_vals, *carry, *x_t], name="body")
        new_carry, y_t = outs[:n_k], outs[n_k:]
        new_ys = []
        for y, y_val, a in zip(ys, y_t, ys_avals):
            piece = hlo.reshape(types.shaped((1,) + a.shape[1:], a.dtype), y_val)
            new_ys.append(hlo.dynamic_update_slice(y, piece, [pos] + [zero] * (a.ndim - 1)))
        one = ir_constant(np.array(1, i32))
        hlo.return_([hlo.add(i, one), *c_vals, *new_carry, *new_ys, *xs_vals,
                     *([mctx.take_token()] if threaded else [])])
    results = list(loop.results)
    if threaded:
        mctx.token = results.pop()
    return results[1 + n_c:1 + n_c + n_k] + results[1 + n_c + n_k:1 + n_c + n_k + n_y]


def _inline(param: str) -> LoweringRule:
    def rule(ctx: LoweringRuleContext, *args: Value, **params: Any) -> Sequence[Value]:
        return lower_sub_jaxpr(ctx, params[param], args)

    rule.__name__ = f"inline[{param}]"
    return rule


def _linear_solve(ctx: LoweringRuleContext, *args: Value, const_lengths: Any,
                  jaxprs: Any) -> Sequence[Value]:
    """``custom_linear_solve`` runs its ``solve`` jaxpr on the solve's consts
    and the right-hand side (the other roles matter only to derivatives)."""
    n_matvec, n_vecmat, n_solve, n_tsolve = const_lengths
    start = n_matvec + n_vecmat
    solve_args = [*args[start:start + n_solve], *args[start + n_solve + n_tsolve:]]
    return lower_sub_jaxpr(ctx, jaxprs.solve, solve_args)


def _custom_vjp_call(ctx: LoweringRuleContext, *args: Value, **params: Any) -> Sequence[Value]:
    body = params.get("call_jaxpr", params.get("fun_jaxpr"))
    if body is None:
        raise ctx.error("custom_vjp_call has neither a call_jaxpr nor a fun_jaxpr param")
    return lower_sub_jaxpr(ctx, body, args)


def _checkpoint(ctx: LoweringRuleContext, *args: Value, jaxpr: ClosedJaxpr | Jaxpr,
                prevent_cse: bool = True, differentiated: bool = False,
                **params: Any) -> Sequence[Value]:
    """remat: inline the body; when differentiated with ``prevent_cse``, an
    optimization barrier on its inputs keeps XLA from merging the
    recomputation with the forward pass."""
    if prevent_cse and differentiated and args:
        args = tuple(hlo.OptimizationBarrierOp(list(args)).results)
    return lower_sub_jaxpr(ctx, jaxpr, args, name="checkpoint")


def optimization_barrier_lowering(ctx: LoweringRuleContext, *args: Value,
                                  **params: Any) -> Sequence[Value]:
    """JAX's ``optimization_barrier`` (tracing-core has no such primitive yet:
    the layer that defines one registers this rule)."""
    if not args:
        return []
    return list(hlo.OptimizationBarrierOp(list(args)).results)


def platform_index_lowering(ctx: LoweringRuleContext, *args: Value,
                            platforms: Sequence[Any] = (), has_default: bool = False,
                            **params: Any) -> Sequence[Value]:
    """JAX's ``platform_index`` (for the layer that defines the primitive):
    which group of ``platforms`` (each a tuple of names) the module runs
    on, as an i32, from the module's platform index."""
    module_platforms = ctx.module_context.platforms
    groups = [tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in platforms]

    def group_of(platform: str) -> int:
        for i, g in enumerate(groups):
            if platform in g:
                return i
        if has_default:
            return len(groups)
        raise ctx.error(f"platform_index: platform {platform!r} is in none of {groups}")

    table = [group_of(p) for p in module_platforms]
    i32 = np.dtype(np.int32)
    if len(module_platforms) == 1 or ctx.platform_index is None:
        return [ir_constant(np.array(table[module_platforms.index(ctx.platform)], i32))]
    start = hlo.dynamic_slice(ir_constant(np.array(table, i32)), [ctx.platform_index],
                              dense_i64_array([1]))
    return [hlo.reshape(ctx.module_context.types.shaped((), i32), start)]


register_lowering(cond_p, _cond)
register_lowering(linear_solve_p, _linear_solve)
register_lowering(while_p, _while)
register_lowering(scan_p, _scan)
register_lowering(custom_jvp_call_p, _inline("call_jaxpr"))
register_lowering(custom_vjp_call_p, _custom_vjp_call)
register_lowering(remat_p, _checkpoint)
