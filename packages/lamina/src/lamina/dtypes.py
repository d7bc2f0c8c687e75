"""``lamina.dtypes``: dtype names and rules (JAX's ``jax.dtypes``), from tracing-core."""

from lamina_tracing_core.dtypes import (
    bfloat16,
    canonicalize_dtype,
    finfo,
    float0,
    iinfo,
    issubdtype,
    result_type,
)

__all__ = ["bfloat16", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "result_type"]
