"""Windowed reductions: ``reduce_window_sum``, ``reduce_window_max``,
``reduce_window_min``, the general ``reduce_window`` (a traced binary body),
and the primitives their derivatives use, ``select_and_gather_add`` and
``select_and_scatter_add``.

Params follow JAX 0.10: ``window_dimensions``, ``window_strides``,
``padding`` (``(low, high)`` pairs), ``base_dilation`` and
``window_dilation``, one entry per operand axis.

Derivatives:

- ``reduce_window_sum`` is linear; its transpose pads the cotangent (interior
  padding ``stride - 1``) and sums it over the same window with strides
  ``base_dilation``.
- ``reduce_window_max``/``_min``: the tangent is the tangent at the position
  each window selects (the first maximum). Without dilation that is
  ``select_and_gather_add``, whose transpose is ``select_and_scatter_add``
  (XLA's ``select_and_scatter``); with base or window dilation it is written
  with ``pad``/``slice``/``select`` over the window positions, so it
  transposes through those.
- the general ``reduce_window``: the tangent folds the JVP of the body over
  the window positions (strided slices), so it is linear and transposes:
  reverse mode works for any body (JAX's refuses it).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina_linear_util import tree_util as tu
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import ad, batching, core, dtypes
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.base_primitives import (
    broadcast_in_dim,
    convert_element_type,
    zeros_like_aval,
)
from lamina_tracing_core.jaxpr import ClosedJaxpr, JaxprDebugInfo
from lamina_tracing_core.lax import common, helpers
from lamina_tracing_core.lax import elementwise as ew
from lamina_tracing_core.lax import structural as st
from lamina_tracing_core.lax.common import ArrayLike
from lamina_tracing_core.primitives import Primitive, batching_rules, jvp_rules, transpose_rules
from lamina_tracing_core.symbolic import tangent_aval

Array = Any
Pads = tuple[tuple[int, int], ...]

__all__ = [
    "reduce_window_sum_p", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_p",
    "select_and_gather_add_p", "select_and_scatter_add_p", "reduce_window",
    "reduce_window_sum", "reduce_window_max", "reduce_window_min", "reduce_window_shape_tuple",
    "select_and_gather_add", "select_and_scatter_add", "window_padtype_to_pads",
]


# --- shapes and parameter checks ------------------------------------------------------------
def _dilate(d: int, factor: int) -> int:
    return 0 if d == 0 else 1 + factor * (d - 1)


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int],
                              padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of a windowed reduction (0 where no window fits)."""
    shape = [int(d) for d in operand_shape]
    window = [int(w) for w in window_dimensions]
    if base_dilation is not None:
        shape = [_dilate(d, b) for d, b in zip(shape, base_dilation)]
    if window_dilation is not None:
        window = [_dilate(w, r) for w, r in zip(window, window_dilation)]
    out = []
    for d, w, s, (lo, hi) in zip(shape, window, window_strides, padding):
        padded = d + int(lo) + int(hi)
        out.append(0 if padded < w else (padded - w) // int(s) + 1)
    return tuple(out)


def window_padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                           window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """Explicit ``(low, high)`` pads for ``'VALID'``, ``'SAME'`` or ``'SAME_LOWER'``."""
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"reduce_window: padding must be 'VALID', 'SAME', 'SAME_LOWER' or a "
                         f"sequence of (low, high) pairs, got {padding!r}")
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-int(d) // int(s))
        total = max(0, (out - 1) * int(s) + int(w) - int(d))
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def _check_params(name: str, shape: Sequence[int], window_dimensions: Sequence[int],
                  window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                  base_dilation: Sequence[int], window_dilation: Sequence[int]) -> None:
    nd = len(shape)
    for arg, value in (("window_dimensions", window_dimensions),
                       ("window_strides", window_strides), ("padding", padding),
                       ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(value) != nd:
            raise TypeError(f"{name}: {arg} has {len(value)} entries but the operand has rank "
                            f"{nd} (operand shape {tuple(shape)}, {arg}={tuple(value)})")
    for arg, value in (("window_dimensions", window_dimensions),
                       ("window_strides", window_strides), ("base_dilation", base_dilation),
                       ("window_dilation", window_dilation)):
        if any(v < 1 for v in value):
            raise TypeError(f"{name}: every entry of {arg} must be positive, got "
                            f"{arg}={tuple(value)}")


def _canonical_padding(name: str, padding: Any) -> Pads:
    try:
        return tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: padding must be a string ('VALID', 'SAME', 'SAME_LOWER') or a "
                        f"sequence of (low, high) integer pairs, got {padding!r}") from None


def _window_params(name: str, shape: Sequence[int], window_dimensions: Sequence[int],
                   window_strides: Sequence[int], padding: Any,
                   base_dilation: Sequence[int] | None,
                   window_dilation: Sequence[int] | None,
                   operand: Any = None) -> dict[str, Any]:
    """The checked window params; errors name, for a traced ``operand``, the
    arguments of the traced function it comes from."""
    try:
        return _checked_window_params(name, shape, window_dimensions, window_strides, padding,
                                      base_dilation, window_dilation)
    except TypeError as err:
        if operand is None:
            raise
        raise TypeError(f"{err}{helpers.operand_origin(operand)}") from None


def _checked_window_params(name: str, shape: Sequence[int], window_dimensions: Sequence[int],
                           window_strides: Sequence[int], padding: Any,
                           base_dilation: Sequence[int] | None,
                           window_dilation: Sequence[int] | None) -> dict[str, Any]:
    nd = len(shape)
    window = common.as_int_tuple(name, "window_dimensions", window_dimensions)
    strides = common.as_int_tuple(name, "window_strides", window_strides)
    base = (1,) * nd if base_dilation is None else \
        common.as_int_tuple(name, "base_dilation", base_dilation)
    wdil = (1,) * nd if window_dilation is None else \
        common.as_int_tuple(name, "window_dilation", window_dilation)
    if isinstance(padding, str):
        if len(window) != nd or len(strides) != nd or len(wdil) != nd or len(base) != nd:
            _check_params(name, shape, window, strides, [(0, 0)] * nd, base, wdil)
        pads = tuple(window_padtype_to_pads(
            [_dilate(d, b) for d, b in zip(shape, base)],
            [_dilate(w, r) for w, r in zip(window, wdil)], strides, padding))
    else:
        pads = _canonical_padding(name, padding)
    _check_params(name, shape, window, strides, pads, base, wdil)
    return dict(window_dimensions=window, window_strides=strides, padding=pads,
                base_dilation=base, window_dilation=wdil)


def _out_shape(operand: ShapedArray, params: dict[str, Any]) -> tuple[int, ...]:
    return reduce_window_shape_tuple(operand.shape, params["window_dimensions"],
                                     params["window_strides"], params["padding"],
                                     params["base_dilation"], params["window_dilation"])


# --- the monoid reductions --------------------------------------------------------------------
def _monoid_prim(name: str, accepted: frozenset[np.dtype[Any]]) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(operand: ShapedArray, **params: Any) -> ShapedArray:
        if operand.dtype not in accepted:
            common.check_dtype(name, operand, accepted)
        _check_params(name, operand.shape, params["window_dimensions"],
                      params["window_strides"], params["padding"], params["base_dilation"],
                      params["window_dilation"])
        return ShapedArray(_out_shape(operand, params), operand.dtype, operand.weak_type)

    def batch(args: Any, dims: Any, **params: Any) -> Any:
        (x,), (d,) = args, dims
        return prim.bind(x, **_insert_batch_params(params, d)), d

    prim.def_abstract_eval(abstract_eval)
    batching_rules[prim] = batch
    return prim


def _insert_batch_params(params: dict[str, Any], d: int) -> dict[str, Any]:
    """The params of a windowed op with a size-1, stride-1 window on axis ``d``."""
    out = dict(params)
    for key, unit in (("window_dimensions", 1), ("window_strides", 1), ("padding", (0, 0)),
                      ("base_dilation", 1), ("window_dilation", 1)):
        if key in out:
            value = list(out[key])
            value.insert(d, unit)
            out[key] = tuple(value)
    return out


reduce_window_sum_p = _monoid_prim("reduce_window_sum", common.NUM)
reduce_window_max_p = _monoid_prim("reduce_window_max", common.ANY)
reduce_window_min_p = _monoid_prim("reduce_window_min", common.ANY)


def _bind_monoid(prim: Primitive, operand: ArrayLike, window_dimensions: Sequence[int],
                 window_strides: Sequence[int], padding: Any,
                 base_dilation: Sequence[int] | None, window_dilation: Sequence[int] | None
                 ) -> Array:
    params = _window_params(prim.name, get_aval(operand).shape, window_dimensions,
                            window_strides, padding, base_dilation, window_dilation, operand)
    return prim.bind(operand, **params)


def reduce_window_sum(operand: ArrayLike, window_dimensions: Sequence[int],
                      window_strides: Sequence[int], padding: Any,
                      base_dilation: Sequence[int] | None = None,
                      window_dilation: Sequence[int] | None = None) -> Array:
    """Sums over each window of ``operand`` (zero padding)."""
    return _bind_monoid(reduce_window_sum_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)


def reduce_window_max(operand: ArrayLike, window_dimensions: Sequence[int],
                      window_strides: Sequence[int], padding: Any,
                      base_dilation: Sequence[int] | None = None,
                      window_dilation: Sequence[int] | None = None) -> Array:
    """The maximum of each window of ``operand`` (padding with the dtype's lowest value)."""
    return _bind_monoid(reduce_window_max_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)


def reduce_window_min(operand: ArrayLike, window_dimensions: Sequence[int],
                      window_strides: Sequence[int], padding: Any,
                      base_dilation: Sequence[int] | None = None,
                      window_dilation: Sequence[int] | None = None) -> Array:
    """The minimum of each window of ``operand`` (padding with the dtype's highest value)."""
    return _bind_monoid(reduce_window_min_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)


def _vjp_lhs_padding(in_shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                     out_shape: Sequence[int], padding: Pads, base_dilation: Sequence[int],
                     window_dilation: Sequence[int]) -> list[tuple[int, int]]:
    """The padding that turns the cotangent of a windowed sum back into the
    operand's shape (the "full" correlation of the dilated cotangent)."""
    pads = []
    for d, w, s, o, (lo, _), b, r in zip(in_shape, window, strides, out_shape, padding,
                                          base_dilation, window_dilation):
        in_d, w_d, out_d = _dilate(d, b), _dilate(w, r), _dilate(o, s)
        before = w_d - lo - 1
        pads.append((before, in_d + w_d - 1 - out_d - before))
    return pads


def _reduce_window_sum_transpose(ct: Any, operand: Any, *, window_dimensions: tuple[int, ...],
                                 window_strides: tuple[int, ...], padding: Pads,
                                 base_dilation: tuple[int, ...],
                                 window_dilation: tuple[int, ...]) -> list[Any]:
    in_shape = operand.aval.shape
    ct_shape = get_aval(ct).shape
    pads = _vjp_lhs_padding(in_shape, window_dimensions, window_strides, ct_shape, padding,
                            base_dilation, window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = st.pad(ct, np.zeros((), get_aval(ct).dtype), config)
    ones = (1,) * len(in_shape)
    out = reduce_window_sum_p.bind(
        padded, window_dimensions=window_dimensions, window_strides=base_dilation,
        padding=((0, 0),) * len(in_shape), base_dilation=ones, window_dilation=window_dilation)
    return [out]


helpers.deflinear(reduce_window_sum_p, _reduce_window_sum_transpose)


def _lowest(dtype: np.dtype[Any]) -> Any:
    return dtypes.lowest(dtype)


def _highest(dtype: np.dtype[Any]) -> Any:
    return dtypes.highest(dtype)


def _window_slices(x: Any, fill: Any, out_shape: Sequence[int], params: dict[str, Any]
                   ) -> list[Any]:
    """``x`` dilated and padded (with ``fill``), then one strided slice per
    window position: slice ``k`` holds the ``k``-th element of every window."""
    config = [(lo, hi, b - 1) for (lo, hi), b in zip(params["padding"], params["base_dilation"])]
    padded = st.pad(x, fill, config)
    strides = params["window_strides"]
    out = []
    for offset in itertools.product(*(range(w) for w in params["window_dimensions"])):
        start = [k * r for k, r in zip(offset, params["window_dilation"])]
        limit = [s + (n - 1) * t + 1 if n else s for s, n, t in zip(start, out_shape, strides)]
        out.append(st.slice(padded, start, limit, strides))
    return out


def _gather_by_chooser(t: Any, operand: Any, better: Callable[[Any, Any], Any],
                       fill: Any, params: dict[str, Any]) -> Any:
    """The tangent at the first position of each window that ``better`` picks,
    written with pad/slice/select (linear in ``t``)."""
    out_shape = _out_shape(get_aval(operand), params)
    values = _window_slices(operand, fill, out_shape, params)
    tangents = _window_slices(t, np.zeros((), get_aval(t).dtype), out_shape, params)
    best, best_t = values[0], tangents[0]
    for v, tv in zip(values[1:], tangents[1:]):
        pick = better(v, best)
        best = ew.select(pick, v, best)
        best_t = ew.select(pick, tv, best_t)
    return best_t


def _chooser_jvp(prim: Primitive, select_prim: Primitive) -> Callable[..., Any]:
    def rule(primals: Any, tangents: Any, **params: Any) -> Any:
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        if helpers.is_zero(t):
            return out, helpers.zero_from_primal(out)
        dilated = any(b != 1 for b in params["base_dilation"]) or \
            any(r != 1 for r in params["window_dilation"])
        if not dilated:
            return out, select_and_gather_add_p.bind(t, x, select_prim=select_prim, **params)
        dtype = get_aval(x).dtype
        if select_prim is ew.ge_p:
            return out, _gather_by_chooser(t, x, ew.gt, _lowest(dtype), params)
        return out, _gather_by_chooser(t, x, ew.lt, _highest(dtype), params)
    return rule


# --- select_and_gather_add / select_and_scatter_add ---------------------------------------
select_and_gather_add_p = Primitive("select_and_gather_add")
select_and_scatter_add_p = Primitive("select_and_scatter_add")


def _check_select_prim(name: str, select_prim: Any) -> None:
    if select_prim is not ew.ge_p and select_prim is not ew.le_p:
        raise TypeError(f"{name}: select_prim must be lax.ge_p or lax.le_p, got {select_prim!r}")


@select_and_gather_add_p.def_abstract_eval
def _select_and_gather_add_abstract_eval(tangents: ShapedArray, operand: ShapedArray, *,
                                         select_prim: Primitive, **params: Any) -> ShapedArray:
    name = "select_and_gather_add"
    _check_select_prim(name, select_prim)
    if tangents.shape != operand.shape:
        raise TypeError(f"{name}: tangents and operand must have the same shape, got "
                        f"{tangents.shape} and {operand.shape}")
    _check_params(name, operand.shape, params["window_dimensions"], params["window_strides"],
                  params["padding"], params["base_dilation"], params["window_dilation"])
    return ShapedArray(_out_shape(operand, params), tangents.dtype, tangents.weak_type)


def select_and_gather_add(tangents: ArrayLike, operand: ArrayLike, select_prim: Primitive,
                          window_dimensions: Sequence[int], window_strides: Sequence[int],
                          padding: Any, base_dilation: Sequence[int] | None = None,
                          window_dilation: Sequence[int] | None = None) -> Array:
    """For each window of ``operand``, the element of ``tangents`` at the position
    ``select_prim`` (``ge_p``: the first maximum, ``le_p``: the first minimum) picks."""
    params = _window_params("select_and_gather_add", get_aval(operand).shape,
                            window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    return select_and_gather_add_p.bind(tangents, operand, select_prim=select_prim, **params)


def _select_and_gather_add_jvp(primals: Any, tangents: Any, **params: Any) -> Any:
    (t, x), (tdot, _) = primals, tangents
    out = select_and_gather_add_p.bind(t, x, **params)
    if helpers.is_zero(tdot):
        return out, helpers.zero_from_primal(out)
    return out, select_and_gather_add_p.bind(tdot, x, **params)


def _select_and_gather_add_transpose(ct: Any, t: Any, operand: Any, *, select_prim: Primitive,
                                     window_dimensions: tuple[int, ...],
                                     window_strides: tuple[int, ...], padding: Pads,
                                     base_dilation: tuple[int, ...],
                                     window_dilation: tuple[int, ...]) -> list[Any]:
    if helpers.is_undefined_primal(operand):
        raise ValueError("select_and_gather_add is linear in its tangents only; it cannot be "
                         "transposed with respect to operand")
    if any(b != 1 for b in base_dilation) or any(r != 1 for r in window_dilation):
        raise ValueError("select_and_gather_add: the transpose needs base_dilation and "
                         "window_dilation of all ones (the derivatives of the dilated "
                         "reduce_window_max/min do not use this primitive), got "
                         f"base_dilation={base_dilation}, window_dilation={window_dilation}")
    if type(ct) is helpers.Zero:
        return [helpers.Zero(t.aval), None]
    out = select_and_scatter_add_p.bind(ct, operand, select_prim=select_prim,
                                        window_dimensions=window_dimensions,
                                        window_strides=window_strides, padding=padding)
    return [out, None]


def _two_operand_batch(prim: Primitive) -> Callable[..., Any]:
    def rule(args: Any, dims: Any, **params: Any) -> Any:
        size = helpers.batch_size(args, dims)
        a, b = (helpers.bdim_at_front(x, d, size) for x, d in zip(args, dims))
        return prim.bind(a, b, **_insert_batch_params(params, 0)), 0
    return rule


jvp_rules[select_and_gather_add_p] = _select_and_gather_add_jvp
transpose_rules[select_and_gather_add_p] = _select_and_gather_add_transpose
batching_rules[select_and_gather_add_p] = _two_operand_batch(select_and_gather_add_p)


@select_and_scatter_add_p.def_abstract_eval
def _select_and_scatter_add_abstract_eval(source: ShapedArray, operand: ShapedArray, *,
                                          select_prim: Primitive,
                                          window_dimensions: tuple[int, ...],
                                          window_strides: tuple[int, ...],
                                          padding: Pads) -> ShapedArray:
    name = "select_and_scatter_add"
    _check_select_prim(name, select_prim)
    nd = len(operand.shape)
    _check_params(name, operand.shape, window_dimensions, window_strides, padding,
                  (1,) * nd, (1,) * nd)
    expected = reduce_window_shape_tuple(operand.shape, window_dimensions, window_strides,
                                         padding)
    if source.shape != expected:
        raise TypeError(f"{name}: source must have the shape of the windowed reduction of "
                        f"operand, {expected}, got {source.shape}")
    return ShapedArray(operand.shape, source.dtype, source.weak_type)


def select_and_scatter_add(source: ArrayLike, operand: ArrayLike, select_prim: Primitive,
                           window_dimensions: Sequence[int], window_strides: Sequence[int],
                           padding: Any) -> Array:
    """Adds each element of ``source`` at the position of its window of
    ``operand`` that ``select_prim`` picks (the transpose of ``select_and_gather_add``)."""
    params = _window_params("select_and_scatter_add", get_aval(operand).shape,
                            window_dimensions, window_strides, padding, None, None)
    del params["base_dilation"], params["window_dilation"]
    return select_and_scatter_add_p.bind(source, operand, select_prim=select_prim, **params)


def _select_and_scatter_add_jvp(primals: Any, tangents: Any, **params: Any) -> Any:
    (s, x), (sdot, _) = primals, tangents
    out = select_and_scatter_add_p.bind(s, x, **params)
    if helpers.is_zero(sdot):
        return out, helpers.zero_from_primal(out)
    return out, select_and_scatter_add_p.bind(sdot, x, **params)


def _select_and_scatter_add_transpose(ct: Any, source: Any, operand: Any, *,
                                      select_prim: Primitive,
                                      window_dimensions: tuple[int, ...],
                                      window_strides: tuple[int, ...],
                                      padding: Pads) -> list[Any]:
    if helpers.is_undefined_primal(operand):
        raise ValueError("select_and_scatter_add is linear in its source only; it cannot be "
                         "transposed with respect to operand")
    if type(ct) is helpers.Zero:
        return [helpers.Zero(source.aval), None]
    ones = (1,) * len(window_dimensions)
    out = select_and_gather_add_p.bind(ct, operand, select_prim=select_prim,
                                       window_dimensions=window_dimensions,
                                       window_strides=window_strides, padding=padding,
                                       base_dilation=ones, window_dilation=ones)
    return [out, None]


jvp_rules[select_and_scatter_add_p] = _select_and_scatter_add_jvp
transpose_rules[select_and_scatter_add_p] = _select_and_scatter_add_transpose
batching_rules[select_and_scatter_add_p] = _two_operand_batch(select_and_scatter_add_p)

jvp_rules[reduce_window_max_p] = _chooser_jvp(reduce_window_max_p, ew.ge_p)
jvp_rules[reduce_window_min_p] = _chooser_jvp(reduce_window_min_p, ew.le_p)


# --- the general reduce_window ----------------------------------------------------------------
reduce_window_p = Primitive("reduce_window", multiple_results=True)


@reduce_window_p.def_abstract_eval
def _reduce_window_abstract_eval(*avals: ShapedArray, jaxpr: ClosedJaxpr,
                                 **params: Any) -> list[ShapedArray]:
    name = "reduce_window"
    n = len(avals) // 2
    operands, inits = avals[:n], avals[n:]
    for i, (x, init) in enumerate(zip(operands, inits)):
        if x.shape != operands[0].shape:
            raise TypeError(f"{name}: every operand must have the same shape, got "
                            f"{[o.shape for o in operands]}")
        if init.shape:
            raise TypeError(f"{name}: init_value[{i}] must be a scalar, got shape {init.shape}")
        if init.dtype != x.dtype:
            raise TypeError(f"{name}: init_value[{i}] has dtype {init.dtype.name} but "
                            f"operand[{i}] has dtype {x.dtype.name}")
    body_out = [(a.shape, a.dtype) for a in jaxpr.out_avals]
    expected = [((), a.dtype) for a in inits]
    if body_out != expected:
        raise TypeError(f"{name}: the computation must return scalars of the operands' dtypes "
                        f"{[str(d) for _, d in expected]}, got "
                        f"{[a.str_short() for a in jaxpr.out_avals]}")
    _check_params(name, operands[0].shape, params["window_dimensions"],
                  params["window_strides"], params["padding"], params["base_dilation"],
                  params["window_dilation"])
    shape = _out_shape(operands[0], params)
    return [ShapedArray(shape, x.dtype, False) for x in operands]


def _trace_flat(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
                traced_for: str, arg_names: Sequence[str | None], n_out: int) -> ClosedJaxpr:
    dbg = JaxprDebugInfo(traced_for, None, tuple(arg_names), (None,) * n_out)
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrap_init(fun), list(in_avals),
                                                 debug_info=dbg)
    if any(isinstance(c, core.Tracer) for c in consts):
        raise TypeError(f"{traced_for}: the computation closes over a traced value; pass it "
                        "as an operand instead (the body of a windowed reduction may only "
                        "close over constants)")
    return ClosedJaxpr(jaxpr, list(consts))


def _reduce_window_jvp(primals: Any, tangents: Any, *, jaxpr: ClosedJaxpr,
                       **params: Any) -> Any:
    """The tangent folds the JVP of the body over the window positions (one
    strided slice per position, padding holding the init value and its
    tangent), so it is linear in the tangents and transposes: reverse mode
    works for any body, not only the monoids."""
    n = len(primals) // 2
    outs = reduce_window_p.bind(*primals, jaxpr=jaxpr, **params)
    if all(helpers.is_zero(t) for t in tangents):
        return outs, [helpers.zero_from_primal(o) for o in outs]
    out_shape = get_aval(outs[0]).shape
    size = math.prod(out_shape)
    operands, inits = primals[:n], primals[n:]
    op_t = [_instantiate(t, x) for t, x in zip(tangents[:n], operands)]
    init_t = [_instantiate(t, x) for t, x in zip(tangents[n:], inits)]
    if size == 0:
        return outs, [zeros_like_aval(tangent_aval(get_aval(o))) for o in outs]
    jvp_body, _ = ad.jvp_jaxpr(jaxpr, [True] * (2 * n), True)
    body, _ = batching.batch_jaxpr(jvp_body, size, [True] * (4 * n), True)
    flat = (size,)

    def slices(xs: Sequence[Any], fills: Sequence[Any]) -> list[list[Any]]:
        return [[st.reshape(v, flat) for v in _window_slices(x, f, out_shape, params)]
                for x, f in zip(xs, fills)]

    x_p, x_t = slices(operands, inits), slices(op_t, init_t)
    acc_p = [broadcast_in_dim(i, flat, ()) for i in inits]
    acc_t = [broadcast_in_dim(i, flat, ()) for i in init_t]
    for k in range(len(x_p[0])):
        res = core.eval_jaxpr(body.jaxpr, body.consts, *acc_p, *[x[k] for x in x_p],
                              *acc_t, *[x[k] for x in x_t])
        acc_p, acc_t = list(res[:n]), list(res[n:])
    return outs, [st.reshape(t, out_shape) for t in acc_t]


def _instantiate(t: Any, x: Any) -> Any:
    if helpers.is_zero(t):
        return zeros_like_aval(tangent_aval(get_aval(x)))
    return helpers.instantiate(t)


def _reduce_window_batch(args: Any, dims: Any, *, jaxpr: ClosedJaxpr, **params: Any) -> Any:
    n = len(args) // 2
    if any(d is not None for d in dims[n:]):
        raise ValueError("reduce_window: init_values cannot be batched (vmap over an "
                         "init_value); pass an unbatched init value and combine the batched "
                         "one with the result")
    size = helpers.batch_size(args, dims)
    operands = [helpers.bdim_at_front(x, d, size) for x, d in zip(args[:n], dims[:n])]
    outs = reduce_window_p.bind(*operands, *args[n:], jaxpr=jaxpr,
                                **_insert_batch_params(params, 0))
    return outs, [0] * n


jvp_rules[reduce_window_p] = _reduce_window_jvp
batching_rules[reduce_window_p] = _reduce_window_batch


def _concrete_scalar(x: Any) -> np.ndarray[Any, Any] | None:
    """The value of a scalar ``x`` known at trace time (a constant, a runtime
    array, a tracer whose transformation knows its value), else None."""
    if isinstance(x, core.Tracer):
        x = x.to_concrete_value()
        if x is None:
            return None
    if not isinstance(x, (int, float, bool, complex, np.generic, np.ndarray)) and \
            not hasattr(x, "__array__"):
        return None
    try:
        value = np.asarray(x)
    except (TypeError, ValueError):
        return None
    return value if value.ndim == 0 else None


def _monoid_for(computation: Callable[..., Any], init: Any, dtype: np.dtype[Any]
                ) -> Primitive | None:
    """The monoid primitive ``computation`` with ``init`` is, if any."""
    known = _concrete_scalar(init)
    if known is None:
        return None
    value = known.astype(dtype)
    if computation is ew.add and value == 0 and dtype in common.NUM:
        return reduce_window_sum_p
    if computation is ew.max and value == _lowest(dtype):
        return reduce_window_max_p
    if computation is ew.min and value == _highest(dtype):
        return reduce_window_min_p
    return None


def reduce_window(operand: Any, init_value: Any, computation: Callable[..., Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int],
                  padding: Any, base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """Reduces each window of ``operand`` (an array or a pytree of arrays of one
    shape) with ``computation(acc, x)``, starting from ``init_value`` (the same
    structure of scalars). ``lax.add`` with 0, ``lax.max`` with the lowest value
    and ``lax.min`` with the highest are ``reduce_window_sum/max/min``."""
    flat_ops, tree = tu.tree_flatten(operand)
    flat_inits, init_tree = tu.tree_flatten(init_value)
    if tree != init_tree:
        raise TypeError(f"reduce_window: operand and init_value must have the same structure, "
                        f"got {tree} and {init_tree}")
    if not flat_ops:
        raise TypeError("reduce_window: operand must contain at least one array")
    shape = get_aval(flat_ops[0]).shape
    params = _window_params("reduce_window", shape, window_dimensions, window_strides,
                            padding, base_dilation, window_dilation, flat_ops[0])
    if len(flat_ops) == 1:
        dtype = get_aval(flat_ops[0]).dtype
        monoid = _monoid_for(computation, flat_inits[0], dtype)
        if monoid is not None:
            return tu.tree_unflatten(tree, [monoid.bind(flat_ops[0], **params)])
    inits = []
    for x, init in zip(flat_ops, flat_inits):
        dtype = get_aval(x).dtype
        if isinstance(init, (int, float, bool, complex, np.generic, np.ndarray)):
            init = np.asarray(init, dtype)
        inits.append(init)
    scalars = [ShapedArray((), get_aval(x).dtype) for x in flat_ops]
    k = len(flat_ops)

    def body(*args: Any) -> list[Any]:
        acc = tu.tree_unflatten(tree, list(args[:k]))
        x = tu.tree_unflatten(tree, list(args[k:]))
        out_flat, out_tree = tu.tree_flatten(computation(acc, x))
        if out_tree != tree:
            raise TypeError(f"reduce_window: the computation must return the structure of "
                            f"init_value, {tree}, got {out_tree}")
        return [convert_element_type(o, s.dtype) if get_aval(o).dtype != s.dtype
                and get_aval(o).weak_type else o for o, s in zip(out_flat, scalars)]

    names = [f"acc[{i}]" if k > 1 else "acc" for i in range(k)] + \
        [f"x[{i}]" if k > 1 else "x" for i in range(k)]
    closed = _trace_flat(body, scalars * 2, "reduce_window", names, k)
    outs = reduce_window_p.bind(*flat_ops, *inits, jaxpr=closed, **params)
    return tu.tree_unflatten(tree, list(outs))
