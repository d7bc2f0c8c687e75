"""The MLIR context every lowering uses.

Creating and configuring an ``ir.Context`` (dialect registry, StableHLO,
Shardy, func, chlo) costs milliseconds, about sixty times the cost of
lowering a small function, so this module makes one per thread and hands it
out again. Types, attributes and modules live in the context that made them;
``default_context()`` is what the lowering entry points use.
"""

from __future__ import annotations

import threading

import jaxlib.mlir._mlir_libs._jax_mlir_ext as _jax_mlir_ext
from jaxlib.mlir import ir

# The dialects' native registration functions (what ``jaxlib.mlir.dialects.
# stablehlo.register_dialect`` and friends are), taken from the extension
# modules: the Python op classes of ``jaxlib.mlir.dialects`` take tens of
# milliseconds to import, which a process that only parses a stored module
# (a persistent trace cache hit) need not pay. Building operations imports them.
from jaxlib.mlir._mlir_libs import _chlo as chlo
from jaxlib.mlir._mlir_libs import _sdy as sdy
from jaxlib.mlir._mlir_libs import _stablehlo as hlo

__all__ = ["make_context", "default_context"]

_registry_lock = threading.Lock()
_registry: ir.DialectRegistry | None = None


def _dialect_registry() -> ir.DialectRegistry:
    """jaxlib's upstream dialects (func, arith, ...), built once per process."""
    global _registry
    with _registry_lock:
        if _registry is None:
            registry = ir.DialectRegistry()
            _jax_mlir_ext.register_dialects(registry)
            _registry = registry
        return _registry


def make_context() -> ir.Context:
    """A fresh context that can build, parse and print StableHLO, chlo, func
    and Shardy operations. Prefer ``default_context()`` unless a separate
    context is really needed (modules from different contexts don't mix)."""
    ctx = ir.Context()
    ctx.append_dialect_registry(_dialect_registry())
    ctx.load_all_available_dialects()
    hlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    sdy.register_dialect(ctx)
    return ctx


class _PerThread(threading.local):
    context: ir.Context | None = None


_per_thread = _PerThread()


def default_context() -> ir.Context:
    """This thread's shared lowering context, created on first use."""
    ctx = _per_thread.context
    if ctx is None:
        ctx = _per_thread.context = make_context()
    return ctx
