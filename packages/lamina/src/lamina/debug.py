"""``lamina.debug``: printing, callbacks, breakpoints and sharding pictures
from inside traced code, as ``jax.debug``.

- ``print(fmt, *args, ordered=False, **kwargs)`` prints ``fmt.format(*args,
  **kwargs)`` with the runtime values: once per call eagerly and under
  ``jit``, once per batch element under ``vmap``, in the forward pass under
  ``grad``, per iteration in loops, per device under ``pmap``.
- ``callback(f, *args, ordered=False, **kwargs)`` calls ``f`` with the values
  (NumPy arrays in the arguments' structure); it returns nothing and is never
  removed as dead code. ``ordered=True`` keeps program order, within and
  across calls (``effects_barrier()`` waits for every pending one).
- ``breakpoint()`` stops in ``pdb`` when the program reaches it, with the
  caller's array variables (their runtime values) as the frame's names.
- ``visualize_array_sharding(x)`` draws which device holds which part of a
  1-D or 2-D array, as a plain-text grid; ``inspect_array_sharding(x,
  callback=f)`` calls ``f`` with ``x``'s sharding (inside ``jit``: the one
  XLA chose, when the program is compiled).
"""

from __future__ import annotations

import builtins
import pdb
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.callbacks import ShardingInspector
from lamina_interpreters_pxla.effects_runtime import effects_barrier
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core.callbacks import HostCallback, debug_callback_p, inspect_sharding_p
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.effects import OrderedDebug, UnorderedDebug

from lamina.callbacks import flat_operands

__all__ = ["breakpoint", "callback", "effects_barrier", "inspect_array_sharding", "print",
           "visualize_array_sharding", "visualize_sharding"]


def _debug_callback(api: str, description: str, fun: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any], ordered: bool) -> None:
    operands, in_tree = flat_operands(api, args, kwargs)

    def host(*flat: Any) -> tuple[()]:
        call_args, call_kwargs = tu.tree_unflatten(in_tree, list(flat))
        fun(*call_args, **call_kwargs)
        return ()

    debug_callback_p.bind(*operands,
                          callback=HostCallback(host, api=api, description=description),
                          effect=OrderedDebug if ordered else UnorderedDebug)


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False,
             partitioned: bool = False, **kwargs: Any) -> None:
    """Calls ``callback(*args, **kwargs)`` with the runtime values (see the
    module docstring). ``partitioned`` is accepted for JAX's signature; lamina
    always calls back with the whole value."""
    if not callable(callback):
        raise TypeError(f"debug.callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    del partitioned
    _debug_callback("debug.callback", api_util.fun_name(callback), callback, args, kwargs,
                    ordered)


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:  # noqa: A001
    """Prints ``fmt.format(*args, **kwargs)`` with the runtime values of the
    arguments (``str.format`` semantics), from inside traced code too."""
    if not isinstance(fmt, str):
        raise TypeError(f"debug.print: fmt must be a str, got {type(fmt).__name__}")

    def emit(*a: Any, **k: Any) -> None:
        sys.stdout.write(fmt.format(*a, **k) + "\n")

    _debug_callback("debug.print", repr(fmt), emit, args, kwargs, ordered)


def _is_array_like(x: Any) -> bool:
    return isinstance(x, (Tracer, Array, np.ndarray, np.generic))


def breakpoint(*, backend: str | None = None, filter_frames: bool = True,  # noqa: A001
               num_frames: int | None = None, ordered: bool = False,
               token: Any = None, **kwargs: Any) -> Any:
    """Enters ``pdb`` when the program reaches this point, in a frame whose
    names are the caller's variables, array ones holding their runtime
    values (``p x`` shows the value ``x`` has in this call)."""
    del backend, filter_frames, num_frames, kwargs
    caller = sys._getframe(1)
    names = [k for k, v in caller.f_locals.items() if _is_array_like(v)]
    others = {k: v for k, v in caller.f_locals.items() if k not in names}
    values = [caller.f_locals[k] for k in names]
    where = f"{caller.f_code.co_filename}:{caller.f_lineno} ({caller.f_code.co_name})"

    def stop(*runtime: Any) -> None:
        scope: dict[str, Any] = {**others, **dict(zip(names, runtime))}
        debugger = pdb.Pdb()
        debugger.prompt = "(lamina pdb) "
        builtins.print(f"debug.breakpoint at {where}", file=sys.stdout)
        # pdb stops in the frame of this one-line program, whose names are `scope`
        scope["__lamina_debugger__"] = debugger
        exec(compile("__lamina_debugger__.set_trace()\npass\n", where, "exec"), scope)

    _debug_callback("debug.breakpoint", where, stop, tuple(values), {}, ordered)
    return token


def inspect_array_sharding(value: Any, *, callback: Callable[[Any], None]) -> None:
    """Calls ``callback`` with the sharding of each array in ``value``: for
    traced values (inside ``jit``) the sharding XLA chose, when the program is
    compiled; for concrete arrays their own, right away."""
    for path, leaf in tu.tree_flatten_with_path(value)[0]:
        if isinstance(leaf, Tracer):
            inspect_sharding_p.bind(leaf, callback=ShardingInspector(callback))
            continue
        sharding = getattr(leaf, "sharding", None)
        if sharding is None:
            raise TypeError(f"debug.inspect_array_sharding: value{tu.keystr(path)} is "
                            f"{type(leaf).__name__}, not an array")
        callback(sharding)


def _device_label(devices: list[Any]) -> str:
    kind = str(devices[0].platform).upper()
    ids = ",".join(str(d.id) for d in sorted(devices, key=lambda d: d.id))
    return f"{kind} {ids}"


def _shard_grid(shape: tuple[int, ...], sharding: Any) -> tuple[list[tuple[int, int]],
                                                                 list[tuple[int, int]],
                                                                 dict[tuple[int, int], list[Any]]]:
    """Row and column ranges and the devices holding each cell."""
    if len(shape) not in (1, 2):
        raise ValueError(f"visualize_array_sharding: only 1-D and 2-D arrays can be drawn, "
                         f"got shape {shape}")
    dims = shape if len(shape) == 2 else (1, shape[0])
    cells: dict[tuple[tuple[int, int], tuple[int, int]], list[Any]] = {}
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        parts = [sl.indices(n)[:2] for sl, n in zip(index, shape)]
        rows, cols = (parts[0], parts[1]) if len(shape) == 2 else ((0, 1), parts[0])
        cells.setdefault((rows, cols), []).append(device)
    row_ranges = sorted({r for r, _ in cells})
    col_ranges = sorted({c for _, c in cells})
    del dims
    table = {(row_ranges.index(r), col_ranges.index(c)): devs for (r, c), devs in cells.items()}
    return row_ranges, col_ranges, table


def _plain_picture(rows: int, cols: int, table: dict[tuple[int, int], list[Any]]) -> str:
    labels = {k: _device_label(v) for k, v in table.items()}
    width = max(len(s) for s in labels.values()) + 4
    rule = "+" + "+".join("-" * width for _ in range(cols)) + "+"
    lines = [rule]
    for r in range(rows):
        lines.append("|" + "|".join(labels.get((r, c), "").center(width)
                                    for c in range(cols)) + "|")
        lines.append(rule)
    return "\n".join(lines)


def visualize_array_sharding(arr: Any, *, use_color: bool = False, scale: float = 1.0,
                             min_width: int = 9, max_width: int = 80,
                             color_map: Any = None) -> None:
    """Prints a grid of ``arr``'s shards: one cell per distinct block of the
    array, labelled with the devices holding it (``CPU 0,1``)."""
    if isinstance(arr, Tracer):
        raise TypeError("debug.visualize_array_sharding: the value is traced; call it on a "
                        "concrete array (a jitted function's input or output)")
    sharding = getattr(arr, "sharding", None)
    if sharding is None:
        raise TypeError(f"debug.visualize_array_sharding: expected an array, got "
                        f"{type(arr).__name__}")
    visualize_sharding(tuple(arr.shape), sharding, use_color=use_color, scale=scale,
                       min_width=min_width, max_width=max_width, color_map=color_map)


def visualize_sharding(shape: tuple[int, ...], sharding: Any, *, use_color: bool = False,
                       scale: float = 1.0, min_width: int = 9, max_width: int = 80,
                       color_map: Any = None) -> None:
    """:func:`visualize_array_sharding` for a shape and a sharding."""
    del use_color, scale, min_width, max_width, color_map
    row_ranges, col_ranges, table = _shard_grid(tuple(shape), sharding)
    sys.stdout.write(_plain_picture(len(row_ranges), len(col_ranges), table) + "\n")
