"""Counter-based, splittable pseudo-random numbers (Threefry-2x32).

A *key* is a ``uint32[2]`` array. Nothing here has hidden state: every function
takes a key and is a pure function of it, so the same key gives the same
numbers under ``jit``, ``vmap``, ``pmap`` and on every platform. To get fresh
numbers, ``split`` a key into new ones; never reuse a key.

The algorithms are JAX's "partitionable" Threefry ones (the default since JAX
0.5): the bits for an array of shape ``s`` are the Threefry hash of the
row-major 64-bit element counters ``0 .. prod(s) - 1`` (high and low words)
under the key, so keys and numbers equal JAX's for the same seed.
"""

from __future__ import annotations

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from lamina_tracing_core import core, dtypes, lax
from lamina_tracing_core.avals import get_aval
from lamina_tracing_core.numpy import _util

import lamina.numpy as jnp

Array = Any
KeyArray = Any
Shape = Sequence[int]

__all__ = [
    "PRNGKey", "bernoulli", "bits", "categorical", "cauchy", "choice", "exponential",
    "fold_in", "gumbel", "key", "key_data", "laplace", "logistic", "normal", "permutation",
    "rademacher", "randint", "split", "threefry_2x32", "truncated_normal", "uniform",
    "wrap_key_data",
]

_UINT_BY_BITS: dict[int, np.dtype[Any]] = {
    8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
    64: np.dtype(np.uint64)}


# --- the hash ------------------------------------------------------------------------------
def threefry_2x32(keypair: tuple[Any, Any] | Any, count: Any) -> Array:
    """The Threefry-2x32 hash of the uint32 array ``count`` under ``keypair``
    (two uint32 scalars, or a key): the flattened count is split into two
    halves hashed as word pairs (padded with a zero if odd), as JAX does."""
    if isinstance(keypair, (tuple, list)):
        k0, k1 = (_util.convert(_util.operand("lamina.random.threefry_2x32", k, "keypair"),
                                np.uint32) for k in keypair)
    else:
        k0, k1 = _key_words("threefry_2x32", keypair)
    x = _util.operand("lamina.random.threefry_2x32", count, "count")
    if get_aval(x).dtype != np.uint32:
        raise TypeError(f"threefry_2x32: count must be uint32, got {get_aval(x).dtype}")
    shape = get_aval(x).shape
    n = math.prod(shape)
    flat = lax.reshape(x, (n,))
    odd = n % 2
    if odd:
        flat = lax.concatenate([flat, np.zeros((1,), np.uint32)], 0)
    half = (n + odd) // 2
    y0, y1 = lax.threefry2x32(k0, k1, lax.slice_in_dim(flat, 0, half, 1, 0),
                              lax.slice_in_dim(flat, half, 2 * half, 1, 0))
    out = lax.concatenate([y0, y1], 0)
    if odd:
        out = lax.slice_in_dim(out, 0, n, 1, 0)
    return lax.reshape(out, shape)


def _key_words(fun: str, key: KeyArray) -> tuple[Array, Array]:
    key = _check_key(fun, key)
    return (lax.index_in_dim(key, 0, axis=0, keepdims=False),
            lax.index_in_dim(key, 1, axis=0, keepdims=False))


def _counters(shape: tuple[int, ...]) -> tuple[Array, Array]:
    """High and low 32-bit words of the row-major 64-bit counter over ``shape``."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        # The low word alone would wrap; lamina's iota is 32-bit here.
        raise ValueError(f"random: shape {shape} has {size} elements; at most 2**32 - 1 are "
                         "supported")
    low = lax.reshape(lax.iota(np.uint32, size), shape)
    return lax.full(shape, 0, np.uint32), low


def _hash_counters(key: KeyArray, shape: tuple[int, ...], fun: str) -> tuple[Array, Array]:
    k0, k1 = _key_words(fun, key)
    high, low = _counters(shape)
    y0, y1 = lax.threefry2x32(k0, k1, high, low)
    return y0, y1


# --- keys -------------------------------------------------------------------------------------
def _check_key(fun: str, key: Any) -> Array:
    k = _util.operand(f"lamina.random.{fun}", key, "key")
    aval = get_aval(k)
    if aval.shape != (2,) or aval.dtype != np.uint32:
        raise TypeError(f"lamina.random.{fun}: expected a PRNG key (a uint32[2] array made by "
                        f"lamina.random.key or PRNGKey), got {aval.str_short()}; for a batch "
                        "of keys use vmap")
    return k


def _seed_words_python(seed: int) -> tuple[int, int]:
    """High and low words of a Python int seed, as JAX: it is first an int64
    (x64) or int32 (wrapping), then split."""
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise OverflowError(f"PRNGKey: Python int {seed} too large to convert to a 64-bit seed")
    if dtypes.x64_enabled():
        as_uint64 = seed & 0xFFFFFFFFFFFFFFFF
        return as_uint64 >> 32, as_uint64 & 0xFFFFFFFF
    return 0, seed & 0xFFFFFFFF


def PRNGKey(seed: Any) -> KeyArray:  # noqa: N802 - JAX's name
    """A key (``uint32[2]``) from an integer seed: its high and low 32-bit words."""
    if isinstance(seed, (bool, np.bool_)) or isinstance(seed, (float, complex)):
        raise TypeError(f"PRNGKey: seed must be an integer, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        high, low = _seed_words_python(int(seed))
        return jnp.array([high, low], dtype=np.uint32)
    s = _util.operand("lamina.random.PRNGKey", seed, "seed")
    aval = get_aval(s)
    if aval.shape:
        raise TypeError(f"PRNGKey: seed must be a scalar, got shape {aval.shape}")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"PRNGKey: seed must have an integer dtype, got {aval.dtype}")
    s = _util.strip_weak(s)
    if aval.dtype.itemsize == 8:
        high = lax.convert_element_type(
            lax.shift_right_logical(s, np.asarray(32, aval.dtype)), np.uint32)
    else:
        high = lax.full((), 0, np.uint32)
    low = lax.convert_element_type(s, np.uint32)
    return lax.concatenate([lax.reshape(high, (1,)), lax.reshape(low, (1,))], 0)


def key(seed: Any) -> KeyArray:
    """Same as ``PRNGKey``: lamina keys are raw ``uint32[2]`` arrays (JAX's
    typed key arrays are not implemented)."""
    return PRNGKey(seed)


def key_data(keys: KeyArray) -> Array:
    """The raw ``uint32`` data of a key (the key itself in lamina)."""
    return keys


def wrap_key_data(key_bits_array: Any, *, impl: Any = None) -> KeyArray:
    """A key from its raw ``uint32[2]`` data (checked, returned as is)."""
    if impl not in (None, "threefry2x32"):
        raise ValueError(f"wrap_key_data: only the threefry2x32 implementation exists, got "
                         f"{impl!r}")
    return _check_key("wrap_key_data", key_bits_array)


def _shape(fun: str, shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        items = tuple(shape)
    except TypeError:
        raise TypeError(f"lamina.random.{fun}: shape must be a sequence of integers, got "
                        f"{shape!r}") from None
    dims = []
    for d in items:
        value = core.concrete_or_error(None, d, f"The shape argument of lamina.random.{fun} "
                                                "must be concrete.")
        try:
            dims.append(operator.index(value))
        except TypeError:
            raise TypeError(f"lamina.random.{fun}: shape must be a sequence of integers, got "
                            f"{shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"lamina.random.{fun}: shape dimensions must be non-negative, got "
                         f"{tuple(dims)}")
    return tuple(dims)


def split(key: KeyArray, num: int | Shape = 2) -> KeyArray:
    """``num`` new keys (shape ``(num, 2)``, or ``(*num, 2)`` for a shape),
    independent of ``key`` and of each other."""
    shape = _shape("split", num)
    y0, y1 = _hash_counters(key, shape, "split")
    nd = len(shape)
    return lax.concatenate([lax.expand_dims(y0, (nd,)), lax.expand_dims(y1, (nd,))], nd)


def fold_in(key: KeyArray, data: Any) -> KeyArray:
    """A new key determined by ``key`` and the 32-bit integer ``data``."""
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        if not 0 <= int(data) < 2 ** 32:
            raise OverflowError(f"fold_in: Python integer {data} out of bounds for uint32")
        word: Any = np.uint32(data)
    else:
        d = _util.operand("lamina.random.fold_in", data, "data")
        if not dtypes.is_integer(get_aval(d).dtype):
            raise TypeError(f"fold_in: data must be an integer, got {get_aval(d).dtype}")
        word = lax.convert_element_type(d, np.uint32)
    k0, k1 = _key_words("fold_in", key)
    y0, y1 = lax.threefry2x32(k0, k1, np.uint32(0), word)
    return lax.concatenate([lax.reshape(y0, (1,)), lax.reshape(y1, (1,))], 0)


# --- raw bits -------------------------------------------------------------------------------------
def _random_bits(key: KeyArray, width: int, shape: tuple[int, ...], fun: str) -> Array:
    y0, y1 = _hash_counters(key, shape, fun)
    dtype = _UINT_BY_BITS[width]
    if width == 64:
        high = lax.convert_element_type(y0, dtype)
        return lax.bitwise_or(lax.shift_left(high, np.asarray(32, dtype)),
                              lax.convert_element_type(y1, dtype))
    mixed = lax.bitwise_xor(y0, y1)
    return mixed if width == 32 else lax.convert_element_type(mixed, dtype)


def bits(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Uniformly random unsigned integers of ``dtype`` (default uint32)."""
    dt = np.dtype(np.uint32) if dtype is None else _util.user_dtype("lamina.random.bits", dtype)
    assert dt is not None
    if dt not in _UINT_BY_BITS.values():
        raise TypeError(f"bits: dtype argument must be an unsigned int dtype, got {dt}")
    return _random_bits(key, dt.itemsize * 8, _shape("bits", shape), "bits")


# --- floats --------------------------------------------------------------------------------------
def _float_dtype(fun: str, dtype: Any) -> np.dtype[Any]:
    dt = _util.user_dtype(f"lamina.random.{fun}", dtype) or dtypes.default_float_dtype()
    if not dtypes.is_floating(dt):
        raise ValueError(f"lamina.random.{fun}: dtype argument must be a float dtype, got {dt}")
    return dt


def _param(fun: str, value: Any, dtype: np.dtype[Any], rank: int) -> Array:
    """A distribution parameter as ``dtype`` with leading size-1 axes up to ``rank``."""
    v = _util.convert(_util.operand(f"lamina.random.{fun}", value, "parameter"), dtype)
    extra = rank - get_aval(v).ndim
    if extra < 0:
        raise ValueError(f"lamina.random.{fun}: a parameter of shape {get_aval(v).shape} has "
                         f"more dimensions than the requested shape's {rank}")
    return lax.reshape(v, (1,) * extra + get_aval(v).shape) if extra else v


def uniform(key: KeyArray, shape: Shape = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0) -> Array:
    """Floats uniform in ``[minval, maxval)``."""
    dt = _float_dtype("uniform", dtype)
    return _uniform(key, _shape("uniform", shape), dt, minval, maxval, "uniform")


def _uniform(key: KeyArray, shape: tuple[int, ...], dtype: np.dtype[Any], minval: Any,
             maxval: Any, fun: str) -> Array:
    info = dtypes.finfo(dtype)
    nbits, nmant = int(info.bits), int(info.nmant)
    # Types with fewer than 8 mantissa bits still draw 8 random bits.
    rng_bits = 8 if nmant < 8 else nbits
    raw = _random_bits(key, rng_bits, shape, fun)
    uint = _UINT_BY_BITS[nbits]
    if rng_bits != nbits:
        raw = lax.convert_element_type(raw, uint)
    # Random mantissa bits under the exponent of 1.0 give a float in [1, 2).
    one_bits = np.asarray(np.array(1.0, dtype).view(uint))
    mantissa = lax.shift_right_logical(raw, np.asarray(rng_bits - nmant, uint))
    floats = lax.sub(lax.bitcast_convert_type(lax.bitwise_or(mantissa, one_bits), dtype),
                     np.asarray(1.0, dtype))
    lo = _param(fun, minval, dtype, len(shape))
    hi = _param(fun, maxval, dtype, len(shape))
    scaled = lax.add(lax.mul(floats, lax.sub(hi, lo)), lo)
    return lax.max(lo, scaled)


def normal(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Standard normal floats (``sqrt(2) * erfinv(u)`` for ``u`` uniform in (-1, 1))."""
    dt = _float_dtype("normal", dtype)
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    u = _uniform(key, _shape("normal", shape), dt, lo, 1.0, "normal")
    return lax.mul(np.asarray(np.sqrt(2), dt), lax.erf_inv(u))


def truncated_normal(key: KeyArray, lower: Any, upper: Any, shape: Shape | None = None,
                     dtype: Any = None) -> Array:
    """Normal floats conditioned on ``lower < x < upper``."""
    dt = _float_dtype("truncated_normal", dtype)
    lo = _util.convert(_util.operand("lamina.random.truncated_normal", lower, "lower"), dt)
    hi = _util.convert(_util.operand("lamina.random.truncated_normal", upper, "upper"), dt)
    if shape is None:
        dims = _util.broadcast_shapes("lamina.random.truncated_normal", get_aval(lo).shape,
                                      get_aval(hi).shape)
    else:
        dims = _shape("truncated_normal", shape)
    sqrt2 = np.asarray(np.sqrt(2), dt)
    a = lax.erf(lax.div(lo, sqrt2))
    b = lax.erf(lax.div(hi, sqrt2))
    u = _uniform(key, dims, dt, a, b, "truncated_normal")
    out = lax.mul(sqrt2, lax.erf_inv(u))
    # Rounding may land on a bound; keep the samples strictly inside.
    floor = lax.nextafter(lax.stop_gradient(lo), lax.full_like(lo, np.inf))
    ceil = lax.nextafter(lax.stop_gradient(hi), lax.full_like(hi, -np.inf))
    return jnp.clip(out, floor, ceil)


def exponential(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Exponential(1) floats."""
    dt = _float_dtype("exponential", dtype)
    u = _uniform(key, _shape("exponential", shape), dt, 0.0, 1.0, "exponential")
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Laplace(0, 1) floats."""
    dt = _float_dtype("laplace", dtype)
    u = _uniform(key, _shape("laplace", shape), dt, -1.0 + float(dtypes.finfo(dt).epsneg), 1.0,
                 "laplace")
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Standard logistic floats."""
    dt = _float_dtype("logistic", dtype)
    u = _uniform(key, _shape("logistic", shape), dt, float(dtypes.finfo(dt).tiny), 1.0,
                 "logistic")
    return lax.log(lax.div(u, lax.sub(np.asarray(1, dt), u)))


def cauchy(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Standard Cauchy floats."""
    dt = _float_dtype("cauchy", dtype)
    u = _uniform(key, _shape("cauchy", shape), dt, float(dtypes.finfo(dt).eps), 1.0, "cauchy")
    return lax.tan(lax.mul(np.asarray(np.pi, dt), lax.sub(u, np.asarray(0.5, dt))))


def gumbel(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Standard Gumbel floats ``-log(-log(u))``."""
    dt = _float_dtype("gumbel", dtype)
    u = _uniform(key, _shape("gumbel", shape), dt, float(dtypes.finfo(dt).tiny), 1.0, "gumbel")
    return lax.neg(lax.log(lax.neg(lax.log(u))))


# --- integers and booleans -------------------------------------------------------------------
def _clip_to(value: Any, dtype: np.dtype[Any]) -> Array:
    """An integer ``value`` clipped into ``dtype``'s range, then converted."""
    info = np.iinfo(dtype)
    v = _util.operand("lamina.random.randint", value, "minval/maxval")
    v_dtype = get_aval(v).dtype
    if not dtypes.is_integer(v_dtype):
        v = _util.convert(v, dtypes.default_int_dtype())
        v_dtype = get_aval(v).dtype
    v_info = np.iinfo(v_dtype)
    lo, hi = max(int(info.min), int(v_info.min)), min(int(info.max), int(v_info.max))
    clipped = lax.clamp(np.asarray(lo, v_dtype), _util.strip_weak(v), np.asarray(hi, v_dtype))
    return lax.convert_element_type(clipped, dtype)


def randint(key: KeyArray, shape: Shape, minval: Any, maxval: Any, dtype: Any = None) -> Array:
    """Integers uniform in ``[minval, maxval)`` (``minval`` when the range is empty)."""
    dt = _util.user_dtype("lamina.random.randint", dtype) or dtypes.default_int_dtype()
    if not dtypes.is_integer(dt):
        raise TypeError(f"randint: dtype argument must be an integer dtype, got {dt}")
    dims = _shape("randint", shape)
    nbits = dt.itemsize * 8
    hi_raw = _util.operand("lamina.random.randint", maxval, "maxval")
    if not dtypes.is_integer(get_aval(hi_raw).dtype):
        hi_raw = _util.convert(hi_raw, dtypes.default_int_dtype())
    hi_dtype = get_aval(hi_raw).dtype
    # maxval above dtype's range (randint(k, s, 0, 256, uint8)) needs a span of 2**nbits.
    limit = min(int(np.iinfo(dt).max), int(np.iinfo(hi_dtype).max))
    max_too_big = lax.gt(_util.strip_weak(hi_raw), np.asarray(limit, hi_dtype))
    lo = _param("randint", _clip_to(minval, dt), dt, len(dims))
    hi = _param("randint", _clip_to(maxval, dt), dt, len(dims))
    max_too_big = _param("randint", max_too_big, dtypes.bool_, len(dims))
    keys = split(key)
    k1, k2 = (lax.index_in_dim(keys, i, keepdims=False) for i in (0, 1))
    high_bits = _random_bits(k1, nbits, dims, "randint")
    low_bits = _random_bits(k2, nbits, dims, "randint")
    unsigned = _UINT_BY_BITS[nbits]
    span = lax.convert_element_type(lax.sub(hi, lo), unsigned)
    span = lax.select(_bcast(lax.le(hi, lo), span), lax.full_like(span, 1), span)
    span = lax.select(_bcast(lax.bitwise_and(max_too_big, lax.gt(hi, lo)), span),
                      lax.add(span, np.asarray(1, unsigned)), span)
    # Two words of random bits, reduced modulo span without overflow:
    # (high * 2**nbits + low) % span == ((high % span) * (2**nbits % span) + low % span) % span.
    multiplier = lax.rem(np.asarray(2 ** (nbits // 2), unsigned), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(high_bits, span), multiplier), lax.rem(low_bits, span))
    offset = lax.rem(offset, span)
    return lax.add(lo, lax.convert_element_type(offset, dt))


def _bcast(pred: Any, like: Any) -> Any:
    """``pred`` broadcast to ``like``'s shape (select needs equal shapes)."""
    return _util.broadcast_to("lamina.random.randint", pred, _util.broadcast_shapes(
        "randint", get_aval(pred).shape, get_aval(like).shape))


def bernoulli(key: KeyArray, p: Any = np.float32(0.5), shape: Shape | None = None) -> Array:
    """Booleans that are True with probability ``p`` (a float)."""
    prob = _util.operand("lamina.random.bernoulli", p, "p")
    dt = dtypes.canonicalize_dtype(get_aval(prob).dtype)
    if not dtypes.is_floating(dt):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dt}.")
    prob = _util.convert(prob, dt)
    dims = get_aval(prob).shape if shape is None else _shape("bernoulli", shape)
    u = _uniform(key, dims, dt, 0.0, 1.0, "bernoulli")
    threshold = _param("bernoulli", prob, dt, len(dims))
    return lax.lt(u, _util.broadcast_to("lamina.random.bernoulli", threshold, dims))


def rademacher(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """-1 or +1 with equal probability (default int dtype)."""
    dt = _util.user_dtype("lamina.random.rademacher", dtype) or dtypes.default_int_dtype()
    samples = lax.convert_element_type(bernoulli(key, 0.5, _shape("rademacher", shape)), dt)
    return lax.sub(lax.mul(np.asarray(2, dt), samples), np.asarray(1, dt))


def categorical(key: KeyArray, logits: Any, axis: int = -1, shape: Shape | None = None) -> Array:
    """Indices drawn with probabilities ``softmax(logits)`` along ``axis`` (the
    Gumbel-max trick); ``shape`` must end with the batch shape of ``logits``."""
    (lg,) = _util.promote_dtypes_inexact("lamina.random.categorical", logits)
    logits_shape = get_aval(lg).shape
    ax = _util.canonicalize_axis("lamina.random.categorical", axis, len(logits_shape))
    batch_shape = logits_shape[:ax] + logits_shape[ax + 1:]
    out_shape = batch_shape if shape is None else _shape("categorical", shape)
    if len(out_shape) < len(batch_shape) or \
            out_shape[len(out_shape) - len(batch_shape):] != batch_shape:
        raise ValueError(f"categorical: shape {out_shape} is not compatible with the batch "
                         f"shape {batch_shape} of logits")
    prefix = out_shape[:len(out_shape) - len(batch_shape)]
    noise_shape = prefix + logits_shape
    dt = get_aval(lg).dtype
    noisy = lax.add(gumbel(key, noise_shape, dt), _param("categorical", lg, dt, len(noise_shape)))
    return lax.argmax(noisy, len(prefix) + ax, dtypes.default_int_dtype())


def _shuffle(key: KeyArray, x: Array, axis: int) -> Array:
    """``x`` permuted along ``axis`` by sorting on random keys, repeated enough
    rounds that collisions of the 32-bit sort keys are negligible."""
    size = math.prod(get_aval(x).shape)
    rounds = math.ceil(3 * math.log(max(1, size)) / math.log(2 ** 32 - 1))
    for _ in range(rounds):
        keys = split(key)
        key, subkey = (lax.index_in_dim(keys, i, keepdims=False) for i in (0, 1))
        sort_keys = _random_bits(subkey, 32, get_aval(x).shape, "permutation")
        _, x = lax.sort((sort_keys, x), dimension=axis, num_keys=1)
    return x


def permutation(key: KeyArray, x: Any, axis: int = 0, independent: bool = False) -> Array:
    """A random permutation of ``arange(x)`` (integer ``x``) or of ``x`` along
    ``axis`` (each slice independently if ``independent``)."""
    is_list = isinstance(x, (list, tuple))
    if not is_list and get_aval(_util.operand("lamina.random.permutation", x)).ndim == 0:
        n = _util.concrete_int("lamina.random.permutation", x, "x (an integer size)")
        return _shuffle(key, lax.iota(dtypes.default_int_dtype(), n), 0)
    arr = _util.operand("lamina.random.permutation", x)
    ax = _util.canonicalize_axis("lamina.random.permutation", axis, get_aval(arr).ndim)
    if independent or get_aval(arr).ndim == 1:
        return _shuffle(key, arr, ax)
    index = _shuffle(key, lax.iota(dtypes.default_int_dtype(), get_aval(arr).shape[ax]), 0)
    return jnp.take(arr, index, axis=ax, unique_indices=True)


def choice(key: KeyArray, a: Any, shape: Shape = (), replace: bool = True, p: Any = None,
           axis: int = 0) -> Array:
    """Random draws from ``a`` (or ``arange(a)`` for an integer ``a``) along
    ``axis``, with or without replacement, uniformly or with probabilities ``p``."""
    arr = _util.operand("lamina.random.choice", a, "a")
    scalar = get_aval(arr).ndim == 0
    if scalar:
        n = _util.concrete_int("lamina.random.choice", a, "a (an integer population size)")
        ax = 0
    else:
        ax = _util.canonicalize_axis("lamina.random.choice", axis, get_aval(arr).ndim)
        n = get_aval(arr).shape[ax]
    dims = _shape("choice", shape)
    count = math.prod(dims)
    if count == 0:
        return jnp.zeros(dims, get_aval(arr).dtype)
    if n <= 0:
        raise ValueError("choice: a must be greater than 0 unless no samples are taken")
    if not replace and count > n:
        raise ValueError("choice: cannot take a larger sample than population when "
                         "'replace=False'")
    if p is None:
        if replace:
            index = randint(key, dims, 0, n)
            picked = index if scalar else jnp.take(arr, index, axis=ax)
        else:
            shuffled = permutation(key, n if scalar else arr, ax)
            picked = lax.slice_in_dim(shuffled, 0, count, 1, ax)
    else:
        (probs,) = _util.promote_dtypes_inexact("lamina.random.choice", p)
        if get_aval(probs).shape != (n,):
            raise ValueError("choice: p must be None or match the shape of a")
        if replace:
            cumulative = jnp.cumsum(probs)
            total = lax.index_in_dim(cumulative, n - 1, keepdims=False)
            u = uniform(key, dims, get_aval(cumulative).dtype)
            draw = lax.mul(total, lax.sub(np.asarray(1, get_aval(u).dtype), u))
            index = lax.convert_element_type(jnp.searchsorted(cumulative, draw),
                                             dtypes.default_int_dtype())
        else:
            # The Gumbel top-k trick draws without replacement with weights p.
            g = lax.add(gumbel(key, (n,), get_aval(probs).dtype), jnp.log(probs))
            index = lax.convert_element_type(lax.top_k(g, count)[1], dtypes.default_int_dtype())
        picked = index if scalar else jnp.take(arr, index, axis=ax)
    if scalar:
        return lax.reshape(picked, dims)
    out_shape = get_aval(arr).shape[:ax] + dims + get_aval(arr).shape[ax + 1:]
    return lax.reshape(picked, out_shape)
