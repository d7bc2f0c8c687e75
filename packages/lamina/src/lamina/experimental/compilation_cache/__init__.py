"""``lamina.experimental.compilation_cache``: where JAX keeps the cache controls
(its ``compilation_cache`` submodule is :mod:`lamina.compilation_cache`)."""
