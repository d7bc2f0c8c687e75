"""``lamina.interpreters.batching``: vmap rules (JAX's
``jax.interpreters.batching``), over tracing-core's tables.

- ``primitive_batchers[prim] = rule(args, dims, **params) -> (out, out_dims)``:
  called only when some argument is batched; ``not_mapped`` (``None``) marks
  an unbatched argument or output.
- ``fancy_primitive_batchers[prim] = rule(axis_data, args, dims, **params)``:
  also given the vmapped axis (``axis_data.size``, ``.name``), and called
  even when nothing is batched.
- ``axis_primitive_batchers[prim] = rule(axis_size, axis_name, trace_type,
  args, dims, **params)``: JAX's older form, stored as a fancy rule
  (``trace_type`` is always None); the table can only be written.
- ``defvectorized``, ``defbroadcasting``, ``defreducer`` build the rules of
  elementwise and reducing primitives; ``bdim_at_front``, ``broadcast`` and
  ``moveaxis`` move batch dims in rules.
- ``register_vmappable(data_type, spec_type, axis_size_type, to_elt,
  from_elt, make_iota)`` lets ``vmap`` take and return a container type whole
  (``unregister_vmappable`` undoes it); see tracing-core's ``vmappable``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.base_primitives import bdim_at_front as _bdim_at_front
from lamina_tracing_core.base_primitives import broadcast_batch
from lamina_tracing_core.base_primitives import moveaxis as moveaxis
from lamina_tracing_core.batching import AxisData as AxisData
from lamina_tracing_core.batching import BatchTrace as BatchTrace
from lamina_tracing_core.batching import BatchTracer as BatchTracer
from lamina_tracing_core.batching import fancy_primitive_batchers as fancy_primitive_batchers
from lamina_tracing_core.batching import not_mapped as not_mapped
from lamina_tracing_core.lax.helpers import defbroadcasting as defbroadcasting
from lamina_tracing_core.lax.helpers import defvectorized as defvectorized
from lamina_tracing_core.primitives import Primitive
from lamina_tracing_core.primitives import batching_rules as primitive_batchers
from lamina_tracing_core.vmappable import register_vmappable as register_vmappable
from lamina_tracing_core.vmappable import unregister_vmappable as unregister_vmappable

__all__ = [
    "AxisData", "BatchTrace", "BatchTracer", "axis_primitive_batchers", "bdim_at_front",
    "broadcast", "defbroadcasting", "defreducer", "defvectorized", "fancy_primitive_batchers",
    "moveaxis", "not_mapped", "primitive_batchers", "register_vmappable", "unregister_vmappable",
]


class _AxisPrimitiveBatchers:
    """Write-only: ``axis_primitive_batchers[prim] = rule`` stores ``rule``
    (JAX's ``(axis_size, axis_name, trace_type, args, dims, **params)`` form)
    as ``prim``'s fancy rule."""

    def __setitem__(self, prim: Primitive, rule: Callable[..., Any]) -> None:
        def fancy(axis_data: AxisData, args: Sequence[Any], dims: Sequence[int | None],
                  **params: Any) -> Any:
            return rule(axis_data.size, axis_data.name, None, args, dims, **params)

        fancy_primitive_batchers[prim] = fancy

    def __delitem__(self, prim: Primitive) -> None:
        del fancy_primitive_batchers[prim]

    def __contains__(self, prim: object) -> bool:
        return prim in fancy_primitive_batchers


axis_primitive_batchers = _AxisPrimitiveBatchers()


def bdim_at_front(x: Any, bdim: int | None, size: int, mesh_axis: object = None) -> Any:
    """``x`` with its batch dim first; an unbatched ``x`` is broadcast to
    ``size`` (``mesh_axis`` is accepted for JAX's signature; lamina's avals
    carry no mesh axes)."""
    del mesh_axis
    return _bdim_at_front(x, bdim, size)


def broadcast(x: Any, sz: int, axis: int, mesh_axis: object = None) -> Any:
    """An unbatched ``x`` given a new axis of size ``sz`` at ``axis``."""
    del mesh_axis
    return broadcast_batch(x, sz, axis)


def defreducer(prim: Primitive) -> None:
    """Batching of a reduction whose ``axes`` param names the reduced axes:
    the axes are renumbered around the batch dim, which survives the
    reduction."""
    def rule(args: Sequence[Any], dims: Sequence[int | None], *, axes: Sequence[int],
             **params: Any) -> tuple[Any, int]:
        (operand,), (bdim,) = args, dims
        assert bdim is not None
        ndim = get_aval(operand).ndim
        bdim %= ndim
        moved = tuple(a + 1 if a >= bdim else a for a in (int(a) % (ndim - 1) for a in axes))
        kept = [d for d in range(ndim) if d not in moved]
        if "input_shape" in params:
            params = dict(params, input_shape=get_aval(operand).shape)
        return prim.bind(operand, axes=moved, **params), kept.index(bdim)

    primitive_batchers[prim] = rule
