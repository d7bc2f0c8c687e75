"""Callbacks into Python: ``pure_callback``, ``io_callback``, ``debug_callback``.

Each equation becomes a custom call to the host-callback handler jaxlib
registers (typed FFI, ``api_version = 4``): ``xla_ffi_python_cpu_callback``
on CPU, ``xla_ffi_python_gpu_callback`` on CUDA/ROCm (lowerable from any
host). Its ``backend_config`` holds ``index``, the position of the Python
function in the module's ``host_callbacks`` (``LoweringResult.host_callbacks``),
which the runtime hands to the client when it compiles the module. Effectful
callbacks are marked ``has_side_effect``; ordered ones take the module's
token and produce the next. TPU has no such handler in jaxlib: lowering a
callback for it is an error, as is a module lowered for several platforms.

The registered function is a :class:`HostFunction`: it checks what the
user's function returned against the declared results and keeps the
exception a callback raised, which the runtime re-raises from the call that
ran the program, naming the callback and the program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxlib import xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy
from jaxlib.mlir.dialects import stablehlo as hlo
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.callbacks import (
    HostCallback,
    debug_callback_p,
    inspect_sharding_p,
    io_callback_p,
    pure_callback_p,
)
from lamina_tracing_core.checks import check_p
from lamina_tracing_core.effects import HostEffect

from lamina_mlir_lowering.rules import LoweringRuleContext, register_lowering
from lamina_mlir_lowering.types import Value

__all__ = ["CALLBACK_TARGETS", "HostFunction", "PythonCallbackFunction", "emit_host_callback",
           "emit_python_callback"]

#: The custom-call target of the host-callback handler, per platform.
CALLBACK_TARGETS = {"cpu": "xla_ffi_python_cpu_callback",
                    "cuda": "xla_ffi_python_gpu_callback",
                    "rocm": "xla_ffi_python_gpu_callback"}


class HostFunction:
    """What the client calls for one callback custom call: the operands as
    NumPy arrays (after the token, when ``ordered``) in, a tuple of result
    arrays out (a ``None`` token first when ``ordered``).

    ``error`` keeps the last exception the callback raised (the runtime
    turns it into a ``CallbackError`` naming the callback and the program)."""

    __slots__ = ("callback", "result_avals", "ordered", "error")

    def __init__(self, callback: HostCallback, result_avals: Sequence[ShapedArray],
                 ordered: bool):
        self.callback = callback
        self.result_avals = tuple(result_avals)
        self.ordered = ordered
        self.error: BaseException | None = None

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        if self.ordered:
            args = args[1:]
        try:
            outs = self._results(self.callback(*args))
        except BaseException as e:
            self.error = e
            raise
        return (None, *outs) if self.ordered else outs

    def _results(self, outs: Any) -> tuple[np.ndarray, ...]:
        if not self.result_avals:
            return ()
        outs = tuple(outs)
        if len(outs) != len(self.result_avals):
            raise TypeError(f"{self.callback.where()} returned {len(outs)} values, but "
                            f"{len(self.result_avals)} results were declared")
        checked = []
        for i, (value, aval) in enumerate(zip(outs, self.result_avals)):
            x = np.asarray(value)
            if x.dtype != aval.dtype and dtypes.canonicalize_dtype(x.dtype) == aval.dtype:
                x = x.astype(aval.dtype)  # float64 for a float32 result without x64
            if x.shape != aval.shape or x.dtype != aval.dtype:
                raise TypeError(
                    f"{self.callback.where()}: result {i} is {x.dtype}{list(x.shape)}, but "
                    f"the declared result is {aval.str_short()}")
            checked.append(np.require(x, requirements="C"))  # keeps 0-d arrays 0-d
        return tuple(checked)

    def __repr__(self) -> str:
        return f"HostFunction({self.callback.where()})"


class PythonCallbackFunction(HostFunction):
    """The host function of :func:`emit_python_callback`: JAX's checks of the
    results (``RuntimeError`` naming the result that does not match), and a
    token threaded through first when the call has one."""

    __slots__ = ()

    def _results(self, outs: Any) -> tuple[np.ndarray, ...]:
        outs = tuple(outs)
        if len(outs) != len(self.result_avals):
            raise RuntimeError(f"Mismatched number of outputs from callback. Expected: "
                               f"{len(self.result_avals)}, Actual: {len(outs)}")
        checked = []
        for i, (value, aval) in enumerate(zip(outs, self.result_avals)):
            x = np.asarray(value)
            x = x.astype(dtypes.canonicalize_dtype(x.dtype), copy=False)
            if x.shape != aval.shape:
                raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                                   f"Expected: {aval.shape}, Actual: {x.shape}")
            if x.dtype != aval.dtype:
                raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                                   f"Expected: {aval.dtype}, Actual: {x.dtype}")
            checked.append(np.require(x, requirements="C"))
        return tuple(checked)


def _callback_target(ctx: LoweringRuleContext, where: str, partitioned: bool = False) -> str:
    """The custom-call target running a Python callback on ``ctx``'s one platform."""
    mctx = ctx.module_context
    if len(ctx.platforms) != 1 or len(mctx.platforms) != 1:
        raise ctx.error(f"{where} calls back into Python, which a module lowered "
                        f"for several platforms {mctx.platforms} cannot do; lower it for one "
                        "platform")
    platform = ctx.platform
    target = CALLBACK_TARGETS.get(platform)
    if target is None:
        raise ctx.error(f"{where} calls back into Python, but jaxlib has no host "
                        f"callback mechanism for platform {platform!r} (it has one for "
                        f"{', '.join(sorted(CALLBACK_TARGETS))})")
    # jaxlib's partitioned handlers: the callback runs once per local shard
    return target.replace("xla_ffi_python", "xla_ffi_partitioned_python") if partitioned else target


def _callback_op(ctx: LoweringRuleContext, target: str, fun: HostFunction,
                 operands: Sequence[Value], result_avals: Sequence[ShapedArray],
                 token: Value | None, has_side_effect: bool) -> Any:
    """The FFI custom call to ``target`` running ``fun`` (registered with the
    module), with ``token`` threaded first when given."""
    index = ctx.module_context.add_host_callback(fun)
    types = ctx.module_context.types
    token_types = [hlo.TokenType.get()] if token is not None else []
    result_types = token_types + [types.tensor(a) for a in result_avals]
    args = ([token] if token is not None else []) + list(operands)
    u64 = ir.IntegerType.get_unsigned(64)
    return hlo.CustomCallOp(
        result_types, args, call_target_name=ir.StringAttr.get(target),
        has_side_effect=ir.BoolAttr.get(has_side_effect),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        backend_config=ir.DictAttr.get({"index": ir.IntegerAttr.get(u64, index)}))


def emit_host_callback(ctx: LoweringRuleContext, callback: HostCallback,
                       operands: Sequence[Value], result_avals: Sequence[ShapedArray], *,
                       has_side_effect: bool, ordered: bool) -> list[Value]:
    """The custom call running ``callback`` on ``operands``; its results."""
    mctx = ctx.module_context
    target = _callback_target(ctx, callback.where())
    token = mctx.take_token() if ordered else None
    op = _callback_op(ctx, target, HostFunction(callback, result_avals, ordered), operands,
                      result_avals, token, has_side_effect)
    if mctx.num_partitions > 1:
        _on_first_device(mctx.sharding_format, op, result_avals, ordered)
    results: list[Value] = list(op.results)
    if ordered:
        mctx.token = results.pop(0)
    return results


def emit_python_callback(ctx: LoweringRuleContext, callback: Callable[..., Any],
                         token: Value | None, operands: Sequence[Value],
                         operand_avals: Sequence[ShapedArray],
                         result_avals: Sequence[ShapedArray], *, has_side_effect: bool,
                         returns_token: bool = True, partitioned: bool = False,
                         sharding: Any = None) -> tuple[list[Value], Value | None, Any]:
    """JAX's ``mlir.emit_python_callback``, for lowering rules of primitives
    that run Python: a custom call running ``callback(*operands)`` on the host
    (NumPy arrays in, a sequence of one array per ``result_avals`` out).

    ``token``, when not None, is threaded through the call (ordered effects);
    ``partitioned`` runs the callback on each local shard (no results allowed);
    ``sharding`` (an ``OpSharding`` or ``HloSharding``) is put on the call, which
    otherwise runs on the first device of a program with several. Returns the
    results, the new token (None without one) and the host function, which
    the caller keeps alive (``ctx.module_context.add_keepalive``)."""
    del operand_avals, returns_token  # the custom call's operand types say the former
    if partitioned and result_avals:
        raise ValueError("Partitioned callback not supported with return values.")
    name = getattr(callback, "__name__", type(callback).__name__)
    host = HostCallback(callback, api="emit_python_callback", description=name)
    target = _callback_target(ctx, host.where(), partitioned)
    fun = PythonCallbackFunction(host, result_avals, ordered=token is not None)
    op = _callback_op(ctx, target, fun, operands, result_avals, token, has_side_effect)
    if sharding is not None:
        op.attributes["mhlo.sharding"] = ir.StringAttr.get(_op_sharding_bytes(sharding))
    elif ctx.module_context.num_partitions > 1 and not partitioned:
        _on_first_device(ctx.module_context.sharding_format, op, result_avals,
                         token is not None)
    results: list[Value] = list(op.results)
    new_token = results.pop(0) if token is not None else None
    return results, new_token, fun


def _op_sharding_bytes(sharding: Any) -> bytes:
    if isinstance(sharding, xc.HloSharding):
        sharding = sharding.to_proto()
    if not isinstance(sharding, xc.OpSharding):
        raise TypeError(f"emit_python_callback: sharding must be an OpSharding or an "
                        f"HloSharding, got {type(sharding).__name__}")
    return bytes(sharding.SerializeToString())


def _on_first_device(sharding_format: str, op: Any, result_avals: Sequence[ShapedArray],
                     ordered: bool) -> None:
    """An SPMD program runs the callback once, on its first device (a maximal
    sharding; XLA requires one on every side-effecting op)."""
    if sharding_format != "shardy":
        op.attributes["mhlo.sharding"] = ir.StringAttr.get("{maximal device=0}")
        return
    # a maximal sharding has no dimension shardings, whatever the result's rank
    first = sdy.TensorShardingAttr.get(sdy.MeshAttr.get([], [0]), [])
    count = max(1, int(ordered) + len(result_avals))  # an op without results carries one too
    op.attributes["sdy.sharding"] = sdy.TensorShardingPerValueAttr.get([first] * count)


def _pure_callback(ctx: LoweringRuleContext, *operands: Value, callback: HostCallback,
                   result_avals: Sequence[ShapedArray], vmap_method: str | None
                   ) -> list[Value]:
    return emit_host_callback(ctx, callback, operands, result_avals, has_side_effect=False,
                              ordered=False)


def _io_callback(ctx: LoweringRuleContext, *operands: Value, callback: HostCallback,
                 result_avals: Sequence[ShapedArray], ordered: bool) -> list[Value]:
    return emit_host_callback(ctx, callback, operands, result_avals, has_side_effect=True,
                              ordered=ordered)


def _debug_callback(ctx: LoweringRuleContext, *operands: Value, callback: HostCallback,
                    effect: HostEffect) -> list[Value]:
    return emit_host_callback(ctx, callback, operands, (), has_side_effect=True,
                              ordered=effect.ordered)


def _unchecked(ctx: LoweringRuleContext, *operands: Value, message: str, fmt_tree: Any,
               source: Any) -> list[Value]:
    raise ctx.error(f"checkify.check({message!r}) at {source} reached a compiled program "
                    "without checkify: wrap the function in checkify.checkify(...) to get its "
                    "errors as values (a check has nothing to report to otherwise)")


def _inspect_sharding(ctx: LoweringRuleContext, x: Value, *,
                      callback: Callable[[Any], None]) -> list[Value]:
    """XLA's SPMD partitioner calls ``callback`` with the operand's
    ``HloSharding`` (the ``InspectSharding`` custom call jaxlib handles); a
    program without partitions has nothing to choose: ``callback(None)`` says
    so right away (the value lives on the program's one device)."""
    mctx = ctx.module_context
    if mctx.num_partitions == 1:
        callback(None)
        return []
    mctx.sharding_inspectors.append(callback)
    hlo.CustomCallOp(
        [x.type], [x], call_target_name=ir.StringAttr.get("InspectSharding"),
        has_side_effect=ir.BoolAttr.get(True),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1),
        backend_config=ir.StringAttr.get(xc.encode_inspect_sharding_callback(callback)))
    return []


register_lowering(inspect_sharding_p, _inspect_sharding)
register_lowering(check_p, _unchecked)
register_lowering(pure_callback_p, _pure_callback)
register_lowering(io_callback_p, _io_callback)
register_lowering(debug_callback_p, _debug_callback)
