"""``jax._src.dispatch`` under the alias: ``wait_for_tokens``.

JAX threads the runtime tokens of ordered side effects (``io_callback`` with
``ordered=True``, ordered debug prints) from one call to the next and waits
for the last ones at exit (libraries re-register that wait). lamina's runtime
keeps no token between calls: an ordered effect completes within the call
that runs it, so nothing is outstanding and the wait returns at once.
"""

from __future__ import annotations

__all__ = ["wait_for_tokens"]


def wait_for_tokens() -> None:
    """Waits for the ordered effects of earlier calls; lamina has none
    outstanding (see the module docstring)."""
