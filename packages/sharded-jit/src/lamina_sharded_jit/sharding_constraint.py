"""``with_sharding_constraint``: how an intermediate value must be laid out.

``with_sharding_constraint(x, sharding)`` is the identity on values; inside
``jit`` it tells XLA's partitioner the sharding ``x`` must have at that point
(a Shardy ``sdy.sharding_constraint``, or a GSPMD ``Sharding`` custom call).
Outside any transformation it moves ``x`` to ``sharding`` (a ``device_put``).

``sharding_constraint_p`` (params ``sharding``: a lamina sharding, and
``unconstrained_dims``: the dimensions given as
``PartitionSpec.UNCONSTRAINED``) is linear: its JVP constrains the tangent
the same way, its transpose constrains the cotangent, and under ``vmap`` the
batch dimension is added to the sharding unsplit (or split over
``spmd_axis_name``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_interpreters_pxla.device_put import device_put
from lamina_interpreters_pxla.sharding import (
    UNCONSTRAINED,
    NamedSharding,
    PartitionSpec,
    type_sharding_of,
)
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core.mesh import partition
from lamina_tracing_core import ad, batching
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.ad_util import Zero
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.primitives import Primitive

from lamina_sharded_jit.shardings import (
    batch_sharding,
    canonicalize_leaf,
    check_sharding_fits,
    resolve_leaf,
)

__all__ = ["sharding_constraint_p", "with_sharding_constraint", "bind_constraint",
           "constrain_tree"]

sharding_constraint_p = Primitive("sharding_constraint")


def _abstract_eval(aval: ShapedArray, *, sharding: Any,
                   unconstrained_dims: frozenset[int]) -> ShapedArray:
    check_sharding_fits(sharding, aval, "with_sharding_constraint: the value")
    return aval.update(sharding=_type_sharding(aval, sharding))


def _type_sharding(aval: ShapedArray, sharding: Any) -> Any:
    """The result's type sharding: a NamedSharding's over its mesh's Explicit
    axes (none over a mesh without them); other shardings keep the type."""
    if isinstance(sharding, NamedSharding):
        return type_sharding_of(sharding, aval.ndim)
    return aval.sharding


def _impl(x: Any, *, sharding: Any, unconstrained_dims: frozenset[int]) -> Any:
    return device_put(x, sharding)


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = sharding_constraint_p.bind(x, **params)
    return out, t if type(t) is Zero else sharding_constraint_p.bind(t, **params)


def _transpose(ct: Any, x: Any, **params: Any) -> list[Any]:
    if type(ct) is Zero:
        return [ct]
    return [sharding_constraint_p.bind(ct, **params)]


def _batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None], *,
           sharding: Any, unconstrained_dims: frozenset[int]) -> tuple[Any, int | None]:
    (x,), (d,) = args, dims
    if d is None:
        return sharding_constraint_p.bind(x, sharding=sharding,
                                          unconstrained_dims=unconstrained_dims), None
    ndim = get_aval(x).ndim - 1
    new = batch_sharding(sharding, d, ndim, axis_data.spmd_name)
    dims_after = frozenset(u + 1 if u >= d else u for u in unconstrained_dims)
    return sharding_constraint_p.bind(x, sharding=new, unconstrained_dims=dims_after), d


sharding_constraint_p.def_abstract_eval(_abstract_eval)
sit.register(sharding_constraint_p,
             lambda aval, *, sharding, **_: [_type_sharding(aval, sharding)])
sharding_constraint_p.def_impl(_impl)
ad.primitive_jvps[sharding_constraint_p] = _jvp
ad.primitive_transposes[sharding_constraint_p] = _transpose
batching.fancy_primitive_batchers[sharding_constraint_p] = _batch


def _unconstrained(sharding: Any) -> frozenset[int]:
    if not isinstance(sharding, NamedSharding):
        return frozenset()
    return frozenset(i for i, p in enumerate(sharding.spec) if p is UNCONSTRAINED)


def bind_constraint(x: Any, sharding: Any, where: str) -> Any:
    """Binds the constraint on one value (``where`` names it in errors)."""
    aval = get_aval(x)
    check_sharding_fits(sharding, aval, where)
    return sharding_constraint_p.bind(x, sharding=sharding,
                                      unconstrained_dims=_unconstrained(sharding))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Constrains every leaf of the pytree ``x`` to the sharding of the
    matching leaf of ``shardings`` (a pytree prefix of ``x`` whose leaves are
    lamina shardings, or ``PartitionSpec``s inside ``with mesh:``; a ``None``
    leaf leaves that part unconstrained). Returns ``x`` unchanged in value.
    Over a mesh whose axes are all Explicit it asserts the type's sharding."""
    return constrain_tree(x, shardings, "with_sharding_constraint", asserts_explicit=True)


def constrain_tree(x: Any, shardings: Any, api_name: str, *, asserts_explicit: bool,
                   full_specs: bool = False) -> Any:
    """``with_sharding_constraint``'s work for ``api_name`` (``reshard`` uses
    it to change a type's sharding, so it does not assert; its results' specs
    name every dimension, ``full_specs``, as the types JAX lays them out by)."""
    pairs, treedef = tu.tree_flatten_with_path(x)
    specs = api_util.flatten_axes(f"{api_name} shardings", treedef, shardings)
    outs = []
    for (path, leaf), spec in zip(pairs, specs):
        where = f"{api_name}: argument x{tu.keystr(path)}"
        sharding = resolve_leaf(canonicalize_leaf(spec, where=where), where=where)
        if spec is None:
            outs.append(leaf)
            continue
        if asserts_explicit:
            _check_explicit_agrees(get_aval(leaf), sharding, where)
        if full_specs and isinstance(sharding, NamedSharding):
            ndim = get_aval(leaf).ndim
            if len(sharding.spec) < ndim:
                sharding = sharding.with_spec(
                    tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec)))
        outs.append(bind_constraint(leaf, sharding, where))
    return tu.tree_unflatten(treedef, outs)


def _check_explicit_agrees(aval: ShapedArray, sharding: Any, where: str) -> None:
    """Over a mesh whose axes are all Explicit the sharding is in the type, so
    a constraint can only assert it (JAX's rule; ``reshard`` changes it)."""
    if (aval.sharding is None or not isinstance(sharding, NamedSharding)
            or not sharding.mesh.abstract_mesh.are_all_axes_explicit):
        return
    wanted = type_sharding_of(sharding, aval.ndim)
    if wanted is None or wanted.spec == aval.sharding.spec:
        return
    held = PartitionSpec(*map(partition, aval.sharding.spec))
    raise AssertionError(
        "`with_sharding_constraint` acts as an assert when all axes of mesh are of type "
        f"`Explicit`. The array sharding: {held!r} did not match the sharding provided: "
        f"{sharding.spec!r}. Please use `jax.sharding.reshard` to shard your input to the "
        f"sharding you want.\n({where}: {aval.str_short()})")
