"""Lowering of jaxprs to StableHLO modules with names, locations and shardings.

Entry point: ``lower_jaxpr_to_module(module_name, closed_jaxpr, ...)`` returns
a ``LoweringResult``. Rules live in ``lowering_rules`` /
``platform_lowering_rules``, keyed by the ``Primitive`` object
(``register_lowering(prim, rule, platform=None)``); every primitive of
tracing-core has one, registered beside it in ``lax_rules``, which is
imported at the first lookup of a rule.

The names below are loaded on first use (PEP 562): importing the package, or
a light part of it (``sharding``, ``serialization``, ``rule_table``), loads
neither MLIR's dialect classes nor the lowering stack, so a program served
from the persistent caches starts without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lamina_mlir_lowering.__about__ import __version__

if TYPE_CHECKING:
    from lamina_mlir_lowering import lax_rules
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
    from lamina_mlir_lowering.serialization import (
        module_to_bytecode,
        module_to_text,
        parse_module,
    )
    from lamina_mlir_lowering.sharding import UNSPECIFIED, MeshShape, ShardingSpec, Unspecified
    from lamina_mlir_lowering.types import aval_to_ir_type, dtype_to_ir_type, ir_constant

#: public name -> the submodule defining it
_WHERE: dict[str, str] = {
    **dict.fromkeys(("AxisContext", "ReplicaAxisContext", "ShardingAxisContext",
                     "UnboundAxisError"), "axis_context"),
    **dict.fromkeys(("default_context", "make_context"), "context"),
    **dict.fromkeys(("ensure_lapack_targets", "ffi_attribute", "ffi_call", "ffi_lowering"),
                    "custom_call"),
    **dict.fromkeys(("PLATFORM_INDEX_NAME", "LoweringResult", "call_jaxpr", "jaxpr_subcomp",
                     "lower_fun", "lower_jaxpr_to_module", "lower_sub_jaxpr", "make_call_rule",
                     "sanitize_module_name"), "lowering"),
    **dict.fromkeys(("LoweringError", "LoweringRuleContext", "ModuleContext"), "rules"),
    **dict.fromkeys(("KNOWN_PLATFORMS", "LoweringRule", "get_lowering_rule",
                     "has_lowering_rule", "lowering_rules", "platform_lowering_rules",
                     "register_lowering"), "rule_table"),
    **dict.fromkeys(("module_to_bytecode", "module_to_text", "parse_module"), "serialization"),
    **dict.fromkeys(("UNSPECIFIED", "MeshShape", "ShardingSpec", "Unspecified"), "sharding"),
    **dict.fromkeys(("aval_to_ir_type", "dtype_to_ir_type", "ir_constant"), "types"),
}

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


def __getattr__(name: str) -> Any:
    if name == "lax_rules":
        return importlib.import_module(f"{__name__}.lax_rules")
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
