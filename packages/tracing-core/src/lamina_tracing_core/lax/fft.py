"""The ``fft`` primitive (``lax.fft``): complex FFT/IFFT, real-to-complex
RFFT and complex-to-real IRFFT over the trailing ``len(fft_lengths)`` axes
(at most three), with XLA's conventions: IFFT and IRFFT scale by ``1/n``.

The primitive is linear. Its JVP applies it to the tangent; its transpose is
the FFT of the same type for FFT and IFFT (the DFT matrix is symmetric), for
RFFT the real part of the FFT of the zero-extended cotangent, and for IRFFT
the conjugate of the RFFT of the cotangent with the doubled bins weighted
twice (JAX's convention for complex cotangents).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import convert_element_type
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules

Array = Any

__all__ = ["FftType", "fft_p", "fft"]


class FftType(enum.IntEnum):
    """The kind of transform (``jax.lax.FftType``)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __str__(self) -> str:
        return self.name


fft_p = Primitive("fft")


@fft_p.def_abstract_eval
def _fft_abstract_eval(operand: ShapedArray, *, fft_type: FftType,
                       fft_lengths: tuple[int, ...]) -> ShapedArray:
    k = len(fft_lengths)
    if not 1 <= k <= 3:
        raise ValueError(f"fft: fft_lengths must have 1 to 3 entries, got {fft_lengths}")
    if len(operand.shape) < k:
        raise ValueError(f"fft: an operand of rank {len(operand.shape)} cannot be transformed "
                         f"over {k} axes (fft_lengths={fft_lengths})")
    if any(n < 0 for n in fft_lengths):
        raise ValueError(f"fft: fft_lengths must be non-negative, got {fft_lengths}")
    lead, trail = operand.shape[:-k], operand.shape[-k:]
    if fft_type == FftType.RFFT:
        if operand.dtype not in common.FLOAT:
            raise TypeError(f"fft: RFFT takes a real floating operand, got {operand.dtype.name}")
        if trail != fft_lengths:
            raise ValueError(f"fft: RFFT operand's trailing dimensions {trail} must equal "
                             f"fft_lengths {fft_lengths}")
        shape = lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(shape, common.complex_dtype(operand.dtype), False)
    if operand.dtype not in common.COMPLEX:
        raise TypeError(f"fft: {fft_type.name} takes a complex operand, got "
                        f"{operand.dtype.name}")
    if fft_type == FftType.IRFFT:
        expected = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if trail != expected:
            raise ValueError(f"fft: IRFFT operand's trailing dimensions {trail} must be "
                             f"{expected} for fft_lengths {fft_lengths}")
        return ShapedArray(lead + fft_lengths, common.real_dtype(operand.dtype), False)
    if trail != fft_lengths:
        raise ValueError(f"fft: {fft_type.name} operand's trailing dimensions {trail} must "
                         f"equal fft_lengths {fft_lengths}")
    return ShapedArray(operand.shape, operand.dtype, False)


def fft(x: ArrayLike, fft_type: FftType | str | int, fft_lengths: Sequence[int]) -> Array:
    """The ``fft_type`` transform of ``x`` over its last ``len(fft_lengths)`` axes."""
    if isinstance(fft_type, str):
        try:
            typ = FftType[fft_type.upper()]
        except KeyError:
            raise ValueError(f"fft: fft_type must be one of FFT, IFFT, RFFT, IRFFT, got "
                             f"{fft_type!r}") from None
    else:
        typ = FftType(fft_type)
    lengths = common.as_int_tuple("fft", "fft_lengths", fft_lengths)
    dtype = get_aval(x).dtype
    if typ == FftType.RFFT:
        if dtype in common.COMPLEX:
            raise TypeError("fft: RFFT takes real-valued input, got a complex operand")
        if dtype not in common.FLOAT:
            x = convert_element_type(x, dtypes.default_float_dtype())
    elif dtype in common.FLOAT:
        x = convert_element_type(x, common.complex_dtype(dtype))
    elif dtype not in common.COMPLEX:
        x = convert_element_type(x, dtypes.default_complex_dtype())
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)


def _rfft_transpose(ct: Any, fft_lengths: tuple[int, ...]) -> Any:
    # RFFT is "real -> complex, FFT, keep the first n//2 + 1 bins": its
    # transpose zero-extends the bins, applies the (symmetric) FFT and keeps
    # the real part.
    shape = get_aval(ct).shape
    nd = len(shape)
    config = [(0, 0, 0)] * nd
    config[-1] = (0, fft_lengths[-1] - shape[-1], 0)
    full = st.pad(ct, np.zeros((), get_aval(ct).dtype), config)
    return ew.real(fft_p.bind(full, fft_type=FftType.FFT, fft_lengths=fft_lengths))


def _irfft_transpose(ct: Any, fft_lengths: tuple[int, ...]) -> Any:
    x = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
    aval = get_aval(x)
    m = aval.shape[-1]
    n = fft_lengths[-1]
    weights = np.full((m,), 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    weights = weights / math.prod(fft_lengths)
    w = st.broadcast_in_dim(np.asarray(weights, common.real_dtype(aval.dtype)).astype(
        aval.dtype), aval.shape, (len(aval.shape) - 1,))
    return ew.conj(ew.mul(x, w))


def _fft_transpose(ct: Any, operand: Any, *, fft_type: FftType,
                   fft_lengths: tuple[int, ...]) -> list[Any]:
    if fft_type == FftType.RFFT:
        return [_rfft_transpose(ct, fft_lengths)]
    if fft_type == FftType.IRFFT:
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


def _fft_batch(args: Any, dims: Any, *, fft_type: FftType, fft_lengths: tuple[int, ...]) -> Any:
    (x,), (d,) = args, dims
    x = helpers.moveaxis(x, d, 0)
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), 0


helpers.deflinear(fft_p, _fft_transpose)
batching_rules[fft_p] = _fft_batch
