"""Rule builders shared by the lax primitives, and the AD/batching utilities
they are written with.

JVP rules (signature ``rule(primals, tangents, **params) -> (out, tangent)``):

- ``defjvp(prim, *fns)``: one function per argument, ``fn(g, *primals,
  **params)`` giving that argument's contribution (``None`` for an argument
  with no derivative); contributions are summed, symbolic zeros skipped.
- ``defjvp2(prim, *fns)``: the same with the primal output available,
  ``fn(g, ans, *primals, **params)``.
- ``defjvp_zero(prim)``: the output tangent is always a symbolic zero.
- ``deflinear(prim, transpose)``: ``prim`` is linear in all its arguments;
  ``transpose(ct, *invals, **params) -> list`` sees a non-zero cotangent.
- ``defbilinear(prim, lhs_rule, rhs_rule)``: bilinear (``mul``, ``dot_general``).

Batching rules (``rule(batched_args, batch_dims, **params) -> (out, dims)``,
``None`` marks an unbatched argument):

- ``defvectorized(prim)``: unary elementwise; the batch dim passes through.
- ``defbroadcasting(prim)``: n-ary elementwise with JAX's implicit
  broadcasting of rank-0 and size-1 operands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import (  # shared with the interpreters
    bdim_at_front,
    broadcast_batch,
    broadcast_in_dim,
    deflinear,
    deftranspose,
    instantiate_zeros,
    linear_jvp,
    moveaxis,
    reduce_sum,
    reshape,
    zero_cts,
    zero_from_primal,
)
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.ad_util import add_tangents
from lamina_tracing_core.lax import common
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core.symbolic import (
    Zero,
    is_undefined_primal,
    is_zero,
    tangent_aval,
)

__all__ = [
    "operand_origin",
    "Zero", "add_tangents", "batch_size", "bdim_at_front", "broadcast_batch", "broadcast_batcher",
    "ct_aval", "defbilinear", "defbroadcasting", "defjvp", "defjvp2", "defjvp_zero",
    "deflinear", "deftranspose", "defvectorized", "instantiate", "instantiate_zeros",
    "is_undefined_primal", "is_zero", "linear_jvp", "maybe_broadcast", "moveaxis",
    "unbroadcast", "vectorized_batcher", "zero_cts", "zero_from_primal",
]

#: ``instantiate(t)``: an actual array for a tangent that may be a symbolic zero.
instantiate = instantiate_zeros


# --- tangents -------------------------------------------------------------------
def ct_aval(x: Any) -> ShapedArray:
    """The aval of the cotangent of ``x`` (an UndefinedPrimal or a value)."""
    return x.aval if is_undefined_primal(x) else tangent_aval(get_aval(x))


# --- JVP rule builders ----------------------------------------------------------
JvpFn = Callable[..., Any] | None


def _sum_contributions(out: Any, contributions: list[Any]) -> Any:
    if not contributions:
        return zero_from_primal(out)
    out_shape = get_aval(out).shape
    acc = None
    for c in contributions:
        if get_aval(c).shape != out_shape:
            c = maybe_broadcast(out_shape, c)
        acc = c if acc is None else add_tangents(acc, c)
    return acc


def defjvp(prim: Primitive, *fns: JvpFn) -> None:
    """Per-argument JVP: ``fns[i](g, *primals, **params)`` is argument i's term."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        out = prim.bind(*primals, **params)
        terms = [fn(t, *primals, **params) for fn, t in zip(fns, tangents)
                 if fn is not None and type(t) is not Zero]
        return out, _sum_contributions(out, [t for t in terms if t is not None])

    jvp_rules[prim] = rule


def defjvp2(prim: Primitive, *fns: JvpFn) -> None:
    """Like ``defjvp``, with the primal output: ``fn(g, ans, *primals, **params)``."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        out = prim.bind(*primals, **params)
        terms = [fn(t, out, *primals, **params) for fn, t in zip(fns, tangents)
                 if fn is not None and type(t) is not Zero]
        return out, _sum_contributions(out, [t for t in terms if t is not None])

    jvp_rules[prim] = rule


def defjvp_zero(prim: Primitive) -> None:
    """The output does not depend differentiably on any input."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [zero_from_primal(o) for o in out]
        return out, zero_from_primal(out)

    jvp_rules[prim] = rule


def defbilinear(prim: Primitive, lhs_rule: Callable[..., Any],
                rhs_rule: Callable[..., Any]) -> None:
    """``prim(x, y)`` is linear in each argument separately.

    ``lhs_rule(ct, x, y, **params)`` is the cotangent of ``x`` (an
    UndefinedPrimal) given the known ``y``; ``rhs_rule`` likewise for ``y``.
    """

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        x, y = primals
        xdot, ydot = tangents
        out = prim.bind(x, y, **params)
        terms = []
        if type(xdot) is not Zero:
            terms.append(prim.bind(xdot, y, **params))
        if type(ydot) is not Zero:
            terms.append(prim.bind(x, ydot, **params))
        return out, _sum_contributions(out, terms)

    def transpose_rule(ct: Any, x: Any, y: Any, **params: Any) -> list[Any]:
        x_undef, y_undef = is_undefined_primal(x), is_undefined_primal(y)
        if x_undef and y_undef:
            raise ValueError(f"{prim.name} is bilinear, not linear: it cannot be transposed "
                             "with respect to both arguments at once")
        if type(ct) is Zero:
            return zero_cts((x, y))
        if x_undef:
            return [lhs_rule(ct, x, y, **params), None]
        return [None, rhs_rule(ct, x, y, **params)]

    jvp_rules[prim] = jvp
    transpose_rules[prim] = transpose_rule


# --- broadcasting utilities ----------------------------------------------------
def unbroadcast(aval: ShapedArray, x: Any) -> Any:
    """Sums ``x`` down to ``aval``'s shape, undoing implicit broadcasting of a
    rank-0 or size-1 operand (the transpose of elementwise broadcasting)."""
    x_shape = get_aval(x).shape
    if x_shape == aval.shape:
        return x
    if not aval.shape:
        return reduce_sum(x, tuple(range(len(x_shape))))
    dims = tuple(i for i, (a, b) in enumerate(zip(x_shape, aval.shape)) if a != b)
    if dims:
        x = reduce_sum(x, dims)
    return reshape(x, aval.shape)


def maybe_broadcast(shape: common.Shape, x: Any) -> Any:
    """``x`` broadcast to ``shape`` when it is a rank-0 or size-1 operand."""
    x_shape = get_aval(x).shape
    if x_shape == shape:
        return x
    if not x_shape:
        return broadcast_in_dim(x, shape, ())
    keep = tuple(i for i, (a, b) in enumerate(zip(x_shape, shape)) if a == b)
    if len(keep) != len(x_shape):
        x = reshape(x, tuple(x_shape[i] for i in keep))
    return broadcast_in_dim(x, shape, keep)


# --- batching utilities ---------------------------------------------------------
def batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The size of the batch axis, read off the first batched argument."""
    for x, d in zip(args, dims):
        if d is not None:
            return get_aval(x).shape[d]
    raise ValueError("batching rule called without any batched argument")


def vectorized_batcher(prim: Primitive, args: Sequence[Any], dims: Sequence[int | None],
                       **params: Any) -> tuple[Any, Any]:
    (x,), (d,) = args, dims
    out = prim.bind(x, **params)
    return out, ([d] * len(out) if prim.multiple_results else d)


def defvectorized(prim: Primitive) -> None:
    """Batching of a unary elementwise primitive: the batch dim passes through."""

    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> Any:
        return vectorized_batcher(prim, args, dims, **params)

    batching_rules[prim] = rule


def broadcast_batcher(prim: Primitive, args: Sequence[Any], dims: Sequence[int | None],
                      **params: Any) -> tuple[Any, Any]:
    """Batching of an n-ary elementwise primitive with implicit broadcasting."""
    shapes = [get_aval(x).shape for x in args]
    ref_shape: common.Shape = ()
    ref_dim: int | None = None
    for s, d in zip(shapes, dims):
        if d is not None:
            ref_shape, ref_dim = s, d
            break
    if all(s == ref_shape and d == ref_dim for s, d in zip(shapes, dims) if s):
        # Only agreeing batch dims and scalars: the primitive broadcasts itself.
        out = prim.bind(*args, **params)
        return out, ([ref_dim] * len(out) if prim.multiple_results else ref_dim)
    # Otherwise batch dims go first; an unbatched operand gets a size-1 leading
    # axis and relies on the primitive's degenerate broadcasting.
    moved = [x if not s else bdim_at_front(x, d, 1) for x, s, d in zip(args, shapes, dims)]
    ndim = max(len(get_aval(x).shape) for x in moved)
    final = []
    for x, d in zip(moved, dims):
        x_nd = len(get_aval(x).shape)
        if d is not None and x_nd != ndim:
            # trailing size-1 dims (an expand_dims)
            x = broadcast_in_dim(x, get_aval(x).shape + (1,) * (ndim - x_nd), tuple(range(x_nd)))
        final.append(x)
    out = prim.bind(*final, **params)
    return out, ([0] * len(out) if prim.multiple_results else 0)


def defbroadcasting(prim: Primitive) -> None:
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> Any:
        return broadcast_batcher(prim, args, dims, **params)

    batching_rules[prim] = rule


def operand_origin(*values: Any) -> str:
    """For an error about ``values``: ``" (traced operand: float32[3,4] (from
    params['w']) while tracing f at a.py:3 for jit)"``, naming the traced
    function's arguments they come from; empty outside tracing."""
    described = pe.describe_staged_operands(values)
    noun = "operands" if len(values) > 1 else "operand"
    return f" (traced {noun}: {described})" if described else ""
