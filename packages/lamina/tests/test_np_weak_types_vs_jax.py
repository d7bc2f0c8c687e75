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
    "interp_left": lambda v: jnp.interp(_A1(), _A1(), _A1(), left=v),
    "interp_fp": lambda v: jnp.interp(_A1(), _A1(), v),
    "unwrap_period": lambda v: jnp.unwrap(_A1(), period=v),
    "unwrap_disc": lambda v: jnp.unwrap(jnp.asarray(np.array([1, 1], np.int32)), discont=v),
    "interp_empty": lambda _: jnp.interp(_A1(), jnp.zeros((0,)), jnp.zeros((0,))),
    "interp_2d": lambda _: jnp.interp(_A1(), jnp.zeros((2, 2)), jnp.zeros((2, 2))),
    "interp_mismatch": lambda _: jnp.interp(_A1(), jnp.zeros((3,)), jnp.zeros((2,))),
    "interp_period0": lambda _: jnp.interp(_A1(), _A1(), _A1(), period=0),
    "unwrap_2d_axis": lambda _: jnp.unwrap(jnp.zeros((2, 3)), axis=2),
    "unwrap_empty": lambda _: jnp.unwrap(jnp.zeros((0,))),
    "sort_complex_2d": lambda _: jnp.sort_complex(jnp.zeros((2, 3))),
    "sort_complex_0d": lambda _: jnp.sort_complex(jnp.zeros(())),
}


def _A1() -> Any:
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
    ('b|append|a0_bfloat16|py_float', '(2,):bfloat16:s'),
    ('b|concatenate|py_int|np_int8', 'E:TypeError'),
    ('b|cross|weak_i|np_int8', 'E:ValueError'),
    ('b|dot|py_bool|py_complex', '():complex64:W'),
    ('b|equal|weak_i|a0_float16', '():bool:s'),
    ('b|fmod|py_float|np_int8', '():float32:W'),
    ('b|greater_equal|np_f32|py_complex', '():bool:s'),
    ('b|greater|py_bool|a0_bool', '():bool:s'),
    ('b|heaviside|a0_int32|py_float', '():float32:W'),
    ('b|heaviside|a1_int32|py_float', '(2,):float32:s'),
    ('b|heaviside|py_bool|py_int', '():float32:W'),
    ('b|heaviside|py_float|a1_int32', '(2,):float32:W'),
    ('b|heaviside|py_float|weak_f', '():float32:W'),
    ('b|heaviside|weak_f|a1_float32', '(2,):float32:s'),
    ('b|hypot|a1_int32|py_float', '(2,):float32:s'),
    ('b|hypot|a1_int32|weak_f', '(2,):float32:s'),
    ('b|hypot|py_float|a1_int32', '(2,):float32:s'),
    ('b|intersect1d|a0_bool|weak_i', '(1,):int32:W'),
    ('b|intersect1d|py_float|a0_int8', '(0,):float32:W'),
    ('b|intersect1d|py_int|weak_i', '(1,):int32:W'),
    ('b|left_shift|py_bool|py_float', 'E:TypeError'),
    ('b|less|py_bool|a1_float32', '(2,):bool:s'),
    ('b|logaddexp2|a1_int32|weak_f', '(2,):float32:s'),
    ('b|logaddexp2|py_float|a1_int32', '(2,):float32:s'),
    ('b|logaddexp2|weak_f|a1_int32', '(2,):float32:s'),
    ('b|logaddexp|a0_uint8|a0_uint8', '():float32:s'),
    ('b|logical_and|a0_bool|py_float', '():bool:W'),
    ('b|logical_and|a0_bool|py_int', '():bool:W'),
    ('b|logical_and|a0_int8|py_float', '():bool:W'),
    ('b|logical_and|a1_int32|py_float', '(2,):bool:s'),
    ('b|logical_and|py_int|py_bool', '():bool:W'),
    ('b|logical_or|a0_uint8|py_float', '():bool:W'),
    ('b|logical_or|py_bool|py_float', '():bool:W'),
    ('b|logical_or|py_complex|a0_float32', '():bool:s'),
    ('b|logical_or|py_complex|a0_int32', '():bool:W'),
    ('b|logical_xor|py_bool|py_complex', '():bool:W'),
    ('b|logical_xor|py_complex|a0_int8', '():bool:W'),
    ('b|logical_xor|weak_f|a0_int32', '():bool:W'),
    ('b|minimum|weak_f|a0_bfloat16', '():bfloat16:s'),
    ('b|mod|py_float|a0_bfloat16', '():bfloat16:s'),
    ('b|multiply|py_bool|a0_bool', '():bool:s'),
    ('b|polyadd|a1_float32|a1_float32', '(2,):float32:s'),
    ('b|polymul|a1_int32|a1_int32', '(3,):float32:s'),
    ('b|polysub|a1_int32|a1_int32', '(2,):int32:s'),
    ('b|pow|a0_float32|weak_i', '():float32:s'),
    ('b|setdiff1d|a0_bool|py_float', '(1,):bool:s'),
    ('b|setdiff1d|py_bool|weak_f', '(1,):bool:s'),
    ('b|setdiff1d|py_float|weak_i', '(1,):float32:W'),
    ('b|setdiff1d|weak_i|a0_uint8', '(0,):int32:W'),
    ('b|setxor1d|a0_uint8|weak_f', '(2,):float32:W'),
    ('b|setxor1d|a1_int32|py_float', '(2,):float32:W'),
    ('b|setxor1d|weak_i|py_bool', '(0,):int32:W'),
    ('b|subtract|np_f64|weak_i', '():float32:s'),
    ('b|true_divide|weak_i|py_complex', '():complex64:W'),
    ('b|union1d|a0_bool|py_float', '(2,):float32:W'),
    ('b|union1d|a0_bool|weak_i', '(1,):int32:W'),
    ('b|union1d|np_int8|py_bool', '(1,):int8:s'),
    ('b|union1d|py_int|py_bool', '(1,):int32:W'),
    ('b|union1d|weak_f|weak_f', '(1,):float32:W'),
    ('b|vdot|py_float|a1_float32', 'E:TypeError'),
    ('la|det|2d_a1_bool|ord=inf', 'E:TypeError'),
    ('la|diagonal|nparr_f64', 'E:ValueError'),
    ('la|eigh|2d_a1_complex64|ord=nuc', 'E:TypeError'),
    ('la|matrix_norm|2d_a1_float32', '():float32:s'),
    ('la|norm|py_float', '():float32:s'),
    ('la|norm|py_int', '():float32:s'),
    ('la|norm|weak_c', '():float32:s'),
    ('la|norm|weak_f', '():float32:s'),
    ('la|norm|weak_i', '():float32:s'),
    ('la|svd|2d_a1_float32|ord=-1', 'E:TypeError'),
    ('la|trace|a0_int8', 'E:ValueError'),
    ('la|vector_norm|2d_a1_float16|ord=-1', '():float16:s'),
    ('p|multiply|a0_float16|np_uint8', '():float16:s'),
    ('r|amax|a0_float16', '():float16:s'),
    ('r|count_nonzero|a0_complex64|dtype=float16', 'E:TypeError'),
    ('r|cumsum|py_float|dtype=int32', '(1,):int32:s'),
    ('r|cumulative_prod|a0_bfloat16', 'E:ValueError'),
    ('r|cumulative_prod|a0_bfloat16|dtype=float16', 'E:ValueError'),
    ('r|cumulative_prod|np_f64|dtype=bool', 'E:ValueError'),
    ('r|cumulative_sum|np_uint8', 'E:ValueError'),
    ('r|cumulative_sum|py_complex|dtype=float16', 'E:ValueError'),
    ('r|cumulative_sum|py_int', 'E:ValueError'),
    ('r|median|a0_complex64|axis0', 'E:ValueError'),
    ('r|median|a1_complex64|axis0', 'E:ValueError'),
    ('r|median|a1_uint8|axis0', '():float32:s'),
    ('r|median|py_complex', 'E:ValueError'),
    ('r|min|weak_f|dtype=float16', 'E:TypeError'),
    ('r|nancumprod|py_int|dtype=int32', '(1,):int32:s'),
    ('r|nancumsum|weak_i|keepdims', 'E:TypeError'),
    ('r|nanmax|np_f16|axis0', 'E:ValueError'),
    ('r|nanmean|np_f64|keepdims', '():float32:s'),
    ('r|nanmedian|a0_complex64', 'E:ValueError'),
    ('r|nanmedian|np_c64', 'E:ValueError'),
    ('r|nanmedian|np_int32|axis0', 'E:ValueError'),
    ('r|nanmedian|weak_c', 'E:ValueError'),
    ('r|prod|weak_c', '():complex64:s'),
    ('r|std|a1_bfloat16|axis0', '():bfloat16:s'),
    ('r|sum|np_f16', '():float16:s'),
    ('r|var|a1_int8|keepdims', '(1,):float32:s'),
    ('s|heaviside2|a0_int8', '():float32:W'),
    ('s|heaviside2|a1_int32', '(2,):float32:W'),
    ('s|heaviside2|np_i64', '():float32:W'),
    ('s|heaviside2|nparr_i64', '(2,):float32:W'),
    ('s|heaviside|a0_int8', '():float32:W'),
    ('s|heaviside|a0_uint8', '():float32:W'),
    ('s|heaviside|py_float', '():float32:W'),
    ('s|heaviside|weak_i', '():float32:W'),
    ('s|interp_2d', 'E:ValueError'),
    ('s|interp_empty', 'E:TypeError'),
    ('s|interp_fp|a1_bfloat16', '(2,):float32:s'),
    ('s|interp_fp|a1_float16', '(2,):float32:s'),
    ('s|interp_left|a0_complex64', '(2,):complex64:s'),
    ('s|interp_left|np_c64', '(2,):complex64:s'),
    ('s|interp_left|py_complex', '(2,):complex64:s'),
    ('s|interp_mismatch', 'E:ValueError'),
    ('s|interp_period0', '(2,):float32:s'),
    ('s|sign|a0_bool', 'E:TypeError'),
    ('s|sign|np_bool', 'E:TypeError'),
    ('s|sign|py_bool', 'E:TypeError'),
    ('s|sort_complex_0d', 'E:ValueError'),
    ('s|sort_complex|a0_complex64', 'E:ValueError'),
    ('s|sort_complex|a0_float16', 'E:ValueError'),
    ('s|sort_complex|a0_uint8', 'E:ValueError'),
    ('s|sort_complex|a1_float16', '(2,):complex64:s'),
    ('s|sort_complex|nparr_f64', '(2,):complex64:s'),
    ('s|sort_complex|py_complex', 'E:ValueError'),
    ('s|unwrap_2d_axis', 'E:IndexError'),
    ('s|unwrap_disc|a0_float16', '(2,):float32:s'),
    ('s|unwrap|a1_uint8', '(2,):float32:s'),
    ('s|unwrap|np_int32', 'E:IndexError'),
    ('s|unwrap|py_float', 'E:IndexError'),
    ('s|unwrap|py_int', 'E:IndexError'),
    ('s|unwrap|weak_i', 'E:IndexError'),
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
    ('u|arccosh|a0_uint8', '():float32:s'),
    ('u|arcsinh|a0_int8', '():float32:s'),
    ('u|arctan2|a0_float16', 'E:TypeError'),
    ('u|arctanh|a1_bool', '(2,):float32:s'),
    ('u|arctan|a0_bfloat16', '():bfloat16:s'),
    ('u|argmax|a0_int8', '():int32:s'),
    ('u|around|a0_bool', 'E:ValueError'),
    ('u|around|np_i64', '():int32:s'),
    ('u|around|np_int8', '():int8:s'),
    ('u|around|py_int', '():int32:W'),
    ('u|array_split|np_i64', 'E:TypeError'),
    ('u|asarray|py_bool', '():bool:s'),
    ('u|asinh|py_complex', '():complex64:W'),
    ('u|atleast_3d|a0_int8', '(1, 1, 1):int8:s'),
    ('u|average|py_float', '():float32:s'),
    ('u|bincount|weak_i', 'E:ValueError'),
    ('u|blackman|np_bool', '(1,):float32:s'),
    ('u|broadcast_arrays|a0_bool', '(():bool:s)'),
    ('u|broadcast_arrays|np_f16', '(():float16:s)'),
    ('u|broadcast_arrays|np_int8', '(():int8:s)'),
    ('u|broadcast_arrays|py_complex', '(():complex64:W)'),
    ('u|ceil|np_bool', '():bool:s'),
    ('u|ceil|np_i64', '():int32:s'),
    ('u|ceil|np_int8', '():int8:s'),
    ('u|clip|np_f16', '():float16:s'),
    ('u|clip|np_f64', '():float32:s'),
    ('u|clip|py_bool', '():bool:s'),
    ('u|clip|weak_i', '():int32:W'),
    ('u|column_stack|a1_bool', '(1, 2):bool:s'),
    ('u|concat|np_bool', 'E:TypeError'),
    ('u|conjugate|np_i64', '():int32:s'),
    ('u|conjugate|nparr_f64', '(2,):float32:s'),
    ('u|conjugate|py_int', '():int32:W'),
    ('u|conj|np_i64', '():int32:s'),
    ('u|conj|py_bool', '():bool:s'),
    ('u|conj|py_int', '():int32:W'),
    ('u|copysign|a1_int32', 'E:TypeError'),
    ('u|corrcoef|a0_int8', '():float32:s'),
    ('u|cross|py_float', 'E:TypeError'),
    ('u|cumprod|a0_bool', '(1,):int32:s'),
    ('u|cumulative_sum|nparr_f64', '(2,):float32:s'),
    ('u|degrees|np_f16', '():float16:s'),
    ('u|diag|np_i64', 'E:ValueError'),
    ('u|digitize|py_float', 'E:TypeError'),
    ('u|divide|a0_complex64', 'E:TypeError'),
    ('u|ediff1d|a1_int32', '(1,):int32:s'),
    ('u|empty|a0_complex64', 'E:TypeError'),
    ('u|expand_dims|a0_float16', 'E:TypeError'),
    ('u|expm1|weak_c', '():complex64:W'),
    ('u|extract|weak_c', 'E:TypeError'),
    ('u|fabs|a0_complex64', 'E:TypeError'),
    ('u|fabs|py_complex', 'E:TypeError'),
    ('u|fabs|weak_c', 'E:TypeError'),
    ('u|fliplr|a1_float32', 'E:ValueError'),
    ('u|flipud|py_complex', 'E:ValueError'),
    ('u|flip|np_bool', '():bool:s'),
    ('u|flip|py_complex', '():complex64:W'),
    ('u|flip|py_int', '():int32:W'),
    ('u|floor|np_bool', '():bool:s'),
    ('u|floor|np_i64', '():int32:s'),
    ('u|floor|py_bool', '():bool:s'),
    ('u|floor|py_int', '():int32:W'),
    ('u|fmod|a1_int32', 'E:TypeError'),
    ('u|gcd|a0_bool', 'E:TypeError'),
    ('u|greater_equal|weak_c', 'E:TypeError'),
    ('u|greater|weak_c', 'E:TypeError'),
    ('u|histogram_bin_edges|a0_uint8', '(11,):float32:s'),
    ('u|histogram|py_bool', '((10,):float32:s,(11,):float32:s)'),
    ('u|hsplit|a1_float32', 'E:TypeError'),
    ('u|isclose|py_bool', 'E:TypeError'),
    ('u|iscomplex|py_float', '():bool:W'),
    ('u|iscomplex|py_int', '():bool:W'),
    ('u|iscomplex|weak_f', '():bool:W'),
    ('u|iscomplex|weak_i', '():bool:W'),
    ('u|isin|a0_complex64', 'E:TypeError'),
    ('u|isnan|py_int', '():bool:W'),
    ('u|isnan|weak_i', '():bool:W'),
    ('u|isneginf|a0_complex64', 'E:ValueError'),
    ('u|isneginf|np_i64', '():bool:s'),
    ('u|isneginf|py_complex', 'E:ValueError'),
    ('u|isneginf|weak_c', 'E:ValueError'),
    ('u|isposinf|a0_complex64', 'E:ValueError'),
    ('u|isposinf|a1_int32', '(2,):bool:s'),
    ('u|isposinf|py_complex', 'E:ValueError'),
    ('u|isposinf|weak_c', 'E:ValueError'),
    ('u|isreal|py_float', '():bool:W'),
    ('u|isreal|py_int', '():bool:W'),
    ('u|isreal|weak_i', '():bool:W'),
    ('u|kaiser|a1_int32', 'E:TypeError'),
    ('u|kron|a0_complex64', 'E:TypeError'),
    ('u|lcm|a0_uint8', 'E:TypeError'),
    ('u|left_shift|py_complex', 'E:TypeError'),
    ('u|less_equal|a0_float16', 'E:TypeError'),
    ('u|less|np_bool', 'E:TypeError'),
    ('u|linspace|a1_float32', 'E:TypeError'),
    ('u|log10|py_float', '():float32:s'),
    ('u|log10|py_int', '():float32:s'),
    ('u|log10|weak_c', '():complex64:s'),
    ('u|log10|weak_f', '():float32:s'),
    ('u|log2|a0_float16', '():float16:s'),
    ('u|log2|py_complex', '():complex64:s'),
    ('u|log2|py_float', '():float32:s'),
    ('u|log2|py_int', '():float32:s'),
    ('u|log2|weak_c', '():complex64:s'),
    ('u|logical_and|py_bool', 'E:TypeError'),
    ('u|logical_not|py_int', '():bool:W'),
    ('u|logical_xor|py_float', 'E:TypeError'),
    ('u|log|np_i64', '():float32:s'),
    ('u|maximum|a0_float16', 'E:TypeError'),
    ('u|mean|a0_bool', '():float32:s'),
    ('u|median|a0_complex64', 'E:ValueError'),
    ('u|median|py_complex', 'E:ValueError'),
    ('u|median|weak_c', 'E:ValueError'),
    ('u|meshgrid|weak_f', 'E:ValueError'),
    ('u|minimum|a0_complex64', 'E:TypeError'),
    ('u|moveaxis|nparr_f64', 'E:TypeError'),
    ('u|nan_to_num|np_i64', '():int32:s'),
    ('u|nan_to_num|np_int8', '():int8:s'),
    ('u|nan_to_num|py_bool', '():bool:s'),
    ('u|nancumsum|np_f64', '(1,):float32:s'),
    ('u|nanmax|py_int', '():int32:s'),
    ('u|nanmean|a0_uint8', '():float32:s'),
    ('u|nanmedian|a0_complex64', 'E:ValueError'),
    ('u|nanmedian|py_complex', 'E:ValueError'),
    ('u|nanmedian|weak_c', 'E:ValueError'),
    ('u|nanquantile|a0_bool', 'E:TypeError'),
    ('u|nansum|a0_bool', '():int32:s'),
    ('u|nextafter|a0_bool', 'E:TypeError'),
    ('u|ones|nparr_f64', 'E:TypeError'),
    ('u|outer|py_bool', 'E:TypeError'),
    ('u|pad|a0_int8', 'E:TypeError'),
    ('u|percentile|np_int8', 'E:TypeError'),
    ('u|polydiv|py_complex', 'E:TypeError'),
    ('u|poly|py_bool', '(2,):float32:s'),
    ('u|positive|np_i64', '():int32:s'),
    ('u|positive|py_bool', '():bool:s'),
    ('u|positive|py_float', '():float32:W'),
    ('u|positive|py_int', '():int32:W'),
    ('u|prod|weak_f', '():float32:s'),
    ('u|ptp|weak_i', '():int32:s'),
    ('u|real|np_i64', '():int32:s'),
    ('u|real|py_bool', '():bool:s'),
    ('u|real|py_float', '():float32:W'),
    ('u|repeat|a0_complex64', 'E:TypeError'),
    ('u|rint|a0_complex64', '():complex64:s'),
    ('u|rint|py_complex', '():complex64:W'),
    ('u|rint|py_int', '():float32:s'),
    ('u|rint|weak_c', '():complex64:W'),
    ('u|rollaxis|weak_i', 'E:TypeError'),
    ('u|rot90|np_f16', 'E:ValueError'),
    ('u|round|np_i64', '():int32:s'),
    ('u|round|np_int8', '():int8:s'),
    ('u|round|py_int', '():int32:W'),
    ('u|setxor1d|a0_bool', 'E:TypeError'),
    ('u|shape|a0_float32', '()'),
    ('u|signbit|np_int8', '():bool:s'),
    ('u|signbit|py_complex', 'E:ValueError'),
    ('u|signbit|py_int', '():bool:s'),
    ('u|signbit|weak_c', 'E:ValueError'),
    ('u|sign|a0_float32', '():float32:s'),
    ('u|sign|a1_bool', 'E:TypeError'),
    ('u|sign|np_bool', 'E:TypeError'),
    ('u|sign|py_bool', 'E:TypeError'),
    ('u|sinc|np_f64', '():float32:s'),
    ('u|sin|py_int', '():float32:W'),
    ('u|sort_complex|a0_float16', 'E:ValueError'),
    ('u|sort_complex|a0_int8', 'E:ValueError'),
    ('u|sort_complex|np_f16', 'E:ValueError'),
    ('u|spacing|a0_int8', '():float32:s'),
    ('u|spacing|py_float', '():float32:s'),
    ('u|spacing|py_int', '():float32:s'),
    ('u|spacing|weak_f', '():float32:s'),
    ('u|spacing|weak_i', '():float32:s'),
    ('u|squeeze|np_f16', '():float16:s'),
    ('u|squeeze|np_int8', '():int8:s'),
    ('u|squeeze|py_complex', '():complex64:W'),
    ('u|squeeze|py_float', '():float32:W'),
    ('u|std|py_int', '():float32:s'),
    ('u|subtract|a1_float32', 'E:TypeError'),
    ('u|swapaxes|a0_float16', 'E:TypeError'),
    ('u|take|np_f64', 'E:TypeError'),
    ('u|transpose|np_int8', '():int8:s'),
    ('u|tri|a0_uint8', '(1, 1):float32:s'),
    ('u|trunc|np_bool', '():bool:s'),
    ('u|trunc|np_int8', '():int8:s'),
    ('u|trunc|py_int', '():int32:W'),
    ('u|unique_all|py_float', '((1,):float32:W,(1,):int32:s,():int32:s,(1,):int32:s)'),
    ('u|unique_all|py_int', '((1,):int32:W,(1,):int32:s,():int32:s,(1,):int32:s)'),
    ('u|unique_all|weak_i', '((1,):int32:W,(1,):int32:s,():int32:s,(1,):int32:s)'),
    ('u|unique_counts|py_float', '((1,):float32:W,(1,):int32:s)'),
    ('u|unique_counts|weak_f', '((1,):float32:W,(1,):int32:s)'),
    ('u|unique_counts|weak_i', '((1,):int32:W,(1,):int32:s)'),
    ('u|unique_inverse|py_float', '((1,):float32:W,():int32:s)'),
    ('u|unique_inverse|py_int', '((1,):int32:W,():int32:s)'),
    ('u|unique_inverse|weak_i', '((1,):int32:W,():int32:s)'),
    ('u|unique_values|py_int', '(1,):int32:W'),
    ('u|unique_values|weak_f', '(1,):float32:W'),
    ('u|unique_values|weak_i', '(1,):int32:W'),
    ('u|unique|py_float', '(1,):float32:W'),
    ('u|unique|py_int', '(1,):int32:W'),
    ('u|unique|weak_f', '(1,):float32:W'),
    ('u|unravel_index|np_bool', 'E:TypeError'),
    ('u|unwrap|a0_float16', 'E:IndexError'),
    ('u|unwrap|np_f64', 'E:IndexError'),
    ('u|unwrap|weak_f', 'E:IndexError'),
    ('u|vander|np_bool', 'E:ValueError'),
    ('u|var|a0_complex64', '():float32:s'),
    ('u|where|a0_bfloat16', 'E:ValueError'),
]

#: Recorded with JAX 0.10.2, jax_enable_x64 on.
_X64_CASES: list[tuple[str, str]] = [
    ('s|heaviside2|a1_int32', '(2,):float64:W'),
    ('s|heaviside2|np_bool', '():float64:W'),
    ('s|heaviside2|py_int', '():float64:W'),
    ('s|heaviside|a0_uint8', '():float64:W'),
    ('s|heaviside|np_uint8', '():float64:W'),
    ('s|heaviside|py_float', '():float64:W'),
    ('s|interp_2d', 'E:ValueError'),
    ('s|interp_empty', 'E:TypeError'),
    ('s|interp_fp|a1_bfloat16', '(2,):float32:s'),
    ('s|interp_fp|a1_float16', '(2,):float32:s'),
    ('s|interp_left|np_c64', '(2,):complex64:s'),
    ('s|interp_left|nparr_f64', '(2,):float64:s'),
    ('s|interp_left|py_complex', '(2,):complex64:s'),
    ('s|interp_mismatch', 'E:ValueError'),
    ('s|sign|a0_bool', 'E:TypeError'),
    ('s|sign|a1_bool', 'E:TypeError'),
    ('s|sort_complex_0d', 'E:ValueError'),
    ('s|sort_complex|a0_bool', 'E:ValueError'),
    ('s|sort_complex|a1_float16', '(2,):complex64:s'),
    ('s|sort_complex|np_bool', 'E:ValueError'),
    ('s|sort_complex|py_complex', 'E:ValueError'),
    ('s|unwrap_2d_axis', 'E:IndexError'),
    ('s|unwrap_period|np_f64', '(2,):float64:s'),
    ('s|unwrap|a0_bfloat16', 'E:IndexError'),
    ('s|unwrap|np_uint8', 'E:IndexError'),
    ('s|unwrap|py_float', 'E:IndexError'),
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
