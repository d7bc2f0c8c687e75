"""From avals and numpy values to MLIR types, attributes and constants.

The mapping follows XLA's (and JAX's): ``bool`` is ``i1``, signed integers are
signless ``iN``, unsigned integers are ``uiN``, floats keep their width
(``bf16``, ``f16``, ``f32``, ``f64``, the fp8 family), complex types are
``complex<f32>``/``complex<f64>``, and ``float0`` (the tangent type of integer
values) is ``i1`` with the same shape, holding zeros.

Everything here needs an active ``ir.Context`` (``with ctx:``). ``TypeCache``
keeps the types of one context, so a lowering builds each tensor type once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo as hlo
from typing_extensions import TypeAlias
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray, has_no_value, no_value_error

__all__ = [
    "Value", "dtype_to_ir_type", "aval_to_ir_type", "TypeCache", "type_cache",
    "dense_elements_attr", "ir_constant", "dense_i64_array", "dense_int_elements", "i64_attr",
]


if TYPE_CHECKING:
    #: An MLIR SSA value of any type (jaxlib's stubs make ``ir.Value`` generic).
    Value: TypeAlias = ir.Value[Any]
else:
    Value = ir.Value


def _signless(bits: int) -> Callable[[], ir.Type]:
    return lambda: ir.IntegerType.get_signless(bits)


def _unsigned(bits: int) -> Callable[[], ir.Type]:
    return lambda: ir.IntegerType.get_unsigned(bits)


def _complex(part: Callable[[], ir.Type]) -> Callable[[], ir.Type]:
    return lambda: ir.ComplexType.get(part())


_DTYPE_TO_IR: dict[np.dtype[Any], Callable[[], ir.Type]] = {
    dtypes.float0: _signless(1),
    np.dtype(np.bool_): _signless(1),
    np.dtype(np.int8): _signless(8),
    np.dtype(np.int16): _signless(16),
    np.dtype(np.int32): _signless(32),
    np.dtype(np.int64): _signless(64),
    np.dtype(np.uint8): _unsigned(8),
    np.dtype(np.uint16): _unsigned(16),
    np.dtype(np.uint32): _unsigned(32),
    np.dtype(np.uint64): _unsigned(64),
    np.dtype(ml_dtypes.int2): _signless(2),
    np.dtype(ml_dtypes.uint2): _unsigned(2),
    np.dtype(ml_dtypes.int4): _signless(4),
    np.dtype(ml_dtypes.uint4): _unsigned(4),
    np.dtype(ml_dtypes.bfloat16): ir.BF16Type.get,
    np.dtype(np.float16): ir.F16Type.get,
    np.dtype(np.float32): ir.F32Type.get,
    np.dtype(np.float64): ir.F64Type.get,
    np.dtype(np.complex64): _complex(ir.F32Type.get),
    np.dtype(np.complex128): _complex(ir.F64Type.get),
    np.dtype(ml_dtypes.float8_e4m3fn): ir.Float8E4M3FNType.get,
    np.dtype(ml_dtypes.float8_e4m3fnuz): ir.Float8E4M3FNUZType.get,
    np.dtype(ml_dtypes.float8_e4m3b11fnuz): ir.Float8E4M3B11FNUZType.get,
    np.dtype(ml_dtypes.float8_e5m2): ir.Float8E5M2Type.get,
    np.dtype(ml_dtypes.float8_e5m2fnuz): ir.Float8E5M2FNUZType.get,
    np.dtype(ml_dtypes.float8_e3m4): ir.Float8E3M4Type.get,
    np.dtype(ml_dtypes.float8_e4m3): ir.Float8E4M3Type.get,
    np.dtype(ml_dtypes.float8_e8m0fnu): ir.Float8E8M0FNUType.get,
    np.dtype(ml_dtypes.float4_e2m1fn): ir.Float4E2M1FNType.get,
}


def dtype_to_ir_type(dtype: Any) -> ir.Type:
    """The MLIR element type of ``dtype`` in the current context."""
    dt = np.dtype(dtype)
    make = _DTYPE_TO_IR.get(dt)
    if make is None:
        raise TypeError(f"dtype_to_ir_type: no MLIR type for dtype {dt}")
    return make()


def aval_to_ir_type(aval: ShapedArray) -> ir.RankedTensorType:
    """``tensor<shape x element>`` for ``aval`` in the current context."""
    return type_cache().tensor(aval)


class TypeCache:
    """The types and small constant attributes of one context, built once each.

    Keys are avals (hashable, value-compared), ``(shape, dtype)`` pairs, a
    scalar's dtype and bytes, or a tuple of ints; the values are only valid
    in the context the cache belongs to (MLIR uniques types and attributes
    per context, so sharing them between lowerings is safe). Each table keeps
    at most :data:`_MAX_ENTRIES` entries and starts over past it, so a
    program that keeps making functions with new constants or shapes does
    not grow it without end.
    """

    __slots__ = ("context", "_elements", "_tensors", "_shaped", "_scalar_attrs",
                 "_i64_arrays", "_attrs", "__weakref__")

    def __init__(self, context: ir.Context):
        self.context = context
        self._elements: dict[np.dtype[Any], ir.Type] = {}
        self._tensors: dict[ShapedArray, ir.RankedTensorType] = {}
        self._shaped: dict[tuple[tuple[int, ...], np.dtype[Any]], ir.RankedTensorType] = {}
        self._scalar_attrs: dict[tuple[np.dtype[Any], bytes],
                                 tuple[ir.DenseElementsAttr, ir.Type]] = {}
        self._i64_arrays: dict[tuple[int, ...], ir.DenseI64ArrayAttr] = {}
        self._attrs: dict[Any, ir.Attribute] = {}

    def element(self, dtype: np.dtype[Any]) -> ir.Type:
        t = self._elements.get(dtype)
        if t is None:
            with self.context:
                t = self._elements[dtype] = dtype_to_ir_type(dtype)
        return t

    def tensor(self, aval: ShapedArray) -> ir.RankedTensorType:
        t = self._tensors.get(aval)
        if t is None:
            t = _remember(self._tensors, aval, self.shaped(aval.shape, aval.dtype))
        return t

    def shaped(self, shape: Sequence[int], dtype: Any) -> ir.RankedTensorType:
        key = (tuple(shape), np.dtype(dtype))
        t = self._shaped.get(key)
        if t is None:
            with self.context:
                t = _remember(self._shaped, key,
                              ir.RankedTensorType.get(key[0], self.element(key[1])))
        return t

    def _scalar(self, value: np.ndarray[Any, Any]) -> tuple[ir.DenseElementsAttr, ir.Type]:
        key = (value.dtype, value.tobytes())
        hit = self._scalar_attrs.get(key)
        if hit is None:
            with self.context:
                attr = dense_elements_attr(value)
                hit = _remember(self._scalar_attrs, key, (attr, attr.type))
        return hit

    def scalar_attr(self, value: np.ndarray[Any, Any]) -> ir.DenseElementsAttr:
        """The dense attribute of a 0-d array, uniqued by dtype and bytes."""
        return self._scalar(value)[0]

    def scalar_constant(self, value: np.ndarray[Any, Any]) -> Value:
        """A ``stablehlo.constant`` holding the 0-d array ``value``, at the
        current insertion point and location (the attribute and type are
        built once; the op is created without the builder's type inference)."""
        attr, result_type = self._scalar(value)
        op = ir.Operation.create("stablehlo.constant", results=[result_type],
                                 attributes={"value": attr})
        return op.result

    def i64_array(self, values: Sequence[int]) -> ir.DenseI64ArrayAttr:
        """``array<i64: ...>`` of ``values`` (dimensions, permutations...)."""
        key = tuple(values)
        attr = self._i64_arrays.get(key)
        if attr is None:
            with self.context:
                attr = _remember(self._i64_arrays, key, dense_i64_array(key))
        return attr

    def attribute(self, key: Hashable, build: Callable[[], ir.Attribute]) -> ir.Attribute:
        """The attribute ``build()`` made the first time ``key`` was asked for
        (``key`` must determine the attribute completely)."""
        attr = self._attrs.get(key)
        if attr is None:
            with self.context:
                attr = _remember(self._attrs, key, build())
        return attr


#: The bound of each of a TypeCache's tables (see :class:`TypeCache`).
_MAX_ENTRIES = 4096

K = TypeVar("K")
V = TypeVar("V")


def _remember(table: dict[K, V], key: K, value: V) -> V:
    """``table[key] = value`` (emptying ``table`` first when it is full)."""
    if len(table) >= _MAX_ENTRIES:
        table.clear()
    table[key] = value
    return value


_caches: weakref.WeakKeyDictionary[ir.Context, TypeCache] = weakref.WeakKeyDictionary()


#: The last (context, cache) pair handed out: rules ask for the current
#: context's cache once per op, nearly always for the same context.
_last: tuple[weakref.ref[ir.Context], TypeCache] | None = None


def type_cache(context: ir.Context | None = None) -> TypeCache:
    """The ``TypeCache`` of ``context`` (default: the current context)."""
    global _last
    ctx = ir.Context.current if context is None else context
    last = _last
    if last is not None and last[0]() is ctx:
        return last[1]
    cache = _caches.get(ctx)
    if cache is None:
        cache = _caches[ctx] = TypeCache(ctx)
    _last = (weakref.ref(ctx), cache)
    return cache


def dense_elements_attr(value: Any, dtype: Any = None) -> ir.DenseElementsAttr:
    """A dense attribute holding ``value`` (a numpy array or scalar).

    The MLIR element type is always passed explicitly, which is what makes
    unsigned types (otherwise signless), bfloat16, fp8 and int4 (otherwise
    rejected by the buffer protocol) come out right; float0 is stored as
    zeros of type i1, and non-contiguous arrays are copied."""
    arr = np.asarray(value, dtype=dtype)
    if arr.dtype == dtypes.float0:
        arr = np.zeros(arr.shape, np.bool_)
    element = dtype_to_ir_type(arr.dtype)
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    attr: ir.DenseElementsAttr = ir.DenseElementsAttr.get(cast(Any, arr), type=element)
    return attr


def ir_constant(value: Any, dtype: Any = None) -> Value:
    """A ``stablehlo.constant`` (or a broadcast of one) equal to ``value``.

    An array with zero strides (``np.broadcast_to``, ``np.zeros_like`` of a
    broadcast) is emitted as a constant of its distinct part broadcast to
    the full shape, so big splats don't become big literals."""
    if has_no_value(value):
        raise no_value_error(value)
    arr = np.asarray(value, dtype=dtype)
    if arr.dtype == dtypes.float0:
        arr = np.zeros(arr.shape, np.bool_)
    types = type_cache()
    if arr.ndim == 0:
        return types.scalar_constant(arr)
    if arr.size > 1 and 0 in arr.strides:
        kept = [ax for ax in range(arr.ndim) if arr.strides[ax] != 0]
        index = tuple(slice(None) if ax in kept else 0 for ax in range(arr.ndim))
        core = ir_constant(arr[index].copy(order="C"))
        op = ir.Operation.create(
            "stablehlo.broadcast_in_dim", results=[types.shaped(arr.shape, arr.dtype)],
            operands=[core], attributes={"broadcast_dimensions": types.i64_array(kept)})
        return op.result
    return hlo.constant(dense_elements_attr(arr))


def dense_int_elements(values: Any) -> ir.DenseIntElementsAttr:
    """A dense i64 elements attribute (replica groups, pairs, paddings)."""
    arr = np.array(values, dtype=np.int64, order="C")
    attr: ir.DenseIntElementsAttr = ir.DenseIntElementsAttr.get(cast(Any, arr))
    return attr


def dense_i64_array(values: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def i64_attr(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
