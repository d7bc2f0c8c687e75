"""Printing: ``printoptions``, ``set_printoptions``, ``get_printoptions``
(NumPy's options, which lamina arrays use when they print), ``array_repr``
and ``array_str``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from lamina_tracing_core.numpy import _util


def set_printoptions(*args: Any, **kwargs: Any) -> None:
    """Set how arrays print (NumPy's ``set_printoptions``; lamina arrays print
    through NumPy)."""
    np.set_printoptions(*args, **kwargs)


def get_printoptions() -> dict[str, Any]:
    """The current print options (NumPy's ``get_printoptions``)."""
    return dict(np.get_printoptions())


@contextlib.contextmanager
def printoptions(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """A context manager setting print options for its body (NumPy's ``printoptions``)."""
    with np.printoptions(*args, **kwargs) as options:
        yield dict(options)


def _host(fun: str, arr: Any) -> np.ndarray[Any, Any]:
    return _util.concrete(fun, _util.operand(fun, arr, "arr"), "the array to print")


def array_repr(arr: Any, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    """The ``repr`` of the array's values, as NumPy writes it."""
    return np.array_repr(_host("array_repr", arr), max_line_width, precision, suppress_small)


def array_str(a: Any, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    """The ``str`` of the array's values, as NumPy writes it."""
    return np.array_str(_host("array_str", a), max_line_width, precision, suppress_small)
