"""Index helpers written with square brackets: ``mgrid``, ``ogrid``, ``r_``,
``c_``, ``s_`` and ``index_exp``. Slice bounds must be concrete; a complex
step ``a:b:5j`` means five points from ``a`` to ``b`` inclusive (``linspace``),
a real step an ``arange``."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array
from lamina_tracing_core.numpy.creation import arange, array, linspace, meshgrid
from lamina_tracing_core.numpy.shape_ops import concatenate, expand_dims, stack, transpose


def _bound(fun: str, value: Any, what: str) -> Any:
    if value is None or isinstance(value, (int, float, complex, np.generic)):
        return value
    return _util.concrete(fun, value, f"the slice {what}").item()


def _grid_1d(fun: str, s: slice) -> Array:
    start = _bound(fun, s.start, "start") or 0
    stop = _bound(fun, s.stop, "stop")
    step = _bound(fun, s.step, "step") or 1
    if stop is None:
        raise ValueError(f"lamina.numpy.{fun}: a slice needs a stop, got {s!r}")
    if isinstance(step, complex) or np.iscomplexobj(step):
        return linspace(start, stop, int(abs(step)))
    return arange(start, stop, step)


class _Mgrid:
    """``mgrid[a:b:s, ...]``: a dense mesh grid (one array stacked per axis)."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Array:
        slices = key if isinstance(key, tuple) else (key,)
        if not all(isinstance(s, slice) for s in slices):
            raise TypeError(f"lamina.numpy.mgrid: indices must be slices, got {key!r}")
        if not slices:
            return array([], dtype=np.int32)
        grids = [_grid_1d("mgrid", s) for s in slices]
        if len(grids) == 1:
            return grids[0]
        return stack(meshgrid(*grids, indexing="ij", sparse=False), 0)

    def __repr__(self) -> str:
        return "lamina.numpy.mgrid"


class _Ogrid:
    """``ogrid[a:b:s, ...]``: an open (sparse) mesh grid, one broadcastable
    array per axis."""

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Array | list[Array]:
        if isinstance(key, slice):
            return _grid_1d("ogrid", key)
        if not all(isinstance(s, slice) for s in key):
            raise TypeError(f"lamina.numpy.ogrid: indices must be slices, got {key!r}")
        grids = [_grid_1d("ogrid", s) for s in key]
        return list(meshgrid(*grids, indexing="ij", sparse=True))

    def __repr__(self) -> str:
        return "lamina.numpy.ogrid"


class _AxisConcat:
    """The concatenating index helpers ``r_`` and ``c_``: items are arrays,
    scalars or slices (expanded as by ``mgrid``); a leading string directive
    ``"axis[,ndmin[,trans1d]]"`` (or ``"r"``/``"c"``) sets the layout."""

    def __init__(self, name: str, axis: int, ndmin: int, trans1d: int):
        self.name = name
        self.axis = axis
        self.ndmin = ndmin
        self.trans1d = trans1d

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"lamina.numpy.{self.name}"

    def _directive(self, directive: str) -> list[int]:
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if directive == "r":
            params[3] = 0
            return params
        if directive == "c":
            params[3] = 1
            return params
        parts: list[Any] = directive.split(",")
        parts = parts[:3] + params[len(parts[:3]):3] + [-1]
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"lamina.numpy.{self.name}: could not understand directive "
                             f"{directive!r}") from None

    def __getitem__(self, key: Any) -> Array:
        items = key if isinstance(key, tuple) else (key,)
        if not items:
            raise ValueError(f"lamina.numpy.{self.name}: nothing to concatenate")
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, -1
        if isinstance(items[0], str):
            axis, ndmin, trans1d, matrix = self._directive(items[0])
            items = items[1:]
        pieces = []
        for item in items:
            if isinstance(item, slice):
                piece = _grid_1d(self.name, item)
                item_ndim = 0
            elif isinstance(item, str):
                raise ValueError(f"lamina.numpy.{self.name}: a string directive must come "
                                 "first")
            else:
                piece = array(item, copy=False)
                item_ndim = _util.ndim_of(piece)
            piece = array(piece, copy=False, ndmin=ndmin)
            if trans1d != -1 and ndmin - item_ndim > 0:
                # NumPy's rule: the original axes move to position trans1d.
                order = list(range(ndmin))
                shift = ndmin - abs(ndmin + trans1d + 1) % ndmin
                piece = transpose(piece, tuple(order[shift:] + order[:shift]))
            pieces.append(piece)
        if not pieces:
            raise ValueError(f"lamina.numpy.{self.name}: nothing to concatenate")
        result = concatenate(pieces, axis=axis)
        if matrix != -1 and _util.ndim_of(result) == 1:
            result = expand_dims(result, matrix)
        return result


class _IndexExpression:
    """``s_[...]`` / ``index_exp[...]``: the index object itself (a tuple for
    ``index_exp``)."""

    def __init__(self, maketuple: bool):
        self.maketuple = maketuple

    def __getitem__(self, item: Any) -> Any:
        if self.maketuple and not isinstance(item, tuple):
            return (item,)
        return item


mgrid = _Mgrid()
ogrid = _Ogrid()
r_ = _AxisConcat("r_", axis=0, ndmin=1, trans1d=-1)
c_ = _AxisConcat("c_", axis=-1, ndmin=2, trans1d=0)
s_ = _IndexExpression(maketuple=False)
index_exp = _IndexExpression(maketuple=True)
