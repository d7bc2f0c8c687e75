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
- transposition: the transposed body inside a ``shard_map_p``. With
  ``check_vma`` the body is typed with its varying manual axes (``vma``):
  an invariant value meeting a varying one was ``pvary``'d, whose transpose
  is ``psum_invariant``, and ``psum``'s transpose is ``pvary``, so the
  transposed body gives the cotangents of the global function as it is.
  Without ``check_vma`` the collectives' cotangents are pmap-style (the
  transpose of ``psum`` is ``psum``): a result replicated over a manual axis
  enters the body divided by that axis' size, and the cotangent of an operand
  replicated over a manual axis is summed over it.
- batching: the batched body; the batch dimension is never split.
- DCE: unused results and the operands only they needed are dropped.

With ``check_vma`` the body's arguments vary over the manual axes their
``in_specs`` name (:func:`block_aval`), every value's type carries the axes it
may vary over (``lamina_tracing_core.vma``), each result is ``pvary``'d to
the axes its ``out_specs`` entry names, and :func:`check_replication` refuses
an ``out_specs`` entry that claims replication over an axis its result varies
over.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lamina_tracing_core import ad, batching, core
from lamina_tracing_core import vma as _vma
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero, instantiate_zeros
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import retrace
from lamina_tracing_core.effects import Effects, has_side_effects, remove_named_axes
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprDebugInfo, JaxprEqn, param_printers
from lamina_tracing_core.lax import collectives as coll
from lamina_tracing_core.lax import common
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.mesh import (AbstractMesh, AxisType, get_abstract_mesh, partition,
                                     use_abstract_mesh)
from lamina_tracing_core.primitives import Primitive

__all__ = ["shard_map_p", "Spec", "block_aval", "global_aval", "manual_axes_bound", "manual_mesh",
           "check_replication", "spec_axes", "ReplicationError"]

#: One operand's layout: per dimension, the mesh axes it is split over.
Spec = tuple[tuple[str, ...], ...]

shard_map_p = Primitive("shard_map", multiple_results=True)
shard_map_p.higher_order = True


def _spec_text(spec: Spec) -> str:
    """A spec as JAX prints the user's ``PartitionSpec``: ``P('x', None)``,
    ``P(('x', 'y'),)``; trailing unsplit dimensions, which users leave out,
    are left out."""
    dims = list(spec)
    while dims and not dims[-1]:
        dims.pop()
    entries = [repr(partition(axes)) for axes in dims]
    return f"P({entries[0]},)" if len(entries) == 1 else f"P({', '.join(entries)})"


def _print_params(params: dict[str, Any]) -> dict[str, str | None]:
    """JAX's form of the params: specs as ``P(...)``, the mesh as it was given
    (concrete, or the context's abstract mesh), and the axes the body makes
    manual as ``newly_manual_axes``."""
    mesh = params["mesh"]
    manual = [a for a in mesh.axis_names if a in params["manual_axes"]]
    shown = getattr(mesh, "abstract_mesh", mesh) if params.get("mesh_shown_abstract", True) \
        else mesh
    return {
        "in_specs": f"({''.join(_spec_text(s) + ', ' for s in params['in_specs']).rstrip(' ')})",
        "out_specs": f"({''.join(_spec_text(s) + ', ' for s in params['out_specs']).rstrip(' ')})",
        "mesh": repr(shown) if shown is not mesh else str(mesh),
        "manual_axes": None,
        "name": None,
        "mesh_shown_abstract": None,
        "newly_manual_axes": "frozenset({" + ", ".join(repr(a) for a in manual) + "})",
    }


param_printers[shard_map_p] = _print_params


class ReplicationError(ValueError):
    """An ``out_specs`` entry claims replication the body does not give."""


def _sizes(mesh: Any) -> dict[str, int]:
    return dict(zip(mesh.axis_names, mesh.axis_sizes))


def _tiles(spec: Spec, sizes: dict[str, int]) -> list[int]:
    return [math.prod(sizes[a] for a in axes) for axes in spec]


def spec_axes(spec: Spec) -> frozenset[str]:
    """The mesh axes ``spec`` splits some dimension over."""
    return frozenset(a for axes in spec for a in axes)


def block_aval(aval: ShapedArray, spec: Spec, mesh: Any, check_vma: bool = False
               ) -> ShapedArray:
    """The per-device block type of a global value laid out by ``spec``; with
    ``check_vma`` it varies over the axes ``spec`` names (and those it varied
    over already, in an enclosing body)."""
    tiles = _tiles(spec, _sizes(mesh)) + [1] * (aval.ndim - len(spec))
    vma: tuple[Any, ...] = ()
    if check_vma:
        axes = aval.vma | spec_axes(spec)
        vma = tuple(a for a in mesh.axis_names if a in axes)
        vma += tuple(a for a in aval.vma_order if a not in vma)
    return aval.update(shape=tuple(d // t for d, t in zip(aval.shape, tiles)), vma=vma)


def global_aval(aval: ShapedArray, spec: Spec, mesh: Any,
                manual_axes: Sequence[str] = ()) -> ShapedArray:
    """The global type of per-device blocks of type ``aval`` laid out by
    ``spec``: it varies over no axis of this body (``manual_axes``)."""
    tiles = _tiles(spec, _sizes(mesh)) + [1] * (aval.ndim - len(spec))
    return aval.update(shape=tuple(d * t for d, t in zip(aval.shape, tiles)),
                       vma=tuple(a for a in aval.vma_order if a not in manual_axes),
                       unreduced=tuple(a for a in aval.unreduced_order if a not in manual_axes),
                       reduced=tuple(a for a in aval.reduced_order if a not in manual_axes))


@contextmanager
def manual_axes_bound(mesh: Any, manual_axes: Sequence[str],
                      check_vma: bool = False) -> Iterator[None]:
    """Binds the manual axes (with their sizes) for tracing or transforming a
    body, typing values with their varying manual axes when ``check_vma``."""
    sizes = _sizes(mesh)
    with core.extend_axis_env_nd([(a, sizes[a]) for a in manual_axes]), \
            _vma.checking_vma(check_vma, manual_axes), \
            use_abstract_mesh(manual_mesh(mesh, manual_axes)):
        yield


def manual_mesh(mesh: Any, manual_axes: Sequence[str]) -> AbstractMesh:
    """The abstract mesh a body over ``mesh``'s ``manual_axes`` sees (JAX's
    context mesh there, ``get_abstract_mesh()``): ``mesh`` with those axes,
    and those an enclosing body over it made manual, typed ``Manual``."""
    base = mesh if isinstance(mesh, AbstractMesh) else getattr(mesh, "abstract_mesh", None)
    if not isinstance(base, AbstractMesh):
        base = AbstractMesh(tuple(mesh.axis_sizes), tuple(mesh.axis_names))
    current = get_abstract_mesh()
    outer = current.manual_axes if (current.axis_names == base.axis_names and
                                    current.axis_sizes == base.axis_sizes) else ()
    return base.update_axis_types({a: AxisType.Manual for a in (*outer, *manual_axes)})


def _unmentioned(spec: Spec, manual_axes: Sequence[str]) -> tuple[str, ...]:
    used = {a for axes in spec for a in axes}
    return tuple(a for a in manual_axes if a not in used)


# --- abstract evaluation and effects ------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, mesh: Any, in_specs: tuple[Spec, ...],
                   out_specs: tuple[Spec, ...], name: str, manual_axes: tuple[str, ...] = (),
                   **_: Any) -> list[ShapedArray]:
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
    return [global_aval(a, s, mesh, manual_axes) for a, s in zip(jaxpr.out_avals, out_specs)]


def _effects(*, jaxpr: ClosedJaxpr, manual_axes: tuple[str, ...], **_: Any) -> Effects:
    return remove_named_axes(jaxpr.effects, manual_axes)


shard_map_p.def_abstract_eval(_abstract_eval)
shard_map_p.def_effects(_effects)


def _with(params: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = dict(params)
    new.update(changes)
    return new


def _bound(params: dict[str, Any]) -> Any:
    return manual_axes_bound(params["mesh"], params["manual_axes"], params["check_vma"])


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

    if params["check_vma"]:
        # the pvary/psum_invariant transposes in the body do the sums
        return transposed
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
    spmd = _spmd_axes(axis_data, params)
    if spmd:
        # vmap(..., spmd_axis_name=...): the batch dimension is split over
        # those mesh axes, each device batching its block of it.
        axis_data = batching.AxisData(axis_data.name,
                                      axis_data.size // _axes_size(params["mesh"], spmd),
                                      axis_data.spmd_name)
    with _bound(params):
        batched, out_batched = batching.batch_jaxpr(params["jaxpr"], axis_data, in_batched,
                                                    False)
        if spmd and params["check_vma"]:
            batched = _varying_over(batched, spmd, in_batched)
    in_specs = tuple((spmd,) + s if b else s for s, b in zip(params["in_specs"], in_batched))
    out_specs = tuple((spmd,) + s if b else s for s, b in zip(params["out_specs"], out_batched))
    outs = shard_map_p.bind(*moved, **_with(params, jaxpr=batched, in_specs=in_specs,
                                            out_specs=out_specs))
    return list(outs), [0 if b else None for b in out_batched]


def _varying_over(jaxpr: ClosedJaxpr, axes: tuple[str, ...], which: Sequence[bool]
                  ) -> ClosedJaxpr:
    """``jaxpr`` retyped with the ``which`` inputs varying over ``axes`` too
    (their batch dimension is split over them), so the values they meet are
    ``pvary``'d and the transposes sum over those axes."""
    avals = [a.update(vma=a.vma | frozenset(axes)) if w else a
             for a, w in zip(jaxpr.in_avals, which)]
    return retrace(lambda *args: core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args), avals,
                   _dbg(jaxpr))


def _spmd_axes(axis_data: batching.AxisData, params: dict[str, Any]) -> tuple[str, ...]:
    """The manual mesh axes a ``vmap``'s ``spmd_axis_name`` splits its batch
    dimension over (none without one)."""
    name = axis_data.spmd_name
    if name is None:
        return ()
    axes = tuple(name) if isinstance(name, (tuple, list)) else (name,)
    manual = params["manual_axes"]
    if not all(a in manual for a in axes):
        raise ValueError(f"vmap spmd_axis_name {name!r} names axes that are not manual axes "
                         f"{manual} of the shard_map({params['name']}) it batches")
    used = {a for spec in params["in_specs"] for dim in spec for a in dim}
    if used & set(axes):
        raise ValueError("vmap spmd_axis_name cannot appear in shard_map in_specs")
    size = _axes_size(params["mesh"], axes)
    if axis_data.size % size:
        raise ValueError(f"vmap spmd_axis_name {name!r}: the batch size {axis_data.size} is "
                         f"not divisible by the size {size} of those mesh axes")
    return axes


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


# --- the out_specs check -------------------------------------------------------------------------
def check_replication(out_avals: Sequence[ShapedArray], mesh: Any, out_specs: Sequence[Spec],
                      manual_axes: tuple[str, ...], fun_name: str,
                      result_paths: Sequence[str | None]) -> None:
    """Raises ``ReplicationError`` (naming the function, each offending result
    by its path and the axes) when a body result, typed with its varying manual
    axes, varies over a manual axis its ``out_specs`` entry leaves out."""
    msgs = []
    for i, (aval, spec) in enumerate(zip(out_avals, out_specs)):
        unmentioned = _unmentioned(spec, manual_axes)
        # an unreduced value differs between devices too (a summand on each)
        bad = [a for a in unmentioned if a in aval.vma or a in aval.unreduced]
        if not bad:
            continue
        path = result_paths[i] if i < len(result_paths) and result_paths[i] else f"#{i}"
        where = f"out_specs entry for the output {path} is {_spec_str(spec)}"
        if len(unmentioned) > 1:
            need = ",".join(a for a in manual_axes if a in spec_axes(spec))
            got = ",".join(a for a in mesh.axis_names if a in aval.vma)
            msgs.append(f"{where} which implies that the corresponding output value is only "
                        f"varying across mesh axes {{{need}}} and not {{{','.join(bad)}}}, but "
                        f"it was inferred to be possibly varying over {{{got}}}")
        else:
            msgs.append(f"{where} which implies that the corresponding output value is "
                        f"replicated across mesh axis '{unmentioned[0]}', but could not infer "
                        f"replication over any axes")
    if not msgs:
        return
    shown = msgs[0] if len(msgs) == 1 else "\n\n".join(f"* {m}" for m in msgs)
    raise ReplicationError(
        f"shard_map applied to the function '{fun_name}' was given out_specs which require "
        f"replication which can't be statically inferred given the mesh:\n\n"
        f"The mesh given has shape {tuple(mesh.axis_sizes)} with corresponding axis names "
        f"{tuple(mesh.axis_names)}.\n\n{shown}\n\nCheck if these output values are meant "
        f"to be replicated over those mesh axes. If not, consider revising the corresponding "
        f"out_specs entries. If so, consider disabling the check by passing the "
        f"check_vma=False argument to `shard_map`.")


def _spec_str(spec: Spec) -> str:
    """``P('i',)`` / ``P(None, ('i', 'j'))``, as JAX prints a spec (trailing
    unsplit dimensions left out)."""
    dims = list(spec)
    while dims and not dims[-1]:
        dims.pop()
    parts = [repr(axes[0]) if len(axes) == 1 else repr(tuple(axes)) if axes else "None"
             for axes in dims]
    return f"P({', '.join(parts)}{',' if len(parts) == 1 else ''})"
