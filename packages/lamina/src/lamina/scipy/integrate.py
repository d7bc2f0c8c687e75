"""``lamina.scipy.integrate``: ``trapezoid`` (NumPy's, the one implementation)."""

from __future__ import annotations

from lamina.numpy import trapezoid

__all__ = ["trapezoid"]
