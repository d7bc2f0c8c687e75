"""``lamina.scipy.fft``: the discrete cosine transform of type 2 and its
inverse (``dct``, ``idct``, ``dctn``, ``idctn``), each one FFT of the
interleaved sequence, as JAX has them.

For ``N`` points, SciPy's unnormalized DCT-II is
``y[k] = 2 sum_n x[n] cos(pi k (2 n + 1) / (2 N))``. With ``v`` the even
samples followed by the odd ones reversed and ``V = fft(v)``,
``y[k] = 2 Re(exp(-i pi k / (2 N)) V[k])``; the inverse recovers ``V`` from
``y[k]`` and ``y[N - k]`` and ``v`` by an inverse FFT."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lamina_tracing_core import lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

from lamina_sharded_jit import jit

import lamina.numpy as jnp

__all__ = ["dct", "dctn", "idct", "idctn"]

Array = Any
ArrayLike = Any


def _check(fun: str, type_: int, norm: str | None) -> None:
    if type_ != 2:
        raise NotImplementedError(f"lamina.scipy.fft.{fun}: only the DCT of type 2 is "
                                  f"implemented (as in JAX), got type={type_}")
    if norm not in (None, "backward", "ortho"):
        raise ValueError(f"lamina.scipy.fft.{fun}: norm must be None, 'backward' or 'ortho', "
                         f"got {norm!r}")


def _resized(x: Array, n: int | None, axis: int) -> Array:
    if n is None:
        return x
    if n < 1:
        raise ValueError(f"lamina.scipy.fft: n must be positive, got {n}")
    length = get_aval(x).shape[axis]
    if n <= length:
        return lax.slice_in_dim(x, 0, n, 1, axis)
    pad = [(0, 0)] * get_aval(x).ndim
    pad[axis] = (0, n - length)
    return jnp.pad(x, pad)


def _ortho_scale(n: int, axis: int, ndim: int, dtype: Any) -> Array:
    """The per-frequency factors of the orthonormal DCT-II along ``axis``."""
    scale = jnp.full((n,), math.sqrt(1 / (2 * n)), dtype=dtype)
    scale = scale.at[0].set(math.sqrt(1 / (4 * n)))
    return jnp.reshape(scale, [n if d == axis else 1 for d in range(ndim)])


def _twiddle(n: int, axis: int, ndim: int, sign: float) -> Array:
    k = jnp.arange(n, dtype=jnp.float32)
    w = jnp.exp(jnp.complex64(sign * 1j * math.pi / (2 * n)) * k)
    return jnp.reshape(w, [n if d == axis else 1 for d in range(ndim)])


def _dct_axis(x: Array, axis: int, norm: str | None) -> Array:
    n, nd = get_aval(x).shape[axis], get_aval(x).ndim
    even = lax.slice_in_dim(x, 0, n, 2, axis)
    odd = lax.rev(lax.slice_in_dim(x, 1, n, 2, axis), (axis,))
    v = jnp.concatenate([even, odd], axis=axis)
    spectrum = jnp.fft.fft(v, axis=axis)
    y = 2 * jnp.real(spectrum * _twiddle(n, axis, nd, -1.0).astype(spectrum.dtype))
    y = y.astype(x.dtype)
    return y * _ortho_scale(n, axis, nd, x.dtype) if norm == "ortho" else y


def _idct_axis(y: Array, axis: int, norm: str | None) -> Array:
    n, nd = get_aval(y).shape[axis], get_aval(y).ndim
    if norm == "ortho":
        y = y / _ortho_scale(n, axis, nd, y.dtype)
    # y[N - k] for k = 0 .. N - 1, with y[N] taken as 0.
    mirrored = jnp.concatenate([jnp.zeros_like(lax.slice_in_dim(y, 0, 1, 1, axis)),
                                lax.rev(lax.slice_in_dim(y, 1, n, 1, axis), (axis,))], axis=axis)
    spectrum = 0.5 * _twiddle(n, axis, nd, 1.0) * (y - 1j * mirrored)
    v = jnp.real(jnp.fft.ifft(spectrum, axis=axis)).astype(y.dtype)
    half = (n + 1) // 2
    even = lax.slice_in_dim(v, 0, half, 1, axis)
    odd = lax.rev(lax.slice_in_dim(v, half, n, 1, axis), (axis,))
    # Interleave: x[2 m] = even[m], x[2 m + 1] = odd[m].
    if n % 2:
        pad = [(0, 0)] * nd
        pad[axis] = (0, 1)
        odd = jnp.pad(odd, pad)
    stacked = jnp.stack([even, odd], axis=axis + 1)
    shape = list(get_aval(v).shape)
    shape[axis] = 2 * half
    return lax.slice_in_dim(jnp.reshape(stacked, shape), 0, n, 1, axis)


def _real_input(fun: str, x: ArrayLike) -> Array:
    (a,) = _util.promote_dtypes_inexact(f"lamina.scipy.fft.{fun}", x)
    if jnp.iscomplexobj(a):
        raise ValueError(f"lamina.scipy.fft.{fun}: complex input is not supported")
    return a


def dct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
        norm: str | None = None) -> Array:
    """The DCT-II of ``x`` along ``axis`` (cropped or zero-padded to ``n``)."""
    _check("dct", type, norm)
    a = _real_input("dct", x)
    ax = _util.canonicalize_axis("lamina.scipy.fft.dct", axis, get_aval(a).ndim)
    return _transform_compiled(a, ((ax, n),), norm, False)


def idct(x: ArrayLike, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
         norm: str | None = None) -> Array:
    """The inverse of ``dct`` (a DCT-III, scaled) along ``axis``."""
    _check("idct", type, norm)
    a = _real_input("idct", x)
    ax = _util.canonicalize_axis("lamina.scipy.fft.idct", axis, get_aval(a).ndim)
    return _transform_compiled(a, ((ax, n),), norm, True)


def _axes_and_sizes(fun: str, a: Array, s: Sequence[int] | None,
                    axes: Sequence[int] | None) -> list[tuple[int, int | None]]:
    nd = get_aval(a).ndim
    chosen = list(range(nd)) if axes is None else [
        _util.canonicalize_axis(f"lamina.scipy.fft.{fun}", ax, nd) for ax in axes]
    sizes: list[int | None] = [None] * len(chosen) if s is None else list(s)
    if len(sizes) != len(chosen):
        raise ValueError(f"lamina.scipy.fft.{fun}: s and axes must have the same length")
    return list(zip(chosen, sizes))


def dctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
         axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """The DCT-II over several axes (all by default)."""
    _check("dctn", type, norm)
    a = _real_input("dctn", x)
    return _transform_compiled(a, tuple(_axes_and_sizes("dctn", a, s, axes)), norm, False)


def idctn(x: ArrayLike, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
          axes: Sequence[int] | None = None, norm: str | None = None) -> Array:
    """The inverse of ``dctn``."""
    _check("idctn", type, norm)
    a = _real_input("idctn", x)
    return _transform_compiled(a, tuple(_axes_and_sizes("idctn", a, s, axes)), norm, True)


def _transform(a: Array, plan: tuple[tuple[int, int | None], ...], norm: str | None,
               inverse: bool) -> Array:
    """The (inverse) DCT along each ``(axis, size)`` of ``plan`` in turn."""
    one_axis = _idct_axis if inverse else _dct_axis
    for ax, size in plan:
        a = one_axis(_resized(a, size, ax), ax, norm)
    return a


# One compiled computation per shape and plan, as in JAX.
_transform_compiled = jit(_transform, static_argnums=(1, 2, 3))
