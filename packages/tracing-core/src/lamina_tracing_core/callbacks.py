"""Callbacks into Python from staged programs: the three callback primitives.

- ``pure_callback_p``: a side-effect-free host function with declared
  results (``callback``, ``result_avals``, ``vmap_method``). No effect: dead
  code elimination may drop it. Not differentiable (wrap it in
  ``custom_jvp``); batched per ``vmap_method`` (``'sequential'``: a
  ``lax.map`` over the batch; ``'expand_dims'``: one call with the batch axis
  in front, unbatched operands given a leading axis of size 1;
  ``'broadcast_all'``: one call, every operand broadcast to the batch).
- ``io_callback_p``: a host function with side effects and declared results
  (``callback``, ``result_avals``, ``ordered``); its effect is ``OrderedIO``
  or ``UnorderedIO``. Not differentiable; an unordered one batches
  sequentially, an ordered one cannot be batched.
- ``debug_callback_p``: a host function without results (``callback``,
  ``effect``: ``OrderedDebug`` or ``UnorderedDebug``). Under JVP it runs on
  the primals (so ``grad`` prints in the forward pass); under ``vmap`` it runs
  once per batch element, in order (one host call walks the batch).

- ``inspect_sharding_p``: ``callback(sharding)`` is called, while the
  program is compiled, with the sharding XLA chose for the operand (no
  results; kept by dead-code elimination through ``UnorderedDebug``).

``callback`` is a :class:`HostCallback`: the flat host function (NumPy arrays
in, a sequence of NumPy arrays out) with what error messages name it by. The
lowering (mlir-lowering) turns the equations into the host-callback custom
calls jaxlib registers; the runtime registers the functions with the client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core import batching
from lamina_tracing_core import source_info as _si
from lamina_tracing_core.ad_util import Zero
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core import control_flow  # scan loads at the first batched callback
from lamina_tracing_core.effects import (
    Effects,
    HostEffect,
    OrderedIO,
    UnorderedDebug,
    UnorderedIO,
)
from lamina_tracing_core.lax import structural
from lamina_tracing_core.primitives import Primitive

__all__ = [
    "CallbackError", "HostCallback", "VMAP_METHODS", "batch_axis_first", "debug_callback_p",
    "inspect_sharding_p", "io_callback_p", "pure_callback_p",
]

#: The values of ``pure_callback``'s ``vmap_method`` (None: not batchable).
VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all")


class CallbackError(RuntimeError):
    """A host callback raised while a program ran; the message names the
    callback, where it was defined and the program (the original exception is
    the ``__cause__``)."""


class HostCallback:
    """The host function a callback equation calls.

    ``fun(*arrays)`` takes the operands as NumPy arrays and returns a
    sequence with one array per declared result (ignored for debug
    callbacks). ``api`` names the API that made it (``'pure_callback'``,
    ``'io_callback'``, ``'debug.callback'``, ``'debug.print'``),
    ``description`` the user's function (or format string), ``source`` where
    the call was traced. Compared by identity: a new callback is a new
    program."""

    __slots__ = ("fun", "api", "description", "source")

    def __init__(self, fun: Callable[..., Any], *, api: str, description: str,
                 source: _si.SourceInfo | None = None):
        self.fun = fun
        self.api = api
        self.description = description
        self.source = source if source is not None else _si.current_source_info()

    def __call__(self, *arrays: Any) -> Any:
        return self.fun(*arrays)

    def where(self) -> str:
        """``debug.print('x={x}') at user.py:12 (f)``."""
        return f"{self.api}({self.description}) at {self.source}"

    def __repr__(self) -> str:
        return f"HostCallback({self.api}, {self.description})"


pure_callback_p = Primitive("pure_callback", multiple_results=True)
io_callback_p = Primitive("io_callback", multiple_results=True)
debug_callback_p = Primitive("debug_callback", multiple_results=True)


# --- abstract evaluation and effects ---------------------------------------------------
def _declared_results(*avals: ShapedArray, result_avals: Sequence[ShapedArray],
                      **_: Any) -> list[ShapedArray]:
    return list(result_avals)


pure_callback_p.def_abstract_eval(_declared_results)
io_callback_p.def_abstract_eval(_declared_results)


@debug_callback_p.def_abstract_eval
def _debug_callback_abstract_eval(*avals: ShapedArray, callback: HostCallback,
                                  effect: HostEffect) -> list[ShapedArray]:
    return []


@io_callback_p.def_effects
def _io_callback_effects(*, ordered: bool, **_: Any) -> Effects:
    return frozenset({OrderedIO if ordered else UnorderedIO})


@debug_callback_p.def_effects
def _debug_callback_effects(*, effect: HostEffect, **_: Any) -> Effects:
    return frozenset({effect})


# --- differentiation ---------------------------------------------------------------------
def _not_differentiable(prim: Primitive, advice: str) -> Callable[..., Any]:
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        outs = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            # nothing flows through the callback: its results are constants
            return outs, [Zero.from_primal_value(o) for o in outs]
        raise ValueError(f"{params['callback'].where()} cannot be differentiated: {advice}")

    def transpose(cts: Sequence[Any], *args: Any, **params: Any) -> Any:
        raise ValueError(f"{params['callback'].where()} cannot be transposed: {advice}")

    prim.def_jvp(jvp)
    prim.def_transpose(transpose)
    return jvp


_not_differentiable(pure_callback_p, "pure callbacks are not differentiable; wrap the "
                    "function in custom_jvp (or custom_vjp) to give it a derivative")
_not_differentiable(io_callback_p, "IO callbacks do not support JVP; wrap the function in "
                    "custom_jvp (or custom_vjp) to give it a derivative")


@debug_callback_p.def_jvp
def _debug_callback_jvp(primals: Sequence[Any], tangents: Sequence[Any],
                        **params: Any) -> tuple[list[Any], list[Any]]:
    debug_callback_p.bind(*primals, **params)
    return [], []


@debug_callback_p.def_transpose
def _debug_callback_transpose(cts: Sequence[Any], *args: Any, **params: Any) -> list[Any]:
    raise ValueError(f"{params['callback'].where()}: debugging callbacks cannot be "
                     "transposed (they run on primal values only)")


# --- batching ------------------------------------------------------------------------------
def _batch_size(args: Sequence[Any], dims: Sequence[int | None]) -> int:
    for x, d in zip(args, dims):
        if d is not None:
            return int(get_aval(x).shape[d])
    raise ValueError("callback batching: no operand is batched")


def _sequential(prim: Primitive, args: Sequence[Any], dims: Sequence[int | None],
                params: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """One callback per batch element, in order: a ``lax.map`` over the
    batched operands (moved to the front), the unbatched ones closed over."""
    batched = [(i, d) for i, d in enumerate(dims) if d is not None]
    xs = [batching.moveaxis(args[i], d, 0) for i, d in batched]

    def one(slices: list[Any]) -> Any:
        operands = list(args)
        for (i, _), x in zip(batched, slices):
            operands[i] = x
        return prim.bind(*operands, **params)

    outs = control_flow.lax_map(one, xs)
    return list(outs), [0] * len(outs)


def batch_axis_first(args: Sequence[Any], dims: Sequence[int | None], size: int,
                     vmap_method: str) -> list[Any]:
    """The operands of a host call batched by ``vmap_method``: batched ones
    with their batch axis moved first; unbatched ones broadcast to ``size``
    (``'broadcast_all'``), given a leading axis of 1 (``'expand_dims'``) or
    left as they are (``'legacy_vectorized'``)."""
    operands = []
    for x, d in zip(args, dims):
        if d is not None:
            operands.append(batching.moveaxis(x, d, 0))
        elif vmap_method == "broadcast_all":
            operands.append(batching.broadcast_batch(x, size, 0))
        elif vmap_method == "expand_dims":
            operands.append(structural.expand_dims(x, [0]))
        else:
            operands.append(x)
    return operands


def _pure_callback_batch(args: Sequence[Any], dims: Sequence[int | None], *,
                         callback: HostCallback, result_avals: Sequence[ShapedArray],
                         vmap_method: str | None) -> tuple[list[Any], list[int]]:
    params = dict(callback=callback, result_avals=tuple(result_avals), vmap_method=vmap_method)
    if vmap_method == "sequential":
        return _sequential(pure_callback_p, args, dims, params)
    if vmap_method not in ("expand_dims", "broadcast_all"):
        raise ValueError(
            f"{callback.where()} is applied under vmap, but it was made with "
            f"vmap_method={vmap_method!r}: pass vmap_method= one of {VMAP_METHODS} to say how "
            "the callback handles a batch")
    size = _batch_size(args, dims)
    operands = batch_axis_first(args, dims, size, vmap_method)
    batched_avals = tuple(a.update(shape=(size, *a.shape)) for a in result_avals)
    outs = pure_callback_p.bind(*operands, callback=callback, result_avals=batched_avals,
                                vmap_method=vmap_method)
    return list(outs), [0] * len(outs)


@io_callback_p.def_batching
def _io_callback_batch(args: Sequence[Any], dims: Sequence[int | None], *,
                       callback: HostCallback, result_avals: Sequence[ShapedArray],
                       ordered: bool) -> tuple[list[Any], list[int]]:
    if ordered:
        raise ValueError(f"{callback.where()}: an ordered io_callback cannot be vmapped "
                         "(its calls would have no program order); use ordered=False")
    return _sequential(io_callback_p, args, dims,
                       dict(callback=callback, result_avals=tuple(result_avals), ordered=False))


@debug_callback_p.def_batching
def _debug_callback_batch(args: Sequence[Any], dims: Sequence[int | None], *,
                          callback: HostCallback, effect: HostEffect
                          ) -> tuple[list[Any], list[int]]:
    """One callback per batch element, element 0 first (as JAX prints): a
    single host call that walks the batch, so the order is the program's."""
    size = _batch_size(args, dims)
    operands = [x if d is None else batching.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    batched = [d is not None for d in dims]

    def per_element(*arrays: Any) -> tuple[()]:
        for i in range(size):
            callback(*[a[i] if b else a for a, b in zip(arrays, batched)])
        return ()

    walk = HostCallback(per_element, api=callback.api, description=callback.description,
                        source=callback.source)
    debug_callback_p.bind(*operands, callback=walk, effect=effect)
    return [], []


pure_callback_p.def_batching(_pure_callback_batch)


# --- inspecting shardings ----------------------------------------------------------------
inspect_sharding_p = Primitive("inspect_sharding", multiple_results=True)
inspect_sharding_p.def_abstract_eval(lambda x, *, callback: [])
inspect_sharding_p.def_effects(lambda **_: frozenset({UnorderedDebug}))


@inspect_sharding_p.def_jvp
def _inspect_sharding_jvp(primals: Sequence[Any], tangents: Sequence[Any],
                          **params: Any) -> tuple[list[Any], list[Any]]:
    inspect_sharding_p.bind(*primals, **params)
    return [], []


@inspect_sharding_p.def_batching
def _inspect_sharding_batch(args: Sequence[Any], dims: Sequence[int | None],
                            **params: Any) -> tuple[list[Any], list[Any]]:
    inspect_sharding_p.bind(*args, **params)  # the sharding of the whole batch
    return [], []
