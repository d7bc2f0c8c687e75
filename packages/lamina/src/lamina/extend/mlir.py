"""``lamina.extend.mlir``: the MLIR side of the extension API (JAX's
``jax.extend.mlir``): jaxlib's MLIR bindings (``ir``) and lamina's lowering
registration, the same objects as :mod:`lamina.interpreters.mlir`
(``register_lowering``, ``lower_fun``, ``ir_constant``, ``aval_to_ir_type``,
``LoweringRuleContext``).
"""

from __future__ import annotations

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
    "LoweringRule", "LoweringRuleContext", "aval_to_ir_type", "dtype_to_ir_type", "ir",
    "ir_constant", "lower_fun", "module_to_bytecode", "module_to_string", "register_lowering",
]
