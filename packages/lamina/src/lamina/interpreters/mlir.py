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

``jaxpr_subcomp(ctx.module_context, jaxpr, ctx.name_stack, TokenSet(), consts,
*args)`` inlines a jaxpr inside a rule (JAX's form: it returns the outputs and
the tokens); ``core_call_lowering`` is the rule of a call primitive whose
``call_jaxpr`` param holds its body (a private function called by name).

``ir`` is jaxlib's MLIR Python bindings module; the dialects are under
``jaxlib.mlir.dialects`` (``stablehlo``, ``func``, ``chlo``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, cast

import numpy as np
from jaxlib.mlir import ir as ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_interpreters_pxla.sharding import Mesh as Mesh
from lamina_mlir_lowering import types as _types
from lamina_mlir_lowering.axis_context import AxisContext as AxisContext
from lamina_mlir_lowering.context import make_context as make_ir_context
from lamina_mlir_lowering.lax_rules.callbacks import emit_python_callback as emit_python_callback
from lamina_mlir_lowering import lowering as _lowering
from lamina_mlir_lowering.lowering import LoweringResult as LoweringResult
from lamina_mlir_lowering.lowering import lower_fun as lower_fun
from lamina_mlir_lowering.rules import LoweringRule as LoweringRule
from lamina_mlir_lowering.rules import LoweringRuleContext as LoweringRuleContext
from lamina_mlir_lowering.rules import ModuleContext as ModuleContext
from lamina_mlir_lowering.rules import lowering_rules as lowering_rules
from lamina_mlir_lowering.rules import platform_lowering_rules as platform_lowering_rules
from lamina_mlir_lowering.rules import register_lowering as _register_lowering
from lamina_mlir_lowering.rule_table import load_deferred_rules as _load_deferred_rules
from lamina_mlir_lowering.serialization import module_to_bytecode as module_to_bytecode
from lamina_mlir_lowering.serialization import module_to_text
from lamina_mlir_lowering.types import Value as Value
from lamina_mlir_lowering.types import dense_i64_array as dense_int_array
from lamina_mlir_lowering.types import dense_int_elements as dense_int_elements
from lamina_mlir_lowering.types import dtype_to_ir_type as dtype_to_ir_type
from lamina_mlir_lowering.types import i64_attr as i64_attr
from lamina_mlir_lowering.types import ir_constant as _ir_constant
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core import partial_eval as _pe
from lamina_tracing_core.effects import Effect, is_ordered
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr
from lamina_tracing_core.primitives import Primitive

# The tables below are read directly by code written against JAX's module:
# fill them with the rules registered at the first lowering (jit's, ...).
_load_deferred_rules()

__all__ = [
    "DEVICE_TO_DEVICE_TYPE", "RECV_FROM_HOST_TYPE", "SEND_TO_HOST_TYPE", "Mesh", "MeshAxisName",
    "Token", "AxisContext", "ConstantHandler", "LoweringResult", "LoweringRule", "LoweringRuleContext",
    "ModuleContext", "TokenSet", "Value", "aval_to_ir_type", "aval_to_ir_types", "core_call_lowering",
    "dense_int_array", "dense_int_elements", "dtype_to_ir_type", "emit_python_callback",
    "flatten_ir_types", "flatten_ir_values", "i32_attr", "i64_attr", "ir", "ir_attribute",
    "ir_constant", "ir_constants", "jaxpr_subcomp", "lower_fun", "lower_jaxpr_to_fun",
    "lowering_rules", "make_ir_context", "merge_mlir_modules", "module_to_bytecode", "module_to_string", "platform_lowering_rules",
    "register_constant_handler", "register_lowering", "shape_tensor", "token_type", "unflatten_ir_values_like_types",
]

#: StableHLO's channel types, for the ``stablehlo.ChannelHandle`` of a
#: send/recv a rule emits: between devices, to the host, from the host.
DEVICE_TO_DEVICE_TYPE = 1
SEND_TO_HOST_TYPE = 2
RECV_FROM_HOST_TYPE = 3

#: An ordered-effects token in a rule (an ``!stablehlo.token`` value).
Token: TypeAlias = ir.Value
#: The name of a mesh axis.
MeshAxisName: TypeAlias = Any


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


class ConstantHandler(Protocol):
    """Builds the MLIR values of a constant of a registered type:
    ``handler(val, aval)`` (``aval`` None when the caller gave none) returns
    one value or a sequence of them."""

    def __call__(self, val: Any, aval: ShapedArray | None) -> Value | Sequence[Value]: ...


_constant_handlers: dict[type, ConstantHandler] = {}


def register_constant_handler(type_: type, handler_fun: ConstantHandler) -> None:
    """Makes :func:`ir_constant`/:func:`ir_constants` build the constants of
    ``type_`` (and its subclasses) with ``handler_fun``."""
    _constant_handlers[type_] = handler_fun


def _handled_constant(val: Any, aval: ShapedArray | None) -> tuple[Value, ...] | None:
    for t in type(val).__mro__:
        handler = _constant_handlers.get(t)
        if handler is not None:
            out = handler(val, aval)
            return (out,) if isinstance(out, ir.Value) else tuple(out)
    return None


def ir_constant(val: Any, *, const_lowering: Any = None, aval: ShapedArray | None = None
                ) -> Value:
    """A ``stablehlo.constant`` equal to ``val`` (of ``aval``'s dtype when
    given), or what the handler registered for ``val``'s type builds (which
    must be one value)."""
    del const_lowering
    handled = _handled_constant(val, aval)
    if handled is not None:
        if len(handled) != 1:
            raise ValueError(f"ir_constant: the constant handler of {type(val).__name__} "
                             f"built {len(handled)} values, not one")
        return handled[0]
    return _ir_constant(val, dtype=aval.dtype if aval is not None else None)


def ir_constants(val: Any, *, const_lowering: Any = None, aval: ShapedArray | None = None
                 ) -> tuple[Value, ...]:
    """The MLIR values of the constant ``val``: what the handler registered
    for its type builds, else ``ir_constant``'s one value."""
    handled = _handled_constant(val, aval)
    if handled is not None:
        return handled
    return (ir_constant(val, const_lowering=const_lowering, aval=aval),)


def i32_attr(value: int) -> ir.IntegerAttr:
    """A 32-bit signless integer attribute."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32), int(value))


def _flatten_one_level(xs: Iterable[Any], leaf_type: type) -> list[Any]:
    """``xs`` with each sequence among them spliced in (leaves of ``leaf_type`` kept)."""
    out: list[Any] = []
    for x in xs:
        if isinstance(x, leaf_type):
            out.append(x)
        else:
            out.extend(x)
    return out


def flatten_ir_values(xs: Iterable[Value | Sequence[Value]]) -> list[Value]:
    """One list of values from values and sequences of values."""
    return _flatten_one_level(xs, ir.Value)


def module_to_string(module: ir.Module, enable_debug_info: bool | None = None) -> str:
    """The module's MLIR text (with locations when ``enable_debug_info``)."""
    return module_to_text(module, debug_info=bool(enable_debug_info))


def token_type() -> ir.Type:
    """The MLIR type of an ordered-effects token (``!stablehlo.token``)."""
    return hlo.TokenType.get()


def flatten_ir_types(xs: Iterable[ir.Type | Sequence[ir.Type]]) -> list[ir.Type]:
    """One list of types from types and sequences of types."""
    return _flatten_one_level(xs, ir.Type)


def unflatten_ir_values_like_types(xs: Iterable[Value],
                                   ys: Sequence[ir.Type | Sequence[ir.Type]]
                                   ) -> list[Value | list[Value]]:
    """Groups the flat values ``xs`` as the types ``ys`` are grouped: a value
    where ``ys`` has a type, a list where it has a sequence of types."""
    it = iter(xs)
    out: list[Value | list[Value]] = []
    for y in ys:
        out.append(next(it) if isinstance(y, ir.Type) else [next(it) for _ in y])
    rest = list(it)
    if rest:
        raise ValueError(f"unflatten_ir_values_like_types: {len(rest)} values left over "
                         f"after grouping like {len(ys)} types")
    return out


def ir_attribute(val: Any) -> ir.Attribute:
    """The MLIR attribute of a Python value: an attribute itself, a bool,
    int (i64), float (f64), str, numpy scalar (of its type), numpy array
    (dense elements), or a list/tuple of those (an array attribute)."""
    if isinstance(val, ir.Attribute):
        return val
    if isinstance(val, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(val))
    if isinstance(val, int):
        return i64_attr(val)
    if isinstance(val, float):
        return ir.FloatAttr.get(ir.F64Type.get(), val)
    if isinstance(val, str):
        return ir.StringAttr.get(val)
    if isinstance(val, np.integer):
        return ir.IntegerAttr.get(dtype_to_ir_type(val.dtype), int(val))
    if isinstance(val, np.floating):
        return ir.FloatAttr.get(dtype_to_ir_type(val.dtype), float(val))
    if isinstance(val, np.ndarray):
        return _types.dense_elements_attr(val)
    if isinstance(val, (list, tuple)):
        return ir.ArrayAttr.get([ir_attribute(v) for v in val])
    raise TypeError(f"ir_attribute: no MLIR attribute for a value of type {type(val).__name__}")


def shape_tensor(ctx: ModuleContext, sizes: Sequence[int | Value]) -> Value:
    """A 1-D ``int32`` tensor of ``sizes`` (ints, or scalar integer values
    computed in the module), as dynamic-shape ops take."""
    del ctx
    i32 = ir.IntegerType.get_signless(32)
    one = ir.RankedTensorType.get([1], i32)
    parts: list[Value] = []
    for d in sizes:
        if isinstance(d, int):
            parts.append(_ir_constant(np.array([d], np.int32)))
            continue
        scalar = d
        if ir.RankedTensorType(d.type).element_type != i32:
            scalar = hlo.convert(ir.RankedTensorType.get([], i32), d)
        parts.append(hlo.reshape(one, scalar))
    if not parts:
        return _ir_constant(np.array([], np.int32))
    return parts[0] if len(parts) == 1 else hlo.concatenate(parts, i64_attr(0))


class TokenSet(Mapping[Effect, Value]):
    """The ordered-effects tokens a lowered computation threads, by effect.

    lamina threads one token for all ordered effects through the module
    context; a ``TokenSet`` is how :func:`jaxpr_subcomp` (JAX's form) takes
    and returns it."""

    def __init__(self, tokens: Mapping[Effect, Value] | None = None):
        self._tokens = dict(tokens or {})

    def __getitem__(self, effect: Effect) -> Value:
        return self._tokens[effect]

    def __iter__(self) -> Iterator[Effect]:
        return iter(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def effects(self) -> set[Effect]:
        return set(self._tokens)

    def subset(self, effects: Iterable[Effect]) -> TokenSet:
        return TokenSet({e: self._tokens[e] for e in effects})

    def update_tokens(self, tokens: TokenSet) -> TokenSet:
        return TokenSet({**self._tokens, **tokens._tokens})


def jaxpr_subcomp(ctx: ModuleContext, jaxpr: Jaxpr, name_stack: Any, tokens: TokenSet,
                  consts_for_constvars: Sequence[Value], *args: Value,
                  dim_var_values: Sequence[Value] = (), const_lowering: Any = None,
                  outer_traceback: Any = None) -> tuple[list[Value], TokenSet]:
    """Lowers ``jaxpr``'s equations at the current insertion point, with
    ``consts_for_constvars``/``args`` as its constvars/invars, and returns
    ``(outputs, tokens)``. ``name_stack`` (a ``NameStack`` or a string, as a
    rule's ``ctx.name_stack``) prefixes the ops' names. A jaxpr with ordered
    effects starts from a token in ``tokens`` (else the module's current one)
    and the returned set maps its ordered effects to the token it leaves."""
    del const_lowering, outer_traceback
    if len(dim_var_values):
        raise ValueError("jaxpr_subcomp: dim_var_values given, but lamina lowers only "
                         "static shapes")
    ordered = [e for e in jaxpr.effects if is_ordered(e)]
    given = [tokens[e] for e in ordered if e in tokens]
    if given:
        ctx.token = given[0]
    outs = _lowering.jaxpr_subcomp(
        ctx, jaxpr, list(consts_for_constvars), list(args), name_stack=str(name_stack or ""),
        platforms=ctx.platforms, platform_index=None, axis_context=ctx.axis_context)
    if not ordered:
        return outs, tokens
    token = ctx.take_token()
    return outs, tokens.update_tokens(TokenSet({e: token for e in ordered}))


def core_call_lowering(ctx: LoweringRuleContext, *args: Value, name: str,
                       backend: str | None = None,
                       call_jaxpr: ClosedJaxpr | Jaxpr) -> list[Value]:
    """The lowering of a call primitive (params ``name`` and ``call_jaxpr``):
    its body becomes a private function ``name``, called here."""
    del backend
    return _lowering.call_jaxpr(ctx, call_jaxpr, args, name=name)


def lower_jaxpr_to_fun(ctx: ModuleContext, name: str, jaxpr: ClosedJaxpr,
                       effects: Sequence[Effect] = (), *, num_const_args: int = 0,
                       main_function: bool = False, in_avals: Sequence[ShapedArray] | None = None,
                       **unsupported: Any) -> func.FuncOp:
    """Emits ``jaxpr`` as a private ``func.func`` of the module, named
    ``name`` (made unique), and returns it; call it with ``func.CallOp``.

    With ``num_const_args`` equal to the number of ``jaxpr.consts`` the
    function takes the constants as its leading arguments (else 0: they are
    embedded). The function threads an ordered-effects token first when the
    jaxpr has ordered effects (``effects`` is read from the jaxpr), after the
    platform index of a multi-platform module. ``in_avals`` are checked
    against the jaxpr's. JAX's sharding, layout, memory-kind, donation and
    naming options are not taken here: lamina places those on the entry
    function ``jit`` lowers."""
    del effects
    given = sorted(k for k, v in unsupported.items() if v not in (None, True, False))
    if given or main_function:
        what = ", ".join(given) if given else "main_function=True"
        raise ValueError(f"lower_jaxpr_to_fun: {what} is not supported; lamina lowers the "
                         f"entry function (its shardings, layouts, names) through jit")
    body, consts = jaxpr.jaxpr, list(jaxpr.consts)
    if num_const_args:
        if num_const_args != len(consts):
            raise ValueError(f"lower_jaxpr_to_fun: num_const_args={num_const_args} for a "
                             f"jaxpr with {len(consts)} constants")
        body, consts = _pe.convert_constvars_jaxpr(body), []
    if in_avals is not None and list(in_avals) != [v.aval for v in body.invars]:
        raise ValueError(f"lower_jaxpr_to_fun: in_avals {list(in_avals)} do not match the "
                         f"jaxpr's inputs {[v.aval for v in body.invars]}")
    ctx.keepalive.append(jaxpr)
    symbol, _ = _lowering.lower_private_function(ctx, name, body, consts, ctx.axis_context)
    return cast(func.FuncOp, ir.SymbolTable(ctx.module.operation)[symbol])


def merge_mlir_modules(dst_module: ir.Module, sym_name: str, src_module: ir.Module,
                       dst_symtab: ir.SymbolTable | None = None) -> str:
    """Moves the functions of ``src_module`` into ``dst_module``, made private;
    its ``main`` becomes ``sym_name``, and a function whose name is taken in
    ``dst_module`` gets a fresh one (``name_0``, ``name_1``...), uses renamed
    alike. Returns ``main``'s new name. ``src_module`` is emptied."""
    src_table = ir.SymbolTable(src_module.operation)
    dst_table = dst_symtab if dst_symtab is not None else ir.SymbolTable(dst_module.operation)
    ops = list(src_module.body.operations)
    names = [ir.StringAttr(op.attributes["sym_name"]).value for op in ops]
    if "main" not in names:
        raise ValueError("merge_mlir_modules: src_module has no function named main")
    taken = set(names)
    renames: dict[str, str] = {}
    for name in names:
        if name != "main" and name not in dst_table:
            continue
        base = sym_name if name == "main" else name
        fresh, i = base, 0
        while fresh in taken or fresh in dst_table:
            fresh, i = f"{base}_{i}", i + 1
        taken.add(fresh)
        renames[name] = fresh
    for op in ops:
        old = ir.StringAttr(op.attributes["sym_name"]).value
        if old in renames:
            src_table.set_symbol_name(op, renames[old])
        op.attributes["sym_visibility"] = ir.StringAttr.get("private")
    for old, new in renames.items():
        for op in ops:
            src_table.replace_all_symbol_uses(old, new, op)
    for op in ops:
        dst_module.body.append(op)
        dst_table.insert(op)
    return renames["main"]
