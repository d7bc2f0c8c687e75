"""The stand-in ``matplotlib.pyplot``: see the package's docstring."""

from __future__ import annotations

from matplotlib import ANYTHING, Anything


def __getattr__(name: str) -> Anything:
    if name.startswith("__"):
        raise AttributeError(name)
    return ANYTHING
