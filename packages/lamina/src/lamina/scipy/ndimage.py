"""``lamina.scipy.ndimage``: ``map_coordinates`` (spline orders 0 and 1, as JAX).

Each output value interpolates the input at one point of ``coordinates``
(``coordinates[d]`` holds the d-th index of every point). Order 0 takes the
nearest sample, order 1 the linear interpolation of the ``2 ** ndim`` corners.
An index outside the input follows ``mode``: ``constant`` (the corner
contributes ``cval``), ``nearest`` (the edge sample), ``wrap`` (periodic),
``mirror`` (reflected about the edge samples) or ``reflect`` (reflected about
the edges, repeating the edge sample)."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from lamina_tracing_core.numpy import _util

from lamina_sharded_jit import jit

import lamina.numpy as jnp

__all__ = ["map_coordinates"]

Array = Any
ArrayLike = Any


def _nearest(index: Array, size: int) -> Array:
    return jnp.clip(index, 0, size - 1)


def _wrap(index: Array, size: int) -> Array:
    return jnp.mod(index, size)


def _mirror(index: Array, size: int) -> Array:
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * size - 2
    folded = jnp.mod(jnp.abs(index), period)
    return jnp.where(folded >= size, period - folded, folded)


def _reflect(index: Array, size: int) -> Array:
    folded = jnp.mod(index, 2 * size)
    return jnp.where(folded >= size, 2 * size - 1 - folded, folded)


_INDEX_MODES: dict[str, Callable[[Array, int], Array] | None] = {
    "constant": None, "nearest": _nearest, "wrap": _wrap, "mirror": _mirror,
    "reflect": _reflect, "grid-wrap": _wrap, "grid-mirror": _reflect, "grid-constant": None,
}


def _corners(coordinate: Array, order: int) -> list[tuple[Array, Array | None]]:
    """The integer indices a coordinate draws on and their weights."""
    if order == 0:
        return [(jnp.round(coordinate).astype(jnp.int32), None)]
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(jnp.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: ArrayLike, coordinates: Sequence[ArrayLike],  # noqa: A002
                    order: int, mode: str = "constant", cval: ArrayLike = 0.0) -> Array:
    """``input`` interpolated at ``coordinates`` (one array of indices per
    dimension of ``input``, all of one shape: the result's)."""
    fun = "lamina.scipy.ndimage.map_coordinates"
    x = jnp.asarray(_util.operand(fun, input, "input"))
    if order not in (0, 1):
        raise NotImplementedError(f"{fun}: order must be 0 or 1 (as in JAX), got {order!r}")
    if mode not in _INDEX_MODES:
        raise ValueError(f"{fun}: mode must be one of {sorted(_INDEX_MODES)}, got {mode!r}")
    if len(coordinates) != x.ndim:
        raise ValueError(f"{fun}: coordinates must give one array per dimension of input "
                         f"({x.ndim}), got {len(coordinates)}")
    coords = [jnp.asarray(_util.operand(fun, c, f"coordinates[{i}]"))
              for i, c in enumerate(coordinates)]
    dtype = jnp.result_type(x.dtype, *(c.dtype for c in coords), jnp.float32) \
        if not jnp.issubdtype(x.dtype, jnp.inexact) else x.dtype
    coords = [c.astype(dtype) if not jnp.issubdtype(c.dtype, jnp.inexact) else c
              for c in coords]
    return _interpolate_compiled(x, coords, order, mode, cval)


def _interpolate(x: Array, coords: list[Array], order: int, mode: str, cval: Any) -> Array:
    remap = _INDEX_MODES[mode]
    total: Array = 0
    for corner in itertools.product(*(_corners(c, order) for c in coords)):
        indices, valid = [], []
        for (index, _), size in zip(corner, x.shape):
            if remap is None:
                valid.append((index >= 0) & (index < size))
                indices.append(jnp.clip(index, 0, size - 1))
            else:
                indices.append(remap(index, size))
        value = x[tuple(indices)]
        if valid:
            value = jnp.where(functools.reduce(operator.and_, valid), value, cval)
        weights = [w for _, w in corner if w is not None]
        if weights:
            value = value * functools.reduce(operator.mul, weights)
        total = total + value
    out = jnp.asarray(total)
    if jnp.issubdtype(x.dtype, jnp.integer):
        return jnp.round(out).astype(x.dtype)
    return out.astype(x.dtype) if out.dtype != x.dtype else out


# One compiled computation per shapes, order and mode, as in JAX.
_interpolate_compiled = jit(_interpolate, static_argnums=(2, 3))
