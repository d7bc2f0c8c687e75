"""The explicit-sharding API: ``reshard``, ``auto_axes``, ``explicit_axes``,
``typeof``.

Over a mesh's Explicit axes the sharding of a value is part of its type
(``float32[8@X,4]``) and every operation gives its result one by a rule
(tracing-core's ``sharding_in_types``). These functions change those types:

- ``reshard(x, P('X', None))``: ``x`` laid out anew (a sharding constraint
  under ``jit``, a transfer outside it); its type follows.
- ``auto_axes(f, axes=..., out_sharding=...)``: ``f`` runs with the given
  Explicit axes turned Auto (its values lose them from their types, and the
  compiler decides), and its results are resharded to ``out_sharding``.
- ``explicit_axes(f, axes=..., in_sharding=...)``: the converse: ``f`` runs
  with Auto axes made Explicit, its arguments resharded to ``in_sharding``.
- ``typeof(x)``: the type of a value, shardings included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.sharding import (
    Mesh,
    NamedSharding,
    PartitionSpec,
    get_current_mesh,
    set_mesh,
)
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.api import ShapeDtypeStruct
from lamina_tracing_core import out_sharding as out_sharding_api
from lamina_tracing_core.mesh import AxisType, get_abstract_mesh, partition, replicated
from lamina_tracing_core.numpy.key_arrays import KeyDType, PRNGKeyArray

from lamina_sharded_jit.sharding_constraint import constrain_tree

__all__ = ["reshard", "auto_axes", "explicit_axes", "typeof"]


def typeof(x: Any) -> ShapedArray:
    """The type of ``x`` (an array, a tracer or a Python/NumPy value): shape,
    dtype, weak type, and its sharding over a mesh, as JAX shows it: split
    over the Explicit axes its type names, else replicated over the mesh of
    its own ``NamedSharding`` (an array) or the current abstract mesh (empty
    outside ``set_mesh``); a key array's dtype is ``key<fry>``, as in JAX."""
    if isinstance(x, PRNGKeyArray):
        aval = x.key_type()
    elif isinstance(x, ShapeDtypeStruct) and isinstance(x.dtype, KeyDType):
        aval = ShapedArray(x.shape, x.dtype)
    else:
        aval = get_aval(x)
    if aval.sharding is not None:
        return aval
    laid_out = x.sharding if type(x) is Array else None
    mesh = (laid_out.mesh.abstract_mesh if isinstance(laid_out, NamedSharding)
            else get_abstract_mesh())
    return aval.update(sharding=replicated(mesh, len(aval.shape)))


def _current_mesh(what: str) -> Mesh:
    mesh = get_current_mesh()
    if mesh is None:
        raise ValueError(f"{what} needs a mesh: call it under set_mesh(mesh)")
    return mesh


def _on_mesh(spec: Any, mesh: Mesh) -> Any:
    if spec is None or isinstance(spec, NamedSharding):
        return spec
    if isinstance(spec, PartitionSpec):
        return NamedSharding(mesh, spec)
    return spec


def reshard(xs: Any, out_shardings: Any) -> Any:
    """Every leaf of ``xs`` laid out by the matching ``out_shardings`` leaf (a
    ``NamedSharding``, or a ``PartitionSpec`` over the current mesh); under
    tracing, the results' types carry the new shardings."""
    mesh = get_current_mesh()
    specs = tu.tree_map(lambda s: _on_mesh(s, mesh) if mesh is not None else s,
                        out_shardings, is_leaf=lambda s: isinstance(s, PartitionSpec))
    tu.tree_map(_check_explicit_axes, specs, is_leaf=lambda s: isinstance(s, NamedSharding))
    return constrain_tree(xs, specs, "reshard", asserts_explicit=False, full_specs=True)


def _check_explicit_axes(sharding: Any) -> None:
    """reshard moves values between layouts of their types: over Explicit axes only."""
    if isinstance(sharding, NamedSharding):
        out_sharding_api.refuse_non_explicit_axes(sharding.mesh.abstract_mesh, sharding.spec,
                                                  "reshard")


def _retyped(mesh: Mesh, axes: Sequence[str], kind: AxisType, what: str) -> Mesh:
    unknown = [a for a in axes if a not in mesh.axis_names]
    if unknown:
        raise ValueError(f"{what}: axes {unknown} are not in the mesh {mesh.axis_names}")
    types = tuple(kind if n in axes else t for n, t in zip(mesh.axis_names, mesh.axis_types))
    return Mesh(mesh.devices, mesh.axis_names, types)


def _as_axes(axes: str | Sequence[str] | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if axes is None:
        return default
    return (axes,) if isinstance(axes, str) else tuple(axes)


def _move_to(x: Any, mesh: Mesh) -> Any:
    """``x`` (a leaf) relaid over ``mesh``'s types, its layout kept where it
    is given in its type."""
    aval = get_aval(x)
    ts = aval.sharding
    spec = PartitionSpec(*[partition(axes) for axes in (ts.spec if ts is not None else ())])
    return constrain_tree(x, NamedSharding(mesh, spec), "reshard", asserts_explicit=False)


def auto_axes(f: Callable[..., Any] | None = None, /, *, axes: Any = None,
              out_sharding: Any = None) -> Any:
    """``f`` run with the Explicit ``axes`` of the current mesh (default: all
    of them) made Auto; its results resharded to ``out_sharding`` (required:
    over Auto axes the result's sharding is the compiler's choice)."""
    if f is None:
        return functools.partial(auto_axes, axes=axes, out_sharding=out_sharding)
    api_util.check_callable(f)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mesh = _current_mesh(f"auto_axes({api_util.fun_name(f)})")
        names = _as_axes(axes, mesh.explicit_axes)
        if out_sharding is None:
            raise TypeError(f"auto_axes({api_util.fun_name(f)}): out_sharding is required")
        inner = _retyped(mesh, names, AxisType.Auto, f"auto_axes({api_util.fun_name(f)})")
        args, kwargs = tu.tree_map(lambda x: _drop_axes(x, inner, names), (args, kwargs))
        with set_mesh(inner):
            out = f(*args, **kwargs)
        with set_mesh(mesh):
            return reshard(out, out_sharding)

    return wrapped


# functions with JAX's ``out_sharding`` (random samplers, jnp.array, ...) run through it
out_sharding_api.auto_axes_impl[:] = [auto_axes]


def _drop_axes(x: Any, mesh: Mesh, names: Sequence[str]) -> Any:
    ts = get_aval(x).sharding
    if ts is None:
        return x
    spec = PartitionSpec(*[tuple(a for a in axes if a not in names) or None
                           for axes in ts.spec])
    return constrain_tree(x, NamedSharding(mesh, spec), "reshard", asserts_explicit=False)


def explicit_axes(f: Callable[..., Any] | None = None, /, *, axes: Any = None,
                  in_sharding: Any = None) -> Any:
    """``f`` run with the Auto ``axes`` of the current mesh (default: all of
    them) made Explicit, its positional arguments resharded to
    ``in_sharding`` (a tree prefix of them) over that mesh."""
    if f is None:
        return functools.partial(explicit_axes, axes=axes, in_sharding=in_sharding)
    api_util.check_callable(f)

    @functools.wraps(f)
    def wrapped(*args: Any) -> Any:
        mesh = _current_mesh(f"explicit_axes({api_util.fun_name(f)})")
        names = _as_axes(axes, mesh.auto_axes)
        if in_sharding is None:
            raise TypeError(f"explicit_axes({api_util.fun_name(f)}): in_sharding is required")
        inner = _retyped(mesh, names, AxisType.Explicit,
                         f"explicit_axes({api_util.fun_name(f)})")
        with set_mesh(inner):
            args = reshard(args, in_sharding)
            out = f(*args)
        return tu.tree_map(lambda x: _move_to(x, mesh), out)

    return wrapped
