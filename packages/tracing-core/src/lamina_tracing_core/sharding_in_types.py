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
``given_or_first``, ``reduction`` (the reduced dimensions drop out),
``broadcast_in_dim``, ``transpose``, ``dot_general``, ``squeeze``,
``concatenate``, ``reshape`` and ``varying_out_shape`` (slices and pads); the
rules of single primitives live beside them. Messages are JAX 0.10.2's.

Where JAX compares an operand that is replicated over the mesh with a
sharded one (``concatenate``, ``select_n``, ``sort``), lamina lets the
unsharded operand through: its type carries no sharding, so it cannot be
told from a constant, which JAX lets through.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.mesh import TypeSharding, partition, types_sharded
from lamina_tracing_core.primitives import Primitive

__all__ = ["ShardingTypeError", "sharding_rules", "register", "apply_rule", "elementwise",
           "same_as_first", "reduction", "broadcast_in_dim", "transpose", "dot_general",
           "any_sharded", "user_spec", "spec_of", "TypeSharding", "types_sharded", "squeeze",
           "concatenate", "reshape", "varying_out_shape", "given_or_first", "split_count",
           "check_divisible",
           "partition", "partitions", "sharding_repr"]

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
            _check_legal(prim, s, aval, in_avals)
    fixed = [aval.update(sharding=s) if s != aval.sharding else aval
             for s, aval in zip(shardings, outs)]
    return fixed if prim.multiple_results else fixed[0]


def _check_legal(prim: Primitive, s: TypeSharding, aval: ShapedArray,
                 in_avals: Sequence[ShapedArray]) -> None:
    """A result splits each mesh axis at most once (a ``ShardingTypeError``
    naming the operands, as JAX's) and each dimension evenly (a ``ValueError``,
    JAX's message for a sharding that does not fit its shape)."""
    used = [a for axes in s.spec for a in axes]
    if len(set(used)) != len(used):
        if prim.multiple_results:
            # JAX lets its DuplicateSpecError through for these
            dup = next(a for a in used if used.count(a) > 1)
            raise ShardingTypeError(
                "A single NamedSharding spec specification can map every mesh axis to at "
                f"most one positional dimension, but {s.partition_spec_str()} has duplicate "
                f"entries for `{dup}`")
        ins = ", ".join(a.str_short() for a in in_avals)
        raise ShardingTypeError(
            f"{prim.name} operation with inputs: {ins} produces an illegally sharded "
            f"result: {aval.update(sharding=s).str_short()}")
    check_divisible(s.mesh, s.spec, aval.shape, repr(s))


def check_divisible(mesh: Any, spec: Sequence[Sequence[str]], shape: tuple[int, ...],
                    shown: str, where: str = "") -> None:
    """Each dimension of ``shape`` split evenly by its axes in ``spec``, else
    JAX's ``ValueError`` (``shown``: the sharding as the message prints it;
    ``where``: what the sharding belongs to)."""
    for d, axes in enumerate(spec[:len(shape)]):
        count = split_count(mesh, axes)
        if shape[d] % count:
            raise ValueError(
                f"Sharding spec {tuple(axes)} implies that array axis {d} is partitioned "
                f"{count} times, but does not evenly divide the dimension size {shape[d]}. Got "
                f"shape: {shape} and sharding {shown}{where}")


def split_count(mesh: Any, axes: Sequence[str]) -> int:
    """How many pieces the mesh ``axes`` split a dimension into."""
    count = 1
    for a in axes:
        count *= mesh.shape[a]
    return count


def partitions(aval: ShapedArray) -> tuple[Any, ...]:
    """``aval``'s ``PartitionSpec`` entries, one per dimension (JAX's
    ``spec.partitions``, which its messages print)."""
    return tuple(partition(axes) for axes in spec_of(aval))


def sharding_repr(aval: ShapedArray, mesh: Any) -> str:
    """``aval``'s sharding as JAX prints it, replicated over ``mesh`` when its
    type carries none."""
    s = aval.sharding if aval.sharding is not None else TypeSharding(mesh, spec_of(aval))
    return repr(s)


def _mesh_of(avals: Sequence[ShapedArray]) -> Any:
    meshes = [a.sharding.mesh for a in avals if a.sharding is not None]
    for m in meshes[1:]:
        if m != meshes[0]:
            raise ShardingTypeError(f"Mesh for all inputs should be equal. Got one mesh: "
                                    f"{meshes[0]} and another mesh: {m}")
    return meshes[0]


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
    operands must agree; an unsharded operand follows the others."""
    def rule(*avals: ShapedArray, **_: Any) -> list[TypeSharding | None]:
        mesh = _mesh_of(avals)
        ndim = max(a.ndim for a in avals)
        spec: list[tuple[str, ...]] = [()] * ndim
        for a in avals:
            if a.ndim != ndim:
                continue
            for d, axes in enumerate(spec_of(a)):
                if axes and spec[d] and axes != spec[d]:
                    shown = ", ".join(str(partitions(x)) for x in avals if x.ndim)
                    raise ShardingTypeError(
                        f"{name} got incompatible shardings for broadcasting: {shown}.")
                if axes:
                    spec[d] = axes
        return [_make(mesh, spec)]
    return rule


def same_as_first(*avals: ShapedArray, **_: Any) -> list[TypeSharding | None]:
    return [avals[0].sharding]


def given_or_first(*avals: ShapedArray, sharding: Any = None,
                   **_: Any) -> list[TypeSharding | None]:
    """The ``sharding`` parameter when set, else the first operand's."""
    if sharding is not None:
        return [user_spec(sharding, _mesh_of(avals), avals[0].ndim)]
    return [avals[0].sharding]


def reduction(*avals: ShapedArray, axes: Sequence[int], **_: Any) -> list[TypeSharding | None]:
    x = avals[0]
    if x.sharding is None:
        return [None]
    dropped = {int(a) % max(x.ndim, 1) for a in axes}
    return [_make(x.sharding.mesh, [s for d, s in enumerate(spec_of(x)) if d not in dropped])]


def broadcast_in_dim(*avals: ShapedArray, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], sharding: Any = None,
                     **_: Any) -> list[TypeSharding | None]:
    """The ``sharding`` parameter when set; else each operand dimension keeps
    its axes where it lands, the new dimensions are not split."""
    x = avals[0]
    if sharding is not None:
        return [user_spec(sharding, _mesh_of(avals), len(shape))]
    if x.sharding is None:
        return [None]
    spec: list[tuple[str, ...]] = [()] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
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
    ``spec``) as a type sharding over ``mesh``; None for a sharding without
    a spec (a single device's), which leaves the type unsplit as in JAX."""
    if isinstance(sharding, TypeSharding):
        return sharding if any(sharding.spec) else None
    spec = getattr(sharding, "spec", sharding)
    if not isinstance(spec, tuple):
        return None
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
    _agree([ls[d] for d in lb], [rs[d] for d in rb],
           "dot_general requires lhs batch dimensions and rhs batch dimensions to have "
           "the consistent sharding")
    lc_spec, rc_spec = [ls[d] for d in lc], [rs[d] for d in rc]
    _agree(lc_spec, rc_spec,
           "dot_general requires contracting dimensions to have consistent sharding")
    if any(a and b for a, b in zip(lc_spec, rc_spec)):
        raise ShardingTypeError(
            "Contracting dimensions are sharded and it is ambiguous how the output should be "
            "sharded. Please specify the output sharding via the `out_sharding` parameter. "
            f"Got lhs_contracting_spec={_spec_tuple(lc_spec)} and "
            f"rhs_contracting_spec={_spec_tuple(rc_spec)}")
    # JAX takes the batch dimensions' axes from the lhs alone
    batch = [ls[d] for d in lb]
    free_l = [ls[d] for d in range(lhs.ndim) if d not in lc and d not in lb]
    free_r = [rs[d] for d in range(rhs.ndim) if d not in rc and d not in rb]
    return [_make(mesh, batch + free_l + free_r)]


def _agree(left: Sequence[tuple[str, ...]], right: Sequence[tuple[str, ...]],
           what: str) -> None:
    """Paired dimensions split on both sides must be split alike."""
    if any(a and b and a != b for a, b in zip(left, right)):
        raise ShardingTypeError(f"{what}, got {_spec_tuple(left)} and {_spec_tuple(right)}.")


def squeeze(x: ShapedArray, *, dimensions: Sequence[int], **_: Any
            ) -> list[TypeSharding | None]:
    if x.sharding is None:
        return [None]
    return [_make(x.sharding.mesh, [s for d, s in enumerate(spec_of(x)) if d not in dimensions])]


def concatenate(*avals: ShapedArray, **_: Any) -> list[TypeSharding | None]:
    """The sharded operands' common sharding, the joined dimension included.

    An operand whose type carries no sharding is let through: lamina cannot
    tell a replicated array on the mesh (which JAX refuses here) from a
    constant (which JAX accepts)."""
    sharded = [a.sharding for a in avals if a.sharding is not None]
    if any(s != sharded[0] for s in sharded):
        mesh = _mesh_of(avals)
        shown = ", ".join(sharding_repr(a, mesh) for a in avals)
        raise ShardingTypeError(
            f"All operands should have the same sharding. Got shardings {shown}")
    return [sharded[0] if sharded else None]


def varying_out_shape(name: str) -> Rule:
    """Slices and pads: the operand's sharding, provided each resized split
    dimension still divides evenly (JAX does not move data between shards
    here; ``name`` is the word its message uses)."""
    def rule(outs: list[ShapedArray], x: ShapedArray, *_: ShapedArray,
             **__: Any) -> list[TypeSharding | None]:
        if x.sharding is None:
            return [None]
        out_shape = outs[0].shape
        for n_in, n_out, axes in zip(x.shape, out_shape, spec_of(x)):
            count = split_count(x.sharding.mesh, axes)
            if n_in != n_out and axes and n_out % count:
                raise ShardingTypeError(
                    f"{name} on sharded dims where out dim ({n_out}) is not divisible by "
                    f"mesh axes ({count}) with spec ({partition(axes)}) is not implemented. "
                    f"Got input type={x.str_short()} and output shape={out_shape}")
        return [x.sharding]
    _RESULT_AWARE.add(rule)
    return rule


def reshape(x: ShapedArray, *, new_sizes: Sequence[int], dimensions: Sequence[int] | None,
            sharding: Any = None, **_: Any) -> list[TypeSharding | None]:
    """JAX's reshape rule. The ``sharding`` parameter when set; else, when
    only unit dimensions come or go, the other dimensions keep their axes in
    order; when one dimension is split into several (or several merged into
    one), its axes are dealt out major-first over the pieces, each piece
    taking whole axes that divide it. Anything else, or a split/merged
    dimension that is sharded under a transposing ``dimensions``, is a
    ``ShardingTypeError`` asking for ``out_sharding``."""
    if x.sharding is None:
        return [None]
    mesh, spec, new = x.sharding.mesh, spec_of(x), tuple(new_sizes)
    if sharding is not None:
        return [user_spec(sharding, mesh, len(new))]
    try:
        if [n for n in x.shape if n != 1] == [n for n in new if n != 1]:
            kept = iter(axes for n, axes in zip(x.shape, spec) if n != 1)
            return [_make(mesh, [() if n == 1 else next(kept) for n in new])]
        split = _one_dim_regrouped(x.shape, new)
        if split is not None:
            return [_make(mesh, _split_spec(mesh, spec, split, dimensions))]
        merge = _one_dim_regrouped(new, x.shape)
        if merge is not None:
            return [_make(mesh, _merge_spec(mesh, spec, merge, dimensions))]
    except _Unsupported:
        pass
    raise ShardingTypeError(
        "This reshape is not supported. Please specify the sharding of the output via the "
        "`out_sharding` argument of jax.lax.reshape. Got operand type: "
        f"{x}, new sizes: {new}")


class _Unsupported(Exception):
    """A reshape whose result sharding JAX does not derive."""


def _one_dim_regrouped(src: tuple[int, ...], dst: tuple[int, ...]
                       ) -> list[int | list[int]] | None:
    """How ``dst`` (of more dimensions) splits exactly one dimension of
    ``src``: per dimension of ``src``, its size where it carries over whole,
    or the run of ``dst`` sizes it becomes. None when ``dst`` is not made
    that way; ``_Unsupported`` when two dimensions would be split. Common
    trailing unit dimensions are set aside first, and a run takes the unit
    dimensions that follow it (JAX's matching, kept so results agree)."""
    if len(dst) <= len(src):
        return None
    trailing = 0
    while trailing < len(src) and src[-1 - trailing] == 1 and dst[-1 - trailing] == 1:
        trailing += 1
    src, dst = src[:len(src) - trailing], dst[:len(dst) - trailing]
    groups: list[int | list[int]] = []
    i = j = 0
    while j < len(dst):
        if i >= len(src):
            raise _Unsupported
        if src[i] == dst[j]:
            groups.append(src[i])
        elif any(isinstance(g, list) for g in groups):
            raise _Unsupported
        else:
            run, j = _run_for(src, dst, i, j)
            if run is None:
                return None
            groups.append(run)
        i += 1
        j += 1
    if len(groups) != len(src):
        raise _Unsupported
    return groups + [1] * trailing


def _run_for(src: tuple[int, ...], dst: tuple[int, ...], i: int, j: int
             ) -> tuple[list[int] | None, int]:
    """The run of ``dst`` sizes from ``j`` whose product is ``src[i]`` (and
    the index of its last element); None when the sizes overshoot or end."""
    run = [dst[j]]
    while math.prod(run) != src[i] or (j + 1 < len(dst) and dst[j + 1] == 1):
        if math.prod(run) > src[i]:
            return None, j
        if math.prod(run) == src[i] and i + 1 < len(src) and dst[j + 1] == src[i + 1]:
            break
        j += 1
        if j >= len(dst):
            return None, j
        run.append(dst[j])
    return run, j


def _deal(mesh: Any, axes: Sequence[str], sizes: Sequence[int]) -> list[tuple[str, ...]]:
    """``axes`` dealt out in order over dimensions of ``sizes``: each takes
    axes while it is still split further, each axis dividing what is left."""
    pending = list(axes)
    out = []
    for size in sizes:
        taken: list[str] = []
        while size > 1 and pending:
            size, rest = divmod(size, mesh.shape[pending[0]])
            if rest:
                raise _Unsupported
            taken.append(pending.pop(0))
        out.append(tuple(taken))
    if pending:
        raise _Unsupported
    return out


def _split_spec(mesh: Any, spec: Sequence[tuple[str, ...]], groups: list[int | list[int]],
                dimensions: Sequence[int] | None) -> list[tuple[str, ...]]:
    """Result axes for a reshape splitting the one dimension that ``groups``
    lists as a run."""
    out: list[tuple[str, ...]] = []
    for group, axes in zip(groups, spec):
        if not isinstance(group, list):
            out.append(axes)
        elif not axes:
            out.extend([()] * len(group))
        elif dimensions is None:
            out.extend(_deal(mesh, axes, group))
        else:
            raise _Unsupported
    return out


def _merge_spec(mesh: Any, spec: Sequence[tuple[str, ...]], groups: list[int | list[int]],
                dimensions: Sequence[int] | None) -> list[tuple[str, ...]]:
    """Result axes for a reshape merging the operand dimensions that
    ``groups`` (one entry per result dimension) lists as a run."""
    pending = iter(spec)
    out: list[tuple[str, ...]] = []
    for group in groups:
        if not isinstance(group, list):
            out.append(next(pending))
            continue
        merged = [next(pending) for _ in group]
        if not any(merged):
            out.append(())
            continue
        # the merged dimensions' axes, major first, up to the last split one:
        # an unsplit dimension before a split one cannot be expressed
        while not merged[-1]:
            merged.pop()
        if dimensions is not None or not all(merged):
            raise _Unsupported
        out.extend(_deal(mesh, [a for axes in merged for a in axes], [math.prod(group)]))
    return out


#: Rules that also take the result types (first argument).
_RESULT_AWARE: set[Rule] = set()


def _spec_tuple(spec: Sequence[tuple[str, ...]]) -> tuple[Any, ...]:
    return tuple(partition(axes) for axes in spec)
