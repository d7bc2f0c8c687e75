"""The lowering-rule tables and the context a rule runs in.

A lowering rule turns one equation into MLIR operations::

    rule(ctx: LoweringRuleContext, *operands: Value, **params) -> Sequence[Value]

``operands`` are the MLIR values of the equation's inputs, ``params`` its
params (JAX's names and types), and the result has one value per output of
the equation, in order (a single-result primitive returns a one-element
list). Rules build operations at the current insertion point; the current
location is already the equation's ``loc(...)``. ``ctx`` gives the input and
output avals, the module being built, the target platforms and the axis
context (for collectives).

Tables:

- ``lowering_rules[prim]``: the rule for every platform;
- ``platform_lowering_rules[platform][prim]``: an override for one platform
  (``cpu``, ``cuda``, ``rocm``, ``tpu``; ``gpu`` registers for cuda and rocm).

Both are keyed by the ``Primitive`` object; ``register_lowering(prim, rule,
platform=None)`` fills them, called right beside the rule it registers
(``register_lowering(lax.sin_p, _sin)``). The tables live in
:mod:`~lamina_mlir_lowering.rule_table` (registering needs no MLIR).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.source_info import SourceInfo

from lamina_mlir_lowering.axis_context import AxisContext
from lamina_mlir_lowering.rule_table import (
    KNOWN_PLATFORMS,
    LoweringRule,
    canonicalize_platform,
    get_lowering_rule,
    has_lowering_rule,
    lowering_rules,
    platform_lowering_rules,
    register_lowering,
)
from lamina_mlir_lowering.locations import LocationCache
from lamina_mlir_lowering.sharding import MeshShape
from lamina_mlir_lowering.types import TypeCache, Value

if TYPE_CHECKING:
    from lamina_tracing_core.jaxpr import JaxprEqn
    from lamina_tracing_core.primitives import Primitive

__all__ = [
    "LoweringRule", "ResolvedRules", "LoweringRuleContext", "ModuleContext", "LoweringError",
    "lowering_rules", "platform_lowering_rules", "register_lowering",
    "get_lowering_rule", "has_lowering_rule",
    "KNOWN_PLATFORMS", "canonicalize_platform",
]

#: A primitive's rules for a set of platforms: (the common rule or None, per platform).
ResolvedRules = tuple[LoweringRule | None, tuple[LoweringRule | None, ...]]


class LoweringError(Exception):
    """A jaxpr could not be lowered: no rule for a primitive on a platform, a
    rule that failed, or a module that does not verify. The message names the
    primitive, the platform and the user's source line where known."""


class ModuleContext:
    """What every rule of one module lowering shares.

    ``platforms`` are the module's target platforms; ``axis_context`` what
    named axes mean; ``types``/``locations`` cache types and locations;
    ``functions`` maps a callee key to the private ``func.func`` emitted for
    it, so each distinct callee is lowered once. ``host_callbacks`` collects
    the Python functions the module's callback custom calls run (their index
    is the custom call's ``index``); ``token`` is the current ordered-effects
    token of the function being lowered (None where there is none): a rule
    with an ordered effect takes it and sets the token it produces."""

    __slots__ = ("context", "module", "types", "locations", "platforms", "axis_context",
                 "num_replicas", "num_partitions", "sharding_format", "functions",
                 "_symbols", "keepalive", "_rule_cache", "host_callbacks", "token",
                 "sharding_inspectors", "mesh")

    def __init__(self, context: ir.Context, module: ir.Module, *, platforms: tuple[str, ...],
                 axis_context: AxisContext | None, num_replicas: int, num_partitions: int,
                 sharding_format: str, types: TypeCache):
        self.context = context
        self.module = module
        self.types = types
        self.locations = LocationCache()
        self.platforms = platforms
        self.axis_context = axis_context
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.sharding_format = sharding_format
        self.functions: dict[Hashable, Any] = {}
        self._symbols: set[str] = set()
        #: Objects whose identity keys ``functions`` (kept alive so ids stay unique).
        self.keepalive: list[Any] = []
        self._rule_cache: dict[tuple[str, ...], dict[Primitive, ResolvedRules]] = {}
        self.host_callbacks: list[Callable[..., Any]] = []
        self.token: Value | None = None
        #: the functions XLA's partitioner calls back with a sharding (kept alive)
        self.sharding_inspectors: list[Callable[..., Any]] = []
        #: The module's Shardy mesh (``@mesh``), which manual computations name.
        self.mesh: MeshShape | None = None

    def add_host_callback(self, fun: Callable[..., Any]) -> int:
        """Registers ``fun`` with the module; returns its index."""
        self.host_callbacks.append(fun)
        return len(self.host_callbacks) - 1

    def add_keepalive(self, keepalive: Any) -> None:
        """Keeps ``keepalive`` alive as long as the module (JAX's name; rules
        that register host callbacks hand their objects here)."""
        self.keepalive.append(keepalive)

    def take_token(self) -> Value:
        """The current ordered-effects token (a fresh one if none is threaded)."""
        if self.token is None:
            self.token = _fresh_token()
        return self.token

    def unique_symbol(self, name: str) -> str:
        """``name``, or ``name_0``, ``name_1``... if already taken in the module."""
        if name not in self._symbols:
            self._symbols.add(name)
            return name
        i = 0
        while f"{name}_{i}" in self._symbols:
            i += 1
        self._symbols.add(f"{name}_{i}")
        return f"{name}_{i}"

    def rule_table(self, platforms: tuple[str, ...]) -> dict[Primitive, ResolvedRules]:
        """The (lazily filled) table of resolved rules for ``platforms``."""
        table = self._rule_cache.get(platforms)
        if table is None:
            table = self._rule_cache[platforms] = {}
        return table

    @staticmethod
    def resolve_rules(prim: Primitive, platforms: tuple[str, ...]) -> ResolvedRules:
        """``(rule, rules)``: ``rule`` when every platform uses the same one,
        else None; ``rules`` has the rule of each platform (None if missing)."""
        rules = tuple(get_lowering_rule(prim, p) for p in platforms)
        first = rules[0]
        common = first if first is not None and all(r is first for r in rules) else None
        return common, rules


def _fresh_token() -> Value:
    return hlo.after_all([])


class LoweringRuleContext:
    """The context of one rule application (one equation).

    - ``module_context``: the module being built (``ModuleContext``);
    - ``primitive``, ``avals_in``, ``avals_out``: the equation's primitive and
      the avals of its inputs and outputs;
    - ``source_info``: the equation's ``SourceInfo`` (file, line, name stack);
    - ``name_stack``: the name path of the enclosing computation (``jit(f)``),
      prefixed to the ops' names;
    - ``platforms``: the platforms this rule is lowered for (one, except in a
      multi-platform module where rules agree); ``platform`` the first;
    - ``platform_index``: the ``i32`` value selecting among the module's
      platforms (multi-platform modules only, else None);
    - ``axis_context``: what named axes mean here (None outside pmap/SPMD);
    - ``loc``: the equation's location (already the current location);
    - ``eqn``: the equation itself, for error messages (None for synthesized
      applications).
    """

    __slots__ = ("module_context", "primitive", "avals_in", "avals_out", "source_info",
                 "name_stack", "platforms", "platform_index", "axis_context", "loc", "eqn")

    def __init__(self, module_context: ModuleContext, primitive: Primitive | None,
                 avals_in: Sequence[ShapedArray], avals_out: Sequence[ShapedArray],
                 source_info: SourceInfo | None, name_stack: str, platforms: tuple[str, ...],
                 platform_index: Value | None, axis_context: AxisContext | None,
                 loc: ir.Location, eqn: JaxprEqn | None = None):
        self.module_context = module_context
        self.primitive = primitive
        self.avals_in = avals_in
        self.avals_out = avals_out
        self.source_info = source_info
        self.name_stack = name_stack
        self.platforms = platforms
        self.platform_index = platform_index
        self.axis_context = axis_context
        self.loc = loc
        self.eqn = eqn

    @property
    def platform(self) -> str:
        return self.platforms[0]

    def replace(self, **changes: Any) -> LoweringRuleContext:
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return LoweringRuleContext(**fields)

    def ir_type(self, aval: ShapedArray) -> ir.RankedTensorType:
        return self.module_context.types.tensor(aval)

    def out_type(self, i: int = 0) -> ir.RankedTensorType:
        return self.module_context.types.tensor(self.avals_out[i])

    def out_types(self) -> list[ir.RankedTensorType]:
        tensor = self.module_context.types.tensor
        return [tensor(a) for a in self.avals_out]

    def where(self) -> str:
        """``primitive 'add' at user.py:3 (f)`` for error messages."""
        name = self.primitive.name if self.primitive is not None else "<lowering>"
        return f"primitive {name!r} at {self.source_info or '<unknown>'}"

    def error(self, message: str) -> LoweringError:
        """A LoweringError about this equation (the caller raises it)."""
        return LoweringError(f"{message} (while lowering {self.where()} for "
                             f"platform {self.platform!r})")
