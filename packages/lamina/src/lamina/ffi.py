"""``lamina.ffi``: calling compiled kernels through XLA's foreign function interface.

A kernel written against XLA's FFI headers (:func:`include_dir`) and
registered by name (:func:`register_ffi_target`, its function pointer wrapped
by :func:`pycapsule`) is called from lamina with :func:`ffi_call`:
``ffi_call("name", result_shape_dtypes)(*arrays, **attributes)``. The call
is the primitive ``ffi_call``, which runs eagerly, under ``jit``, and under
``vmap`` as its ``vmap_method`` says; it has no derivative (wrap it in
``custom_jvp``/``custom_vjp``). :func:`ffi_lowering` is the lowering rule
for a primitive of one's own that is a single such call.

Layouts given to :func:`ffi_call` are major-to-minor (``(0, 1)`` is row-major
for a matrix, ``(1, 0)`` column-major); those given to :func:`ffi_lowering`
are XLA's minor-to-major, as in JAX.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jaxlib
import numpy as np
from jaxlib import xla_client

from lamina_interpreters_pxla.layouts import Layout
from lamina_mlir_lowering import custom_call
from lamina_mlir_lowering.rule_table import register_lowering
from lamina_mlir_lowering.rules import LoweringRule, LoweringRuleContext
from lamina_mlir_lowering.types import Value
from lamina_tracing_core import batching
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.callbacks import batch_axis_first
from lamina_tracing_core.control_flow.scan import scan
from lamina_tracing_core.effects import Effect, Effects, no_effects
from lamina_tracing_core.primitives import Primitive

from lamina.callbacks import flat_operands

__all__ = ["build_ffi_lowering_function", "ffi_call", "ffi_lowering", "include_dir",
           "pycapsule", "register_ffi_target", "register_ffi_target_as_batch_partitionable",
           "register_ffi_type", "register_ffi_type_id"]

#: the ``vmap_method`` values :func:`ffi_call` accepts (None: not vmappable)
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)

FfiLayout = Sequence[int] | Layout | None


# --- registering kernels --------------------------------------------------------------
def register_ffi_target(name: str, fn: Any, platform: str = "cpu", api_version: int = 1,
                        **kwargs: Any) -> None:
    """Registers the kernel ``fn`` (a PyCapsule holding its function pointer,
    or a dict of FFI stage name -> PyCapsule) as the custom-call target
    ``name`` on ``platform``. ``api_version`` 1 (the default) is the typed
    FFI, 0 the legacy custom-call ABI; other keyword arguments go to
    jaxlib's ``register_custom_call_target``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_ffi_target: name must be a non-empty str, got {name!r}")
    xla_client.register_custom_call_target(name, fn, platform, api_version, **kwargs)


def register_ffi_type_id(name: str, obj: Any, platform: str = "cpu") -> None:
    """Not available with this jaxlib (as in JAX 0.10.2): raises ``ValueError``;
    register the type with :func:`register_ffi_type`."""
    raise ValueError("register_ffi_type_id is not supported after jaxlib version 381; "
                     "use register_ffi_type")


def register_ffi_type(name: str, type_registration: Mapping[str, Any],
                      platform: str = "cpu") -> None:
    """Registers the user type ``name`` of FFI kernels on ``platform``:
    ``type_registration`` is ``{"type_id": capsule, "type_info": capsule}``
    (``type_info`` optional)."""
    if "type_id" not in type_registration:
        raise ValueError(f"register_ffi_type: type_registration for {name!r} needs a "
                         f"'type_id' entry, got keys {sorted(type_registration)}")
    xla_client.register_custom_type(name, dict(type_registration), platform=platform)


def register_ffi_target_as_batch_partitionable(name: str) -> None:
    """Declares that the target ``name`` may be split along its leading
    (batch) dimension when its operands are sharded along it."""
    xla_client.register_custom_call_as_batch_partitionable(name)


def pycapsule(funcptr: Any) -> Any:
    """A PyCapsule wrapping the ctypes function pointer ``funcptr`` (e.g. a
    symbol of a library loaded with ``ctypes.cdll.LoadLibrary``), the form
    :func:`register_ffi_target` takes."""
    address = ctypes.cast(funcptr, ctypes.c_void_p).value
    if not address:
        raise ValueError(f"pycapsule: {funcptr!r} is a null function pointer")
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new_capsule(address, None, None)


def include_dir() -> str:
    """The folder of the C++ headers jaxlib ships (``xla/ffi/api/ffi.h``, ...)
    to compile FFI kernels against."""
    folder = (os.path.dirname(os.path.abspath(jaxlib.__file__)) if jaxlib.__file__
              else list(jaxlib.__path__)[0])
    return os.path.join(folder, "include")


# --- layouts --------------------------------------------------------------------------
def _minor_to_major(aval: ShapedArray, layout: FfiLayout, *, given_major_to_minor: bool
                    ) -> tuple[int, ...]:
    """``layout`` in XLA's minor-to-major order; None is row-major."""
    if layout is None:
        return tuple(reversed(range(aval.ndim)))
    if isinstance(layout, Layout):
        if layout.tiling:
            raise ValueError("ffi: the FFI does not support layouts with tiling")
        return tuple(reversed(layout.major_to_minor))
    order = tuple(int(d) for d in layout)
    return tuple(reversed(order)) if given_major_to_minor else order


# --- the primitive ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class FfiEffect(Effect):
    """An FFI call with side effects: kept even when its results are unused."""

    def __str__(self) -> str:
        return "FFI"


_FFI_EFFECT = FfiEffect()

ffi_call_p = Primitive("ffi_call", multiple_results=True)
"""``ffi_call_p.bind(*operands, target_name=, result_avals=, vmap_method=,
has_side_effect=, input_layouts=, output_layouts=, input_output_aliases=,
custom_call_api_version=, legacy_backend_config=, attributes=)`` (layouts
minor-to-major; ``attributes`` a sorted tuple of hashable name/value pairs)."""


@ffi_call_p.def_abstract_eval
def _abstract_eval(*avals: ShapedArray, result_avals: Sequence[ShapedArray],
                   **_: Any) -> list[ShapedArray]:
    return list(result_avals)


@ffi_call_p.def_effects
def _effects(*, has_side_effect: bool, **_: Any) -> Effects:
    return frozenset({_FFI_EFFECT}) if has_side_effect else no_effects


def _not_differentiable(*_: Any, target_name: str, **__: Any) -> Any:
    raise ValueError(f"The FFI call to `{target_name}` cannot be differentiated. "
                     "You can use `custom_jvp` or `custom_vjp` to add support.")


ffi_call_p.def_jvp(lambda primals, tangents, **params: _not_differentiable(**params))
ffi_call_p.def_transpose(lambda cts, *args, **params: _not_differentiable(**params))


def _batch(args: Sequence[Any], dims: Sequence[int | None], *, vmap_method: str | None,
           result_avals: Sequence[ShapedArray], **params: Any
           ) -> tuple[list[Any], list[int]]:
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _batch_sequentially(args, dims, vmap_method, result_avals, params)
    if vmap_method not in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        raise NotImplementedError(
            f"vmap of the FFI call to `{params['target_name']}`: vmap_method must be one of "
            "'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all' or "
            f"'legacy_vectorized' (given to ffi_call); got vmap_method={vmap_method!r}")
    size = next(int(get_aval(x).shape[d]) for x, d in zip(args, dims) if d is not None)
    operands = batch_axis_first(args, dims, size, vmap_method)
    in_layouts = tuple(
        lay if (vmap_method == "legacy_vectorized" and d is None) else _with_batch_axis(lay)
        for lay, d in zip(params.pop("input_layouts"), dims))
    out_layouts = tuple(_with_batch_axis(lay) for lay in params.pop("output_layouts"))
    batched_avals = tuple(a.update(shape=(size, *a.shape)) for a in result_avals)
    outs = ffi_call_p.bind(*operands, vmap_method=vmap_method, result_avals=batched_avals,
                           input_layouts=in_layouts, output_layouts=out_layouts, **params)
    return list(outs), [0] * len(outs)


def _with_batch_axis(layout: Sequence[int]) -> tuple[int, ...]:
    """A minor-to-major layout with a new leading axis, the most major (last)."""
    return (*(n + 1 for n in layout), 0)


def _batch_sequentially(args: Sequence[Any], dims: Sequence[int | None], vmap_method: str,
                        result_avals: Sequence[ShapedArray], params: dict[str, Any]
                        ) -> tuple[list[Any], list[int]]:
    """One call per batch element: a ``scan`` over the batched operands."""
    batched = [(i, d) for i, d in enumerate(dims) if d is not None]
    xs = [batching.moveaxis(args[i], d, 0) for i, d in batched]

    def one(carry: tuple[()], slices: list[Any]) -> tuple[tuple[()], Any]:
        operands = list(args)
        for (i, _), x in zip(batched, slices):
            operands[i] = x
        return carry, ffi_call_p.bind(*operands, vmap_method=vmap_method,
                                      result_avals=tuple(result_avals), **params)

    _, outs = scan(one, (), xs, unroll=vmap_method == "sequential_unrolled")
    return list(outs), [0] * len(outs)


ffi_call_p.def_batching(_batch)


def _lower(ctx: LoweringRuleContext, *operands: Value, target_name: str,
           has_side_effect: bool, input_layouts: Sequence[Sequence[int]],
           output_layouts: Sequence[Sequence[int]],
           input_output_aliases: Sequence[tuple[int, int]], custom_call_api_version: int,
           legacy_backend_config: str | None, attributes: Sequence[tuple[str, Any]],
           **_: Any) -> list[Value]:
    return custom_call.ffi_call(
        ctx, target_name, operands, ctx.avals_out, operand_layouts=input_layouts,
        result_layouts=output_layouts, operand_output_aliases=dict(input_output_aliases),
        has_side_effect=has_side_effect, api_version=custom_call_api_version,
        legacy_backend_config=legacy_backend_config, **_unwrap_attributes(attributes))


register_lowering(ffi_call_p, _lower)


# --- attributes as hashable params -----------------------------------------------------------
class _FrozenArray:
    """A NumPy array attribute, compared and hashed by value (params must hash)."""

    __slots__ = ("value", "_key")

    def __init__(self, value: np.ndarray[Any, Any]):
        self.value = np.array(value, copy=True)
        self.value.flags.writeable = False
        self._key = (self.value.dtype.str, self.value.shape, self.value.tobytes())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FrozenArray) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return repr(self.value)


class _FrozenDict:
    """A dict attribute, compared and hashed by value."""

    __slots__ = ("items",)

    def __init__(self, value: Mapping[str, Any]):
        self.items = tuple(sorted((k, _frozen("ffi_call", k, v)) for k, v in value.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FrozenDict) and self.items == other.items

    def __hash__(self) -> int:
        return hash(self.items)

    def __repr__(self) -> str:
        return repr(dict(self.items))


def _frozen(api: str, name: str, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return _FrozenArray(value)
    if isinstance(value, Mapping):
        return _FrozenDict(value)
    try:
        hash(value)
    except TypeError as e:
        raise TypeError(f"{api}: non-hashable keyword argument {name}: {value!r}") from e
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, _FrozenArray):
        return value.value
    if isinstance(value, _FrozenDict):
        return {k: _thawed(v) for k, v in value.items}
    return value


def _unwrap_attributes(attributes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    return {name: _thawed(value) for name, value in attributes}


# --- the user function -----------------------------------------------------------------------
def _result_avals(result_shape_dtypes: Sequence[Any]) -> tuple[ShapedArray, ...]:
    avals = []
    for i, result in enumerate(result_shape_dtypes):
        if not hasattr(result, "shape") or not hasattr(result, "dtype"):
            raise ValueError("ffi_call: every element of result_shape_dtypes must have "
                             f"'shape' and 'dtype' attributes; got {result!r} at position {i}")
        # the kernel's dtype as declared: a float64 result stays one without x64
        avals.append(ShapedArray(tuple(int(d) for d in result.shape), np.dtype(result.dtype)))
    return tuple(avals)


def _static_layouts(what: str, avals: Sequence[ShapedArray],
                    layouts: Sequence[FfiLayout] | None) -> tuple[tuple[int, ...], ...]:
    """``what`` is ``"input"`` or ``"output"``."""
    if layouts is None:
        return tuple(_minor_to_major(a, None, given_major_to_minor=True) for a in avals)
    if len(layouts) != len(avals):
        counted = "input arguments" if what == "input" else "outputs"
        raise ValueError(f"ffi_call: the number of {counted} ({len(avals)}) must equal the "
                         f"number of {what} layouts ({len(layouts)})")
    return tuple(_minor_to_major(a, lay, given_major_to_minor=True)
                 for a, lay in zip(avals, layouts))


def _check_aliases(aliases: Mapping[int, int], in_avals: Sequence[ShapedArray],
                   out_avals: Sequence[ShapedArray], in_layouts: Sequence[tuple[int, ...]],
                   out_layouts: Sequence[tuple[int, ...]]) -> tuple[tuple[int, int], ...]:
    checked = []
    for i, o in sorted((int(i), int(o)) for i, o in aliases.items()):
        mapping = f"input_output_aliases mapping '{i}:{o}'"
        if not 0 <= i < len(in_avals):
            raise ValueError(f"ffi_call: {mapping} has input index {i} outside the range "
                             f"[0, {len(in_avals)})")
        if not 0 <= o < len(out_avals):
            raise ValueError(f"ffi_call: {mapping} has output index {o} outside the range "
                             f"[0, {len(out_avals)})")
        a, b = in_avals[i], out_avals[o]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(f"ffi_call: {mapping} aliases an input of type {a.str_short()} "
                             f"to an output of a different type {b.str_short()}")
        if in_layouts[i] != out_layouts[o]:
            raise ValueError(f"ffi_call: {mapping} aliases an input of layout {in_layouts[i]} "
                             f"to an output of a different layout {out_layouts[o]}")
        checked.append((i, o))
    return tuple(checked)


def ffi_call(target_name: str, result_shape_dtypes: Any, *, has_side_effect: bool = False,
             vmap_method: str | None = None, input_layouts: Sequence[FfiLayout] | None = None,
             output_layouts: FfiLayout | Sequence[FfiLayout] | None = None,
             input_output_aliases: Mapping[int, int] | None = None,
             custom_call_api_version: int = 4,
             legacy_backend_config: str | None = None) -> Callable[..., Any]:
    """A function calling the FFI target ``target_name``: ``f(*arrays,
    **attributes)`` passes the arrays as the kernel's buffers and the keyword
    arguments as its named attributes (bools, ints, floats, strs, NumPy
    scalars and arrays, dicts of those), and returns results of
    ``result_shape_dtypes`` (one object with ``shape`` and ``dtype``, or a
    list/tuple of them: the results then come back as a list/tuple).

    ``has_side_effect`` keeps the call even when its results are unused.
    ``vmap_method`` says what ``vmap`` does: ``'sequential'`` (a loop of
    calls; ``'sequential_unrolled'`` unrolls it), ``'expand_dims'`` (one call,
    unbatched operands given a leading axis of 1), ``'broadcast_all'`` (one
    call, every operand batched), ``'legacy_vectorized'`` (one call,
    unbatched operands as they are); None refuses ``vmap``.
    ``input_layouts``/``output_layouts`` are per buffer, major-to-minor
    (None: row-major). ``input_output_aliases`` maps an input index to the
    output it is updated in place into. ``custom_call_api_version`` below 4
    calls a legacy custom-call target, whose opaque configuration string is
    ``legacy_backend_config`` (it takes no attributes).
    """
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"ffi_call: vmap_method must be one of {list(VMAP_METHODS)}, "
                         f"got {vmap_method!r}")
    if custom_call_api_version >= 4 and legacy_backend_config is not None:
        raise ValueError("ffi_call: legacy_backend_config needs custom_call_api_version < 4; "
                         f"got {custom_call_api_version}")
    many = isinstance(result_shape_dtypes, (list, tuple))
    result_avals = _result_avals(result_shape_dtypes if many else [result_shape_dtypes])
    out_layout_list = output_layouts if many else (None if output_layouts is None
                                                   else [output_layouts])
    static_out_layouts = _static_layouts("output", result_avals,
                                         out_layout_list)  # type: ignore[arg-type]

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs and custom_call_api_version < 4:
            raise ValueError(f"ffi_call({target_name!r}): attributes "
                             f"({', '.join(sorted(kwargs))}) need a custom call API version "
                             f"of at least 4; got {custom_call_api_version}")
        operands, _ = flat_operands("ffi_call", args, {})
        if len(operands) != len(args):
            raise TypeError(f"ffi_call({target_name!r}): positional arguments must be arrays, "
                            "not pytrees")
        in_avals = [get_aval(x) for x in operands]
        static_in_layouts = _static_layouts("input", in_avals, input_layouts)
        aliases = _check_aliases(input_output_aliases or {}, in_avals, result_avals,
                                 static_in_layouts, static_out_layouts)
        attributes = tuple(sorted((k, _frozen("ffi_call", k, v)) for k, v in kwargs.items()))
        outs = ffi_call_p.bind(
            *operands, target_name=target_name, result_avals=result_avals,
            vmap_method=vmap_method, has_side_effect=has_side_effect,
            input_layouts=static_in_layouts, output_layouts=static_out_layouts,
            input_output_aliases=aliases, custom_call_api_version=custom_call_api_version,
            legacy_backend_config=legacy_backend_config, attributes=attributes)
        if not many:
            return outs[0]
        return tuple(outs) if isinstance(result_shape_dtypes, tuple) else list(outs)

    call.__name__ = f"ffi_call[{target_name}]"
    return call


# --- lowering rules of one's own primitives ---------------------------------------------------
def build_ffi_lowering_function(call_target_name: str, *,
                                operand_layouts: Sequence[FfiLayout] | None = None,
                                result_layouts: Sequence[FfiLayout] | None = None,
                                backend_config: Mapping[str, Any] | str | None = None,
                                skip_ffi_layout_processing: bool = False,
                                **lowering_args: Any) -> Callable[..., list[Value]]:
    """A function ``(ctx, *operands, **params) -> results`` emitting one call of
    ``call_target_name``: the equation's params (and the entries of a dict
    ``backend_config``) are the kernel's attributes. Layouts here are XLA's
    minor-to-major (None: row-major). ``lowering_args`` may set
    ``api_version`` (default 4; below 4 ``backend_config`` is the opaque
    string), ``has_side_effect`` and ``operand_output_aliases``."""
    api_version = int(lowering_args.pop("api_version", 4))
    if api_version >= 4 and backend_config is not None and not isinstance(backend_config,
                                                                          Mapping):
        raise ValueError("ffi_lowering: with api_version >= 4, backend_config must be a dict")
    unknown = set(lowering_args) - {"has_side_effect", "operand_output_aliases"}
    if unknown:
        raise TypeError(f"ffi_lowering: unexpected arguments {sorted(unknown)}")

    def lower(ctx: LoweringRuleContext, *operands: Value, **params: Any) -> list[Value]:
        if api_version >= 4:
            attributes = {**dict(backend_config or {}), **params}  # type: ignore[arg-type]
            legacy = None
        else:
            if params:
                raise ValueError("ffi_lowering: attributes need a custom call API version of "
                                 f"at least 4; got api_version={api_version}")
            attributes, legacy = {}, backend_config
        in_layouts = out_layouts = None
        if not skip_ffi_layout_processing:
            in_layouts = _rule_layouts(ctx.avals_in, operand_layouts)
            out_layouts = _rule_layouts(ctx.avals_out, result_layouts)
        return custom_call.ffi_call(
            ctx, call_target_name, operands, ctx.avals_out, operand_layouts=in_layouts,
            result_layouts=out_layouts, api_version=api_version,
            legacy_backend_config=legacy,  # type: ignore[arg-type]
            **lowering_args, **attributes)

    return lower


def _rule_layouts(avals: Sequence[ShapedArray], layouts: Sequence[FfiLayout] | None
                  ) -> list[tuple[int, ...]]:
    if layouts is None:
        return [_minor_to_major(a, None, given_major_to_minor=False) for a in avals]
    return [_minor_to_major(a, lay, given_major_to_minor=False)
            for a, lay in zip(avals, layouts)]


def ffi_lowering(call_target_name: str, *, operand_layouts: Sequence[FfiLayout] | None = None,
                 result_layouts: Sequence[FfiLayout] | None = None,
                 backend_config: Mapping[str, Any] | str | None = None,
                 skip_ffi_layout_processing: bool = False,
                 **lowering_args: Any) -> LoweringRule:
    """The lowering rule of a primitive that is one call of ``call_target_name``
    (see :func:`build_ffi_lowering_function`); register it with
    ``lamina.interpreters.mlir.register_lowering``."""
    rule: LoweringRule = build_ffi_lowering_function(
        call_target_name, operand_layouts=operand_layouts, result_layouts=result_layouts,
        backend_config=backend_config, skip_ffi_layout_processing=skip_ffi_layout_processing,
        **lowering_args)
    return rule

