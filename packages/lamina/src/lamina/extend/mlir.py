"""``lamina.extend.mlir``: the MLIR side of the extension API (JAX's
``jax.extend.mlir``): jaxlib's MLIR bindings (``ir``) and lamina's lowering
registration, the same objects as :mod:`lamina.interpreters.mlir`
(``register_lowering``, ``lower_fun``, ``ir_constant``, ``aval_to_ir_type``,
``LoweringRuleContext``), and jaxlib's module converters:
``serialize_portable_artifact(module_bytecode, target_version)`` /
``deserialize_portable_artifact`` (StableHLO's versioned artifacts),
``refine_polymorphic_shapes`` and ``hlo_to_stablehlo`` (an HLO proto's
bytes to a StableHLO module's bytecode).
"""

from __future__ import annotations

from lamina_interpreters_pxla._jaxlib import _jax

from lamina.interpreters.mlir import LoweringRule as LoweringRule
from lamina.interpreters.mlir import LoweringRuleContext as LoweringRuleContext
from lamina.interpreters.mlir import aval_to_ir_type as aval_to_ir_type
from lamina.interpreters.mlir import dtype_to_ir_type as dtype_to_ir_type
from lamina.interpreters.mlir import ir as ir
from lamina.interpreters.mlir import ir_constant as ir_constant
from lamina.interpreters.mlir import lower_fun as lower_fun
from lamina.interpreters.mlir import module_to_bytecode as module_to_bytecode
from lamina.interpreters.mlir import module_to_string as module_to_string
from lamina.interpreters.mlir import register_lowering as register_lowering

__all__ = [
    "LoweringRule", "LoweringRuleContext", "aval_to_ir_type", "deserialize_portable_artifact",
    "dtype_to_ir_type", "hlo_to_stablehlo", "ir", "ir_constant", "lower_fun",
    "module_to_bytecode", "module_to_string", "refine_polymorphic_shapes", "register_lowering",
    "serialize_portable_artifact",
]

deserialize_portable_artifact = _jax.mlir.deserialize_portable_artifact
hlo_to_stablehlo = _jax.mlir.hlo_to_stablehlo
refine_polymorphic_shapes = _jax.mlir.refine_polymorphic_shapes
serialize_portable_artifact = _jax.mlir.serialize_portable_artifact
