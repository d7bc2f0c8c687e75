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

from lamina_tracing_core import ad, ad_util
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.lax import common
from lamina_tracing_core.lax.common import typeof
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules

Zero = ad_util.Zero
not_mapped = None


# --- tangents -------------------------------------------------------------------
def is_zero(t: Any) -> bool:
    return type(t) is Zero


def zero_from_primal(x: Any) -> Any:
    """The symbolic zero tangent of the primal value ``x``."""
    return Zero(ad_util.tangent_aval(typeof(x)))


def instantiate(t: Any) -> Any:
    """An actual array for a tangent that may be a symbolic zero."""
    if type(t) is Zero:
        return ad_util.zeros_like_aval(t.aval)
    return t


def add_tangents(a: Any, b: Any) -> Any:
    return ad_util.add_tangents(a, b)


def is_undefined_primal(x: Any) -> bool:
    return bool(ad.is_undefined_primal(x))


def ct_aval(x: Any) -> ShapedArray:
    """The aval of the cotangent of ``x`` (an UndefinedPrimal or a value)."""
    return x.aval if is_undefined_primal(x) else ad_util.tangent_aval(typeof(x))


def zero_cts(invals: Sequence[Any]) -> list[Any]:
    """The transpose result for a zero cotangent: zeros for linear inputs."""
    return [Zero(x.aval) if is_undefined_primal(x) else None for x in invals]


# --- JVP rule builders ----------------------------------------------------------
JvpFn = Callable[..., Any] | None


def _sum_contributions(out: Any, contributions: list[Any]) -> Any:
    if not contributions:
        return zero_from_primal(out)
    out_shape = typeof(out).shape
    acc = None
    for c in contributions:
        if typeof(c).shape != out_shape:
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


def linear_jvp(prim: Primitive, primals: Sequence[Any], tangents: Sequence[Any],
               **params: Any) -> Any:
    """The JVP of a primitive linear in all arguments: apply it to the tangents."""
    out = prim.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        if prim.multiple_results:
            return out, [zero_from_primal(o) for o in out]
        return out, zero_from_primal(out)
    return out, prim.bind(*[instantiate(t) for t in tangents], **params)


def deflinear(prim: Primitive, transpose: Callable[..., list[Any]]) -> None:
    """``prim`` is linear in every argument; ``transpose(ct, *invals, **params)``
    sees only non-zero cotangents (zeros are handled here)."""

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        return linear_jvp(prim, primals, tangents, **params)

    def transpose_rule(ct: Any, *invals: Any, **params: Any) -> list[Any]:
        if type(ct) is Zero or (prim.multiple_results and all(type(c) is Zero for c in ct)):
            return zero_cts(invals)
        return transpose(ct, *invals, **params)

    jvp_rules[prim] = jvp
    transpose_rules[prim] = transpose_rule


def deftranspose(prim: Primitive, transpose: Callable[..., list[Any]]) -> None:
    """Registers a transpose rule that only sees non-zero cotangents."""

    def transpose_rule(ct: Any, *invals: Any, **params: Any) -> list[Any]:
        if type(ct) is Zero or (prim.multiple_results and all(type(c) is Zero for c in ct)):
            return zero_cts(invals)
        return transpose(ct, *invals, **params)

    transpose_rules[prim] = transpose_rule


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
    from lamina_tracing_core.lax import reductions, structural
    x_shape = typeof(x).shape
    if x_shape == aval.shape:
        return x
    if not aval.shape:
        return reductions.reduce_sum(x, tuple(range(len(x_shape))))
    dims = tuple(i for i, (a, b) in enumerate(zip(x_shape, aval.shape)) if a != b)
    if dims:
        x = reductions.reduce_sum(x, dims)
    return structural.reshape(x, aval.shape)


def maybe_broadcast(shape: common.Shape, x: Any) -> Any:
    """``x`` broadcast to ``shape`` when it is a rank-0 or size-1 operand."""
    from lamina_tracing_core.lax import structural
    x_shape = typeof(x).shape
    if x_shape == shape:
        return x
    if not x_shape:
        return structural.broadcast_in_dim(x, shape, ())
    keep = tuple(i for i, (a, b) in enumerate(zip(x_shape, shape)) if a == b)
    if len(keep) != len(x_shape):
        x = structural.reshape(x, tuple(x_shape[i] for i in keep))
    return structural.broadcast_in_dim(x, shape, keep)


# --- batching utilities ---------------------------------------------------------
def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to position ``dst``."""
    from lamina_tracing_core.lax import structural
    if src == dst:
        return x
    ndim = len(typeof(x).shape)
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return structural.transpose(x, tuple(perm))


def broadcast_batch(x: Any, size: int, axis: int) -> Any:
    """An unbatched ``x`` given a batch axis of ``size`` at ``axis``."""
    from lamina_tracing_core.lax import structural
    shape = list(typeof(x).shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return structural.broadcast_in_dim(x, tuple(shape), dims)


def bdim_at_front(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` with its batch dim first (broadcast to ``size`` when unbatched)."""
    if bdim is None:
        return broadcast_batch(x, size, 0)
    return moveaxis(x, bdim, 0)


def batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    """The size of the batch axis, read off the first batched argument."""
    for x, d in zip(args, dims):
        if d is not None:
            return typeof(x).shape[d]
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
    shapes = [typeof(x).shape for x in args]
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
    ndim = max(len(typeof(x).shape) for x in moved)
    final = []
    from lamina_tracing_core.lax import structural
    for x, d in zip(moved, dims):
        x_nd = len(typeof(x).shape)
        if d is not None and x_nd != ndim:
            x = structural.expand_dims(x, tuple(range(x_nd, ndim)))
        final.append(x)
    out = prim.bind(*final, **params)
    return out, ([0] * len(out) if prim.multiple_results else 0)


def defbroadcasting(prim: Primitive) -> None:
    def rule(args: Sequence[Any], dims: Sequence[int | None], **params: Any) -> Any:
        return broadcast_batcher(prim, args, dims, **params)

    batching_rules[prim] = rule
