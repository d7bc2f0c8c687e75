"""``lamina.scipy``: JAX's ``jax.scipy`` (``special``, ``stats`` and ``linalg``
so far)."""

from lamina.scipy import linalg as linalg
from lamina.scipy import special as special
from lamina.scipy import stats as stats

__all__ = ["linalg", "special", "stats"]
