"""Lowering rules of the lax primitives (and of control flow, calls and
collectives), registered by JAX primitive name when this package is imported."""
