"""The public lamina API: jit, grad, vmap, pmap, lamina.numpy and friends."""

from lamina.__about__ import __version__

__all__ = ["__version__"]
