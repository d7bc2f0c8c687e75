"""``lamina.experimental.layout``: array layouts (``jax.experimental.layout``).

``Layout`` is a device-local memory layout (minor-to-major dimension order and
tiling) and ``Format`` pairs one with a sharding; ``device_put`` and ``jit``'s
shardings take a ``Format`` to place data with that layout.
"""

from lamina_interpreters_pxla.layouts import Format, Layout

__all__ = ["Format", "Layout"]
