"""Lowering of jaxprs to StableHLO modules with names, locations and shardings.

Entry point: ``lower_jaxpr_to_module(module_name, closed_jaxpr, ...)`` returns
a ``LoweringResult``. Rules live in ``lowering_rules`` /
``platform_lowering_rules``, keyed by the ``Primitive`` object
(``register_lowering(prim, rule, platform=None)``); every primitive of
tracing-core has one, registered beside it in ``lax_rules`` on import.
"""

from lamina_mlir_lowering.__about__ import __version__
from lamina_mlir_lowering.axis_context import (
    AxisContext,
    ReplicaAxisContext,
    ShardingAxisContext,
    UnboundAxisError,
)
from lamina_mlir_lowering.context import default_context, make_context
from lamina_mlir_lowering.custom_call import (
    ensure_lapack_targets,
    ffi_attribute,
    ffi_call,
    ffi_lowering,
)
from lamina_mlir_lowering import lax_rules  # importing it registers every rule
from lamina_mlir_lowering.lowering import (
    PLATFORM_INDEX_NAME,
    LoweringResult,
    call_jaxpr,
    jaxpr_subcomp,
    lower_fun,
    lower_jaxpr_to_module,
    lower_sub_jaxpr,
    make_call_rule,
    sanitize_module_name,
)
from lamina_mlir_lowering.rules import (
    KNOWN_PLATFORMS,
    LoweringError,
    LoweringRule,
    LoweringRuleContext,
    ModuleContext,
    get_lowering_rule,
    has_lowering_rule,
    lowering_rules,
    platform_lowering_rules,
    register_lowering,
)
from lamina_mlir_lowering.serialization import module_to_bytecode, module_to_text, parse_module
from lamina_mlir_lowering.sharding import UNSPECIFIED, MeshShape, ShardingSpec, Unspecified
from lamina_mlir_lowering.types import aval_to_ir_type, dtype_to_ir_type, ir_constant

__all__ = [
    "__version__", "lax_rules",
    "AxisContext", "ReplicaAxisContext", "ShardingAxisContext", "UnboundAxisError",
    "default_context", "make_context",
    "ensure_lapack_targets", "ffi_attribute", "ffi_call", "ffi_lowering",
    "LoweringResult", "lower_fun", "lower_jaxpr_to_module", "jaxpr_subcomp", "lower_sub_jaxpr",
    "call_jaxpr", "make_call_rule", "sanitize_module_name", "PLATFORM_INDEX_NAME",
    "KNOWN_PLATFORMS", "LoweringError", "LoweringRule", "LoweringRuleContext",
    "ModuleContext", "get_lowering_rule", "has_lowering_rule", "lowering_rules",
    "platform_lowering_rules", "register_lowering",
    "module_to_bytecode", "module_to_text", "parse_module",
    "UNSPECIFIED", "MeshShape", "ShardingSpec", "Unspecified",
    "aval_to_ir_type", "dtype_to_ir_type", "ir_constant",
]
