"""A stand-in for ``matplotlib`` where it is not installed, so that JAX's
examples that plot (``advi.py``, ``mnist_vae.py``,
``gaussian_process_regression.py``) run without it.

The examples only draw: nothing they print depends on a plot. Every name is
accepted and does nothing but turn its array arguments into NumPy arrays, as
matplotlib would (so the arrays' device-to-host path still runs). The runner
puts this folder on ``PYTHONPATH`` only when ``matplotlib`` cannot be
imported; the real one is used where it is installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Anything:
    """Callable, and every attribute is itself: ``plt.figure().add_subplot()
    .contour(x, y, z)`` and ``plt.cm.gray`` are all accepted."""

    def __call__(self, *args: Any, **kwargs: Any) -> Anything:
        for value in (*args, *kwargs.values()):
            if hasattr(value, "__array__"):
                np.asarray(value)
        return self

    def __getattr__(self, name: str) -> Anything:
        if name.startswith("__"):
            raise AttributeError(name)
        return self


ANYTHING = Anything()


def __getattr__(name: str) -> Anything:
    if name.startswith("__"):
        raise AttributeError(name)
    return ANYTHING
