"""``lamina.scipy.optimize``: ``minimize`` (BFGS and L-BFGS) and ``OptimizeResults``."""

from lamina.scipy.optimize._bfgs import OptimizeResults as OptimizeResults
from lamina.scipy.optimize._minimize import minimize as minimize

__all__ = ["OptimizeResults", "minimize"]
