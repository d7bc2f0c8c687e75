"""Helpers of the ``lamina.scipy.stats`` distributions."""

from __future__ import annotations

from typing import Any

import numpy as np
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

__all__ = ["promote", "promote_dtypes", "k"]


def promote(fun: str, *args: Any) -> list[Any]:
    """``args`` promoted to one inexact (real) dtype, for ``lamina.scipy.stats.<fun>``."""
    out = list(_util.promote_args_inexact(f"lamina.scipy.stats.{fun}", *args))
    if out and dtypes.is_complex(get_aval(out[0]).dtype):
        raise ValueError(f"lamina.scipy.stats.{fun} does not support complex-valued inputs")
    return out


def promote_dtypes(fun: str, *args: Any) -> list[Any]:
    """``args`` promoted to one inexact dtype, shapes unchanged."""
    out = list(_util.promote_dtypes_inexact(f"lamina.scipy.stats.{fun}", *args))
    if out and dtypes.is_complex(get_aval(out[0]).dtype):
        raise ValueError(f"lamina.scipy.stats.{fun} does not support complex-valued inputs")
    return out


def k(x: Any, value: float) -> Any:
    """``value`` as a rank-0 constant of ``x``'s dtype."""
    return np.array(value, get_aval(x).dtype)
