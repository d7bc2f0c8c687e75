"""``shard_map_p``: a per-device program over the manual axes of a mesh.

``outs = shard_map[jaxpr, mesh, in_specs, out_specs, manual_axes, check_vma,
name] *args`` runs the closed ``jaxpr`` once per device along
``manual_axes``. ``args`` and ``outs`` are global arrays; the jaxpr sees and
returns *blocks*: dimension ``d`` of an operand whose spec names axes
``in_specs[i][d]`` is cut into ``prod(sizes of those axes)`` pieces. Params:

- ``jaxpr``: the ``ClosedJaxpr`` of the body, on block types, with the user's
  argument names and result paths;
- ``mesh``: the mesh (any hashable object with ``axis_names`` and
  ``axis_sizes``; the runtime's ``Mesh``);
- ``in_specs`` / ``out_specs``: one entry per operand / result, a tuple with
  one tuple of mesh axis names per dimension (``(('x',), ())``);
- ``manual_axes``: the mesh axes the body is per-device along, in mesh order
  (the rest stay automatic, partitioned by the compiler);
- ``check_vma``: whether the varying-manual-axes check ran on the body;
- ``name``: the body function's name (name stacks and messages).

Collectives in the body name manual axes; they are bound while the body is
traced and transformed, and the equation's effects drop them.

Transformation rules (all jaxpr -> jaxpr, keeping the names):

- JVP: the JVP of the body, tangents laid out like their primals.
- partial evaluation: a known and an unknown ``shard_map_p`` equation; each
  device's residuals travel between them along a new leading dimension split
  over every manual axis.
- transposition: the transposed body inside a ``shard_map_p``. Cotangents of
  the collectives are pmap-style (the transpose of ``psum`` is ``psum``), so a
  result replicated over a manual axis enters the body divided by that axis'
  size, and the cotangent of an operand replicated over a manual axis is
  summed over it; together they give the cotangents of the global function.
- batching: the batched body; the batch dimension is never split.
- DCE: unused results and the operands only they needed are dropped.

``check_vma`` (:func:`check_replication`) infers, for every value of the body,
the manual axes it may vary over, and refuses an ``out_specs`` entry that
claims replication over an axis its result varies over.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lamina_tracing_core import ad, batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero, instantiate_zeros
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import retrace
from lamina_tracing_core.effects import Effects, has_side_effects, remove_named_axes
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprDebugInfo, JaxprEqn, Var
from lamina_tracing_core.lax import collectives as coll
from lamina_tracing_core.lax import common
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.primitives import Primitive

__all__ = ["shard_map_p", "Spec", "block_aval", "global_aval", "manual_axes_bound",
           "check_replication", "varying_axes", "ReplicationError"]

#: One operand's layout: per dimension, the mesh axes it is split over.
Spec = tuple[tuple[str, ...], ...]

shard_map_p = Primitive("shard_map", multiple_results=True)
shard_map_p.higher_order = True


class ReplicationError(ValueError):
    """An ``out_specs`` entry claims replication the body does not give."""


def _sizes(mesh: Any) -> dict[str, int]:
    return dict(zip(mesh.axis_names, mesh.axis_sizes))


def _tiles(spec: Spec, sizes: dict[str, int]) -> list[int]:
    return [math.prod(sizes[a] for a in axes) for axes in spec]


def block_aval(aval: ShapedArray, spec: Spec, mesh: Any) -> ShapedArray:
    """The per-device block type of a global value laid out by ``spec``."""
    tiles = _tiles(spec, _sizes(mesh)) + [1] * (aval.ndim - len(spec))
    return aval.update(shape=tuple(d // t for d, t in zip(aval.shape, tiles)))


def global_aval(aval: ShapedArray, spec: Spec, mesh: Any) -> ShapedArray:
    """The global type of per-device blocks of type ``aval`` laid out by ``spec``."""
    tiles = _tiles(spec, _sizes(mesh)) + [1] * (aval.ndim - len(spec))
    return aval.update(shape=tuple(d * t for d, t in zip(aval.shape, tiles)))


@contextmanager
def manual_axes_bound(mesh: Any, manual_axes: Sequence[str]) -> Iterator[None]:
    """Binds the manual axes (with their sizes) for tracing or transforming a body."""
    sizes = _sizes(mesh)
    with core.extend_axis_env_nd([(a, sizes[a]) for a in manual_axes]):
        yield


def _unmentioned(spec: Spec, manual_axes: Sequence[str]) -> tuple[str, ...]:
    used = {a for axes in spec for a in axes}
    return tuple(a for a in manual_axes if a not in used)


# --- abstract evaluation and effects ------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, mesh: Any, in_specs: tuple[Spec, ...],
                   out_specs: tuple[Spec, ...], name: str, **_: Any) -> list[ShapedArray]:
    want = jaxpr.in_avals
    if len(avals) != len(want):
        raise TypeError(f"shard_map({name}): the body takes {len(want)} operands, got "
                        f"{len(avals)}")
    for aval, spec, block in zip(avals, in_specs, want):
        got = block_aval(aval, spec, mesh)
        if got.shape != block.shape or got.dtype != block.dtype:
            raise TypeError(f"shard_map({name}): an operand of type {aval.str_short()} gives "
                            f"blocks {got.str_short()}, but the body takes "
                            f"{block.str_short()}")
    return [global_aval(a, s, mesh) for a, s in zip(jaxpr.out_avals, out_specs)]


def _effects(*, jaxpr: ClosedJaxpr, manual_axes: tuple[str, ...], **_: Any) -> Effects:
    return remove_named_axes(jaxpr.effects, manual_axes)


shard_map_p.def_abstract_eval(_abstract_eval)
shard_map_p.def_effects(_effects)


def _with(params: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = dict(params)
    new.update(changes)
    return new


def _bound(params: dict[str, Any]) -> Any:
    return manual_axes_bound(params["mesh"], params["manual_axes"])


def _dbg(jaxpr: ClosedJaxpr) -> JaxprDebugInfo:
    dbg = jaxpr.jaxpr.debug_info
    if dbg is None:
        return JaxprDebugInfo("shard_map", None, (None,) * len(jaxpr.jaxpr.invars),
                              (None,) * len(jaxpr.jaxpr.outvars))
    return dbg


# --- JVP ---------------------------------------------------------------------------------------
def _jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any
         ) -> tuple[list[Any], list[Any]]:
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    with _bound(params):
        jaxpr_jvp, out_nz = ad.jvp_jaxpr(params["jaxpr"], nonzeros, False)
    in_specs, out_specs = params["in_specs"], params["out_specs"]
    new = _with(params, jaxpr=jaxpr_jvp,
                in_specs=in_specs + tuple(s for s, nz in zip(in_specs, nonzeros) if nz),
                out_specs=out_specs + tuple(s for s, nz in zip(out_specs, out_nz) if nz))
    outs = shard_map_p.bind(*primals, *[t for t in tangents if type(t) is not Zero], **new)
    return ad.split_jvp_outputs(outs, out_nz)


ad.primitive_jvps[shard_map_p] = _jvp


# --- partial evaluation ---------------------------------------------------------------------
def _residual_spec(aval: ShapedArray, manual_axes: tuple[str, ...]) -> Spec:
    return (tuple(manual_axes),) + ((),) * aval.ndim


def _stack_residuals(known: ClosedJaxpr, num_res: int) -> ClosedJaxpr:
    """``known`` with each residual given a leading dimension of 1 (the
    device's slot in the residual's global array)."""
    n_out = len(known.out_avals)

    def fun(*args: Any) -> list[Any]:
        outs = core.eval_jaxpr(known.jaxpr, known.consts, *args)
        keep, res = outs[:n_out - num_res], outs[n_out - num_res:]
        return keep + [st.expand_dims(r, (0,)) for r in res]

    return retrace(fun, known.in_avals, _dbg(known))


def _unstack_residuals(unknown: ClosedJaxpr, num_res: int) -> ClosedJaxpr:
    """``unknown`` taking its residuals with the leading dimension of 1."""
    avals = [a.update(shape=(1,) + a.shape) if i < num_res else a
             for i, a in enumerate(unknown.in_avals)]

    def fun(*args: Any) -> list[Any]:
        res = [st.squeeze(r, (0,)) for r in args[:num_res]]
        return core.eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *args[num_res:])

    return retrace(fun, avals, _dbg(unknown))


def _partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer, **params: Any) -> list[Any]:
    """The known operands' part runs now (returning the residuals too); the
    rest becomes a second ``shard_map_p`` equation."""
    unknowns = tuple(not t.is_known() for t in tracers)
    if not any(unknowns):
        return list(shard_map_p.bind(*[t.pval.const for t in tracers], **params))
    with _bound(params):
        known, unknown, out_uk, res_avals = pe.partial_eval_jaxpr_nounits(
            params["jaxpr"], unknowns, False)
        num_res = len(res_avals)
        known = _stack_residuals(known, num_res)
        unknown = _unstack_residuals(unknown, num_res)
    manual = params["manual_axes"]
    res_specs = tuple(_residual_spec(a, manual) for a in res_avals)
    in_specs, out_specs = params["in_specs"], params["out_specs"]
    known_params = _with(
        params, jaxpr=known,
        in_specs=tuple(s for s, uk in zip(in_specs, unknowns) if not uk),
        out_specs=tuple(s for s, uk in zip(out_specs, out_uk) if not uk) + res_specs)
    known_all = shard_map_p.bind(*[t.pval.const for t in tracers if t.is_known()],
                                 **known_params)
    n_known_out = len(known_all) - num_res
    known_outs, residuals = known_all[:n_known_out], known_all[n_known_out:]
    if not any(out_uk):
        return list(known_outs)
    res_tracers = [trace.new_instantiated_const(r) for r in residuals]
    unknown_tracers = [trace.instantiate_const(t) for t in tracers if not t.is_known()]
    unknown_params = _with(
        params, jaxpr=unknown,
        in_specs=res_specs + tuple(s for s, uk in zip(in_specs, unknowns) if uk),
        out_specs=tuple(s for s, uk in zip(out_specs, out_uk) if uk))
    out_avals = _abstract_eval(*[t.aval for t in [*res_tracers, *unknown_tracers]],
                               **unknown_params)
    out_tracers = trace.emit_recipe(shard_map_p, [*res_tracers, *unknown_tracers],
                                    unknown_params, out_avals, _effects(**unknown_params))
    known_iter, unknown_iter = iter(known_outs), iter(out_tracers)
    return [next(unknown_iter) if uk else next(known_iter) for uk in out_uk]


pe.custom_partial_eval_rules[shard_map_p] = _partial_eval


# --- transposition -----------------------------------------------------------------------------
def _axes_size(mesh: Any, axes: Sequence[str]) -> int:
    sizes = _sizes(mesh)
    return math.prod(sizes[a] for a in axes)


def _transposed_body(params: dict[str, Any], which_linear: tuple[bool, ...]) -> ClosedJaxpr:
    """``(*residual blocks, *cotangent blocks) -> cotangent blocks of the linear
    operands``, with the replication corrections of the module docstring."""
    mesh, manual = params["mesh"], params["manual_axes"]
    in_specs, out_specs = params["in_specs"], params["out_specs"]
    transposed = ad.transpose_jaxpr(params["jaxpr"], which_linear)
    num_res = sum(not lin for lin in which_linear)
    lin_specs = [s for s, lin in zip(in_specs, which_linear) if lin]

    def fun(*args: Any) -> list[Any]:
        res, cts = list(args[:num_res]), list(args[num_res:])
        scaled = []
        for ct, spec in zip(cts, out_specs):
            n = _axes_size(mesh, _unmentioned(spec, manual))
            dtype = get_aval(ct).dtype
            scaled.append(ew.div(ct, common.const(ct, n)) if n > 1 and dtype.kind in "fc"
                          else ct)
        outs = core.eval_jaxpr(transposed.jaxpr, transposed.consts, *res, *scaled)
        return [coll.psum(o, axes) if (axes := _unmentioned(spec, manual)) else o
                for o, spec in zip(outs, lin_specs)]

    return retrace(fun, transposed.in_avals, _dbg(transposed))


def _transpose(cts: Sequence[Any], *args: Any, **params: Any) -> list[Any]:
    which_linear = tuple(ad.is_undefined_primal(x) for x in args)
    with _bound(params):
        body = _transposed_body(params, which_linear)
    in_specs = params["in_specs"]
    residuals = [x for x, lin in zip(args, which_linear) if not lin]
    cts_in = [instantiate_zeros(ct) if type(ct) is Zero else ct for ct in cts]
    new = _with(params, jaxpr=body,
                in_specs=tuple(s for s, lin in zip(in_specs, which_linear) if not lin)
                + tuple(params["out_specs"]),
                out_specs=tuple(s for s, lin in zip(in_specs, which_linear) if lin))
    outs = iter(shard_map_p.bind(*residuals, *cts_in, **new))
    return [next(outs) if lin else None for lin in which_linear]


ad.primitive_transposes[shard_map_p] = _transpose


# --- batching ----------------------------------------------------------------------------------
def _batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None],
           **params: Any) -> tuple[list[Any], list[int | None]]:
    moved = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, dims)]
    in_batched = tuple(d is not None for d in dims)
    with _bound(params):
        batched, out_batched = batching.batch_jaxpr(params["jaxpr"], axis_data, in_batched,
                                                    False)
    # The batch dimension stays whole on every device.
    in_specs = tuple(((),) + s if b else s for s, b in zip(params["in_specs"], in_batched))
    out_specs = tuple(((),) + s if b else s for s, b in zip(params["out_specs"], out_batched))
    outs = shard_map_p.bind(*moved, **_with(params, jaxpr=batched, in_specs=in_specs,
                                            out_specs=out_specs))
    return list(outs), [0 if b else None for b in out_batched]


batching.fancy_primitive_batchers[shard_map_p] = _batch


# --- dead-code elimination ---------------------------------------------------------------------
def _dce(used_outputs: Sequence[bool], eqn: JaxprEqn) -> tuple[list[bool], JaxprEqn | None]:
    params = eqn.params
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    used_out = [bool(u) for u in used_outputs]
    new_jaxpr, used_in = pe.dce_closed_jaxpr(params["jaxpr"], used_out)
    new_params = _with(
        params, jaxpr=new_jaxpr,
        in_specs=tuple(s for s, u in zip(params["in_specs"], used_in) if u),
        out_specs=tuple(s for s, u in zip(params["out_specs"], used_out) if u))
    new_eqn = eqn.replace(invars=[v for v, u in zip(eqn.invars, used_in) if u],
                          outvars=[v for v, u in zip(eqn.outvars, used_out) if u],
                          params=new_params, effects=_effects(**new_params))
    return list(used_in), new_eqn


pe.dce_rules[shard_map_p] = _dce


# --- varying manual axes ------------------------------------------------------------------------
#: Collectives after which a value no longer varies over the axes they name.
_REDUCING = (coll.psum_p, coll.pmax_p, coll.pmin_p, coll.all_gather_p)
#: Collectives whose result varies over the axes they name.
_VARYING = (coll.ppermute_p, coll.reduce_scatter_p, coll.all_to_all_p, coll.axis_index_p,
            coll.pvary_p)


def _named_axes(params: dict[str, Any]) -> frozenset[Hashable]:
    for key in ("axes", "axis_name"):
        if key in params:
            value = params[key]
            names = value if isinstance(value, (tuple, list)) else (value,)
            return frozenset(n for n in names if not isinstance(n, int))
    return frozenset()


def varying_axes(jaxpr: Jaxpr, in_vma: Sequence[frozenset[Hashable]],
                 manual_axes: Sequence[str]) -> list[frozenset[Hashable]]:
    """For each output of ``jaxpr``, the manual axes it may vary over, given
    those of its inputs (constants vary over none)."""
    manual = frozenset(manual_axes)
    env: dict[Var, frozenset[Hashable]] = dict(zip(jaxpr.invars, in_vma))

    def read(atom: Any) -> frozenset[Hashable]:
        return env.get(atom, frozenset()) if isinstance(atom, Var) else frozenset()

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        joined = frozenset().union(*ins)
        prim = eqn.primitive
        if prim in _REDUCING:
            outs = [joined - _named_axes(eqn.params)] * len(eqn.outvars)
        elif prim in _VARYING:
            outs = [joined | (_named_axes(eqn.params) & manual)] * len(eqn.outvars)
        elif (structured := _structured_vma(eqn, ins, manual_axes)) is not None:
            outs = structured
        else:
            # Anything else (elementwise ops, control flow, nested shard_maps)
            # may vary wherever one of its operands does.
            outs = [joined] * len(eqn.outvars)
        for v, vma in zip(eqn.outvars, outs):
            env[v] = vma
    return [read(v) for v in jaxpr.outvars]


def _fixed_point_carry(body: Jaxpr, consts: list[frozenset[Hashable]],
                       carry: list[frozenset[Hashable]], rest: list[frozenset[Hashable]],
                       manual_axes: Sequence[str]) -> tuple[list[frozenset[Hashable]],
                                                            list[frozenset[Hashable]]]:
    """A loop body's output vmas once the carry's vmas stop growing (they
    only grow, over finitely many axes)."""
    while True:
        outs = varying_axes(body, consts + carry + rest, manual_axes)
        new_carry = [c | o for c, o in zip(carry, outs)]
        if new_carry == carry:
            return carry, outs[len(carry):]
        carry = new_carry


def _structured_vma(eqn: JaxprEqn, ins: list[frozenset[Hashable]],
                    manual_axes: Sequence[str]) -> list[frozenset[Hashable]] | None:
    """The output vmas of the higher-order primitives whose bodies are
    looked into (jit, checkpoint, scan, while, cond); None for others."""
    p, name = eqn.params, eqn.primitive.name
    if name == "jit":
        return varying_axes(p["jaxpr"].jaxpr, ins, manual_axes)
    if name == "checkpoint":
        return varying_axes(p["jaxpr"], ins, manual_axes)
    if name == "scan":
        nc, nk = p["num_consts"], p["num_carry"]
        carry, ys = _fixed_point_carry(p["jaxpr"].jaxpr, ins[:nc], ins[nc:nc + nk],
                                       ins[nc + nk:], manual_axes)
        return carry + ys
    if name == "while":
        nc = p["cond_nconsts"] + p["body_nconsts"]
        carry, _ = _fixed_point_carry(p["body_jaxpr"].jaxpr, ins[p["cond_nconsts"]:nc],
                                      ins[nc:], [], manual_axes)
        # The trip count may differ between devices when the predicate varies.
        pred = varying_axes(p["cond_jaxpr"].jaxpr, ins[:p["cond_nconsts"]] + carry,
                            manual_axes)[0]
        return [c | pred for c in carry]
    if name == "cond":
        branch_outs = [varying_axes(b.jaxpr, ins[1:], manual_axes) for b in p["branches"]]
        return [frozenset().union(ins[0], *outs) for outs in zip(*branch_outs)]
    return None


def check_replication(jaxpr: ClosedJaxpr, mesh: Any, in_specs: Sequence[Spec],
                      out_specs: Sequence[Spec], manual_axes: tuple[str, ...],
                      fun_name: str, result_paths: Sequence[str | None]) -> None:
    """Raises ``ReplicationError`` (naming the function, the result and the
    axes) when an output claimed replicated over a manual axis may vary over it."""
    in_vma = [frozenset(a for axes in s for a in axes) for s in in_specs]
    out_vma = varying_axes(jaxpr.jaxpr, in_vma, manual_axes)
    for i, (vma, spec) in enumerate(zip(out_vma, out_specs)):
        bad = [a for a in _unmentioned(spec, manual_axes) if a in vma]
        if not bad:
            continue
        path = result_paths[i] if i < len(result_paths) and result_paths[i] else f"#{i}"
        shape = ", ".join(f"'{n}': {s}" for n, s in _sizes(mesh).items())
        raise ReplicationError(
            f"shard_map applied to the function '{fun_name}' was given out_specs which "
            f"require replication which can't be statically inferred given the mesh:\n\n"
            f"The mesh given has shape {{{shape}}} with corresponding axis names "
            f"{tuple(mesh.axis_names)}.\n\nout_specs entry for output {path} is "
            f"{_spec_str(spec)}, which implies that the output is replicated across mesh "
            f"axes {tuple(bad)}, but it may vary over them (it was not reduced with psum, "
            f"pmax, pmin or all_gather over them).\n\nCheck if these output values are "
            f"meant to be replicated over those mesh axes. If not, consider revising the "
            f"corresponding out_specs entries. If so, consider disabling the check by "
            f"passing the check_vma=False argument to `shard_map`.")


def _spec_str(spec: Spec) -> str:
    parts = []
    for axes in spec:
        if not axes:
            parts.append("None")
        elif len(axes) == 1:
            parts.append(repr(axes[0]))
        else:
            parts.append(repr(tuple(axes)))
    return f"PartitionSpec({', '.join(parts)})"

