"""``lamina.extend``: the extension API under JAX's names (``jax.extend``).

Submodules, each a thin view of lamina's own objects (no second table):

- :mod:`lamina.extend.core`: ``Primitive``, jaxprs and their parts, avals of
  mapped values, the trace-state probe libraries use;
- :mod:`lamina.extend.core.primitives`: the built-in primitives (``add_p``, ...);
- :mod:`lamina.extend.linear_util`: ``WrappedFun`` and its transformations;
- :mod:`lamina.extend.source_info_util`: source locations and name stacks;
- :mod:`lamina.extend.mlir`: the MLIR bindings and lowering registration.

The native way to define a primitive with every rule is described in
``docs/extending.md``.
"""
