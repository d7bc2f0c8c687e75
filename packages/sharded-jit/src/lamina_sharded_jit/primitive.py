"""``pjit_p``: the initial-style primitive every ``jit`` call binds.

``outs = jit[jaxpr=..., in_shardings=..., ...] *args`` applies the closed
jaxpr in its params to ``args``. Params (JAX 0.10's names):

- ``jaxpr``: the ``ClosedJaxpr`` with its ``JaxprDebugInfo`` (argument names,
  result paths), traced once by ``jit``;
- ``in_shardings`` / ``out_shardings``: one entry per jaxpr input / output,
  a lamina sharding or ``UNSPECIFIED``;
- ``donated_invars``: one bool per input;
- ``name``: the function's name (the lowered callee is named after it);
- ``keep_unused``: keep unused arguments in the compiled program;
- ``inline``: staged into a jaxpr, the body's equations replace the call (unless
  it has shardings, donation or compiler options); lowered, the body goes in
  place instead of into a private function;
- ``compiler_options_kvs``: XLA options as ``(name, value)`` pairs.

Every transformation rule returns a ``pjit_p`` equation whose jaxpr carries
*updated* debug info (tangents named ``tangent(x)``, cotangents
``cotangent(x)``, residuals ``residual(x)``), produced by tracing-core's
jaxpr transformations: JVP (``jvp_jaxpr``), batching (``batch_jaxpr``),
partial evaluation (a known and an unknown ``pjit_p`` equation with residuals
between them), transposition (``transpose_jaxpr``) and DCE. Each rule's
result jaxpr is memoized on the input jaxpr, so repeated transformations of
the same jit reuse the same jaxpr (and its compiled program). The effects of
an equation are those of its jaxpr.

The eager impl rule and the lowering rule are registered by
:mod:`lamina_sharded_jit.execution` and :mod:`lamina_sharded_jit.lowering_rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_tracing_core import ad, batching, core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import Zero, instantiate_zeros
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects, NamedAxisEffect
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprEqn
from lamina_tracing_core.primitives import Primitive

from lamina_sharded_jit.jaxpr_cache import memoize_on_jaxpr
from lamina_sharded_jit.shardings import UNSPECIFIED, batch_sharding

__all__ = ["pjit_p", "PJIT_PARAMS", "check_pjit_params"]

pjit_p = Primitive("jit", multiple_results=True)
pjit_p.higher_order = True

#: The params every pjit_p equation has.
PJIT_PARAMS = ("jaxpr", "in_shardings", "out_shardings", "donated_invars", "name",
               "keep_unused", "inline", "compiler_options_kvs")


def check_pjit_params(params: dict[str, Any], n_in: int) -> None:
    """Checks the per-argument params have one entry per jaxpr input/output."""
    jaxpr: ClosedJaxpr = params["jaxpr"]
    n_out = len(jaxpr.jaxpr.outvars)
    for what, value, n in (("in_shardings", params["in_shardings"], n_in),
                           ("donated_invars", params["donated_invars"], n_in),
                           ("out_shardings", params["out_shardings"], n_out)):
        if len(value) != n:
            raise ValueError(f"jit[name={params['name']}]: {what} has {len(value)} entries "
                             f"for {n} values")


# --- abstract evaluation and effects ------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr, **params: Any) -> list[ShapedArray]:
    in_avals = jaxpr.in_avals
    if len(avals) != len(in_avals):
        raise TypeError(f"jit[name={params.get('name')}]: the jaxpr takes {len(in_avals)} "
                        f"arguments, got {len(avals)}")
    dbg = jaxpr.jaxpr.debug_info
    for i, (got, want) in enumerate(zip(avals, in_avals)):
        if got.shape != want.shape or got.dtype != want.dtype:
            name = dbg.arg_names[i] if dbg is not None else None
            what = f"argument {name}" if name else f"argument #{i}"
            raise TypeError(f"jit[name={params.get('name')}]: {what} has type {got.str_long()} "
                            f"but the jaxpr expects {want.str_long()}")
    return list(jaxpr.out_avals)


def _effects(*, jaxpr: ClosedJaxpr, **_: Any) -> Effects:
    return jaxpr.effects


pjit_p.def_abstract_eval(_abstract_eval)
pjit_p.def_effects(_effects)


# -- staging -------------------------------------------------------------------
def _inlinable(params: dict[str, Any]) -> bool:
    """``inline=True`` with nothing the equation must carry: no shardings, no
    donation, no compiler options (as JAX's staging rule)."""
    return (params["inline"] and not any(params["donated_invars"])
            and not params["compiler_options_kvs"]
            and all(s is UNSPECIFIED for s in params["in_shardings"])
            and all(s is UNSPECIFIED for s in params["out_shardings"]))


def _pjit_staging(trace: pe.DynamicJaxprTrace, *tracers: Any, **params: Any) -> Any:
    """Staged into a jaxpr, an inlinable jit is its body's equations (each
    keeps the user line it came from); any other jit is one equation."""
    if _inlinable(params):
        jaxpr: ClosedJaxpr = params["jaxpr"]
        return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *tracers)
    return trace.stage_primitive(pjit_p, tracers, params)


pe.custom_staging_rules[pjit_p] = _pjit_staging


def _with(params: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = dict(params)
    new.update(changes)
    return new


# --- JVP ---------------------------------------------------------------------------------------
def _jvp_jaxpr(jaxpr: ClosedJaxpr, nonzeros: tuple[bool, ...]
               ) -> tuple[ClosedJaxpr, tuple[bool, ...]]:
    out, out_nz = ad.jvp_jaxpr(jaxpr, nonzeros, False)
    return out, tuple(out_nz)


_jvp_memo = memoize_on_jaxpr(_jvp_jaxpr)


def _pjit_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any
              ) -> tuple[list[Any], list[Any]]:
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jaxpr_jvp, out_nz = _jvp_memo(params["jaxpr"], nonzeros)
    nz_tangents = [t for t in tangents if type(t) is not Zero]
    in_sh = tuple(params["in_shardings"])
    out_sh = tuple(params["out_shardings"])
    new_params = _with(
        params, jaxpr=jaxpr_jvp,
        in_shardings=in_sh + tuple(s for s, nz in zip(in_sh, nonzeros) if nz),
        out_shardings=out_sh + tuple(s for s, nz in zip(out_sh, out_nz) if nz),
        donated_invars=tuple(params["donated_invars"]) + (False,) * len(nz_tangents))
    outs = pjit_p.bind(*primals, *nz_tangents, **new_params)
    return ad.split_jvp_outputs(outs, out_nz)


ad.primitive_jvps[pjit_p] = _pjit_jvp


# --- partial evaluation (known/unknown split) --------------------------------------------------
def _partial_eval_jaxpr(jaxpr: ClosedJaxpr, unknowns: tuple[bool, ...]
                        ) -> tuple[ClosedJaxpr, ClosedJaxpr, tuple[bool, ...], int]:
    known, unknown, out_uk, res_avals = pe.partial_eval_jaxpr_nounits(jaxpr, unknowns, False)
    return known, unknown, tuple(out_uk), len(res_avals)


_pe_memo = memoize_on_jaxpr(_partial_eval_jaxpr)


def _pjit_partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer,
                       **params: Any) -> list[Any]:
    """Known inputs are computed now by a first ``pjit_p`` (which also returns
    the residuals); the rest becomes a second ``pjit_p`` equation taking the
    residuals and the unknown inputs."""
    unknowns = tuple(not t.is_known() for t in tracers)
    if not any(unknowns):
        return list(pjit_p.bind(*[t.pval.const for t in tracers], **params))
    known_jaxpr, unknown_jaxpr, out_uk, num_res = _pe_memo(params["jaxpr"], unknowns)
    in_sh, out_sh = tuple(params["in_shardings"]), tuple(params["out_shardings"])
    donated = tuple(params["donated_invars"])
    known_params = _with(
        params, jaxpr=known_jaxpr,
        in_shardings=tuple(s for s, uk in zip(in_sh, unknowns) if not uk),
        out_shardings=tuple(s for s, uk in zip(out_sh, out_uk) if not uk)
        + (UNSPECIFIED,) * num_res,
        donated_invars=tuple(d for d, uk in zip(donated, unknowns) if not uk))
    known_vals = [t.pval.const for t in tracers if t.is_known()]
    known_all = pjit_p.bind(*known_vals, **known_params)
    n_known_out = len(known_all) - num_res
    known_outs, residuals = known_all[:n_known_out], known_all[n_known_out:]
    if not any(out_uk):
        return list(known_outs)
    res_tracers = [trace.new_instantiated_const(r) for r in residuals]
    unknown_tracers = [trace.instantiate_const(t) for t in tracers if not t.is_known()]
    unknown_params = _with(
        params, jaxpr=unknown_jaxpr,
        in_shardings=(UNSPECIFIED,) * num_res
        + tuple(s for s, uk in zip(in_sh, unknowns) if uk),
        out_shardings=tuple(s for s, uk in zip(out_sh, out_uk) if uk),
        donated_invars=(False,) * num_res + tuple(d for d, uk in zip(donated, unknowns) if uk))
    out_tracers = trace.emit_recipe(pjit_p, [*res_tracers, *unknown_tracers], unknown_params,
                                    unknown_jaxpr.out_avals, unknown_jaxpr.effects)
    known_iter, unknown_iter = iter(known_outs), iter(out_tracers)
    return [next(unknown_iter) if uk else next(known_iter) for uk in out_uk]


pe.custom_partial_eval_rules[pjit_p] = _pjit_partial_eval


# --- transposition -----------------------------------------------------------------------------
def _transpose_jaxpr(jaxpr: ClosedJaxpr, which_linear: tuple[bool, ...]) -> ClosedJaxpr:
    return ad.transpose_jaxpr(jaxpr, which_linear)


_transpose_memo = memoize_on_jaxpr(_transpose_jaxpr)


def _pjit_transpose(cts: Sequence[Any], *args: Any, **params: Any) -> list[Any]:
    """A ``pjit_p`` of the transposed jaxpr: ``(*residuals, *cotangents) ->
    cotangents of the linear inputs``."""
    which_linear = tuple(ad.is_undefined_primal(x) for x in args)
    transposed = _transpose_memo(params["jaxpr"], which_linear)
    in_sh, out_sh = tuple(params["in_shardings"]), tuple(params["out_shardings"])
    residuals = [x for x, lin in zip(args, which_linear) if not lin]
    cts_in = [instantiate_zeros(ct) if type(ct) is Zero else ct for ct in cts]
    new_params = _with(
        params, jaxpr=transposed,
        in_shardings=tuple(s for s, lin in zip(in_sh, which_linear) if not lin) + out_sh,
        out_shardings=tuple(s for s, lin in zip(in_sh, which_linear) if lin),
        donated_invars=(False,) * (len(residuals) + len(cts_in)))
    outs = iter(pjit_p.bind(*residuals, *cts_in, **new_params))
    return [next(outs) if lin else None for lin in which_linear]


ad.primitive_transposes[pjit_p] = _pjit_transpose


# --- batching ----------------------------------------------------------------------------------
def _batch_jaxpr(jaxpr: ClosedJaxpr, axis_name: Any, axis_size: int, spmd_name: Any,
                 in_batched: tuple[bool, ...]) -> tuple[ClosedJaxpr, tuple[bool, ...]]:
    axis_data = batching.AxisData(axis_name, axis_size, spmd_name)
    out, out_batched = batching.batch_jaxpr(jaxpr, axis_data, in_batched, False)
    return out, tuple(out_batched)


_batch_memo = memoize_on_jaxpr(_batch_jaxpr)


def _uses_axis(jaxpr: ClosedJaxpr, axis_data: batching.AxisData) -> bool:
    return axis_data.name is not None and any(
        isinstance(e, NamedAxisEffect) and e.name == axis_data.name for e in jaxpr.effects)


def _pjit_batch(axis_data: batching.AxisData, args: Sequence[Any],
                dims: Sequence[int | None], **params: Any
                ) -> tuple[list[Any], list[int | None]]:
    jaxpr: ClosedJaxpr = params["jaxpr"]
    if all(d is None for d in dims) and not _uses_axis(jaxpr, axis_data):
        outs = pjit_p.bind(*args, **params)
        return list(outs), [None] * len(outs)
    moved = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, dims)]
    in_batched = tuple(d is not None for d in dims)
    spmd = axis_data.spmd_name
    batched, out_batched = _batch_memo(jaxpr, axis_data.name, axis_data.size, spmd, in_batched)
    in_sh = tuple(batch_sharding(s, 0, a.ndim, spmd) if b else s
                  for s, b, a in zip(params["in_shardings"], in_batched, jaxpr.in_avals))
    out_sh = tuple(batch_sharding(s, 0, a.ndim, spmd) if b else s
                   for s, b, a in zip(params["out_shardings"], out_batched, jaxpr.out_avals))
    outs = pjit_p.bind(*moved, **_with(params, jaxpr=batched, in_shardings=in_sh,
                                       out_shardings=out_sh))
    return list(outs), [0 if b else None for b in out_batched]


batching.fancy_primitive_batchers[pjit_p] = _pjit_batch


# --- dead-code elimination ---------------------------------------------------------------------
def _has_side_effects(effects: Effects) -> bool:
    return any(not isinstance(e, NamedAxisEffect) for e in effects)


def _dce_jaxpr(jaxpr: ClosedJaxpr, used_outputs: tuple[bool, ...], keep_all_inputs: bool
               ) -> tuple[ClosedJaxpr, tuple[bool, ...]]:
    new, used_inputs = pe.dce_closed_jaxpr(jaxpr, used_outputs, instantiate=keep_all_inputs)
    return new, tuple(used_inputs)


_dce_memo = memoize_on_jaxpr(_dce_jaxpr)


def _pjit_dce(used_outputs: Sequence[bool], eqn: JaxprEqn
              ) -> tuple[list[bool], JaxprEqn | None]:
    params = eqn.params
    if not any(used_outputs) and not _has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    used_out = tuple(bool(u) for u in used_outputs)
    new_jaxpr, used_inputs = _dce_memo(params["jaxpr"], used_out, bool(params["keep_unused"]))
    new_params = _with(
        params, jaxpr=new_jaxpr,
        in_shardings=tuple(s for s, u in zip(params["in_shardings"], used_inputs) if u),
        out_shardings=tuple(s for s, u in zip(params["out_shardings"], used_out) if u),
        donated_invars=tuple(d for d, u in zip(params["donated_invars"], used_inputs) if u))
    new_eqn = eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_inputs) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_out) if u],
        params=new_params, effects=new_jaxpr.effects)
    return list(used_inputs), new_eqn


pe.dce_rules[pjit_p] = _pjit_dce
