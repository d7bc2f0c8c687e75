"""lamina.numpy agrees with JAX 0.10.2 on the dtype and weak type of results,
and on which inputs raise.

Each case is a call written as a key (``u|sin|py_float`` is ``sin(0.5)``,
``b|add|a0_int8|py_int`` is ``add(int8 array, 1)``, ``r|sum|a1_bool|axis0``
is ``sum(bool array, axis=0)``; the inputs are built by ``_inputs``) and
the result JAX 0.10.2 gave for the same call in the peer environment:
``shape:dtype:W`` for a weakly typed array, ``shape:dtype:s`` for a strongly
typed one, ``E:Class`` for the built-in exception class raised (lamina's
exceptions may subclass it). ``_CASES`` were recorded with
``jax_enable_x64`` off, ``_X64_CASES`` with it on.

Kinds of key: ``u``/``b``/``p`` call a function on one or two inputs, ``j``/
``jb`` the same under ``jit`` (eager and jitted calls must both agree with
JAX), ``r`` a reduction and ``la`` a ``linalg`` function (options after the
input: ``axis0``, ``keepdims``, ``dtype=...``, ``ord=...``; ``2d_`` stacks
two copies of a 1-d input), ``s`` a call of ``_SPECIAL`` (edge cases of
``sort_complex``, ``unwrap``, ``interp``, ``sign``, ``heaviside``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import lamina
import lamina.numpy as jnp
from lamina_tracing_core import dtypes

_DTYPES = ("bool", "int8", "int32", "uint8", "float16", "bfloat16", "float32", "complex64")


@functools.cache
def _inputs(x64: bool) -> dict[str, Any]:
    """The arguments the keys name: Python and NumPy scalars, NumPy arrays,
    weakly typed lamina scalars, and 0-d (``a0_``) and 1-d (``a1_``) arrays."""
    del x64  # the key of the cache: values made with x64 on are made anew
    values: dict[str, Any] = {
        "py_bool": True, "py_int": 1, "py_float": 0.5, "py_complex": 0.5 + 0.5j,
        "np_bool": np.bool_(True), "np_int8": np.int8(1), "np_int32": np.int32(1),
        "np_uint8": np.uint8(1), "np_f16": np.float16(0.5), "np_f32": np.float32(0.5),
        "np_f64": np.float64(0.5), "np_i64": np.int64(1), "np_c64": np.complex64(0.5),
        "nparr_f64": np.array([0.5, 0.25]), "nparr_i64": np.array([1, 2]),
        "weak_f": jnp.asarray(0.5), "weak_i": jnp.asarray(1), "weak_c": jnp.asarray(0.5 + 0.5j),
    }
    for name in _DTYPES:
        dt = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
        one = np.array(0.5 if dt.kind in "fcV" else 1).astype(dt)
        values["a0_" + name] = jnp.asarray(one)
        values["a1_" + name] = jnp.asarray(np.array([one, one]).astype(dt))
    return values


def _function(name: str) -> Callable[..., Any]:
    if name == "norm":
        return jnp.linalg.norm  # type: ignore[no-any-return]
    return getattr(jnp, name)  # type: ignore[no-any-return]


def _reduction_options(options: list[str]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for option in options:
        if option == "axis0":
            kwargs["axis"] = 0
        elif option == "keepdims":
            kwargs["keepdims"] = True
        elif option.startswith("dtype="):
            kwargs["dtype"] = option.removeprefix("dtype=")
        elif option.startswith("ord="):
            text = option.removeprefix("ord=")
            kwargs["ord"] = {"inf": np.inf, "fro": "fro", "nuc": "nuc"}.get(text) or int(text)
    return kwargs


def _call(key: str, values: dict[str, Any]) -> Any:
    """Runs the call ``key`` names."""
    kind, name, *rest = key.split("|")
    if kind in ("u", "b", "p"):
        return _function(name)(*(values[r] for r in rest))
    if kind in ("j", "jb"):
        return lamina.jit(_function(name))(*(values[r] for r in rest))
    if kind in ("r", "la"):
        if rest[0].startswith("2d_"):
            row = values[rest[0].removeprefix("2d_")]
            arg = jnp.stack([row, row])
        else:
            arg = values[rest[0].removeprefix("1d_")]
        fun = getattr(jnp.linalg, name) if kind == "la" else _function(name)
        return fun(arg, **_reduction_options(rest[1:]))
    if kind == "s":
        return _SPECIAL[name](values[rest[0]] if rest else None)
    raise AssertionError(f"unknown case kind {kind!r}")


_SPECIAL: dict[str, Callable[[Any], Any]] = {
    "sort_complex": lambda v: jnp.sort_complex(v),
    "unwrap": lambda v: jnp.unwrap(v),
    "sign": lambda v: jnp.sign(v),
    "heaviside": lambda v: jnp.heaviside(v, 0.5),
    "heaviside2": lambda v: jnp.heaviside(0.5, v),
    "interp_left": lambda v: jnp.interp(_halves(), _halves(), _halves(), left=v),
    "interp_fp": lambda v: jnp.interp(_halves(), _halves(), v),
    "unwrap_period": lambda v: jnp.unwrap(_halves(), period=v),
    "unwrap_disc": lambda v: jnp.unwrap(jnp.asarray(np.array([1, 1], np.int32)), discont=v),
    "interp_empty": lambda _: jnp.interp(_halves(), jnp.zeros((0,)), jnp.zeros((0,))),
    "interp_2d": lambda _: jnp.interp(_halves(), jnp.zeros((2, 2)), jnp.zeros((2, 2))),
    "interp_mismatch": lambda _: jnp.interp(_halves(), jnp.zeros((3,)), jnp.zeros((2,))),
    "interp_period0": lambda _: jnp.interp(_halves(), _halves(), _halves(), period=0),
    "unwrap_2d_axis": lambda _: jnp.unwrap(jnp.zeros((2, 3)), axis=2),
    "unwrap_empty": lambda _: jnp.unwrap(jnp.zeros((0,))),
    "sort_complex_2d": lambda _: jnp.sort_complex(jnp.zeros((2, 3))),
    "sort_complex_0d": lambda _: jnp.sort_complex(jnp.zeros(())),
}


def _halves() -> Any:
    """``[0.5, 0.5]`` in float32: the points and values of the interp cases."""
    return jnp.asarray(np.array([0.5, 0.5], np.float32))


def _builtin_error(error: BaseException) -> str:
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(error).__name__


def _described(result: Any) -> str:
    if isinstance(result, (tuple, list)):
        return "(" + ",".join(_described(r) for r in result[:4]) + ")"
    if isinstance(result, lamina.Array):
        aval = lamina.typeof(result)
        return f"{tuple(aval.shape)}:{aval.dtype}:{'W' if aval.weak_type else 's'}"
    return f"not an array: {type(result).__name__}"


def _outcome(key: str, values: dict[str, Any]) -> str:
    try:
        return _described(_call(key, values))
    except Exception as error:  # noqa: BLE001 - the class is what is compared
        return "E:" + _builtin_error(error)


#: Recorded with JAX 0.10.2, jax_enable_x64 off.
_CASES: list[tuple[str, str]] = [
    ('b|add|a0_bool|py_int', '():int32:W'),
    ('b|add|py_bool|py_bool', '():bool:s'),
    ('b|array_equiv|weak_f|a0_uint8', '():bool:s'),
    ('b|bitwise_left_shift|a0_bool|a0_bool', '():int32:s'),
    ('b|bitwise_left_shift|py_bool|py_bool', '():int32:s'),
    ('b|bitwise_right_shift|a0_bool|a0_bool', '():int32:s'),
    ('b|bitwise_right_shift|py_bool|a0_bool', '():int32:s'),
    ('b|bitwise_right_shift|weak_f|a0_int32', 'E:TypeError'),
    ('b|digitize|a0_int32|weak_f', 'E:ValueError'),
    ('b|equal|np_f32|py_float', '():bool:s'),
    ('b|fmin|py_bool|a0_uint8', '():uint8:s'),
    ('b|fmod|a0_float32|py_complex', 'E:TypeError'),
    ('b|greater_equal|py_int|a0_float16', '():bool:s'),
    ('b|heaviside|a0_int32|py_bool', '():float32:s'),
    ('b|heaviside|a0_int32|py_float', '():float32:W'),
    ('b|heaviside|a0_int8|py_float', '():float32:W'),
    ('b|heaviside|a1_int32|py_float', '(2,):float32:s'),
    ('b|heaviside|weak_i|py_int', '():float32:W'),
    ('b|hypot|a1_int32|py_float', '(2,):float32:s'),
    ('b|hypot|weak_f|a1_int32', '(2,):float32:s'),
    ('b|intersect1d|py_int|py_float', '(0,):float32:W'),
    ('b|intersect1d|py_int|weak_f', '(0,):float32:W'),
    ('b|isin|py_int|a0_float32', '():bool:s'),
    ('b|ldexp|py_complex|a0_bfloat16', 'E:ValueError'),
    ('b|ldexp|py_float|weak_i', '():float32:s'),
    ('b|ldexp|weak_f|a0_complex64', 'E:ValueError'),
    ('b|left_shift|a0_bool|py_bool', '():int32:s'),
    ('b|left_shift|py_bool|py_bool', '():int32:s'),
    ('b|logaddexp2|a1_int32|py_float', '(2,):float32:s'),
    ('b|logaddexp2|py_float|a1_int32', '(2,):float32:s'),
    ('b|logical_and|a0_bool|py_int', '():bool:W'),
    ('b|logical_and|a1_int32|py_float', '(2,):bool:s'),
    ('b|logical_and|py_complex|a0_int8', '():bool:W'),
    ('b|logical_and|weak_f|py_bool', '():bool:W'),
    ('b|logical_or|a0_int32|py_complex', '():bool:W'),
    ('b|logical_or|py_complex|np_int8', '():bool:W'),
    ('b|logical_xor|a0_int8|py_complex', '():bool:W'),
    ('b|logical_xor|a0_uint8|py_float', '():bool:W'),
    ('b|matmul|weak_i|a0_bool', 'E:ValueError'),
    ('b|maximum|weak_f|a1_int32', '(2,):float32:W'),
    ('b|mod|py_float|a0_complex64', 'E:TypeError'),
    ('b|multiply|np_int8|py_int', '():int8:s'),
    ('b|multiply|py_bool|a0_bool', '():bool:s'),
    ('b|not_equal|a1_int32|weak_f', '(2,):bool:W'),
    ('b|polymul|a1_int32|a1_int32', '(3,):float32:s'),
    ('b|polyval|a1_int32|py_complex', '():complex64:s'),
    ('b|polyval|a1_int32|py_float', '():float32:s'),
    ('b|polyval|a1_int32|weak_f', '():float32:s'),
    ('b|pow|weak_i|a1_float32', '(2,):float32:s'),
    ('b|right_shift|a0_bool|py_bool', '():int32:s'),
    ('b|right_shift|py_bool|a0_bool', '():int32:s'),
    ('b|setdiff1d|a0_bool|py_float', '(1,):bool:s'),
    ('b|setdiff1d|py_bool|a0_uint8', '(0,):bool:s'),
    ('b|setdiff1d|py_int|np_f32', '(1,):int32:W'),
    ('b|setxor1d|a0_bool|weak_i', '(0,):int32:W'),
    ('b|setxor1d|weak_f|py_float', '(0,):float32:W'),
    ('b|union1d|a0_bool|py_float', '(2,):float32:W'),
    ('b|union1d|a0_uint8|py_float', '(2,):float32:W'),
    ('b|union1d|py_int|py_float', '(2,):float32:W'),
    ('b|vdot|a1_int32|a1_int32', '():int32:s'),
    ('b|vecdot|a1_float32|a1_float32', '():float32:s'),
    ('jb|heaviside|a0_uint8|py_float', '():float32:W'),
    ('jb|heaviside|np_f64|py_int', '():float32:s'),
    ('jb|heaviside|weak_f|a0_bool', '():float32:W'),
    ('jb|ldexp|a0_float16|py_int', '():float16:s'),
    ('jb|true_divide|np_f32|a0_float32', '():float32:s'),
    ('j|angle|a1_float32', '(2,):float32:s'),
    ('j|cumsum|weak_f', '(1,):float32:s'),
    ('j|exp2|a0_float32', '():float32:s'),
    ('j|float_power|np_uint8', 'E:TypeError'),
    ('j|isnan|py_int', '():bool:W'),
    ('j|isnan|weak_i', '():bool:W'),
    ('j|log10|py_float', '():float32:s'),
    ('j|log10|weak_f', '():float32:s'),
    ('j|log2|py_float', '():float32:s'),
    ('j|log2|weak_c', '():complex64:s'),
    ('j|max|a0_float16', '():float16:s'),
    ('j|mean|np_bool', '():float32:s'),
    ('j|median|a0_complex64', 'E:ValueError'),
    ('j|median|py_complex', 'E:ValueError'),
    ('j|norm|a1_float32', '():float32:s'),
    ('j|norm|py_float', '():float32:s'),
    ('j|norm|weak_f', '():float32:s'),
    ('j|positive|a1_bool', '(2,):bool:s'),
    ('j|positive|py_bool', '():bool:s'),
    ('j|rint|np_c64', '():complex64:s'),
    ('j|rint|py_complex', '():complex64:W'),
    ('j|rint|weak_i', '():float32:s'),
    ('j|round|a1_bool', 'E:ValueError'),
    ('j|signbit|np_c64', 'E:ValueError'),
    ('j|signbit|py_complex', 'E:ValueError'),
    ('j|sign|a0_bool', 'E:TypeError'),
    ('j|sign|py_bool', 'E:TypeError'),
    ('j|sin|a0_uint8', '():float32:s'),
    ('j|spacing|py_float', '():float32:s'),
    ('j|spacing|weak_f', '():float32:s'),
    ('j|sqrt|weak_i', '():float32:W'),
    ('j|std|np_f64', '():float32:s'),
    ('j|zeros_like|a1_int8', '(2,):int8:s'),
    ('la|det|2d_a1_float32|ord=2', 'E:TypeError'),
    ('la|inv|2d_a1_int32|ord=inf', 'E:TypeError'),
    ('la|matrix_norm|2d_a1_bool|ord=1', '():float32:s'),
    ('la|norm|py_float', '():float32:s'),
    ('la|norm|weak_f', '():float32:s'),
    ('la|norm|weak_i', '():float32:s'),
    ('la|pinv|a0_bfloat16', 'E:ValueError'),
    ('la|trace|np_uint8', 'E:ValueError'),
    ('r|amin|a0_float32|dtype=int32', 'E:TypeError'),
    ('r|any|a0_complex64|dtype=bool', 'E:TypeError'),
    ('r|average|a1_bfloat16', '():bfloat16:s'),
    ('r|cumsum|py_bool', '(1,):int32:s'),
    ('r|cumulative_prod|a0_bool', 'E:ValueError'),
    ('r|cumulative_prod|py_complex|axis0', 'E:ValueError'),
    ('r|cumulative_prod|py_float|dtype=int32', 'E:ValueError'),
    ('r|cumulative_sum|np_int8|dtype=int32', 'E:ValueError'),
    ('r|cumulative_sum|np_uint8|keepdims', 'E:TypeError'),
    ('r|cumulative_sum|py_int|dtype=int32', 'E:ValueError'),
    ('r|mean|np_i64|keepdims', '():float32:s'),
    ('r|median|a1_complex64', 'E:ValueError'),
    ('r|median|np_c64|keepdims', 'E:ValueError'),
    ('r|nancumsum|np_f16', '(1,):float16:s'),
    ('r|nanmedian|a1_complex64|keepdims', 'E:ValueError'),
    ('r|nanmedian|np_c64', 'E:ValueError'),
    ('r|nansum|np_int8|keepdims', '():int32:s'),
    ('s|heaviside2|a0_int32', '():float32:W'),
    ('s|heaviside2|a0_uint8', '():float32:W'),
    ('s|heaviside2|a1_int32', '(2,):float32:W'),
    ('s|heaviside|a1_int32', '(2,):float32:s'),
    ('s|heaviside|np_int8', '():float32:W'),
    ('s|heaviside|py_float', '():float32:W'),
    ('s|heaviside|weak_f', '():float32:W'),
    ('s|interp_2d', 'E:ValueError'),
    ('s|interp_empty', 'E:TypeError'),
    ('s|interp_fp|a1_bfloat16', '(2,):float32:s'),
    ('s|interp_fp|a1_float16', '(2,):float32:s'),
    ('s|interp_left|a0_complex64', '(2,):complex64:s'),
    ('s|interp_left|py_complex', '(2,):complex64:s'),
    ('s|interp_mismatch', 'E:ValueError'),
    ('s|sign|a1_bool', 'E:TypeError'),
    ('s|sign|np_bool', 'E:TypeError'),
    ('s|sort_complex_0d', 'E:ValueError'),
    ('s|sort_complex_2d', '(2, 3):complex64:s'),
    ('s|sort_complex|a1_float16', '(2,):complex64:s'),
    ('s|sort_complex|np_int8', 'E:ValueError'),
    ('s|sort_complex|py_complex', 'E:ValueError'),
    ('s|unwrap_2d_axis', 'E:IndexError'),
    ('s|unwrap|a0_float32', 'E:IndexError'),
    ('s|unwrap|np_f16', 'E:IndexError'),
    ('s|unwrap|py_float', 'E:IndexError'),
    ('u|absolute|np_bool', '():bool:s'),
    ('u|absolute|py_bool', '():bool:s'),
    ('u|abs|np_bool', '():bool:s'),
    ('u|abs|py_bool', '():bool:s'),
    ('u|acosh|py_int', '():float32:W'),
    ('u|acos|weak_c', '():complex64:W'),
    ('u|add|weak_c', 'E:TypeError'),
    ('u|all|np_bool', '():bool:s'),
    ('u|amax|np_i64', '():int32:s'),
    ('u|any|a0_bool', '():bool:s'),
    ('u|arange|a0_bool', 'E:TypeError'),
    ('u|arcsinh|a0_int8', '():float32:s'),
    ('u|arctan2|a0_float16', 'E:TypeError'),
    ('u|arctanh|a1_bool', '(2,):float32:s'),
    ('u|arctan|a0_bfloat16', '():bfloat16:s'),
    ('u|argmax|a0_int8', '():int32:s'),
    ('u|around|a0_bool', 'E:ValueError'),
    ('u|around|np_i64', '():int32:s'),
    ('u|around|np_int8', '():int8:s'),
    ('u|array_split|np_i64', 'E:TypeError'),
    ('u|asarray|py_bool', '():bool:s'),
    ('u|atleast_3d|a0_int8', '(1, 1, 1):int8:s'),
    ('u|average|py_float', '():float32:s'),
    ('u|bincount|weak_i', 'E:ValueError'),
    ('u|blackman|np_bool', '(1,):float32:s'),
    ('u|broadcast_arrays|a0_bool', '(():bool:s)'),
    ('u|broadcast_arrays|np_f16', '(():float16:s)'),
    ('u|broadcast_arrays|np_int8', '(():int8:s)'),
    ('u|ceil|np_i64', '():int32:s'),
    ('u|ceil|np_int8', '():int8:s'),
    ('u|clip|np_f64', '():float32:s'),
    ('u|clip|py_bool', '():bool:s'),
    ('u|clip|weak_i', '():int32:W'),
    ('u|column_stack|a1_bool', '(1, 2):bool:s'),
    ('u|conjugate|nparr_f64', '(2,):float32:s'),
    ('u|conjugate|py_int', '():int32:W'),
    ('u|conj|py_bool', '():bool:s'),
    ('u|conj|py_int', '():int32:W'),
    ('u|copysign|a1_int32', 'E:TypeError'),
    ('u|corrcoef|a0_int8', '():float32:s'),
    ('u|cross|py_float', 'E:TypeError'),
    ('u|cumulative_prod|np_int8', 'E:ValueError'),
    ('u|cumulative_prod|py_float', 'E:ValueError'),
    ('u|cumulative_sum|a0_bool', 'E:ValueError'),
    ('u|cumulative_sum|np_f16', 'E:ValueError'),
    ('u|cumulative_sum|py_bool', 'E:ValueError'),
    ('u|degrees|a1_int32', '(2,):float32:s'),
    ('u|diag_indices|a0_float32', 'E:TypeError'),
    ('u|divmod|np_f16', 'E:TypeError'),
    ('u|dstack|py_bool', 'E:TypeError'),
    ('u|exp2|a0_float16', '():float16:s'),
    ('u|expand_dims|weak_c', 'E:TypeError'),
    ('u|expm1|weak_c', '():complex64:W'),
    ('u|extract|py_bool', 'E:TypeError'),
    ('u|fabs|py_complex', 'E:TypeError'),
    ('u|fabs|weak_c', 'E:TypeError'),
    ('u|flip|py_bool', '():bool:s'),
    ('u|flip|py_complex', '():complex64:W'),
    ('u|flip|weak_i', '():int32:W'),
    ('u|floor_divide|np_int8', 'E:TypeError'),
    ('u|floor|a0_int8', '():int8:s'),
    ('u|floor|np_int8', '():int8:s'),
    ('u|floor|py_bool', '():bool:s'),
    ('u|floor|py_int', '():int32:W'),
    ('u|frexp|a0_int8', '(():float32:s,():int32:s)'),
    ('u|full|a0_bfloat16', 'E:TypeError'),
    ('u|greater|weak_c', 'E:TypeError'),
    ('u|hamming|a0_complex64', 'E:TypeError'),
    ('u|histogram2d|a0_uint8', 'E:TypeError'),
    ('u|histogramdd|a1_float32', 'E:ValueError'),
    ('u|hsplit|a1_int32', 'E:TypeError'),
    ('u|i0|weak_f', '():float32:W'),
    ('u|identity|a1_int32', 'E:TypeError'),
    ('u|insert|np_f64', 'E:TypeError'),
    ('u|isclose|np_int8', 'E:TypeError'),
    ('u|iscomplex|a0_float16', '():bool:s'),
    ('u|iscomplex|py_float', '():bool:W'),
    ('u|iscomplex|py_int', '():bool:W'),
    ('u|iscomplex|weak_f', '():bool:W'),
    ('u|isfinite|a0_bfloat16', '():bool:s'),
    ('u|isnan|py_int', '():bool:W'),
    ('u|isnan|weak_i', '():bool:W'),
    ('u|isneginf|a0_complex64', 'E:ValueError'),
    ('u|isneginf|a1_bool', '(2,):bool:s'),
    ('u|isneginf|weak_c', 'E:ValueError'),
    ('u|isposinf|a0_complex64', 'E:ValueError'),
    ('u|isposinf|weak_c', 'E:ValueError'),
    ('u|isreal|py_float', '():bool:W'),
    ('u|isreal|weak_i', '():bool:W'),
    ('u|less|a1_float32', 'E:TypeError'),
    ('u|linspace|np_i64', 'E:TypeError'),
    ('u|log10|py_int', '():float32:s'),
    ('u|log10|weak_c', '():complex64:s'),
    ('u|log1p|a0_uint8', '():float32:s'),
    ('u|log2|py_complex', '():complex64:s'),
    ('u|log2|py_float', '():float32:s'),
    ('u|log2|weak_c', '():complex64:s'),
    ('u|logaddexp|weak_c', 'E:TypeError'),
    ('u|logical_and|py_bool', 'E:TypeError'),
    ('u|logspace|a0_float32', 'E:TypeError'),
    ('u|log|a0_uint8', '():float32:s'),
    ('u|matvec|py_int', 'E:TypeError'),
    ('u|maximum|a0_bool', 'E:TypeError'),
    ('u|median|a0_complex64', 'E:ValueError'),
    ('u|median|py_complex', 'E:ValueError'),
    ('u|min|a0_complex64', '():complex64:s'),
    ('u|modf|nparr_f64', '((2,):float32:s,(2,):float32:s)'),
    ('u|nan_to_num|np_i64', '():int32:s'),
    ('u|nan_to_num|np_int8', '():int8:s'),
    ('u|nan_to_num|py_bool', '():bool:s'),
    ('u|nanargmax|np_f16', '():int32:s'),
    ('u|nancumprod|weak_f', '(1,):float32:s'),
    ('u|nancumsum|a0_complex64', '(1,):complex64:s'),
    ('u|nanmax|weak_f', '():float32:s'),
    ('u|nanmedian|a0_uint8', '():float32:s'),
    ('u|nanmedian|py_complex', 'E:ValueError'),
    ('u|nanmedian|weak_c', 'E:ValueError'),
    ('u|nanprod|a1_bool', '():int32:s'),
    ('u|nansum|a1_float32', '():float32:s'),
    ('u|nextafter|np_i64', 'E:TypeError'),
    ('u|partition|py_complex', 'E:TypeError'),
    ('u|percentile|a0_uint8', 'E:TypeError'),
    ('u|polydiv|np_bool', 'E:TypeError'),
    ('u|polyfit|a0_float32', 'E:TypeError'),
    ('u|poly|np_bool', '(2,):float32:s'),
    ('u|positive|np_f64', '():float32:s'),
    ('u|positive|np_int8', '():int8:s'),
    ('u|positive|py_bool', '():bool:s'),
    ('u|promote_types|weak_i', 'E:TypeError'),
    ('u|ravel_multi_index|a1_bool', 'E:TypeError'),
    ('u|real|a1_bool', '(2,):bool:s'),
    ('u|real|np_int8', '():int8:s'),
    ('u|real|py_float', '():float32:W'),
    ('u|reciprocal|py_complex', '():complex64:W'),
    ('u|repeat|a0_int8', 'E:TypeError'),
    ('u|rint|py_complex', '():complex64:W'),
    ('u|rint|weak_c', '():complex64:W'),
    ('u|roll|a0_int8', 'E:TypeError'),
    ('u|roots|np_f16', '(0,):complex64:s'),
    ('u|round|np_i64', '():int32:s'),
    ('u|round|np_int8', '():int8:s'),
    ('u|round|py_int', '():int32:W'),
    ('u|setdiff1d|a0_bool', 'E:TypeError'),
    ('u|setxor1d|a0_float32', 'E:TypeError'),
    ('u|shape|np_f64', '()'),
    ('u|signbit|a0_float16', '():bool:s'),
    ('u|signbit|py_complex', 'E:ValueError'),
    ('u|signbit|py_int', '():bool:s'),
    ('u|sign|a1_bool', 'E:TypeError'),
    ('u|sign|np_bool', 'E:TypeError'),
    ('u|sign|py_bool', 'E:TypeError'),
    ('u|sign|py_complex', '():complex64:W'),
    ('u|sin|np_f64', '():float32:s'),
    ('u|sort_complex|a0_float16', 'E:ValueError'),
    ('u|sort_complex|py_bool', 'E:ValueError'),
    ('u|spacing|py_float', '():float32:s'),
    ('u|spacing|py_int', '():float32:s'),
    ('u|spacing|weak_f', '():float32:s'),
    ('u|split|weak_c', 'E:TypeError'),
    ('u|squeeze|a0_bool', '():bool:s'),
    ('u|squeeze|np_f16', '():float16:s'),
    ('u|squeeze|nparr_f64', '(2,):float32:s'),
    ('u|squeeze|py_complex', '():complex64:W'),
    ('u|sum|py_complex', '():complex64:s'),
    ('u|take_along_axis|np_bool', 'E:TypeError'),
    ('u|take|nparr_f64', 'E:TypeError'),
    ('u|tensordot|py_bool', 'E:TypeError'),
    ('u|trace|np_int8', 'E:ValueError'),
    ('u|trapezoid|a0_float16', 'E:ValueError'),
    ('u|trim_zeros|a1_float32', '(2,):float32:s'),
    ('u|trim_zeros|np_bool', '():bool:s'),
    ('u|trim_zeros|np_f64', '():float32:s'),
    ('u|triu|weak_i', 'E:ValueError'),
    ('u|true_divide|np_f16', 'E:TypeError'),
    ('u|trunc|np_i64', '():int32:s'),
    ('u|trunc|py_bool', '():bool:s'),
    ('u|unique_all|py_float', '((1,):float32:W,(1,):int32:s,():int32:s,(1,):int32:s)'),
    ('u|unique_all|weak_f', '((1,):float32:W,(1,):int32:s,():int32:s,(1,):int32:s)'),
    ('u|unique_counts|py_int', '((1,):int32:W,(1,):int32:s)'),
    ('u|unique_counts|weak_f', '((1,):float32:W,(1,):int32:s)'),
    ('u|unique_inverse|weak_f', '((1,):float32:W,():int32:s)'),
    ('u|unique_inverse|weak_i', '((1,):int32:W,():int32:s)'),
    ('u|unique_values|a0_float16', '(1,):float16:s'),
    ('u|unique_values|py_int', '(1,):int32:W'),
    ('u|unique_values|weak_f', '(1,):float32:W'),
    ('u|unique|py_float', '(1,):float32:W'),
    ('u|unique|py_int', '(1,):int32:W'),
    ('u|unique|weak_f', '(1,):float32:W'),
    ('u|unwrap|a0_bfloat16', 'E:IndexError'),
    ('u|unwrap|np_f16', 'E:IndexError'),
    ('u|vander|a0_bool', 'E:ValueError'),
    ('u|vdot|np_f16', 'E:TypeError'),
    ('u|vecdot|py_bool', 'E:TypeError'),
    ('u|vsplit|weak_c', 'E:TypeError'),
    ('u|vstack|py_int', 'E:TypeError'),
]

#: Recorded with JAX 0.10.2, jax_enable_x64 on.
_X64_CASES: list[tuple[str, str]] = [
    ('p|add|a0_bool|np_f64', '():float64:s'),
    ('p|add|a1_bool|py_float', '(2,):float64:W'),
    ('p|add|a1_bool|py_int', '(2,):int64:W'),
    ('p|add|a1_int32|np_f64', '(2,):float64:s'),
    ('p|add|py_bool|py_bool', '():bool:s'),
    ('p|multiply|a1_bool|a1_bool', '(2,):bool:s'),
    ('p|multiply|np_f64|a1_uint8', '(2,):float64:s'),
    ('p|multiply|weak_i|np_f64', '():float64:s'),
    ('s|heaviside2|a0_int32', '():float64:W'),
    ('s|heaviside2|a1_int32', '(2,):float64:W'),
    ('s|heaviside2|a1_int8', '(2,):float64:W'),
    ('s|heaviside|a1_int32', '(2,):float64:s'),
    ('s|heaviside|np_i64', '():float64:W'),
    ('s|heaviside|np_int8', '():float64:W'),
    ('s|heaviside|py_float', '():float64:W'),
    ('s|interp_2d', 'E:ValueError'),
    ('s|interp_empty', 'E:TypeError'),
    ('s|interp_fp|a1_bfloat16', '(2,):float32:s'),
    ('s|interp_fp|a1_float16', '(2,):float32:s'),
    ('s|interp_left|a0_complex64', '(2,):complex64:s'),
    ('s|interp_left|nparr_f64', '(2,):float64:s'),
    ('s|interp_left|py_complex', '(2,):complex64:s'),
    ('s|interp_mismatch', 'E:ValueError'),
    ('s|sign|a0_bool', 'E:TypeError'),
    ('s|sign|py_bool', 'E:TypeError'),
    ('s|sort_complex_0d', 'E:ValueError'),
    ('s|sort_complex|a1_float16', '(2,):complex64:s'),
    ('s|sort_complex|np_bool', 'E:ValueError'),
    ('s|sort_complex|np_int32', 'E:ValueError'),
    ('s|sort_complex|py_complex', 'E:ValueError'),
    ('s|unwrap_2d_axis', 'E:IndexError'),
    ('s|unwrap_period|np_f64', '(2,):float64:s'),
    ('s|unwrap|np_f32', 'E:IndexError'),
    ('s|unwrap|py_float', 'E:IndexError'),
    ('s|unwrap|weak_i', 'E:IndexError'),
    ('u|absolute|np_bool', '():bool:s'),
    ('u|absolute|py_bool', '():bool:s'),
    ('u|abs|np_bool', '():bool:s'),
    ('u|abs|py_bool', '():bool:s'),
    ('u|acosh|np_f64', '():float64:s'),
    ('u|acos|np_f64', '():float64:s'),
    ('u|arccosh|np_f64', '():float64:s'),
    ('u|arccos|np_f64', '():float64:s'),
    ('u|arcsinh|np_f64', '():float64:s'),
    ('u|arcsin|np_f64', '():float64:s'),
    ('u|arctan2|py_bool', 'E:TypeError'),
    ('u|arctanh|np_f64', '():float64:s'),
    ('u|arctan|np_f64', '():float64:s'),
    ('u|around|np_f64', '():float64:s'),
    ('u|around|np_int8', '():int8:s'),
    ('u|asinh|np_f64', '():float64:s'),
    ('u|asin|np_f64', '():float64:s'),
    ('u|atanh|a1_int32', '(2,):float32:s'),
    ('u|atanh|np_f64', '():float64:s'),
    ('u|atan|np_f64', '():float64:s'),
    ('u|broadcast_arrays|py_complex', '(():complex128:W)'),
    ('u|broadcast_arrays|py_float', '(():float64:W)'),
    ('u|broadcast_to|a0_int8', 'E:TypeError'),
    ('u|cbrt|np_f64', '():float64:s'),
    ('u|ceil|np_bool', '():bool:s'),
    ('u|ceil|np_i64', '():int64:s'),
    ('u|clip|np_bool', '():bool:s'),
    ('u|clip|np_f64', '():float64:s'),
    ('u|clip|np_int8', '():int8:s'),
    ('u|conjugate|np_bool', '():bool:s'),
    ('u|conjugate|nparr_f64', '(2,):float64:s'),
    ('u|conj|np_int8', '():int8:s'),
    ('u|conj|py_float', '():float64:W'),
    ('u|conj|py_int', '():int64:W'),
    ('u|cosh|np_f64', '():float64:s'),
    ('u|cos|np_f64', '():float64:s'),
    ('u|cumulative_prod|np_i64', 'E:ValueError'),
    ('u|cumulative_prod|weak_i', 'E:ValueError'),
    ('u|cumulative_sum|a0_bool', 'E:ValueError'),
    ('u|cumulative_sum|a1_float32', '(2,):float32:s'),
    ('u|cumulative_sum|a1_int32', '(2,):int64:s'),
    ('u|cumulative_sum|np_i64', 'E:ValueError'),
    ('u|cumulative_sum|np_int8', 'E:ValueError'),
    ('u|deg2rad|np_f64', '():float64:s'),
    ('u|degrees|np_f64', '():float64:s'),
    ('u|diagflat|py_bool', '(1, 1):bool:s'),
    ('u|exp2|np_f64', '():float64:s'),
    ('u|expm1|np_f64', '():float64:s'),
    ('u|exp|np_f64', '():float64:s'),
    ('u|fabs|a0_complex64', 'E:TypeError'),
    ('u|fabs|np_f64', '():float64:s'),
    ('u|fabs|py_complex', 'E:TypeError'),
    ('u|flip|np_int8', '():int8:s'),
    ('u|flip|py_complex', '():complex128:W'),
    ('u|floor|np_i64', '():int64:s'),
    ('u|floor|py_int', '():int64:W'),
    ('u|frexp|a0_bfloat16', '(():bfloat16:s,():int32:s)'),
    ('u|frexp|a1_int32', '((2,):float32:s,(2,):int32:s)'),
    ('u|frexp|np_f16', '(():float16:s,():int32:s)'),
    ('u|histogramdd|py_int', 'E:ValueError'),
    ('u|i0|np_f64', '():float64:s'),
    ('u|iscomplex|py_float', '():bool:W'),
    ('u|iscomplex|py_int', '():bool:W'),
    ('u|iscomplex|weak_i', '():bool:W'),
    ('u|isinf|a0_uint8', '():bool:s'),
    ('u|isnan|a1_int32', '(2,):bool:s'),
    ('u|isnan|py_int', '():bool:W'),
    ('u|isnan|weak_i', '():bool:W'),
    ('u|isneginf|py_complex', 'E:ValueError'),
    ('u|isneginf|weak_c', 'E:ValueError'),
    ('u|isposinf|py_complex', 'E:ValueError'),
    ('u|isposinf|weak_c', 'E:ValueError'),
    ('u|isreal|py_int', '():bool:W'),
    ('u|isreal|weak_i', '():bool:W'),
    ('u|log10|py_float', '():float64:s'),
    ('u|log10|py_int', '():float64:s'),
    ('u|log10|weak_i', '():float64:s'),
    ('u|log1p|np_f64', '():float64:s'),
    ('u|log2|np_f64', '():float64:s'),
    ('u|log2|py_float', '():float64:s'),
    ('u|log2|py_int', '():float64:s'),
    ('u|log|np_f64', '():float64:s'),
    ('u|mean|a1_bool', '():float32:s'),
    ('u|median|a0_complex64', 'E:ValueError'),
    ('u|median|py_complex', 'E:ValueError'),
    ('u|modf|np_f64', '(():float64:s,():float64:s)'),
    ('u|nan_to_num|np_bool', '():bool:s'),
    ('u|nan_to_num|np_int8', '():int8:s'),
    ('u|nan_to_num|py_bool', '():bool:s'),
    ('u|nanargmin|a0_bfloat16', '():int64:s'),
    ('u|nanmedian|py_complex', 'E:ValueError'),
    ('u|nanmedian|weak_c', 'E:ValueError'),
    ('u|ones_like|nparr_f64', '(2,):float64:s'),
    ('u|positive|np_bool', '():bool:s'),
    ('u|positive|py_bool', '():bool:s'),
    ('u|positive|py_complex', '():complex128:W'),
    ('u|promote_types|np_i64', 'E:TypeError'),
    ('u|rad2deg|np_f64', '():float64:s'),
    ('u|radians|np_f64', '():float64:s'),
    ('u|radians|py_complex', '():complex128:W'),
    ('u|real|np_f16', '():float16:s'),
    ('u|real|py_float', '():float64:W'),
    ('u|reciprocal|np_f64', '():float64:s'),
    ('u|rint|a0_complex64', '():complex64:s'),
    ('u|rint|py_complex', '():complex128:W'),
    ('u|rint|weak_c', '():complex128:W'),
    ('u|round|np_i64', '():int64:s'),
    ('u|round|np_int8', '():int8:s'),
    ('u|round|py_int', '():int64:W'),
    ('u|signbit|a0_complex64', 'E:ValueError'),
    ('u|signbit|py_complex', 'E:ValueError'),
    ('u|signbit|py_int', '():bool:s'),
    ('u|sign|a0_bool', 'E:TypeError'),
    ('u|sign|a1_bool', 'E:TypeError'),
    ('u|sign|py_bool', 'E:TypeError'),
    ('u|sinc|np_f64', '():float64:s'),
    ('u|sinh|np_f64', '():float64:s'),
    ('u|sinh|np_int8', '():float32:s'),
    ('u|sin|np_f64', '():float64:s'),
    ('u|sort_complex|a0_bool', 'E:ValueError'),
    ('u|sort_complex|a1_int32', '(2,):complex64:s'),
    ('u|sort_complex|nparr_f64', '(2,):complex128:s'),
    ('u|sort_complex|py_int', 'E:ValueError'),
    ('u|spacing|py_float', '():float64:s'),
    ('u|spacing|weak_f', '():float64:s'),
    ('u|spacing|weak_i', '():float64:s'),
    ('u|sqrt|np_f64', '():float64:s'),
    ('u|square|a0_bool', '():int32:s'),
    ('u|square|py_bool', '():int32:s'),
    ('u|squeeze|np_f16', '():float16:s'),
    ('u|squeeze|nparr_f64', '(2,):float64:s'),
    ('u|squeeze|py_complex', '():complex128:W'),
    ('u|subtract|a0_float32', 'E:TypeError'),
    ('u|sum|a1_bool', '():int64:s'),
    ('u|tanh|np_f64', '():float64:s'),
    ('u|tan|np_f64', '():float64:s'),
    ('u|tan|nparr_f64', '(2,):float64:s'),
    ('u|trim_zeros|np_bool', '():bool:s'),
    ('u|trim_zeros|py_int', '():int64:W'),
    ('u|trunc|np_i64', '():int64:s'),
    ('u|trunc|np_int8', '():int8:s'),
    ('u|unique_all|py_float', '((1,):float64:W,(1,):int64:s,():int64:s,(1,):int64:s)'),
    ('u|unique_all|weak_f', '((1,):float64:W,(1,):int64:s,():int64:s,(1,):int64:s)'),
    ('u|unique_counts|py_float', '((1,):float64:W,(1,):int64:s)'),
    ('u|unique_counts|weak_i', '((1,):int64:W,(1,):int64:s)'),
    ('u|unique_inverse|py_float', '((1,):float64:W,():int64:s)'),
    ('u|unique_inverse|weak_f', '((1,):float64:W,():int64:s)'),
    ('u|unique_values|weak_f', '(1,):float64:W'),
    ('u|unique_values|weak_i', '(1,):int64:W'),
    ('u|unique|py_int', '(1,):int64:W'),
    ('u|unique|weak_f', '(1,):float64:W'),
    ('u|unwrap|a0_bfloat16', 'E:IndexError'),
    ('u|unwrap|a0_uint8', 'E:IndexError'),
]


@pytest.fixture
def x64() -> Iterator[None]:
    before = dtypes.x64_enabled()
    dtypes.enable_x64(True)
    try:
        yield
    finally:
        dtypes.enable_x64(before)


@pytest.mark.parametrize(("key", "expected"), _CASES)
def test_result_types_are_jax(key: str, expected: str) -> None:
    assert _outcome(key, _inputs(False)) == expected


@pytest.mark.parametrize(("key", "expected"), _X64_CASES)
def test_result_types_under_x64_are_jax(key: str, expected: str, x64: None) -> None:
    assert _outcome(key, _inputs(True)) == expected
