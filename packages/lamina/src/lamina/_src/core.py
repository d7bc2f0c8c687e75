"""``jax._src.core`` under the alias: the names of :mod:`lamina.core` (JAX's
public ``jax.core`` names are a subset of its private module; libraries that
import the private one at load read the public names from it)."""

from __future__ import annotations

from lamina.core import *  # noqa: F403 - the same names, by design
from lamina.core import __all__ as __all__
