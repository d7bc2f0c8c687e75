"""Lowering a closed jaxpr to a StableHLO module.

``lower_jaxpr_to_module`` builds a module whose public ``main`` function
computes the jaxpr, records names, shardings and donation on ``main``'s
arguments and results, and returns a ``LoweringResult`` saying exactly what
reached the module. The building blocks are public so that rules of
higher-order primitives can reuse them:

- ``jaxpr_subcomp`` lowers a jaxpr's equations at the current insertion point
  (used for region bodies: while, case, reduce, sort...);
- ``lower_sub_jaxpr`` does the same from inside a rule, with the rule's
  platforms and axis context;
- ``call_jaxpr`` emits a ``func.call`` to a private function lowered once per
  distinct callee (key: the jaxpr's identity and the call's name);
- ``make_call_rule`` builds the one-line rule of a call-like primitive
  (``jit``'s ``pjit_p``, ``closed_call``, custom_jvp/vjp calls, ``remat``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any, cast

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, sdy
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core import source_info as _si
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.dtypes import float0
from lamina_tracing_core.effects import has_ordered_effects
from lamina_tracing_core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var

from lamina_mlir_lowering.axis_context import AxisContext, ShardingAxisContext
from lamina_mlir_lowering.context import default_context
from lamina_mlir_lowering.lowering_result import TOKEN_AVAL, LoweringResult
from lamina_mlir_lowering.rules import (
    LoweringError,
    LoweringRule,
    LoweringRuleContext,
    ModuleContext,
    canonicalize_platform,
)
from lamina_mlir_lowering.sharding import (
    UNSPECIFIED,
    ArgSharding,
    MeshShape,
    ShardingSpec,
    is_unspecified,
)
from lamina_mlir_lowering.types import TypeCache, Value, ir_constant, type_cache

__all__ = [
    "LoweringResult", "lower_jaxpr_to_module", "jaxpr_subcomp", "lower_sub_jaxpr",
    "call_jaxpr", "make_call_rule", "lower_fun", "sanitize_module_name", "SHARDING_FORMATS",
    "PLATFORM_INDEX_NAME", "TOKEN_AVAL", "manual_computation", "lower_private_function",
]

SHARDING_FORMATS = ("shardy", "gspmd")
#: How the leading platform-selecting argument of a multi-platform module is named.
PLATFORM_INDEX_NAME = "_platform_index"
_MESH_NAME = "mesh"
_SYMBOL_BAD = re.compile(r"[^\w.$-]")


def sanitize_module_name(name: str) -> str:
    """A valid symbol from a function-derived name: ``jit_<lambda>`` becomes
    ``jit__lambda``; other characters outside ``[A-Za-z0-9_.$-]`` become ``_``."""
    name = name.replace("<", "_").replace(">", "")
    name = _SYMBOL_BAD.sub("_", name)
    return name or "module"


# --- lowering equations ----------------------------------------------------------
class _Env:
    """Values of a jaxpr's variables during lowering."""

    __slots__ = ("values", "types")

    def __init__(self, types: TypeCache) -> None:
        self.values: dict[Var, Value] = {}
        self.types = types

    def read(self, atom: Any) -> Value:
        if type(atom) is Literal:
            value = np.asarray(atom.val, atom.aval.dtype)
            if value.ndim == 0 and value.dtype != float0:
                return self.types.scalar_constant(value)
            return ir_constant(value)
        try:
            return self.values[atom]
        except KeyError:
            raise LoweringError(f"variable {atom!r} is read before it is defined") from None


def _origin(eqn: JaxprEqn) -> str:
    return f"equation `{_eqn_summary(eqn)}` from {eqn.source_info}"


def _eqn_summary(eqn: JaxprEqn) -> str:
    outs = " ".join(repr(v) for v in eqn.outvars)
    ins = " ".join(repr(v) for v in eqn.invars)
    return f"{outs} = {eqn.primitive.name} {ins}"


def jaxpr_subcomp(mctx: ModuleContext, jaxpr: Jaxpr, consts: Sequence[Value],
                  args: Sequence[Value], *, name_stack: str, platforms: tuple[str, ...],
                  platform_index: Value | None,
                  axis_context: AxisContext | None) -> list[Value]:
    """Lowers the equations of ``jaxpr`` at the current insertion point, with
    ``consts``/``args`` as the values of its constvars/invars, and returns the
    values of its outvars. ``name_stack`` prefixes every op's name path."""
    if len(consts) != len(jaxpr.constvars) or len(args) != len(jaxpr.invars):
        raise LoweringError(
            f"jaxpr_subcomp: got {len(consts)} consts and {len(args)} args for a jaxpr "
            f"with {len(jaxpr.constvars)} constvars and {len(jaxpr.invars)} invars")
    env = _Env(mctx.types)
    values: dict[Any, Value] = env.values
    for v, x in zip(jaxpr.constvars, consts):
        values[v] = x
    for v, x in zip(jaxpr.invars, args):
        values[v] = x
    locations = mctx.locations
    loc_table = locations.table(name_stack)
    rule_table = mctx.rule_table(platforms)
    read = env.read
    for eqn in jaxpr.eqns:
        prim = eqn.primitive
        source_info = eqn.source_info
        hit = loc_table.get((id(source_info), prim.name))
        if hit is not None and hit[0] is source_info:
            loc = hit[1]
        else:
            loc = locations.for_equation(name_stack, source_info, prim.name, eqn)
        resolved = rule_table.get(prim)
        if resolved is None:
            resolved = rule_table[prim] = mctx.resolve_rules(prim, platforms)
        invars = eqn.invars
        outvars = eqn.outvars
        ctx = LoweringRuleContext(
            mctx, prim, [v.aval for v in invars], [v.aval for v in outvars],
            source_info, name_stack, platforms, platform_index, axis_context, loc, eqn)
        with loc:
            try:
                operands = [read(v) if type(v) is Literal else values[v] for v in invars]
            except KeyError as e:
                raise LoweringError(f"{ctx.where()} reads {e.args[0]!r} before it is "
                                    f"defined") from None
            common = resolved[0]
            if common is not None:
                # _call_rule, inlined: this loop runs once per equation
                try:
                    outs = common(ctx, *operands, **eqn.params)
                except LoweringError:
                    raise
                except Exception as e:
                    raise _rule_failed(ctx, e) from e
                if type(outs) is not list and not isinstance(outs, (list, tuple)):
                    outs = _as_value_list(ctx, outs)
            else:
                outs = _apply_rules(ctx, resolved[1], operands, eqn.params)
        if len(outs) != len(outvars):
            raise LoweringError(
                f"the lowering rule of {ctx.where()} returned {len(outs)} values for "
                f"{len(outvars)} outputs")
        for v, out in zip(outvars, outs):
            if type(v) is not DropVar:
                values[v] = out
    return [read(v) for v in jaxpr.outvars]


def _apply_rules(ctx: LoweringRuleContext, rules: Sequence[LoweringRule | None],
                 operands: list[Value], params: dict[str, Any]) -> Sequence[Value]:
    """Rules that differ between platforms (or are missing for some)."""
    missing = [p for p, r in zip(ctx.platforms, rules) if r is None]
    if missing:
        raise LoweringError(
            f"{ctx.where()} has no lowering rule for platform {missing[0]!r} "
            f"(register one with register_lowering); platforms requested: "
            f"{', '.join(ctx.platforms)}")
    return _lower_per_platform(ctx, rules, operands, params)  # type: ignore[arg-type]


def _call_rule(ctx: LoweringRuleContext, rule: LoweringRule, operands: list[Value],
               params: dict[str, Any]) -> Sequence[Value]:
    try:
        outs = rule(ctx, *operands, **params)
    except LoweringError:
        raise
    except Exception as e:
        raise _rule_failed(ctx, e) from e
    if not isinstance(outs, (list, tuple)):
        return _as_value_list(ctx, outs)
    return outs


def _as_value_list(ctx: LoweringRuleContext, outs: Any) -> list[Value]:
    """A rule's results given as another sequence of values (an operation's
    ``.results``, an ``OpResultList``) as a list; anything else is an error."""
    if isinstance(outs, (ir.Value, str, bytes)) or not hasattr(outs, "__len__"):
        raise _not_a_sequence(ctx, outs)
    return list(outs)


def _rule_failed(ctx: LoweringRuleContext, e: Exception) -> LoweringError:
    return LoweringError(f"lowering {ctx.where()} for platform {ctx.platform!r} failed: "
                         f"{type(e).__name__}: {e}")


def _not_a_sequence(ctx: LoweringRuleContext, outs: Any) -> LoweringError:
    return LoweringError(f"the lowering rule of {ctx.where()} returned "
                         f"{type(outs).__name__}, not a sequence of ir.Value")


def _lower_per_platform(ctx: LoweringRuleContext, rules: list[LoweringRule],
                        operands: list[Value], params: dict[str, Any]) -> Sequence[Value]:
    """Rules differ between the platforms: a ``stablehlo.case`` on the platform
    index runs the right one (platforms sharing a rule share a branch)."""
    module_platforms = ctx.module_context.platforms
    distinct: list[LoweringRule] = []
    members: list[list[str]] = []
    for platform, rule in zip(ctx.platforms, rules):
        for i, r in enumerate(distinct):
            if r is rule:
                members[i].append(platform)
                break
        else:
            distinct.append(rule)
            members.append([platform])
    if ctx.platform_index is None:
        raise LoweringError(f"{ctx.where()}: per-platform rules need the platform index")
    branch_of = [0] * len(module_platforms)
    for b, group in enumerate(members):
        for platform in group:
            branch_of[module_platforms.index(platform)] = b
    index = ctx.platform_index
    if branch_of != list(range(len(module_platforms))):
        table = ir_constant(np.asarray(branch_of, np.int32))
        start = hlo.dynamic_slice(table, [index], [1])
        index = hlo.reshape(ctx.module_context.types.shaped((), np.int32), start)
    case = hlo.CaseOp(ctx.out_types(), index, len(distinct))
    for b, (rule, group) in enumerate(zip(distinct, members)):
        block = case.regions[b].blocks.append()
        with ir.InsertionPoint(block):
            outs = _call_rule(ctx.replace(platforms=tuple(group)), rule, operands, params)
            hlo.return_(list(outs))
    return list(case.results)


def _const_values(consts: Sequence[Any], constvars: Sequence[Var]) -> list[Value]:
    return [ir_constant(c, dtype=v.aval.dtype) for c, v in zip(consts, constvars)]


def _as_jaxpr_and_consts(jaxpr: ClosedJaxpr | Jaxpr) -> tuple[Jaxpr, Sequence[Any]]:
    if isinstance(jaxpr, ClosedJaxpr):
        return jaxpr.jaxpr, jaxpr.consts
    if jaxpr.constvars:
        raise LoweringError(f"an open jaxpr with {len(jaxpr.constvars)} constvars cannot be "
                            f"lowered without their values; close it first")
    return jaxpr, ()


def lower_sub_jaxpr(ctx: LoweringRuleContext, jaxpr: ClosedJaxpr | Jaxpr,
                    args: Sequence[Value], *, name: str = "",
                    axis_context: AxisContext | None = None,
                    label: str | None = None) -> list[Value]:
    """Inlines ``jaxpr`` (closed, or open without constvars) at the current
    insertion point, as part of the rule running with ``ctx``; its ops' names
    are prefixed with the equation's path plus ``name`` (``jit(f)/while/body``),
    or plus ``label`` alone in place of the primitive and ``name``
    (``jit(f)/shard_map(g)``)."""
    inner, consts = _as_jaxpr_and_consts(jaxpr)
    path = _sub_name_stack(ctx, name, label)
    return jaxpr_subcomp(ctx.module_context, inner, _const_values(consts, inner.constvars),
                         list(args), name_stack=path, platforms=ctx.platforms,
                         platform_index=ctx.platform_index,
                         axis_context=ctx.axis_context if axis_context is None else axis_context)


def _sub_name_stack(ctx: LoweringRuleContext, name: str, label: str | None = None) -> str:
    parts = [ctx.name_stack] if ctx.name_stack else []
    if ctx.source_info is not None and ctx.source_info.name_stack.stack:
        parts.append(str(ctx.source_info.name_stack))
    if label is not None:
        parts.append(label)
        return "/".join(parts)
    if ctx.primitive is not None:
        parts.append(ctx.primitive.name)
    if name:
        parts.append(name)
    return "/".join(parts)


def lower_fun(fun: Callable[..., Any], multiple_results: bool = True) -> LoweringRule:
    """A lowering rule written as a function of the equation's operands.

    ``fun(*operands, **params)`` is written with lax/numpy operations (it
    returns a sequence of results when ``multiple_results``, else one). The
    rule traces it at the equation's input avals and inlines the result at
    the equation, so the ops it emits carry the equation's source location
    and name path (``jit(f)/my_prim/...``) like the equation itself."""
    def rule(ctx: LoweringRuleContext, *args: Value, **params: Any) -> list[Value]:
        def flat(*xs: Any) -> list[Any]:
            out = fun(*xs, **params)
            return list(out) if multiple_results else [out]

        name = getattr(fun, "__name__", "lower_fun")
        frame = ctx.source_info.frame if ctx.source_info is not None else None
        previous = _si.set_frame_override(frame)
        try:
            jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(
                wrap_init(flat, debug_info=TracingDebugInfo(
                    "lower_fun", name, tuple(None for _ in args), None)),
                ctx.avals_in)
        finally:
            _si.set_frame_override(previous)
        return lower_sub_jaxpr(ctx, ClosedJaxpr(jaxpr, consts), args)

    rule.__name__ = f"lower_fun[{getattr(fun, '__name__', 'fun')}]"
    return rule


# --- private functions and calls ----------------------------------------------
def _arg_locations(mctx: ModuleContext, names: Sequence[str | None]) -> list[ir.Location]:
    unknown = ir.Location.unknown()
    return [mctx.locations.named(n) if n else unknown for n in names]


def lower_private_function(mctx: ModuleContext, name: str, jaxpr: Jaxpr,
                           consts: Sequence[Any],
                           axis_context: AxisContext | None) -> tuple[str, list[ir.Type]]:
    """Emits ``jaxpr`` (its constvars bound to ``consts``) as a private
    ``func.func`` named ``name`` (made unique in the module); returns its
    symbol and result types. The function takes the platform index first in
    a multi-platform module, then the ordered-effects token when the jaxpr
    has ordered effects, then the jaxpr's inputs."""
    types = mctx.types
    multi = len(mctx.platforms) > 1
    threaded = has_ordered_effects(jaxpr.effects)
    token_types = [hlo.TokenType.get()] if threaded else []
    in_types = ([types.shaped((), np.int32)] if multi else []) + token_types + [
        types.tensor(v.aval) for v in jaxpr.invars]
    out_types = token_types + [types.tensor(v.aval) for v in jaxpr.outvars]
    dbg = jaxpr.debug_info
    names: list[str | None] = [None] * len(jaxpr.invars)
    if dbg is not None and len(dbg.arg_names) == len(jaxpr.invars):
        names = list(dbg.arg_names)
    if threaded:
        names = [None, *names]
    if multi:
        names = [PLATFORM_INDEX_NAME, *names]
    symbol = mctx.unique_symbol(sanitize_module_name(name))
    with ir.InsertionPoint(mctx.module.body), mctx.locations.named(symbol):
        fn = func.FuncOp(symbol, ir.FunctionType.get(in_types, out_types))
        fn.sym_visibility = ir.StringAttr.get("private")
        # (add_entry_block is a Python-side helper jaxlib's stubs don't list.)
        block = cast(Any, fn).add_entry_block(arg_locs=_arg_locations(mctx, names))
    with ir.InsertionPoint(block), ir.Location.unknown():
        args = list(block.arguments)
        platform_index = args.pop(0) if multi else None
        outer_token = mctx.token
        mctx.token = args.pop(0) if threaded else None
        outs = jaxpr_subcomp(mctx, jaxpr, _const_values(consts, jaxpr.constvars), args,
                             name_stack="", platforms=mctx.platforms,
                             platform_index=platform_index, axis_context=axis_context)
        if threaded:
            outs = [mctx.take_token(), *outs]
        mctx.token = outer_token
        func.ReturnOp(outs)
    return symbol, list(out_types)


def call_jaxpr(ctx: LoweringRuleContext, jaxpr: ClosedJaxpr | Jaxpr, args: Sequence[Value],
               *, name: str) -> list[Value]:
    """Calls ``jaxpr`` as the private function ``name`` (made unique in the
    module) and returns the call's results. The function is emitted once per
    distinct callee: the key is the jaxpr object's identity (and its consts'),
    the name and the axis context, so calling the same inner ``jit`` twice
    gives two ``func.call``s of one function."""
    mctx = ctx.module_context
    inner, consts = _as_jaxpr_and_consts(jaxpr)
    key: Hashable = (id(inner), tuple(id(c) for c in consts), name, ctx.axis_context)
    fn = mctx.functions.get(key)
    if fn is None:
        mctx.keepalive.append((inner, consts))
        fn = mctx.functions[key] = lower_private_function(mctx, name, inner, consts,
                                                           ctx.axis_context)
    call_args = list(args)
    threaded = has_ordered_effects(inner.effects)
    if threaded:
        call_args.insert(0, mctx.take_token())
    if len(mctx.platforms) > 1:
        if ctx.platform_index is None:
            raise LoweringError(f"{ctx.where()}: calls in a multi-platform module need the "
                                f"platform index")
        call_args.insert(0, ctx.platform_index)
    loc = mctx.locations.for_equation(ctx.name_stack, ctx.source_info,
                                      _call_op_name(ctx, name), ctx.eqn)
    symbol, result_types = fn
    call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(symbol), call_args, loc=loc)
    results: list[Value] = list(call.results)
    if threaded:
        mctx.token = results.pop(0)
    return results


def _call_op_name(ctx: LoweringRuleContext, name: str) -> str:
    prim = ctx.primitive.name if ctx.primitive is not None else "call"
    return f"{prim}({name})" if name else prim


def make_call_rule(jaxpr_param: str = "jaxpr", *, name_param: str | None = "name",
                   default_name: str | None = None,
                   inline_param: str | None = None) -> LoweringRule:
    """The lowering rule of a call-like primitive whose params hold its body.

    - ``jaxpr_param``: the param holding the ``ClosedJaxpr`` (or an open
      ``Jaxpr`` without constvars, as remat's);
    - ``name_param``: the param naming the callee (``jit``'s ``name``); the
      callee is called ``default_name`` (else the primitive's name) without it;
    - ``inline_param``: a boolean param that, when true, inlines the body
      instead of calling it.

    Usage in a higher layer: ``register_lowering(pjit_p, make_call_rule(
    "jaxpr", name_param="name", inline_param="inline"))``."""
    def call_rule(ctx: LoweringRuleContext, *args: Value, **params: Any) -> list[Value]:
        body = params[jaxpr_param]
        if inline_param is not None and params.get(inline_param):
            return lower_sub_jaxpr(ctx, body, args)
        name = params.get(name_param) if name_param is not None else None
        if not name:
            name = default_name or (ctx.primitive.name if ctx.primitive is not None else "call")
        return call_jaxpr(ctx, body, args, name=str(name))

    call_rule.__name__ = f"call_rule[{jaxpr_param}]"
    return call_rule


# --- the module ------------------------------------------------------------------
def _normalize_platforms(platforms: Sequence[str] | str) -> tuple[str, ...]:
    if isinstance(platforms, str):
        platforms = (platforms,)
    out = tuple(canonicalize_platform(p) for p in platforms)
    if not out:
        raise ValueError("lower_jaxpr_to_module: platforms must name at least one platform")
    if len(set(out)) != len(out):
        raise ValueError(f"lower_jaxpr_to_module: platforms {out} repeat a platform")
    return out


def _per_item(what: str, values: Sequence[Any] | None, n: int, default: Any) -> tuple[Any, ...]:
    if values is None:
        return (default,) * n
    values = tuple(values)
    if len(values) != n:
        raise ValueError(f"lower_jaxpr_to_module: {what} has {len(values)} entries for "
                         f"{n} values")
    return values


def _used_invars(jaxpr: Jaxpr) -> set[Var]:
    used: set[Var] = {v for v in jaxpr.outvars if isinstance(v, Var)}
    for eqn in jaxpr.eqns:
        used.update(v for v in eqn.invars if isinstance(v, Var))
    return used


def _label(names: Sequence[str | None], i: int, kind: str) -> str:
    name = names[i] if i < len(names) else None
    return name if name else f"{kind} {i}"


def _check_sharding(spec: ArgSharding, aval: ShapedArray, label: str) -> None:
    if is_unspecified(spec):
        return
    if not isinstance(spec, ShardingSpec):
        raise TypeError(f"lower_jaxpr_to_module: sharding of {label} is "
                        f"{type(spec).__name__}, expected a ShardingSpec or UNSPECIFIED")
    if spec.ndim != aval.ndim:
        raise ValueError(f"lower_jaxpr_to_module: sharding of {label} has {spec.ndim} "
                         f"dimensions but {label} has shape {aval.str_short()}")


def _module_mesh(shardings: Sequence[ArgSharding], mesh: MeshShape | None,
                 axis_context: AxisContext | None) -> MeshShape | None:
    meshes = {s.mesh for s in shardings if isinstance(s, ShardingSpec)}
    if isinstance(axis_context, ShardingAxisContext):
        meshes.add(axis_context.mesh)
    if mesh is not None:
        meshes.add(mesh)
    if len(meshes) > 1:
        raise ValueError(f"lower_jaxpr_to_module: shardings use {len(meshes)} different "
                         f"meshes {sorted(str(m) for m in meshes)}; one module has one mesh")
    return next(iter(meshes), None)


def _manual_tiling(spec: ArgSharding, manual_axes: Sequence[str], ndim: int) -> tuple[int, ...]:
    if not isinstance(spec, ShardingSpec):
        return (1,) * ndim
    return tuple(int(np.prod([spec.mesh.axis_size(a) for a in axes if a in manual_axes]))
                 for axes in spec.dims)


def _global_aval(aval: ShapedArray, tiling: Sequence[int]) -> ShapedArray:
    if all(t == 1 for t in tiling):
        return aval
    return aval.update(shape=tuple(d * t for d, t in zip(aval.shape, tiling)))


def _sharding_attr(spec: ArgSharding, fmt: str) -> tuple[str, ir.Attribute] | None:
    if not isinstance(spec, ShardingSpec):
        return None
    if fmt == "shardy":
        return "sdy.sharding", spec.to_sdy_attr(_MESH_NAME)
    return "mhlo.sharding", ir.StringAttr.get(spec.to_hlo_sharding_str())


def _output_aliases(donated: Sequence[bool], in_avals: Sequence[ShapedArray],
                    out_avals: Sequence[ShapedArray], in_shardings: Sequence[ArgSharding],
                    out_shardings: Sequence[ArgSharding]) -> tuple[int | None, ...]:
    """For each donated argument, the first unclaimed result of the same
    type (and the same sharding, where both are given)."""
    taken: set[int] = set()
    aliases: list[int | None] = []
    for d, aval, s_in in zip(donated, in_avals, in_shardings):
        match = None
        if d:
            for j, (o, s_out) in enumerate(zip(out_avals, out_shardings)):
                if j in taken or o.shape != aval.shape or o.dtype != aval.dtype:
                    continue
                if is_unspecified(s_in) != is_unspecified(s_out) or (
                        not is_unspecified(s_in) and s_in != s_out):
                    continue
                match = j
                taken.add(j)
                break
        aliases.append(match)
    return tuple(aliases)


def _default_name_stack(module_name: str, jaxpr: Jaxpr) -> str:
    dbg = jaxpr.debug_info
    if dbg is not None and dbg.func_src_info:
        return f"{dbg.traced_for}({dbg.func_name})"
    return module_name


def lower_jaxpr_to_module(
    module_name: str,
    closed_jaxpr: ClosedJaxpr,
    *,
    platforms: Sequence[str] = ("cpu",),
    arg_names: Sequence[str | None] | None = None,
    result_names: Sequence[str | None] | None = None,
    arg_shardings: Sequence[ArgSharding] | None = None,
    result_shardings: Sequence[ArgSharding] | None = None,
    donated_args: Sequence[bool] | None = None,
    num_replicas: int = 1,
    num_partitions: int = 1,
    axis_context: AxisContext | None = None,
    keep_unused: bool = True,
    sharding_format: str = "shardy",
    mesh: MeshShape | None = None,
    name_stack: str | None = None,
    context: ir.Context | None = None,
    arg_memory_kinds: Sequence[str | None] | None = None,
    result_memory_kinds: Sequence[str | None] | None = None,
    result_placements: Sequence[str | None] | None = None,
) -> LoweringResult:
    """Lowers ``closed_jaxpr`` to a verified StableHLO module named ``module_name``.

    Per-argument sequences (``arg_names``, ``arg_shardings``, ``donated_args``)
    have one entry per invar of the jaxpr, per-result ones one per outvar;
    names default to the jaxpr's ``JaxprDebugInfo``. Shardings are
    ``ShardingSpec``s (or ``UNSPECIFIED``/None), emitted as Shardy attributes
    with a module-level ``sdy.mesh`` (``sharding_format='shardy'``) or as
    ``mhlo.sharding`` strings (``'gspmd'``). ``keep_unused=False`` prunes
    arguments no equation reads (``LoweringResult.kept_var_idx`` says which
    stayed). ``platforms`` with several entries gives a module whose ``main``
    takes a leading ``i32`` platform index. ``axis_context`` says what named
    axes mean (``ReplicaAxisContext`` for pmap, ``ShardingAxisContext`` for
    SPMD); with a ``ShardingAxisContext`` the jaxpr is the per-device program
    along its manual axes, and ``main`` (global shapes, laid out by the given
    shardings) wraps it in a manual computation. ``name_stack`` is the name
    path prefixed to op names (default ``<traced_for>(<function name>)``,
    e.g. ``jit(f)``). ``arg_memory_kinds`` / ``result_memory_kinds`` (one
    per invar / outvar, None for none) become ``mhlo.memory_kind`` on
    ``main``'s arguments and results (``pinned_host``: the buffer lives in host
    memory); a result with an entry in ``result_placements`` is first moved
    there by an ``annotate_device_placement`` custom call (how a requested
    output memory reaches XLA). Raises ``LoweringError`` when a primitive has
    no rule or the module does not verify."""
    plats = _normalize_platforms(platforms)
    if sharding_format not in SHARDING_FORMATS:
        raise ValueError(f"lower_jaxpr_to_module: sharding_format must be one of "
                         f"{SHARDING_FORMATS}, got {sharding_format!r}")
    if not isinstance(closed_jaxpr, ClosedJaxpr):
        raise TypeError(f"lower_jaxpr_to_module: expected a ClosedJaxpr, got "
                        f"{type(closed_jaxpr).__name__}")
    if num_replicas < 1 or num_partitions < 1:
        raise ValueError(f"lower_jaxpr_to_module: num_replicas={num_replicas} and "
                         f"num_partitions={num_partitions} must be >= 1")
    jaxpr = closed_jaxpr.jaxpr
    n_in, n_out = len(jaxpr.invars), len(jaxpr.outvars)
    dbg = jaxpr.debug_info
    names_in = _per_item("arg_names", arg_names if arg_names is not None else
                         (dbg.arg_names if dbg is not None else None), n_in, None)
    names_out = _per_item("result_names", result_names if result_names is not None else
                          (dbg.result_paths if dbg is not None else None), n_out, None)
    shard_in = tuple(UNSPECIFIED if s is None else s
                     for s in _per_item("arg_shardings", arg_shardings, n_in, UNSPECIFIED))
    shard_out = tuple(UNSPECIFIED if s is None else s
                      for s in _per_item("result_shardings", result_shardings, n_out,
                                         UNSPECIFIED))
    donated = tuple(bool(d) for d in _per_item("donated_args", donated_args, n_in, False))
    kinds_in = _per_item("arg_memory_kinds", arg_memory_kinds, n_in, None)
    kinds_out = _per_item("result_memory_kinds", result_memory_kinds, n_out, None)
    placements = _per_item("result_placements", result_placements, n_out, None)
    for i, v in enumerate(jaxpr.invars):
        _check_sharding(shard_in[i], v.aval, _label(names_in, i, "argument"))
    for i, out in enumerate(jaxpr.outvars):
        _check_sharding(shard_out[i], out.aval, _label(names_out, i, "result"))

    if keep_unused:
        kept = tuple(range(n_in))
    else:
        used = _used_invars(jaxpr)
        kept = tuple(i for i, v in enumerate(jaxpr.invars) if v in used)
    manual = (isinstance(axis_context, ShardingAxisContext)
              and bool(axis_context.manual_axes))
    manual_axes = tuple(axis_context.manual_axes or ()) if (
        isinstance(axis_context, ShardingAxisContext)) else ()
    local_in = [jaxpr.invars[i].aval for i in kept]
    local_out = [v.aval for v in jaxpr.outvars]
    tiling_in = [_manual_tiling(shard_in[i], manual_axes, a.ndim) for i, a in zip(kept, local_in)]
    tiling_out = [_manual_tiling(s, manual_axes, a.ndim) for s, a in zip(shard_out, local_out)]
    in_avals = tuple(_global_aval(a, t) for a, t in zip(local_in, tiling_in))
    out_avals = tuple(_global_aval(a, t) for a, t in zip(local_out, tiling_out))
    kept_names = tuple(names_in[i] for i in kept)
    kept_shardings = tuple(shard_in[i] for i in kept)
    kept_donated = tuple(donated[i] for i in kept)
    aliases = _output_aliases(kept_donated, in_avals, out_avals, kept_shardings, shard_out)
    module_mesh = _module_mesh(kept_shardings + shard_out, mesh, axis_context)
    if manual and sharding_format == "gspmd" and set(manual_axes) != set(
            module_mesh.axis_names if module_mesh else ()):
        raise ValueError("lower_jaxpr_to_module: with sharding_format='gspmd' every mesh "
                         "axis must be manual; use sharding_format='shardy' for partially "
                         "manual programs")
    sym_name = sanitize_module_name(module_name)
    stack = name_stack if name_stack is not None else _default_name_stack(sym_name, jaxpr)

    ctx = context if context is not None else default_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        mctx = ModuleContext(ctx, module, platforms=plats, axis_context=axis_context,
                             num_replicas=num_replicas, num_partitions=num_partitions,
                             sharding_format=sharding_format, types=type_cache(ctx))
        mctx.mesh = module_mesh
        attrs = module.operation.attributes
        attrs["sym_name"] = ir.StringAttr.get(sym_name)
        i32 = ir.IntegerType.get_signless(32)
        attrs["mhlo.num_partitions"] = ir.IntegerAttr.get(i32, num_partitions)
        attrs["mhlo.num_replicas"] = ir.IntegerAttr.get(i32, num_replicas)
        mctx.unique_symbol("main")
        if module_mesh is not None and sharding_format == "shardy":
            with ir.InsertionPoint(module.body):
                sdy.MeshOp(_MESH_NAME, module_mesh.to_sdy_mesh_attr())
            mctx.unique_symbol(_MESH_NAME)
        main_jaxpr = jaxpr if keep_unused else jaxpr.replace(
            invars=[jaxpr.invars[i] for i in kept])
        _build_main(mctx, main_jaxpr, closed_jaxpr.consts, stack=stack,
                    in_avals=in_avals, out_avals=out_avals, names_in=kept_names,
                    names_out=names_out, shard_in=kept_shardings, shard_out=shard_out,
                    donated=kept_donated, aliases=aliases, manual_axes=manual_axes if manual
                    else (), kinds_in=tuple(kinds_in[i] for i in kept), kinds_out=kinds_out,
                    placements=placements)
        _verify(mctx, module)
    if mctx.host_callbacks and len(plats) > 1:
        raise LoweringError(f"{sym_name} calls back into Python, which a module lowered for "
                            f"several platforms {plats} cannot do; lower it for one platform")
    return LoweringResult(
        module=module, module_name=sym_name, arg_names=kept_names, result_names=names_out,
        platforms=plats, kept_var_idx=kept, in_avals=in_avals, out_avals=out_avals,
        arg_shardings=kept_shardings, result_shardings=shard_out, num_replicas=num_replicas,
        num_partitions=num_partitions, donated_args=kept_donated, output_aliases=aliases,
        sharding_format=sharding_format, mesh=module_mesh,
        host_callbacks=tuple(mctx.host_callbacks), has_token=has_ordered_effects(jaxpr.effects),
        sharding_inspectors=tuple(mctx.sharding_inspectors),
        arg_memory_kinds=tuple(kinds_in[i] for i in kept), result_memory_kinds=kinds_out)


def _build_main(mctx: ModuleContext, jaxpr: Jaxpr, consts: Sequence[Any], *, stack: str,
                in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray],
                names_in: Sequence[str | None], names_out: Sequence[str | None],
                shard_in: Sequence[ArgSharding], shard_out: Sequence[ArgSharding],
                donated: Sequence[bool], aliases: Sequence[int | None],
                manual_axes: tuple[str, ...], kinds_in: Sequence[str | None] = (),
                kinds_out: Sequence[str | None] = (),
                placements: Sequence[str | None] = ()) -> None:
    types = mctx.types
    multi = len(mctx.platforms) > 1
    threaded = has_ordered_effects(jaxpr.effects)
    i32_scalar = types.shaped((), np.int32)
    token_types = [types.tensor(TOKEN_AVAL)] if threaded else []
    in_types = ([i32_scalar] if multi else []) + token_types + [
        types.tensor(a) for a in in_avals]
    out_types = token_types + [types.tensor(a) for a in out_avals]
    fmt = mctx.sharding_format
    i32 = ir.IntegerType.get_signless(32)

    arg_attrs: list[ir.Attribute] = []
    if multi:
        arg_attrs.append(ir.DictAttr.get(
            {"jax.global_constant": ir.StringAttr.get(PLATFORM_INDEX_NAME)}))
    if threaded:
        arg_attrs.append(ir.DictAttr.get({"jax.token": ir.BoolAttr.get(True)}))
    for i, (name, spec, d, alias) in enumerate(zip(names_in, shard_in, donated, aliases)):
        entries: dict[str, ir.Attribute] = {}
        if name:
            entries["jax.arg_info"] = ir.StringAttr.get(name)
        kind = kinds_in[i] if i < len(kinds_in) else None
        if kind is not None:
            entries["mhlo.memory_kind"] = ir.StringAttr.get(kind)
        sharding = _sharding_attr(spec, fmt)
        if sharding is not None:
            entries[sharding[0]] = sharding[1]
        if alias is not None:
            # results are numbered after the ordered-effects token, if any
            entries["tf.aliasing_output"] = ir.IntegerAttr.get(i32, alias + len(token_types))
        elif d:
            entries["jax.buffer_donor"] = ir.BoolAttr.get(True)
        arg_attrs.append(ir.DictAttr.get(entries))
    result_attrs: list[ir.Attribute] = []
    if threaded:
        result_attrs.append(ir.DictAttr.get({"jax.token": ir.BoolAttr.get(True)}))
    for i, (name, spec) in enumerate(zip(names_out, shard_out)):
        entries = {}
        if name:
            entries["jax.result_info"] = ir.StringAttr.get(name)
        kind = kinds_out[i] if i < len(kinds_out) else None
        if kind is not None:
            entries["mhlo.memory_kind"] = ir.StringAttr.get(kind)
        sharding = _sharding_attr(spec, fmt)
        if sharding is not None:
            entries[sharding[0]] = sharding[1]
        result_attrs.append(ir.DictAttr.get(entries))

    arg_loc_names: list[str | None] = [PLATFORM_INDEX_NAME] if multi else []
    arg_loc_names += [None] * len(token_types) + list(names_in)
    with ir.InsertionPoint(mctx.module.body):
        fn = func.FuncOp("main", ir.FunctionType.get(in_types, out_types))
        fn.sym_visibility = ir.StringAttr.get("public")
        fn.arg_attrs = ir.ArrayAttr.get(arg_attrs)
        # (result_attrs / add_entry_block are Python-side helpers the stubs omit.)
        untyped = cast(Any, fn)
        untyped.result_attrs = ir.ArrayAttr.get(result_attrs)
        block = untyped.add_entry_block(arg_locs=_arg_locations(mctx, arg_loc_names))
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        platform_index = args.pop(0) if multi else None
        if threaded:
            # the order across calls comes from the runtime passing each call's
            # output token to the next; inside, a token chain orders the effects
            args.pop(0)

        def body(inner_args: Sequence[Value]) -> list[Value]:
            mctx.token = None  # a fresh token where the first ordered effect needs one
            return jaxpr_subcomp(mctx, jaxpr, _const_values(consts, jaxpr.constvars),
                                 inner_args, name_stack=stack, platforms=mctx.platforms,
                                 platform_index=platform_index,
                                 axis_context=mctx.axis_context)

        if manual_axes:
            outs = _manual_body(mctx, body, args, jaxpr, shard_in, shard_out,
                                out_types[len(token_types):], manual_axes, stack)
        else:
            outs = body(args)
        outs = [y if kind is None else _placed(y, kind, mctx.locations.named(stack))
                for y, kind in zip(outs, placements or [None] * len(outs))]
        if threaded:
            outs = [ir_constant(np.zeros((0,), np.bool_)), *outs]
        func.ReturnOp(outs, loc=mctx.locations.named(stack))


def _placed(x: Value, memory_kind: str, loc: ir.Location) -> Value:
    """``x`` annotated to live in ``memory_kind`` (XLA moves it there): an
    ``annotate_device_placement`` custom call, as JAX emits for a memory kind
    a jit's ``out_shardings`` ask for."""
    op = hlo.CustomCallOp([x.type], [x], "annotate_device_placement", loc=loc)
    op.attributes["has_side_effect"] = ir.BoolAttr.get(True)
    op.attributes["backend_config"] = ir.StringAttr.get("")
    op.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {"_xla_buffer_placement": ir.StringAttr.get(memory_kind)})
    return op.result


def _manual_body(mctx: ModuleContext, body: Callable[[Sequence[Value]], list[Value]],
                 args: list[Value], jaxpr: Jaxpr, shard_in: Sequence[ArgSharding],
                 shard_out: Sequence[ArgSharding], out_types: Sequence[ir.Type],
                 manual_axes: tuple[str, ...], stack: str) -> list[Value]:
    """The per-device ``body`` of a whole module run over global ``args``."""
    types = mctx.types
    mesh = (mctx.axis_context.mesh if isinstance(mctx.axis_context, ShardingAxisContext)
            else None)
    assert mesh is not None
    loc = mctx.locations.named(f"{stack}/shard_map" if stack else "shard_map")
    return manual_computation(
        mctx, body, args, mesh=mesh, in_specs=shard_in, out_specs=shard_out,
        local_in_types=[types.tensor(v.aval) for v in jaxpr.invars],
        local_out_types=[types.tensor(v.aval) for v in jaxpr.outvars],
        out_types=out_types, manual_axes=manual_axes, loc=loc)


def manual_computation(mctx: ModuleContext, body: Callable[[Sequence[Value]], list[Value]],
                       args: Sequence[Value], *, mesh: MeshShape,
                       in_specs: Sequence[ArgSharding], out_specs: Sequence[ArgSharding],
                       local_in_types: Sequence[ir.Type], local_out_types: Sequence[ir.Type],
                       out_types: Sequence[ir.Type], manual_axes: Sequence[str],
                       loc: ir.Location) -> list[Value]:
    """``body`` (block values -> block values) run per device along
    ``manual_axes`` over the global ``args`` laid out by ``in_specs``, giving
    global results laid out by ``out_specs``: Shardy's
    ``sdy.manual_computation``, or (GSPMD modules, every axis manual) the
    ``SPMDFullToShardShape`` / ``SPMDShardToFullShape`` custom calls."""
    if mctx.sharding_format == "shardy":
        def spec_attr(s: ArgSharding, ndim: int) -> ir.Attribute:
            spec = s if isinstance(s, ShardingSpec) else ShardingSpec.replicate(mesh, ndim)
            return spec.to_sdy_attr(_MESH_NAME)

        in_attr = sdy.TensorShardingPerValueAttr.get(
            [spec_attr(s, ir.RankedTensorType(t).rank) for s, t in zip(in_specs, local_in_types)])
        out_attr = sdy.TensorShardingPerValueAttr.get(
            [spec_attr(s, ir.RankedTensorType(t).rank)
             for s, t in zip(out_specs, local_out_types)])
        axes = sdy.ManualAxesAttr.get([ir.StringAttr.get(a) for a in manual_axes])
        op = sdy.ManualComputationOp(list(out_types), list(args), in_attr, out_attr, axes,
                                     loc=loc)
        block = ir.Block.create_at_start(op.body, list(local_in_types),
                                         [loc] * len(local_in_types))
        with ir.InsertionPoint(block):
            sdy.ReturnOp(body(list(block.arguments)), loc=loc)
        return list(op.results)

    if set(manual_axes) != set(mesh.axis_names):
        raise LoweringError(
            f"a manual computation over the axes {tuple(manual_axes)} of the mesh "
            f"{mesh.axis_names} needs Shardy: GSPMD modules support only computations "
            f"manual over every mesh axis")

    def custom(target: str, x: Value, result: ir.Type, sharding: str) -> Value:
        op = hlo.CustomCallOp([result], [x], target, loc=loc)
        op.attributes["mhlo.sharding"] = ir.StringAttr.get(sharding)
        return op.result

    def spec_str(s: ArgSharding) -> str:
        return s.to_hlo_sharding_str() if isinstance(s, ShardingSpec) else "{replicated}"

    local_args = []
    for x, s, t in zip(args, in_specs, local_in_types):
        x = custom("Sharding", x, x.type, spec_str(s))
        local_args.append(custom("SPMDFullToShardShape", x, t, "{manual}"))
    outs = []
    for y, s, t_local, t_global in zip(body(local_args), out_specs, local_out_types, out_types):
        y = custom("Sharding", y, t_local, "{manual}")
        outs.append(custom("SPMDShardToFullShape", y, t_global, spec_str(s)))
    return outs


def _verify(mctx: ModuleContext, module: ir.Module) -> None:
    try:
        module.operation.verify()
    except ir.MLIRError as e:
        details = []
        for diag in e.error_diagnostics:
            origin = mctx.locations.origin_of(diag.location)
            where = f"; it came from {_origin(origin)}" if isinstance(origin, JaxprEqn) else ""
            notes = "".join(f"\n    note: {n.message}" for n in diag.notes)
            details.append(f"  {diag.message} at {diag.location}{where}{notes}")
        raise LoweringError("the lowered module does not verify:\n" + "\n".join(details)) from e
