"""``lamina.example_libraries``: small reference libraries with the API of
``jax.example_libraries``: :mod:`~lamina.example_libraries.stax` (neural
network layers as ``(init_fun, apply_fun)`` pairs) and
:mod:`~lamina.example_libraries.optimizers` (first-order optimizers as
``(init_fun, update_fun, get_params)`` triples)."""
