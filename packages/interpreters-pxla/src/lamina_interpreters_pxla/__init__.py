"""Devices, Array, shardings, device_put, executables, eager dispatch and pmap."""

from lamina_interpreters_pxla.__about__ import __version__

__all__ = ["__version__"]
