"""``lamina.image``: image resampling (JAX's ``jax.image``): ``resize`` and
``scale_and_translate``.

Pixels are half-centred (pixel ``i`` covers ``[i, i + 1)``, centre
``i + 0.5``). Every method but ``nearest`` resamples each spatial dimension
with a weight matrix built from its kernel (triangle, Keys cubic, Lanczos,
box for ``area``) and contracts the image with those matrices. With
``antialias`` the kernel is stretched by ``1 / scale`` when downsampling.
Output positions that map outside the input get zero weight, except for
``cubic-pytorch`` without antialiasing, which repeats the edge pixels.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import dtypes as _dtypes
from lamina_tracing_core import lax
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.avals import get_aval

from lamina_sharded_jit import jit

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]

_EPS = 1000.0 * float(np.finfo(np.float32).eps)


class ResizeMethod(enum.Enum):
    """The resampling method of ``resize`` and ``scale_and_translate``."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> ResizeMethod:
        """The method a name like ``'bilinear'`` or ``'lanczos3'`` stands for."""
        names = {"nearest": ResizeMethod.NEAREST, "linear": ResizeMethod.LINEAR,
                 "bilinear": ResizeMethod.LINEAR, "trilinear": ResizeMethod.LINEAR,
                 "triangle": ResizeMethod.LINEAR, "lanczos3": ResizeMethod.LANCZOS3,
                 "lanczos5": ResizeMethod.LANCZOS5, "cubic": ResizeMethod.CUBIC,
                 "bicubic": ResizeMethod.CUBIC, "tricubic": ResizeMethod.CUBIC,
                 "cubic-pytorch": ResizeMethod.CUBIC_PYTORCH,
                 "bicubic-pytorch": ResizeMethod.CUBIC_PYTORCH, "area": ResizeMethod.AREA}
        method = names.get(s)
        if method is None:
            raise ValueError(f"lamina.image: unknown resize method {s!r}; expected one of "
                             f"{sorted(names)}")
        return method


# --- kernels (of |distance| in input pixels) ------------------------------------------------
def _triangle(x: Any) -> Any:
    return jnp.maximum(0.0, 1.0 - jnp.abs(x))


def _keys_cubic(x: Any) -> Any:
    near = ((1.5 * x - 2.5) * x) * x + 1.0
    far = ((-0.5 * x + 2.5) * x - 4.0) * x + 2.0
    return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))


def _opencv_cubic(x: Any) -> Any:
    a = -0.75
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))


def _lanczos(radius: float) -> Callable[[Any], Any]:
    def kernel(x: Any) -> Any:
        num = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
        safe = jnp.where(x != 0, np.pi ** 2 * x * x, 1.0)
        out = jnp.where(x > 1e-3, num / safe, 1.0)
        return jnp.where(x > radius, 0.0, out)
    return kernel


#: (radius, kernel); ``None`` is the box (area) kernel.
_KERNELS: dict[ResizeMethod, tuple[int, Callable[[Any], Any] | None]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, None),
}


def _normalize_columns(weights: Any) -> Any:
    total = jnp.sum(weights, axis=0, keepdims=True)
    return jnp.where(jnp.abs(total) > _EPS, weights / jnp.where(total != 0, total, 1.0), 0.0)


def _weights(in_size: int, out_size: int, scale: Any, translation: Any,
             kernel: Callable[[Any], Any] | None, radius: int, antialias: bool,
             edge_padding: bool, dtype: np.dtype[Any]) -> Any:
    """The ``(in_size, out_size)`` matrix taking one dimension of the input to
    the output."""
    inv_scale = 1.0 / scale
    kernel_scale = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    out_pos = jnp.arange(out_size, dtype=dtype)
    sample = (out_pos + 0.5) * inv_scale - translation * inv_scale - 0.5
    # Edge padding (cubic-pytorch without antialiasing) adds ``radius`` taps
    # beyond each edge, folded back onto the edge pixels below.
    k = radius if edge_padding else 0
    taps = jnp.arange(-k, in_size + k, dtype=dtype)
    if kernel is None:
        left = out_pos * inv_scale - translation * inv_scale
        right = left + inv_scale
        pix = jnp.arange(in_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum(right[None, :], pix[:, None] + 1.0)
                              - jnp.maximum(left[None, :], pix[:, None]))
    else:
        weights = kernel(jnp.abs(sample[None, :] - taps[:, None]) / kernel_scale)
    if edge_padding:
        rows = np.clip(np.arange(-k, in_size + k), 0, in_size - 1)
        folded = jnp.zeros((in_size, out_size), dtype).at[rows].add(weights)
        return _normalize_columns(folded)
    weights = _normalize_columns(weights)
    inside = jnp.logical_and(sample >= -0.5, sample <= in_size - 0.5)
    return jnp.where(inside[None, :], weights, 0.0)


def _check_shape(fun: str, image: Any, shape: Sequence[int]) -> tuple[int, ...]:
    try:
        out = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"lamina.image.{fun}: shape must be a sequence of integers, got "
                        f"{shape!r}") from None
    nd = len(get_aval(image).shape)
    if len(out) != nd:
        raise ValueError(f"lamina.image.{fun}: shape must have one entry per dimension of "
                         f"image; got shape {out} for an image of shape "
                         f"{get_aval(image).shape}")
    if any(d < 0 for d in out):
        raise ValueError(f"lamina.image.{fun}: shape entries must be non-negative, got {out}")
    return out


def _method_of(method: str | ResizeMethod) -> ResizeMethod:
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    raise TypeError(f"lamina.image: method must be a string or a ResizeMethod, got {method!r}")


def _inexact(image: Any) -> Any:
    x = jnp.asarray(image)
    if not _dtypes.is_inexact(get_aval(x).dtype):
        x = x.astype(_dtypes.default_float_dtype())
    return x


def _resample(x: Any, shape: tuple[int, ...], dims: Sequence[int], scales: Sequence[Any],
              translations: Sequence[Any], method: ResizeMethod, antialias: bool,
              precision: Any) -> Any:
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    dtype = get_aval(x).dtype
    real = _dtypes.finfo(dtype).dtype if _dtypes.is_complex(dtype) else dtype
    in_shape = get_aval(x).shape
    for d, s, t in zip(dims, scales, translations):
        w = _weights(in_shape[d], shape[d], s, t, kernel, radius, antialias, edge_padding,
                     np.dtype(real)).astype(dtype)
        # contract dimension d with the weights, keeping the axis order
        moved = jnp.moveaxis(x, d, -1)
        out = jnp.matmul(moved, w, precision=precision)
        x = jnp.moveaxis(out, -1, d)
    return x


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int],
                        scale: Any, translation: Any, method: str | ResizeMethod,
                        antialias: bool = True,
                        precision: Any = lax.Precision.HIGHEST) -> Any:
    """Resamples ``image`` to ``shape``, mapping input location ``x`` of each of
    ``spatial_dims`` to ``x * scale + translation`` (``scale`` and
    ``translation`` may be traced)."""
    out_shape = _check_shape("scale_and_translate", image, shape)
    m = _method_of(method)
    if m == ResizeMethod.NEAREST:
        raise ValueError("lamina.image.scale_and_translate: nearest-neighbour resampling is "
                         "not supported by scale_and_translate (use resize)")
    x = _inexact(image)
    nd = len(out_shape)
    dims = [lax.common.canonicalize_axis(int(d), nd) for d in spatial_dims]
    scale_a = jnp.asarray(scale)
    trans_a = jnp.asarray(translation)
    if get_aval(scale_a).shape != (len(dims),) or get_aval(trans_a).shape != (len(dims),):
        raise ValueError(f"lamina.image.scale_and_translate: scale and translation must have "
                         f"one entry per spatial dimension ({len(dims)}), got shapes "
                         f"{get_aval(scale_a).shape} and {get_aval(trans_a).shape}")
    if not dims:
        return x
    real = _dtypes.finfo(get_aval(x).dtype).dtype
    param_dtype = jnp.result_type(scale_a, trans_a, real)
    if not _dtypes.is_floating(param_dtype):
        param_dtype = _dtypes.default_float_dtype()
    scale_a, trans_a = scale_a.astype(param_dtype), trans_a.astype(param_dtype)
    for d in dims:
        if out_shape[d] != get_aval(x).shape[d] and get_aval(x).shape[d] == 0:
            raise ValueError("lamina.image.scale_and_translate: cannot resample an empty "
                             f"dimension {d}")
    return _scale_and_translate(x, out_shape, tuple(dims), scale_a, trans_a, m,
                                bool(antialias), precision)


def _scale_and_translate_impl(x: Any, shape: tuple[int, ...], dims: tuple[int, ...],
                              scale: Any, translation: Any, method: ResizeMethod,
                              antialias: bool, precision: Any) -> Any:
    scales = [scale[i] for i in range(len(dims))]
    translations = [translation[i] for i in range(len(dims))]
    return _resample(x, shape, dims, scales, translations, method, antialias, precision)


# One compiled program per (shape, dims, method, antialias, precision), as in JAX.
_scale_and_translate = jit(_scale_and_translate_impl, static_argnums=(1, 2, 5, 6, 7))


def _resize_nearest(x: Any, shape: tuple[int, ...]) -> Any:
    in_shape = get_aval(x).shape
    for d, (m, n) in enumerate(zip(in_shape, shape)):
        if m == n:
            continue
        offsets = np.floor((np.arange(n, dtype=np.float32) + 0.5) * np.float32(m)
                           / np.float32(n)).astype(np.int32)
        x = jnp.take(x, offsets, axis=d)
    return x


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod,
           antialias: bool = True, precision: Any = lax.Precision.HIGHEST) -> Any:
    """``image`` resampled to ``shape`` (every dimension; leave batch and channel
    dimensions unchanged). Methods: ``nearest``, ``linear``, ``cubic``,
    ``cubic-pytorch``, ``lanczos3``, ``lanczos5``, ``area``."""
    out_shape = _check_shape("resize", image, shape)
    m = _method_of(method)
    if m == ResizeMethod.NEAREST:
        return _resize_nearest(jnp.asarray(image), out_shape)
    x = _inexact(image)
    in_shape = get_aval(x).shape
    for d in range(len(out_shape)):
        if in_shape[d] == 0 and out_shape[d] != 0:
            raise ValueError(f"lamina.image.resize: cannot resize the empty dimension {d} to "
                             f"{out_shape[d]}")
    return _resize(x, out_shape, m, bool(antialias), precision)


def _resize_impl(x: Any, shape: tuple[int, ...], method: ResizeMethod, antialias: bool,
                 precision: Any) -> Any:
    in_shape = get_aval(x).shape
    dims = [i for i in range(len(shape)) if in_shape[i] != shape[i]]
    scales = [1.0 if shape[d] == 0 else shape[d] / in_shape[d] for d in dims]
    return _resample(x, shape, dims, scales, [0.0] * len(dims), method, antialias, precision)


_resize = jit(_resize_impl, static_argnums=(1, 2, 3, 4))
