"""Custom calls: operations that run a kernel registered with XLA by name.

jaxlib registers typed-FFI kernels with XLA (on CPU, its LAPACK kernels
``lapack_<s|d|c|z><routine>_ffi``); a lowering rule calls one with
:func:`ffi_call`, and :func:`ffi_lowering` makes the whole rule of a
primitive that is one such call. Layouts default to row-major (the kernel
sees C-order arrays); LAPACK routines want column-major matrices, which the
``operand_layouts``/``result_layouts`` arguments give (minor-to-major
dimension orders, as XLA writes layouts).

``ensure_lapack_targets()`` binds jaxlib's LAPACK kernels to SciPy's LAPACK
and registers them, once per process; lowering rules that call them run it
first (JAX does this when it is imported; lamina waits for the first use).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
from jaxlib import xla_client
from jaxlib.cpu import _lapack  # type: ignore[attr-defined]  # no stubs
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core.avals import ShapedArray

from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext
from lamina_mlir_lowering.types import Value

__all__ = ["default_layout", "ensure_lapack_targets", "ffi_attribute", "ffi_call",
           "ffi_lowering"]

Layout = Sequence[int]

_lapack_registered = False


def ensure_lapack_targets() -> None:
    """Registers jaxlib's CPU LAPACK kernels as custom-call targets (typed FFI
    for the ``*_ffi`` names), bound to SciPy's LAPACK; idempotent."""
    global _lapack_registered
    if _lapack_registered:
        return
    _lapack.initialize()
    for name, fn in _lapack.registrations().items():
        ffi = name.endswith("_ffi")
        xla_client.register_custom_call_target(name, fn, platform="cpu", api_version=int(ffi))
        if ffi:
            xla_client.register_custom_call_as_batch_partitionable(name)
    _lapack_registered = True


def default_layout(aval: ShapedArray) -> tuple[int, ...]:
    """Row-major (C order): the last dimension is the most minor."""
    return tuple(range(aval.ndim - 1, -1, -1))


def _layouts_attr(layouts: Sequence[Layout]) -> ir.ArrayAttr:
    index = ir.IndexType.get()
    return ir.ArrayAttr.get([
        ir.DenseIntElementsAttr.get(cast(Any, np.array(lay, np.int64).reshape(len(lay))),
                                    type=index)
        for lay in layouts])


def ffi_attribute(value: Any) -> ir.Attribute:
    """An FFI attribute from a Python value: an ``ir.Attribute`` as is, a bool,
    an int (i64), a float (f64), a str, a NumPy scalar of its own type, a
    NumPy array (a dense elements attribute of its dtype and shape), or a
    dict of str keys (a dictionary of such attributes)."""
    if isinstance(value, ir.Attribute):
        return value
    if isinstance(value, np.ndarray):
        dense: ir.Attribute = ir.DenseElementsAttr.get(cast(Any, np.ascontiguousarray(value)))
        return dense
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"ffi_attribute: a dict attribute needs str keys, got {value!r}")
        return ir.DictAttr.get({k: ffi_attribute(v) for k, v in value.items()})
    if isinstance(value, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(value))
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, np.generic):
        dt = value.dtype
        if dt.kind in "iu":
            ty = (ir.IntegerType.get_unsigned(dt.itemsize * 8) if dt.kind == "u"
                  else ir.IntegerType.get_signless(dt.itemsize * 8))
            return ir.IntegerAttr.get(ty, int(value))
        if dt.kind == "f":
            return ir.FloatAttr.get(ir.F32Type.get() if dt.itemsize == 4 else ir.F64Type.get(),
                                    float(value))
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get(ir.F64Type.get(), value)
    raise TypeError(f"ffi_attribute: cannot pass {type(value).__name__} {value!r} to an FFI "
                    f"kernel (use a bool, int, float, str, NumPy scalar or ir.Attribute)")


def ffi_call(ctx: LoweringRuleContext, target: str, operands: Sequence[Value],
             result_avals: Sequence[ShapedArray], *,
             operand_layouts: Sequence[Layout] | None = None,
             result_layouts: Sequence[Layout] | None = None,
             operand_output_aliases: Mapping[int, int] | None = None,
             has_side_effect: bool = False,
             frontend_attributes: Mapping[str, str] | None = None,
             api_version: int = 4,
             legacy_backend_config: str | None = None,
             **attributes: Any) -> list[Value]:
    """Emits a typed-FFI custom call of ``target`` on ``operands`` with
    results of ``result_avals`` and returns the results. ``attributes`` reach
    the kernel by name (see :func:`ffi_attribute`);
    ``operand_output_aliases`` maps an operand index to the result it is
    updated in place into.

    ``api_version`` 4 (the default) is XLA's typed FFI, written as JAX writes
    it: ``api_version`` left at StableHLO's default and the attributes in
    ``mhlo.backend_config``, which tells XLA the call is typed. A lower
    version calls a legacy custom-call target: it takes no attributes, and
    ``legacy_backend_config`` is its opaque ``backend_config`` string."""
    typed = api_version >= 4
    if typed and legacy_backend_config is not None:
        raise ctx.error(f"ffi_call({target!r}): legacy_backend_config needs an api_version "
                        f"below 4, got {api_version}")
    if not typed and attributes:
        raise ctx.error(f"ffi_call({target!r}): attributes ({', '.join(sorted(attributes))}) "
                        f"need an api_version of at least 4, got {api_version}")
    types = ctx.module_context.types
    operand_avals = ctx.avals_in if len(ctx.avals_in) == len(operands) else None
    if operand_layouts is None:
        if operand_avals is None:
            raise ctx.error(f"ffi_call({target!r}): give operand_layouts for operands other "
                            f"than the equation's")
        operand_layouts = [default_layout(a) for a in operand_avals]
    if result_layouts is None:
        result_layouts = [default_layout(a) for a in result_avals]
    result_types = [types.tensor(a) for a in result_avals]
    multi = len(result_types) > 1
    aliases = operand_output_aliases or {}
    op_attributes: dict[str, ir.Attribute] = {
        "call_target_name": ir.StringAttr.get(target),
        "has_side_effect": ir.BoolAttr.get(has_side_effect),
        "backend_config": ir.StringAttr.get(legacy_backend_config or ""),
        "api_version": ir.IntegerAttr.get(ir.IntegerType.get_signless(32),
                                          1 if typed else api_version),
        "called_computations": ir.ArrayAttr.get([]),
        "operand_layouts": _layouts_attr(operand_layouts),
        "result_layouts": _layouts_attr(result_layouts),
        "output_operand_aliases": ir.ArrayAttr.get([
            hlo.OutputOperandAlias.get(output_tuple_indices=[out] if multi else [],
                                       operand_index=inp, operand_tuple_indices=[])
            for inp, out in aliases.items()]),
    }
    op = hlo.CustomCallOp.build_generic(results=result_types, operands=list(operands),
                                        attributes=op_attributes)
    if typed:
        op.operation.attributes["mhlo.backend_config"] = ir.DictAttr.get(
            {k: ffi_attribute(v) for k, v in attributes.items()})
    if frontend_attributes:
        op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
            {k: ir.StringAttr.get(v) for k, v in frontend_attributes.items()})
    return list(op.results)


def ffi_lowering(target: str, *, operand_layouts: Sequence[Layout] | None = None,
                 result_layouts: Sequence[Layout] | None = None,
                 **attributes: Any) -> LoweringRule:
    """The lowering rule of a primitive that is one call of ``target``: its
    operands are the equation's, its results have the equation's output
    avals, and the equation's params join ``attributes`` as the kernel's
    attributes."""
    def rule(ctx: LoweringRuleContext, *args: Value, **params: Any) -> list[Value]:
        return ffi_call(ctx, target, args, ctx.avals_out, operand_layouts=operand_layouts,
                        result_layouts=result_layouts, **attributes, **params)

    rule.__name__ = f"ffi_lowering[{target}]"
    return rule
