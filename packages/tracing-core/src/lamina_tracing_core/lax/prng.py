"""The Threefry-2x32 hash as a primitive (``threefry2x32``, no params).

``threefry2x32_p.bind(key1, key2, x1, x2)`` takes four uint32 arrays (JAX's
implicit broadcasting of rank-0/size-1 operands applies) and returns the two
uint32 output words. The lowering layer lowers it, for instance through
``threefry2x32_lax`` below, which computes the same hash with lax ops (the
20 rounds unrolled); ``lamina.random`` builds its keys and bits on it.

``rng_bit_generator_p`` is XLA's ``RngBitGenerator`` (params ``shape``,
``dtype``, ``algorithm``): the bits of the ``rbg`` and ``unsafe_rbg`` keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive

Array = Any

threefry2x32_p = Primitive("threefry2x32", multiple_results=True)


@threefry2x32_p.def_abstract_eval
def _threefry2x32_abstract_eval(*args: ShapedArray) -> list[ShapedArray]:
    if len(args) != 4:
        raise TypeError(f"threefry2x32 takes 4 arguments (key1, key2, x1, x2), got {len(args)}")
    if any(a.dtype != dtypes.uint32 for a in args):
        raise TypeError(f"threefry2x32 requires uint32 arguments, got "
                        f"{[a.dtype.name for a in args]}")
    shape = common.broadcasting_shape("threefry2x32", *(a.shape for a in args))
    aval = ShapedArray(shape, dtypes.uint32, False)
    return [aval, aval]


helpers.defbroadcasting(threefry2x32_p)
helpers.defjvp_zero(threefry2x32_p)  # integer hash: no derivative


def threefry2x32(key1: ArrayLike, key2: ArrayLike, x1: ArrayLike, x2: ArrayLike
                 ) -> tuple[Array, Array]:
    """The Threefry-2x32 hash of the count words ``(x1, x2)`` under the key
    ``(key1, key2)`` (all uint32)."""
    a, b = threefry2x32_p.bind(key1, key2, x1, x2)
    return a, b


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _u32(v: int) -> Any:
    return np.array(v, np.uint32)


def _rotate_left(x: Any, d: int) -> Any:
    return ew.bitwise_or(ew.shift_left(x, _u32(d)), ew.shift_right_logical(x, _u32(32 - d)))


def _round(v: list[Any], rot: int) -> list[Any]:
    a = ew.add(v[0], v[1])
    b = ew.bitwise_xor(a, _rotate_left(v[1], rot))
    return [a, b]


def threefry2x32_lax(key1: Any, key2: Any, x1: Any, x2: Any) -> list[Any]:
    """Threefry-2x32 with lax ops (operands already broadcast to one shape)."""
    ks = [key1, key2, ew.bitwise_xor(ew.bitwise_xor(key1, key2), _u32(0x1BD11BDA))]
    x = [ew.add(x1, ks[0]), ew.add(x2, ks[1])]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x = _round(x, r)
        x = [ew.add(x[0], ks[(i + 1) % 3]),
             ew.add(ew.add(x[1], ks[(i + 2) % 3]), _u32(i + 1))]
    return x


# --- XLA's random bit generator -----------------------------------------------------------
rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)

_BIT_GENERATOR_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32),
                         np.dtype(np.uint64))


@rng_bit_generator_p.def_abstract_eval
def _rng_bit_generator_abstract_eval(key: ShapedArray, *, shape: tuple[int, ...], dtype: Any,
                                     algorithm: Any) -> list[ShapedArray]:
    del algorithm
    if key.dtype not in (dtypes.uint32, np.dtype(np.uint64)) or key.ndim != 1:
        raise TypeError(f"rng_bit_generator: key must be a 1-D uint32 or uint64 array, got "
                        f"{key.str_short()}")
    return [ShapedArray(key.shape, key.dtype, False), ShapedArray(shape, np.dtype(dtype), False)]


def _rng_bit_generator_batch(args: Any, dims: Any, *, shape: tuple[int, ...], dtype: Any,
                             algorithm: Any) -> tuple[list[Any], list[int | None]]:
    """As JAX: a batch of keys draws all its bits from its first key (one
    generator call of shape ``(batch, *shape)``), whose successor replaces it."""
    (keys,), (bdim,) = args, dims
    if bdim is None:
        out = rng_bit_generator_p.bind(keys, shape=shape, dtype=dtype, algorithm=algorithm)
        return list(out), [None, None]
    keys = helpers.moveaxis(keys, bdim, 0)
    batch = keys.aval.shape[0] if hasattr(keys, "aval") else np.shape(keys)[0]
    first = st.index_in_dim(keys, 0, 0, keepdims=False)
    new_key, bits = rng_bit_generator_p.bind(first, shape=(batch, *shape), dtype=dtype,
                                             algorithm=algorithm)
    rest = st.slice_in_dim(keys, 1, batch, 1, 0)
    new_keys = st.concatenate([st.expand_dims(new_key, (0,)), rest], 0)
    return [new_keys, bits], [0, 0]


rng_bit_generator_p.def_batching(_rng_bit_generator_batch)
helpers.defjvp_zero(rng_bit_generator_p)  # integer bits: no derivative


def rng_bit_generator(key: ArrayLike, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: Any = 0) -> tuple[Array, Array]:
    """XLA's stateless bit generator: the next key and uniformly random bits of
    ``shape`` and the unsigned ``dtype``. ``algorithm`` is a
    ``RandomAlgorithm`` (default: the platform's, as in JAX); a ``uint32[4]``
    key is the generator's ``u64[2]`` state, word for word."""
    dt = np.dtype(dtype)
    if dt not in _BIT_GENERATOR_DTYPES:
        raise TypeError(f"rng_bit_generator: dtype must be an unsigned integer type, got {dt}")
    dims = tuple(int(d) for d in shape)
    new_key, bits = rng_bit_generator_p.bind(key, shape=dims, dtype=dt, algorithm=algorithm)
    return new_key, bits


__all__ = ["rng_bit_generator", "rng_bit_generator_p", "threefry2x32_p", "threefry2x32",
           "threefry2x32_lax"]
