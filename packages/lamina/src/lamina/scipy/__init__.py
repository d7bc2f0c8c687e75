"""``lamina.scipy``: JAX's ``jax.scipy`` (``special``, ``stats``, ``linalg``,
``signal``, ``fft``, ``integrate``, ``interpolate``, ``ndimage``, ``optimize``,
``cluster``, ``sparse`` and ``spatial``)."""

from lamina.scipy import cluster as cluster
from lamina.scipy import fft as fft
from lamina.scipy import integrate as integrate
from lamina.scipy import interpolate as interpolate
from lamina.scipy import linalg as linalg
from lamina.scipy import ndimage as ndimage
from lamina.scipy import optimize as optimize
from lamina.scipy import signal as signal
from lamina.scipy import sparse as sparse
from lamina.scipy import spatial as spatial
from lamina.scipy import special as special
from lamina.scipy import stats as stats

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal",
           "sparse", "spatial", "special", "stats"]
