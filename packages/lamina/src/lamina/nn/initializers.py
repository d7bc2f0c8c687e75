"""``lamina.nn.initializers``: functions that build parameter arrays (JAX's
``jax.nn.initializers``).

Each builder returns an initializer ``init(key, shape, dtype=None)``; a
``dtype`` of ``None`` means the default float type. The draws are lamina's
``random`` functions, which give JAX's bits for the same key, and the scaling
is done in the same order and precision as JAX, so the arrays equal JAX's.

``variance_scaling(scale, mode, distribution)`` draws with variance
``scale / n``, ``n`` being the fan-in, fan-out, their mean (``fan_avg``) or
geometric mean (``fan_geo_avg``); the Glorot/Xavier, LeCun and He/Kaiming
initializers are its common settings. ``orthogonal`` and ``delta_orthogonal``
orthogonalize a normal draw with a QR decomposition (Householder reflections
written with lamina's array operations, as lax has no QR kernel yet), with the
signs fixed as JAX fixes them (``R``'s diagonal made positive); they agree with
JAX's to rounding (about ``1e-6``), not bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
from lamina_tracing_core import dtypes

import lamina.numpy as jnp
from lamina import random

__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform",
    "he_normal", "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "orthogonal", "truncated_normal", "uniform",
    "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]

Axes = int | Sequence[int]


class Initializer(Protocol):
    """What the builders return: ``init(key, shape, dtype=None) -> Array``."""

    def __call__(self, key: Any, shape: Sequence[int], dtype: Any = None,
                 out_sharding: Any = None) -> Any: ...


def _float(dtype: Any) -> Any:
    return dtypes.default_float_dtype() if dtype is None else dtype


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def _no_sharding(out_sharding: Any) -> None:
    if out_sharding is not None:
        raise TypeError("lamina.nn.initializers: out_sharding is not supported; place the "
                        "result with lamina.device_put")


def zeros(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of zeros (``key`` is ignored)."""
    _no_sharding(out_sharding)
    return jnp.zeros(_shape(shape), _float(dtype))


def ones(key: Any, shape: Sequence[int], dtype: Any = None, out_sharding: Any = None) -> Any:
    """An array of ones (``key`` is ignored)."""
    _no_sharding(out_sharding)
    return jnp.ones(_shape(shape), _float(dtype))


def constant(value: Any, dtype: Any = None) -> Initializer:
    """Arrays full of ``value``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        return jnp.full(_shape(shape), value, dtype=_float(dtype))
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Uniform draws in ``[0, scale)``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        dt = _float(dtype)
        return random.uniform(key, _shape(shape), dt) * jnp.array(scale, dt)
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Normal draws with mean 0 and standard deviation ``stddev``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        dt = _float(dtype)
        return random.normal(key, _shape(shape), dt) * jnp.array(stddev, dt)
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0,
                     upper: Any = 2.0) -> Initializer:
    """Standard normal draws truncated to ``(lower, upper)``, times ``stddev``
    (no variance correction: ``variance_scaling`` applies one)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        dt = _float(dtype)
        return (random.truncated_normal(key, lower, upper, _shape(shape), dt)
                * jnp.array(stddev, dt))
    return init


def _axes_size(shape: tuple[int, ...], axes: Axes) -> int:
    if isinstance(axes, (int, np.integer)):
        return shape[axes]
    return math.prod(shape[i] for i in axes)


def _fans(shape: tuple[int, ...], in_axis: Axes, out_axis: Axes, batch_axis: Axes
          ) -> tuple[float, float]:
    """``(fan_in, fan_out)``: the input and output sizes times the receptive
    field (every axis that is not an input, output or batch axis)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"Can't compute input and output sizes of a {len(shape)}-dimensional "
                         "weights tensor with default in_axis. Must be at least 2D or specify "
                         "in_axis explicitly.")
    in_size = _axes_size(shape, in_axis)
    out_size = _axes_size(shape, out_axis)
    batch_size = _axes_size(shape, batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def _complex_dtype(dtype: Any) -> tuple[np.dtype[Any], np.dtype[Any]]:
    real = np.array(0, dtype).real.dtype
    return real, np.dtype(np.complex128 if real == np.float64 else np.complex64)


def _complex_uniform(key: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Uniform on the unit disc scaled to unit variance."""
    key_r, key_theta = random.split(key)
    real, cplx = _complex_dtype(dtype)
    r = jnp.sqrt(2 * random.uniform(key_r, shape, real)).astype(cplx)
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(cplx)
    return r * jnp.exp(1j * theta)


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...], dtype: Any
                              ) -> Any:
    """A unit-variance complex normal whose modulus is truncated to ``upper``."""
    key_r, key_theta = random.split(key)
    real, cplx = _complex_dtype(dtype)
    t = (1 - jnp.exp(jnp.array(-(upper ** 2), cplx))) * random.uniform(
        key_r, shape, real).astype(cplx)
    r = jnp.sqrt(-jnp.log(1 - t))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(cplx)
    return r * jnp.exp(1j * theta)


Mode = Literal["fan_in", "fan_out", "fan_avg", "fan_geo_avg"]
Distribution = Literal["truncated_normal", "normal", "uniform"]

#: the standard deviation of a standard normal truncated to (-2, 2), and of a
#: complex standard normal with modulus truncated to 2
_TRUNCATED_STDDEV = .87962566103423978
_COMPLEX_TRUNCATED_STDDEV = .95311164380491208


def variance_scaling(scale: Any, mode: Mode, distribution: Distribution, in_axis: Axes = -2,
                     out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None
                     ) -> Initializer:
    """Draws of variance ``scale / n`` (``n`` chosen by ``mode``) from a
    truncated normal, a normal or a uniform distribution."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        shp = _shape(shape)
        dt = _float(dtype)
        fan_in, fan_out = _fans(shp, in_axis, out_axis, batch_axis)
        if mode == "fan_in":
            denominator = fan_in
        elif mode == "fan_out":
            denominator = fan_out
        elif mode == "fan_avg":
            denominator = (fan_in + fan_out) / 2
        elif mode == "fan_geo_avg":
            denominator = (fan_in * fan_out) ** 0.5
        else:
            raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
        variance = jnp.array(scale / denominator, dtype=dt)
        is_complex = dtypes.is_complex(np.dtype(dt))
        if distribution == "truncated_normal":
            if is_complex:
                stddev = jnp.sqrt(variance) / jnp.array(_COMPLEX_TRUNCATED_STDDEV, dt)
                return _complex_truncated_normal(key, 2, shp, dt) * stddev
            stddev = jnp.sqrt(variance) / jnp.array(_TRUNCATED_STDDEV, dt)
            return random.truncated_normal(key, -2, 2, shp, dt) * stddev
        if distribution == "normal":
            return random.normal(key, shp, dt) * jnp.sqrt(variance)
        if distribution == "uniform":
            if is_complex:
                return _complex_uniform(key, shp, dt) * jnp.sqrt(variance)
            return random.uniform(key, shp, dt, -1) * jnp.sqrt(3 * variance)
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")
    return init


def glorot_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                   dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_avg", "uniform")`` (Glorot & Bengio 2010)."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def glorot_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_avg", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


def lecun_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                  dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_in", "uniform")``."""
    return variance_scaling(1.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def lecun_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
                 dtype: Any = None) -> Initializer:
    """``variance_scaling(1.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


def he_uniform(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
               dtype: Any = None) -> Initializer:
    """``variance_scaling(2.0, "fan_in", "uniform")`` (He et al. 2015)."""
    return variance_scaling(2.0, "fan_in", "uniform", in_axis=in_axis, out_axis=out_axis,
                            batch_axis=batch_axis, dtype=dtype)


def he_normal(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (),
              dtype: Any = None) -> Initializer:
    """``variance_scaling(2.0, "fan_in", "truncated_normal")``."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis=in_axis,
                            out_axis=out_axis, batch_axis=batch_axis, dtype=dtype)


xavier_uniform = glorot_uniform
xavier_normal = glorot_normal
kaiming_uniform = he_uniform
kaiming_normal = he_normal


def _householder_q(z: Any) -> Any:
    """The ``Q`` factor (``M x K``, ``M >= K``) of ``z = Q R`` with ``R``'s
    diagonal positive (unique for full-rank ``z``), from Householder reflections."""
    rows, cols = z.shape
    a = z
    q = jnp.eye(rows, dtype=z.dtype)
    row_index = jnp.arange(rows)
    for j in range(cols):
        x = jnp.where(row_index >= j, a[:, j], 0)
        norm_x = jnp.sqrt(jnp.sum(jnp.abs(x) ** 2)).astype(z.dtype)
        xj = x[j]
        abs_xj = jnp.abs(xj).astype(z.dtype)
        phase = jnp.where(abs_xj == 0, jnp.ones((), z.dtype), xj / jnp.where(abs_xj == 0, 1, abs_xj))
        # reflect x onto -phase*|x| e_j: v = x + phase |x| e_j (no cancellation)
        v = x.at[j].add(phase * norm_x)
        norm_v = jnp.sqrt(jnp.sum(jnp.abs(v) ** 2)).astype(z.dtype)
        v = jnp.where(norm_v == 0, jnp.zeros_like(v), v / jnp.where(norm_v == 0, 1, norm_v))
        a = a - 2 * jnp.outer(v, jnp.conj(v) @ a)
        q = q - 2 * jnp.outer(q @ v, jnp.conj(v))
    q = q[:, :cols]
    diag = jnp.diagonal(jnp.conj(q.T) @ z)
    abs_diag = jnp.abs(diag).astype(z.dtype)
    sign = jnp.where(abs_diag == 0, jnp.zeros_like(diag), diag / jnp.where(abs_diag == 0, 1,
                                                                             abs_diag))
    return q * sign[None, :]


def _orthogonal_matrix(key: Any, n: int, m: int, dtype: Any) -> Any:
    """An ``n x m`` matrix with orthonormal rows or columns (JAX's
    ``random.orthogonal(key, n, (), dtype, m)``)."""
    z = random.normal(key, (max(n, m), min(n, m)), dtype)
    q = _householder_q(z)
    return q.T if n < m else q


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """Uniformly distributed orthogonal matrices (the axis ``column_axis`` holds
    the columns that are orthonormal), times ``scale``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        shp = _shape(shape)
        dt = _float(dtype)
        if len(shp) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shp):
            return jnp.zeros(shp, dtype=dt)
        n_cols = shp[column_axis]
        n_rows = math.prod(shp) // n_cols
        q = _orthogonal_matrix(key, n_rows, n_cols, dt)
        q = jnp.reshape(q, tuple(np.delete(np.array(shp), column_axis)) + (n_cols,))
        q = jnp.moveaxis(q, -1, column_axis)
        return jnp.array(scale, dt) * q
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None
                     ) -> Initializer:
    """Convolution kernels (3-D, 4-D or 5-D) that are zero except at the spatial
    centre, which holds an orthogonal matrix (Xiao et al. 2018)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype, out_sharding: Any = None) -> Any:
        _no_sharding(out_sharding)
        shp = _shape(shape)
        dt = _float(dtype)
        if len(shp) not in (3, 4, 5):
            raise ValueError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shp[-1] < shp[-2]:
            raise ValueError("`fan_in` must be less or equal than `fan_out`. ")
        centre = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shp[-2:])
        kernel = jnp.zeros(shp, dtype=dt)
        index = tuple((k - 1) // 2 for k in shp[:-2])
        return kernel.at[index].set(centre)
    return init
