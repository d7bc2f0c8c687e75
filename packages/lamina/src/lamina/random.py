"""Counter-based, splittable pseudo-random numbers (Threefry-2x32, and XLA's
bit generator for the ``rbg`` and ``unsafe_rbg`` keys).

A *key* is a raw ``uint32[2]`` array (``PRNGKey``) or a typed key (``key``: a
``PRNGKeyArray`` of dtype ``key<fry>``, ``key<rbg>`` or ``key<urbg>`` over its
key data, a pytree so it passes through every transformation; see
``lamina_tracing_core.numpy.key_arrays``). Nothing here has hidden state: every function
takes a key and is a pure function of it, so the same key gives the same
numbers under ``jit``, ``vmap``, ``pmap`` and on every platform. To get fresh
numbers, ``split`` a key into new ones; never reuse a key.

The Threefry algorithms are by default JAX's "partitionable" ones (the default
since JAX 0.5): the bits for an array of shape ``s`` are the Threefry hash of
the row-major 64-bit element counters ``0 .. prod(s) - 1`` (high and low
words) under the key, so keys and numbers equal JAX's for the same seed. With
``threefry_partitionable`` off they are JAX's original ones (the hash of one
flat 32-bit count, split in halves), JAX's numbers for that setting.

Three settings (``lamina_tracing_core.trace_settings``) are read when a
function runs or is traced: ``default_prng_impl`` (what ``key`` and
``PRNGKey`` make, and what a raw key is read as), ``legacy_prng_key``
(whether raw keys are allowed, warned about or refused) and
``threefry_partitionable``. The
distributions use JAX's algorithms, each compiled as one computation, and give
JAX's bits too.
"""

from __future__ import annotations

import lamina_interpreters_pxla  # noqa: F401  (sets the default eager impl)
import math
import operator
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from lamina_tracing_core import control_flow as lax_control
from lamina_tracing_core import core, dtypes, lax, trace_settings
from lamina_tracing_core import vma as _vma
from lamina_mlir_lowering.lowering import lower_fun
from lamina_mlir_lowering.rules import register_lowering
from lamina_tracing_core.api import vmap
from lamina_tracing_core.avals import get_aval, order_axes
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.base_primitives import bdim_at_front
from lamina_tracing_core.lax import helpers as lax_helpers
from lamina_tracing_core.lax import special as lax_special
from lamina_tracing_core.numpy import _util
from lamina_tracing_core import out_sharding as _out_sharding
from lamina_tracing_core.out_sharding import takes_out_sharding
from lamina_tracing_core.numpy.key_arrays import (IMPLS, RBG, THREEFRY, UNSAFE_RBG, KeyDType,
                                                   PRNGImpl, PRNGKeyArray, resolve_impl)
from lamina_tracing_core.primitives import Primitive
from lamina_sharded_jit import jit

import lamina.numpy as jnp

Array = Any
KeyArray = Any
Shape = Sequence[int]

__all__ = [
    "KeyDType", "PRNGKey", "PRNGKeyArray", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy",
    "chisquare", "choice", "clone", "default_prng_impl", "dirichlet", "double_sided_maxwell", "exponential", "f",
    "fold_in", "gamma", "generalized_normal", "geometric", "gumbel", "key", "key_data",
    "key_dtype", "key_impl",
    "laplace", "loggamma", "logistic", "lognormal", "maxwell", "multinomial",
    "multivariate_normal", "normal", "orthogonal", "pareto", "permutation", "poisson",
    "rademacher", "random_gamma_p", "randint", "rayleigh", "split", "t", "threefry_2x32", "triangular",
    "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data",
]

_UINT_BY_BITS: dict[int, np.dtype[Any]] = {
    8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32),
    64: np.dtype(np.uint64)}


# --- the hash ------------------------------------------------------------------------------
def threefry_2x32(keypair: tuple[Any, Any] | Any, count: Any) -> Array:
    """The Threefry-2x32 hash of the uint32 array ``count`` under ``keypair``
    (two uint32 scalars, or a threefry key): the flattened count is split into
    two halves hashed as word pairs (padded with a zero if odd), as JAX does."""
    if isinstance(keypair, (tuple, list)):
        k0, k1 = (_util.convert(_util.operand("lamina.random.threefry_2x32", k, "keypair"),
                                np.uint32) for k in keypair)
    else:
        key = _check_key("threefry_2x32", keypair)
        if _impl_of(key) is not THREEFRY:
            raise TypeError(f"lamina.random.threefry_2x32: keypair must be a threefry2x32 key, "
                            f"got one of dtype {key.dtype}")
        k0, k1 = _words(_data(key))
    x = _util.operand("lamina.random.threefry_2x32", count, "count")
    if get_aval(x).dtype != np.uint32:
        raise TypeError(f"threefry_2x32: count must be uint32, got {get_aval(x).dtype}")
    return _hash_count(k0, k1, x)


def _hash_count(k0: Array, k1: Array, x: Array) -> Array:
    """``threefry_2x32`` of the uint32 array ``x`` under the words ``k0, k1``."""
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


def _words(data: Array) -> tuple[Array, Array]:
    """The two words of one threefry key's data (``uint32[2]``)."""
    return (lax.index_in_dim(data, 0, axis=0, keepdims=False),
            lax.index_in_dim(data, 1, axis=0, keepdims=False))


def _counters(shape: tuple[int, ...]) -> tuple[Array, Array]:
    """High and low 32-bit words of the row-major 64-bit counter over ``shape``."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        # The low word alone would wrap; lamina's iota is 32-bit here.
        raise ValueError(f"random: shape {shape} has {size} elements; at most 2**32 - 1 are "
                         "supported")
    low = lax.reshape(lax.iota(np.uint32, size), shape)
    return lax.full(shape, 0, np.uint32), low


def _join_words(y0: Array, y1: Array) -> Array:
    """Key data ``(..., 2)`` from its two words."""
    nd = get_aval(y0).ndim
    return lax.concatenate([lax.expand_dims(y0, (nd,)), lax.expand_dims(y1, (nd,))], nd)


# --- the implementations --------------------------------------------------------------------
# Each works on the key data of one key (threefry2x32: uint32[2]; rbg and
# unsafe_rbg: uint32[4]) and follows JAX's algorithm, so the bits are JAX's.
def _threefry_seed(seed: Array) -> Array:
    """``uint32[2]``: the high and low 32-bit words of an integer scalar seed."""
    aval = get_aval(seed)
    if aval.dtype.itemsize == 8:
        high = lax.convert_element_type(
            lax.shift_right_logical(seed, np.asarray(32, aval.dtype)), np.uint32)
    else:
        high = lax.full((), 0, np.uint32)
    return _join_words(high, lax.convert_element_type(seed, np.uint32))


def _threefry_split(data: Array, shape: tuple[int, ...]) -> Array:
    k0, k1 = _words(data)
    if not trace_settings.state.threefry_partitionable:
        # JAX's original scheme: the hash of the flat count 0 .. 2 * num - 1,
        # its words taken in pairs.
        num = math.prod(shape)
        _check_count("split", shape, 2 * num)
        return lax.reshape(_hash_count(k0, k1, lax.iota(np.uint32, 2 * num)), shape + (2,))
    high, low = _counters(shape)
    return _join_words(*lax.threefry2x32(k0, k1, high, low))


def _threefry_fold_in(data: Array, word: Array) -> Array:
    k0, k1 = _words(data)
    return _join_words(*lax.threefry2x32(k0, k1, np.uint32(0), word))


def _check_count(fun: str, shape: tuple[int, ...], words: int) -> None:
    if words >= 2 ** 32 - 1:
        # JAX hashes more words in blocks of split keys; lamina's count is one iota.
        raise ValueError(f"lamina.random.{fun}: shape {shape} needs {words} random words "
                         f"without threefry_partitionable; at most 2**32 - 2 are supported")


def _threefry_bits_original(data: Array, width: int, shape: tuple[int, ...]) -> Array:
    """JAX's original Threefry bits: the hash of the flat count 0 .. words - 1,
    taken as ``width``-bit values (two words per 64-bit value, high half
    first; 8 and 16-bit values are each word's pieces, low bits first)."""
    size = math.prod(shape)
    dtype = _UINT_BY_BITS[width]
    if size == 0:
        return lax.full(shape, 0, dtype)
    words = -(-width * size // 32)
    _check_count("bits", shape, words)
    k0, k1 = _words(data)
    out = _hash_count(k0, k1, lax.iota(np.uint32, words))
    if width == 64:
        high, low = (lax.convert_element_type(lax.slice_in_dim(out, i * size, (i + 1) * size),
                                              dtype) for i in (0, 1))
        out = lax.bitwise_or(lax.shift_left(high, np.asarray(32, dtype)), low)
    elif width < 32:
        per_word = 32 // width
        shifts = lax.mul(np.uint32(width), lax.broadcasted_iota(np.uint32, (1, per_word), 1))
        pieces = lax.shift_right_logical(lax.broadcast_in_dim(out, (words, per_word), (0,)),
                                         lax.broadcast_in_dim(shifts, (words, per_word), (0, 1)))
        pieces = lax.bitwise_and(pieces, np.uint32(np.iinfo(dtype).max))
        flat = lax.convert_element_type(lax.reshape(pieces, (words * per_word,)), dtype)
        out = lax.slice_in_dim(flat, 0, size)
    return lax.reshape(out, shape)


def _threefry_bits(data: Array, width: int, shape: tuple[int, ...]) -> Array:
    if not trace_settings.state.threefry_partitionable:
        return _threefry_bits_original(data, width, shape)
    k0, k1 = _words(data)
    y0, y1 = lax.threefry2x32(k0, k1, *_counters(shape))
    dtype = _UINT_BY_BITS[width]
    if width == 64:
        high = lax.convert_element_type(y0, dtype)
        return lax.bitwise_or(lax.shift_left(high, np.asarray(32, dtype)),
                              lax.convert_element_type(y1, dtype))
    mixed = lax.bitwise_xor(y0, y1)
    return mixed if width == 32 else lax.convert_element_type(mixed, dtype)


def _from_threefry_seed(half: Array) -> Array:
    """threefry2x32's key data from its seed's words: those words."""
    return half


def _rbg_seed(half: Array) -> Array:
    """``uint32[4]``: the threefry seed's words twice."""
    return lax.concatenate([half, half], 0)


def _rbg_halves(data: Array) -> list[Array]:
    return [lax.slice_in_dim(data, i, i + 2, 1, 0) for i in (0, 2)]


def _rbg_split(data: Array, shape: tuple[int, ...]) -> Array:
    """Each threefry half split on its own; the halves side by side."""
    nd = len(shape)
    halves = [lax.expand_dims(_threefry_split(h, shape), (nd,)) for h in _rbg_halves(data)]
    return lax.reshape(lax.concatenate(halves, nd), shape + (4,))


def _rbg_fold_in(data: Array, word: Array) -> Array:
    return lax.concatenate([_threefry_fold_in(h, word) for h in _rbg_halves(data)], 0)


def _rbg_bits(data: Array, width: int, shape: tuple[int, ...]) -> Array:
    return lax.rng_bit_generator(data, shape, _UINT_BY_BITS[width])[1]


def _unsafe_rbg_split(data: Array, shape: tuple[int, ...]) -> Array:
    """Every tenth word block of one generator call (ten rounds as the hash)."""
    num = math.prod(shape)
    blocks = lax.rng_bit_generator(data, (10 * num, 4), np.uint32)[1]
    return lax.reshape(lax.slice_in_dim(blocks, 0, 10 * num, 10, 0), shape + (4,))


def _unsafe_rbg_fold_in(data: Array, word: Array) -> Array:
    blocks = lax.rng_bit_generator(_rbg_seed(_threefry_seed(word)), (10, 4), np.uint32)[1]
    return lax.bitwise_xor(data, lax.index_in_dim(blocks, 9, 0, keepdims=False))


class _Algorithms(NamedTuple):
    #: the key data from the seed's threefry words (``uint32[2]``)
    seed: Callable[[Array], Array]
    split: Callable[[Array, tuple[int, ...]], Array]
    fold_in: Callable[[Array, Array], Array]
    bits: Callable[[Array, int, tuple[int, ...]], Array]


_ALGORITHMS: dict[PRNGImpl, _Algorithms] = {
    THREEFRY: _Algorithms(_from_threefry_seed, _threefry_split, _threefry_fold_in, _threefry_bits),
    RBG: _Algorithms(_rbg_seed, _rbg_split, _rbg_fold_in, _rbg_bits),
    UNSAFE_RBG: _Algorithms(_rbg_seed, _unsafe_rbg_split, _unsafe_rbg_fold_in, _rbg_bits),
}


# --- keys -------------------------------------------------------------------------------------
def _default_impl() -> PRNGImpl:
    """The ``default_prng_impl`` setting's implementation."""
    return IMPLS[trace_settings.state.default_prng_impl]


def _check_legacy_key(fun: str) -> None:
    """A raw key reached ``fun``: fine, a warning or an error, by the
    ``legacy_prng_key`` setting (JAX's text, then the function's name)."""
    mode = trace_settings.state.legacy_prng_key
    if mode == "allow":
        return
    message = ("Legacy uint32 key array passed as key to jax.random function. Please create "
               "keys using jax.random.key(). If use of a raw key array was intended, set "
               f'jax_legacy_prng_key="allow". (in lamina.random.{fun})')
    if mode == "error":
        raise ValueError(message)
    warnings.warn(message, UserWarning, stacklevel=_caller_level())


_OWN_FILES = (__file__, _out_sharding.__file__)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside this module and the
    ``out_sharding`` wrapper around its samplers (the user's call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename in _OWN_FILES:
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _check_key(fun: str, key: Any) -> KeyArray:
    """One key, typed (returned as is) or raw (the default implementation's
    ``uint32`` key data, checked against ``legacy_prng_key``); anything else
    is an error naming ``fun`` and its ``key`` argument."""
    if isinstance(key, PRNGKeyArray):
        if key.shape:
            raise TypeError(f"lamina.random.{fun}: expected a single PRNG key, got a key array "
                            f"of shape {key.shape}; for a batch of keys use vmap")
        return key
    k = _util.operand(f"lamina.random.{fun}", key, "key")
    aval = get_aval(k)
    impl = _default_impl()
    if aval.shape != impl.key_shape or aval.dtype != np.uint32:
        raise TypeError(f"lamina.random.{fun}: argument key must be a PRNG key (a typed key "
                        f"from lamina.random.key, or a uint32{list(impl.key_shape)} array of "
                        f"{impl.name} key data from PRNGKey), got {aval.str_short()}; for a "
                        f"batch of keys use vmap")
    _check_legacy_key(fun)
    return k


def _impl_of(key: KeyArray) -> PRNGImpl:
    return key.impl if isinstance(key, PRNGKeyArray) else _default_impl()


def _data(key: KeyArray) -> Array:
    return key.base if isinstance(key, PRNGKeyArray) else key


def _like(key: KeyArray, data: Array) -> KeyArray:
    """Key data as keys of ``key``'s kind (typed stays typed, raw stays raw)."""
    return key.with_data(data) if isinstance(key, PRNGKeyArray) else data


def _key_at(keys: KeyArray, i: int) -> KeyArray:
    """The ``i``-th key of a 1-D key array (typed or raw data)."""
    if isinstance(keys, PRNGKeyArray):
        return keys[i]
    return lax.index_in_dim(keys, i, keepdims=False)


def _seed_words_python(seed: int) -> tuple[int, int]:
    """High and low words of a Python int seed, as JAX: it is first an int64
    (x64) or int32 (wrapping), then split."""
    if not -(2 ** 63) <= seed < 2 ** 64:
        raise OverflowError(f"PRNGKey: Python int {seed} too large to convert to a 64-bit seed")
    if dtypes.x64_enabled():
        as_uint64 = seed & 0xFFFFFFFFFFFFFFFF
        return as_uint64 >> 32, as_uint64 & 0xFFFFFFFF
    return 0, seed & 0xFFFFFFFF


def _seed_data(fun: str, seed: Any, impl: PRNGImpl) -> Array:
    """The key data ``impl`` makes from an integer scalar seed."""
    if isinstance(seed, (bool, np.bool_)) or isinstance(seed, (float, complex)):
        raise TypeError(f"lamina.random.{fun}: seed must be an integer, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        words = jnp.array(_seed_words_python(int(seed)), dtype=np.uint32)
        return _ALGORITHMS[impl].seed(words)
    s = _util.operand(f"lamina.random.{fun}", seed, "seed")
    aval = get_aval(s)
    if aval.shape:
        raise TypeError(f"lamina.random.{fun}: seed must be a scalar, got shape {aval.shape}")
    if not dtypes.is_integer(aval.dtype):
        raise TypeError(f"lamina.random.{fun}: seed must have an integer dtype, got "
                        f"{aval.dtype}")
    return _ALGORITHMS[impl].seed(_threefry_seed(_util.strip_weak(s)))


def PRNGKey(seed: Any, *, impl: Any = None) -> KeyArray:  # noqa: N802 - JAX's name
    """Raw key data from an integer seed (``impl``, default the
    ``default_prng_impl`` setting; ``uint32[2]`` for threefry2x32: the seed's
    high and low 32-bit words)."""
    return _seed_data("PRNGKey", seed,
                      resolve_impl("lamina.random.PRNGKey", impl, _default_impl()))


# --- typed keys -----------------------------------------------------------------------------
def default_prng_impl() -> str:
    """The implementation ``key`` and ``PRNGKey`` use: the
    ``default_prng_impl`` setting (``threefry2x32`` unless changed)."""
    return _default_impl().name


def key_dtype(impl_spec: Any = None) -> KeyDType:
    """The dtype of typed keys of ``impl_spec`` (default the ``default_prng_impl`` setting)."""
    return KeyDType(resolve_impl("lamina.random.key_dtype", impl_spec, _default_impl()))


def _impl_or_dtype(fun: str, impl: Any, dtype: Any) -> Any:
    """The implementation asked for by ``impl`` or (JAX's newer name) ``dtype``."""
    if dtype is None:
        return impl
    if impl is not None:
        raise ValueError(f"Cannot specify both `impl` and `dtype` arguments to jax.random.{fun}")
    return dtype


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed key (shape ``()``, dtype ``key<fry>``, ``key<rbg>`` or
    ``key<urbg>``) from an integer seed (``dtype`` or ``impl``: a key dtype
    or an implementation name; default the ``default_prng_impl`` setting)."""
    chosen = resolve_impl("lamina.random.key", _impl_or_dtype("key", impl, dtype),
                          _default_impl())
    return PRNGKeyArray(_seed_data("key", seed, chosen), chosen)


def key_data(keys: Any) -> Array:
    """The ``uint32`` data behind typed keys (shape ``keys.shape +
    key_shape``); raw key data is returned as is."""
    if isinstance(keys, PRNGKeyArray):
        return keys.base
    data = _check_key_data("key_data", keys, _default_impl())
    _check_legacy_key("key_data")
    return data


def key_impl(keys: Any) -> str:
    """The name of the implementation of typed or raw keys (``threefry2x32``,
    ``rbg``, ``unsafe_rbg``; raw keys are the ``default_prng_impl`` setting's)."""
    if isinstance(keys, PRNGKeyArray):
        return keys.impl.name
    impl = _default_impl()
    _check_key_data("key_impl", keys, impl)
    _check_legacy_key("key_impl")
    return impl.name


def _check_key_data(fun: str, data: Any, impl: PRNGImpl, name: str = "keys") -> Array:
    k = _util.operand(f"lamina.random.{fun}", data, name)
    aval = get_aval(k)
    size = len(impl.key_shape)
    if aval.ndim < size or aval.shape[aval.ndim - size:] != impl.key_shape or \
            aval.dtype != np.uint32:
        raise TypeError(f"lamina.random.{fun}: argument {name} must be {impl.name} key data "
                        f"of shape "
                        f"(..., {', '.join(map(str, impl.key_shape))}) and dtype uint32, got "
                        f"{aval.str_short()}")
    return k


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys over raw key data of shape ``(..., *key_shape)`` (uint32);
    ``dtype`` or ``impl`` names the implementation."""
    chosen = resolve_impl("lamina.random.wrap_key_data",
                          _impl_or_dtype("wrap_key_data", impl, dtype))
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError("lamina.random.wrap_key_data: key_bits_array is already a typed key "
                        "array; pass its key_data")
    return PRNGKeyArray(_check_key_data("wrap_key_data", key_bits_array, chosen,
                                        "key_bits_array"), chosen)


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
    """``num`` new keys (shape ``(num,)``, or ``num`` for a shape; raw key
    data gains the key-data axis), independent of ``key`` and of each other."""
    k = _check_key("split", key)
    impl = _impl_of(k)
    return _like(k, _ALGORITHMS[impl].split(_data(k), _shape("split", num)))


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
    k = _check_key("fold_in", key)
    return _like(k, _ALGORITHMS[_impl_of(k)].fold_in(_data(k), word))


# --- raw bits -------------------------------------------------------------------------------------
def _random_bits(key: KeyArray, width: int, shape: tuple[int, ...], fun: str) -> Array:
    k = _check_key(fun, key)
    return _ALGORITHMS[_impl_of(k)].bits(_data(k), width, shape)


def bits(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Uniformly random unsigned integers of ``dtype`` (default: the default
    unsigned integer, uint32, or uint64 with x64 on)."""
    default = np.dtype(np.uint64) if dtypes.x64_enabled() else np.dtype(np.uint32)
    dt = default if dtype is None else _util.user_dtype("lamina.random.bits", dtype)
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
    """Standard normal floats (``sqrt(2) * erfinv(u)`` for ``u`` uniform in (-1, 1)).

    A complex ``dtype`` gives standard complex normals, as JAX's: real and
    imaginary parts drawn from the two halves of ``split(key)``, each of
    variance 1/2 (``(re + 1j * im) / sqrt(2)``)."""
    dt = _util.user_dtype("lamina.random.normal", dtype) or dtypes.default_float_dtype()
    dims = _shape("normal", shape)
    if dt.kind != "c":
        return _real_normal(key, dims, _float_dtype("normal", dt))
    return _complex_normal_compiled(_check_key("normal", key), dims, dt)


def _complex_normal(key: KeyArray, dims: tuple[int, ...], dt: np.dtype[Any]) -> Array:
    part = np.empty(0, dt).real.dtype
    key_re, key_im = _split_keys(key, 2)
    pair = lax.complex(_real_normal(key_re, dims, part), _real_normal(key_im, dims, part))
    return lax.div(pair, np.asarray(np.sqrt(2), dt))


# one compiled computation, as JAX's, so eager values equal jitted ones bit for
# bit (XLA fuses the division; separate eager operations round differently)
_complex_normal_compiled = jit(_complex_normal, static_argnums=(1, 2))


def _real_normal(key: KeyArray, dims: tuple[int, ...], dt: np.dtype[Any]) -> Array:
    lo = np.nextafter(np.array(-1.0, dt), np.array(0.0, dt))
    u = _uniform(key, dims, dt, lo, 1.0, "normal")
    return lax.mul(np.asarray(np.sqrt(2), dt), lax.erf_inv(u))


def truncated_normal(key: KeyArray, lower: Any, upper: Any, shape: Shape | None = None,
                     dtype: Any = None) -> Array:
    """Normal floats conditioned on ``lower < x < upper``.

    It runs as one compiled computation, as in JAX, so the eager values equal
    the jitted ones bit for bit (XLA rewrites the fused arithmetic, e.g. a
    division by a constant, which separate eager operations would not get)."""
    dt = _float_dtype("truncated_normal", dtype)
    dims = None if shape is None else _shape("truncated_normal", shape)
    return _truncated_normal_compiled(key, lower, upper, dims, dt)


def _truncated_normal(key: KeyArray, lower: Any, upper: Any, shape: tuple[int, ...] | None,
                      dt: np.dtype[Any]) -> Array:
    lo = _util.convert(_util.operand("lamina.random.truncated_normal", lower, "lower"), dt)
    hi = _util.convert(_util.operand("lamina.random.truncated_normal", upper, "upper"), dt)
    if shape is None:
        dims = _util.broadcast_shapes("lamina.random.truncated_normal", get_aval(lo).shape,
                                      get_aval(hi).shape)
    else:
        dims = shape
    sqrt2 = np.asarray(np.sqrt(2), dt)
    a = lax.erf(lax.div(lo, sqrt2))
    b = lax.erf(lax.div(hi, sqrt2))
    u = _uniform(key, dims, dt, a, b, "truncated_normal")
    out = lax.mul(sqrt2, lax.erf_inv(u))
    # Rounding may land on a bound; keep the samples strictly inside.
    floor = lax.nextafter(lax.stop_gradient(lo), lax.full_like(lo, np.inf))
    ceil = lax.nextafter(lax.stop_gradient(hi), lax.full_like(hi, -np.inf))
    return jnp.clip(out, floor, ceil)


_truncated_normal_compiled = jit(_truncated_normal, static_argnums=(3, 4))


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


def gumbel(key: KeyArray, shape: Shape = (), dtype: Any = None, mode: str | None = None
           ) -> Array:
    """Standard Gumbel floats ``-log(-log(u))``. ``mode`` (JAX's): ``'low'``
    draws one uniform per sample; ``'high'`` two, so the tail (events of
    probability below ~1e-7 in float32) keeps its precision; ``'highest'``
    builds float32 uniforms from 64 random bits; None: the
    ``high_dynamic_range_gumbel`` setting's choice."""
    chosen = _gumbel_mode(mode)
    dt = _float_dtype("gumbel", dtype)
    dims = _shape("gumbel", shape)
    # one compiled program, as JAX's (its fused arithmetic gives JAX's bits)
    return _gumbel_compiled(_check_key("gumbel", key), dims, dt, chosen)


def _gumbel(key: KeyArray, dims: tuple[int, ...], dt: np.dtype[Any], mode: str) -> Array:
    if mode != "low":
        return _gumbel_precise(key, dims, dt, mode)
    u = _uniform(key, dims, dt, float(dtypes.finfo(dt).tiny), 1.0, "gumbel")
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def _gumbel_mode(mode: str | None) -> str:
    if mode is None:
        return "high" if trace_settings.state.high_dynamic_range_gumbel else "low"
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return mode


def _gumbel_precise(key: KeyArray, dims: tuple[int, ...], dt: np.dtype[Any], mode: str) -> Array:
    """The ``'high'``/``'highest'`` Gumbel samplers, in JAX's steps."""
    if dt == np.float32 and mode == "highest":
        x, low_half = _uniform_from_64_bits(key, dims)
        return jnp.where(low_half, -jnp.log(-jnp.log1p(-x)), -jnp.log(-jnp.log(x)))
    info = dtypes.finfo(dt)
    both = _uniform(key, (2,) + dims, dt, 0.0, 1.0, "gumbel")
    high, low = both[0], both[1]
    # below one half the second draw fills in the bits the first one lacks
    x = jnp.where(high >= 0.5, high, high + 2.0 ** -int(info.nmant) * low + float(info.tiny))
    return -jnp.log(-jnp.log1p(-x))


def _uniform_from_64_bits(key: KeyArray, dims: tuple[int, ...]) -> tuple[Array, Array]:
    """Float32 uniforms in (0, 1) from two 32-bit words each, below one half
    read from the bits and above it from their complement (so that
    ``log1p(-x)`` and ``log(x)`` each see the precise side), and the mask of
    the draws below one half."""
    bits = _random_bits(key, 32, (2,) + dims, "gumbel")
    neg = lax.bitwise_not(bits)
    carry = lax.convert_element_type(
        lax.eq(neg[1], np.asarray(np.iinfo(np.uint32).max, np.uint32)), np.uint32)
    neg = lax.add(neg, jnp.stack([carry, jnp.ones_like(carry)]))  # 1 - bits, 64-bit fixed point
    low_half = lax.lt(bits[0], np.asarray(1 << 31, np.uint32))
    words = jnp.where(low_half, bits, neg)
    return _float32_from_words(words), low_half


def _float32_from_words(words: Array) -> Array:
    """u32[2, ...] read as a 64-bit fixed-point fraction, rounded down into a
    float32 in (0, 1): the leading zeros give the exponent, the next 23 bits
    the mantissa."""
    info = dtypes.finfo(np.float32)
    hi, lo = words[0], words[1]
    hi_zeros, lo_zeros = lax.clz(hi), lax.clz(lo)
    u32 = np.uint32
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hi_zeros),
        jnp.where(hi_zeros == 32, lax.shift_left(lo, lo_zeros),
                  lax.shift_right_logical(lo, lax.sub(np.asarray(32, u32), hi_zeros))))
    mantissa = lax.shift_right_logical(mantissa, np.asarray(32 - int(info.nmant) - 1, u32))
    mantissa = lax.bitwise_and(mantissa, np.asarray((1 << int(info.nmant)) - 1, u32))
    zeros = jnp.where(hi_zeros == 32, lax.add(np.asarray(32, u32), lo_zeros), hi_zeros)
    exponent = lax.shift_left(lax.sub(np.asarray(-int(info.minexp), u32), zeros),
                              np.asarray(int(info.nmant), u32))
    exponent = lax.bitwise_and(
        exponent, np.asarray((1 << 30) - (1 << (int(info.nmant) - 1)), u32))
    return lax.bitcast_convert_type(lax.bitwise_or(exponent, mantissa), np.float32)


_gumbel_compiled = jit(_gumbel, static_argnums=(1, 2, 3))


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
    key = _check_key("randint", key)
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
    k1, k2 = (_key_at(keys, i) for i in (0, 1))
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


def bernoulli(key: KeyArray, p: Any = np.float32(0.5), shape: Shape | None = None,
              mode: str = "low") -> Array:
    """Booleans that are True with probability ``p`` (a float). ``mode='high'``
    (JAX's) compares against two uniforms, precise for ``p`` below ~1e-7 in
    float32, at twice the cost."""
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    prob = _util.operand("lamina.random.bernoulli", p, "p")
    dt = dtypes.canonicalize_dtype(get_aval(prob).dtype)
    if not dtypes.is_floating(dt):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dt}.")
    prob = _util.convert(prob, dt)
    dims = get_aval(prob).shape if shape is None else _shape("bernoulli", shape)
    threshold = _util.broadcast_to("lamina.random.bernoulli",
                                   _param("bernoulli", prob, dt, len(dims)), dims)
    if mode == "high":
        return _bernoulli_high_compiled(_check_key("bernoulli", key), threshold, dims, dt)
    u = _uniform(key, dims, dt, 0.0, 1.0, "bernoulli")
    return lax.lt(u, threshold)


def _bernoulli_high(key: KeyArray, threshold: Array, dims: tuple[int, ...],
                    dt: np.dtype[Any]) -> Array:
    """``u2 < p - u1`` with ``u2`` scaled down to the resolution ``u1`` lacks."""
    both = _uniform(key, (2,) + dims, dt, 0.0, 1.0, "bernoulli")
    fine = lax.mul(both[1], np.asarray(2.0 ** -int(dtypes.finfo(dt).nmant), dt))
    return lax.lt(fine, lax.sub(threshold, both[0]))


_bernoulli_high_compiled = jit(_bernoulli_high, static_argnums=(2, 3))


def rademacher(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """-1 or +1 with equal probability (default int dtype)."""
    dt = _util.user_dtype("lamina.random.rademacher", dtype) or dtypes.default_int_dtype()
    samples = lax.convert_element_type(bernoulli(key, 0.5, _shape("rademacher", shape)), dt)
    return lax.sub(lax.mul(np.asarray(2, dt), samples), np.asarray(1, dt))


def categorical(key: KeyArray, logits: Any, axis: int = -1, shape: Shape | None = None,
                replace: bool = True, mode: str | None = None) -> Array:
    """Indices drawn with probabilities ``softmax(logits)`` along ``axis`` (the
    Gumbel-max trick); ``shape`` must end with the batch shape of ``logits``.
    ``replace=False`` draws distinct indices per batch element (Gumbel top-k);
    ``mode`` is :func:`gumbel`'s."""
    lg, ax, out_shape, prefix = _categorical_args(logits, axis, shape)
    if not replace:
        return _categorical_without_replacement(key, lg, ax, out_shape, prefix, mode)
    noise_shape = prefix + get_aval(lg).shape
    dt = get_aval(lg).dtype
    noisy = lax.add(gumbel(key, noise_shape, dt, mode=mode),
                    _param("categorical", lg, dt, len(noise_shape)))
    return lax.argmax(noisy, len(prefix) + ax, dtypes.default_int_dtype())


def _categorical_args(logits: Any, axis: int, shape: Shape | None
                      ) -> tuple[Array, int, tuple[int, ...], tuple[int, ...]]:
    """The logits (inexact), the axis, the result's shape and its leading
    dimensions beyond the logits' batch shape (checked)."""
    (lg,) = _util.promote_dtypes_inexact("lamina.random.categorical", logits)
    logits_shape = get_aval(lg).shape
    ax = _util.canonicalize_axis("lamina.random.categorical", axis, len(logits_shape))
    batch_shape = logits_shape[:ax] + logits_shape[ax + 1:]
    out_shape = batch_shape if shape is None else _shape("categorical", shape)
    if len(out_shape) < len(batch_shape) or \
            out_shape[len(out_shape) - len(batch_shape):] != batch_shape:
        raise ValueError(f"categorical: shape {out_shape} is not compatible with the batch "
                         f"shape {batch_shape} of logits")
    return lg, ax, out_shape, out_shape[:len(out_shape) - len(batch_shape)]


def _categorical_without_replacement(key: KeyArray, lg: Array, ax: int,
                                     out_shape: tuple[int, ...], prefix: tuple[int, ...],
                                     mode: str | None) -> Array:
    """JAX's ``replace=False``: the top ``k`` of ``logits`` plus Gumbel noise,
    ``k`` the product of the leading dimensions ``prefix``."""
    logits_shape = get_aval(lg).shape
    k = math.prod(prefix)
    if k > logits_shape[ax]:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({logits_shape[ax]}).")
    noisy = lax.add(lg, gumbel(key, logits_shape, get_aval(lg).dtype, mode=mode))
    _, indices = lax.top_k(jnp.moveaxis(noisy, ax, -1), k)  # batch + (k,)
    nd = len(get_aval(indices).shape)
    return lax.reshape(indices, out_shape, (nd - 1, *range(nd - 1)))


def _shuffle(key: KeyArray, x: Array, axis: int) -> Array:
    """``x`` permuted along ``axis`` by sorting on random keys, repeated enough
    rounds that collisions of the 32-bit sort keys are negligible."""
    key = _check_key("permutation", key)
    size = math.prod(get_aval(x).shape)
    rounds = math.ceil(3 * math.log(max(1, size)) / math.log(2 ** 32 - 1))
    for _ in range(rounds):
        keys = split(key)
        key, subkey = (_key_at(keys, i) for i in (0, 1))
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
           axis: int = 0, mode: str | None = None) -> Array:
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
            g = lax.add(gumbel(key, (n,), get_aval(probs).dtype, mode=mode), jnp.log(probs))
            index = lax.convert_element_type(lax.top_k(g, count)[1], dtypes.default_int_dtype())
        picked = index if scalar else jnp.take(arr, index, axis=ax)
    if scalar:
        return lax.reshape(picked, dims)
    out_shape = get_aval(arr).shape[:ax] + dims + get_aval(arr).shape[ax + 1:]
    return lax.reshape(picked, out_shape)


# --- distributions built on the gamma sampler and friends --------------------------------------
# Each sampler runs as one compiled computation with its shape and dtype static,
# as JAX's do, so the bits equal JAX's for the same key (XLA rewrites fused
# float arithmetic, which separate eager operations would not get).
def _split_keys(key: KeyArray, num: int) -> list[Array]:
    keys = split(key, num)
    return [_key_at(keys, i) for i in range(num)]


def _param_shape(fun: str, value: Any, name: str) -> tuple[int, ...]:
    return tuple(get_aval(_util.operand(f"lamina.random.{fun}", value, name)).shape)


def _check_shape(fun: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
    """``shape`` must be the broadcast of itself with every parameter's shape."""
    if not param_shapes:
        return
    try:
        result = _util.broadcast_shapes(f"lamina.random.{fun}", shape, *param_shapes)
    except (TypeError, ValueError):
        result = None
    if result != shape:
        raise ValueError(f"lamina.random.{fun}: parameter shapes {list(param_shapes)} must be "
                         f"broadcast-compatible with the shape argument {shape} and broadcast to "
                         f"it exactly")


def _out_shape(fun: str, shape: Any, **params: Any) -> tuple[int, ...]:
    """The result shape: ``shape`` (checked against the parameters) or their broadcast."""
    shapes = [_param_shape(fun, v, name) for name, v in params.items()]
    if shape is None:
        return _util.broadcast_shapes(f"lamina.random.{fun}", *shapes) if shapes else ()
    dims = _shape(fun, shape)
    _check_shape(fun, dims, *shapes)
    return dims


def _as_array(fun: str, value: Any, name: str, dtype: np.dtype[Any] | None = None) -> Array:
    """A parameter as an argument of a compiled sampler. It stays where it is
    (a Python scalar traces as the weakly typed array ``jnp.asarray`` would
    make), so no transfer to the device precedes each call."""
    x = _util.operand(f"lamina.random.{fun}", value, name)
    if dtype is not None:
        x = _util.convert(x, dtype)
    return x


def _check_real(fun: str, value: Any, name: str) -> None:
    dt = get_aval(_util.operand(f"lamina.random.{fun}", value, name)).dtype
    if dtypes.is_complex(dt) or dt == np.bool_:
        raise TypeError(f"lamina.random.{fun}: {name} must be a real number or array, got "
                        f"dtype {dt}")


def _gamma_one(key: KeyArray, alpha: Array, log_space: bool) -> Array:
    """One Gamma(alpha) draw by Marsaglia and Tsang's method ("A simple method
    for generating gamma variables", 2000), alpha < 1 boosted by
    ``Gamma(alpha) = Gamma(alpha + 1) * U ** (1 / alpha)``."""
    dt = get_aval(alpha).dtype
    zero, one = np.asarray(0, dt), np.asarray(1, dt)
    minus_one, two = np.asarray(-1, dt), np.asarray(2, dt)
    half, third, squeeze = np.asarray(0.5, dt), np.asarray(1.0 / 3.0, dt), np.asarray(0.0331, dt)
    boost_mask = lax.ge(alpha, one)
    alpha_orig = alpha
    alpha = lax.select(boost_mask, alpha, lax.add(alpha, one))
    d = lax.sub(alpha, third)
    c = lax.div(third, lax.sqrt(d))

    def reject(state: tuple[Any, Any, Any, Any]) -> Any:
        _, x_sq, v, u = state
        squeeze_fails = lax.ge(u, lax.sub(one, lax.mul(squeeze, lax.mul(x_sq, x_sq))))
        log_fails = lax.ge(lax.log(u), lax.add(lax.mul(x_sq, half),
                                               lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))))
        return lax.bitwise_and(squeeze_fails, log_fails)

    def next_xv(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k, sub = _split_keys(state[0], 2)
        x = normal(sub, (), dt)
        return k, x, lax.add(one, lax.mul(x, c))

    def propose(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        k, x_key, u_key = _split_keys(state[0], 3)
        _, x, v = lax_control.while_loop(lambda s: lax.le(s[2], zero), next_xv,
                                         (x_key, zero, minus_one))
        u = uniform(u_key, (), dt)
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), u

    key, subkey = _split_keys(key, 2)
    _, _, v, _ = lax_control.while_loop(reject, propose, (key, zero, one, two))
    if log_space:
        log_samples = lax.neg(exponential(subkey, (), dt))
        log_boost = lax.select(lax.bitwise_or(boost_mask, lax.eq(log_samples, zero)), zero,
                               lax.mul(log_samples, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    samples = lax.sub(one, uniform(subkey, (), dt))
    boost = lax.select(boost_mask, one, lax.pow(samples, lax.div(one, alpha_orig)))
    return lax.mul(lax.mul(d, v), boost)


def _gamma_impl(keys: Array, a: Array, *, log_space: bool, impl: PRNGImpl) -> Array:
    """``random_gamma``'s computation: ``keys`` is key data of shape
    ``batch + impl.key_shape`` with ``batch`` a prefix of ``a``'s shape; each
    key is split into one key per element of its slice of ``a``."""
    shape = get_aval(a).shape
    batch = get_aval(keys).shape[:get_aval(keys).ndim - len(impl.key_shape)]
    n = math.prod(shape)
    if n == 0:
        return lax.full(shape, 0, get_aval(a).dtype)
    per_key = math.prod(shape[len(batch):])
    flat_keys = lax.reshape(keys, (math.prod(batch),) + impl.key_shape)
    split_data = vmap(lambda d: _data(split(PRNGKeyArray(d, impl), per_key)))(flat_keys)
    data = lax.reshape(split_data, (n,) + impl.key_shape)
    alphas = lax.reshape(a, (n,))
    if impl is THREEFRY:
        samples = vmap(lambda d, alpha: _gamma_one(PRNGKeyArray(d, impl), alpha, log_space))(
            data, alphas)
    else:
        # The rbg generators batch differently (a batch draws from its first
        # key), so the draws run one after another, as in JAX.
        samples = lax_control.map(
            lambda da: _gamma_one(PRNGKeyArray(da[0], impl), da[1], log_space), (data, alphas))
    return lax.reshape(samples, shape)


def _gamma_grad(sample: Array, a: Array, log_space: bool) -> Array:
    """d sample / d a by implicit reparameterisation (JAX's ``random_gamma_grad``)."""
    if log_space:
        # d log(s) = ds / s; exp(log s) may round to 0, taken as the smallest normal.
        s = lax.exp(sample)
        s = lax.select(lax.eq(s, lax.full_like(s, 0)),
                       lax.full_like(s, float(dtypes.finfo(get_aval(s).dtype).tiny)), s)
        return lax.div(lax_special.random_gamma_grad(a, s), s)
    return lax_special.random_gamma_grad(a, sample)


def _key_type_str(key: KeyArray) -> str:
    """A key's type as JAX prints it in messages (``key<fry>[]{V:x}``)."""
    if isinstance(key, PRNGKeyArray):
        data = get_aval(key.base)
        return f"{key.dtype.name}[{','.join(map(str, key.shape))}]{data.vma_str()}"
    return get_aval(key).str_long()


def _vary_like_key(fun: str, key: KeyArray, *args: Array) -> list[Array]:
    """``args`` made to vary over the manual axes ``key`` varies over, inside a
    ``shard_map`` body checked for varying axes (with ``auto_pcast`` on). A
    key that varies over fewer axes than an argument is an error naming
    ``fun``, as in JAX: making the key vary implicitly would reuse it on every
    device, so the user must choose keys per device (or ``pcast`` the key)."""
    if not (_vma.checking() and _vma.auto_pcast_on()):
        return list(args)
    key_type = get_aval(key.base if isinstance(key, PRNGKeyArray) else key)
    out = []
    for a in args:
        arg_type = get_aval(a)
        missing = key_type.vma - arg_type.vma
        if missing:
            a = _vma.pvary_p.bind(a, axes=order_axes(missing))
            arg_type = get_aval(a)
        if key_type.mat != arg_type.mat:
            raise TypeError(
                f"{fun} requires all arguments to have matching type. Got key type: "
                f"{_key_type_str(key)} vs arg type: {arg_type}. Use lamina.lax.pcast(..., "
                "to='varying') to make them match. If your key is less varying than arg, "
                "watch out for key-reuse problems.")
        out.append(a)
    return out


class _KeyedPrimitive(Primitive):
    """A primitive whose first operand is keys: bound with a typed key array it
    takes the key data and records the implementation as the ``impl`` param
    (a raw ``uint32`` key is the default implementation's data), so jaxprs
    carry plain arrays."""

    def bind(self, *args: Any, **params: Any) -> Any:
        keys, *rest = args
        if isinstance(keys, PRNGKeyArray):
            params["impl"] = keys.impl
            keys = keys.base
        else:
            params.setdefault("impl", _default_impl())
        return super().bind(keys, *rest, **params)


random_gamma_p = _KeyedPrimitive("random_gamma")
"""``random_gamma_p.bind(keys, a, log_space)``: Gamma(``a``) draws (their logs
when ``log_space``) by Marsaglia and Tsang's method; ``keys`` is one key or a
batch of keys over the leading axes of ``a``."""


@random_gamma_p.def_abstract_eval
def _random_gamma_abstract_eval(keys: ShapedArray, a: ShapedArray, *, log_space: bool,
                                impl: PRNGImpl) -> ShapedArray:
    del log_space
    batch = keys.shape[:keys.ndim - len(impl.key_shape)]
    if (keys.dtype != np.uint32 or keys.shape[len(batch):] != impl.key_shape
            or a.shape[:len(batch)] != batch):
        raise TypeError(f"random_gamma: keys must be {impl.name} key data of shape batch + "
                        f"{impl.key_shape} with batch a prefix of a's shape {a.shape}, got "
                        f"{keys.str_short()}")
    if not dtypes.is_floating(a.dtype):
        raise TypeError(f"random_gamma: a must be floating, got {a.str_short()}")
    return ShapedArray(a.shape, a.dtype)


def _random_gamma_batch(args: Any, dims: Any, *, log_space: bool,
                        impl: PRNGImpl) -> tuple[Array, int]:
    size = next(get_aval(x).shape[d] for x, d in zip(args, dims) if d is not None)
    keys, a = (bdim_at_front(x, d, size) for x, d in zip(args, dims))
    return random_gamma_p.bind(keys, a, log_space=log_space, impl=impl), 0


random_gamma_p.def_batching(_random_gamma_batch)
lax_helpers.defjvp2(random_gamma_p, None,
                    lambda t, ans, keys, a, *, log_space, impl:
                    lax.mul(t, _gamma_grad(ans, a, log_space)))
register_lowering(random_gamma_p, lower_fun(_gamma_impl, multiple_results=False))


def _gamma(key: KeyArray, a: Any, shape: tuple[int, ...] | None, dtype: np.dtype[Any],
           log_space: bool) -> Array:
    a_shape = get_aval(a).shape
    if shape is None:
        shape = a_shape
    else:
        _check_shape("loggamma" if log_space else "gamma", shape, a_shape)
    alpha = _util.convert(a, dtype)
    if a_shape != shape:
        alpha = _util.broadcast_to("lamina.random.gamma", alpha, shape)
    (alpha,) = _vary_like_key("gamma", key, alpha)
    return random_gamma_p.bind(key, alpha, log_space=log_space)


_gamma_compiled = jit(_gamma, static_argnums=(2, 3, 4))


def gamma(key: KeyArray, a: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Standard Gamma(a) floats (unit scale), differentiable in ``a`` by
    implicit reparameterisation; ``shape`` defaults to ``a``'s."""
    k = _check_key("gamma", key)
    dt = _float_dtype("gamma", dtype)
    _check_real("gamma", a, "a")
    dims = None if shape is None else _shape("gamma", shape)
    return _gamma_compiled(k, _as_array("gamma", a, "a"), dims, dt, False)


def loggamma(key: KeyArray, a: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """``log`` of Gamma(a) draws, computed in log space (precise for small ``a``):
    ``exp(loggamma(k, a))`` equals ``gamma(k, a)`` up to rounding."""
    k = _check_key("loggamma", key)
    dt = _float_dtype("loggamma", dtype)
    _check_real("loggamma", a, "a")
    dims = None if shape is None else _shape("loggamma", shape)
    return _gamma_compiled(k, _as_array("loggamma", a, "a"), dims, dt, True)


def _beta(key: KeyArray, a: Array, b: Array, shape: tuple[int, ...],
          dtype: np.dtype[Any]) -> Array:
    a, b = _vary_like_key("lamina.random.beta", key, a, b)
    a = _util.broadcast_to("lamina.random.beta", _util.convert(a, dtype), shape)
    b = _util.broadcast_to("lamina.random.beta", _util.convert(b, dtype), shape)
    key_a, key_b = _split_keys(key, 2)
    log_a = loggamma(key_a, a, shape, dtype)
    log_b = loggamma(key_b, b, shape, dtype)
    # gamma_a / (gamma_a + gamma_b), scaled by the larger so nothing underflows.
    log_max = lax.max(log_a, log_b)
    scaled_a = lax.exp(lax.sub(log_a, log_max))
    scaled_b = lax.exp(lax.sub(log_b, log_max))
    return lax.div(scaled_a, lax.add(scaled_a, scaled_b))


_beta_compiled = jit(_beta, static_argnums=(3, 4))


def beta(key: KeyArray, a: Any, b: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Beta(a, b) floats in [0, 1] (two log-gamma draws)."""
    k = _check_key("beta", key)
    dt = _float_dtype("beta", dtype)
    for name, v in (("a", a), ("b", b)):
        _check_real("beta", v, name)
    dims = _out_shape("beta", shape, a=a, b=b)
    return _beta_compiled(k, _as_array("beta", a, "a"), _as_array("beta", b, "b"), dims, dt)


def _softmax_last(x: Array) -> Array:
    x_max = lax.stop_gradient(jnp.max(x, axis=-1, keepdims=True))
    unnormalized = lax.exp(lax.sub(x, _util.broadcast_to("softmax", x_max, get_aval(x).shape)))
    total = jnp.sum(unnormalized, axis=-1, keepdims=True)
    return lax.div(unnormalized, _util.broadcast_to("softmax", total, get_aval(x).shape))


def _dirichlet(key: KeyArray, alpha: Array, shape: tuple[int, ...],
               dtype: np.dtype[Any]) -> Array:
    alpha = _util.convert(alpha, dtype)
    log_samples = loggamma(key, alpha, shape + get_aval(alpha).shape[-1:], dtype)
    return _softmax_last(log_samples)


_dirichlet_compiled = jit(_dirichlet, static_argnums=(2, 3))


def dirichlet(key: KeyArray, alpha: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Dirichlet(alpha) vectors along the last axis (``alpha`` has shape
    ``(..., n)``; the result ``shape + (n,)``)."""
    k = _check_key("dirichlet", key)
    dt = _float_dtype("dirichlet", dtype)
    _check_real("dirichlet", alpha, "alpha")
    a_shape = _param_shape("dirichlet", alpha, "alpha")
    if not a_shape:
        raise ValueError(f"lamina.random.dirichlet: alpha must have at least one dimension "
                         f"(shape (..., n)), got shape {a_shape}")
    if shape is None:
        dims = a_shape[:-1]
    else:
        dims = _shape("dirichlet", shape)
        _check_shape("dirichlet", dims, a_shape[:-1])
    return _dirichlet_compiled(k, _as_array("dirichlet", alpha, "alpha"), dims, dt)


# --- Poisson, binomial, multinomial -------------------------------------------------------------
#: The rejection loops' iteration cap (never reached in practice).
_MAX_ITERS = np.int32(2 ** 31 - 1)


def _isnan(x: Array) -> Array:
    return lax.ne(x, x)


def _poisson_knuth(key: KeyArray, lam: Array, shape: tuple[int, ...],
                   dtype: np.dtype[Any]) -> Array:
    """Knuth's method: count uniforms until their product drops under exp(-lam)."""
    neg_lam = lax.neg(lam)

    def body(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        i, k, rng, log_prod = state
        rng, sub = _split_keys(rng, 2)
        k = lax.select(lax.gt(log_prod, neg_lam), lax.add(k, np.asarray(1, dtype)), k)
        u = uniform(sub, shape, np.float32)
        return lax.add(i, np.int32(1)), k, rng, lax.add(log_prod, lax.log(u))

    def cond(state: tuple[Any, Any, Any, Any]) -> Any:
        i, _, _, log_prod = state
        return lax.bitwise_and(jnp.any(lax.gt(log_prod, neg_lam)), lax.lt(i, _MAX_ITERS))

    init = (np.int32(0), lax.full(shape, 0, dtype), key, lax.full(shape, 0, np.float32))
    k = lax_control.while_loop(cond, body, init)[1]
    return lax.sub(k, np.asarray(1, dtype))


def _poisson_rejection(key: KeyArray, lam: Array, shape: tuple[int, ...],
                       dtype: np.dtype[Any]) -> Array:
    """Hormann's transformed rejection ("The transformed rejection method for
    generating Poisson random variables", 1993)."""
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        i, k_out, accepted, rng = state
        rng, sub0, sub1 = _split_keys(rng, 3)
        u = uniform(sub0, shape, np.float32) - 0.5
        v = uniform(sub1, shape, np.float32)
        u_shifted = 0.5 - lax.abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        rejected = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~rejected & (s <= t))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, rng

    def cond(state: tuple[Any, Any, Any, Any]) -> Any:
        i, _, accepted, _ = state
        return jnp.any(~accepted) & (i < _MAX_ITERS)

    init = (np.int32(0), lax.full(shape, -1, np.float32), lax.full(shape, False, np.bool_), key)
    k = lax_control.while_loop(cond, body, init)[1]
    return lax.convert_element_type(k, dtype)


def _poisson(key: KeyArray, lam: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    # Knuth's method under 10, transformed rejection above, as TensorFlow and NumPy.
    use_knuth = _isnan(lam) | (lam < 10)
    lam_knuth = lax.select(use_knuth, lam, lax.full_like(lam, 0.0))
    lam_rejection = lax.select(use_knuth, lax.full_like(lam, 1e5), lam)
    result = lax.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype),
                        _poisson_rejection(key, lam_rejection, shape, dtype))
    return lax.select(lam == 0, lax.full_like(result, 0), result)


_poisson_compiled = jit(_poisson, static_argnums=(2, 3))


def poisson(key: KeyArray, lam: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Poisson(lam) integers (default int dtype); ``lam`` must be >= 0."""
    k = _check_key("poisson", key)
    dt = _util.user_dtype("lamina.random.poisson", dtype) or dtypes.default_int_dtype()
    if not dtypes.is_integer(dt):
        raise ValueError(f"lamina.random.poisson: dtype argument must be an integer dtype, got "
                         f"{dt}")
    _check_real("poisson", lam, "lam")
    dims = _param_shape("poisson", lam, "lam") if shape is None else _shape("poisson", shape)
    rate = _util.broadcast_to("lamina.random.poisson",
                              _util.convert(_as_array("poisson", lam, "lam"), np.float32), dims)
    return _poisson_compiled(k, rate, dims, dt)


_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_approx_tail(k: Array) -> Array:
    """log(k!) minus its Stirling approximation: tabulated for k <= 9, else the series."""
    dt = get_aval(k).dtype
    table = jnp.array(_STIRLING_TAIL, dtype=dt)
    use_table = k <= 9
    k = lax.clamp(np.asarray(0.0, dt), k, np.asarray(9.0, dt))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    index = lax.convert_element_type(lax.floor(k), np.int32)
    return lax.select(use_table, jnp.take(table, index), approx)


def _binomial_inversion(key: KeyArray, count: Array, prob: Array, shape: tuple[int, ...]
                        ) -> Array:
    """Counts geometric waiting times until they pass ``count``."""
    log1m_prob = lax.log1p(lax.neg(prob))

    def body(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        i, num_geom, geom_sum, rng = state
        sub, rng = _split_keys(rng, 2)
        num_geom = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform(sub, shape, get_aval(prob).dtype)
        return i + 1, num_geom, geom_sum + lax.ceil(lax.log(u) / log1m_prob), rng

    def cond(state: tuple[Any, Any, Any, Any]) -> Any:
        return jnp.any(state[2] <= count) & (state[0] < _MAX_ITERS)

    dt = get_aval(prob).dtype
    init = (np.int32(0), lax.full(shape, 0, dt), lax.full(shape, 0, dt), key)
    return lax_control.while_loop(cond, body, init)[1] - 1


def _btrs(key: KeyArray, count: Array, prob: Array, shape: tuple[int, ...]) -> Array:
    """Hormann's BTRS transformed rejection ("The generation of binomial random
    variates", 1993)."""
    stddev = lax.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = lax.floor((count + 1) * prob)
    dt = get_aval(prob).dtype

    def body(state: tuple[Any, Any, Any, Any]) -> tuple[Any, Any, Any, Any]:
        i, k_out, accepted, rng = state
        rng, sub0, sub1 = _split_keys(rng, 3)
        u = uniform(sub0, shape, dt)
        v = uniform(sub1, shape, dt)
        u = u - 0.5
        us = 0.5 - lax.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = lax.floor((2 * a / us + b) * u + c)
        rejected = (k < 0) | (k > count)
        v = lax.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * lax.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * lax.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * lax.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m) + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k) - _stirling_approx_tail(count - k))
        accept = accept1 | (~rejected & (v <= ub))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, rng

    def cond(state: tuple[Any, Any, Any, Any]) -> Any:
        return jnp.any(~state[2]) & (state[0] < _MAX_ITERS)

    init = (np.int32(0), lax.full(shape, -1, dt), lax.full(shape, False, np.bool_), key)
    return lax_control.while_loop(cond, body, init)[1]


def _binomial(key: KeyArray, count: Array, prob: Array, shape: tuple[int, ...],
              dtype: np.dtype[Any]) -> Array:
    # Inversion for count * min(p, 1 - p) <= 10, BTRS above (as TensorFlow).
    (prob,) = _util.promote_dtypes_inexact("lamina.random.binomial", prob)
    pdt = get_aval(prob).dtype
    count = _util.broadcast_to("lamina.random.binomial", _util.convert(count, pdt), shape)
    prob = _util.broadcast_to("lamina.random.binomial", prob, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = _isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = _isnan(q)
    q_l_0 = q < 0.0
    q = lax.select(q_is_nan | q_l_0, lax.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = lax.floor(count)
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 10000.0), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    samples = lax.select(
        use_inversion,
        lax.convert_element_type(_binomial_inversion(key, count_inv, q, shape), dtype),
        lax.convert_element_type(_btrs(key, count_btrs, q_btrs, shape), dtype))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = lax.select(invalid, lax.full_like(samples, np.nan), samples)
    samples = lax.select(count_inf & ~invalid, lax.full_like(samples, np.inf), samples)
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                      lax.convert_element_type(count, dtype) - samples)


_binomial_compiled = jit(_binomial, static_argnums=(3, 4))


def binomial(key: KeyArray, n: Any, p: Any, shape: Shape | None = None,
             dtype: Any = None) -> Array:
    """Binomial(n, p) counts as floats (``dtype``, default float): NaN for
    negative or NaN ``n`` and invalid ``p``, inf for infinite ``n``."""
    k = _check_key("binomial", key)
    dt = _float_dtype("binomial", dtype)
    for name, v in (("n", n), ("p", p)):
        _check_real("binomial", v, name)
    dims = _out_shape("binomial", shape, n=n, p=p)
    return _binomial_compiled(k, _as_array("binomial", n, "n"), _as_array("binomial", p, "p"),
                              dims, dt)


def multinomial(key: KeyArray, n: Any, p: Any, *, shape: Shape | None = None,
                dtype: Any = None, unroll: int | bool = 1) -> Array:
    """Counts of ``n`` draws over the categories of ``p`` (last axis), one
    binomial per category on what the earlier ones left; ``shape`` ends with
    ``p``'s category count."""
    k = _check_key("multinomial", key)
    dt = _float_dtype("multinomial", dtype)
    for name, v in (("n", n), ("p", p)):
        _check_real("multinomial", v, name)
    count, prob = _util.promote_dtypes_inexact("lamina.random.multinomial", n, p)
    dims = get_aval(prob).shape if shape is None else _shape("multinomial", shape)
    if not dims:
        raise ValueError("lamina.random.multinomial: p must have at least one dimension (the "
                         "categories)")
    count = _util.broadcast_to("lamina.random.multinomial", count, dims[:-1])
    prob = _util.broadcast_to("lamina.random.multinomial", prob, dims)
    return _multinomial_compiled(k, count, prob, dt, unroll)


def _multinomial(key: KeyArray, count: Array, prob: Array, dtype: np.dtype[Any],
                 unroll: int | bool) -> Array:
    def step(remainder: Any, ratio_key: tuple[Any, Any]) -> tuple[Any, Any]:
        ratio, sub = ratio_key
        drawn = binomial(sub, remainder, jnp.clip(ratio, 0, 1),
                         dtype=get_aval(remainder).dtype)
        return remainder - drawn, drawn

    prob = jnp.moveaxis(prob, -1, 0)
    remaining = lax.cumsum(prob, 0, reverse=True)
    ratios = prob / jnp.where(remaining == 0, 1, remaining)
    keys = split(key, get_aval(ratios).shape[0])
    _, counts = lax_control.scan(step, count, (ratios, keys), unroll=unroll)
    return lax.convert_element_type(jnp.moveaxis(counts, 0, -1), dtype)


_multinomial_compiled = jit(_multinomial, static_argnums=(3, 4))


# --- transformations of the basic samplers ------------------------------------------------------
def _t(key: KeyArray, df: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    df = _util.convert(df, dtype)
    key_n, key_g = _split_keys(key, 2)
    n = normal(key_n, shape, dtype)
    half_df = lax.div(df, np.asarray(2, dtype))
    g = gamma(key_g, half_df, shape, dtype)
    return n * lax.sqrt(half_df / g)


def _chisquare(key: KeyArray, df: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    df = _util.convert(df, dtype)
    two = np.asarray(2, dtype)
    return lax.mul(lax.exp(loggamma(key, lax.div(df, two), shape, dtype)), two)


def _f(key: KeyArray, dfnum: Array, dfden: Array, shape: tuple[int, ...],
       dtype: np.dtype[Any]) -> Array:
    dfden = _util.convert(dfden, dtype)
    dfnum = _util.convert(dfnum, dtype)
    key_dfd, key_dfn = _split_keys(key, 2)
    num = lax.div(chisquare(key_dfn, dfnum, shape, dtype), _bcast_to(dfnum, shape))
    den = lax.div(chisquare(key_dfd, dfden, shape, dtype), _bcast_to(dfden, shape))
    return lax.div(num, den)


def _bcast_to(x: Array, shape: tuple[int, ...]) -> Array:
    return _util.broadcast_to("lamina.random", x, shape)


def _pareto(key: KeyArray, b: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    b = _util.convert(b, dtype)
    return lax.exp(lax.div(exponential(key, shape, dtype), _bcast_to(b, shape)))


def _rayleigh(key: KeyArray, scale: Array, shape: tuple[int, ...],
              dtype: np.dtype[Any]) -> Array:
    u = uniform(key, shape, dtype)
    scale = _bcast_to(_util.convert(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), np.asarray(-2, dtype))))


def _wald(key: KeyArray, mean: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    k1, k2 = _split_keys(key, 2)
    mean = _bcast_to(_util.convert(mean, dtype), shape)
    v = normal(k1, shape, dtype)
    z = uniform(k2, shape, dtype)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def _lognormal(key: KeyArray, sigma: Array, shape: tuple[int, ...],
               dtype: np.dtype[Any]) -> Array:
    sigma = _util.convert(sigma, dtype)
    return lax.exp(normal(key, shape, dtype) * sigma)


def _triangular(key: KeyArray, left: Array, mode: Array, right: Array, shape: tuple[int, ...],
                dtype: np.dtype[Any]) -> Array:
    left = _bcast_to(_util.convert(left, dtype), shape)
    right = _bcast_to(_util.convert(right, dtype), shape)
    mode = _bcast_to(_util.convert(mode, dtype), shape)
    fc = (mode - left) / (right - left)
    u = uniform(key, shape, dtype)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


def _geometric(key: KeyArray, p: Array, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    (p,) = _util.promote_dtypes_inexact("lamina.random.geometric", p)
    u = uniform(key, shape, get_aval(p).dtype)
    # u == 0 is taken as 1 so log(u) stays finite.
    u = jnp.where(u == 0, 1, u)
    log_one_minus_p = _bcast_to(lax.log1p(lax.neg(p)), shape)
    g = lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1
    return lax.convert_element_type(g, dtype)


def _maxwell(key: KeyArray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    samples = normal(key, shape + (3,), dtype)
    return jnp.linalg.norm(samples, axis=-1)


def _double_sided_maxwell(key: KeyArray, loc: Array, scale: Array, shape: tuple[int, ...],
                          dtype: np.dtype[Any]) -> Array:
    params = _util.broadcast_shapes("lamina.random.double_sided_maxwell", get_aval(loc).shape,
                                    get_aval(scale).shape)
    # As JAX: the parameters' shape is appended to ``shape`` (which defaults to it).
    dims = (shape or params) + params
    maxwell_key, sign_key = _split_keys(key, 2)
    magnitude = maxwell(maxwell_key, dims, dtype)
    sign = rademacher(sign_key, dims, dtype)
    return sign * magnitude * scale + loc


def _weibull_min(key: KeyArray, scale: Array, concentration: Array, shape: tuple[int, ...],
                 dtype: np.dtype[Any]) -> Array:
    u = uniform(key, shape, dtype, 0, 1)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def _generalized_normal(key: KeyArray, p: Array, shape: tuple[int, ...],
                        dtype: np.dtype[Any]) -> Array:
    k1, k2 = _split_keys(key, 2)
    g = gamma(k1, 1 / p, shape, dtype)
    r = rademacher(k2, shape, dtype)
    return r * g ** (1 / p)


def _ball(key: KeyArray, p: Array, d: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
    k1, k2 = _split_keys(key, 2)
    g = generalized_normal(k1, p, (*shape, d), dtype)
    e = exponential(k2, shape, dtype)
    return g / ((jnp.sum(jnp.abs(g) ** p, axis=-1) + e) ** (1 / p))[..., None]


_t_compiled = jit(_t, static_argnums=(2, 3))
_chisquare_compiled = jit(_chisquare, static_argnums=(2, 3))
_f_compiled = jit(_f, static_argnums=(3, 4))
_pareto_compiled = jit(_pareto, static_argnums=(2, 3))
_rayleigh_compiled = jit(_rayleigh, static_argnums=(2, 3))
_wald_compiled = jit(_wald, static_argnums=(2, 3))
_lognormal_compiled = jit(_lognormal, static_argnums=(2, 3))
_triangular_compiled = jit(_triangular, static_argnums=(4, 5))
_geometric_compiled = jit(_geometric, static_argnums=(2, 3))
_maxwell_compiled = jit(_maxwell, static_argnums=(1, 2))
_double_sided_maxwell_compiled = jit(_double_sided_maxwell, static_argnums=(3, 4))
_weibull_min_compiled = jit(_weibull_min, static_argnums=(3, 4))
_generalized_normal_compiled = jit(_generalized_normal, static_argnums=(2, 3))
_ball_compiled = jit(_ball, static_argnums=(2, 3, 4))


def _real_params(fun: str, **params: Any) -> list[Array]:
    out = []
    for name, v in params.items():
        _check_real(fun, v, name)
        out.append(_as_array(fun, v, name))
    return out


def _sample_real(name: str, compiled: Callable[..., Array], key: KeyArray, shape: Shape | None,
                 dtype: Any, **params: Any) -> Array:
    """The common front of the real-parameter samplers: checks the key, the
    float dtype, the shape against the parameters' broadcast shape, and the
    parameters (``name`` names the sampler in errors), then runs ``compiled``."""
    k = _check_key(name, key)
    dt = _float_dtype(name, dtype)
    dims = _out_shape(name, shape, **params)
    return compiled(k, *_real_params(name, **params), dims, dt)


def t(key: KeyArray, df: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Student's t floats with ``df`` degrees of freedom."""
    return _sample_real("t", _t_compiled, key, shape, dtype, df=df)


def chisquare(key: KeyArray, df: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Chi-square floats with ``df`` degrees of freedom (``2 * Gamma(df / 2)``)."""
    return _sample_real("chisquare", _chisquare_compiled, key, shape, dtype, df=df)


def f(key: KeyArray, dfnum: Any, dfden: Any, shape: Shape | None = None,
      dtype: Any = None) -> Array:
    """F-distributed floats (a ratio of scaled chi-squares)."""
    return _sample_real("f", _f_compiled, key, shape, dtype, dfnum=dfnum, dfden=dfden)


def pareto(key: KeyArray, b: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Pareto floats with shape parameter ``b`` (support [1, inf))."""
    return _sample_real("pareto", _pareto_compiled, key, shape, dtype, b=b)


def rayleigh(key: KeyArray, scale: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Rayleigh floats with ``scale``."""
    return _sample_real("rayleigh", _rayleigh_compiled, key, shape, dtype, scale=scale)


def wald(key: KeyArray, mean: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Wald (inverse Gaussian, unit shape) floats with ``mean``."""
    return _sample_real("wald", _wald_compiled, key, shape, dtype, mean=mean)


def lognormal(key: KeyArray, sigma: Any = np.float32(1), shape: Shape | None = None,
              dtype: Any = None) -> Array:
    """``exp(sigma * N(0, 1))`` floats."""
    return _sample_real("lognormal", _lognormal_compiled, key, shape, dtype, sigma=sigma)


def triangular(key: KeyArray, left: Any, mode: Any, right: Any, shape: Shape | None = None,
               dtype: Any = None) -> Array:
    """Triangular floats on [left, right] peaking at ``mode``."""
    k = _check_key("triangular", key)
    dt = _float_dtype("triangular", dtype)
    dims = _out_shape("triangular", shape, left=left, mode=mode, right=right)
    return _triangular_compiled(k, *_real_params("triangular", left=left, mode=mode,
                                                 right=right), dims, dt)


def geometric(key: KeyArray, p: Any, shape: Shape | None = None, dtype: Any = None) -> Array:
    """Geometric integers >= 1: trials up to the first success of probability ``p``."""
    k = _check_key("geometric", key)
    dt = _util.user_dtype("lamina.random.geometric", dtype) or dtypes.default_int_dtype()
    if not dtypes.is_integer(dt):
        raise ValueError(f"lamina.random.geometric: dtype argument must be an integer dtype, "
                         f"got {dt}")
    dims = _out_shape("geometric", shape, p=p)
    return _geometric_compiled(k, *_real_params("geometric", p=p), dims, dt)


def maxwell(key: KeyArray, shape: Shape = (), dtype: Any = None) -> Array:
    """Maxwell floats: the norm of three standard normals."""
    k = _check_key("maxwell", key)
    dt = _float_dtype("maxwell", dtype)
    return _maxwell_compiled(k, _shape("maxwell", shape), dt)


def double_sided_maxwell(key: KeyArray, loc: Any, scale: Any, shape: Shape = (),
                         dtype: Any = None) -> Array:
    """``loc + scale * sign * maxwell``; the result shape is ``shape`` (or the
    parameters' broadcast shape when empty) followed by that broadcast shape."""
    k = _check_key("double_sided_maxwell", key)
    dt = _float_dtype("double_sided_maxwell", dtype)
    dims = _shape("double_sided_maxwell", shape)
    return _double_sided_maxwell_compiled(
        k, *_real_params("double_sided_maxwell", loc=loc, scale=scale), dims, dt)


def weibull_min(key: KeyArray, scale: Any, concentration: Any, shape: Shape = (),
                dtype: Any = None) -> Array:
    """Weibull floats ``scale * (-log(1 - u)) ** (1 / concentration)``."""
    k = _check_key("weibull_min", key)
    dt = _float_dtype("weibull_min", dtype)
    dims = _shape("weibull_min", shape)
    return _weibull_min_compiled(
        k, *_real_params("weibull_min", scale=scale, concentration=concentration), dims, dt)


def generalized_normal(key: KeyArray, p: Any, shape: Shape = (), dtype: Any = None) -> Array:
    """Generalized normal floats, density proportional to ``exp(-|x| ** p)``."""
    k = _check_key("generalized_normal", key)
    dt = _float_dtype("generalized_normal", dtype)
    dims = _shape("generalized_normal", shape)
    return _generalized_normal_compiled(k, *_real_params("generalized_normal", p=p), dims, dt)


def ball(key: KeyArray, d: int, p: Any = 2, shape: Shape = (), dtype: Any = None) -> Array:
    """Points uniform in the ``d``-dimensional unit ``p``-norm ball (shape ``shape + (d,)``)."""
    k = _check_key("ball", key)
    dt = _float_dtype("ball", dtype)
    dims = _shape("ball", shape)
    dim = operator.index(core.concrete_or_error(
        None, d, "The d argument of lamina.random.ball must be a concrete integer."))
    if dim < 0:
        raise ValueError(f"lamina.random.ball: d must be non-negative, got {dim}")
    return _ball_compiled(k, *_real_params("ball", p=p), dim, dims, dt)


def clone(key: KeyArray) -> KeyArray:
    """A copy of ``key`` that the compiler keeps as a separate value."""
    if isinstance(key, PRNGKeyArray):
        return key.copy()
    return lax.copy_p.bind(_check_key("clone", key))


# --- samplers built on matrix decompositions ----------------------------------------------------
def _multivariate_normal(key: KeyArray, mean: Array, cov: Array, shape: tuple[int, ...],
                         dtype: np.dtype[Any], method: str) -> Array:
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = u * lax.sqrt(s)[..., None, :]
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = v * lax.sqrt(w)[..., None, :]
    else:
        factor = jnp.linalg.cholesky(cov)
    samples = normal(key, shape + get_aval(mean).shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


_multivariate_normal_compiled = jit(_multivariate_normal, static_argnums=(3, 4, 5))


def multivariate_normal(key: KeyArray, mean: Any, cov: Any, shape: Shape | None = None,
                        dtype: Any = None, method: str = "cholesky") -> Array:
    """Normal vectors with ``mean`` (shape ``(..., n)``) and covariance ``cov``
    (``(..., n, n)``), through its Cholesky factor, or through ``eigh`` or
    ``svd`` (for singular covariances); the result is ``shape + (n,)``."""
    k = _check_key("multivariate_normal", key)
    for name, v in (("mean", mean), ("cov", cov)):
        _check_real("multivariate_normal", v, name)
    m, c = _util.promote_dtypes_inexact("lamina.random.multivariate_normal", mean, cov)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"lamina.random.multivariate_normal: method must be one of 'svd', "
                         f"'eigh' and 'cholesky', got {method!r}")
    dt = get_aval(m).dtype if dtype is None else _float_dtype("multivariate_normal", dtype)
    if not dtypes.is_floating(dt):
        raise ValueError(f"lamina.random.multivariate_normal: dtype argument must be a float "
                         f"dtype, got {dt}")
    m_shape, c_shape = get_aval(m).shape, get_aval(c).shape
    if len(m_shape) < 1:
        raise ValueError(f"lamina.random.multivariate_normal: mean must have at least one "
                         f"dimension, got shape {m_shape}")
    if len(c_shape) < 2:
        raise ValueError(f"lamina.random.multivariate_normal: cov must have at least two "
                         f"dimensions, got shape {c_shape}")
    n = m_shape[-1]
    if c_shape[-2:] != (n, n):
        raise ValueError(f"lamina.random.multivariate_normal: cov must have shape (..., {n}, "
                         f"{n}) for a mean of shape {m_shape}, got {c_shape}")
    if shape is None:
        dims = _util.broadcast_shapes("lamina.random.multivariate_normal", m_shape[:-1],
                                      c_shape[:-2])
    else:
        dims = _shape("multivariate_normal", shape)
        _check_shape("multivariate_normal", dims, m_shape[:-1], c_shape[:-2])
    return _multivariate_normal_compiled(k, m, c, dims, dt, method)


def _orthogonal(key: KeyArray, n: int, m: int, shape: tuple[int, ...],
                dtype: np.dtype[Any]) -> Array:
    z = normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = jnp.linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * lax.expand_dims(lax.sign(d), (get_aval(d).ndim - 1,))
    return jnp.swapaxes(x, -1, -2) if n < m else x


_orthogonal_compiled = jit(_orthogonal, static_argnums=(1, 2, 3, 4))


def orthogonal(key: KeyArray, n: int, shape: Shape = (), dtype: Any = None,
               m: int | None = None) -> Array:
    """Matrices of shape ``shape + (n, m)`` (``m`` defaults to ``n``) with
    orthonormal columns (or rows, when ``n < m``), uniform under the Haar
    measure (the QR factor of a normal matrix, signs fixed by R's diagonal)."""
    k = _check_key("orthogonal", key)
    dt = _float_dtype("orthogonal", dtype)
    dims = _shape("orthogonal", shape)
    sizes = []
    for name, v in (("n", n), ("m", n if m is None else m)):
        value = core.concrete_or_error(
            None, v, f"The {name} argument of lamina.random.orthogonal must be concrete.")
        try:
            size = operator.index(value)
        except TypeError:
            raise TypeError(f"lamina.random.orthogonal: {name} must be an integer, got "
                            f"{v!r}") from None
        if size < 0:
            raise ValueError(f"lamina.random.orthogonal: {name} must be non-negative, got {size}")
        sizes.append(size)
    return _orthogonal_compiled(k, sizes[0], sizes[1], dims, dt)


# --- out_sharding --------------------------------------------------------------------------
#: The samplers that take JAX 0.10's ``out_sharding``: each is computed with the
#: mesh's Explicit axes made Auto, then laid out as asked (same bits: the
#: partitionable Threefry does not depend on the layout).
_SAMPLERS_WITH_OUT_SHARDING = (
    "ball", "bernoulli", "beta", "bits", "categorical", "cauchy", "chisquare", "dirichlet",
    "exponential", "f", "gamma", "generalized_normal", "geometric", "gumbel", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multivariate_normal", "normal",
    "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "t",
    "triangular", "truncated_normal", "uniform", "wald",
)
for _name in _SAMPLERS_WITH_OUT_SHARDING:
    globals()[_name] = takes_out_sharding(f"lamina.random.{_name}")(globals()[_name])
del _name
