"""1-D discrete convolution and cross-correlation, each one
``conv_general_dilated`` (XLA's convolution, which correlates)."""

from __future__ import annotations

from typing import Any

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core import dtypes, lax

from lamina_tracing_core.numpy import _util
from lamina_tracing_core.numpy._util import Array, ArrayLike

_MODES = ("full", "same", "valid")


def _correlate_1d(fun: str, a: Any, v: Any, mode: str, precision: Any,
                  preferred_element_type: Any, flip_kernel: bool) -> Array:
    if mode not in _MODES:
        raise ValueError(f"lamina.numpy.{fun}: mode must be one of {_MODES}, got {mode!r}")
    x, k = _util.promote_dtypes_inexact(fun, a, v)
    if _util.ndim_of(x) != 1 or _util.ndim_of(k) != 1:
        raise ValueError(f"lamina.numpy.{fun} only supports 1-dimensional inputs")
    n, m = _util.shape_of(x)[0], _util.shape_of(k)[0]
    if n == 0 or m == 0:
        raise ValueError(f"lamina.numpy.{fun}: inputs cannot be empty, got shapes ({n},) and "
                         f"({m},)")
    reverse_output = False
    if flip_kernel:
        # Convolution is symmetric: slide the shorter array over the longer.
        if n < m:
            x, k, n, m = k, x, m, n
        k = lax.rev(k, (0,))
    else:
        if dtypes.is_complex(get_aval(k).dtype):
            k = lax.conj(k)
        if n < m:
            # correlate(a, v)[::-1] == conj-swapped correlate(v, a) (NumPy's rule).
            x, k, n, m = k, x, m, n
            reverse_output = True
    if mode == "valid":
        padding = (0, 0)
    elif mode == "same":
        padding = (m // 2, m - m // 2 - 1)
    else:
        padding = (m - 1, m - 1)
    preferred = _util.user_dtype(fun, preferred_element_type)
    out = lax.conv_general_dilated(lax.reshape(x, (1, 1, n)), lax.reshape(k, (1, 1, m)), (1,),
                                   [padding], precision=precision,
                                   preferred_element_type=preferred)
    out = lax.reshape(out, (_util.shape_of(out)[-1],))
    return lax.rev(out, (0,)) if reverse_output else out


def convolve(a: ArrayLike, v: ArrayLike, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Array:
    """The discrete linear convolution of two 1-D arrays (mode full, same or valid)."""
    return _correlate_1d("convolve", a, v, mode, precision, preferred_element_type,
                         flip_kernel=True)


def correlate(a: ArrayLike, v: ArrayLike, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Array:
    """The cross-correlation of two 1-D arrays, ``sum(a[n + k] * conj(v[k]))``."""
    return _correlate_1d("correlate", a, v, mode, precision, preferred_element_type,
                         flip_kernel=False)
