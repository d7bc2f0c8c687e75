"""The base primitives: the few that the interpreters themselves apply.

Partial evaluation, JVP, transposition and batching build values of their own:
zeros for symbolic ``Zero``s, sums of cotangents over a mapped axis, batch
dimensions moved to the front or broadcast. They do it with these primitives,
which sit below the interpreters (and so below ``lax``, which re-exports each
one from the module where a user looks for it):

==========================  ===========================================================
``convert_element_type_p``  dtype conversion (``lax.convert``); ``typed_array``
``broadcast_in_dim_p``      broadcasting (``lax.structural``); ``zeros_like_aval``
``reshape_p``               reshaping (``lax.structural``)
``transpose_p``             axis permutation (``lax.structural``); ``moveaxis``
``reduce_sum_p``            summation (``lax.reductions``)
==========================  ===========================================================

Each primitive's abstract-evaluation, JVP, transpose and batching rules are
registered beside it, as everywhere in lax. The helpers every linear rule uses
(``linear_jvp``, ``deflinear``, ``zero_cts``) and the batch-dimension
utilities (``moveaxis``, ``broadcast_batch``, ``bdim_at_front``) live here too,
so that lax's rule builders and the interpreters share one copy.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import (ShapedArray, canonicalize_axis, canonicalize_shape,
                                       check_shape_size, get_aval)
from lamina_tracing_core.core import Tracer, staging
from lamina_tracing_core.mesh import AbstractMesh, TypeSharding
from lamina_tracing_core.jaxpr import hide_default_params, param_printers
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.out_sharding import param_type_sharding, resolve_out_sharding
from lamina_tracing_core import vma as _vma
from lamina_tracing_core.symbolic import Zero, is_undefined_primal, is_zero, tangent_aval

Array = Any
ArrayLike = Any
Shape = tuple[int, ...]

__all__ = [
    "bdim_at_front", "is_lamina_array", "broadcast_batch", "broadcast_in_dim", "broadcast_in_dim_p",
    "convert_element_type_internal", "convert_element_type_p", "deflinear",
    "deftranspose", "full", "full_like", "instantiate_zeros", "linear_jvp", "moveaxis", "reduce_sum",
    "reduce_sum_p", "reshape", "reshape_p", "transpose", "transpose_p", "typed_array",
    "zero_cts", "zero_from_primal", "zeros_like_array", "zeros_like_aval",
]


def is_lamina_array(x: Any) -> bool:
    """A value already of lamina's array kind (a tracer or runtime array):
    identity shape changes may return it unchanged."""
    return isinstance(getattr(x, "aval", None), ShapedArray)


# --- zeros ----------------------------------------------------------------------------
def zeros_like_aval(aval: ShapedArray) -> Any:
    """An array of zeros of type ``aval``: a numpy array when evaluating
    eagerly (and for scalars and float0), a staged broadcast of a scalar zero
    while tracing (so big zeros are an equation, not an embedded constant)."""
    zeros = _invariant_zeros(aval)
    if aval.vma and _vma.checking() and aval.dtype != dtypes.float0:
        # zeros of a type varying over manual axes (a shard_map body's)
        return _vma.pvary_p.bind(zeros, axes=aval.vma_order)
    return zeros


def _invariant_zeros(aval: ShapedArray) -> Any:
    if aval.dtype == dtypes.float0:
        return np.zeros(aval.shape, aval.dtype)
    if aval.weak_type:  # numpy has no weak types
        return typed_array(0, aval)
    if not aval.shape or not staging():
        return np.zeros(aval.shape, aval.dtype)
    return broadcast_in_dim_p.bind(np.zeros((), aval.dtype), shape=aval.shape,
                                   broadcast_dimensions=(), sharding=None)


def typed_array(value: Any, aval: ShapedArray) -> Any:
    """Host ``value`` as an array of exactly ``aval``'s type, weak type
    included: one conversion, which runs eagerly or is staged."""
    return convert_element_type_p.bind(
        np.broadcast_to(np.asarray(value, aval.dtype), aval.shape), new_dtype=aval.dtype,
        weak_type=aval.weak_type, sharding=None)


def instantiate_zeros(t: Any) -> Any:
    """``t`` itself, or actual zeros when ``t`` is a symbolic ``Zero``."""
    if type(t) is Zero:
        return zeros_like_aval(t.aval)
    return t


def zero_from_primal(x: Any) -> Zero:
    """The symbolic zero tangent of the primal value ``x``."""
    return Zero(tangent_aval(get_aval(x)))


# --- linear primitives ------------------------------------------------------------------
def zero_cts(invals: Sequence[Any]) -> list[Any]:
    """The transpose result for a zero cotangent: zeros for linear inputs."""
    return [Zero(x.aval) if is_undefined_primal(x) else None for x in invals]


def linear_jvp(prim: Primitive, primals: Sequence[Any], tangents: Sequence[Any],
               **params: Any) -> Any:
    """The JVP of a primitive linear in all arguments: apply it to the tangents."""
    out = prim.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        if prim.multiple_results:
            return out, [zero_from_primal(o) for o in out]
        return out, zero_from_primal(out)
    return out, prim.bind(*[instantiate_zeros(t) for t in tangents], **params)


def deftranspose(prim: Primitive, transpose: Callable[..., list[Any]]) -> None:
    """Registers a transpose rule that only sees non-zero cotangents."""

    def transpose_rule(ct: Any, *invals: Any, **params: Any) -> list[Any]:
        if type(ct) is Zero or (prim.multiple_results and all(type(c) is Zero for c in ct)):
            return zero_cts(invals)
        return transpose(ct, *invals, **params)

    transpose_rules[prim] = transpose_rule


def deflinear(prim: Primitive, transpose: Callable[..., list[Any]]) -> None:
    """``prim`` is linear in every argument; ``transpose(ct, *invals, **params)``
    sees only non-zero cotangents (zeros are handled here)."""

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> Any:
        return linear_jvp(prim, primals, tangents, **params)

    jvp_rules[prim] = jvp
    deftranspose(prim, transpose)



# --- batch dimensions -------------------------------------------------------------------
def moveaxis(x: Any, src: int, dst: int) -> Any:
    """``x`` with axis ``src`` moved to position ``dst`` (negative allowed)."""
    ndim = get_aval(x).ndim
    src, dst = src % ndim, dst % ndim
    if src == dst:
        return x
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def broadcast_batch(x: Any, size: int, axis: int) -> Any:
    """An unbatched ``x`` given a new axis of ``size`` at position ``axis``."""
    shape = list(get_aval(x).shape)
    axis = axis % (len(shape) + 1)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    shape.insert(axis, size)
    return broadcast_in_dim(x, tuple(shape), dims)


def bdim_at_front(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` with its batch dim first; an unbatched ``x`` (``bdim`` None) is
    broadcast to ``size``."""
    if bdim is None:
        return broadcast_batch(x, size, 0)
    return moveaxis(x, bdim, 0)


_PY_SCALARS = (bool, int, float, complex)
_FOLDABLE = (bool, int, float, complex, np.generic, np.ndarray)

# --- convert_element_type --------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")
sit.register(convert_element_type_p, sit.given_or_first)
_VALID_DTYPES = dtypes.ANY | {dtypes.float0}


@convert_element_type_p.def_abstract_eval
def _convert_element_type_abstract_eval(operand: ShapedArray, *, new_dtype: Any,
                                        weak_type: bool, sharding: Any) -> ShapedArray:
    if new_dtype not in _VALID_DTYPES:
        raise TypeError(f"convert_element_type: {new_dtype!r} is not a valid dtype")
    if new_dtype == operand.dtype and weak_type == operand.weak_type:
        return operand
    return ShapedArray(operand.shape, new_dtype, weak_type)


def convert_element_type_internal(operand: ArrayLike, new_dtype: Any = None,
                                  weak_type: bool = False, sharding: Any = None) -> Array:
    """Conversion that folds constants: a Python/numpy scalar or numpy array
    is converted here, with numpy, and stays a constant (no equation), as JAX's
    ``_convert_element_type`` does. Used by ``full``, constants in rules and
    NumPy."""
    if type(operand) in _WEAK_PY_SCALARS and sharding is None and not weak_type \
            and type(new_dtype) in _NP_DTYPE_TYPES:
        # The operators' common case (``x * 2.0``): a Python scalar becomes a
        # strongly typed 0-d constant; these are memoized (read-only).
        return _scalar_constant(operand, dtypes.canonicalize_dtype(new_dtype))
    aval = get_aval(operand)
    new = aval.dtype if new_dtype is None else dtypes.canonicalize_dtype(new_dtype)
    weak = bool(weak_type)
    if new == aval.dtype and weak == aval.weak_type and sharding is None:
        return operand
    if sharding is None and isinstance(operand, _FOLDABLE) and new != dtypes.float0:
        if not weak:
            return _fold(operand, new)
        py_type = dtypes.python_scalar_for(new)
        if py_type is not None and isinstance(operand, _PY_SCALARS + (np.generic,)) \
                and np.ndim(operand) == 0:
            return py_type(_fold(operand, new).item())
    return convert_element_type_p.bind(operand, new_dtype=new, weak_type=weak,
                                       sharding=sharding)


_WEAK_PY_SCALARS = frozenset({int, float, complex})
_NP_DTYPE_TYPES = frozenset(type(np.dtype(t)) for t in set(np.sctypeDict.values()))
_scalar_constants: dict[tuple[Any, ...], np.ndarray[Any, Any]] = {}
_MAX_SCALAR_CONSTANTS = 4096


def _scalar_constant(value: Any, dtype: np.dtype[Any]) -> Any:
    """``value`` (a Python scalar) as a read-only 0-d array of ``dtype``."""
    if dtype == dtypes.float0:
        return _fold(value, dtype)
    # 0.0 and -0.0 are equal keys, NaN is never equal to itself: key floats by
    # their bits
    key = (type(value), value.hex() if type(value) is float else value, dtype)
    try:
        const = _scalar_constants.get(key)
    except TypeError:  # complex NaN etc. are hashable; defensive only
        return _fold(value, dtype)
    if const is None:
        const = _fold(value, dtype)
        const.flags.writeable = False
        if len(_scalar_constants) >= _MAX_SCALAR_CONSTANTS:
            _scalar_constants.clear()
        _scalar_constants[key] = const
    return const


def _fold(value: Any, dtype: np.dtype[Any]) -> Any:
    if type(value) is int and dtype.kind in "iu":
        # As JAX 0.10: a Python int must fit the default integer type (it is
        # one, weakly typed); converting it to a narrower type then wraps like
        # a C cast (uint8 + 300 is uint8 + 44).
        default = dtypes.default_int_dtype()
        if not dtypes.python_int_fits(value, default):
            raise OverflowError(f"Python int {value} too large to convert to {default.name} "
                                f"(the default integer type)")
        return np.asarray(value, default).astype(dtype)
    arr = np.asarray(value)
    if arr.dtype.kind == "c" and dtype.kind != "c":
        arr = arr.real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return arr.astype(dtype)


def convert_element_type(operand: ArrayLike, new_dtype: Any) -> Array:
    """``operand`` converted to ``new_dtype`` (a strongly typed result).

    Like a C cast: floats to integers truncate; complex to real drops the
    imaginary part (with a ComplexWarning).
    """
    return _convert_element_type(operand, new_dtype, weak_type=False)


def _convert_element_type(operand: ArrayLike, new_dtype: Any = None, weak_type: bool = False,
                          sharding: Any = None, warn_on_complex_to_real_cast: bool = True
                          ) -> Array:
    aval = get_aval(operand)
    new = aval.dtype if new_dtype is None else dtypes.canonicalize_dtype(new_dtype)
    weak = bool(weak_type)
    if warn_on_complex_to_real_cast and aval.dtype in dtypes.COMPLEX \
            and new not in dtypes.COMPLEX:
        warnings.warn("Casting complex values to real discards the imaginary part",
                      np.exceptions.ComplexWarning, stacklevel=3)
    if new == aval.dtype and weak == aval.weak_type and sharding is None \
            and isinstance(getattr(operand, "aval", None), ShapedArray):
        return operand
    return convert_element_type_p.bind(operand, new_dtype=new, weak_type=weak,
                                       sharding=sharding)


def _convert_element_type_jvp(primals: Any, tangents: Any, *, new_dtype: Any,
                              weak_type: bool, sharding: Any) -> Any:
    (x,), (t,) = primals, tangents
    out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type,
                                      sharding=sharding)
    out_tangent_aval = tangent_aval(get_aval(out))
    if is_zero(t) or out_tangent_aval.dtype == dtypes.float0 \
            or get_aval(t).dtype == dtypes.float0:
        return out, Zero(out_tangent_aval)
    return out, convert_element_type_p.bind(t, new_dtype=out_tangent_aval.dtype,
                                            weak_type=weak_type, sharding=sharding)


def _convert_element_type_transpose(ct: Any, operand: Any, *, new_dtype: Any,
                                    weak_type: bool, sharding: Any) -> list[Any]:
    old = operand.aval
    if is_zero(ct):
        return [Zero(old)]
    if tangent_aval(old).dtype == dtypes.float0:
        return [Zero(tangent_aval(old))]
    return [convert_element_type_p.bind(ct, new_dtype=old.dtype, weak_type=old.weak_type,
                                        sharding=None)]


def _convert_element_type_batch(args: Any, dims: Any, **params: Any) -> Any:
    return convert_element_type_p.bind(args[0], **params), dims[0]


jvp_rules[convert_element_type_p] = _convert_element_type_jvp
param_printers[convert_element_type_p] = hide_default_params(sharding=None)
transpose_rules[convert_element_type_p] = _convert_element_type_transpose
batching_rules[convert_element_type_p] = _convert_element_type_batch


# --- broadcast_in_dim -------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")
sit.register(broadcast_in_dim_p, sit.broadcast_in_dim)


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(operand: ShapedArray, *, shape: Shape,
                                    broadcast_dimensions: tuple[int, ...],
                                    sharding: Any) -> ShapedArray:
    ndim = len(operand.shape)
    if ndim != len(broadcast_dimensions):
        raise TypeError("broadcast_in_dim broadcast_dimensions must have length equal to "
                        f"operand ndim; got broadcast_dimensions {broadcast_dimensions} "
                        f"for operand ndim {ndim}.")
    if len(shape) < ndim:
        raise TypeError("broadcast_in_dim target broadcast shape must have equal or higher "
                        f"rank to the operand shape; got operand ndim {ndim} and target "
                        f"broadcast ndim {len(shape)}.")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions):
        raise TypeError("broadcast_in_dim broadcast_dimensions must be a subset of output "
                        f"dimensions, got {broadcast_dimensions} for operand ndim {ndim} "
                        f"and shape {shape}.")
    if any(operand.shape[i] not in (1, shape[d]) for i, d in enumerate(broadcast_dimensions)):
        raise TypeError("broadcast_in_dim operand dimension sizes must either be 1, or be "
                        "equal to their corresponding dimensions in the target broadcast "
                        f"shape; got operand of shape {operand.shape}, target broadcast shape "
                        f"{shape}, broadcast_dimensions {broadcast_dimensions} ")
    if any(a >= b for a, b in zip(broadcast_dimensions, broadcast_dimensions[1:])):
        raise TypeError("broadcast_in_dim broadcast_dimensions must be strictly increasing; "
                        f"got broadcast_dimensions {broadcast_dimensions}")
    check_shape_size(shape, operand.dtype, "broadcast_in_dim")
    # A `sharding` parameter is the result's (JAX's rule); the sharding rule
    # runs only for sharded operands, so a creation op's type comes from here.
    return ShapedArray(shape, operand.dtype, operand.weak_type,
                       sharding=param_type_sharding(sharding, shape, "broadcast_in_dim"))


def broadcast_in_dim(operand: ArrayLike, shape: Sequence[int],
                     broadcast_dimensions: Sequence[int], *, out_sharding: Any = None) -> Array:
    """Broadcasts ``operand`` to ``shape``; operand dim ``i`` becomes output dim
    ``broadcast_dimensions[i]``."""
    shape = tuple(shape) if type(shape) is tuple else canonicalize_shape(shape)
    dims = tuple(broadcast_dimensions) if type(broadcast_dimensions) is tuple \
        else tuple(operator.index(d) for d in broadcast_dimensions)
    if out_sharding is None and is_lamina_array(operand) and operand.aval.shape == shape \
            and dims == tuple(range(len(shape))):
        return operand
    return broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims,
                                   sharding=out_sharding)


def _broadcast_in_dim_transpose(ct: Any, operand: Any, *, shape: Shape,
                                broadcast_dimensions: tuple[int, ...], sharding: Any
                                ) -> list[Any]:
    op_shape = operand.aval.shape
    unit_dims = [d for i, d in enumerate(broadcast_dimensions)
                 if op_shape[i] == 1 and shape[d] != 1]
    bdims = set(broadcast_dimensions)
    summed = tuple(sorted(set(i for i in range(len(shape)) if i not in bdims) | set(unit_dims)))
    out = reduce_sum(ct, summed) if summed else ct
    if get_aval(out).shape != op_shape:
        out = reshape(out, op_shape)
    return [out]


def _broadcast_in_dim_batch(args: Any, dims: Any, *, shape: Shape,
                            broadcast_dimensions: tuple[int, ...], sharding: Any) -> Any:
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    size = get_aval(x).shape[0]
    new_shape = (size,) + shape
    new_dims = (0,) + tuple(b + 1 for b in broadcast_dimensions)
    return broadcast_in_dim_p.bind(x, shape=new_shape, broadcast_dimensions=new_dims,
                                   sharding=sharding), 0


deflinear(broadcast_in_dim_p, _broadcast_in_dim_transpose)
batching_rules[broadcast_in_dim_p] = _broadcast_in_dim_batch


def _broadcast_in_dim_printer(params: dict[str, Any]) -> dict[str, str | None]:
    # As JAX prints it: the shape is the output's; no empty dims, no sharding.
    shown: dict[str, str | None] = {"shape": None}
    if not params.get("broadcast_dimensions"):
        shown["broadcast_dimensions"] = None
    if params.get("sharding") is None:
        shown["sharding"] = None
    return shown


param_printers[broadcast_in_dim_p] = _broadcast_in_dim_printer


# --- reshape ---------------------------------------------------------------------
reshape_p = Primitive("reshape")
sit.register(reshape_p, sit.reshape)


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(operand: ShapedArray, *, new_sizes: Shape,
                           dimensions: tuple[int, ...] | None, sharding: Any) -> ShapedArray:
    if any(d < 0 for d in new_sizes):
        raise TypeError(f"reshape new_sizes must all be positive, got {new_sizes}.")
    if math.prod(new_sizes) != math.prod(operand.shape):
        raise TypeError("reshape total size must be unchanged, got new_sizes "
                        f"{new_sizes} (size {math.prod(new_sizes)}) for shape "
                        f"{operand.shape} (size {math.prod(operand.shape)}).")
    if dimensions is not None and sorted(dimensions) != list(range(len(operand.shape))):
        raise TypeError("reshape dimensions must be a permutation of operand dimensions, "
                        f"got dimensions {dimensions} for shape {operand.shape}.")
    check_shape_size(new_sizes, operand.dtype, "reshape", "new_sizes")
    # as broadcast_in_dim's: an unsharded operand's result is split as `sharding` says
    return ShapedArray(new_sizes, operand.dtype, operand.weak_type,
                       sharding=param_type_sharding(sharding, new_sizes, "reshape"))


def reshape(operand: ArrayLike, new_sizes: Sequence[int],
            dimensions: Sequence[int] | None = None, *, out_sharding: Any = None) -> Array:
    """``operand`` reshaped (row-major) to ``new_sizes``, after transposing it by
    ``dimensions`` when given."""
    new_sizes = canonicalize_shape(new_sizes, "reshape")
    dims = None if dimensions is None else tuple(operator.index(d) for d in dimensions)
    if dims is not None and dims == tuple(range(len(dims))):
        dims = None
    if dims is None and out_sharding is None and is_lamina_array(operand) \
            and operand.aval.shape == new_sizes:
        return operand
    return reshape_p.bind(operand, new_sizes=new_sizes, dimensions=dims,
                          sharding=out_sharding)


def _reshape_transpose(ct: Any, operand: Any, *, new_sizes: Shape,
                       dimensions: tuple[int, ...] | None, sharding: Any) -> list[Any]:
    if dimensions is None:
        return [reshape(ct, operand.aval.shape)]
    permuted = tuple(operand.aval.shape[d] for d in dimensions)
    return [transpose(reshape(ct, permuted), tuple(np.argsort(dimensions).tolist()))]


def _reshape_batch(args: Any, dims: Any, *, new_sizes: Shape,
                   dimensions: tuple[int, ...] | None, sharding: Any) -> Any:
    (x,), (d,) = args, dims
    x = moveaxis(x, d, 0)
    if dimensions is not None:
        x = transpose(x, (0,) + tuple(p + 1 for p in dimensions))
    size = get_aval(x).shape[0]
    return reshape_p.bind(x, new_sizes=(size,) + new_sizes, dimensions=None,
                          sharding=sharding), 0


deflinear(reshape_p, _reshape_transpose)
batching_rules[reshape_p] = _reshape_batch


# --- transpose / rev ----------------------------------------------------------------
transpose_p = Primitive("transpose")
sit.register(transpose_p, sit.transpose)


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(operand: ShapedArray, *, permutation: tuple[int, ...]
                             ) -> ShapedArray:
    if tuple(sorted(permutation)) != tuple(range(len(operand.shape))):
        raise TypeError("transpose permutation isn't a permutation of operand dimensions, "
                        f"got permutation {permutation} for operand shape {operand.shape}.")
    return ShapedArray(tuple(operand.shape[i] for i in permutation), operand.dtype,
                       operand.weak_type)


def transpose(operand: ArrayLike, permutation: Sequence[int]) -> Array:
    """``operand`` with its axes permuted: output axis i is input axis permutation[i]."""
    perm = tuple(operator.index(p) for p in permutation)
    if perm == tuple(range(len(perm))) and is_lamina_array(operand) \
            and len(perm) == len(operand.aval.shape):
        return operand
    return transpose_p.bind(operand, permutation=perm)


def _transpose_transpose(ct: Any, operand: Any, *, permutation: tuple[int, ...]) -> list[Any]:
    return [transpose(ct, tuple(np.argsort(permutation).tolist()))]


def _transpose_batch(args: Any, dims: Any, *, permutation: tuple[int, ...]) -> Any:
    (x,), (d,) = args, dims
    perm = (d,) + tuple(i if i < d else i + 1 for i in permutation)
    return transpose_p.bind(x, permutation=perm), 0


deflinear(transpose_p, _transpose_transpose)
batching_rules[transpose_p] = _transpose_batch

# --- full ------------------------------------------------------------------------------
def _fill_scalar(fill_value: Any, dtype: Any, weak_type: bool) -> Any:
    if type(fill_value) is int and dtype.kind in "iu" \
            and not dtypes.python_int_fits(fill_value, dtypes.default_int_dtype()):
        # As JAX: an explicit fill converts a Python int like a C cast from a
        # 64-bit integer (full((), 2**32 - 1, uint32) is 4294967295, 2**32 wraps
        # to 0); operators keep the default-integer rule of `_fold`.
        fill_value = np.asarray(fill_value).astype(dtype)
    return convert_element_type_internal(fill_value, dtype, weak_type)


def full(shape: Sequence[int], fill_value: ArrayLike, dtype: Any = None, *,
         sharding: Any = None) -> Array:
    """An array of ``shape`` filled with the scalar ``fill_value``."""
    shape = canonicalize_shape(shape, "full")
    fill_aval = get_aval(fill_value)
    if fill_aval.shape:
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape "
                        f"{fill_aval.shape}.")
    if dtype is None:
        weak, dtype = fill_aval.weak_type, fill_aval.dtype
    else:
        weak, dtype = False, dtypes.canonicalize_dtype(dtype)
    check_shape_size(shape, dtype, "full")
    value = _fill_scalar(fill_value, dtype, weak)
    return broadcast_in_dim(value, shape, (), out_sharding=_full_sharding(sharding, shape))


def _full_sharding(sharding: Any, shape: Shape) -> TypeSharding | None:
    """The result type's sharding from ``full``'s ``sharding``, as JAX's: a
    type sharding as it is; a sharding over a concrete mesh splits the eager
    result but is ignored while tracing; one without a spec (a single device)
    says nothing about the type."""
    if sharding is None or isinstance(sharding, TypeSharding):
        return sharding
    if not hasattr(sharding, "spec"):
        return None
    if not isinstance(getattr(sharding, "mesh", None), AbstractMesh) and staging():
        return None
    return resolve_out_sharding(sharding, shape, "lax.full", "sharding")


def _like_sharding(x: ArrayLike, aval: ShapedArray, fill_shape: Shape, shape_given: bool,
                   weak: bool) -> TypeSharding | None:
    """The sharding ``full_like`` copies from ``x`` when given none, as JAX's:
    a traced ``x``'s type sharding unless a ``shape`` is given; an eager
    ``x``'s when the result has its shape and is not weakly typed (while
    tracing, a concrete ``x``'s sharding is a concrete one, which is ignored)."""
    if aval.sharding is None:
        return None
    if isinstance(x, Tracer):
        return None if shape_given else aval.sharding
    if staging() or weak or fill_shape != aval.shape:
        return None
    return aval.sharding


def full_like(x: ArrayLike, fill_value: ArrayLike, dtype: Any = None,
              shape: Sequence[int] | None = None, sharding: Any = None) -> Array:
    """An array like ``x`` (or of ``shape``/``dtype``) filled with ``fill_value``;
    split as ``sharding`` says, else like ``x`` (see ``_like_sharding``)."""
    aval = get_aval(x)
    fill_shape = aval.shape if shape is None else canonicalize_shape(shape)
    weak = dtype is None and aval.weak_type
    dtype = aval.dtype if dtype is None else dtypes.canonicalize_dtype(dtype)
    if dtype == dtypes.float0:
        return np.zeros(fill_shape, dtypes.float0)
    value = _fill_scalar(fill_value, dtype, weak)
    typed = (_like_sharding(x, aval, fill_shape, shape is not None, weak) if sharding is None
             else _full_sharding(sharding, fill_shape))
    return broadcast_in_dim(value, fill_shape, (), out_sharding=typed)


def zeros_like_array(x: ArrayLike) -> Array:
    return full_like(x, 0)



# --- reduce_sum ----------------------------------------------------------------------
reduce_sum_p = Primitive("reduce_sum")
sit.register(reduce_sum_p, sit.reduction)


def reduced_shape(name: str, operand: ShapedArray, axes: tuple[int, ...]) -> Shape:
    """The shape of ``operand`` reduced over ``axes`` (checked: unique, in range)."""
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: duplicate value in 'axes' of reduction: {axes}")
    nd = len(operand.shape)
    if not all(0 <= a < nd for a in axes):
        raise ValueError(f"{name}: reduction axes {axes} contains out-of-bounds indices for "
                         f"{operand.str_short()}.")
    return tuple(d for i, d in enumerate(operand.shape) if i not in axes)


@reduce_sum_p.def_abstract_eval
def _reduce_sum_abstract_eval(operand: ShapedArray, *, axes: tuple[int, ...],
                              out_sharding: Any = None) -> ShapedArray:
    if operand.dtype not in dtypes.NUM:
        dtypes.check_dtype("reduce_sum", operand, dtypes.NUM)
    return ShapedArray(reduced_shape("reduce_sum", operand, axes), operand.dtype,
                       operand.weak_type)


def reduction_axes(operand: ArrayLike, axes: Sequence[int]) -> tuple[int, ...]:
    """``axes`` of ``operand`` as sorted non-negative ints (negative count from the end)."""
    nd = len(get_aval(operand).shape)
    return tuple(sorted(canonicalize_axis(a, nd, "reduction axis") for a in axes))


def reduce_sum(operand: ArrayLike, axes: Sequence[int], *, out_sharding: Any = None) -> Array:
    """Sum of ``operand`` over ``axes``."""
    return reduce_sum_p.bind(operand, axes=reduction_axes(operand, axes),
                             out_sharding=out_sharding)


def reduction_batcher(prim: Primitive) -> Callable[..., Any]:
    """The batching rule of a reduction over ``axes``: the axes shift past the
    batch dim, which moves left by the reduced axes before it."""

    def batch(args: Any, dims: Any, *, axes: tuple[int, ...], **params: Any) -> Any:
        (x,), (d,) = args, dims
        new_axes = tuple(a + 1 if a >= d else a for a in axes)
        out_d = d - sum(1 for a in axes if a < d)
        return prim.bind(x, axes=new_axes, **params), out_d

    return batch


def _reduce_sum_transpose(ct: Any, operand: Any, *, axes: tuple[int, ...],
                          out_sharding: Any = None) -> list[Any]:
    shape = operand.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


deflinear(reduce_sum_p, _reduce_sum_transpose)
batching_rules[reduce_sum_p] = reduction_batcher(reduce_sum_p)
