"""Random-number primitives: the Threefry-2x32 block cipher, expanded into
uint32 adds, rotations and xors (20 rounds, Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3"), and XLA's ``rng_bit_generator``.

On CPU, hashes of fewer than ``ROLL_BELOW`` elements run their 20 rounds as a
loop of five groups of four (as JAX lowers every hash there): XLA inlines each
hash, and unrolled rounds at each of a sampler's many small hashes multiply its
compile time (binomial of 1000 draws: 8.9 s of CPU unrolled, 1.7 s rolled).
Larger hashes stay unrolled, where the fused rounds run several times faster
(gamma of 10^6 draws: 0.5 s against 1.9 s rolled). The bits are the same."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.control_flow import fori_loop

from lamina_mlir_lowering.hlo_helpers import broadcast_operands, full_like
from lamina_mlir_lowering.lowering import lower_fun
from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value

__all__ = ["ROLL_BELOW", "THREEFRY_ROTATIONS", "rng_bit_generator_lowering"]

#: The rotation distances of the two alternating groups of four rounds.
THREEFRY_ROTATIONS: tuple[tuple[int, ...], tuple[int, ...]] = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA


def _threefry_rounds(aval: Any, k1: Value, k2: Value, x1: Value, x2: Value) -> list[Value]:
    consts: dict[int, Value] = {}

    def const(value: int) -> Value:
        if value not in consts:
            consts[value] = full_like(np.uint32(value), aval)
        return consts[value]

    def rotate_left(v: Value, d: int) -> Value:
        return hlo.or_(hlo.shift_left(v, const(d)), hlo.shift_right_logical(v, const(32 - d)))

    def rounds(x: list[Value], rotations: Sequence[int]) -> Sequence[Value]:
        a, b = x
        for r in rotations:
            a = hlo.add(a, b)
            b = hlo.xor(rotate_left(b, r), a)
        return [a, b]

    ks = [k1, k2, hlo.xor(hlo.xor(k1, k2), const(_KEY_PARITY))]
    x: list[Value] = [hlo.add(x1, ks[0]), hlo.add(x2, ks[1])]
    for i in range(5):
        x = list(rounds(x, THREEFRY_ROTATIONS[i % 2]))
        x = [hlo.add(x[0], ks[(i + 1) % 3]),
             hlo.add(hlo.add(x[1], ks[(i + 2) % 3]), const(i + 1))]
    return x


def _threefry_function(ctx: LoweringRuleContext, aval: Any) -> tuple[str, list[ir.Type]]:
    """The private function ``(k1, k2, x1, x2) -> (y1, y2)`` for one operand
    type, emitted once per module: every hash of that shape calls it, which
    keeps the module (and XLA's compile time) small when a program hashes
    many times, as the rejection samplers' loops do."""
    mctx = ctx.module_context
    cache_key = ("threefry2x32", tuple(aval.shape))
    cached: tuple[str, list[ir.Type]] | None = mctx.functions.get(cache_key)
    if cached is not None:
        return cached
    t = mctx.types.tensor(aval)
    symbol = mctx.unique_symbol("threefry2x32")
    with ir.InsertionPoint(mctx.module.body), ir.Location.unknown():
        fn = func.FuncOp(symbol, ir.FunctionType.get([t] * 4, [t, t]))
        fn.sym_visibility = ir.StringAttr.get("private")
        # (add_entry_block is a Python-side helper jaxlib's stubs don't list.)
        block = cast(Any, fn).add_entry_block()
    with ir.InsertionPoint(block), ir.Location.unknown():
        func.ReturnOp(_threefry_rounds(aval, *block.arguments))
    mctx.functions[cache_key] = (symbol, [t, t])
    return symbol, [t, t]


def _threefry2x32(ctx: LoweringRuleContext, k1: Value, k2: Value, x1: Value,
                  x2: Value, **params: Any) -> Sequence[Value]:
    aval = ctx.avals_out[0]
    operands = broadcast_operands(ctx, (k1, k2, x1, x2))
    symbol, result_types = _threefry_function(ctx, aval)
    call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(symbol), list(operands))
    return list(call.results)


_ROTATION_TABLE = np.array(THREEFRY_ROTATIONS, np.uint32)


def _threefry_rolled(k1: Any, k2: Any, x1: Any, x2: Any) -> list[Any]:
    """Threefry-2x32 as a ``fori_loop`` over the five groups of four rounds:
    step ``i`` rotates by row ``i % 2`` of the table, then injects the key
    words ``ks[(i + 1) % 3]`` and ``ks[(i + 2) % 3] + i + 1`` (the carry
    cycles the three key words)."""
    shape = np.broadcast_shapes(*(get_aval(v).shape for v in (k1, k2, x1, x2)))
    k1, k2, x1, x2 = (lax.broadcast_in_dim(v, shape, tuple(range(len(shape) - get_aval(v).ndim,
                                                                  len(shape))))
                      for v in (k1, k2, x1, x2))
    k3 = lax.bitwise_xor(lax.bitwise_xor(k1, k2), np.uint32(_KEY_PARITY))
    table = lax.full((2, 4), 0, np.uint32) + _ROTATION_TABLE

    def group(i: Any, state: tuple[Any, ...]) -> tuple[Any, ...]:
        a, b, inject_a, inject_b, spare = state
        row = lax.dynamic_index_in_dim(table, lax.rem(i, lax.full_like(i, 2)), 0, keepdims=False)
        for j in range(4):
            r = lax.broadcast_in_dim(lax.index_in_dim(row, j, 0, keepdims=False), shape, ())
            a = lax.add(a, b)
            rotated = lax.bitwise_or(lax.shift_left(b, r),
                                     lax.shift_right_logical(b, lax.sub(np.uint32(32), r)))
            b = lax.bitwise_xor(rotated, a)
        step = lax.convert_element_type(lax.add(i, lax.full_like(i, 1)), np.uint32)
        a = lax.add(a, inject_a)
        b = lax.add(lax.add(b, inject_b), step)
        return a, b, inject_b, spare, inject_a

    state = (lax.add(x1, k1), lax.add(x2, k2), k2, k3, k1)
    a, b, *_ = fori_loop(0, 5, group, state)
    return [a, b]


#: Hashes of fewer elements than this are lowered as a loop on CPU.
ROLL_BELOW = 1 << 16

_threefry_rolled_rule = lower_fun(_threefry_rolled, multiple_results=True)


def _threefry2x32_cpu(ctx: LoweringRuleContext, k1: Value, k2: Value, x1: Value,
                      x2: Value, **params: Any) -> Sequence[Value]:
    if math.prod(ctx.avals_out[0].shape) < ROLL_BELOW:
        return _threefry_rolled_rule(ctx, k1, k2, x1, x2, **params)
    return _threefry2x32(ctx, k1, k2, x1, x2, **params)


_RNG_ALGORITHMS = {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"}


def _algorithm_name(algorithm: Any) -> str:
    name = getattr(algorithm, "name", None)
    if isinstance(name, str):
        return name.upper().removeprefix("RNG_")
    if isinstance(algorithm, str):
        return algorithm.upper().removeprefix("RNG_")
    return _RNG_ALGORITHMS[int(algorithm)]


def rng_bit_generator_lowering(ctx: LoweringRuleContext, key: Value, *, shape: Sequence[int],
                               dtype: Any, algorithm: Any = 0,
                               **params: Any) -> Sequence[Value]:
    """``rng_bit_generator``: new key and bits. XLA's generator keeps its state as ``u64[2]``; a
    ``u32[4]`` key (how lamina, like JAX, stores it without x64) is bitcast
    there and back. 8/16-bit outputs are generated as uint32 and narrowed."""
    types = ctx.module_context.types
    key_aval, out_aval = ctx.avals_out
    u32, u64 = np.dtype(np.uint32), np.dtype(np.uint64)
    as_u32x4 = key_aval.dtype == u32 and key_aval.shape == (4,)
    state = key
    if as_u32x4:
        pairs = hlo.reshape(types.shaped((2, 2), u32), key)
        state = hlo.bitcast_convert(types.shaped((2,), u64), pairs)
    dt = np.dtype(dtype)
    gen_dtype = dt if dt.itemsize >= 4 else u32
    algo = hlo.RngAlgorithmAttr.get(_algorithm_name(algorithm))
    op = hlo.RngBitGeneratorOp(state.type, types.shaped(shape, gen_dtype), algo, state)
    new_key, bits = op.results[0], op.results[1]
    if as_u32x4:
        new_key = hlo.reshape(types.tensor(key_aval),
                              hlo.bitcast_convert(types.shaped((2, 2), u32), new_key))
    if gen_dtype != dt:
        bits = hlo.convert(types.tensor(out_aval), bits)
    return [new_key, bits]


register_lowering(lax.threefry2x32_p, _threefry2x32)
register_lowering(lax.threefry2x32_p, _threefry2x32_cpu, platform="cpu")
register_lowering(lax.rng_bit_generator_p, rng_bit_generator_lowering)
