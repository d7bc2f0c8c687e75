"""``shard_map``: write the per-device program of a mesh by hand.

``shard_map(f, mesh=mesh, in_specs=P('x'), out_specs=P('x'))(xs)`` runs ``f``
once per device along the mesh's manual axes (``axis_names``, default all) on
that device's block of each argument (the argument cut along the dimensions
its ``PartitionSpec`` names), and assembles the results from the per-device
blocks by ``out_specs``. Inside ``f``, collectives (``psum``, ``all_gather``,
``ppermute``, ``axis_index``...) communicate over the manual axes.

The body is traced at once (initial style) on block types with the manual
axes bound, into a ``shard_map_p`` equation (tracing-core) whose jaxpr names
its arguments and results as the user wrote them. Under ``jit`` it lowers to
a manual computation (mlir-lowering); called eagerly, it runs as a ``jit`` of
that one equation with the outputs laid out as ``out_specs`` says. Traces are
cached per function, argument structure, block types and specs.

Errors name the function, the argument (``args[1]``, ``x['w']``) or result
path, and the axis: a spec longer than the argument's rank, an axis not in the
mesh or not manual, a dimension the axes' sizes do not divide, a collective
over an axis that is not manual, an ``out_specs`` entry claiming a replication
the body does not give (``check_vma``).
"""

from __future__ import annotations

import functools
import threading
import math
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from lamina_interpreters_pxla.sharding import Mesh, NamedSharding, PartitionSpec
from lamina_interpreters_pxla.sharding import get_current_mesh
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_mlir_lowering import UNSPECIFIED
from lamina_tracing_core import core, dtypes, trace_settings
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import BodyTrace, retrace, trace_body
from lamina_tracing_core.errors import UnboundAxisNameError
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprDebugInfo
from lamina_tracing_core.lax import collectives as lax_collectives
from lamina_tracing_core.mesh import (AbstractMesh, AxisType, get_abstract_mesh, partition,
                                     type_sharding)
from lamina_tracing_core.shard_map import (
    Spec,
    block_aval,
    check_replication,
    manual_axes_bound,
    shard_map_p,
)

from lamina_sharded_jit.jaxpr_cache import memoize_on_jaxpr
from lamina_sharded_jit.primitive import pjit_p

__all__ = ["shard_map", "smap", "ShardMapError"]


class ShardMapError(ValueError):
    """A ``shard_map`` whose specs do not fit its mesh or its arguments."""


def shard_map(f: Callable[..., Any] | None = None, /, *, out_specs: Any, in_specs: Any = None,
              mesh: Any = None, axis_names: Any = frozenset(), check_vma: bool = True) -> Any:
    """``f`` mapped over the blocks of its arguments, one call per device along
    the manual axes of ``mesh``.

    Args:
      f: the per-device function (block arguments, block results).
      out_specs: a ``PartitionSpec`` per result (a tree prefix of the results):
        which mesh axes each result dimension is assembled along; a manual
        axis it does not name means the result is the same on every device
        along it (checked when ``check_vma``).
      in_specs: a ``PartitionSpec`` per positional argument (a tree prefix of
        the arguments): which mesh axes each argument dimension is split over.
      mesh: the ``Mesh`` (default: the one of ``set_mesh`` / ``with mesh:``, or of
        the enclosing body), or an ``AbstractMesh``: the context mesh
        (``get_abstract_mesh()``) it names.
      axis_names: the manual axes (default: all of the mesh's); the others
        stay automatic, partitioned by the compiler.
      check_vma: check that results claimed replicated do not vary over the
        axes their ``out_specs`` leave out.

    Usable as a decorator factory: ``@partial(shard_map, mesh=m, ...)`` or
    ``shard_map(mesh=m, in_specs=..., out_specs=...)(f)``.
    """
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma)
    api_util.check_callable(f)
    mapped = _ShardMapped(f, mesh, in_specs, out_specs, axis_names, bool(check_vma))

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return mapped(*args, **kwargs)

    return wrapper


#: ``smap``'s default ``in_axes``: read them from the arguments' types.
_INFER: Any = object()


def smap(f: Callable[..., Any] | None = None, /, *, in_axes: Any = _INFER, out_axes: Any,
         axis_name: Any) -> Any:
    """``shard_map`` over the one mesh axis ``axis_name`` of the current mesh
    (``set_mesh``), with ``vmap``-style axes: ``in_axes`` (an int, None, or a
    tuple with one entry per positional argument; omitted, the arguments'
    types give them when the axis is Explicit) and ``out_axes`` say which
    dimension of each argument and result is split over the axis."""
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes,
                                 axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name should be a `str` or a `Hashable`, but got "
                        f"{axis_name}")
    if in_axes is not _INFER and in_axes is not None and not isinstance(in_axes, (int, tuple)):
        raise TypeError(f"smap in_axes must be an int, None, or a tuple of entries "
                        f"corresponding to the positional arguments passed to the function, "
                        f"but got {in_axes}.")
    if in_axes is not _INFER and not all(isinstance(leaf, int)
                                         for leaf in tu.tree_leaves(in_axes)):
        raise TypeError(f"smap in_axes must be an int, None, or (nested) container with "
                        f"those types as leaves, but got {in_axes}.")
    if not all(isinstance(leaf, int) for leaf in tu.tree_leaves(out_axes)):
        raise TypeError(f"smap out_axes must be an int, None, or (nested) container with "
                        f"those types as leaves, but got {out_axes}.")

    def to_spec(axis: int | None) -> PartitionSpec:
        return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)

    def specs(axes: Any) -> Any:
        return tu.tree_map(to_spec, axes, is_leaf=lambda x: x is None)

    in_specs = None if in_axes is _INFER else specs(in_axes)
    out_specs = specs(out_axes)
    return shard_map(f, mesh=None, in_specs=in_specs, out_specs=out_specs,
                     axis_names=frozenset({axis_name}), check_vma=True)


class _ShardMapped:
    def __init__(self, f: Callable[..., Any], mesh: Any, in_specs: Any, out_specs: Any,
                 axis_names: Any, check_vma: bool):
        self.f = f
        self.name = api_util.fun_name(f)
        self.mesh = mesh
        self.in_specs = in_specs
        self.out_specs = out_specs
        self.axis_names = frozenset(axis_names) if not isinstance(axis_names, str) \
            else frozenset((axis_names,))
        self.check_vma = check_vma

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"shard_map({self.name}) takes its arguments positionally (their "
                            f"in_specs are positional), got keyword arguments "
                            f"{sorted(kwargs)}")
        mesh = _resolve_mesh(self.mesh, self.name)
        if self.mesh is not None:
            _check_context_mesh(self.mesh, mesh)
        manual = _manual_axes(mesh, self.axis_names, self.name)
        dbg = api_util.debug_info("shard_map", self.f, args, {})
        flat_args, in_tree = tu.tree_flatten(args)
        names = tuple(dbg.arg_names)
        avals = [get_aval(x) for x in flat_args]
        explicit = _all_explicit(mesh, manual)
        if self.in_specs is None:
            if not explicit:
                raise TypeError(f"shard_map({self.name}): in_specs is required (a "
                                f"PartitionSpec per argument) unless every manual axis is "
                                f"Explicit, when the arguments' types give them")
            specs = [_spec_of_type(a, manual) for a in avals]
        else:
            specs = api_util.flatten_axes(f"shard_map({self.name}) in_specs", in_tree,
                                          _as_prefix(self.in_specs))
        in_specs = tuple(_check_spec(s, a, mesh, manual, self.name, "in_specs", "argument", n,
                                     check_divisible=True)
                         for s, a, n in zip(specs, avals, names))
        if explicit and len(manual) == len(mesh.axis_names):
            _check_specs_match_types(in_specs, avals, names, self.name)
        blocks = tuple(block_aval(a, s, mesh, self.check_vma) for a, s in zip(avals, in_specs))
        traced = _trace(self, mesh, manual, in_tree, blocks, in_specs, dbg)
        outs = shard_map_p.bind(*traced.consts, *flat_args, **traced.params)
        return tu.tree_unflatten(traced.out_tree, outs)


class _Traced:
    __slots__ = ("consts", "out_tree", "params", "__weakref__")

    def __init__(self, consts: list[Any], out_tree: Any, params: dict[str, Any]):
        self.consts = consts
        self.out_tree = out_tree
        self.params = params


#: Traces per function object (weak), keyed on everything the trace depends on.
_trace_cache: weakref.WeakKeyDictionary[Any, dict[Hashable, _Traced]] = \
    weakref.WeakKeyDictionary()


def _trace(sm: _ShardMapped, mesh: Mesh, manual: tuple[str, ...], in_tree: Any,
           blocks: tuple[ShapedArray, ...], in_specs: tuple[Spec, ...], dbg: Any) -> _Traced:
    key: Hashable | None
    try:
        key = (in_tree, blocks, in_specs, mesh, isinstance(sm.mesh, Mesh), manual, sm.check_vma,
               _spec_key(sm.out_specs),
               dbg.arg_names, core.bound_axis_names(), dtypes.x64_state.enabled,
               trace_settings.state.key)
        hash(key)
    except TypeError:
        key = None
    try:
        table = _trace_cache.setdefault(sm.f, {}) if key is not None else None
    except TypeError:  # not weakly referenceable
        table = None
    if table is not None and key in table:
        return table[key]
    with manual_axes_bound(mesh, manual, sm.check_vma), _body_context(mesh):
        typed = sm.check_vma and trace_settings.state.auto_pcast
        fun = _typed_as_out_specs(sm, manual) if typed else sm.f
        try:
            body: BodyTrace = trace_body(fun, in_tree, blocks, dbg)
        except UnboundAxisNameError as e:
            raise _unbound_axis_error(e, sm.name, mesh, manual) from None
    jaxpr_dbg = body.jaxpr.jaxpr.debug_info
    paths = jaxpr_dbg.result_paths if jaxpr_dbg is not None else ()
    out_flat = api_util.flatten_axes(f"shard_map({sm.name}) out_specs", body.out_tree,
                                     _as_prefix(sm.out_specs))
    out_specs = tuple(
        _check_spec(s, a, mesh, manual, sm.name, "out_specs", "result", p,
                    check_divisible=False)
        for s, a, p in zip(out_flat, body.out_avals, paths or (None,) * len(out_flat)))
    const_specs = tuple(((),) * get_aval(c).ndim for c in body.consts)
    all_in = const_specs + in_specs
    if sm.check_vma:
        check_replication(body.out_avals, mesh, out_specs, manual, sm.name, list(paths))
    params = dict(jaxpr=body.jaxpr, mesh=mesh, in_specs=all_in, out_specs=out_specs,
                  manual_axes=manual, check_vma=sm.check_vma, name=sm.name,
                  mesh_shown_abstract=not isinstance(sm.mesh, Mesh))
    traced = _Traced(body.consts, body.out_tree, params)
    if table is not None and not any(isinstance(c, core.Tracer) for c in body.consts):
        table[key] = traced
    return traced


def _typed_as_out_specs(sm: _ShardMapped, manual: tuple[str, ...]) -> Callable[..., Any]:
    """``sm.f`` with each result ``pvary``'d over the manual axes its
    ``out_specs`` entry splits it over (a result invariant over them is as
    good there), so results vary exactly where their entries say they may."""
    @functools.wraps(sm.f)
    def typed(*args: Any) -> Any:
        out = sm.f(*args)
        leaves, tree = tu.tree_flatten(out)
        try:
            specs = api_util.flatten_axes("out_specs", tree, _as_prefix(sm.out_specs))
        except (ValueError, TypeError):
            return out  # refused with the usual message once the trace is done
        typed_leaves = []
        for leaf, spec in zip(leaves, specs):
            named = _spec_entry_axes(spec)
            try:
                vma = get_aval(leaf).vma
            except TypeError:
                typed_leaves.append(leaf)
                continue
            missing = tuple(a for a in manual if a in named and a not in vma)
            typed_leaves.append(lax_collectives.pvary(leaf, missing) if missing else leaf)
        return tu.tree_unflatten(tree, typed_leaves)

    return typed


def _spec_entry_axes(spec: Any) -> frozenset[Any]:
    if not isinstance(spec, PartitionSpec):
        return frozenset()
    axes: set[Any] = set()
    for entry in spec:
        if entry is None:
            continue
        axes.update((entry,) if isinstance(entry, str) else tuple(entry))
    return frozenset(axes)


def _all_explicit(mesh: Mesh, manual: tuple[str, ...]) -> bool:
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    return bool(manual) and all(types[a] is AxisType.Explicit for a in manual)


def _type_dims(aval: ShapedArray) -> Spec:
    """The mesh axes each dimension of ``aval``'s type is split over."""
    spec = aval.sharding.spec if aval.sharding is not None else ()
    return tuple(tuple(spec[d]) if d < len(spec) else () for d in range(aval.ndim))


def _spec_of_type(aval: ShapedArray, manual: tuple[str, ...]) -> PartitionSpec:
    """The in_specs entry an argument's type gives (its split over ``manual``)."""
    dims = [tuple(a for a in axes if a in manual) for axes in _type_dims(aval)]
    return PartitionSpec(*[None if not d else d[0] if len(d) == 1 else d for d in dims])


def _p_str(spec: Spec) -> str:
    parts = ["None" if not axes else repr(axes[0]) if len(axes) == 1 else repr(tuple(axes))
             for axes in spec]
    return f"P({', '.join(parts)})"


def _check_specs_match_types(in_specs: tuple[Spec, ...], avals: list[ShapedArray],
                             names: tuple[str | None, ...], fun_name: str) -> None:
    """Over a mesh whose axes are all Explicit and all manual, an argument must
    already be split as its in_specs entry says (as JAX 0.10 requires)."""
    for spec, aval, name in zip(in_specs, avals, names):
        have = _type_dims(aval)
        if tuple(spec) != have:
            raise ShardMapError(
                f"shard_map({fun_name}): in_specs passed to shard_map: {_p_str(spec)} does "
                f"not match the specs of the input: {_p_str(have)} for arg "
                f"{name or '(unnamed)'}: {aval.str_long()}. `in_specs` is an optional "
                f"argument so you can omit specifying it and shard_map will infer the "
                f"in_specs from the arguments. If you want to reshard your inputs, you can "
                f"use `reshard` on the arguments and then pass those args to shard_map.")


def _spec_key(specs: Any) -> Hashable:
    leaves, tree = tu.none_leaf_registry.flatten(_as_prefix(specs))
    return tree, tuple(leaves)


def _as_prefix(specs: Any) -> Any:
    """Lists in spec trees are tuples (as JAX's ``in_specs=[P('x'), P()]``)."""
    if isinstance(specs, list):
        return tuple(_as_prefix(s) for s in specs)
    return specs


class _BodyContexts(threading.local):
    def __init__(self) -> None:
        #: The concrete mesh of each ``shard_map`` body being traced
        #: (innermost last); the abstract one is ``get_abstract_mesh()`` there.
        self.stack: list[Mesh] = []


_body_contexts = _BodyContexts()


@contextmanager
def _body_context(mesh: Mesh) -> Iterator[None]:
    _body_contexts.stack.append(mesh)
    try:
        yield
    finally:
        _body_contexts.stack.pop()


def _same_abstract(a: AbstractMesh, b: AbstractMesh) -> bool:
    """Equal as JAX's interned abstract meshes are: axes, types and devices."""
    return a == b and a.abstract_device == b.abstract_device


def _check_context_mesh(given: Any, mesh: Mesh) -> None:
    """Inside a ``shard_map`` body the context mesh has the outer manual axes
    typed ``Manual``, so a concrete ``Mesh`` given to a nested ``shard_map``
    no longer matches it, nor does an ``AbstractMesh`` other than the
    context's: JAX refuses both (the nested one takes ``mesh=None`` or
    ``get_abstract_mesh()``). An ``AbstractMesh`` outside bodies must be the
    one of the current ``set_mesh``."""
    context = get_abstract_mesh()
    if isinstance(given, AbstractMesh):
        if not _same_abstract(context, given):
            raise ShardMapError(f"The context mesh {context} should match the mesh passed to "
                                f"shard_map {given}")
    elif _body_contexts.stack and context != mesh.abstract_mesh:
        raise ShardMapError(f"The context mesh {context} should match the mesh passed to "
                            f"shard_map {mesh}")


def _resolve_mesh(mesh: Any, name: str) -> Mesh:
    """The concrete mesh of ``mesh`` (None: the enclosing body's or the
    current one; an ``AbstractMesh``: the one of the same shape there)."""
    if mesh is not None and not isinstance(mesh, (Mesh, AbstractMesh)):
        raise TypeError(f"shard_map({name}): mesh must be a Mesh or an AbstractMesh, got "
                        f"{mesh!r}")
    if isinstance(mesh, Mesh):
        return mesh
    # a nested shard_map without a mesh runs on the enclosing body's
    found = _body_contexts.stack[-1] if _body_contexts.stack else get_current_mesh()
    if found is None and mesh is None:
        raise ShardMapError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to "
                            f"enter into a mesh context (shard_map({name}): no mesh was given; "
                            "pass mesh=... or call it under set_mesh(mesh))")
    if found is None:
        raise ShardMapError(f"shard_map({name}): the mesh given is {mesh}, abstract, and none "
                            "is set; pass mesh=... or call it under set_mesh(mesh)")
    if mesh is not None and (found.axis_names, found.axis_sizes) != (mesh.axis_names,
                                                                     mesh.axis_sizes):
        raise ShardMapError(f"shard_map({name}): the AbstractMesh given, {mesh}, does not "
                            f"have the shape of the mesh set, {found}")
    return found


def _manual_axes(mesh: Mesh, axis_names: frozenset[Any], name: str) -> tuple[str, ...]:
    if not axis_names:
        return tuple(mesh.axis_names)
    unknown = sorted(str(a) for a in axis_names if a not in mesh.axis_names)
    if unknown:
        raise ShardMapError(f"shard_map({name}): axis_names {sorted(map(str, axis_names))} "
                            f"name axes {unknown} that are not in the mesh, whose axes are "
                            f"{mesh.axis_names}")
    return tuple(a for a in mesh.axis_names if a in axis_names)


def _check_spec(spec: Any, aval: ShapedArray, mesh: Mesh, manual: tuple[str, ...], name: str,
                what: str, kind: str, path: str | None, *, check_divisible: bool) -> Spec:
    """``spec`` as one tuple of axes per dimension of ``aval``, after checking
    it (JAX 0.10.2's messages, naming the argument or result by its path)."""
    passed = f"{kind} {path or '(unnamed)'}"
    if spec is None:
        spec = PartitionSpec()
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"shard_map({name}): {what} for {passed} must be a PartitionSpec, got "
                        f"{spec!r}")
    if len(spec) > aval.ndim:
        value = "input" if what == "in_specs" else "output"
        raise ShardMapError(
            f"shard_map applied to the function '{name}' was given an {what} entry which is "
            f"too long to be compatible with the corresponding {value} value from the "
            f"function:\n\n{what} is {spec!r} which has length {len(spec)}, but the passed "
            f"{passed} has shape {aval.str_long()}, which has rank {aval.ndim} (and "
            f"{aval.ndim} < {len(spec)})\n\nEntries in {what} must be of length no greater "
            f"than the number of axes in the corresponding {value} value.\n\nEither revise "
            f"the spec to be shorter, or modify '{name}' so that its {value}s have sufficient "
            "rank.")
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    dims: list[tuple[str, ...]] = []
    seen: set[str] = set()
    for d, entry in enumerate(tuple(spec) + (None,) * (aval.ndim - len(spec))):
        axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        for a in axes:
            if a not in sizes or a not in manual:
                shown = ", ".join(repr(m) for m in mesh.axis_names if m in manual)
                raise ShardMapError(
                    f"shard_map {what} argument must refer to an axis marked as manual "
                    f"(frozenset({{{shown}}})), but:\n\n  {what} refers to {a!r}\n\nCheck "
                    f"the {what} values passed to shard_map. (shard_map({name}): {what} for "
                    f"{passed} is {spec!r})")
            if a in seen:
                raise ShardMapError(f"shard_map({name}): {what} for {passed} is {spec!r}, "
                                    f"which uses the axis {a!r} twice")
            seen.add(a)
        count = math.prod(sizes[a] for a in axes)
        if check_divisible and aval.shape[d] % count:
            raise ShardMapError(_not_divisible(name, mesh, spec, passed, aval, d, axes, count))
        dims.append(axes)
    return tuple(dims)


def _not_divisible(name: str, mesh: Mesh, spec: PartitionSpec, passed: str, aval: ShapedArray,
                   d: int, axes: tuple[str, ...], count: int) -> str:
    target = (f"mesh axis {axes[0]!r} (of size {count})" if len(axes) == 1
              else f"mesh axes {axes} (of total size {count})")
    return (f"shard_map applied to the function '{name}' was given argument arrays with axis "
            "sizes that are not evenly divisible by the corresponding mesh axis sizes:\n\n"
            f"The mesh given has shape {tuple(mesh.axis_sizes)} with corresponding axis names "
            f"{tuple(mesh.axis_names)}.\n\nthe passed {passed} of shape {aval.str_long()}, "
            f"corresponds to in_specs of value {spec!r}, which maps array axis {d} (of size "
            f"{aval.shape[d]}) to {target}, but {count} does not evenly divide "
            f"{aval.shape[d]}\n\nArray arguments' axis sizes must be evenly divisible by the "
            "mesh axis or axes indicated by the corresponding elements of the argument's "
            "in_specs entry. Consider checking that in_specs are correct, and if so consider "
            f"changing the mesh axis sizes or else padding the input and adapting '{name}' "
            "appropriately.")


def _unbound_axis_error(e: UnboundAxisNameError, name: str, mesh: Mesh,
                        manual: tuple[str, ...]) -> Exception:
    axis = e.axis_name
    if axis in mesh.axis_names:
        return NameError(
            f"Found an unbound axis name: {axis}. shard_map({name}): a collective names the "
            f"mesh axis {axis!r}, which is not manual here (the manual axes are {manual}; "
            f"axis_names leaves {axis!r} automatic). Collectives inside shard_map work over "
            "manual axes only.")
    return NameError(f"shard_map({name}): {e}; the mesh's axes are {mesh.axis_names}")


# --- the eager impl: jit of the one equation ---------------------------------------------------
def _partition_spec(spec: Spec) -> PartitionSpec:
    """``spec`` as the user wrote it (trailing unsplit dimensions left out)."""
    dims = list(spec)
    while dims and not dims[-1]:
        dims.pop()
    return PartitionSpec(*map(partition, dims))


def _wrapper_jaxpr(body: ClosedJaxpr, frozen: tuple[tuple[str, Any], ...],
                   in_avals: tuple[ShapedArray, ...]) -> ClosedJaxpr:
    params = dict(frozen, jaxpr=body)
    dbg = body.jaxpr.debug_info
    names = dbg.arg_names if dbg is not None else (None,) * len(in_avals)
    paths = dbg.result_paths if dbg is not None else (None,) * len(body.out_avals)
    src = dbg.func_src_info if dbg is not None else None
    return retrace(lambda *a: shard_map_p.bind(*a, **params), in_avals,
                   JaxprDebugInfo("shard_map", src, tuple(names), tuple(paths)))


_wrapper_memo = memoize_on_jaxpr(_wrapper_jaxpr)


def _impl(*args: Any, **params: Any) -> Any:
    mesh = params["mesh"]
    frozen = tuple(sorted((k, v) for k, v in params.items() if k != "jaxpr"))
    in_avals = tuple(get_aval(a) for a in args)
    jaxpr = _wrapper_memo(params["jaxpr"], frozen, in_avals)
    out_sh = tuple(NamedSharding(mesh, _partition_spec(s)) for s in params["out_specs"])
    return pjit_p.bind(*args, jaxpr=jaxpr, in_shardings=(UNSPECIFIED,) * len(args),
                       out_shardings=out_sh, donated_invars=(False,) * len(args),
                       name=f"shard_map_{params['name']}", keep_unused=True, inline=False,
                       compiler_options_kvs=())


shard_map_p.def_impl(_impl)


def _out_type_shardings(*avals: ShapedArray, mesh: Mesh, out_specs: tuple[Spec, ...],
                        jaxpr: ClosedJaxpr, **_: Any) -> list[Any]:
    """Results are typed by their out_specs over the mesh's Explicit axes."""
    return [type_sharding(mesh.abstract_mesh, s, a.ndim)
            for s, a in zip(out_specs, jaxpr.out_avals)]


sit.register(shard_map_p, _out_type_shardings)
