"""``scan``: the ``scan`` primitive.

``scan_p`` runs a closed jaxpr ``body: [*consts, *carry, *x] -> [*carry, *y]``
``length`` times: the carry is threaded through the iterations, ``xs`` are
sliced along their leading axis and the ``ys`` stacked along a new leading
axis (both walked backwards when ``reverse``).

Params (JAX 0.10's): ``jaxpr`` (ClosedJaxpr), ``length`` (int), ``reverse``
(bool), ``num_consts``, ``num_carry`` (ints; operands are ``[*consts, *init,
*xs]``), ``unroll`` (int, a hint for the lowering).

The body jaxpr is traced with ``traced_for='scan'`` and names from the body
function's parameters (``carry[0]``, ``xs['a']``); every rule below builds new
body jaxprs with names derived from those (tangents, cotangents, residuals),
one per invar and outvar.

Rules: abstract evaluation (checks carry and xs types), effects, JVP (with a
fixpoint on which carries have nonzero tangents), partial evaluation (known
scan + staged scan fed with per-iteration residuals; loop-invariant residuals
are passed as consts), transpose (a reversed scan carrying the cotangents of
the carry and of the linear consts), batching (fixpoint on batched carries),
DCE, and eager evaluation (a Python loop over the body).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util as tu
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_tracing_core import ad, batching, core, dtypes
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core import names as _names
from lamina_tracing_core.ad_util import (
    Zero,
    add_tangents,
    instantiate_zeros,
    tangent_aval,
    zeros_like_aval,
)
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import (
    keep_passed_through_carries,
    as_array,
    body_debug_info,
    carry_type_error,
    eval_closed,
    joined_effects,
    long_type_str,
    move_invars_to_back,
    permute_invars,
    permute_outvars,
    retrace,
    split_list,
    trace_body,
    typematch,
    wrap_src,
)
from lamina_tracing_core.effects import Effects, has_side_effects, uses_named_axis
from lamina_tracing_core.errors import ConcretizationTypeError
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprDebugInfo, JaxprEqn, Literal
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core import api
from lamina_tracing_core.lax import structural, convert

__all__ = ["scan", "scan_p"]

scan_p = Primitive("scan", multiple_results=True)
scan_p.higher_order = True


# --- the user API --------------------------------------------------------------------
def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         length: int | None = None, reverse: bool = False, unroll: int | bool = 1,
         _split_transpose: bool = False) -> tuple[Any, Any]:
    """Scans ``f: (carry, x) -> (carry, y)`` over the leading axis of ``xs``:
    returns the final carry and the stacked ``y``s, like::

        carry = init; ys = []
        for x in xs:
            carry, y = f(carry, x); ys.append(y)
        return carry, stack(ys)

    ``init``/``xs``/``y`` may be pytrees; ``length`` is required when ``xs``
    is ``None`` (and must agree with the leading axes otherwise); ``reverse``
    walks ``xs`` and stacks ``ys`` backwards; ``unroll`` (int or bool) is a
    hint for the compiled loop. The carry output must have the structure and
    types of ``init``."""
    del _split_transpose
    return scan_with_debug_info(f, init, xs, length, reverse, unroll, None)


def lax_map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:
    """``lax.map``: ``f`` applied to each slice of ``xs`` along its leading axis,
    stacked (a ``scan`` without carry). With ``batch_size``, ``f`` is vmapped
    over chunks of that many slices (the remainder in one more vmapped call)."""
    if batch_size is None:
        return scan(lambda _, x: ((), f(x)), (), xs)[1]
    leaves = tu.tree_leaves(xs)
    n = _infer_scan_length(leaves, None)
    num_batches, remainder = divmod(n, int(batch_size))
    cut = num_batches * int(batch_size)

    def batched(x: Any) -> Any:
        a = get_aval(x)
        head = structural.slice_in_dim(x, 0, cut, 1, 0)
        return structural.reshape(head, (num_batches, int(batch_size)) + a.shape[1:])

    ys = scan(lambda _, x: ((), api.vmap(f)(x)), (), tu.tree_map(batched, xs))[1]
    ys = tu.tree_map(lambda y: structural.reshape(y, (cut,) + get_aval(y).shape[2:]), ys)
    if remainder:
        rest = api.vmap(f)(tu.tree_map(lambda x: structural.slice_in_dim(x, cut, n, 1, 0), xs))
        ys = tu.tree_map(lambda a, b: structural.concatenate([a, b], 0), ys, rest)
    return ys


def scan_with_debug_info(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any,
                         length: int | None, reverse: bool, unroll: int | bool,
                         debug_info: TracingDebugInfo | None) -> tuple[Any, Any]:
    """``scan`` whose body is named by ``debug_info`` (``fori_loop`` passes the
    debug info of its own body function)."""
    if not callable(f):
        raise TypeError("lax.scan: f argument should be a callable.")
    dbg = debug_info if debug_info is not None else body_debug_info("scan", f, (init, xs))
    init_flat, init_tree = tu.tree_flatten(init)
    xs_flat, xs_tree = tu.tree_flatten(xs)
    in_tree = tu.tree_structure((init, xs))
    length = _infer_scan_length(xs_flat, length)
    x_avals = [_slice_aval(get_aval(x)) for x in xs_flat]
    init_avals = [get_aval(x) for x in init_flat]

    body, carry_tree, carry_avals, ys_tree = _trace_scan_body(f, in_tree, init_avals, x_avals,
                                                              dbg)
    if len(carry_avals) == len(init_avals):
        promoted, changed = _promote_weak_inits(init_flat, init_avals, carry_avals)
        if changed:
            init_flat = promoted
            init_avals = [get_aval(x) for x in init_flat]
            body, carry_tree, carry_avals, ys_tree = _trace_scan_body(
                f, in_tree, init_avals, x_avals, dbg)
    err = carry_type_error("scan body", f, init_tree, init_avals, carry_tree, carry_avals)
    if err is not None:
        raise err
    unroll = _normalize_unroll(unroll, length)
    outs = scan_p.bind(*body.consts, *init_flat, *xs_flat, reverse=bool(reverse),
                       length=length, jaxpr=body.jaxpr, num_consts=body.num_consts,
                       num_carry=len(init_flat), unroll=unroll)
    carry_out, ys = outs[:len(init_flat)], outs[len(init_flat):]
    return tu.tree_unflatten(init_tree, carry_out), tu.tree_unflatten(ys_tree, ys)


def _slice_aval(aval: ShapedArray) -> ShapedArray:
    return aval.update(shape=aval.shape[1:])


def _trace_scan_body(f: Callable[..., Any], in_tree: Any, init_avals: list[ShapedArray],
                     x_avals: list[ShapedArray], dbg: TracingDebugInfo) -> tuple[Any, ...]:
    body = trace_body(f, in_tree, init_avals + x_avals, dbg)
    out = tu.tree_unflatten(body.out_tree, body.out_avals)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(f"scan body output must be a pair, got {out}.")
    carry_leaves, carry_tree = tu.tree_flatten(out[0])
    _, ys_tree = tu.tree_flatten(out[1])
    return body, carry_tree, carry_leaves, ys_tree


def _promote_weak_inits(init_flat: list[Any], init_avals: Sequence[ShapedArray],
                        carry_avals: Sequence[ShapedArray]) -> tuple[list[Any], bool]:
    """Weakly typed inits (Python scalars) take the type the body gives the
    carry, as in JAX (``scan(f, 0, xs)`` with a float32 carry)."""
    out, changed = [], False
    for x, a, b in zip(init_flat, init_avals, carry_avals):
        if a.weak_type and not typematch(a, b) and a.shape == b.shape:
            dtype, _ = dtypes.promote_types_weak((a.dtype, a.weak_type), (b.dtype, b.weak_type))
            out.append(convert.convert_element_type(x, dtype))
            changed = True
        else:
            out.append(x)
    return out, changed


def _infer_scan_length(xs_flat: Sequence[Any], length: Any) -> int:
    avals = [get_aval(x) for x in xs_flat]
    if any(a.ndim == 0 for a in avals):
        raise ValueError("scan got value with no leading axis to scan over: "
                         + ", ".join(str(x) for x, a in zip(xs_flat, avals) if a.ndim == 0)
                         + ".")
    lengths = [a.shape[0] for a in avals]
    if length is not None:
        try:
            length = int(core.concrete_or_error(None, length))
        except ConcretizationTypeError as err:
            raise ConcretizationTypeError(
                length, "The `length` argument to `scan` expects a concrete `int` value. "
                "For scan-like iteration with a dynamic length, use `while_loop` or "
                "`fori_loop`.") from err
        if not all(length == n for n in lengths):
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {lengths}.")
        return int(length)
    unique = sorted(set(lengths))
    if len(unique) > 1:
        raise ValueError("scan got values with different leading axis sizes: "
                         + ", ".join(map(str, lengths)) + ".")
    if not unique:
        raise ValueError("scan got no values to scan over and `length` not provided.")
    return int(unique[0])


def _normalize_unroll(unroll: Any, length: int) -> int:
    value = core.concrete_or_error(
        None, unroll, "The `unroll` argument to `scan` expects a concrete `int` or `bool` "
        "value.")
    if isinstance(value, (bool, np.bool_)):
        return max(length, 1) if value else 1
    count = int(value)
    if count < 0:
        raise ValueError("`unroll` must be a `bool` or a non-negative `int`.")
    return count


# --- abstract evaluation, effects, impl --------------------------------------------------------
def _scan_abstract_eval(*avals: ShapedArray, reverse: bool, length: int, jaxpr: ClosedJaxpr,
                        num_consts: int, num_carry: int, unroll: int) -> list[ShapedArray]:
    in_avals = jaxpr.in_avals
    if len(avals) != len(in_avals):
        raise TypeError(f"scan: the body takes {len(in_avals)} operands but the scan got "
                        f"{len(avals)}")
    consts, init, xs = split_list(avals, [num_consts, num_carry])
    b_consts, b_carry, b_xs = split_list(in_avals, [num_consts, num_carry])
    for what, got, want in (("const", consts, b_consts), ("carry", init, b_carry)):
        for i, (a, b) in enumerate(zip(got, want)):
            if not typematch(a, b):
                raise TypeError(f"scan: {what} operand {i} has type {long_type_str(a)} but the "
                                f"body expects {long_type_str(b)}")
    for i, (a, b) in enumerate(zip(xs, b_xs)):
        if a.shape != (length,) + b.shape or a.dtype != b.dtype:
            raise TypeError(f"scan: xs operand {i} has type {long_type_str(a)} but the body "
                            f"expects slices of type {long_type_str(b)} over length {length}")
    carry_out, ys = split_list(jaxpr.out_avals, [num_carry])
    for i, (a, b) in enumerate(zip(b_carry, carry_out)):
        if not typematch(a, b):
            raise TypeError(f"scan: carry {i} enters the body as {long_type_str(a)} but leaves "
                            f"it as {long_type_str(b)}")
    return list(carry_out) + [y.update(shape=(length,) + y.shape) for y in ys]


def _scan_effects(*, jaxpr: ClosedJaxpr, **_: Any) -> Effects:
    return joined_effects([jaxpr])


scan_p.def_abstract_eval(_scan_abstract_eval)
scan_p.def_effects(_scan_effects)


def _stack(values: Sequence[Any], aval: ShapedArray, length: int) -> Any:
    if not values:
        return structural.full((length,) + aval.shape, np.zeros((), aval.dtype), aval.dtype)
    rows = [structural.broadcast_in_dim(v, (1,) + aval.shape, tuple(range(1, aval.ndim + 1)))
            for v in values]
    return rows[0] if len(rows) == 1 else structural.concatenate(rows, 0)


def _scan_impl(*args: Any, reverse: bool, length: int, jaxpr: ClosedJaxpr, num_consts: int,
               num_carry: int, unroll: int) -> list[Any]:
    """Evaluation by a Python loop over the body: eager scans use it only
    before the jit layer installs its compiler (then each runs as one
    compiled program, ``api.compiled_impl_when_eager``)."""
    consts, carry, xs = split_list(args, [num_consts, num_carry])
    ys_per_step: list[list[Any]] = []
    steps = range(length - 1, -1, -1) if reverse else range(length)
    for i in steps:
        x_i = [structural.index_in_dim(x, i, 0, keepdims=False) for x in xs]
        out = eval_closed(jaxpr, *consts, *carry, *x_i)
        carry, y = out[:num_carry], out[num_carry:]
        ys_per_step.append(y)
    if reverse:
        ys_per_step.reverse()
    if length == 0:
        carry = _zero_trip_carry(jaxpr, num_consts, carry)
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [_stack([step[j] for step in ys_per_step], a, length) for j, a in enumerate(y_avals)]
    return list(carry) + ys


def _zero_trip_carry(jaxpr: ClosedJaxpr, num_consts: int, carry: Sequence[Any]) -> list[Any]:
    """A loop that never ran returns its initial carry, as arrays of the carry
    types (as JAX's does), except the carries the body passes through
    unchanged, which come back as given."""
    invars, outvars = jaxpr.jaxpr.invars, jaxpr.jaxpr.outvars
    out = []
    for i, (value, aval) in enumerate(zip(carry, jaxpr.out_avals)):
        out.append(value if outvars[i] is invars[num_consts + i] else as_array(value, aval))
    return out


_scan_compiled = api.compiled_impl_when_eager(scan_p, _scan_impl)


def _scan_eager(*args: Any, **params: Any) -> list[Any]:
    """An eager scan: one compiled program (or a Python loop before a compiler is installed)."""
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    return keep_passed_through_carries(_scan_compiled(*args, **params),
                                       args[n_consts:n_consts + n_carry], params["jaxpr"],
                                       n_consts)


scan_p.def_impl(_scan_eager)


# --- JVP -----------------------------------------------------------------------------------------
def _interleave_jvp_binders(jaxpr: ClosedJaxpr, groups: Sequence[int],
                            nz_groups: Sequence[int], out_groups: Sequence[int],
                            nz_out_groups: Sequence[int]) -> ClosedJaxpr:
    """``[*p0, *p1, .., *t0, *t1, ..] -> [*q0, .., *u0, ..]`` (a JVP jaxpr: primals,
    then tangents) reordered to ``[*p0, *t0, *p1, *t1, ..] -> [*q0, *u0, ..]``."""
    def order(sizes: Sequence[int], nz_sizes: Sequence[int]) -> list[int]:
        primal_starts = np.cumsum([0, *sizes[:-1]]).tolist()
        tangent_starts = (sum(sizes) + np.cumsum([0, *nz_sizes[:-1]])).tolist()
        out: list[int] = []
        for p0, n, t0, m in zip(primal_starts, sizes, tangent_starts, nz_sizes):
            out += list(range(p0, p0 + n)) + list(range(t0, t0 + m))
        return out
    jaxpr = permute_invars(jaxpr, order(groups, nz_groups))
    return permute_outvars(jaxpr, order(out_groups, nz_out_groups))


def _scan_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, reverse: bool, length: int,
              jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, unroll: int
              ) -> tuple[list[Any], list[Any]]:
    num_xs = len(jaxpr.in_avals) - num_consts - num_carry
    num_ys = len(jaxpr.out_avals) - num_carry
    nonzeros = [type(t) is not Zero for t in tangents]
    const_nz, init_nz, xs_nz = split_list(nonzeros, [num_consts, num_carry])
    carry_nz = init_nz
    for _ in range(1 + num_carry):
        nz = const_nz + carry_nz + xs_nz
        jaxpr_jvp, out_nz = ad.jvp_jaxpr(jaxpr, nz, instantiate=carry_nz + [False] * num_ys)
        carry_nz_out = out_nz[:num_carry]
        if carry_nz_out == carry_nz:
            break
        carry_nz = list(map(operator.or_, carry_nz, carry_nz_out))
    else:  # pragma: no cover - the fixpoint grows monotonically
        raise AssertionError("scan JVP: no fixpoint of the carry tangents")
    nz = const_nz + carry_nz + xs_nz
    tangents = [instantiate_zeros(t) if n else t for t, n in zip(tangents, nz)]
    consts, init, xs = split_list(primals, [num_consts, num_carry])
    consts_dot, init_dot, xs_dot = [[t for t in ts if type(t) is not Zero]
                                    for ts in split_list(tangents, [num_consts, num_carry])]
    ys_nz = out_nz[num_carry:]
    jaxpr_jvp = _interleave_jvp_binders(
        jaxpr_jvp, [num_consts, num_carry, num_xs],
        [len(consts_dot), len(init_dot), len(xs_dot)],
        [num_carry, num_ys], [len(init_dot), sum(ys_nz)])
    outs = scan_p.bind(*consts, *consts_dot, *init, *init_dot, *xs, *xs_dot, reverse=reverse,
                       length=length, jaxpr=jaxpr_jvp, num_consts=num_consts + len(consts_dot),
                       num_carry=num_carry + len(init_dot), unroll=unroll)
    carry, carry_dot, ys, ys_dot = split_list(outs, [num_carry, len(init_dot), num_ys])
    primals_out = carry + ys
    nz_iter = iter(carry_dot + ys_dot)
    tangents_out = [next(nz_iter) if n else Zero(tangent_aval(get_aval(p)))
                    for p, n in zip(primals_out, carry_nz + ys_nz)]
    return primals_out, tangents_out


ad.primitive_jvps[scan_p] = _scan_jvp


# --- partial evaluation --------------------------------------------------------------------------
_CONST, _XS, _COMPUTED = "const", "xs", "computed"


def _classify_residuals(jaxpr_known: ClosedJaxpr, num_known_consts: int, num_known_carry: int,
                        num_res: int, known_ins: Sequence[Any]) -> list[tuple[str, Any]]:
    """How each residual output of the known body reaches the staged scan:
    ``(_CONST, value)`` when it is the same in every iteration (a known const,
    a constant, a literal): passed as a const, not stacked; ``(_XS, array)``
    when it is a known ``xs`` slice: the ``xs`` array itself is passed;
    ``(_COMPUTED, None)``: stacked by the known scan."""
    inner = jaxpr_known.jaxpr
    res_vars = inner.outvars[len(inner.outvars) - num_res:]
    start_xs = num_known_consts + num_known_carry
    const_pos = {id(v): i for i, v in enumerate(inner.invars[:num_known_consts])}
    xs_pos = {id(v): start_xs + i for i, v in enumerate(inner.invars[start_xs:])}
    constvar_pos = {id(v): i for i, v in enumerate(inner.constvars)}
    out: list[tuple[str, Any]] = []
    for v in res_vars:
        if type(v) is Literal:
            out.append((_CONST, v.val))
        elif id(v) in const_pos:
            out.append((_CONST, known_ins[const_pos[id(v)]]))
        elif id(v) in constvar_pos:
            out.append((_CONST, jaxpr_known.consts[constvar_pos[id(v)]]))
        elif id(v) in xs_pos:
            out.append((_XS, known_ins[xs_pos[id(v)]]))
        else:
            out.append((_COMPUTED, None))
    return out


def _scan_partial_eval(trace: pe.JaxprTrace, *tracers: pe.JaxprTracer, reverse: bool,
                       length: int, jaxpr: ClosedJaxpr, num_consts: int, num_carry: int,
                       unroll: int) -> list[Any]:
    params = dict(reverse=reverse, length=length, jaxpr=jaxpr, num_consts=num_consts,
                  num_carry=num_carry, unroll=unroll)
    unknowns = [not t.is_known() for t in tracers]
    if not any(unknowns):
        return list(scan_p.bind(*[t.pval.const for t in tracers], **params))
    num_ys = len(jaxpr.out_avals) - num_carry
    const_uk, init_uk, xs_uk = split_list(unknowns, [num_consts, num_carry])
    carry_uk = init_uk
    for _ in range(1 + num_carry):
        uks = const_uk + carry_uk + xs_uk
        jaxpr_known, jaxpr_unknown, out_uk, res_avals = pe.partial_eval_jaxpr_nounits(
            jaxpr, uks, instantiate=carry_uk + [False] * num_ys)
        carry_uk_out = out_uk[:num_carry]
        if carry_uk_out == carry_uk:
            break
        carry_uk = list(map(operator.or_, carry_uk, carry_uk_out))
    else:  # pragma: no cover
        raise AssertionError("scan partial eval: no fixpoint of the unknown carries")
    uks = const_uk + carry_uk + xs_uk
    num_res = len(res_avals)
    num_known_out = len(out_uk) - sum(out_uk)
    num_known_consts = num_consts - sum(const_uk)
    known_ins = [t.pval.const for t, uk in zip(tracers, uks) if not uk]
    num_known_carry = num_carry - sum(carry_uk)
    kinds = _classify_residuals(jaxpr_known, num_known_consts, num_known_carry, num_res,
                                known_ins)
    stacked = [kind == _COMPUTED for kind, _ in kinds]
    # The known scan returns only the residuals it must stack; the equations of
    # the others go.
    jaxpr_known, _ = pe.dce_closed_jaxpr(jaxpr_known, [True] * num_known_out + stacked,
                                         instantiate=True)
    if jaxpr_known.out_avals:
        known_outs = scan_p.bind(*known_ins, reverse=reverse, length=length, jaxpr=jaxpr_known,
                                 num_consts=num_known_consts, num_carry=num_known_carry,
                                 unroll=unroll)
    else:
        known_outs = []
    known_vals, stacked_res = known_outs[:num_known_out], iter(known_outs[num_known_out:])
    int_res = [val for kind, val in kinds if kind == _CONST]
    ext_res = [next(stacked_res) if kind == _COMPUTED else val
               for kind, val in kinds if kind != _CONST]
    is_ext = [kind != _CONST for kind, _ in kinds]
    # The staged body takes [*intensive res, *unknown ins, *extensive res].
    jaxpr_unknown = move_invars_to_back(jaxpr_unknown, is_ext + [False] * sum(uks))
    in_tracers = ([trace.new_instantiated_const(r) for r in int_res]
                  + [trace.instantiate_const(t) for t, uk in zip(tracers, uks) if uk]
                  + [trace.new_instantiated_const(r) for r in ext_res])
    staged_params = dict(reverse=reverse, length=length, jaxpr=jaxpr_unknown,
                         num_consts=len(int_res) + sum(const_uk), num_carry=sum(carry_uk),
                         unroll=unroll)
    out_avals = _scan_abstract_eval(*[t.aval for t in in_tracers], **staged_params)
    out_tracers = trace.emit_recipe(scan_p, in_tracers, staged_params, out_avals)
    known_iter, unknown_iter = iter(known_vals), iter(out_tracers)
    return [next(unknown_iter) if uk else next(known_iter) for uk in out_uk]


pe.custom_partial_eval_rules[scan_p] = _scan_partial_eval


# --- transpose -------------------------------------------------------------------------------------
def _cotangent_name(name: str | None) -> str | None:
    return _names.cotangent(name)


def _transpose_scan_body(body: ClosedJaxpr, num_ires: int, num_c: int, num_carry: int,
                         num_a: int, ct_ys_nz: Sequence[bool]) -> ClosedJaxpr:
    """The body ``[ires, c, carry, a, eres] -> [carry, ys]`` (linear in ``c``,
    ``carry`` and ``a``) transposed to ``[ires, ct_c, ct_carry, ct_ys, eres]
    -> [ct_c, ct_carry, ct_a]``: ``ct_c`` accumulates the cotangents of the
    linear consts over the iterations."""
    in_avals = body.in_avals
    ires_avals, c_avals, carry_avals, a_avals, eres_avals = split_list(
        in_avals, [num_ires, num_c, num_carry, num_a])
    y_avals = body.out_avals[num_carry:]
    ct_c_avals = [tangent_aval(a) for a in c_avals]
    ct_carry_avals = [tangent_aval(a) for a in carry_avals]
    ct_y_avals = [tangent_aval(a) for a, nz in zip(y_avals, ct_ys_nz) if nz]
    lin_avals = c_avals + carry_avals + a_avals

    def transposed(*args: Any) -> list[Any]:
        ires, ct_c, ct_carry, ct_y, eres = split_list(
            args, [num_ires, num_c, num_carry, len(ct_y_avals)])
        ct_y_iter = iter(ct_y)
        ct_ys = [next(ct_y_iter) if nz else Zero(tangent_aval(a))
                 for a, nz in zip(y_avals, ct_ys_nz)]
        primals = ires + [ad.UndefinedPrimal(a) for a in lin_avals] + eres
        cts_in = ad.backward_pass(body.jaxpr, body.consts, primals, ct_carry + ct_ys)
        _, new_ct_c, ct_carry_in, ct_a, _ = split_list(cts_in, [num_ires, num_c, num_carry, num_a])
        ct_c_out = [instantiate_zeros(add_tangents(acc, new)) for acc, new in zip(ct_c, new_ct_c)]
        return (ct_c_out + [_instantiate(ct, a) for ct, a in zip(ct_carry_in, ct_carry_avals)]
                + [_instantiate(ct, tangent_aval(a)) for ct, a in zip(ct_a, a_avals)])

    dbg = body.jaxpr.debug_info
    assert dbg is not None
    names = split_list(dbg.arg_names, [num_ires, num_c, num_carry, num_a])
    paths = split_list(dbg.result_paths, [num_carry])
    ires_n, c_n, carry_n, a_n, eres_n = names
    new_dbg = JaxprDebugInfo(
        dbg.traced_for, wrap_src(dbg.func_src_info, "transpose"),
        tuple(ires_n) + tuple(map(_cotangent_name, c_n))
        + tuple(map(_cotangent_name, paths[0]))
        + tuple(_cotangent_name(p) for p, nz in zip(paths[1], ct_ys_nz) if nz) + tuple(eres_n),
        tuple(map(_cotangent_name, c_n)) + tuple(map(_cotangent_name, carry_n))
        + tuple(map(_cotangent_name, a_n)))
    return retrace(transposed, ires_avals + ct_c_avals + ct_carry_avals + ct_y_avals + eres_avals,
                   new_dbg)


def _instantiate(ct: Any, aval: ShapedArray) -> Any:
    if type(ct) is Zero:
        return zeros_like_aval(aval)
    return ct


def _scan_transpose(cts: Sequence[Any], *args: Any, reverse: bool, length: int,
                    jaxpr: ClosedJaxpr, num_consts: int, num_carry: int, unroll: int
                    ) -> list[Any]:
    consts, init, xs = split_list(args, [num_consts, num_carry])
    const_lin = [ad.is_undefined_primal(x) for x in consts]
    xs_lin = [ad.is_undefined_primal(x) for x in xs]
    # The body's binders as [ires, linear consts, carry, linear xs, eres]; the
    # carry is linear (an init that is a known value is a zero tangent).
    order = ([i for i, lin in enumerate(const_lin) if not lin]
             + [i for i, lin in enumerate(const_lin) if lin]
             + list(range(num_consts, num_consts + num_carry))
             + [num_consts + num_carry + i for i, lin in enumerate(xs_lin) if lin]
             + [num_consts + num_carry + i for i, lin in enumerate(xs_lin) if not lin])
    body = permute_invars(jaxpr, order)
    ires = [x for x, lin in zip(consts, const_lin) if not lin]
    eres = [x for x, lin in zip(xs, xs_lin) if not lin]
    num_c, num_a = sum(const_lin), sum(xs_lin)
    ct_carry, ct_ys = split_list(cts, [num_carry])
    carry_avals = jaxpr.in_avals[num_consts:num_consts + num_carry]
    ct_carry = [_instantiate(ct, tangent_aval(a)) for ct, a in zip(ct_carry, carry_avals)]
    ct_ys_nz = [type(ct) is not Zero for ct in ct_ys]
    ct_ys = [ct for ct in ct_ys if type(ct) is not Zero]
    c_avals = [a for a, lin in zip(jaxpr.in_avals[:num_consts], const_lin) if lin]
    ct_c_init = [zeros_like_aval(tangent_aval(a)) for a in c_avals]
    body_t = _transpose_scan_body(body, len(ires), num_c, num_carry, num_a, ct_ys_nz)
    outs = scan_p.bind(*ires, *ct_c_init, *ct_carry, *ct_ys, *eres, reverse=not reverse,
                       length=length, jaxpr=body_t, num_consts=len(ires),
                       num_carry=num_c + num_carry, unroll=unroll)
    ct_c, ct_init, ct_a = split_list(outs, [num_c, num_carry])
    ct_c_iter, ct_a_iter = iter(ct_c), iter(ct_a)
    return ([next(ct_c_iter) if lin else None for lin in const_lin]
            + [ct if ad.is_undefined_primal(x) else None for x, ct in zip(init, ct_init)]
            + [next(ct_a_iter) if lin else None for lin in xs_lin])


ad.primitive_transposes[scan_p] = _scan_transpose


# --- batching ------------------------------------------------------------------------------------
def _uses_axis(jaxpr: ClosedJaxpr, axis_data: batching.AxisData) -> bool:
    return uses_named_axis(jaxpr.effects, axis_data.name)


def _scan_batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None],
                *, reverse: bool, length: int, jaxpr: ClosedJaxpr, num_consts: int,
                num_carry: int, unroll: int) -> tuple[list[Any], list[int | None]]:
    if all(d is None for d in dims) and not _uses_axis(jaxpr, axis_data):
        outs = scan_p.bind(*args, reverse=reverse, length=length, jaxpr=jaxpr,
                           num_consts=num_consts, num_carry=num_carry, unroll=unroll)
        return list(outs), [None] * len(outs)
    num_ys = len(jaxpr.out_avals) - num_carry
    batched = [d is not None for d in dims]
    const_b, init_b, xs_b = split_list(batched, [num_consts, num_carry])
    carry_b = init_b
    for _ in range(1 + num_carry):
        jaxpr_b, out_b = batching.batch_jaxpr(jaxpr, axis_data, const_b + carry_b + xs_b,
                                              instantiate=carry_b + [False] * num_ys)
        if out_b[:num_carry] == carry_b:
            break
        carry_b = list(map(operator.or_, carry_b, out_b[:num_carry]))
    else:  # pragma: no cover
        raise AssertionError("scan batching: no fixpoint of the batched carries")
    consts, init, xs = split_list(args, [num_consts, num_carry])
    const_d, init_d, xs_d = split_list(dims, [num_consts, num_carry])
    size = axis_data.size
    new_consts = [batching.moveaxis(x, d, 0) if d is not None else x
                  for x, d in zip(consts, const_d)]
    new_init = [batching.bdim_at_front(x, d, size) if b else x
                for x, d, b in zip(init, init_d, carry_b)]
    new_xs = [batching.moveaxis(x, d, 1) if d is not None else x for x, d in zip(xs, xs_d)]
    outs = scan_p.bind(*new_consts, *new_init, *new_xs, reverse=reverse, length=length,
                       jaxpr=jaxpr_b, num_consts=num_consts, num_carry=num_carry, unroll=unroll)
    ys_b = out_b[num_carry:]
    return list(outs), [0 if b else None for b in carry_b] + [1 if b else None for b in ys_b]


batching.fancy_primitive_batchers[scan_p] = _scan_batch


# --- DCE -----------------------------------------------------------------------------------------
def _scan_dce(used_outputs: Sequence[bool], eqn: JaxprEqn
              ) -> tuple[list[bool], JaxprEqn | None]:
    if not any(used_outputs) and not has_side_effects(eqn.effects):
        return [False] * len(eqn.invars), None
    jaxpr: ClosedJaxpr = eqn.params["jaxpr"]
    num_consts, num_carry = eqn.params["num_consts"], eqn.params["num_carry"]
    num_xs = len(jaxpr.in_avals) - num_consts - num_carry
    used_carry, used_ys = split_list([bool(u) for u in used_outputs], [num_carry])
    for _ in range(1 + num_carry):
        new_jaxpr, used_in = pe.dce_closed_jaxpr(
            jaxpr, used_carry + used_ys,
            instantiate=[False] * num_consts + used_carry + [False] * num_xs)
        used_consts, used_carry_in, used_xs = split_list(used_in, [num_consts, num_carry])
        if used_carry_in == used_carry:
            break
        used_carry = list(map(operator.or_, used_carry, used_carry_in))
    else:  # pragma: no cover
        raise AssertionError("scan DCE: no fixpoint of the used carries")
    new_params = dict(eqn.params, jaxpr=new_jaxpr, num_consts=sum(used_consts),
                      num_carry=sum(used_carry))
    new_eqn = eqn.replace(
        invars=[v for v, u in zip(eqn.invars, used_in) if u],
        outvars=[v for v, u in zip(eqn.outvars, used_carry + used_ys) if u],
        params=new_params, effects=joined_effects([new_jaxpr]))
    return used_in, new_eqn


pe.dce_rules[scan_p] = _scan_dce
