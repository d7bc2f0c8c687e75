"""Registers every rule of this package under its JAX primitive name, and
binds them to the tracing-core primitives that exist when it runs."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from lamina_mlir_lowering.lax_rules import (
    collectives,
    control_flow,
    elementwise,
    indexing,
    linalg,
    random,
    reductions,
    sort,
    structural,
)
from lamina_mlir_lowering.rules import LoweringRule, register_lowering, register_lowering_by_name

__all__ = ["ALL_RULES", "register_all", "bind_primitives_in"]

ALL_RULES: dict[str, LoweringRule] = {}
for _module in (elementwise, structural, indexing, reductions, linalg, sort, random,
                control_flow, collectives):
    ALL_RULES.update(_module.RULES)


def bind_primitives_in(module: ModuleType) -> int:
    """Registers the rules for the primitives defined in ``module`` and its
    submodules (matched by name); returns how many were bound."""
    from lamina_tracing_core.primitives import Primitive

    modules = [module]
    if hasattr(module, "__path__"):
        for info in pkgutil.walk_packages(module.__path__, module.__name__ + "."):
            try:
                modules.append(importlib.import_module(info.name))
            except ImportError:
                continue
    bound = 0
    for m in modules:
        for value in vars(m).values():
            if isinstance(value, Primitive) and value.name in ALL_RULES:
                register_lowering(value, ALL_RULES[value.name])
                bound += 1
    return bound


def register_all() -> None:
    """Makes every rule findable by primitive name, then binds the ones whose
    primitives tracing-core defines (lax, control flow, collectives)."""
    for name, rule in ALL_RULES.items():
        register_lowering_by_name(name, rule)
    for package in ("lamina_tracing_core.lax", "lamina_tracing_core.control_flow",
                    "lamina_tracing_core.custom_derivatives", "lamina_tracing_core.checkpoint",
                    "lamina_tracing_core.parallel"):
        try:
            module = importlib.import_module(package)
        except ImportError:
            continue
        bind_primitives_in(module)
