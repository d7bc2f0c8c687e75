"""Calling Python from staged programs: ``pure_callback`` and ``io_callback``.

Both take the user's function, the shapes and dtypes of its results (a pytree
of objects with ``shape`` and ``dtype``, e.g. ``ShapeDtypeStruct``) and its
arguments (pytrees of arrays); the function receives NumPy arrays with the
arguments' structure and must return values of the declared structure,
shapes and dtypes. They bind tracing-core's ``pure_callback_p`` /
``io_callback_p`` (whose rules say how they behave under ``jit``, ``vmap``
and differentiation); the lowering calls back through jaxlib's host-callback
custom call, eagerly the function simply runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lamina_interpreters_pxla as _runtime  # noqa: F401 - eager impls of the callbacks
import numpy as np
from lamina_interpreters_pxla.array import Array
from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.callbacks import (
    VMAP_METHODS,
    HostCallback,
    io_callback_p,
    pure_callback_p,
)
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.numpy import asarray

__all__ = ["flat_operands", "io_callback", "pure_callback"]


def _result_avals(api: str, result_shape_dtypes: Any) -> tuple[list[ShapedArray], Any]:
    paths_leaves, tree = tu.tree_flatten_with_path(result_shape_dtypes)
    avals = []
    for path, leaf in paths_leaves:
        shape, dtype = getattr(leaf, "shape", None), getattr(leaf, "dtype", None)
        if shape is None or dtype is None:
            raise TypeError(f"{api}: result_shape_dtypes{tu.keystr(path)} is "
                            f"{type(leaf).__name__}, not an object with shape and dtype "
                            "(e.g. ShapeDtypeStruct)")
        avals.append(ShapedArray(tuple(int(d) for d in shape),
                                 dtypes.canonicalize_dtype(np.dtype(dtype))))
    return avals, tree


_AS_IS = (Tracer, Array, np.ndarray, np.generic, bool, int, float, complex)


def flat_operands(api: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[list[Any], Any]:
    """The leaves of ``(args, kwargs)`` as operands, and the tree: tracers,
    arrays and scalars as they are (a trace makes constants of them without
    placing them on a device first), anything else through ``asarray``."""
    leaves, tree = tu.tree_flatten((args, kwargs))
    out = []
    for i, x in enumerate(leaves):
        if isinstance(x, _AS_IS):
            out.append(x)
            continue
        try:
            out.append(asarray(x))
        except TypeError as e:
            raise TypeError(f"{api}: argument leaf {i} ({type(x).__name__}) is not an "
                            f"array: {e}") from e
    return out, tree


def _host_function(api: str, callback: Callable[..., Any], in_tree: Any,
                   out_tree: Any) -> Callable[..., Any]:
    def host(*flat: Any) -> list[Any]:
        args, kwargs = tu.tree_unflatten(in_tree, list(flat))
        result = callback(*args, **kwargs)
        leaves, tree = tu.tree_flatten(result)
        if tree != out_tree:
            raise TypeError(f"{api}: the callback returned a value of structure {tree}, "
                            f"but result_shape_dtypes has structure {out_tree}")
        return leaves

    return host


def _bind(api: str, prim: Any, callback: Callable[..., Any], result_shape_dtypes: Any,
          args: tuple[Any, ...], kwargs: dict[str, Any], **params: Any) -> Any:
    if not callable(callback):
        raise TypeError(f"{api}: callback must be callable, got {type(callback).__name__}")
    avals, out_tree = _result_avals(api, result_shape_dtypes)
    operands, in_tree = flat_operands(api, args, kwargs)
    host = HostCallback(_host_function(api, callback, in_tree, out_tree), api=api,
                        description=api_util.fun_name(callback))
    outs = prim.bind(*operands, callback=host, result_avals=tuple(avals), **params)
    return tu.tree_unflatten(out_tree, outs)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None,
                  **kwargs: Any) -> Any:
    """Calls the side-effect-free host function ``callback(*args, **kwargs)``
    from inside traced code; its results have the structure, shapes and
    dtypes of ``result_shape_dtypes``. Unused results may be removed with the
    call. Under ``vmap``, ``vmap_method`` says how the callback takes a batch:
    ``'sequential'`` (once per element), ``'expand_dims'`` (once, the batch
    axis in front, unbatched arguments with a leading axis of size 1) or
    ``'broadcast_all'`` (once, every argument broadcast). Not
    differentiable: wrap it in ``custom_jvp``/``custom_vjp``."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {VMAP_METHODS} or None, "
                         f"got {vmap_method!r}")
    del sharding  # callbacks run on the program's first device
    return _bind("pure_callback", pure_callback_p, callback, result_shape_dtypes, args,
                 kwargs, vmap_method=vmap_method)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                sharding: Any = None, ordered: bool = False, **kwargs: Any) -> Any:
    """Calls the host function ``callback(*args, **kwargs)``, which may have
    side effects, from inside traced code; never removed as dead code. With
    ``ordered=True`` the calls happen in program order, within and across
    calls of the program (not under ``vmap`` or ``pmap``)."""
    del sharding  # callbacks run on the program's first device
    return _bind("io_callback", io_callback_p, callback, result_shape_dtypes, args, kwargs,
                 ordered=bool(ordered))
