"""Contractions: ``dot_general`` and ``conv_general_dilated`` (both bilinear),
with ``Precision``, ``ConvDimensionNumbers`` and the usual wrappers
(``dot``, ``batch_matmul``, ``conv``, ``conv_with_general_padding``,
``conv_transpose``).
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from lamina_tracing_core.out_sharding import param_type_sharding
from lamina_tracing_core import dtypes, trace_settings
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.jaxpr import param_printers
from lamina_tracing_core.primitives import Primitive, batching_rules
from lamina_tracing_core import sharding_in_types as sit
from lamina_tracing_core.lax import convert

Array = Any


class Precision(enum.Enum):
    """Accelerator matmul precision (no effect on CPU): DEFAULT, HIGH, HIGHEST."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> Precision | None:
        return _PRECISION_STRINGS.get(value) if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name


_PRECISION_STRINGS: dict[str | None, Precision] = {
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST, "high": Precision.HIGH,
    "bfloat16_3x": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "default": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "fastest": Precision.DEFAULT, None: Precision.DEFAULT}

CanonicalPrecision = tuple[Precision, Precision] | None


def canonicalize_precision(precision: Any) -> CanonicalPrecision:
    """``None`` or a pair of ``Precision`` (one per operand); ``None`` means
    the ``default_matmul_precision`` setting when one is set."""
    if precision is None:
        default = trace_settings.state.default_matmul_precision
        return None if default is None else canonicalize_precision(default)
    if isinstance(precision, str) and precision in _PRECISION_STRINGS:
        p = _PRECISION_STRINGS[precision]
        return (p, p)
    if isinstance(precision, Precision):
        return (precision, precision)
    if isinstance(precision, (list, tuple)) and len(precision) == 2:
        if all(isinstance(p, Precision) for p in precision):
            return (precision[0], precision[1])
        if all(isinstance(p, str) for p in precision):
            a, b = (canonicalize_precision(p) for p in precision)
            assert a is not None and b is not None
            return (a[0], b[0])
    raise ValueError(f"Precision argument must be None, a string in "
                     f"{[k for k in _PRECISION_STRINGS if k]}, a lax.Precision value or a "
                     f"tuple of two lax.Precision values or strings; got {precision}.")


def _canonical_preferred(dtype: Any) -> np.dtype[Any] | None:
    return None if dtype is None else dtypes.canonicalize_dtype(dtype)


# --- dot_general ------------------------------------------------------------------------
DotDimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]],
                            tuple[tuple[int, ...], tuple[int, ...]]]
dot_general_p = Primitive("dot_general")
sit.register(dot_general_p, sit.dot_general)


def _bits(d: np.dtype[Any]) -> int:
    return 1 if d == dtypes.bool_ else d.itemsize * 8


def _type_rank(d: np.dtype[Any]) -> tuple[bool, int, int, int, bool]:
    """XLA's ordering of element types for a mixed-type dot (higher wins)."""
    is_complex = d in common.COMPLEX
    c = common.real_dtype(d)
    if c in common.FLOAT:
        info = dtypes.finfo(c)
        maxexp: int = int(info.maxexp)
        nmant: int = int(info.nmant)
        return (is_complex, maxexp, nmant, _bits(c), True)
    return (is_complex, -1, -1, _bits(c), c not in common.UNSIGNED)


def _dot_result_dtype(name: str, lhs: np.dtype[Any], rhs: np.dtype[Any],
                      preferred: Any) -> np.dtype[Any]:
    if lhs == rhs and preferred is None:
        return lhs
    lr, rr = _type_rank(lhs), _type_rank(rhs)
    if lr > rr:
        result = lhs
    elif rr > lr:
        result = rhs
    else:
        if lhs != rhs:
            raise TypeError(f"{name} argument type error: {lhs.name}, {rhs.name}")
        result = lhs
    if preferred is None or np.dtype(preferred) == result:
        return result
    wanted: np.dtype[Any] = np.dtype(preferred)
    if result not in common.FLOAT and _bits(wanted) < _bits(result):
        raise TypeError("`preferred_element_type` must not be narrower than the original "
                        f"type, got preferred_element_type of {wanted.name} for result "
                        f"type of {result.name}.")
    return wanted


def _check_dims(name: str, side: str, dims: tuple[int, ...], ndim: int, what: str) -> None:
    if any(not 0 <= d < ndim for d in dims):
        raise TypeError(f"{name} requires {side} dimension numbers to be nonnegative and less "
                        f"than the number of axes of the {side} value, got {side}_{what} of "
                        f"{dims} for {side} of rank {ndim}")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{name} requires {side} {what} dimensions to be distinct, got "
                        f"{side}_{what} {dims}.")


def _dot_general_shape(lhs: ShapedArray, rhs: ShapedArray, dnums: DotDimensionNumbers
                       ) -> tuple[int, ...]:
    (lc, rc), (lb, rb) = dnums
    name = "dot_general"
    _check_dims(name, "lhs", lc, len(lhs.shape), "contracting")
    _check_dims(name, "lhs", lb, len(lhs.shape), "batch")
    _check_dims(name, "rhs", rc, len(rhs.shape), "contracting")
    _check_dims(name, "rhs", rb, len(rhs.shape), "batch")
    if len(lb) != len(rb):
        raise TypeError(f"dot_general requires equal numbers of lhs_batch and rhs_batch "
                        f"dimensions, got lhs_batch {lb} and rhs_batch {rb}.")
    if set(lc) & set(lb):
        raise TypeError(f"dot_general requires lhs batch dimensions to be disjoint from "
                        f"contracting dimensions, got lhs_batch {lb} and lhs_contracting {lc}.")
    if set(rc) & set(rb):
        raise TypeError(f"dot_general requires rhs batch dimensions to be disjoint from "
                        f"contracting dimensions, got rhs_batch {rb} and rhs_contracting {rc}.")
    lbs = tuple(lhs.shape[i] for i in lb)
    rbs = tuple(rhs.shape[i] for i in rb)
    if lbs != rbs:
        raise TypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions "
                        f"to have the same shape, got {lbs} and {rbs}.")
    lcs = tuple(lhs.shape[i] for i in lc)
    rcs = tuple(rhs.shape[i] for i in rc)
    if lcs != rcs:
        raise TypeError(f"dot_general requires contracting dimensions to have the same shape, "
                        f"got {lcs} and {rcs}.")
    return _dot_shape_computation(lhs.shape, rhs.shape, dnums)


def _dot_shape_computation(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...],
                           dnums: DotDimensionNumbers) -> tuple[int, ...]:
    (lc, rc), (lb, rb) = dnums
    batch = tuple(lhs_shape[i] for i in lb)
    lhs_free = tuple(d for i, d in enumerate(lhs_shape) if i not in lc and i not in lb)
    rhs_free = tuple(d for i, d in enumerate(rhs_shape) if i not in rc and i not in rb)
    return batch + lhs_free + rhs_free


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, *,
                               dimension_numbers: DotDimensionNumbers, precision: Any,
                               preferred_element_type: Any, out_sharding: Any) -> ShapedArray:
    for i, a in enumerate((lhs, rhs)):
        if a.dtype not in common.ANY:
            common.check_dtype("dot_general", a, common.ANY, i)
    shape = _dot_general_shape(lhs, rhs, dimension_numbers)
    dtype = _dot_result_dtype("lax.dot_general", lhs.dtype, rhs.dtype, preferred_element_type)
    # out_sharding types the result even when no operand is sharded (the
    # sharding rule, which runs only then, refines it otherwise)
    sharding = None if out_sharding is None else \
        param_type_sharding(out_sharding, shape, "dot_general")
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type, sharding=sharding)


_canonical_dnums_memo: dict[Any, DotDimensionNumbers] = {}


def _canonical_dot_dnums(dimension_numbers: Any) -> DotDimensionNumbers:
    try:
        known = _canonical_dnums_memo.get(dimension_numbers)
    except TypeError:  # lists: not hashable
        return _canonicalize_dot_dnums(dimension_numbers)
    if known is not None:
        return known
    out = _canonicalize_dot_dnums(dimension_numbers)
    if len(_canonical_dnums_memo) < 4096:
        _canonical_dnums_memo[dimension_numbers] = out
    return out


def _canonicalize_dot_dnums(dimension_numbers: Any) -> DotDimensionNumbers:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general dimension_numbers must be ((lhs_contracting, "
                        "rhs_contracting), (lhs_batch, rhs_batch)), got "
                        f"{dimension_numbers!r}") from None
    idx = common.as_int_tuple
    return ((idx("dot_general", "lhs_contracting", lc), idx("dot_general", "rhs_contracting", rc)),
            (idx("dot_general", "lhs_batch", lb), idx("dot_general", "rhs_batch", rb)))


def dot_general(lhs: ArrayLike, rhs: ArrayLike, dimension_numbers: Any,
                precision: Any = None, preferred_element_type: Any = None, *,
                out_sharding: Any = None) -> Array:
    """General tensor contraction: ``dimension_numbers = ((lhs_contracting,
    rhs_contracting), (lhs_batch, rhs_batch))``; the result has the batch dims,
    then lhs free dims, then rhs free dims."""
    return dot_general_p.bind(lhs, rhs, dimension_numbers=_canonical_dot_dnums(dimension_numbers),
                              precision=canonicalize_precision(precision),
                              preferred_element_type=_canonical_preferred(preferred_element_type),
                              out_sharding=out_sharding)


def dot(lhs: ArrayLike, rhs: ArrayLike, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """Vector/matrix products (``dimension_numbers`` optional for rank <= 2)."""
    if dimension_numbers is None:
        ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
        if 1 <= len(ls) <= 2 and 1 <= len(rs) <= 2 and ls[-1] == rs[0]:
            dimension_numbers = (((len(ls) - 1,), (0,)), ((), ()))
        else:
            raise ValueError("lax.dot: dimension_numbers must be specified when not "
                             "performing simple un-batched matrix-matrix, matrix-vector, or "
                             f"vector-vector products; got lhs_shape={ls} rhs_shape={rs}")
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type,
                       out_sharding=out_sharding)


def batch_matmul(lhs: ArrayLike, rhs: ArrayLike, precision: Any = None) -> Array:
    """Batched matmul over all leading dims of two arrays of equal rank >= 2."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    if len(ls) != len(rs) or len(ls) < 2:
        raise ValueError(f"batch_matmul requires arrays of equal rank >= 2, got {ls} and {rs}")
    if ls[-1] != rs[-2]:
        raise ValueError(f"batch_matmul requires lhs.shape[-1] == rhs.shape[-2], got {ls} "
                         f"and {rs}")
    batch = tuple(range(len(ls) - 2))
    return dot_general(lhs, rhs, (((len(ls) - 1,), (len(rs) - 2,)), (batch, batch)), precision)


def _ranges_like(*xs: Sequence[Any]) -> list[list[int]]:
    out, start = [], 0
    for x in xs:
        out.append(list(range(start, start + len(x))))
        start += len(x)
    return out


@functools.lru_cache(maxsize=1024)
def _dot_transpose_plan(dimension_numbers: DotDimensionNumbers, x_ndim: int, y_ndim: int,
                        swap_ans: bool
                        ) -> tuple[DotDimensionNumbers, tuple[int, ...], tuple[int, ...]]:
    """For the cotangent of the lhs ``x`` of a dot: the dimension numbers of
    ``dot_general(ct, y, ...)``, the permutation taking its result to ``x``'s
    axis order, and for each of its result's axes the axis of ``x`` it is."""
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    x_kept = [i for i in range(x_ndim) if i not in x_contract and i not in x_batch]
    y_kept = [i for i in range(y_ndim) if i not in y_contract and i not in y_batch]
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    dims = ((tuple(ans_y), tuple(y_kept)), (tuple(ans_batch), tuple(y_batch)))
    order = sorted(range(len(y_contract)), key=lambda i: y_contract[i])
    x_contract_by_y = [x_contract[i] for i in order]
    unsorted = list(x_batch) + x_kept + x_contract_by_y
    out_axes = tuple(sorted(range(len(unsorted)), key=lambda i: unsorted[i]))
    return dims, out_axes, tuple(unsorted)


def _cotangent_sharding(x_aval: ShapedArray, operands: Sequence[ShapedArray],
                        x_axes: tuple[int, ...]) -> sit.TypeSharding | None:
    """The sharding of the ``dot_general`` that makes ``x``'s cotangent (its
    result axis ``i`` being ``x``'s axis ``x_axes[i]``): ``x``'s own, as JAX
    does. A contraction over a dimension the cotangent and the other operand
    both split (the batch of a weight's gradient) then sums into ``x``'s
    layout instead of being ambiguous. ``None`` when nothing is sharded."""
    if x_aval.sharding is None and not sit.any_sharded(operands):
        return None
    mesh = next(a.sharding.mesh for a in (x_aval, *operands) if a.sharding is not None)
    spec = sit.spec_of(x_aval)
    return sit.TypeSharding(mesh, tuple(spec[d] for d in x_axes))


def _dot_transpose_lhs(ct: Any, x: Any, y: Any, *, dimension_numbers: DotDimensionNumbers,
                       precision: Any, preferred_element_type: Any, out_sharding: Any,
                       swap_ans: bool = False) -> Any:
    x_aval = x.aval
    y_aval = get_aval(y)
    dims, out_axes, x_axes = _dot_transpose_plan(dimension_numbers, len(x_aval.shape),
                                                 len(y_aval.shape), swap_ans)
    out = dot_general(ct, y, dims, precision=precision,
                      preferred_element_type=preferred_element_type,
                      out_sharding=_cotangent_sharding(x_aval, (get_aval(ct), y_aval), x_axes))
    x_bar = st.transpose(out, out_axes)
    if get_aval(x_bar).dtype != x_aval.dtype:
        x_bar = convert._convert_element_type(x_bar, x_aval.dtype, x_aval.weak_type,
                                              warn_on_complex_to_real_cast=False)
    return x_bar


def _dot_transpose_rhs(ct: Any, x: Any, y: Any, *, dimension_numbers: DotDimensionNumbers,
                       precision: Any, preferred_element_type: Any, out_sharding: Any) -> Any:
    (x_contract, y_contract), (x_batch, y_batch) = dimension_numbers
    swapped = ((y_contract, x_contract), (y_batch, x_batch))
    return _dot_transpose_lhs(ct, y, x, dimension_numbers=swapped, precision=precision,
                              preferred_element_type=preferred_element_type,
                              out_sharding=out_sharding, swap_ans=True)


def _bump(dims: tuple[int, ...], b: int) -> tuple[int, ...]:
    return tuple(d + 1 if d >= b else d for d in dims)


def _dot_batch_dnums(ndims: tuple[int, int], bdims: tuple[int | None, int | None],
                     dnums: DotDimensionNumbers) -> tuple[DotDimensionNumbers, int]:
    lhs_nd, rhs_nd = ndims
    lbd, rbd = bdims
    (lc, rc), (lb, rb) = dnums
    if lbd is not None and rbd is not None:
        new = ((_bump(lc, lbd), _bump(rc, rbd)), ((lbd,) + _bump(lb, lbd), (rbd,) + _bump(rb, rbd)))
        return new, 0
    if lbd is not None:
        lhs_tensor = [d for d in range(lhs_nd) if d not in lb and d not in lc]
        out_dim = len(lb) + sum(1 for d in lhs_tensor if d < lbd)
        return ((_bump(lc, lbd), rc), (_bump(lb, lbd), rb)), out_dim
    assert rbd is not None
    rhs_tensor = [d for d in range(rhs_nd) if d not in rb and d not in rc]
    out_dim = lhs_nd - len(lc) + sum(1 for d in rhs_tensor if d < rbd)
    return ((lc, _bump(rc, rbd)), (lb, _bump(rb, rbd))), out_dim


def _dot_general_batch(args: Any, dims: Any, *, dimension_numbers: DotDimensionNumbers,
                       precision: Any, preferred_element_type: Any, out_sharding: Any) -> Any:
    lhs, rhs = args
    lbd, rbd = dims
    new_dnums, out_dim = _dot_batch_dnums((len(get_aval(lhs).shape), len(get_aval(rhs).shape)),
                                          (lbd, rbd), dimension_numbers)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=new_dnums, precision=precision,
                             preferred_element_type=preferred_element_type,
                             out_sharding=out_sharding)
    return out, out_dim


helpers.defbilinear(dot_general_p, _dot_transpose_lhs, _dot_transpose_rhs)
batching_rules[dot_general_p] = _dot_general_batch


def _dot_general_printer(params: dict[str, Any]) -> dict[str, str | None]:
    # As JAX prints it: dimension numbers as lists, no None-valued options.
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    shown: dict[str, str | None] = {
        "dimension_numbers": f"(({list(lc)}, {list(rc)}), ({list(lb)}, {list(rb)}))"}
    for k in ("precision", "preferred_element_type", "out_sharding"):
        if params.get(k) is None:
            shown[k] = None
    return shown


param_printers[dot_general_p] = _dot_general_printer


# --- conv_general_dilated -------------------------------------------------------------------
class ConvDimensionNumbers(NamedTuple):
    """Layouts of a convolution: ``lhs_spec = (batch, feature, spatial...)``,
    ``rhs_spec = (out feature, in feature, spatial...)``, ``out_spec`` like lhs."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers: tuple[str, str, str]
                              ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Specs like ``('NCHW', 'OIHW', 'NCHW')`` as dimension permutations."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    charpairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(charpairs):
        if not dimension_numbers[i].count(a) == dimension_numbers[i].count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {dimension_numbers[i]}.")
        if len(dimension_numbers[i]) != len(set(dimension_numbers[i])):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {dimension_numbers[i]}.")
    if not (set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"}
            == set(out_spec) - {"N", "C"}):
        raise TypeError("convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {dimension_numbers}.")

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)

    return (perm(lhs_spec, charpairs[0]), perm(rhs_spec, charpairs[1]),
            perm(out_spec, charpairs[2]))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """``dimension_numbers`` (None, three strings, or ConvDimensionNumbers) in
    canonical ConvDimensionNumbers form."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(i) for i in s) for s in dimension_numbers))
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, (list, tuple)):
        if len(dimension_numbers) != 3:
            raise TypeError(f"convolution dimension_numbers list/tuple must be length 3, got "
                            f"{len(dimension_numbers)}.")
        if not all(isinstance(e, str) for e in dimension_numbers):
            raise TypeError(f"convolution dimension_numbers elements must be strings, got "
                            f"{tuple(map(type, dimension_numbers))}.")
        for i, e in enumerate(dimension_numbers):
            if len(e) != len(lhs_shape):
                raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to "
                                f"the ndim of lhs and rhs, got {len(e)} for lhs and rhs "
                                f"shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}.")
        return ConvDimensionNumbers(*conv_general_permutations(tuple(dimension_numbers)))
    raise TypeError(f"convolution dimension_numbers must be tuple/list or None, got "
                    f"{type(dimension_numbers)}.")


class PaddingType(enum.Enum):
    VALID = 1
    SAME = 2
    SAME_LOWER = 3


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str | PaddingType
                    ) -> list[tuple[int, int]]:
    """Explicit ``(low, high)`` pads for 'VALID', 'SAME' or 'SAME_LOWER'."""
    if isinstance(padding, str):
        try:
            padding = PaddingType[padding.upper()]
        except KeyError:
            raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                               f"'SAME_LOWER', got {padding}.") from None
    if padding in (PaddingType.SAME, PaddingType.SAME_LOWER):
        pads = []
        for d, w, s in zip(in_shape, window_shape, window_strides):
            out = -(-int(d) // int(s))
            total = builtin_max(0, (out - 1) * int(s) + int(w) - int(d))
            lo = total // 2 if padding == PaddingType.SAME else total - total // 2
            pads.append((lo, total - lo))
        return pads
    if padding == PaddingType.VALID:
        return [(0, 0)] * len(in_shape)
    raise TypeError(f"Unknown padding type: {padding}.")


def builtin_max(a: int, b: int) -> int:
    return a if a > b else b


def _dilate_shape(shape: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def _conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                      strides: Sequence[int], pads: Sequence[tuple[int, int]],
                      batch_group_count: int = 1) -> tuple[int, ...]:
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected "
                        f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [d + lo + hi for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding "
                         f"dimension: got padding={tuple(pads)} for lhs_shape[2:]="
                         f"{tuple(lhs_shape[2:])}")
    space = tuple(0 if p < k else (p - k) // s + 1
                  for p, k, s in zip(padded, rhs_shape[2:], strides))
    batch = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (batch, rhs_shape[0]) + space


conv_general_dilated_p = Primitive("conv_general_dilated")


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, *, window_strides: tuple[int, ...],
                        padding: tuple[tuple[int, int], ...], lhs_dilation: tuple[int, ...],
                        rhs_dilation: tuple[int, ...], dimension_numbers: ConvDimensionNumbers,
                        feature_group_count: int, batch_group_count: int, precision: Any,
                        preferred_element_type: Any, out_sharding: Any) -> ShapedArray:
    name = "conv_general_dilated"
    if not isinstance(dimension_numbers, ConvDimensionNumbers):
        raise TypeError(f"{name} dimension_numbers must be a ConvDimensionNumbers, got "
                        f"{dimension_numbers!r}")
    if len(lhs.shape) != len(rhs.shape):
        raise ValueError(f"{name} lhs and rhs must have the same number of dimensions, but "
                         f"got {lhs.shape} and {rhs.shape}.")
    nd = len(lhs.shape)
    for spec_name, spec in zip(("lhs_spec", "rhs_spec", "out_spec"), dimension_numbers):
        if sorted(spec) != list(range(nd)):
            raise ValueError(f"{name} dimension_numbers.{spec_name} {spec} must be a "
                             f"permutation of range({nd})")
    for a in (lhs, rhs):
        if a.dtype not in common.ANY:
            common.check_dtype(name, a, common.ANY)
    common.check_same_dtypes(name, lhs, rhs)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if feature_group_count <= 0:
        raise ValueError(f"{name} feature_group_count must be a positive integer, got "
                         f"{feature_group_count}.")
    lhs_features = lhs.shape[lhs_spec[1]]
    quot, rem = divmod(lhs_features, feature_group_count)
    if rem:
        raise ValueError(f"{name} feature_group_count must divide lhs feature dimension size, "
                         f"but {feature_group_count} does not divide {lhs_features}.")
    if quot != rhs.shape[rhs_spec[1]]:
        raise ValueError(f"{name} lhs feature dimension size divided by feature_group_count "
                         f"must equal the rhs input feature dimension size, but "
                         f"{lhs_features} // {feature_group_count} != {rhs.shape[rhs_spec[1]]}.")
    if rhs.shape[rhs_spec[0]] % feature_group_count:
        raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                         f"feature_group_count, but {rhs.shape[rhs_spec[0]]} is not a multiple "
                         f"of {feature_group_count}.")
    if batch_group_count <= 0:
        raise ValueError(f"{name} batch_group_count must be a positive integer, got "
                         f"{batch_group_count}.")
    lhs_batch = lhs.shape[lhs_spec[0]]
    if batch_group_count > 1 and lhs_batch % batch_group_count:
        raise ValueError(f"{name} batch_group_count must divide lhs batch dimension size, but "
                         f"{batch_group_count} does not divide {lhs_batch}.")
    if rhs.shape[rhs_spec[0]] % batch_group_count:
        raise ValueError(f"{name} rhs output feature dimension size must be a multiple of "
                         f"batch_group_count, but {rhs.shape[rhs_spec[0]]} is not a multiple "
                         f"of {batch_group_count}.")
    if batch_group_count > 1 and feature_group_count > 1:
        raise ValueError(f"At most one of batch_group_count and feature_group_count may be > "
                         f"1, got batch_group_count={batch_group_count} and "
                         f"feature_group_count={feature_group_count}")
    n_spatial = nd - 2
    for pname, p in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                     ("rhs_dilation", rhs_dilation), ("padding", padding)):
        if len(p) != n_spatial:
            raise ValueError(f"{name} {pname} must have one entry per spatial dimension "
                             f"({n_spatial}), got {p}")
    for pname, p in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                     ("rhs_dilation", rhs_dilation)):
        if any(v <= 0 for v in p):
            raise ValueError(f"{name} {pname} must be positive, got {p}")
    lhs_t = _dilate_shape([lhs.shape[i] for i in lhs_spec], (1, 1) + tuple(lhs_dilation))
    rhs_t = _dilate_shape([rhs.shape[i] for i in rhs_spec], (1, 1) + tuple(rhs_dilation))
    out_t = _conv_shape_tuple(lhs_t, rhs_t, window_strides, padding, batch_group_count)
    inv = np.argsort(out_spec)
    shape = tuple(out_t[i] for i in inv)
    dtype = lhs.dtype if preferred_element_type is None else np.dtype(preferred_element_type)
    return ShapedArray(shape, dtype, lhs.weak_type and rhs.weak_type)


def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                         padding: str | Sequence[tuple[int, int]],
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None, out_sharding: Any = None) -> Array:
    """General n-d convolution with strides, padding, lhs (transposed-conv) and
    rhs (atrous) dilation, and feature/batch grouping."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    dnums = conv_dimension_numbers(ls, rs, dimension_numbers)
    n = len(ls) - 2
    if lhs_dilation is None:
        lhs_dilation = (1,) * n
    elif isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise ValueError("String padding is not implemented for transposed convolution using "
                         "this op. Please either exactly specify the required padding or use "
                         "conv_transpose.")
    if rhs_dilation is None:
        rhs_dilation = (1,) * n
    if isinstance(padding, str):
        lhs_perm, rhs_perm, _ = dnums
        rhs_sp = [rs[i] for i in rhs_perm][2:]
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(rhs_sp, rhs_dilation)]
        pads = padtype_to_pads([ls[i] for i in lhs_perm][2:], eff, window_strides, padding)
    else:
        try:
            pads = [(operator.index(lo), operator.index(hi)) for lo, hi in padding]
        except (ValueError, TypeError):
            raise ValueError("padding argument to conv_general_dilated should be a string or "
                             f"a sequence of (low, high) pairs, got {padding}") from None
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=common.as_int_tuple("conv", "window_strides", window_strides),
        padding=tuple(pads), lhs_dilation=common.as_int_tuple("conv", "lhs_dilation", lhs_dilation),
        rhs_dilation=common.as_int_tuple("conv", "rhs_dilation", rhs_dilation),
        dimension_numbers=dnums, feature_group_count=operator.index(feature_group_count),
        batch_group_count=operator.index(batch_group_count),
        precision=canonicalize_precision(precision),
        preferred_element_type=_canonical_preferred(preferred_element_type),
        out_sharding=out_sharding)


def conv(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int], padding: str,
         precision: Any = None, preferred_element_type: Any = None) -> Array:
    """NCHW/OIHW convolution without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: ArrayLike, rhs: ArrayLike, window_strides: Sequence[int],
                              padding: str | Sequence[tuple[int, int]],
                              lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Array:
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """Before/after padding of one dim of a transposed conv, given the padding
    ('SAME', 'VALID' or explicit pair) of the forward conv."""
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif padding == "VALID":
        pad_len = k + s - 2 + builtin_max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose(lhs: ArrayLike, rhs: ArrayLike, strides: Sequence[int],
                   padding: str | Sequence[tuple[int, int]],
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Array:
    """Transposed ("deconvolution") convolution, as a conv with lhs dilation
    (output padding follows keras' Conv2DTranspose)."""
    ls, rs = get_aval(lhs).shape, get_aval(rhs).shape
    nd = len(ls)
    if dimension_numbers is None:
        dimension_numbers = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                             4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}.get(nd)
        if dimension_numbers is None:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    k_sdims = [rs[i] for i in dn.rhs_spec][2:]
    if rhs_dilation is None:
        rhs_dilation = (1,) * (nd - 2)
    pads: Any
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [0 if k == 0 else 1 + r * (k - 1) for k, r in zip(k_sdims, rhs_dilation)]
        per_dim = [padding] * len(strides) if isinstance(padding, str) else list(padding)
        pads = [_conv_transpose_padding(k, s, tuple(p) if not isinstance(p, str) else p)
                for k, s, p in zip(eff, strides, per_dim)]
    else:
        pads = padding
    if transpose_kernel:
        rhs = st.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = st.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_spec_transpose(spec: tuple[int, ...]) -> tuple[int, ...]:
    return (spec[1], spec[0]) + tuple(spec[2:])


def _reshape_axis_into(src: int, dst: int, x: Any) -> Any:
    """Merges axis ``src`` of ``x`` into axis ``dst`` (``src`` becomes the major part)."""
    shape = get_aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new_shape = [d for i, d in enumerate(shape) if i != src]
    new_shape[dst] *= shape[src]
    return st.reshape(x, tuple(new_shape), tuple(perm))


def _reshape_axis_out_of(src: int, size1: int, x: Any) -> Any:
    """Splits axis ``src`` of ``x`` into ``(size1, rest)``."""
    shape = list(get_aval(x).shape)
    size2, ragged = divmod(shape[src], size1)
    assert not ragged
    shape[src:src + 1] = [size1, size2]
    return st.reshape(x, tuple(shape))


def _conv_vjp_lhs_padding(in_shape: Sequence[int], window: Sequence[int],
                          strides: Sequence[int], out_shape: Sequence[int],
                          padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                          rhs_dilation: Sequence[int]) -> list[tuple[int, int]]:
    lhs_d = _dilate_shape(in_shape, lhs_dilation)
    rhs_d = _dilate_shape(window, rhs_dilation)
    out_d = _dilate_shape(out_shape, strides)
    before = [r - lo - 1 for r, (lo, _) in zip(rhs_d, padding)]
    after = [lh + r - 1 - o - b for lh, r, o, b in zip(lhs_d, rhs_d, out_d, before)]
    return list(zip(before, after))


def _conv_vjp_rhs_padding(in_shape: Sequence[int], window: Sequence[int],
                          strides: Sequence[int], out_shape: Sequence[int],
                          padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int],
                          rhs_dilation: Sequence[int]) -> list[tuple[int, int]]:
    if not in_shape:
        return []
    lhs_d = _dilate_shape(in_shape, lhs_dilation)
    rhs_d = _dilate_shape(window, rhs_dilation)
    out_d = _dilate_shape(out_shape, strides)
    lows = [lo for lo, _ in padding]
    from_lhs = [o - lh for o, lh in zip(out_d, lhs_d)]
    from_rhs = [r - lo - 1 for r, lo in zip(rhs_d, lows)]
    return list(zip(lows, [a + b for a, b in zip(from_lhs, from_rhs)]))


def _conv_transpose_lhs(ct: Any, lhs: Any, rhs: Any, *, window_strides: tuple[int, ...],
                        padding: tuple[tuple[int, int], ...], lhs_dilation: tuple[int, ...],
                        rhs_dilation: tuple[int, ...], dimension_numbers: ConvDimensionNumbers,
                        feature_group_count: int, batch_group_count: int, precision: Any,
                        preferred_element_type: Any, out_sharding: Any) -> Any:
    lhs_aval = lhs.aval
    rhs_shape = get_aval(rhs).shape
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_sdims, rhs_sdims, out_sdims = lhs_spec[2:], rhs_spec[2:], out_spec[2:]
    t_rhs_spec = _conv_spec_transpose(rhs_spec)
    if feature_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], feature_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
    elif batch_group_count > 1:
        rhs = _reshape_axis_out_of(rhs_spec[0], batch_group_count, rhs)
        rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[1], rhs)
        feature_group_count = batch_group_count
    trans_dnums = ConvDimensionNumbers(out_spec, t_rhs_spec, lhs_spec)
    ct_shape = get_aval(ct).shape
    pads = _conv_vjp_lhs_padding([lhs_aval.shape[i] for i in lhs_sdims],
                                 [rhs_shape[i] for i in rhs_sdims], window_strides,
                                 [ct_shape[i] for i in out_sdims], padding, lhs_dilation,
                                 rhs_dilation)
    revd = st.rev(rhs, tuple(rhs_sdims))
    if get_aval(revd).dtype != get_aval(ct).dtype:
        revd = convert.convert_element_type(revd, get_aval(ct).dtype)
    out = conv_general_dilated(ct, revd, window_strides=lhs_dilation, padding=pads,
                               lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                               dimension_numbers=trans_dnums,
                               feature_group_count=feature_group_count, batch_group_count=1,
                               precision=precision,
                               preferred_element_type=preferred_element_type)
    if get_aval(out).dtype != lhs_aval.dtype:
        out = convert.convert_element_type(out, lhs_aval.dtype)
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_transpose_rhs(ct: Any, lhs: Any, rhs: Any, *, window_strides: tuple[int, ...],
                        padding: tuple[tuple[int, int], ...], lhs_dilation: tuple[int, ...],
                        rhs_dilation: tuple[int, ...], dimension_numbers: ConvDimensionNumbers,
                        feature_group_count: int, batch_group_count: int, precision: Any,
                        preferred_element_type: Any, out_sharding: Any) -> Any:
    rhs_aval = rhs.aval
    if get_aval(ct).size == 0:
        return helpers.Zero(rhs_aval)
    lhs_shape = get_aval(lhs).shape
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_sdims, rhs_sdims, out_sdims = lhs_spec[2:], rhs_spec[2:], out_spec[2:]
    lhs_t, rhs_t, out_t = (_conv_spec_transpose(s) for s in dimension_numbers)
    if batch_group_count > 1:
        feature_group_count, batch_group_count = batch_group_count, 1
    elif feature_group_count > 1:
        batch_group_count, feature_group_count = feature_group_count, 1
    trans_dnums = ConvDimensionNumbers(lhs_t, out_t, rhs_t)
    ct_shape = get_aval(ct).shape
    pads = _conv_vjp_rhs_padding([lhs_shape[i] for i in lhs_sdims],
                                 [rhs_aval.shape[i] for i in rhs_sdims], window_strides,
                                 [ct_shape[i] for i in out_sdims], padding, lhs_dilation,
                                 rhs_dilation)
    if get_aval(lhs).dtype != get_aval(ct).dtype:
        lhs = convert.convert_element_type(lhs, get_aval(ct).dtype)
    out = conv_general_dilated(lhs, ct, window_strides=rhs_dilation, padding=pads,
                               lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
                               dimension_numbers=trans_dnums,
                               feature_group_count=feature_group_count,
                               batch_group_count=batch_group_count, precision=precision,
                               preferred_element_type=preferred_element_type)
    if get_aval(out).dtype != rhs_aval.dtype:
        out = convert.convert_element_type(out, rhs_aval.dtype)
    return out


def _conv_batch(args: Any, dims: Any, **params: Any) -> Any:
    lhs, rhs = args
    lbd, rbd = dims
    dn: ConvDimensionNumbers = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    lhs_spec, rhs_spec, out_spec = dn
    rest = {k: v for k, v in params.items()
            if k not in ("feature_group_count", "batch_group_count")}

    def bind(lhs_: Any, rhs_: Any, fgc_: int, bgc_: int) -> Any:
        return conv_general_dilated_p.bind(lhs_, rhs_, feature_group_count=fgc_,
                                           batch_group_count=bgc_, **rest)

    if lbd is not None and rbd is not None:
        size = get_aval(lhs).shape[lbd]
        if bgc > 1:
            new_lhs = _reshape_axis_into(lbd, lhs_spec[0], lhs)
            bgc *= size
        else:
            new_lhs = _reshape_axis_into(lbd, lhs_spec[1], lhs)
            fgc *= size
        new_rhs = _reshape_axis_into(rbd, rhs_spec[0], rhs)
        out = bind(new_lhs, new_rhs, fgc, bgc)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if lbd is not None:
        size = get_aval(lhs).shape[lbd]
        if bgc == 1:
            new_lhs = _reshape_axis_into(lbd, lhs_spec[0], lhs)
            out = bind(new_lhs, rhs, fgc, bgc)
            return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
        new_lhs = _reshape_axis_out_of(lhs_spec[0] + int(lbd <= lhs_spec[0]), bgc, lhs)
        new_lhs = _reshape_axis_into(lbd + int(lhs_spec[0] < lbd), lhs_spec[0] + 1, new_lhs)
        new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], new_lhs)
        out = bind(new_lhs, rhs, fgc, bgc)
        return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    assert rbd is not None
    size = get_aval(rhs).shape[rbd]
    if fgc == 1 and bgc == 1:
        new_rhs = _reshape_axis_into(rbd, rhs_spec[0], rhs)
        out = bind(lhs, new_rhs, fgc, bgc)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    groups = fgc if fgc > 1 else bgc
    new_rhs = _reshape_axis_out_of(rhs_spec[0] + int(rbd <= rhs_spec[0]), groups, rhs)
    new_rhs = _reshape_axis_into(rbd + int(rhs_spec[0] < rbd), rhs_spec[0] + 1, new_rhs)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], new_rhs)
    out = bind(lhs, new_rhs, fgc, bgc)
    out = _reshape_axis_out_of(out_spec[1], groups, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, size, out)
    out = _reshape_axis_into(out_spec[1], out_spec[1] + 1, out)
    return out, out_spec[1]


helpers.defbilinear(conv_general_dilated_p, _conv_transpose_lhs, _conv_transpose_rhs)
batching_rules[conv_general_dilated_p] = _conv_batch

__all__ = ["Precision", "canonicalize_precision", "dot_general_p", "dot_general", "dot",
           "batch_matmul", "ConvDimensionNumbers", "conv_dimension_numbers",
           "conv_general_permutations", "padtype_to_pads", "PaddingType",
           "conv_general_dilated_p", "conv_general_dilated", "conv",
           "conv_with_general_padding", "conv_transpose"]
