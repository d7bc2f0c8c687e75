"""``lamina.lax``: the primitive operations and control flow (JAX's ``jax.lax``)."""

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
from lamina_tracing_core.control_flow import (
    cond,
    fori_loop,
    scan,
    switch,
    while_loop,
)
from lamina_tracing_core.control_flow import map as map  # noqa: A004
from lamina_tracing_core.lax import *  # noqa: F401,F403
from lamina_tracing_core.lax.collectives import pmean as pmean

from lamina_sharded_jit import with_sharding_constraint

__all__ = ["cond", "fori_loop", "map", "pmean", "scan", "switch", "while_loop",
           "with_sharding_constraint"]
