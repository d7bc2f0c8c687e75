"""Lowering of jaxprs to StableHLO modules with names, locations and shardings.

Entry point: ``lower_jaxpr_to_module(module_name, closed_jaxpr, ...)`` returns
a ``LoweringResult``. Rules live in ``lowering_rules`` /
``platform_lowering_rules`` (``register_lowering``); every lax, control-flow
and collective primitive of tracing-core has one, registered on import.
"""

from lamina_mlir_lowering.__about__ import __version__
from lamina_mlir_lowering.axis_context import (
    AxisContext,
    ReplicaAxisContext,
    ShardingAxisContext,
    UnboundAxisError,
)
from lamina_mlir_lowering.context import default_context, make_context
from lamina_mlir_lowering.lax_rules.registry import register_all as _register_all
from lamina_mlir_lowering.lowering import (
    PLATFORM_INDEX_NAME,
    LoweringResult,
    call_jaxpr,
    jaxpr_subcomp,
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
    register_lowering_by_name,
)
from lamina_mlir_lowering.serialization import module_to_bytecode, module_to_text, parse_module
from lamina_mlir_lowering.sharding import UNSPECIFIED, MeshShape, ShardingSpec, Unspecified
from lamina_mlir_lowering.types import aval_to_ir_type, dtype_to_ir_type, ir_constant

_register_all()

__all__ = [
    "__version__",
    "AxisContext", "ReplicaAxisContext", "ShardingAxisContext", "UnboundAxisError",
    "default_context", "make_context",
    "LoweringResult", "lower_jaxpr_to_module", "jaxpr_subcomp", "lower_sub_jaxpr",
    "call_jaxpr", "make_call_rule", "sanitize_module_name", "PLATFORM_INDEX_NAME",
    "KNOWN_PLATFORMS", "LoweringError", "LoweringRule", "LoweringRuleContext",
    "ModuleContext", "get_lowering_rule", "has_lowering_rule", "lowering_rules",
    "platform_lowering_rules", "register_lowering", "register_lowering_by_name",
    "module_to_bytecode", "module_to_text", "parse_module",
    "UNSPECIFIED", "MeshShape", "ShardingSpec", "Unspecified",
    "aval_to_ir_type", "dtype_to_ir_type", "ir_constant",
]
