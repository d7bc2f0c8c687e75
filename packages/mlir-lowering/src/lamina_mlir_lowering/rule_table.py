"""The lowering-rule tables, without MLIR: registering a rule imports nothing.

``rules`` (the context a rule runs in) re-exports everything here; this
module exists so that a layer which registers a rule beside its primitive at
import (``register_lowering(device_put_p, rule)``) does not load MLIR's
dialects and the lowering stack before anything is lowered, e.g. in a
process whose programs all come from the persistent trace cache.

Modules holding many rules can be registered by name
(:func:`defer_rule_module`): they are imported at the first lookup of a rule.
The rules of the primitives of one module of tracing-core that programs
rarely use (``lax.linalg``) can wait for that module
(:func:`defer_rule_module_until`): none of its primitives can be in a jaxpr
before it is imported, so a program that never imports it never loads them.
A rule registered before such a module is loaded keeps its place: loading
the module never replaces a rule registered earlier (in particular the
user's overrides of lax rules, which ``lax_rules`` would otherwise replace).
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lamina_tracing_core.primitives import Primitive

    from lamina_mlir_lowering.types import Value

__all__ = [
    "KNOWN_PLATFORMS", "LoweringRule", "canonicalize_platform", "defer_rule_module",
    "defer_rule_module_until",
    "get_lowering_rule", "has_lowering_rule", "load_deferred_rules", "lowering_rules",
    "platform_lowering_rules", "register_lowering",
]

LoweringRule = Callable[..., Sequence["Value"]]

#: The platforms a module can be lowered for (no device is needed for any).
KNOWN_PLATFORMS: tuple[str, ...] = ("cpu", "cuda", "rocm", "tpu")
_PLATFORM_ALIASES: dict[str, tuple[str, ...]] = {"gpu": ("cuda", "rocm")}

lowering_rules: dict[Primitive, LoweringRule] = {}
platform_lowering_rules: dict[str, dict[Primitive, LoweringRule]] = {
    p: {} for p in KNOWN_PLATFORMS}

#: modules whose import registers rules, imported at the first rule lookup
#: (``lax_rules``: a rule for every primitive of tracing-core)
_deferred: list[str] = ["lamina_mlir_lowering.lax_rules"]
#: (module of primitives, module of their rules): the rules load at a rule lookup
#: once the primitives' module is imported (or at :func:`load_deferred_rules`)
_waiting: list[tuple[str, str]] = []
_deferred_lock = threading.RLock()
_loaded_once = False  # whether a rule was looked up (deferred modules load at once)
_loading = False  # whether load_deferred_rules is importing (under the lock)


def canonicalize_platform(platform: str) -> str:
    """``'CPU'`` -> ``'cpu'``; raises for names lamina cannot lower for."""
    p = platform.lower()
    if p not in KNOWN_PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}: lowering supports "
                         f"{', '.join(KNOWN_PLATFORMS)}")
    return p


def _platforms_of(platform: str) -> tuple[str, ...]:
    p = platform.lower()
    if p in _PLATFORM_ALIASES:
        return _PLATFORM_ALIASES[p]
    return (canonicalize_platform(p),)


def register_lowering(prim: Primitive, rule: LoweringRule,
                      platform: str | None = None) -> LoweringRule:
    """Registers ``rule`` for ``prim`` on every platform, or as the override
    for ``platform`` only. Returns ``rule`` (usable as a decorator helper)."""
    if platform is None:
        lowering_rules[prim] = rule
    else:
        for p in _platforms_of(platform):
            platform_lowering_rules[p][prim] = rule
    return rule


def defer_rule_module(module: str) -> None:
    """Imports ``module`` (which registers rules) at the first rule lookup
    instead of now; at once if rules were looked up already."""
    with _deferred_lock:
        _deferred.append(module)
    if _loaded_once:
        _load(everything=False)


def defer_rule_module_until(primitives_module: str, module: str) -> None:
    """Imports ``module`` (the rules of the primitives ``primitives_module``
    defines) at the first rule lookup after ``primitives_module`` is imported,
    or at :func:`load_deferred_rules`, whichever comes first."""
    with _deferred_lock:
        _waiting.append((primitives_module, module))


def load_deferred_rules() -> None:
    """Imports the modules given to :func:`defer_rule_module` and
    :func:`defer_rule_module_until` (and ``lax_rules``) that are not imported
    yet: afterwards the tables hold every rule. Their rules never replace one
    registered before they were loaded. Another thread looking a rule up
    meanwhile waits until they are in."""
    _load(everything=True)


def _load(everything: bool) -> None:
    """The deferred modules, and of the waiting ones those whose primitives
    are imported (all of them if ``everything``)."""
    global _loaded_once, _loading
    with _deferred_lock:
        _loaded_once = True
        if _loading:  # a module being loaded looked a rule up (this thread)
            return
        _loading = True
        try:
            while _deferred or _ready(everything):
                if not _deferred:
                    _deferred.extend(_take_ready(everything))
                earlier: dict[Any, dict[Primitive, LoweringRule]] = {
                    None: dict(lowering_rules),
                    **{p: dict(t) for p, t in platform_lowering_rules.items()}}
                importlib.import_module(_deferred[0])
                del _deferred[0]  # (after the import: lookups meanwhile wait for it)
                lowering_rules.update(earlier[None])
                for p, table in platform_lowering_rules.items():
                    table.update(earlier[p])
        finally:
            _loading = False


def _ready(everything: bool) -> bool:
    return any(everything or source in sys.modules for source, _ in _waiting)


def _take_ready(everything: bool) -> list[str]:
    ready = [pair for pair in _waiting if everything or pair[0] in sys.modules]
    for pair in ready:
        _waiting.remove(pair)
    return [module for _, module in ready]


def get_lowering_rule(prim: Primitive, platform: str) -> LoweringRule | None:
    """The rule that lowers ``prim`` for ``platform`` (override first), or None."""
    if _deferred or (_waiting and _ready(False)):
        _load(everything=False)
    override = platform_lowering_rules[platform].get(prim)
    return override if override is not None else lowering_rules.get(prim)


def has_lowering_rule(prim: Primitive, platform: str = "cpu") -> bool:
    return get_lowering_rule(prim, canonicalize_platform(platform)) is not None
