"""Exceptions shared by the modules of lamina-linear-util.

They live in their own module so that the lowest modules (``debug_info``) can
recognise errors raised by higher ones (``linear_util``) without an import cycle.
"""

from __future__ import annotations

__all__ = ["StoreError", "TransformationError", "NonHashableStaticArgumentError",
           "PyTreeTooDeepError"]


class StoreError(Exception):
    """A transformation's output store was read before the function ran, or
    written twice."""


class TransformationError(TypeError):
    """A transformation generator broke the protocol: it did not yield an
    ``(args, kwargs)`` pair first, or finished without yielding its results."""


class NonHashableStaticArgumentError(ValueError):
    """A static argument cannot be hashed, so it cannot be part of a cache key."""


class PyTreeTooDeepError(RecursionError):
    """A pytree nested more deeply than flattening can follow (jaxlib's C++
    flattening stops at Python's recursion limit), or one that contains
    itself. The message names what was being flattened."""
