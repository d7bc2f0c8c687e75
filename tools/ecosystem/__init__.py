"""Tools that run JAX libraries and programs on lamina through the alias."""
