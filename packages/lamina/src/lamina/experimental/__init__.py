"""``lamina.experimental``: the home of APIs JAX keeps under ``jax.experimental``.

It is a package, so ``import lamina.experimental.<name>`` (and, under the
compatibility alias, ``import jax.experimental.<name>``) finds the submodules
lamina provides; a name lamina does not provide is an ``ImportError``.
"""
