"""The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)`` (``wofz``), by
Weideman's rational approximation (SIAM J. Numer. Anal. 31, 1994) with
``N = 32`` terms, valid in the upper half plane and carried to the lower one by
``w(-z) = 2 exp(-z^2) - w(z)``.

Weideman writes ``w(z) = 2 p(Z) / (L - i z)^2 + 1 / (sqrt(pi) (L - i z))`` with
``Z = (L + i z) / (L - i z)`` and ``p`` a polynomial whose coefficients are the
Fourier coefficients of ``exp(-t^2) (L^2 + t^2)`` on the map ``t = L tan(theta / 2)``;
they are computed here, once, by an FFT.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any

_TERMS = 32
_L = math.sqrt(_TERMS / math.sqrt(2))


def _weideman_coefficients(terms: int, scale: float) -> np.ndarray[Any, Any]:
    """The polynomial's coefficients, highest power first (``polyval`` order)."""
    m = 2 * terms
    theta = np.arange(-m + 1, m) * np.pi / m
    t = scale * np.tan(theta / 2)
    samples = np.concatenate([[0.0], np.exp(-t * t) * (scale * scale + t * t)])
    fourier = np.real(np.fft.fft(np.fft.fftshift(samples))) / (2 * m)
    return np.ascontiguousarray(fourier[1:terms + 1][::-1])


_COEFFICIENTS = _weideman_coefficients(_TERMS, _L)


def _upper_half_plane(z: Array) -> Array:
    iz = lax.complex(-jnp.imag(z), jnp.real(z))
    denominator = _L - iz
    big_z = (_L + iz) / denominator
    p = jnp.polyval(_COEFFICIENTS.astype(get_aval(z).dtype), big_z)
    return 2 * p / (denominator * denominator) + (1 / math.sqrt(math.pi)) / denominator


def _wofz_impl(z: Array) -> Array:
    upper = jnp.imag(z) >= 0
    z_up = jnp.where(upper, z, -z)
    w_up = _upper_half_plane(z_up)
    return jnp.where(upper, w_up, 2 * jnp.exp(-z * z) - w_up)


_wofz = custom_jvp(jit(_wofz_impl))
# w'(z) = -2 z w(z) + 2 i / sqrt(pi)
_wofz.defjvps(lambda g, ans, z: g * (-2 * z * ans + 2j / math.sqrt(math.pi)))


def complex_operand(fun: str, z: ArrayLike) -> Array:
    """``z`` promoted to an inexact dtype and then to its complex counterpart."""
    (a,) = _util.promote_args_inexact(f"lamina.scipy.special.{fun}", z)
    dtype = get_aval(a).dtype
    if not dtypes.is_complex(dtype):
        a = a.astype(np.complex128 if dtype == np.float64 else np.complex64)
    return a


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``exp(-z^2) erfc(-i z)`` of a real or complex ``z``
    (the result is complex)."""
    return _wofz(complex_operand("wofz", z))


def erfcx_complex(z: Array) -> Array:
    """``erfcx(z) = w(i z)`` for a complex ``z``."""
    return _wofz(lax.complex(-jnp.imag(z), jnp.real(z)))
