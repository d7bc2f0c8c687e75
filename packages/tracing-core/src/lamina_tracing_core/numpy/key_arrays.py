"""Typed PRNG key arrays: an array whose dtype is a key dtype (``key<fry>``).

How lamina represents them: a key array is a :class:`PRNGKeyArray` holding its
*key data*, an ordinary ``uint32`` array (or tracer) of shape
``keys.shape + impl.key_shape``, and the implementation record. The key data
is all a transformation sees: the class is a pytree node for transformations
only (``register_transform_node``; to users, ``lamina.tree_util``, it is a
leaf, as in JAX) whose one leaf is the data, named by the key array's own path,
and whose auxiliary data is the implementation, so ``jit``, ``vmap``,
``scan``, ``pmap``, ``device_put`` and shardings carry keys as their data and
rebuild typed keys on the way out (their axes are the key array's leading
axes). The key dtype itself (:class:`KeyDType`) is an extended dtype: its
scalar type is a subclass of :class:`prng_key`, so
``jnp.issubdtype(k.dtype, dtypes.prng_key)`` holds. lamina.numpy's structural
functions (indexing, ``reshape``, ``stack``, ``concatenate``, ``where``,
``broadcast_to``...) accept key arrays by applying themselves to the data with
the trailing key-data axes left alone; arithmetic refuses them by name.

The algorithms behind each implementation (seeding, splitting, bits) are
``lamina.random``'s; this module knows only the implementations' names, tags
and key-data shapes.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from lamina_linear_util.tree_util import register_transform_node
from lamina_tracing_core import lax
from lamina_tracing_core.avals import ShapedArray, get_aval

__all__ = ["IMPLS", "KeyDType", "PRNGImpl", "PRNGKeyArray", "extended", "is_key_array",
           "key_arrays_of", "key_type", "keys_equal", "logical_axis", "prng_key",
           "register_key_like", "resolve_impl"]


class extended(np.generic):  # noqa: N801 - JAX's name
    """The abstract class of JAX's extended dtypes (above NumPy's ``generic``)."""


class prng_key(extended):  # noqa: N801 - JAX's name
    """The abstract class of typed PRNG key dtypes."""


@dataclass(frozen=True)
class PRNGImpl:
    """A PRNG implementation as key arrays know it: its name (``threefry2x32``),
    the tag in its dtype's name (``key<fry>``) and the shape of one key's data."""

    name: str
    tag: str
    key_shape: tuple[int, ...]

    def __str__(self) -> str:
        return self.name


THREEFRY = PRNGImpl("threefry2x32", "fry", (2,))
RBG = PRNGImpl("rbg", "rbg", (4,))
UNSAFE_RBG = PRNGImpl("unsafe_rbg", "urbg", (4,))

#: Every implementation by its name.
IMPLS: dict[str, PRNGImpl] = {impl.name: impl for impl in (THREEFRY, RBG, UNSAFE_RBG)}


def resolve_impl(fun: str, impl: Any, default: PRNGImpl = THREEFRY) -> PRNGImpl:
    """``impl`` (None, a name such as ``'rbg'``, a :class:`PRNGImpl` or a
    key dtype) as an implementation; anything else is an error naming ``fun``."""
    if impl is None:
        return default
    if isinstance(impl, PRNGImpl):
        return impl
    if isinstance(impl, KeyDType):
        return impl.impl
    if isinstance(impl, str) and impl in IMPLS:
        return IMPLS[impl]
    raise ValueError(f"{fun}: unknown or unsupported PRNG implementation impl={impl!r}; lamina "
                     f"has {', '.join(sorted(IMPLS))}")


_SCALAR_TYPES: dict[str, type] = {
    impl.name: type(f"key_{impl.tag}", (prng_key,),
                    {"__doc__": f"The scalar type of {impl.name} key arrays."})
    for impl in IMPLS.values()}


class KeyDType:
    """The dtype of typed key arrays of one implementation (``key<fry>``,
    ``key<rbg>``, ``key<urbg>``). ``jnp.issubdtype(k.dtype, dtypes.prng_key)``
    holds for it; it is no NumPy dtype, as in JAX."""

    #: Marks a dtype whose subtype checks go through ``type``'s class hierarchy.
    lamina_extended_dtype = True

    __slots__ = ("impl",)

    def __init__(self, impl: PRNGImpl = THREEFRY):
        self.impl = impl

    @property
    def type(self) -> type:
        return _SCALAR_TYPES[self.impl.name]

    @property
    def name(self) -> str:
        return f"key<{self.impl.tag}>"

    @property
    def key_shape(self) -> tuple[int, ...]:
        return self.impl.key_shape

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyDType) and other.impl == self.impl

    def __hash__(self) -> int:
        return hash((KeyDType, self.impl))


def logical_axis(fun: str, axis: Any, ndim: int, name: str = "axis") -> int:
    """``axis`` of a key array of rank ``ndim`` made non-negative (so it never
    reaches the key-data axes), or an error naming ``fun``."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{fun}: {name} {axis} is out of bounds for a key array of rank {ndim}")
    return a % ndim


class PRNGKeyArray:
    """A typed key array: keys of shape ``shape`` and dtype ``key<tag>``, over
    key data of shape ``shape + impl.key_shape`` (uint32). Every function of
    ``lamina.random`` takes one where it takes a raw key."""

    __slots__ = ("_base", "_impl")

    def __init__(self, base: Any, impl: PRNGImpl = THREEFRY):
        self._base = base
        self._impl = impl

    # --- what it is ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(get_aval(self._base).shape[:self._data_start()])

    def _data_start(self) -> int:
        return len(get_aval(self._base).shape) - len(self._impl.key_shape)

    @property
    def dtype(self) -> KeyDType:
        return KeyDType(self._impl)

    @property
    def base(self) -> Any:
        """The key data: a ``uint32`` array of shape ``shape + impl.key_shape``."""
        return self._base

    @property
    def impl(self) -> PRNGImpl:
        return self._impl

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def key_type(self) -> ShapedArray:
        """The keys' type as users see it (``typeof``): ``ShapedArray(key<fry>[3])``.
        (Not ``aval``: that would make a key array an array to ``get_aval``.)"""
        return key_type(self._impl, get_aval(self._base))

    def with_data(self, base: Any) -> PRNGKeyArray:
        """Keys of this implementation over other key data."""
        return PRNGKeyArray(base, self._impl)

    # --- structure ---------------------------------------------------------------------------
    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of an unsized key array")
        return self.shape[0]

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(len(self)))

    def __getitem__(self, index: Any) -> PRNGKeyArray:
        return self.with_data(self._base[physical_index(index, self.ndim, self._impl)])

    def reshape(self, *shape: Any, order: str = "C") -> PRNGKeyArray:
        if order != "C":
            raise NotImplementedError("key arrays reshape in C order only")
        dims = shape[0] if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) \
            else shape
        new = tuple(operator.index(d) for d in dims)
        if new.count(-1) == 1:
            known = math.prod(d for d in new if d != -1)
            new = tuple(self.size // known if known and d == -1 else d for d in new)
        if math.prod(new) != self.size or any(d < 0 for d in new):
            raise TypeError(f"reshape: cannot reshape a key array of shape {self.shape} "
                            f"(size {self.size}) into shape {tuple(dims)}")
        return self.with_data(lax.reshape(self._base, new + self._impl.key_shape))

    def ravel(self, order: str = "C") -> PRNGKeyArray:
        return self.reshape(self.size, order=order)

    flatten = ravel

    def transpose(self, *axes: Any) -> PRNGKeyArray:
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            axes = tuple(axes[0]) if axes[0] is not None else ()
        perm = tuple(range(self.ndim))[::-1] if not axes else \
            tuple(logical_axis("transpose", a, self.ndim) for a in axes)
        if sorted(perm) != list(range(self.ndim)):
            raise ValueError(f"transpose: axes {axes} are not a permutation of the key array's "
                             f"{self.ndim} axes")
        data_axes = tuple(range(self.ndim, get_aval(self._base).ndim))
        return self.with_data(lax.transpose(self._base, perm + data_axes))

    @property
    def T(self) -> PRNGKeyArray:  # noqa: N802 - NumPy's name
        return self.transpose()

    def swapaxes(self, axis1: int, axis2: int) -> PRNGKeyArray:
        a = logical_axis("swapaxes", axis1, self.ndim, "axis1")
        b = logical_axis("swapaxes", axis2, self.ndim, "axis2")
        perm = list(range(self.ndim))
        perm[a], perm[b] = perm[b], perm[a]
        return self.transpose(perm)

    def squeeze(self, axis: int | Sequence[int] | None = None) -> PRNGKeyArray:
        if axis is None:
            dims = tuple(i for i, d in enumerate(self.shape) if d == 1)
        else:
            items = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
            dims = tuple(logical_axis("squeeze", a, self.ndim) for a in items)
            if any(self.shape[d] != 1 for d in dims):
                raise ValueError(f"squeeze: cannot squeeze axes {items} of a key array of "
                                 f"shape {self.shape}: they are not of size 1")
        return self.with_data(lax.squeeze(self._base, dims))

    def take(self, indices: Any, axis: int | None = None) -> PRNGKeyArray:
        keys = self.ravel() if axis is None else self
        ax = 0 if axis is None else logical_axis("take", axis, keys.ndim)
        index = (slice(None),) * ax + (indices,)
        return keys[index]

    def copy(self) -> PRNGKeyArray:
        return self.with_data(lax.copy_p.bind(self._base))

    def block_until_ready(self) -> PRNGKeyArray:
        ready = getattr(self._base, "block_until_ready", None)
        if ready is not None:
            ready()
        return self

    # --- where the keys live: the key data's placement, over the key dimensions -----------
    @property
    def sharding(self) -> Any:
        """The key data's sharding with its spec cut to the key dimensions (a
        ``NamedSharding`` split over the keys' axes; others as they are)."""
        sharding = self._base.sharding
        spec = getattr(sharding, "spec", None)
        if spec is None or not hasattr(sharding, "with_spec"):
            return sharding
        return sharding.with_spec(tuple(spec)[:self.ndim])

    @property
    def committed(self) -> bool:
        return bool(self._base.committed)

    def devices(self) -> Any:
        return self._base.devices()

    @property
    def device(self) -> Any:
        return self._base.device

    @property
    def is_fully_addressable(self) -> bool:
        return bool(self._base.is_fully_addressable)

    @property
    def is_fully_replicated(self) -> bool:
        return bool(self._base.is_fully_replicated)

    @property
    def addressable_shards(self) -> list[Any]:
        """The key data's shards, each holding a key array."""
        return [type(s)(s.device, s.index[:self.ndim], s.replica_id, self.with_data(s.data))
                for s in self._base.addressable_shards]

    @property
    def global_shards(self) -> list[Any]:
        return [type(s)(s.device, s.index[:self.ndim], s.replica_id,
                        None if s.data is None else self.with_data(s.data))
                for s in self._base.global_shards]

    @property
    def itemsize(self) -> int:
        """Bytes per key: its ``uint32`` key data."""
        return 4 * math.prod(self._impl.key_shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    def on_device_size_in_bytes(self) -> int:
        return int(self._base.on_device_size_in_bytes())

    def copy_to_host_async(self) -> None:
        self._base.copy_to_host_async()

    def is_deleted(self) -> bool:
        return bool(self._base.is_deleted())

    def delete(self) -> None:
        self._base.delete()

    # --- comparison: elementwise, as arrays compare (so, like arrays, unhashable) -------------
    def __eq__(self, other: object) -> Any:
        return keys_equal("lamina.numpy.equal", self, other)

    def __ne__(self, other: object) -> Any:
        return lax.bitwise_not(keys_equal("lamina.numpy.not_equal", self, other))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise TypeError("key array cannot be converted to boolean.")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("A typed key array cannot be converted to a NumPy array; use "
                        "lamina.random.key_data(keys) for its uint32 data")

    def __repr__(self) -> str:
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{self._base}"


def _index_rank(item: Any) -> int:
    """How many axes one index entry consumes (None and Ellipsis: none)."""
    if item is None or item is Ellipsis:
        return 0
    dtype = getattr(item, "dtype", None)
    if dtype is not None and np.dtype(dtype) == np.bool_:
        return len(get_aval(item).shape)
    return 1


def physical_index(index: Any, ndim: int, impl: PRNGImpl) -> tuple[Any, ...]:
    """An index of a key array of rank ``ndim`` as an index of its key data:
    an ``...`` is spelled out, so the key-data axes are never indexed."""
    items = index if isinstance(index, tuple) else (index,)
    if any(item is Ellipsis for item in items):
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        used = sum(_index_rank(item) for item in items)
        items = items[:at] + (slice(None),) * max(ndim - used, 0) + items[at + 1:]
    return (*items, *(slice(None),) * len(impl.key_shape))


def key_type(impl: PRNGImpl, data: ShapedArray) -> ShapedArray:
    """The type users see (``key<fry>[3]``, its varying manual axes included)
    of keys of ``impl`` whose key data has the type ``data``."""
    shape = data.shape[:len(data.shape) - len(impl.key_shape)]
    return ShapedArray(shape, KeyDType(impl), vma=data.vma_order, sharding=data.sharding)


def is_key_array(x: Any) -> bool:
    return isinstance(x, PRNGKeyArray)


def key_arrays_of(fun: str, values: Sequence[Any], names: Sequence[str]) -> list[PRNGKeyArray]:
    """``values`` when all are key arrays of one implementation; otherwise an
    error naming ``fun`` and the first argument that differs."""
    first = next(v for v in values if isinstance(v, PRNGKeyArray))
    for value, name in zip(values, names):
        if not isinstance(value, PRNGKeyArray):
            raise TypeError(f"{fun}: argument {name} is not a key array while another argument "
                            f"is one (dtype {first.dtype}); typed keys mix only with typed keys "
                            "(wrap raw key data with lamina.random.wrap_key_data)")
        if value.impl != first.impl:
            raise TypeError(f"{fun}: argument {name} has key dtype {value.dtype}, another "
                            f"argument {first.dtype}; keys of different implementations do "
                            "not mix")
    return list(values)


def keys_equal(fun: str, x1: Any, x2: Any) -> Any:
    """``x1 == x2`` for key arrays of one implementation, elementwise over the
    keys' broadcast shape: two keys are equal when all their key data is."""
    a, b = key_arrays_of(fun, (x1, x2), ("x1", "x2"))
    try:
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        raise TypeError(f"{fun}: key arrays x1 of shape {a.shape} and x2 of shape {b.shape} "
                        "do not broadcast together") from None
    same = lax.eq(_data_broadcast_to(a, shape), _data_broadcast_to(b, shape))
    return lax.reduce_and(same, tuple(range(len(shape), len(shape) + len(a.impl.key_shape))))


def _data_broadcast_to(keys: PRNGKeyArray, shape: tuple[int, ...]) -> Any:
    full = shape + keys.impl.key_shape
    data_shape = tuple(get_aval(keys.base).shape)
    if data_shape == full:
        return keys.base
    return lax.broadcast_in_dim(keys.base, full, tuple(range(len(full) - len(data_shape),
                                                             len(full))))


class _KeyDataEntry:
    """The key-path entry of a key array's data for transformations: it prints
    as nothing, so argument names and result paths name a key array by its own
    path (``k``, ``result[1]``), as JAX does."""

    __slots__ = ()

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:
        return "KeyDataEntry()"


_KEY_DATA = _KeyDataEntry()


def _flatten_keys(keys: PRNGKeyArray) -> tuple[tuple[Any], PRNGImpl]:
    return (keys._base,), keys._impl


def _flatten_keys_with_keys(keys: PRNGKeyArray
                            ) -> tuple[tuple[tuple[_KeyDataEntry, Any]], PRNGImpl]:
    return ((_KEY_DATA, keys._base),), keys._impl


def _unflatten_keys(impl: PRNGImpl, children: Any) -> PRNGKeyArray:
    (base,) = tuple(children)
    return PRNGKeyArray(base, impl)


# A leaf to users (as in JAX), its data to transformations.
register_transform_node(PRNGKeyArray, _flatten_keys, _unflatten_keys, _flatten_keys_with_keys)


def register_key_like(nodetype: type[Any], data_of: Any) -> None:
    """Make ``nodetype`` (a value with a key ``dtype`` that stands for key
    arrays, such as a ``ShapeDtypeStruct`` of keys) a leaf to users and, to
    transformations, a node whose one child is ``data_of(x)`` (what stands for
    the key data) and which rebuilds as a :class:`PRNGKeyArray` over it: a
    function given such a value sees key arrays."""
    register_transform_node(
        nodetype, lambda x: ((data_of(x),), x.dtype.impl), _unflatten_keys,
        lambda x: (((_KEY_DATA, data_of(x)),), x.dtype.impl))
