"""Lowering rules of tracing-core's primitives: lax, control flow, custom
derivatives, checkpoint, collectives and autodiff's ``add_any``.

Each module registers its rules with the ``Primitive`` objects it imports from
tracing-core (``register_lowering(lax.sin_p, ...)``) when it is imported;
importing this package imports them all, but ``linalg``: the rules of
``lax.linalg``'s primitives load once that module is imported
(``defer_rule_module_until``), with MLIR's LAPACK targets.
"""

from typing import Any

from lamina_mlir_lowering.rule_table import defer_rule_module_until

from lamina_mlir_lowering.lax_rules import (
    collectives,
    contractions,
    control_flow,
    elementwise,
    indexing,
    random,
    reductions,
    sort,
    special,
    structural,
)
from lamina_mlir_lowering.lax_rules import fft, windowed_reductions
from lamina_mlir_lowering.lax_rules import callbacks, shard_map

__all__ = ["collectives", "contractions", "control_flow", "elementwise", "indexing", "linalg", "random",
           "reductions", "sort", "special", "structural", "fft", "windowed_reductions",
           "callbacks", "shard_map"]

defer_rule_module_until("lamina_tracing_core.lax.linalg", f"{__name__}.linalg")


def __getattr__(name: str) -> Any:
    if name != "linalg":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # here: only a direct use of the module needs it now

    return importlib.import_module(f"{__name__}.linalg")
