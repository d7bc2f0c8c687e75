"""``lamina.interpreters``: the rule tables of lamina's interpreters under JAX's
names (``jax.interpreters``): :mod:`~lamina.interpreters.ad` (JVP and
transpose rules), :mod:`~lamina.interpreters.batching` (vmap rules),
:mod:`~lamina.interpreters.partial_eval` (tracing to jaxprs, partial
evaluation, dead-code elimination) and :mod:`~lamina.interpreters.mlir`
(lowering rules). Each table is the one lamina's transformations read.
"""
