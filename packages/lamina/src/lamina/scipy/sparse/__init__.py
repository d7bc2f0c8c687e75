"""``lamina.scipy.sparse``: JAX's ``jax.scipy.sparse`` (``linalg``)."""

from lamina.scipy.sparse import linalg as linalg

__all__ = ["linalg"]
