"""WrappedFun, transformations, memoization, pytrees and the TracingDebugInfo contract."""

from lamina_linear_util.__about__ import __version__

__all__ = ["__version__"]
