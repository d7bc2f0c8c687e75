"""The NaN/Inf checks (``debug_nans``, ``debug_infs``).

Off by default; while off, the runtime reads one attribute per call and does
nothing else. While on, every eager primitive's floating-point results are
checked, and a jitted program's results too: a program that produced a NaN
is evaluated again equation by equation (sharded-jit's ``nan_search``) to
find the first equation producing it, and the ``FloatingPointError`` names
that equation's primitive, source line and name stack and the arguments of
the function its operands depend on. Turning a check on also keeps calls off
jaxlib's C++ dispatch path, which cannot check.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

__all__ = ["FloatChecks", "checks", "first_bad", "suspended"]


class FloatChecks:
    """Which checks are on: ``nans`` and ``infs`` (``any`` is either)."""

    __slots__ = ("nans", "infs", "any")

    def __init__(self) -> None:
        self.nans = False
        self.infs = False
        self.any = False

    def set(self, *, nans: bool | None = None, infs: bool | None = None) -> None:
        if nans is not None:
            self.nans = bool(nans)
        if infs is not None:
            self.infs = bool(infs)
        self.any = self.nans or self.infs


#: the process-wide switches (lamina.config's debug_nans / debug_infs)
checks = FloatChecks()
_suspended = threading.local()


@contextmanager
def suspended() -> Iterator[None]:
    """No eager checks in this thread meanwhile (the equation-by-equation
    search checks each equation itself, with the equation's names)."""
    before = getattr(_suspended, "on", False)
    _suspended.on = True
    try:
        yield
    finally:
        _suspended.on = before


def is_suspended() -> bool:
    return bool(getattr(_suspended, "on", False))


def _kind(x: Any) -> str | None:
    dtype = getattr(x, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "fc":
        return None
    values = np.asarray(x)
    if checks.nans and np.isnan(values).any():
        return "nan"
    if checks.infs and np.isinf(values).any():
        return "inf"
    return None


def first_bad(values: Sequence[Any]) -> tuple[int, str] | None:
    """``(index, 'nan' | 'inf')`` of the first value with a NaN (or an Inf,
    when ``infs`` is on), or None."""
    for i, x in enumerate(values):
        kind = _kind(x)
        if kind is not None:
            return i, kind
    return None
