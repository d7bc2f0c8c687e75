"""A user's ``out_sharding`` argument (JAX 0.10's: a ``PartitionSpec`` over the
current mesh, or a ``NamedSharding``) checked against the result's shape and
turned into the sharding of the result's type.

Errors carry JAX's words, then name the function and argument they come from
(``(the out_sharding of jnp.zeros)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_tracing_core.mesh import (AbstractMesh, TypeSharding, get_abstract_mesh, replicated,
                                     type_sharding)

__all__ = ["resolve_out_sharding", "param_type_sharding"]


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
    sizes = mesh.shape
    for d, axes in enumerate(dims[:len(shape)]):
        count = 1
        for a in axes:
            count *= sizes[a]
        if shape[d] % count:
            full = [None if not ax else ax[0] if len(ax) == 1 else ax
                    for ax in dims[:len(shape)] + [()] * (len(shape) - len(dims))]
            raise ValueError(
                f"Sharding spec {axes} implies that array axis {d} is partitioned {count} "
                f"times, but does not evenly divide the dimension size {shape[d]}. Got shape: "
                f"{shape} and sharding NamedSharding(mesh={mesh}, spec={_spec_repr(full)})"
                + _where(api, arg))


def param_type_sharding(sharding: Any, shape: Sequence[int], name: str) -> TypeSharding | None:
    """The result type's sharding from a primitive's ``sharding`` parameter:
    a type sharding as it is (what the API functions bind), anything else
    resolved as a user's ``out_sharding``."""
    if sharding is None or isinstance(sharding, TypeSharding):
        return sharding
    return resolve_out_sharding(sharding, shape, name, "sharding")
