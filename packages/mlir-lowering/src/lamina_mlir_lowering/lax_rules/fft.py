"""Lowering of ``fft`` to ``stablehlo.fft``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.lax.fft import FftType, fft_p

from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value

__all__: list[str] = []


def _fft(ctx: LoweringRuleContext, x: Value, *, fft_type: FftType,
         fft_lengths: Sequence[int], **params: Any) -> Sequence[Value]:
    op = hlo.FftOp(x, hlo.FftTypeAttr.get(FftType(fft_type).name), list(fft_lengths),
                   results=[ctx.out_type()])
    return [op.result]


register_lowering(fft_p, _fft)
