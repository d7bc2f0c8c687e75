"""Avals, tracers, jaxprs with JaxprDebugInfo, lax primitives and transformations."""

from lamina_tracing_core.__about__ import __version__

__all__ = ["__version__"]
