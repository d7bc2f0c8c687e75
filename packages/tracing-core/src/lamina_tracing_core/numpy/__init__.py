"""``lamina_tracing_core.numpy`` (re-exported as ``lamina.numpy``): the NumPy
API on lamina arrays, as ``jax.numpy`` offers it, and the one place NumPy
semantics live: importing it installs the operators and methods of tracers
and Arrays (``numpy.array_methods``).

Functions take Python scalars, (nested) lists, numpy arrays, lamina Arrays
and tracers; they promote dtypes with JAX's weak-type rules (Python scalars
take the other operand's type: ``ones(3, float16) + 1.0`` is float16) and
broadcast as NumPy. Outside a transformation they run eagerly on the default
device and return ``lamina`` Arrays; under ``jit``/``grad``/``vmap`` they trace.

Arrays are immutable: instead of ``x[i] = v`` write ``x = x.at[i].set(v)``;
NumPy arguments that would write in place (``out=``) or need another memory
order (``order='F'``) raise an ``UnsupportedArgumentError``.
"""

from __future__ import annotations

import builtins as _builtins
import math as _math
import importlib as _importlib
import typing as _typing
from typing import Any

import numpy as _np

from lamina_tracing_core.numpy import array_methods as _array_methods
from lamina_tracing_core.numpy import key_arrays as _key_arrays
from lamina_tracing_core.numpy._util import UnsupportedArgumentError
from lamina_tracing_core.numpy.creation import (
    arange,
    array,
    asarray,
    astype,
    copy,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    identity,
    indices,
    linspace,
    logspace,
    meshgrid,
    ones,
    ones_like,
    tri,
    tril,
    tril_indices,
    tril_indices_from,
    triu,
    triu_indices,
    triu_indices_from,
    zeros,
    zeros_like,
)
from lamina_tracing_core.numpy.dtypes import (
    bfloat16,
    bool_,
    can_cast,
    cdouble,
    character,
    complex64,
    complex128,
    complex_,
    complexfloating,
    csingle,
    double,
    dtype,
    finfo,
    flexible,
    float16,
    float32,
    float64,
    float_,
    floating,
    generic,
    half,
    iinfo,
    inexact,
    int8,
    int16,
    int32,
    int64,
    int_,
    integer,
    isdtype,
    issubdtype,
    ndarray,
    number,
    object_,
    promote_types,
    result_type,
    signedinteger,
    single,
    uint,
    uint8,
    uint16,
    uint32,
    uint64,
    unsignedinteger,
)
from lamina_tracing_core.numpy.dtypes import bool as bool  # noqa: PLC0414 - re-export NumPy 2's name
from lamina_tracing_core.numpy.dtypes import (
    float4_e2m1fn,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    int1,
    int2,
    int4,
    uint1,
    uint2,
    uint4,
)
from lamina_tracing_core.numpy.einsum import einsum, einsum_path
# eager: a function named as its module (loading the module later would set the
# package attribute to the module)
from lamina_tracing_core.numpy.vectorize import apply_along_axis, apply_over_axes, piecewise, vectorize
from lamina_tracing_core.numpy.indexing import (
    argwhere,
    choose,
    compress,
    diag_indices,
    extract,
    flatnonzero,
    ix_,
    nonzero,
    ravel_multi_index,
    select,
    take,
    take_along_axis,
    unravel_index,
    where,
)
from lamina_tracing_core.numpy.products import (
    cross,
    diag,
    diagflat,
    diagonal,
    dot,
    inner,
    kron,
    matmul,
    outer,
    tensordot,
    vdot,
    vecdot,
)
from lamina_tracing_core.numpy.reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    average,
    corrcoef,
    count_nonzero,
    cov,
    cumprod,
    cumsum,
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    median,
    min,
    nanargmax,
    nanargmin,
    nancumprod,
    nancumsum,
    nanmax,
    nanmean,
    nanmedian,
    nanmin,
    nanpercentile,
    nanprod,
    nanquantile,
    nanstd,
    nansum,
    nanvar,
    percentile,
    prod,
    ptp,
    quantile,
    std,
    sum,
    trace,
    var,
)
from lamina_tracing_core.numpy.shape_ops import (
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_arrays,
    broadcast_shapes,
    broadcast_to,
    column_stack,
    concat,
    concatenate,
    dsplit,
    dstack,
    expand_dims,
    flip,
    fliplr,
    flipud,
    hsplit,
    hstack,
    matrix_transpose,
    moveaxis,
    pad,
    permute_dims,
    ravel,
    repeat,
    reshape,
    roll,
    rollaxis,
    rot90,
    row_stack,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
    unstack,
    vsplit,
    vstack,
)
from lamina_tracing_core.numpy.sorting import (
    argsort,
    bincount,
    digitize,
    isin,
    lexsort,
    searchsorted,
    sort,
    unique,
)
from lamina_tracing_core.numpy.ufuncs import (
    abs,
    absolute,
    acos,
    acosh,
    add,
    allclose,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    array_equal,
    array_equiv,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    cbrt,
    ceil,
    clip,
    conj,
    conjugate,
    copysign,
    cos,
    cosh,
    deg2rad,
    degrees,
    divide,
    divmod,
    equal,
    exp,
    exp2,
    expm1,
    fabs,
    float_power,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    greater,
    greater_equal,
    heaviside,
    hypot,
    imag,
    invert,
    iscomplex,
    iscomplexobj,
    isclose,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    isreal,
    ldexp,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    modf,
    multiply,
    nan_to_num,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    power,
    rad2deg,
    radians,
    real,
    reciprocal,
    remainder,
    right_shift,
    rint,
    round,
    sign,
    signbit,
    sin,
    sinc,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
)
# The binary ufuncs as ``ufunc`` objects (with .outer/.reduce/.accumulate/.at/.reduceat),
# replacing the plain functions imported above, as jax.numpy has them.
from lamina_tracing_core.numpy.ufunc_objects import (  # noqa: F811
    add,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    frompyfunc,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    subtract,
    ufunc,
)

if _typing.TYPE_CHECKING:  # what the lazy names below are, for type checkers
    from lamina_tracing_core.numpy import linalg as linalg
    from lamina_tracing_core.numpy import fft as fft
    from lamina_tracing_core.numpy.calculus import diff, ediff1d, gradient, interp, trapezoid
    from lamina_tracing_core.numpy.poly_fit import polyfit, roots
    from lamina_tracing_core.numpy.polynomial import (
        poly, polyadd, polyder, polydiv, polyint, polymul, polysub, polyval, vander,
    )
    from lamina_tracing_core.numpy.signal import convolve, correlate
    from lamina_tracing_core.numpy.array_edits import (
        block, delete, diag_indices_from, fill_diagonal, insert, put, put_along_axis, resize,
    )
    from lamina_tracing_core.numpy.extras import (
        ComplexWarning, argpartition, bitwise_count, frombuffer, fromstring, iterable, load,
        mask_indices, matvec, packbits, partition, place, save, savez, sort_complex, spacing,
        trim_zeros, unpackbits, unwrap, vecmat,
    )
    from lamina_tracing_core.numpy.histograms import (
        histogram, histogram2d, histogram_bin_edges, histogramdd,
    )
    from lamina_tracing_core.numpy.index_tricks import c_, index_exp, mgrid, ogrid, r_, s_
    from lamina_tracing_core.numpy.windows import (
        bartlett, blackman, frexp, fromfunction, gcd, geomspace, hamming, hanning, i0, kaiser,
        lcm,
    )
    from lamina_tracing_core.numpy.printing import (
        array_repr, array_str, get_printoptions, printoptions, set_printoptions,
    )
    from lamina_tracing_core.numpy.setops import (
        intersect1d, setdiff1d, setxor1d, union1d, unique_all, unique_counts, unique_inverse,
        unique_values,
    )

#: public names whose modules load on first use (PEP 562): name -> submodule.
#: A program that uses none of them (a jitted MLP) starts without these modules;
#: each submodule's own name maps to it (``linalg``, ``fft``, ``extras``, ...).
_LAZY: dict[str, str] = {
    **{module: module for module in (
        "linalg", "fft", "calculus", "poly_fit", "polynomial", "signal", "array_edits",
        "extras", "histograms", "index_tricks", "windows", "printing", "setops")},
    **dict.fromkeys(("diff", "ediff1d", "gradient", "interp", "trapezoid"), "calculus"),
    **dict.fromkeys(("polyfit", "roots"), "poly_fit"),
    **dict.fromkeys((
        "poly", "polyadd", "polyder", "polydiv", "polyint", "polymul", "polysub",
        "polyval", "vander",
    ), "polynomial"),
    **dict.fromkeys(("convolve", "correlate"), "signal"),
    **dict.fromkeys((
        "block", "delete", "diag_indices_from", "fill_diagonal", "insert", "put",
        "put_along_axis", "resize",
    ), "array_edits"),
    **dict.fromkeys((
        "ComplexWarning", "argpartition", "bitwise_count", "frombuffer", "fromstring",
        "iterable", "load", "mask_indices", "matvec", "packbits", "partition", "place",
        "save", "savez", "sort_complex", "spacing", "trim_zeros", "unpackbits", "unwrap",
        "vecmat",
    ), "extras"),
    **dict.fromkeys((
        "histogram", "histogram2d", "histogram_bin_edges", "histogramdd",
    ), "histograms"),
    **dict.fromkeys(("c_", "index_exp", "mgrid", "ogrid", "r_", "s_"), "index_tricks"),
    **dict.fromkeys((
        "bartlett", "blackman", "frexp", "fromfunction", "gcd", "geomspace", "hamming",
        "hanning", "i0", "kaiser", "lcm",
    ), "windows"),
    **dict.fromkeys((
        "array_repr", "array_str", "get_printoptions", "printoptions", "set_printoptions",
    ), "printing"),
    **dict.fromkeys((
        "intersect1d", "setdiff1d", "setxor1d", "union1d", "unique_all", "unique_counts",
        "unique_inverse", "unique_values",
    ), "setops"),
}

newaxis = None
pi = _math.pi
e = _math.e
euler_gamma = 0.5772156649015329
inf = float("inf")
nan = float("nan")


def shape(a: Any) -> tuple[int, ...]:
    """The shape of ``a`` (any array-like)."""
    if hasattr(a, "aval") or isinstance(a, _key_arrays.PRNGKeyArray):
        return tuple(a.shape)
    return tuple(_np.shape(a))


def ndim(a: Any) -> int:
    """The number of dimensions of ``a``."""
    return len(shape(a))


def size(a: Any, axis: int | None = None) -> int:
    """The number of elements of ``a`` (along ``axis`` if given)."""
    dims = shape(a)
    if axis is None:
        return _math.prod(dims)
    return dims[axis]


def isscalar(element: Any) -> _builtins.bool:
    """True for Python/numpy scalars and 0-d arrays."""
    if isinstance(element, (int, float, complex, _np.generic)) and not isinstance(element, str):
        return True
    return hasattr(element, "aval") and ndim(element) == 0


def isrealobj(x: Any) -> _builtins.bool:
    """True if ``x`` does not have a complex dtype."""
    return not iscomplexobj(x)


_array_methods.install_methods()

__all__ = [
    'UnsupportedArgumentError', 'abs', 'absolute', 'acos', 'acosh', 'add', 'all', 'allclose',
    'amax', 'amin', 'angle', 'any', 'append', 'arange', 'arccos', 'arccosh', 'arcsin',
    'arcsinh', 'arctan', 'arctan2', 'arctanh', 'argmax', 'argmin', 'argsort', 'argwhere',
    'around', 'array', 'array_equal', 'array_equiv', 'array_split', 'asarray', 'asin',
    'asinh', 'astype', 'atan', 'atan2', 'atanh', 'atleast_1d', 'atleast_2d', 'atleast_3d',
    'average', 'bfloat16', 'bincount', 'bitwise_and', 'bitwise_invert', 'bitwise_left_shift',
    'bitwise_not', 'bitwise_or', 'bitwise_right_shift', 'bitwise_xor', 'bool', 'bool_',
    'broadcast_arrays', 'broadcast_shapes', 'broadcast_to', 'can_cast', 'cbrt', 'cdouble',
    'ceil', 'character', 'choose', 'clip', 'column_stack', 'complex128', 'complex64',
    'complex_', 'complexfloating', 'compress', 'concat', 'concatenate', 'conj', 'conjugate',
    'convolve', 'copy', 'copysign', 'corrcoef', 'correlate', 'cos', 'cosh', 'count_nonzero',
    'cov', 'cross', 'csingle', 'cumprod', 'cumsum', 'cumulative_prod', 'cumulative_sum',
    'deg2rad', 'degrees', 'diag', 'diag_indices', 'diagflat', 'diagonal', 'diff', 'digitize',
    'divide', 'divmod', 'dot', 'double', 'dsplit', 'dstack', 'dtype', 'e', 'ediff1d',
    'einsum', 'einsum_path', 'empty', 'empty_like', 'equal', 'euler_gamma', 'exp', 'exp2',
    'expand_dims', 'expm1', 'extract', 'eye', 'fabs', 'fft', 'finfo', 'flatnonzero',
    'flexible', 'flip', 'fliplr', 'flipud', 'float16', 'float32', 'float64', 'float_',
    'float_power', 'floating', 'floor', 'floor_divide', 'fmax', 'fmin', 'fmod', 'full',
    'full_like', 'generic', 'gradient', 'greater', 'greater_equal', 'half', 'heaviside',
    'hsplit', 'hstack', 'hypot', 'identity', 'iinfo', 'imag', 'indices', 'inexact', 'inf',
    'inner', 'int16', 'int32', 'int64', 'int8', 'int_', 'integer', 'interp', 'invert',
    'isclose', 'iscomplex', 'iscomplexobj', 'isdtype', 'isfinite', 'isin', 'isinf', 'isnan',
    'isneginf', 'isposinf', 'isreal', 'isrealobj', 'isscalar', 'issubdtype', 'ix_', 'kron',
    'ldexp', 'left_shift', 'less', 'less_equal', 'lexsort', 'linalg', 'linspace', 'log',
    'log10', 'log1p', 'log2', 'logaddexp', 'logaddexp2', 'logical_and', 'logical_not',
    'logical_or', 'logical_xor', 'logspace', 'matmul', 'matrix_transpose', 'max', 'maximum',
    'mean', 'median', 'meshgrid', 'min', 'minimum', 'mod', 'modf', 'moveaxis', 'multiply',
    'nan', 'nan_to_num', 'nanargmax', 'nanargmin', 'nancumprod', 'nancumsum', 'nanmax',
    'nanmean', 'nanmedian', 'nanmin', 'nanprod', 'nanstd', 'nansum', 'nanvar', 'ndarray',
    'ndim', 'negative', 'newaxis', 'nextafter', 'nonzero', 'not_equal', 'number', 'object_',
    'ones', 'ones_like', 'outer', 'pad', 'percentile', 'permute_dims', 'pi', 'polyval',
    'positive', 'pow', 'power', 'prod', 'promote_types', 'ptp', 'quantile', 'rad2deg',
    'radians', 'ravel', 'ravel_multi_index', 'real', 'reciprocal', 'remainder', 'repeat',
    'reshape', 'result_type', 'right_shift', 'rint', 'roll', 'rollaxis', 'rot90', 'round',
    'row_stack', 'searchsorted', 'select', 'shape', 'sign', 'signbit', 'signedinteger', 'sin',
    'sinc', 'single', 'sinh', 'size', 'sort', 'split', 'sqrt', 'square', 'squeeze', 'stack',
    'std', 'subtract', 'sum', 'swapaxes', 'take', 'take_along_axis', 'tan', 'tanh',
    'tensordot', 'tile', 'trace', 'transpose', 'trapezoid', 'tri', 'tril', 'tril_indices',
    'tril_indices_from', 'triu', 'triu_indices', 'triu_indices_from', 'true_divide', 'trunc',
    'uint', 'uint16', 'uint32', 'uint64', 'uint8', 'unique', 'unravel_index',
    'unsignedinteger', 'unstack', 'vander', 'var', 'vdot', 'vecdot', 'vsplit', 'vstack',
    'where', 'zeros', 'zeros_like',
]

__all__ += [
    'load', 'save', 'savez', 'roots', 'nanpercentile', 'nanquantile', 'frombuffer', 'fromstring', 'packbits', 'spacing',
    'unpackbits',
    'ComplexWarning', 'argpartition', 'bitwise_count', 'iterable', 'mask_indices', 'matvec',
    'partition', 'place', 'sort_complex', 'trim_zeros', 'unwrap', 'vecmat',
    'array_repr', 'array_str', 'get_printoptions', 'printoptions', 'set_printoptions',
    'float4_e2m1fn', 'float6_e2m3fn', 'float6_e3m2fn', 'float8_e3m4', 'float8_e4m3',
    'float8_e4m3b11fnuz', 'float8_e4m3fn', 'float8_e4m3fnuz', 'float8_e5m2', 'float8_e5m2fnuz',
    'float8_e8m0fnu', 'int1', 'int2', 'int4', 'uint1', 'uint2', 'uint4',
    'poly', 'polyadd', 'polyder', 'polydiv', 'polyfit', 'polyint', 'polymul', 'polysub',
    'histogram', 'histogram2d', 'histogram_bin_edges', 'histogramdd',
    'apply_along_axis', 'apply_over_axes', 'piecewise', 'vectorize',
    'block', 'delete', 'diag_indices_from', 'fill_diagonal', 'insert', 'put', 'put_along_axis',
    'resize',
    'bartlett', 'blackman', 'frexp', 'fromfunction', 'gcd', 'geomspace', 'hamming', 'hanning',
    'i0', 'kaiser', 'lcm',
    'c_', 'frompyfunc', 'index_exp', 'intersect1d', 'mgrid', 'ogrid', 'r_', 's_', 'setdiff1d',
    'setxor1d', 'ufunc', 'union1d', 'unique_all', 'unique_counts', 'unique_inverse',
    'unique_values',
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = _importlib.import_module(f"{__name__}.{module}")
    value = loaded if module == name else getattr(loaded, name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
