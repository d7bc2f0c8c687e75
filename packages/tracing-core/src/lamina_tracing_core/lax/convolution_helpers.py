"""Convolution helpers built on ``conv_general_dilated`` and ``dot_general``:
``conv_general_dilated_patches`` (im2col), ``conv_general_dilated_local``
(unshared weights), and the shape functions ``conv_shape_tuple``,
``conv_general_shape_tuple`` and ``conv_transpose_shape_tuple``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.lax import contractions as ct
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike

Array = Any

#: What ``dimension_numbers`` of a convolution may be (JAX's alias).
ConvGeneralDilatedDimensionNumbers = Union[None, ct.ConvDimensionNumbers, tuple[str, str, str]]

__all__ = ["ConvGeneralDilatedDimensionNumbers", "conv_general_dilated_patches",
           "conv_general_dilated_local", "conv_shape_tuple", "conv_general_shape_tuple",
           "conv_transpose_shape_tuple"]


def _check_filter_shape(name: str, filter_shape: Sequence[int], nd: int) -> tuple[int, ...]:
    try:
        shape = tuple(int(k) for k in filter_shape)
    except TypeError:
        raise TypeError(f"{name}: filter_shape must be a sequence of integers, got "
                        f"{filter_shape!r}") from None
    if len(shape) != nd - 2:
        raise TypeError(f"{name}: filter_shape must have one entry per spatial dimension of "
                        f"lhs ({nd - 2}), got filter_shape={shape}")
    if any(k < 0 for k in shape):
        raise ValueError(f"{name}: filter_shape entries must be non-negative, got {shape}")
    return shape


def conv_general_dilated_patches(lhs: ArrayLike, filter_shape: Sequence[int],
                                 window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
                                 precision: Any = None,
                                 preferred_element_type: Any = None) -> Array:
    """The patches of ``lhs`` a convolution with a ``filter_shape`` window sees:
    the output has the convolution's layout, its feature dimension of size
    ``C * prod(filter_shape)`` ordered channel first, then the window positions
    in the order of ``rhs_spec``'s spatial dimensions."""
    aval = get_aval(lhs)
    nd = len(aval.shape)
    fshape = _check_filter_shape("conv_general_dilated_patches", filter_shape, nd)
    dnums = ct.conv_dimension_numbers(aval.shape, (1, 1) + fshape, dimension_numbers)
    lhs_spec, rhs_spec, _ = dnums
    size = math.prod(fshape)
    channels = aval.shape[lhs_spec[1]]
    # One output channel per (input channel, window position): a grouped
    # convolution with one-hot kernels.
    eye = np.eye(size, dtype=aval.dtype)
    kernel = np.broadcast_to(eye, (channels, size, size)).reshape(
        (channels * size, 1) + fshape)
    kernel = np.transpose(kernel, tuple(int(i) for i in np.argsort(rhs_spec)))
    return ct.conv_general_dilated(
        lhs, np.ascontiguousarray(kernel), window_strides, padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums, feature_group_count=channels,
        precision=precision, preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                               padding: Any, filter_shape: Sequence[int],
                               lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None,
                               dimension_numbers: ConvGeneralDilatedDimensionNumbers = None,
                               precision: Any = None) -> Array:
    """A convolution whose weights differ at every output position
    (a "locally connected" layer). ``rhs``'s spatial dimensions are the output's;
    its input-feature dimension is ``C * prod(filter_shape)`` in the order of
    ``conv_general_dilated_patches``."""
    lhs_precision = precision[0] if isinstance(precision, tuple) and len(precision) == 2 \
        else precision
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision=lhs_precision)
    nd = len(get_aval(lhs).shape)
    fshape = _check_filter_shape("conv_general_dilated_local", filter_shape, nd)
    _, rhs_spec, out_spec = ct.conv_dimension_numbers(get_aval(lhs).shape, (1, 1) + fshape,
                                                      dimension_numbers)
    p_shape, r_shape = get_aval(patches).shape, get_aval(rhs).shape
    if len(r_shape) != nd:
        raise TypeError(f"conv_general_dilated_local: rhs must have rank {nd}, got shape "
                        f"{r_shape}")
    for i in range(2, nd):
        if p_shape[out_spec[i]] != r_shape[rhs_spec[i]]:
            raise TypeError(f"conv_general_dilated_local: rhs spatial dimensions must equal the "
                            f"output's, {tuple(p_shape[d] for d in out_spec[2:])}, got "
                            f"{tuple(r_shape[d] for d in rhs_spec[2:])}")
    if p_shape[out_spec[1]] != r_shape[rhs_spec[1]]:
        raise TypeError(f"conv_general_dilated_local: rhs input-feature dimension must be "
                        f"C * prod(filter_shape) = {p_shape[out_spec[1]]}, got "
                        f"{r_shape[rhs_spec[1]]}")
    n = nd - 2
    dn = (((out_spec[1],), (rhs_spec[1],)), (tuple(out_spec[2:]), tuple(rhs_spec[2:])))
    out = ct.dot_general(patches, rhs, dn, precision=precision)
    # ``out`` is (spatial..., N, O); put each logical dimension where out_spec says.
    source_of = {out_spec[0]: n, out_spec[1]: n + 1}
    for i in range(n):
        source_of[out_spec[2 + i]] = i
    return st.transpose(out, tuple(source_of[j] for j in range(nd)))


def _pads_of(name: str, pads: Any, in_space: Sequence[int], window: Sequence[int],
             strides: Sequence[int]) -> list[tuple[int, int]]:
    if isinstance(pads, str):
        return ct.padtype_to_pads(in_space, window, strides, pads)
    try:
        return [(int(lo), int(hi)) for lo, hi in pads]
    except (TypeError, ValueError):
        raise TypeError(f"{name}: pads must be a padding string or a sequence of (low, high) "
                        f"pairs, got {pads!r}") from None


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                     strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of an NC.../OI... convolution."""
    explicit = _pads_of("conv_shape_tuple", pads, lhs_shape[2:], rhs_shape[2:], strides)
    if len(explicit) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: expected {len(lhs_shape) - 2} (low, high) pads for "
                        f"lhs_shape {tuple(lhs_shape)}, got {len(explicit)}")
    padded = [int(d) + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], explicit)]
    if any(p < 0 for p in padded):
        raise ValueError(f"conv_shape_tuple: negative padding {explicit} is larger than the "
                         f"spatial dimensions {tuple(lhs_shape[2:])}")
    space = [0 if p < int(k) else (p - int(k)) // int(s) + 1
             for p, k, s in zip(padded, rhs_shape[2:], strides)]
    batch = int(lhs_shape[0]) // batch_group_count if batch_group_count > 1 \
        else int(lhs_shape[0])
    return (batch, int(rhs_shape[0])) + tuple(space)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                             window_strides: Sequence[int], padding: Any,
                             dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of ``conv_general_dilated`` with string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = ct.conv_general_permutations(dimension_numbers)
    lhs_t = [lhs_shape[i] for i in lhs_perm]
    rhs_t = [rhs_shape[i] for i in rhs_perm]
    out_t = conv_shape_tuple(lhs_t, rhs_t, window_strides, padding)
    return tuple(out_t[int(i)] for i in np.argsort(out_perm))


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                               window_strides: Sequence[int], padding: Any,
                               dimension_numbers: tuple[str, str, str]) -> tuple[int, ...]:
    """The output shape of ``conv_transpose`` with string dimension numbers."""
    lhs_perm, rhs_perm, out_perm = ct.conv_general_permutations(dimension_numbers)
    lhs_t = [int(lhs_shape[i]) for i in lhs_perm]
    rhs_t = [int(rhs_shape[i]) for i in rhs_perm]
    if isinstance(padding, str):
        pads = [_transpose_pads(k, s, padding) for k, s in zip(rhs_t[2:], window_strides)]
    else:
        pads = [(int(lo), int(hi)) for lo, hi in padding]
    space = [(i - 1) * int(s) - k + 2 + lo + hi
             for i, k, s, (lo, hi) in zip(lhs_t[2:], rhs_t[2:], window_strides, pads)]
    out_t = (lhs_t[0], rhs_t[0]) + tuple(space)
    return tuple(out_t[int(i)] for i in np.argsort(out_perm))


def _transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """The (before, after) padding of one dimension of a transposed convolution."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    else:
        raise ValueError(f"conv_transpose_shape_tuple: padding must be 'SAME', 'VALID' or "
                         f"explicit pairs, got {padding!r}")
    return before, total - before
