"""``lamina.scipy.spatial``: JAX's ``jax.scipy.spatial`` (``transform``)."""

from lamina.scipy.spatial import transform as transform

__all__ = ["transform"]
