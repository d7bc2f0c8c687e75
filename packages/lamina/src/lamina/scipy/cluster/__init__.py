"""``lamina.scipy.cluster``: ``vq``."""

from lamina.scipy.cluster import vq as vq

__all__ = ["vq"]
