"""Eager execution of the callback primitives.

Outside every transformation a callback needs no program: the host function
runs right away on the operands (as NumPy arrays) and its results are placed
on the default device, uncommitted, like any eager result. Inside staged
programs the lowering's custom calls run the same host functions (the
runtime registers them when it compiles; see ``effects_runtime``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_interpreters_pxla.array import Array, place_host_value
from lamina_interpreters_pxla.effects_runtime import callback_error
from lamina_mlir_lowering.lax_rules.callbacks import HostFunction
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.callbacks import (
    HostCallback,
    debug_callback_p,
    io_callback_p,
    pure_callback_p,
)
from lamina_tracing_core.effects import HostEffect

__all__ = ["run_host_callback"]


def _host(x: Any) -> np.ndarray:
    return np.asarray(x)


def run_host_callback(callback: HostCallback, args: tuple[Any, ...],
                      result_avals: tuple[ShapedArray, ...]) -> list[Array]:
    """Runs ``callback`` now on ``args``; its checked results as Arrays. A
    callback that raises gives the ``CallbackError`` a program would."""
    fun = HostFunction(callback, result_avals, ordered=False)
    try:
        outs = fun(*[_host(x) for x in args])
    except Exception as e:
        failed = callback_error([fun], "eagerly", e)
        if failed is not None:
            raise failed from e
        raise
    return [place_host_value(o, None, committed=False) for o in outs]


@pure_callback_p.def_impl
def _pure_callback_impl(*args: Any, callback: HostCallback,
                        result_avals: tuple[ShapedArray, ...], vmap_method: str | None
                        ) -> list[Array]:
    return run_host_callback(callback, args, tuple(result_avals))


@io_callback_p.def_impl
def _io_callback_impl(*args: Any, callback: HostCallback, result_avals: tuple[ShapedArray, ...],
                      ordered: bool) -> list[Array]:
    return run_host_callback(callback, args, tuple(result_avals))


@debug_callback_p.def_impl
def _debug_callback_impl(*args: Any, callback: HostCallback, effect: HostEffect) -> list[Any]:
    run_host_callback(callback, args, ())
    return []
