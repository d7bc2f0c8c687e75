"""The Threefry-2x32 hash as a primitive (``threefry2x32``, no params).

``threefry2x32_p.bind(key1, key2, x1, x2)`` takes four uint32 arrays (JAX's
implicit broadcasting of rank-0/size-1 operands applies) and returns the two
uint32 output words. The lowering layer lowers it, for instance through
``threefry2x32_lax`` below, which computes the same hash with lax ops (the
20 rounds unrolled); ``lamina.random`` builds its keys and bits on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
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


__all__ = ["threefry2x32_p", "threefry2x32", "threefry2x32_lax"]
