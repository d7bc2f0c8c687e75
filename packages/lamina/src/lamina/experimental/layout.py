"""``lamina.experimental.layout``: memory layouts of device buffers (JAX's
``jax.experimental.layout``): ``Layout(major_to_minor, tiling=None)`` and
``Format(layout, sharding)``, the objects ``device_put`` accepts, from
interpreters-pxla."""

from __future__ import annotations

from lamina_interpreters_pxla.layouts import Format as Format
from lamina_interpreters_pxla.layouts import Layout as Layout

__all__ = ["Format", "Layout"]
