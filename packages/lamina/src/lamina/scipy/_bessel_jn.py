"""Bessel functions of the first kind of integer orders ``0..v`` (``bessel_jn``)
by Miller's backward recurrence (Zhang and Jin, *Computation of Special
Functions*, routine BJNDD): ``f_k = 2 (k + 1) / z f_(k+1) - f_(k+2)`` from a tiny
seed at ``k = n_iter`` (rescaled as it grows), normalised by ``J_0 + 2 (J_2 + J_4 + ...) = 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from lamina_tracing_core import control_flow as lax_control
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
ArrayLike = Any

_SEED = 1e-16


def _bessel_jn_impl(z: Array, v: int, n_iter: int) -> Array:
    dtype = get_aval(z).dtype
    # The recurrence runs on |z| (J_k(-z) = (-1)^k J_k(z)); z = 0 is answered
    # by its limit J_0 = 1, J_k = 0 rather than the recurrence's 0 / 0.
    r = jnp.abs(z)
    r_safe = jnp.where(r == 0, 1.0, r)

    rank = r.ndim
    order_index = np.arange(v + 1).reshape((v + 1,) + (1,) * rank).astype(dtype)

    def step(carry: tuple[Array, Array, Array, Array], k: Array) -> tuple[Any, None]:
        f_above2, f_above, even_sum, low = carry
        f = 2.0 * (k + 1.0) * f_above / r_safe - f_above2
        even_sum = jnp.where(jnp.remainder(k, 2) == 0, even_sum + 2.0 * f, even_sum)
        low = jnp.where(order_index == k, f, low)
        # The recurrence grows like (2 k / z)^k: everything is divided by |f|
        # once it passes 1, so small z does not overflow (ratios are unchanged).
        scale = jnp.maximum(jnp.abs(f), 1.0)
        return (f_above / scale, f / scale, even_sum / scale, low / scale), None

    zeros = jnp.zeros_like(r)
    low0 = jnp.zeros((v + 1,) + r.shape, dtype)
    init = (zeros, jnp.full_like(r, _SEED), zeros, low0)
    orders = jnp.arange(n_iter + 1, dtype=dtype)
    (_, f_0, even_sum, low), _ = lax_control.scan(step, init, orders, reverse=True)
    # even_sum counted f_0 twice: the normaliser is f_0 + 2 (f_2 + f_4 + ...).
    j = low / (even_sum - f_0)
    signs = np.where(np.arange(v + 1) % 2 == 1, -1.0, 1.0).astype(dtype)
    signs = signs.reshape((v + 1,) + (1,) * rank)
    j = jnp.where(z < 0, signs * j, j)
    at_zero = np.zeros((v + 1,) + (1,) * rank, dtype)
    at_zero[0] = 1.0
    return jnp.where(r == 0, at_zero, j)


_bessel_jn_jit = jit(_bessel_jn_impl, static_argnames=("v", "n_iter"))


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """``J_0(z), ..., J_v(z)`` stacked on a new leading axis (shape
    ``(v + 1,) + z.shape``) for real ``z``. ``n_iter`` is the recurrence's
    starting order: it must exceed ``v`` and grow with ``|z|`` (about
    ``|z| + 20`` keeps float32 accuracy)."""
    fun = "lamina.scipy.special.bessel_jn"
    (x,) = _util.promote_args_inexact(fun, z)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError(f"{fun}: the argument z must be real-valued, got dtype "
                         f"{get_aval(x).dtype}")
    order = _util.concrete_int(fun, v, "the argument v")
    steps = _util.concrete_int(fun, n_iter, "the argument n_iter")
    if order < 0:
        raise ValueError(f"{fun}: the argument v must be non-negative, got {order}")
    if steps < order:
        raise ValueError(f"{fun}: the argument n_iter ({steps}) must be at least v ({order})")
    return _bessel_jn_jit(x, v=order, n_iter=steps)
