"""Lowering of jaxprs to StableHLO modules with names, locations and shardings."""

from lamina_mlir_lowering.__about__ import __version__

__all__ = ["__version__"]
