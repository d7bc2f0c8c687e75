"""Abstract values: what tracing knows about an array without its data."""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.memory import MemorySpace, space_suffix, spaces_used
from lamina_tracing_core.mesh import TypeSharding, get_abstract_mesh

#: ``ShapedArray.update``'s default for ``sharding``: keep it where it still fits.
_KEEP: Any = object()


@dataclasses.dataclass(frozen=True)
class ManualAxisType:
    """The manual-axes part of a type inside ``shard_map`` (JAX's
    ``jax.sharding.ManualAxisType``): the manual mesh axes a value varies
    over, those it is unreduced over (each device holds a summand of the
    value) and those it is reduced over (the same on every device, typed so
    that its transpose is an unreduced cotangent)."""

    varying: frozenset[Any] = frozenset()
    unreduced: frozenset[Any] = frozenset()
    reduced: frozenset[Any] = frozenset()

    def __post_init__(self) -> None:
        for name in ("varying", "unreduced", "reduced"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        for other in ("unreduced", "reduced"):
            if self.varying & getattr(self, other):
                raise ValueError(f"ManualAxisType: varying and {other} cannot have common "
                                 f"mesh axes. Got varying={self.varying} and "
                                 f"{other}={getattr(self, other)}")

    def update(self, **changes: frozenset[Any]) -> ManualAxisType:
        return dataclasses.replace(self, **changes)

    @property
    def empty(self) -> bool:
        return not (self.varying or self.unreduced or self.reduced)

    @property
    def vur(self) -> frozenset[Any]:
        """Every axis the type names."""
        return self.varying | self.unreduced | self.reduced


def order_axes(axes: frozenset[Any] | tuple[Any, ...], hint: tuple[Any, ...] = ()
               ) -> tuple[Any, ...]:
    """``axes`` in the order of the current abstract mesh (inside a
    ``shard_map`` body, its mesh; JAX orders varying manual axes so); names it
    lacks follow in the order of ``hint`` (the axes' order on the value they
    came from), the rest by name."""
    if len(axes) < 2:
        return tuple(axes)
    mesh_names = get_abstract_mesh().axis_names
    far = len(mesh_names) + len(hint)

    def rank(a: Any) -> tuple[int, str]:
        if a in mesh_names:
            return mesh_names.index(a), ""
        if a in hint:
            return len(mesh_names) + hint.index(a), ""
        return far, str(a)

    return tuple(sorted(axes, key=rank))


def _split_by(sharding: TypeSharding | None) -> TypeSharding | None:
    """``sharding`` where it splits the value, else None: a type shown with a
    replicated sharding (``typeof``'s) is the same type as one without."""
    return None if sharding is None or sharding.is_replicated else sharding


class ShapedArray:
    """An array's shape, dtype and weak-typedness: the only aval lamina uses.

    Abstractifying anything (a tracer, a device array, a numpy array) gives a
    ShapedArray, never a value-carrying aval, so a trace never depends on data.
    """

    __slots__ = ("shape", "dtype", "weak_type", "sharding", "vma", "vma_order",
                 "unreduced_order", "reduced_order", "memory_space", "_hash")
    array_abstraction_level = 1

    def __init__(self, shape: tuple[int, ...], dtype: Any, weak_type: bool = False,
                 sharding: TypeSharding | None = None,
                 vma: frozenset[Any] | tuple[Any, ...] = frozenset(),
                 unreduced: frozenset[Any] | tuple[Any, ...] = (),
                 reduced: frozenset[Any] | tuple[Any, ...] = (),
                 memory_space: MemorySpace = MemorySpace.Device):
        # Avals are made for every traced equation: normalize cheaply. A
        # shape seen before is looked up (equal tuples of ints, numpy ints or
        # integral floats hash alike and normalize alike).
        try:
            normal = _normal_shapes.get(shape)
        except TypeError:  # a list
            normal = None
        # An extended dtype (a key dtype) is kept as it is: such avals are the
        # types users see of key arrays (``typeof``, ``args_info``), never traced.
        self.dtype: np.dtype[Any] = (dtype if isinstance(dtype, np.dtype)
                                     or getattr(dtype, "lamina_extended_dtype", False)
                                     else np.dtype(dtype))
        if normal is None:
            normal = _normal_shape(shape, self.dtype)
        self.shape: tuple[int, ...] = normal
        self.weak_type: bool = weak_type if type(weak_type) is bool else bool(weak_type)
        #: The sharding in the type (over a mesh's Explicit axes), or None.
        self.sharding: TypeSharding | None = sharding
        #: The manual mesh axes the value may differ over between devices,
        #: inside a ``shard_map`` body traced with ``check_vma`` (its varying
        #: manual axes); empty everywhere else.
        self.vma: frozenset[Any]
        #: ``vma`` in the order of the mesh the value was made under (a tuple
        #: given as ``vma`` is that order): how its type prints.
        self.vma_order: tuple[Any, ...]
        if not vma:
            self.vma, self.vma_order = _NO_AXES, ()
        elif type(vma) is tuple:
            self.vma, self.vma_order = frozenset(vma), vma
        else:
            self.vma = vma if type(vma) is frozenset else frozenset(vma)
            self.vma_order = order_axes(self.vma)
        #: The manual axes the value is unreduced / reduced over (see
        #: ``ManualAxisType``), in mesh order; empty but for ``pcast(...,
        #: to='unreduced'|'reduced')`` and what follows from it.
        self.unreduced_order: tuple[Any, ...] = _in_order(unreduced) if unreduced else ()
        self.reduced_order: tuple[Any, ...] = _in_order(reduced) if reduced else ()
        #: The memory the value lives in (``Host`` for ``pinned_host`` data).
        self.memory_space: MemorySpace = memory_space
        if memory_space is not MemorySpace.Device:
            if type(memory_space) is not MemorySpace:
                raise TypeError(f"ShapedArray: memory_space must be a MemorySpace, got "
                                f"{memory_space!r}")
            spaces_used[0] = True  # from now on tracing applies the space rule
        self._hash: int | None = None

    @property
    def unreduced(self) -> frozenset[Any]:
        return frozenset(self.unreduced_order) if self.unreduced_order else _NO_AXES

    @property
    def reduced(self) -> frozenset[Any]:
        return frozenset(self.reduced_order) if self.reduced_order else _NO_AXES

    @property
    def mat(self) -> ManualAxisType:
        """The manual-axes type (``mat.varying`` is ``vma``)."""
        return ManualAxisType(varying=self.vma, unreduced=self.unreduced, reduced=self.reduced)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and _split_by(self.sharding) == _split_by(other.sharding)
                and self.vma_order == other.vma_order
                and self.unreduced_order == other.unreduced_order
                and self.reduced_order == other.reduced_order
                and self.memory_space is other.memory_space)

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type,
                                   _split_by(self.sharding), self.vma_order,
                                   self.unreduced_order, self.reduced_order,
                                   self.memory_space))
        return h

    def update(self, shape: tuple[int, ...] | None = None, dtype: Any = None,
               weak_type: bool | None = None, sharding: Any = _KEEP,
               vma: frozenset[Any] | tuple[Any, ...] | None = None,
               unreduced: frozenset[Any] | tuple[Any, ...] | None = None,
               reduced: frozenset[Any] | tuple[Any, ...] | None = None,
               memory_space: MemorySpace | None = None) -> ShapedArray:
        """A copy with the given fields replaced. The sharding is kept unless
        the shape changes (a new shape starts unsharded) or one is given; the
        manual-axes type (varying, unreduced, reduced axes) and the memory
        space are kept, in its order, unless given."""
        if sharding is _KEEP:
            sharding = self.sharding if shape is None else None
        if vma is None:
            order = self.vma_order
        elif type(vma) is tuple or not vma:
            order = tuple(vma)
        else:
            order = order_axes(vma, self.vma_order)
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type, sharding,
                           order,
                           self.unreduced_order if unreduced is None else unreduced,
                           self.reduced_order if reduced is None else reduced,
                           self.memory_space if memory_space is None else memory_space)

    def strip_weak_type(self) -> ShapedArray:
        return self.update(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self) -> ShapedArray:
        """The aval of this value's tangents: itself when inexact (weak type
        included, as in JAX), a ``float0`` array for integer and boolean values."""
        if dtypes.is_inexact(self.dtype) or self.dtype == dtypes.float0:
            return self
        return ShapedArray(self.shape, dtypes.float0, False, vma=self.vma_order,
                           unreduced=self.unreduced_order, reduced=self.reduced_order,
                           memory_space=self.memory_space)

    def str_short(self) -> str:
        """``f32[3,4]`` (``f32[8@X,4]`` with a sharding in the type,
        ``f32<host>[3,4]`` in host memory), the form jaxprs print."""
        return (f"{short_dtype_name(self.dtype)}{space_suffix(self.memory_space)}"
                f"[{self._dims_str()}]{self.vma_str()}")

    def vma_str(self) -> str:
        """``{V:i}`` / ``{V:(y,x)}`` for a value varying over manual axes (and
        ``U:``/``R:`` for its unreduced/reduced axes: ``{V:x, R:y}``), the axes
        in the order of the mesh it was made under, as JAX prints it."""
        if not (self.vma or self.unreduced_order or self.reduced_order):
            return ""
        parts = [f"{tag}:{_axes_str(axes)}"
                 for tag, axes in (("V", self.vma_order), ("U", self.unreduced_order),
                                   ("R", self.reduced_order)) if axes]
        return "{" + ", ".join(parts) + "}"

    def _dims_str(self) -> str:
        if self.sharding is not None:
            return ",".join(self.sharding.dim_str(d, n) for d, n in enumerate(self.shape))
        return ",".join(map(str, self.shape))

    def str_long(self) -> str:
        """``float32[3,4]`` (``float32[8@X,4]`` with a sharding in the type,
        ``float32<host>[3,4]`` in host memory), the form JAX's messages and
        reprs print."""
        return (f"{self.dtype.name}{space_suffix(self.memory_space)}"
                f"[{self._dims_str()}]{self.vma_str()}")

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.str_long()}{weak})"

    def __str__(self) -> str:
        # JAX marks a weak type with a leading ``~`` (``~float32[]``)
        return f"~{self.str_long()}" if self.weak_type else self.str_long()


_NO_AXES: frozenset[Any] = frozenset()


def _in_order(axes: frozenset[Any] | tuple[Any, ...]) -> tuple[Any, ...]:
    """``axes`` as kept on an aval: a tuple is its order, a set is ordered."""
    if not axes:
        return ()
    return axes if type(axes) is tuple else order_axes(frozenset(axes))


def _axes_str(axes: tuple[Any, ...]) -> str:
    names = [str(a) for a in axes]
    return names[0] if len(names) == 1 else "(" + ",".join(names) + ")"
_normal_shapes: dict[Any, tuple[int, ...]] = {}
_MAX_NORMAL_SHAPES = 8192


def _normal_shape(shape: Any, dtype: np.dtype[Any]) -> tuple[int, ...]:
    normal = tuple(map(int, shape))
    if not 0 < math.prod(normal) <= _SAFE_ELEMENTS and not shape_fits(normal, _MAX_ITEMSIZE):
        # Not remembered: a shape this large is checked against each dtype.
        check_shape_size(normal, dtype, "ShapedArray")
        return normal
    if len(_normal_shapes) >= _MAX_NORMAL_SHAPES:
        _normal_shapes.clear()
    _normal_shapes[normal] = normal
    return normal


# --- the largest array --------------------------------------------------------
#: XLA counts an array's bytes (and every running product of its dimensions)
#: in a signed 64-bit integer; a larger shape aborts the process inside XLA,
#: so it is refused before it gets there.
MAX_ARRAY_BYTES = 2 ** 63 - 1
_MAX_ITEMSIZE = 16  # complex128, the widest element
_SAFE_ELEMENTS = MAX_ARRAY_BYTES // _MAX_ITEMSIZE


class ShapeTooLargeError(ValueError):
    """A shape with more bytes than an XLA array can address."""


def shape_fits(shape: tuple[int, ...], itemsize: int) -> bool:
    """Whether every leading part of ``shape`` (and so the whole) holds at
    most ``MAX_ARRAY_BYTES`` bytes of ``itemsize``-byte elements."""
    limit = MAX_ARRAY_BYTES // max(itemsize, 1)
    n = 1
    for d in shape:
        n *= d
        if n > limit:
            return False
    return True


def _count(n: int) -> str:
    """``n``, as a power of two when it is one (``2**66``)."""
    if n >= 2 ** 16 and n & (n - 1) == 0:
        return f"2**{n.bit_length() - 1}"
    return str(n)


def check_shape_size(shape: tuple[int, ...], dtype: Any, fun_name: str,
                     arg_name: str = "shape") -> None:
    """Raises ``ShapeTooLargeError`` (naming ``fun_name`` and its argument
    ``arg_name``) when an array of ``shape`` and ``dtype`` has more than
    ``MAX_ARRAY_BYTES`` bytes, or a run of its leading dimensions does."""
    if 0 < math.prod(shape) <= _SAFE_ELEMENTS:  # no leading run is larger than the whole
        return
    dtype = np.dtype(dtype)
    itemsize = max(dtype.itemsize, 1)
    if shape_fits(shape, itemsize):
        return
    n, lead = 1, 0
    while n * itemsize <= MAX_ARRAY_BYTES:  # some leading run is too large
        n *= shape[lead]
        lead += 1
    part = "" if lead == len(shape) else f"its leading dimensions {shape[:lead]} make "
    raise ShapeTooLargeError(
        f"{fun_name}: {arg_name} {shape} of {dtype.name}: {part}{_count(n)} elements "
        f"({_count(n * itemsize)} bytes), more than an array can hold (at most 2**63 - 1 "
        f"bytes)")


_SHORT_NAMES = {"bool": "bool", "bfloat16": "bf16", "float0": "float0"}


def short_dtype_name(dtype: np.dtype[Any]) -> str:
    if dtype == dtypes.float0:
        return "float0"
    name = dtype.name
    if name in _SHORT_NAMES:
        return _SHORT_NAMES[name]
    return name.replace("float", "f").replace("uint", "u").replace("int", "i").replace(
        "complex", "c")


# --- abstractification ------------------------------------------------------
#: type -> function giving the value's aval. Higher layers register their array
#: types here (the runtime registers its Array; tracers register themselves).
aval_handlers: dict[type, Callable[[Any], ShapedArray]] = {}


# Abstractifying constants is on every traced equation's path: the avals of
# scalars and the canonical form of each dtype are computed once (per x64 mode).
_scalar_avals: dict[tuple[Any, bool], ShapedArray] = {}
_canonical_dtypes: dict[tuple[np.dtype[Any], bool], np.dtype[Any]] = {}


def _aval_of_numpy(x: Any) -> ShapedArray:
    x64 = dtypes.x64_state.enabled
    shape = x.shape
    if not shape:
        aval = _scalar_avals.get((x.dtype, x64))
        if aval is not None:
            return aval
    dtype = _canonical_dtypes.get((x.dtype, x64))
    if dtype is None:
        dtype = dtypes.check_user_dtype(x.dtype, fun_name="abstractify")
        _canonical_dtypes[(x.dtype, x64)] = dtype
    aval = ShapedArray(shape, dtype, False)
    if not shape:
        _scalar_avals[(x.dtype, x64)] = aval
    return aval


def _aval_of_python_scalar(x: Any) -> ShapedArray:
    key = (type(x), dtypes.x64_state.enabled)
    aval = _scalar_avals.get(key)
    if aval is None:
        dtype, weak = dtypes.dtype_and_weakness(x)
        aval = _scalar_avals[key] = ShapedArray((), dtype, weak)
    return aval


for _scalar_type in (bool, int, float, complex):
    aval_handlers[_scalar_type] = _aval_of_python_scalar
aval_handlers[np.ndarray] = _aval_of_numpy
for _numpy_type in set(np.sctypeDict.values()):
    if issubclass(_numpy_type, np.generic):
        aval_handlers[_numpy_type] = _aval_of_numpy


#: types whose values have an aval but no data (``ShapeDtypeStruct``): they
#: trace like arrays, and code that needs the data (eager dispatch, lowering a
#: constant, a call that runs) rejects them with :func:`no_value_error`.
abstract_only_types: set[type] = set()


def has_no_value(x: Any) -> bool:
    """Whether ``x`` stands for an array without holding one (its exact type
    is registered in :data:`abstract_only_types`; a subclass registers too)."""
    return type(x) in abstract_only_types


def no_value_error(x: Any) -> TypeError:
    """JAX's error (code matches on it) for using a value-less stand-in where
    data is needed."""
    return TypeError(f"A {type(x).__name__} does not have a value and cannot be used as a "
                     "constant in a lamina function.")


class InvalidInputError(TypeError):
    """A value that lamina cannot treat as an array."""


def get_aval(x: Any) -> ShapedArray:
    """The ShapedArray of any array-like value lamina accepts."""
    handler = aval_handlers.get(type(x))
    if handler is not None:
        return handler(x)
    for base in type(x).__mro__[1:]:
        handler = aval_handlers.get(base)
        if handler is not None:
            aval_handlers[type(x)] = handler
            return handler(x)
    if hasattr(x, "__jax_array__"):
        return get_aval(x.__jax_array__())
    raise InvalidInputError(f"{x!r} of type {type(x).__name__} is not a valid lamina type")


def dtype_of(x: Any) -> np.dtype[Any]:
    """The dtype of any array-like value (``get_aval(x).dtype``)."""
    return get_aval(x).dtype


def is_array_like(x: Any) -> bool:
    try:
        get_aval(x)
    except (InvalidInputError, TypeError):
        return False
    return True


def canonicalize_shape(shape: Any, context: str = "") -> tuple[int, ...]:
    """A shape given by the user as a tuple of non-negative ints."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        what = f"{context} " if context else ""
        raise TypeError(f"{what}shapes must be 1D sequences of concrete values of integer "
                        f"type, got {shape!r}.") from None
    if any(d < 0 for d in out):
        what = f"{context}: " if context else ""
        raise TypeError(f"{what}shape dimensions must be non-negative, got {out}")
    return out


def canonicalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``, counting negative axes from the end."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name} {axis} is out of bounds for array of dimension {ndim}")
    return axis + ndim if axis < 0 else axis
