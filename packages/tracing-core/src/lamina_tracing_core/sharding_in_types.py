"""Sharding rules: the sharding of an operation's result from its operands'
(JAX's sharding in types, over a mesh's Explicit axes).

A primitive's rule ``rule(*in_avals, **params) -> [TypeSharding | None, ...]``
is registered in ``sharding_rules`` beside the primitive (``register``). It
runs only when an operand's type carries a sharding; its results go into the
result types. A result the rule cannot make unambiguous (a contraction over
dimensions sharded on both sides, two operands split differently, one axis
splitting two dimensions) is a ``ShardingTypeError``; the tracing layer adds
the operands and the argument paths they come from.

A primitive without a rule keeps the result types its abstract evaluation
gives: those of a body's jaxpr for jit, control flow and shard_map, none for
the others (the compiler then lays them out; values are unaffected).

The generic rules here: ``elementwise`` (operands of one shape: per dimension
the operands' axes must agree, unsharded operands follow), ``same_as_first``,
``reduction`` (the reduced dimensions drop out), ``broadcast_in_dim``,
``transpose`` and ``dot_general``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.mesh import TypeSharding, types_sharded
from lamina_tracing_core.primitives import Primitive

__all__ = ["ShardingTypeError", "sharding_rules", "register", "apply_rule", "elementwise",
           "same_as_first", "reduction", "broadcast_in_dim", "transpose", "dot_general",
           "any_sharded", "user_spec", "spec_of", "TypeSharding", "types_sharded", "squeeze",
           "concatenate", "reshape",
           "keep_unchanged"]

Rule = Callable[..., list[TypeSharding | None]]
sharding_rules: dict[Primitive, Rule] = {}


class ShardingTypeError(TypeError):
    """An operation whose result sharding is ambiguous or illegal."""


def register(prim: Primitive, rule: Rule) -> None:
    sharding_rules[prim] = rule


def any_sharded(avals: Sequence[ShapedArray]) -> bool:
    return any(a.sharding is not None for a in avals)


def apply_rule(prim: Primitive, in_avals: Sequence[ShapedArray], out: Any,
               params: dict[str, Any]) -> Any:
    """``out`` (an aval or a list of them) with the shardings ``prim``'s rule
    gives; unchanged when no operand is sharded."""
    if not any_sharded(in_avals):
        return out
    rule = sharding_rules.get(prim)
    if rule is None:
        return out
    outs = list(out) if prim.multiple_results else [out]
    if rule in _RESULT_AWARE:
        shardings = rule(outs, *in_avals, **params)
    else:
        shardings = rule(*in_avals, **params)
    for s, aval in zip(shardings, outs):
        if s is not None:
            _check_legal(prim, s, aval)
    fixed = [aval.update(sharding=s) if s != aval.sharding else aval
             for s, aval in zip(shardings, outs)]
    return fixed if prim.multiple_results else fixed[0]


def _check_legal(prim: Primitive, s: TypeSharding, aval: ShapedArray) -> None:
    used = [a for axes in s.spec for a in axes]
    if len(set(used)) != len(used):
        shown = aval.update(sharding=s).str_long()
        raise ShardingTypeError(f"{prim.name} produces an illegally sharded result: {shown}")
    sizes = s.mesh.shape
    for d, axes in enumerate(s.spec):
        count = 1
        for a in axes:
            count *= sizes[a]
        if d < aval.ndim and aval.shape[d] % count:
            raise ShardingTypeError(
                f"{prim.name}: dimension {d} of the result ({aval.shape[d]}) is not divisible "
                f"by {count}, the size of the axes {axes} it would be split over")


def _mesh_of(avals: Sequence[ShapedArray]) -> Any:
    meshes = {a.sharding.mesh for a in avals if a.sharding is not None}
    if len(meshes) > 1:
        raise ShardingTypeError(f"operands are sharded over different meshes: "
                                f"{sorted(map(repr, meshes))}")
    return next(iter(meshes))


def spec_of(aval: ShapedArray) -> tuple[tuple[str, ...], ...]:
    """``aval``'s sharding spec with one entry per dimension (``()`` where
    unsplit, all ``()`` when it has no sharding)."""
    if aval.sharding is None:
        return ((),) * aval.ndim
    return aval.sharding.spec + ((),) * (aval.ndim - len(aval.sharding.spec))


def _make(mesh: Any, spec: Sequence[tuple[str, ...]]) -> TypeSharding | None:
    return TypeSharding(mesh, tuple(spec)) if any(spec) else None


def elementwise(name: str) -> Rule:
    """Operands of one shape (scalars broadcast): per dimension, the sharded
    operands must agree."""
    def rule(*avals: ShapedArray, **_: Any) -> list[TypeSharding | None]:
        mesh = _mesh_of(avals)
        ndim = max(a.ndim for a in avals)
        spec: list[tuple[str, ...]] = [()] * ndim
        for a in avals:
            if a.ndim != ndim:
                continue
            for d, axes in enumerate(spec_of(a)):
                if axes and spec[d] and axes != spec[d]:
                    raise ShardingTypeError(
                        f"{name} operation with inputs: "
                        f"{', '.join(x.str_long() for x in avals)} produces an illegally "
                        f"sharded result: dimension {d} is split over {spec[d]} in one operand "
                        f"and over {axes} in another")
                if axes:
                    spec[d] = axes
        return [_make(mesh, spec)]
    return rule


def same_as_first(*avals: ShapedArray, **_: Any) -> list[TypeSharding | None]:
    return [avals[0].sharding]


def reduction(*avals: ShapedArray, axes: Sequence[int], **_: Any) -> list[TypeSharding | None]:
    x = avals[0]
    if x.sharding is None:
        return [None]
    dropped = {int(a) % max(x.ndim, 1) for a in axes}
    return [_make(x.sharding.mesh, [s for d, s in enumerate(spec_of(x)) if d not in dropped])]


def broadcast_in_dim(*avals: ShapedArray, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], **_: Any) -> list[TypeSharding | None]:
    x = avals[0]
    if x.sharding is None:
        return [None]
    spec: list[tuple[str, ...]] = [()] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        if x.shape[src] == shape[dst]:
            spec[dst] = spec_of(x)[src]
    return [_make(x.sharding.mesh, spec)]


def transpose(*avals: ShapedArray, permutation: Sequence[int],
              **_: Any) -> list[TypeSharding | None]:
    x = avals[0]
    if x.sharding is None:
        return [None]
    spec = spec_of(x)
    return [_make(x.sharding.mesh, [spec[p] for p in permutation])]


def user_spec(sharding: Any, mesh: Any, ndim: int) -> TypeSharding | None:
    """A user's ``out_sharding`` (a ``PartitionSpec`` or a sharding with a
    ``spec``) as a type sharding over ``mesh``."""
    spec = getattr(sharding, "spec", sharding)
    dims = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in spec]
    dims += [()] * (ndim - len(dims))
    explicit = set(mesh.explicit_axes)
    return _make(mesh, [tuple(a for a in axes if a in explicit) for axes in dims])


def dot_general(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any,
                out_sharding: Any = None, **_: Any) -> list[TypeSharding | None]:
    """Batch dimensions (agreeing), then the free dimensions of each side; a
    contraction over dimensions sharded on both sides is ambiguous unless
    ``out_sharding`` says what the result is."""
    (lc, rc), (lb, rb) = dimension_numbers
    mesh = _mesh_of([lhs, rhs])
    if out_sharding is not None:
        ndim = len(lb) + lhs.ndim - len(lc) - len(lb) + rhs.ndim - len(rc) - len(rb)
        return [user_spec(out_sharding, mesh, ndim)]
    ls, rs = spec_of(lhs), spec_of(rhs)
    lc_spec = tuple(ls[d] for d in lc)
    rc_spec = tuple(rs[d] for d in rc)
    if any(a and b for a, b in zip(lc_spec, rc_spec)):
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be "
            "sharded. Please specify the output sharding via the `out_sharding` parameter "
            "(or reshard an operand). Got lhs_contracting_spec="
            f"{_spec_tuple(lc_spec)} and rhs_contracting_spec={_spec_tuple(rc_spec)}")
    batch = []
    for dl, dr in zip(lb, rb):
        if ls[dl] and rs[dr] and ls[dl] != rs[dr]:
            raise ShardingTypeError(
                f"dot_general batch dimensions are sharded differently: {ls[dl]} in the lhs "
                f"and {rs[dr]} in the rhs")
        batch.append(ls[dl] or rs[dr])
    free_l = [ls[d] for d in range(lhs.ndim) if d not in lc and d not in lb]
    free_r = [rs[d] for d in range(rhs.ndim) if d not in rc and d not in rb]
    return [_make(mesh, batch + free_l + free_r)]


def squeeze(x: ShapedArray, *, dimensions: Sequence[int], **_: Any
            ) -> list[TypeSharding | None]:
    if x.sharding is None:
        return [None]
    return [_make(x.sharding.mesh, [s for d, s in enumerate(spec_of(x)) if d not in dimensions])]


def concatenate(*avals: ShapedArray, dimension: int, **_: Any) -> list[TypeSharding | None]:
    """The operands' agreeing shardings; the joined dimension is not split."""
    mesh = _mesh_of(avals)
    ndim = avals[0].ndim
    spec: list[tuple[str, ...]] = [()] * ndim
    for a in avals:
        for d, axes in enumerate(spec_of(a)):
            if d == dimension or not axes:
                continue
            if spec[d] and axes != spec[d]:
                raise ShardingTypeError(
                    f"concatenate operands are split differently along dimension {d}: "
                    f"{spec[d]} and {axes}")
            spec[d] = axes
    return [_make(mesh, spec)]


def reshape(outs: list[ShapedArray], x: ShapedArray, *, sharding: Any = None,
            **_: Any) -> list[TypeSharding | None]:
    """A split dimension keeps its axes where it stays the major part of an
    output dimension of the same start (merging it as the major dimension or
    splitting it with its axes on the major part); otherwise ambiguous unless
    the reshape's ``sharding`` says what the result is."""
    if x.sharding is None:
        return [None]
    if sharding is not None:
        return [user_spec(sharding, x.sharding.mesh, outs[0].ndim)]
    out_shape = outs[0].shape
    sizes = x.sharding.mesh.shape
    spec: list[tuple[str, ...]] = [()] * len(out_shape)
    starts_out: dict[int, int] = {}
    prod = 1
    for j, n in enumerate(out_shape):
        starts_out.setdefault(prod, j)
        prod *= n
    prod = 1
    for d, (n, axes) in enumerate(zip(x.shape, spec_of(x))):
        if axes:
            count = 1
            for a in axes:
                count *= sizes[a]
            j = starts_out.get(prod, len(out_shape))
            while j < len(out_shape) and out_shape[j] == 1 and n != 1:
                j += 1
            if j >= len(out_shape) or out_shape[j] % count:
                raise ShardingTypeError(
                    f"reshape of {x.str_long()} to {list(out_shape)}: dimension {d}, split "
                    f"over {axes}, does not stay the major part of an output dimension "
                    f"divisible by {count}; reshard it first")
            spec[j] = axes
        prod *= n
    return [_make(x.sharding.mesh, spec)]


def keep_unchanged(outs: list[ShapedArray], x: ShapedArray, *_: ShapedArray,
                   **__: Any) -> list[TypeSharding | None]:
    """Slices, pads, reversals: dimensions that keep their size keep their
    axes; a resized dimension is not split in the result."""
    if x.sharding is None or outs[0].ndim != x.ndim:
        return [None]
    return [_make(x.sharding.mesh, [axes if n_in == n_out else ()
                                    for axes, n_in, n_out in zip(spec_of(x), x.shape,
                                                                 outs[0].shape)])]


#: Rules that also take the result types (first argument).
_RESULT_AWARE = {reshape, keep_unchanged}


def _spec_tuple(spec: Sequence[tuple[str, ...]]) -> tuple[Any, ...]:
    return tuple(None if not axes else axes[0] if len(axes) == 1 else axes for axes in spec)
