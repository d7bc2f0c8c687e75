"""Eager execution of the callback primitives.

Outside every transformation a callback needs no program: the host function
runs right away on the operands (as NumPy arrays) and its results are placed
on the default device, uncommitted, like any eager result. Inside staged
programs the lowering's custom calls run the same host functions (the
runtime registers them when it compiles; see ``effects_runtime``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_interpreters_pxla.array import Array, place_host_value
from lamina_interpreters_pxla.backends import default_device, device_list
from lamina_interpreters_pxla.compiler import compiling_devices
from lamina_interpreters_pxla.effects_runtime import callback_error
from lamina_interpreters_pxla.sharding import GSPMDSharding, single_device_sharding
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.callbacks import (
    HostCallback,
    debug_callback_p,
    inspect_sharding_p,
    io_callback_p,
    pure_callback_p,
)
from lamina_tracing_core.effects import HostEffect

__all__ = ["ShardingInspector", "run_host_callback"]


def _host(x: Any) -> np.ndarray:
    return np.asarray(x)


def run_host_callback(callback: HostCallback, args: tuple[Any, ...],
                      result_avals: tuple[ShapedArray, ...]) -> list[Array]:
    """Runs ``callback`` now on ``args``; its checked results as Arrays. A
    callback that raises gives the ``CallbackError`` a program would."""
    # Imported here: the callback lowering rules load MLIR's dialects, which
    # importing the runtime should not.
    from lamina_mlir_lowering.lax_rules.callbacks import HostFunction

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


class ShardingInspector:
    """What ``inspect_sharding_p`` calls with XLA's ``HloSharding`` while the
    program is compiled: ``user`` gets it as a lamina sharding over the
    program's devices. A program without partitions is called with None at
    lowering: the value is on one device (the default one). Eagerly ``user``
    gets the array's own sharding."""

    __slots__ = ("user",)

    def __init__(self, user: Callable[[Any], None]):
        self.user = user

    def __call__(self, hlo_sharding: Any) -> None:
        if hlo_sharding is None:
            self.user(single_device_sharding(default_device()))
            return
        devices = compiling_devices()
        if devices is None:
            raise RuntimeError("inspect_array_sharding: no program is being compiled")
        self.user(GSPMDSharding(device_list(devices), hlo_sharding))


@inspect_sharding_p.def_impl
def _inspect_sharding_impl(x: Any, *, callback: ShardingInspector) -> list[Any]:
    callback.user(x.sharding)
    return []
