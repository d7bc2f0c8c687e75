"""Lowering rules of tracing-core's primitives: lax, control flow, custom
derivatives, checkpoint, collectives and autodiff's ``add_any``.

Each module registers its rules with the ``Primitive`` objects it imports from
tracing-core (``register_lowering(lax.sin_p, ...)``) when it is imported;
importing this package imports them all.
"""

from lamina_mlir_lowering.lax_rules import (
    collectives,
    contractions,
    control_flow,
    elementwise,
    indexing,
    linalg,
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
