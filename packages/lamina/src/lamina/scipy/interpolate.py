"""``lamina.scipy.interpolate``: ``RegularGridInterpolator`` (linear and
nearest interpolation on a rectilinear grid, as JAX has it)."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Sequence
from typing import Any

from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp

__all__ = ["RegularGridInterpolator"]

Array = Any
_METHODS = ("linear", "nearest")


class RegularGridInterpolator:
    """Interpolation of ``values`` (shape ``(n_1, ..., n_d, ...)``) given on
    the grid ``points`` (``d`` strictly ascending 1-D arrays). A point outside
    the grid gives ``fill_value`` (NaN by default), or is extrapolated when
    ``fill_value`` is None."""

    def __init__(self, points: Sequence[Any], values: Any, method: str = "linear",
                 bounds_error: bool = False, fill_value: Any = float("nan")):
        fun = "lamina.scipy.interpolate.RegularGridInterpolator"
        if method not in _METHODS:
            raise ValueError(f"{fun}: method must be one of {_METHODS}, got {method!r}")
        if bounds_error:
            raise NotImplementedError(f"{fun}: bounds_error=True needs the values on the host; "
                                      "it is not supported (as in JAX)")
        grid = [jnp.asarray(_util.operand(fun, p, f"points[{i}]")) for i, p in enumerate(points)]
        vals = jnp.asarray(_util.operand(fun, values, "values"))
        (vals,) = _util.promote_dtypes_inexact(fun, vals)
        if len(grid) > vals.ndim:
            raise ValueError(f"{fun}: there are {len(grid)} point arrays, but values has "
                             f"{vals.ndim} dimensions")
        for i, p in enumerate(grid):
            if p.ndim != 1 or p.shape[0] != vals.shape[i]:
                raise ValueError(f"{fun}: points[{i}] must be 1-D with {vals.shape[i]} entries "
                                 f"(values' dimension {i}), got shape {p.shape}")
        self.grid = tuple(p.astype(vals.dtype) for p in grid)
        self.values = vals
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value

    def __call__(self, xi: Any, method: str | None = None) -> Array:
        """The interpolated values at ``xi`` (shape ``(..., d)``)."""
        fun = "lamina.scipy.interpolate.RegularGridInterpolator.__call__"
        chosen = self.method if method is None else method
        if chosen not in _METHODS:
            raise ValueError(f"{fun}: method must be one of {_METHODS}, got {chosen!r}")
        x = jnp.asarray(_util.operand(fun, xi, "xi")).astype(self.values.dtype)
        d = len(self.grid)
        if x.shape[-1] != d:
            raise ValueError(f"{fun}: xi has points of dimension {x.shape[-1]}, but the grid has "
                             f"{d} dimensions")
        batch = x.shape[:-1]
        flat = jnp.reshape(x, (-1, d))
        indices, weights, outside = [], [], jnp.zeros(flat.shape[0], bool)
        for k, grid in enumerate(self.grid):
            coordinate = flat[:, k]
            i = jnp.clip(jnp.searchsorted(grid, coordinate) - 1, 0, grid.shape[0] - 2)
            t = (coordinate - grid[i]) / (grid[i + 1] - grid[i])
            indices.append(i)
            weights.append(t)
            outside = outside | (coordinate < grid[0]) | (coordinate > grid[-1])
        trailing = self.values.shape[d:]
        if chosen == "nearest":
            nearest = tuple(jnp.where(t <= 0.5, i, i + 1) for i, t in zip(indices, weights))
            out = self.values[nearest]
        else:
            out = jnp.zeros((flat.shape[0],) + trailing, self.values.dtype)
            for corner in itertools.product((0, 1), repeat=d):
                at = tuple(i + c for i, c in zip(indices, corner))
                weight = functools.reduce(operator.mul, [
                    t if c else 1 - t for t, c in zip(weights, corner)])
                out = out + self.values[at] * jnp.reshape(weight, (-1,) + (1,) * len(trailing))
        if self.fill_value is not None:
            mask = jnp.reshape(outside, (-1,) + (1,) * len(trailing))
            out = jnp.where(mask, self.fill_value, out)
        return jnp.reshape(out, batch + trailing)
