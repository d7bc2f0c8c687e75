"""Modules to text and bytecode, and back.

Text is what ``Lowered.as_text()`` shows (``debug_info=True`` adds the
``loc(...)`` of every op and argument); bytecode is the compact form to hand
to ``compile_and_load`` or to store. ``parse_module`` reads either back into
an ``ir.Module`` in the given (default: this thread's) context.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxlib.mlir import ir

__all__ = ["module_to_text", "module_to_bytecode", "parse_module"]


def module_to_text(module: ir.Module, debug_info: bool = False) -> str:
    """The module's MLIR assembly; with ``debug_info`` also its locations."""
    return str(module.operation.get_asm(enable_debug_info=debug_info))


def module_to_bytecode(module: ir.Module) -> bytes:
    """MLIR bytecode of the module (locations included)."""
    out = io.BytesIO()
    module.operation.write_bytecode(out)
    return out.getvalue()


def parse_module(source: str | bytes, context: ir.Context | None = None) -> ir.Module:
    """Parses MLIR text or bytecode into a module (StableHLO, chlo, func and
    Shardy are known in lamina's contexts)."""
    # Imported here: serializing a module needs no MLIR import of its own, and
    # a program restored from disk compiles from its bytecode unparsed.
    from jaxlib.mlir import ir
    # (the context loads MLIR's bindings too: imported here for the same reason)
    from lamina_mlir_lowering.context import default_context

    ctx = context if context is not None else default_context()
    with ctx:
        return ir.Module.parse(source)
