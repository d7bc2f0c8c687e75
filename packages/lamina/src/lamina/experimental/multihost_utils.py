"""``lamina.experimental.multihost_utils``: the name JAX also keeps for
:mod:`lamina.multihost_utils` (``jax.experimental.multihost_utils``)."""

from lamina.multihost_utils import *  # noqa: F403
from lamina.multihost_utils import __all__ as __all__  # noqa: PLC0414
