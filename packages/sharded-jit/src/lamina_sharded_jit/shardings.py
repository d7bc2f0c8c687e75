"""Shardings as ``jit`` sees them: specification leaves, prefix trees, the
device assignment of a program, and their device-free lowering forms.

A sharding *leaf* of ``in_shardings``/``out_shardings`` is one of

- a lamina sharding (``NamedSharding``, ``SingleDeviceSharding``,
  ``GSPMDSharding``, ``PmapSharding``),
- a bare ``PartitionSpec`` of mesh axis names, resolved against the current
  ``with mesh:`` block (when ``jit`` is called if a mesh is active then,
  otherwise at each call),
- ``None`` / ``UNSPECIFIED``: not specified (arguments keep the sharding of
  a committed array, or go where the compiler wants them; results get the
  compiler's choice).

All shardings of one program (arguments, results, nested ``jit``s and
``with_sharding_constraint``s) must use the same devices; the first
multi-device one fixes their order (the program's device assignment).
Errors name the arguments concerned by path (``y['hi']``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from lamina_interpreters_pxla.sharding import (
    GSPMDSharding,
    Mesh,
    NamedSharding,
    PartitionSpec,
    PmapSharding,
    ShardingError,
    SingleDeviceSharding,
    context_mesh,
    get_current_mesh,
    is_sharding,
    named_sharding_from_hlo,
    single_device_sharding,
)
from lamina_mlir_lowering import UNSPECIFIED, MeshShape, ShardingSpec, Unspecified
from lamina_tracing_core.avals import ShapedArray

__all__ = [
    "CONTEXT_MESH_LABEL", "ShardingSource", "UNSPECIFIED", "context_mesh_source", "batch_sharding", "canonicalize_leaf",
    "check_sharding_fits", "factor_mesh", "is_unspecified", "none_if_unspecified", "lowering_specs", "program_devices", "resolve_leaf", "shard_label",
    "sharding_for_output", "LoweringShardingContext", "lowering_sharding_context",
    "current_lowering_context",
]


def is_unspecified(s: object) -> bool:
    """True for ``None`` and ``UNSPECIFIED`` (no sharding was asked for)."""
    return s is None or isinstance(s, Unspecified)


def none_if_unspecified(s: Any) -> Any:
    """``s``, or ``None`` when no sharding was asked for (what stages show)."""
    return None if is_unspecified(s) else s


def check_sharding_fits(s: Any, aval: ShapedArray, where: str) -> None:
    """Raises a ``ShardingError`` naming ``where`` when the sharding ``s``
    cannot lay out a value of type ``aval`` (wrong rank, indivisible shape)."""
    try:
        s._to_xla_hlo_sharding(aval.ndim)
        s.check_compatible_shape(aval.shape)
    except ShardingError as e:
        raise ShardingError(f"{where} of type {aval.str_short()}: {e}") from None


def canonicalize_leaf(x: Any, *, where: str) -> Any:
    """One specification leaf as jit keeps it: ``UNSPECIFIED``, a lamina
    sharding, or a ``PartitionSpec`` (resolved now if a mesh is active)."""
    if is_unspecified(x):
        return UNSPECIFIED
    if is_sharding(x):
        return x
    if isinstance(x, PartitionSpec):
        mesh = get_current_mesh()
        return NamedSharding(mesh, x) if mesh is not None else x
    raise TypeError(
        f"{where}: {x!r} of type {type(x).__name__} is not a valid sharding; expected a "
        "lamina Sharding (e.g. NamedSharding(mesh, PartitionSpec(...))), a PartitionSpec "
        "(inside `with mesh:`) or None")


def resolve_leaf(x: Any, *, where: str) -> Any:
    """A leaf from :func:`canonicalize_leaf` with a bare ``PartitionSpec``
    resolved against the current mesh (a clear error without one)."""
    if isinstance(x, PartitionSpec):
        mesh = get_current_mesh()
        if mesh is None:
            raise ShardingError(
                f"{where} is {x!r}, a PartitionSpec without a mesh: call it inside "
                "`with mesh:` or pass NamedSharding(mesh, spec)")
        return NamedSharding(mesh, x)
    return x


# --- the device assignment -------------------------------------------------------------------
@dataclass(frozen=True)
class ShardingSource:
    """A sharding that constrains where a program runs, and what it belongs
    to (``argument y['hi']``, ``result result[0]``, ``with_sharding_constraint
    at f.py:3``) for error messages."""

    label: str
    sharding: Any
    aval: ShapedArray | None = None

    def describe(self, fun_name: str) -> str:
        ids = [d.id for d in self.sharding._device_assignment]
        platform = self.sharding._device_assignment[0].platform.upper()
        if self.label == CONTEXT_MESH_LABEL:
            return f"{self.label} with device ids {ids} on platform {platform}"
        shape = f" with shape {self.aval}" if self.aval is not None else ""
        return (f"{self.label} of {fun_name}{shape} and with device ids {ids} on "
                f"platform {platform}")


#: The source ``set_mesh``'s mesh is when a program runs on it (JAX's words).
CONTEXT_MESH_LABEL = "jit's context mesh"


def context_mesh_source() -> ShardingSource | None:
    """The current ``set_mesh`` mesh as a placement source (replicated over
    it): a program none of whose shardings says otherwise runs there."""
    mesh = context_mesh()
    return None if mesh is None else ShardingSource(CONTEXT_MESH_LABEL, NamedSharding(mesh, ()))


def program_devices(fun_name: str, sources: Sequence[ShardingSource],
                    default: Any) -> tuple[Any, ...]:
    """The devices a program runs on, in order.

    No sharding: ``(default,)``. Otherwise every sharding must cover the same
    devices; the first multi-device sharding gives the order. Raises
    ``ValueError`` naming the two sources that disagree.
    """
    if not sources:
        return (default,)
    lead = next((s for s in sources if s.sharding.num_devices > 1), sources[0])
    devices = tuple(lead.sharding._device_assignment)
    device_set = set(devices)
    for src in sources:
        if src is lead:
            continue
        if set(src.sharding._device_assignment) != device_set:
            first, second = (src, lead) if lead.label == CONTEXT_MESH_LABEL else (lead, src)
            raise ValueError(
                "Received incompatible devices for jitted computation. Got "
                f"{first.describe(fun_name)} and {second.describe(fun_name)}")
    return devices


# --- shardings in the lowering ------------------------------------------------------------------
def factor_mesh(devices: Sequence[Any], prefix: str = "p") -> Mesh:
    """A mesh over ``devices`` (in order) with one axis per prime factor of
    their number (``p0``, ``p1``, ...; 8 devices: sizes 2, 2, 2). Any tiling
    of an array over these devices can be written as a ``PartitionSpec`` on
    it, which is what lets differently cut arrays share one module mesh."""
    n = len(devices)
    sizes: list[int] = []
    rest, p = n, 2
    while rest > 1:
        while rest % p == 0:
            sizes.append(p)
            rest //= p
        p += 1
    if not sizes:
        sizes = [1]
    names = tuple(f"{prefix}{i}" for i in range(len(sizes)))
    return Mesh(np.array(list(devices), dtype=object).reshape(tuple(sizes)), names)


def _lead_mesh(shardings: Sequence[Any], devices: Sequence[Any]) -> Mesh:
    for s in shardings:
        if isinstance(s, NamedSharding) and tuple(s.mesh._flat_devices) == tuple(devices):
            return s.mesh
    for s in shardings:
        if isinstance(s, NamedSharding) and set(s.mesh._flat_devices) == set(devices):
            return s.mesh
    return factor_mesh(devices)


def _on_mesh(s: Any, ndim: int, mesh: Mesh, where: str) -> Any:
    """``s`` written as a NamedSharding over ``mesh`` (same data placement)."""
    if isinstance(s, NamedSharding) and s.mesh == mesh:
        return s
    named = named_sharding_from_hlo(mesh, s._to_xla_hlo_sharding(ndim), ndim)
    if named is None:
        raise ShardingError(
            f"{where}: {s!r} cannot be expressed over the program's mesh {mesh!r}; one "
            "program uses one mesh, so give every sharding in it the same Mesh")
    return named


def lowering_specs(shardings: Sequence[Any], avals: Sequence[ShapedArray],
                   labels: Sequence[str], devices: Sequence[Any],
                   extra: Sequence[Any] = (), prefer: Sequence[Any] = ()
                   ) -> tuple[list[Any], MeshShape | None, Mesh | None]:
    """The lowering layer's ``ShardingSpec`` (or ``UNSPECIFIED``) for each
    sharding, all over one mesh, with that ``MeshShape`` and lamina ``Mesh``.

    Single-device programs need no annotation. ``extra`` are shardings met
    elsewhere in the program (nested jits, constraints) that take part in
    choosing the mesh; ``prefer`` are shardings whose mesh wins (a shard_map's,
    whose axes its manual computation names).
    """
    if len(devices) == 1:
        return [UNSPECIFIED] * len(shardings), None, None
    concrete = [s for s in list(prefer) + list(shardings) + list(extra)
                if not is_unspecified(s)]
    mesh = _lead_mesh(concrete, devices)
    specs: list[Any] = []
    for s, aval, label in zip(shardings, avals, labels):
        if is_unspecified(s) or (isinstance(s, SingleDeviceSharding)):
            specs.append(UNSPECIFIED)
            continue
        named = _on_mesh(s, aval.ndim, mesh, label)
        specs.append(named.to_sharding_spec(aval.ndim, device_order=devices))
    mesh_shape = _mesh_shape(mesh, devices)
    return specs, mesh_shape, mesh


def _mesh_shape(mesh: Mesh, devices: Sequence[Any]) -> MeshShape:
    position = {d: i for i, d in enumerate(devices)}
    ids = tuple(position[d] for d in mesh._flat_devices)
    return MeshShape(mesh.axis_names, mesh.axis_sizes,
                     None if ids == tuple(range(len(ids))) else ids)


def sharding_for_output(hlo: Any, devices: Sequence[Any], mesh: Mesh | None,
                        ndim: int) -> Any:
    """A lamina sharding for a result laid out as ``hlo`` (XLA's choice): a
    NamedSharding over the program's mesh where one describes it."""
    if len(devices) == 1:
        return single_device_sharding(devices[0])
    if mesh is not None:
        named = named_sharding_from_hlo(mesh, hlo, ndim)
        if named is not None:
            return named
    return GSPMDSharding(list(devices), hlo)


# --- shardings inside lowering rules --------------------------------------------------------------
@dataclass(frozen=True)
class LoweringShardingContext:
    """What the lowering rules of nested shardings need: the program's device
    order and its mesh."""

    devices: tuple[Any, ...]
    mesh: Mesh | None


class _LoweringStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[LoweringShardingContext] = []


_lowering_stack = _LoweringStack()


@contextmanager
def lowering_sharding_context(devices: Sequence[Any],
                              mesh: Mesh | None) -> Iterator[LoweringShardingContext]:
    """Makes ``devices``/``mesh`` what nested shardings lower against (per thread)."""
    ctx = LoweringShardingContext(tuple(devices), mesh)
    stack = _lowering_stack.stack
    stack.append(ctx)
    try:
        yield ctx
    finally:
        stack.pop()


def current_lowering_context() -> LoweringShardingContext | None:
    stack = _lowering_stack.stack
    return stack[-1] if stack else None


def nested_spec(s: Any, aval: ShapedArray, where: str) -> ShardingSpec | None:
    """The ``ShardingSpec`` of a sharding met inside the program (a nested
    jit's or a constraint's), over the program's mesh; None when nothing needs
    to be annotated (single device)."""
    if is_unspecified(s) or isinstance(s, SingleDeviceSharding) or s.num_devices == 1:
        return None
    ctx = current_lowering_context()
    if ctx is None:
        devices: tuple[Any, ...] = tuple(s._device_assignment)
        mesh = s.mesh if isinstance(s, NamedSharding) else factor_mesh(devices)
    else:
        devices, mesh = ctx.devices, ctx.mesh or factor_mesh(ctx.devices)
    named = _on_mesh(s, aval.ndim, mesh, where)
    spec: ShardingSpec = named.to_sharding_spec(aval.ndim, device_order=devices)
    return spec


# --- batching ---------------------------------------------------------------------------------
def batch_sharding(s: Any, bdim: int, ndim: int, spmd_axis_name: Any = None) -> Any:
    """The sharding of a value that gained a batch axis at ``bdim`` (rank now
    ``ndim + 1``): the new axis is not split (or split over ``spmd_axis_name``)."""
    if is_unspecified(s) or isinstance(s, SingleDeviceSharding):
        return s
    if isinstance(s, NamedSharding):
        parts = list(s.spec) + [None] * max(0, ndim - len(s.spec))
        parts.insert(bdim, spmd_axis_name)
        return s.with_spec(PartitionSpec(*parts))
    if s.is_fully_replicated:
        return s
    if isinstance(s, (GSPMDSharding, PmapSharding)):
        mesh = factor_mesh(s._device_assignment)
        named = named_sharding_from_hlo(mesh, s._to_xla_hlo_sharding(ndim), ndim)
        if named is not None:
            return batch_sharding(named, bdim, ndim, spmd_axis_name)
    raise ShardingError(f"vmap of jit: cannot add a batch dimension to the sharding {s!r}; "
                        "use a NamedSharding")


def shard_label(kind: str, name: str | None, index: int) -> str:
    """``argument y['hi']`` / ``argument #3`` for messages."""
    return f"{kind} {name}" if name else f"{kind} #{index}"

