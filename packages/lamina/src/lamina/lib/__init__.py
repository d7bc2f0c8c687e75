"""``lamina.lib`` (JAX's ``jax.lib``): the version of the jaxlib lamina runs on.

JAX 0.10's ``jax.lib`` holds nothing else; libraries read
``jax.lib.__version__`` to work around bugs of particular jaxlib releases.
"""

from jaxlib.version import __version__ as __version__

__all__ = ["__version__"]
