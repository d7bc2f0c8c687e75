"""A user's ``out_sharding`` argument (JAX 0.10's: a ``PartitionSpec`` over the
current mesh, or a ``NamedSharding``) checked against the result's shape and
turned into the sharding of the result's type.

Errors carry JAX's words, then name the function and argument they come from
(``(the out_sharding of jnp.zeros)``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lamina_linear_util import tree_util as tu

from lamina_tracing_core.mesh import (AbstractMesh, AxisType, TypeSharding, get_abstract_mesh,
                                     partition, replicated, type_sharding)
from lamina_tracing_core.sharding_in_types import check_divisible

__all__ = ["resolve_out_sharding", "param_type_sharding", "auto_axes_impl", "takes_out_sharding",
           "refuse_non_explicit_axes"]

F = TypeVar("F", bound=Callable[..., Any])

#: JAX's ``auto_axes(f, *, axes, out_sharding)``, registered by the layer
#: that has concrete meshes and sharding constraints (sharded-jit).
auto_axes_impl: list[Callable[..., Any]] = []


def resolve_out_sharding(out_sharding: Any, shape: Sequence[int], api: str,
                         arg: str = "out_sharding", *,
                         keep_replicated: bool = False) -> TypeSharding | None:
    """The type sharding a result of ``shape`` gets from ``out_sharding``
    (None when it is None, names no Explicit axis, or is a sharding over an
    empty mesh). Raises JAX's errors for a value that is not a sharding, a
    ``PartitionSpec`` outside a mesh, a mesh other than the current one, an
    unknown or repeated axis, more split entries than ``shape`` has
    dimensions, or a dimension the axes do not divide. ``keep_replicated``:
    a sharding that splits nothing is a replicated type sharding, not None
    (a contraction's rule tells it from no choice at all)."""
    if out_sharding is None:
        return None
    mesh, spec = _mesh_and_spec(out_sharding, api, arg)
    if mesh is None:
        return None
    dims = [_axes(e) for e in spec]
    _check_axes(mesh, spec, dims, api, arg)
    _check_rank(spec, dims, len(shape), api, arg)
    _check_divisible(mesh, dims, tuple(shape), api, arg)
    typed = type_sharding(mesh, dims, len(shape))
    if typed is None and keep_replicated:
        return replicated(mesh, len(shape))
    return typed


def _where(api: str, arg: str) -> str:
    return f" (the {arg} of {api})"


def _mesh_and_spec(s: Any, api: str, arg: str) -> tuple[AbstractMesh | None, tuple[Any, ...]]:
    """The abstract mesh and the spec entries of ``s``; no mesh for a
    sharding over an empty mesh (JAX then ignores it)."""
    current = get_abstract_mesh()
    if hasattr(s, "spec") and hasattr(s, "mesh"):
        mesh = getattr(s.mesh, "abstract_mesh", s.mesh)
        if not isinstance(mesh, AbstractMesh) or mesh.empty:
            return None, ()
        if not current.empty and mesh != current:
            raise ValueError(f"Context mesh {current} should match the mesh of sharding "
                             f"{mesh} passed to {api}." + _where(api, arg))
        return mesh, tuple(s.spec)
    # lamina's PartitionSpec is a tuple of entries (it lives above this package)
    if isinstance(s, tuple) and type(s).__name__ == "PartitionSpec":
        if current.empty:
            raise ValueError(
                "Using PartitionSpec when you are not under a mesh context is not allowed. "
                "Please pass a NamedSharding instance or enter into a mesh context via "
                f"`jax.set_mesh`. Got {s!r}" + _where(api, arg))
        return current, tuple(s)
    raise TypeError(f"`{arg}` argument of {api} only supports instances of `NamedSharding` "
                    f"or `PartitionSpec`. Got {s} of type: {type(s)}")


def _axes(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    # PartitionSpec.UNCONSTRAINED (not a tuple) leaves the dimension to the compiler
    return tuple(entry) if isinstance(entry, tuple) else ()


def _spec_repr(spec: Sequence[Any]) -> str:
    shown = [repr(e) for e in spec]
    return f"P({shown[0]},)" if len(shown) == 1 else f"P({', '.join(shown)})"


def _check_axes(mesh: AbstractMesh, spec: tuple[Any, ...], dims: list[tuple[str, ...]],
                api: str, arg: str) -> None:
    seen: set[str] = set()
    for axes in dims:
        for a in axes:
            if a not in mesh.axis_names:
                raise ValueError(f"Resource axis: {a} of {_spec_repr(spec)} is not found in "
                                 f"mesh: {mesh.axis_names}." + _where(api, arg))
            if a in seen:
                raise ValueError(
                    "A single NamedSharding spec specification can map every mesh axis to at "
                    f"most one positional dimension, but {_spec_repr(spec)} has duplicate "
                    f"entries for `{a}`" + _where(api, arg))
            seen.add(a)


def _check_rank(spec: tuple[Any, ...], dims: list[tuple[str, ...]], ndim: int, api: str,
                arg: str) -> None:
    # As JAX, entries past the result's rank are allowed while they split nothing.
    if any(dims[ndim:]):
        raise ValueError(f"{api}: {arg} {_spec_repr(spec)} splits dimensions beyond the "
                         f"result's rank {ndim}")


def _check_divisible(mesh: AbstractMesh, dims: list[tuple[str, ...]], shape: tuple[int, ...],
                     api: str, arg: str) -> None:
    full = [partition(ax) for ax in dims[:len(shape)] + [()] * (len(shape) - len(dims))]
    check_divisible(mesh, dims, shape, f"NamedSharding(mesh={mesh}, spec={_spec_repr(full)})",
                    _where(api, arg))


def param_type_sharding(sharding: Any, shape: Sequence[int], name: str) -> TypeSharding | None:
    """The result type's sharding from a primitive's ``sharding`` parameter:
    a type sharding as it is (what the API functions bind), anything else
    resolved as a user's ``out_sharding``."""
    if sharding is None or isinstance(sharding, TypeSharding):
        return sharding
    return resolve_out_sharding(sharding, shape, name, "sharding")


# --- functions computed, then laid out, by an out_sharding (JAX's maybe_auto_axes) --------
def takes_out_sharding(api: str) -> Callable[[F], F]:
    """Gives ``fun`` JAX's keyword-only ``out_sharding``: when given, ``fun``
    runs with the Explicit axes of the mesh made Auto (the compiler lays out
    its insides) and its result is resharded to ``out_sharding``, as JAX's
    random samplers, ``jnp.array`` and friends do. ``api`` names it in errors."""
    def decorate(fun: F) -> F:
        @functools.wraps(fun)
        def wrapped(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
            if out_sharding is None:
                return fun(*args, **kwargs)
            return _under_auto_axes(fun, args, kwargs, out_sharding, api)

        sig = inspect.signature(fun)
        extra = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)
        params = list(sig.parameters.values())
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        wrapped.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=params[:at] + [extra] + params[at:])
        return wrapped  # type: ignore[return-value]
    return decorate


def refuse_non_explicit_axes(mesh: AbstractMesh, spec: Sequence[Any], api: str,
                             where: str = "") -> None:
    """JAX's ``ValueError`` when the ``PartitionSpec`` entries ``spec`` name
    an axis of ``mesh`` that is Auto or Manual (``reshard`` and the
    ``out_sharding`` of functions computed under ``auto_axes`` lay values out
    over Explicit axes only)."""
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    for a in (a for e in spec for a in _axes(e)):
        kind = kinds.get(a)
        if kind is not None and kind is not AxisType.Explicit:
            raise ValueError(
                f"PartitionSpec passed to {api} cannot contain axis names that are of type "
                f"Auto or Manual. Got PartitionSpec: {_spec_repr(spec)} with axis name: {a} of "
                f"type: {kind}.{where}")


def _under_auto_axes(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                     out_sharding: Any, api: str) -> Any:
    mesh, spec = _mesh_and_spec(out_sharding, api, "out_sharding")
    if mesh is None:
        return fun(*args, **kwargs)
    refuse_non_explicit_axes(mesh, spec, api.split(".")[-1], _where(api, "out_sharding"))
    if not auto_axes_impl:
        raise RuntimeError(f"{api}: out_sharding needs lamina's runtime; import lamina first")
    # Only the arrays travel through auto_axes (it relays them over the Auto
    # mesh); shapes, dtypes and host values stay where they are.
    leaves, tree = tu.tree_flatten((args, kwargs))
    moving = [i for i, x in enumerate(leaves) if hasattr(x, "aval") or hasattr(x, "with_data")]
    wrap = [getattr(leaves[i], "with_data", None) for i in moving]

    def body(*arrays: Any) -> Any:
        full = list(leaves)
        for i, w, x in zip(moving, wrap, arrays):
            full[i] = w(x) if w is not None else x
        a, k = tu.tree_unflatten(tree, full)
        return fun(*a, **k)

    passed = [leaves[i].base if w is not None else leaves[i] for i, w in zip(moving, wrap)]
    return auto_axes_impl[0](body, axes=mesh.explicit_axes, out_sharding=out_sharding)(*passed)
