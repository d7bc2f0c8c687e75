"""``lamina.interpreters.mlir``: lowering rules (JAX's ``jax.interpreters.mlir``),
over mlir-lowering's one rule table.

A lowering rule is ``rule(ctx, *operands, **params) -> Sequence[ir.Value]``:
``ctx`` is a ``LoweringRuleContext`` (``ctx.avals_in``, ``ctx.avals_out``,
``ctx.module_context``, ``ctx.platforms``), ``operands`` the MLIR values of
the equation's inputs, and the result one value per output (a list, a tuple
or an operation's ``.results``). Operations the rule builds get the
equation's location (its user line and name path) without the rule doing
anything. ``register_lowering(prim, rule, platform=None)`` registers it for
every platform or overrides it for one (``'cpu'``, ``'cuda'``, ``'rocm'``,
``'tpu'``, ``'gpu'`` = cuda and rocm); ``lower_fun(fun, multiple_results)``
makes a rule from a function written with lax/numpy operations.

``ir`` is jaxlib's MLIR Python bindings module; the dialects are under
``jaxlib.mlir.dialects`` (``stablehlo``, ``func``, ``chlo``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jaxlib.mlir import ir as ir
from lamina_mlir_lowering import types as _types
from lamina_mlir_lowering.axis_context import AxisContext as AxisContext
from lamina_mlir_lowering.context import make_context as make_ir_context
from lamina_mlir_lowering.lax_rules.callbacks import emit_python_callback as emit_python_callback
from lamina_mlir_lowering.lowering import LoweringResult as LoweringResult
from lamina_mlir_lowering.lowering import lower_fun as lower_fun
from lamina_mlir_lowering.rules import LoweringRule as LoweringRule
from lamina_mlir_lowering.rules import LoweringRuleContext as LoweringRuleContext
from lamina_mlir_lowering.rules import ModuleContext as ModuleContext
from lamina_mlir_lowering.rules import lowering_rules as lowering_rules
from lamina_mlir_lowering.rules import platform_lowering_rules as platform_lowering_rules
from lamina_mlir_lowering.rules import register_lowering as _register_lowering
from lamina_mlir_lowering.serialization import module_to_bytecode as module_to_bytecode
from lamina_mlir_lowering.serialization import module_to_text
from lamina_mlir_lowering.types import Value as Value
from lamina_mlir_lowering.types import dense_i64_array as dense_int_array
from lamina_mlir_lowering.types import dense_int_elements as dense_int_elements
from lamina_mlir_lowering.types import dtype_to_ir_type as dtype_to_ir_type
from lamina_mlir_lowering.types import i64_attr as i64_attr
from lamina_mlir_lowering.types import ir_constant as _ir_constant
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.primitives import Primitive

__all__ = [
    "AxisContext", "LoweringResult", "LoweringRule", "LoweringRuleContext", "ModuleContext",
    "Value", "aval_to_ir_type", "aval_to_ir_types", "dense_int_array", "dense_int_elements",
    "dtype_to_ir_type", "emit_python_callback", "flatten_ir_values", "i32_attr", "i64_attr", "ir", "ir_constant",
    "ir_constants", "lower_fun", "lowering_rules", "make_ir_context", "module_to_bytecode",
    "module_to_string", "platform_lowering_rules", "register_lowering",
]


def register_lowering(prim: Primitive, rule: LoweringRule, platform: str | None = None,
                      inline: bool = True, cacheable: bool = True) -> None:
    """Registers ``rule`` as ``prim``'s lowering on every platform, or as the
    override for ``platform``. ``inline`` and ``cacheable`` are accepted for
    JAX's signature: lamina always emits a rule's operations at the equation
    (so they keep its location), and lowers each module afresh."""
    del inline, cacheable
    _register_lowering(prim, rule, platform)


def _aval_of(args: tuple[Any, ...], name: str) -> ShapedArray:
    # JAX 0.10 passes the module context first; earlier versions did not.
    if len(args) == 2 and isinstance(args[0], ModuleContext):
        args = args[1:]
    if len(args) != 1 or not isinstance(args[0], ShapedArray):
        raise TypeError(f"{name}: expected (ctx, aval) or (aval,), got "
                        f"{', '.join(type(a).__name__ for a in args)}")
    return args[0]


def aval_to_ir_type(*args: Any) -> ir.Type:
    """``tensor<shape x element>`` of an aval: ``aval_to_ir_type(ctx, aval)``
    (JAX 0.10's form) or ``aval_to_ir_type(aval)``."""
    return _types.aval_to_ir_type(_aval_of(args, "aval_to_ir_type"))


def aval_to_ir_types(*args: Any) -> tuple[ir.Type, ...]:
    """The MLIR types of an aval's value, as a tuple (one for an array)."""
    return (_types.aval_to_ir_type(_aval_of(args, "aval_to_ir_types")),)


def ir_constant(val: Any, *, const_lowering: Any = None, aval: ShapedArray | None = None
                ) -> Value:
    """A ``stablehlo.constant`` equal to ``val`` (of ``aval``'s dtype when given)."""
    del const_lowering
    return _ir_constant(val, dtype=aval.dtype if aval is not None else None)


def ir_constants(val: Any, *, const_lowering: Any = None, aval: ShapedArray | None = None
                 ) -> tuple[Value, ...]:
    """``ir_constant`` as a one-element tuple (JAX's form for types with
    several MLIR values; an array has one)."""
    return (ir_constant(val, const_lowering=const_lowering, aval=aval),)


def i32_attr(value: int) -> ir.IntegerAttr:
    """A 32-bit signless integer attribute."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def flatten_ir_values(xs: Iterable[Value | Sequence[Value]]) -> list[Value]:
    """One list of values from values and sequences of values."""
    out: list[Value] = []
    for x in xs:
        if isinstance(x, ir.Value):
            out.append(x)
        else:
            out.extend(x)
    return out


def module_to_string(module: ir.Module, enable_debug_info: bool | None = None) -> str:
    """The module's MLIR text (with locations when ``enable_debug_info``)."""
    return module_to_text(module, debug_info=bool(enable_debug_info))


