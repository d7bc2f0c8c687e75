"""Small identity programs the runtime compiles for itself.

Moving data between shardings over the same devices, or into a non-default
layout, is an identity function whose input and output carry different
annotations; XLA inserts the collectives or copies. The modules are written
as StableHLO text (they have no equations to lower) with Shardy shardings, and
compiled through the cache of :mod:`compiler`; an :class:`IdentityProgram` runs
one on a single buffer (the transfers below ``Executable`` use them).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from lamina_interpreters_pxla import buffer_use
from lamina_interpreters_pxla._jaxlib import ArrayImpl, Device, JaxRuntimeError, LoadedExecutable
from lamina_interpreters_pxla.compiler import BuildOptions, compile_module, result_handler
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray

_ELEMENT_TYPES: dict[np.dtype[Any], str] = {
    dtypes.bool_: "i1", dtypes.int8: "i8", dtypes.int16: "i16", dtypes.int32: "i32",
    dtypes.int64: "i64", dtypes.uint8: "ui8", dtypes.uint16: "ui16", dtypes.uint32: "ui32",
    dtypes.uint64: "ui64", dtypes.float16: "f16", dtypes.bfloat16: "bf16",
    dtypes.float32: "f32", dtypes.float64: "f64", dtypes.complex64: "complex<f32>",
    dtypes.complex128: "complex<f64>",
}


def tensor_type(aval: ShapedArray) -> str:
    """``tensor<2x3xf32>`` for ``f32[2,3]``."""
    try:
        element = _ELEMENT_TYPES[aval.dtype]
    except KeyError:
        raise TypeError(f"no XLA element type for dtype {aval.dtype}") from None
    dims = "".join(f"{d}x" for d in aval.shape)
    return f"tensor<{dims}{element}>"


def _sdy_mesh_text(spec: Any) -> str:
    axes = ", ".join(f'"{n}"={s}' for n, s in zip(spec.mesh.axis_names, spec.mesh.axis_sizes))
    ids = spec.mesh.device_ids
    if ids is not None and ids != tuple(range(len(ids))):
        return f"<[{axes}], device_ids=[{', '.join(map(str, ids))}]>"
    return f"<[{axes}]>"


def _sdy_sharding_text(spec: Any, mesh_name: str) -> str:
    dims = ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in spec.dims)
    return f"#sdy.sharding<@{mesh_name}, [{dims}]>"


def identity_module_text(aval: ShapedArray, *, name: str, num_partitions: int,
                         in_spec: Any = None, out_spec: Any = None,
                         in_layout: str = "default", out_layout: str = "default") -> str:
    """``main(x) = x`` with Shardy shardings (``ShardingSpec``s over the program's
    device positions) and ``mhlo.layout_mode`` strings on its argument/result."""
    t = tensor_type(aval)
    meshes: list[str] = []
    arg_attrs = [f'mhlo.layout_mode = "{in_layout}"']
    res_attrs = [f'mhlo.layout_mode = "{out_layout}"']
    for spec, attrs, mesh_name in ((in_spec, arg_attrs, "src"), (out_spec, res_attrs, "dst")):
        if spec is not None:
            meshes.append(f"  sdy.mesh @{mesh_name} = {_sdy_mesh_text(spec)}")
            attrs.append(f"sdy.sharding = {_sdy_sharding_text(spec, mesh_name)}")
    mesh_lines = "\n".join(meshes)
    return (
        f"module @{name} attributes {{mhlo.num_partitions = {num_partitions} : i32, "
        f"mhlo.num_replicas = 1 : i32}} {{\n{mesh_lines}\n"
        f"  func.func public @main(%arg0: {t} {{{', '.join(arg_attrs)}}}) -> "
        f"({t} {{{', '.join(res_attrs)}}}) {{\n"
        f"    return %arg0 : {t}\n  }}\n}}\n")


class IdentityProgram:
    """A compiled identity program: one buffer in, the same data out with the
    output's sharding, committed flag and layout."""

    __slots__ = ("name", "loaded", "handler")

    def __init__(self, name: str, loaded: LoadedExecutable, aval: ShapedArray, out_sharding: Any,
                 committed: bool = True):
        self.name = name
        self.loaded = loaded
        self.handler = result_handler(aval, out_sharding, committed)

    def run(self, impl: ArrayImpl) -> ArrayImpl:
        buffer_use.using([impl], lambda _: self.name)
        try:
            results = self.loaded.execute_sharded([impl])
        except JaxRuntimeError as e:
            raise type(e)(f"{self.name}: {e}") from e
        finally:
            buffer_use.done_using([impl])
        out: ArrayImpl = results.consume_with_handlers([self.handler])[0]
        return out


@functools.lru_cache(maxsize=512)
def reshard_program(aval: ShapedArray, src: Any, dst: Any) -> IdentityProgram:
    """An identity program taking ``src``-sharded data to ``dst`` (same device set)."""
    devices: list[Device] = list(dst._device_assignment)
    ndim = len(aval.shape)
    in_spec = src.to_sharding_spec(ndim, device_order=devices)
    out_spec = dst.to_sharding_spec(ndim, device_order=devices)
    text = identity_module_text(aval, name="reshard", num_partitions=len(devices),
                                in_spec=in_spec, out_spec=out_spec)
    loaded = compile_module(text, devices, BuildOptions(num_partitions=len(devices)),
                            name=f"reshard({aval.str_short()})")
    return IdentityProgram("device_put (reshard)", loaded, aval, dst)


@functools.lru_cache(maxsize=512)
def layout_program(aval: ShapedArray, sharding: Any, in_layout: Any, out_layout: Any,
                   committed: bool = True) -> IdentityProgram:
    """An identity program taking ``sharding``-ed data from ``in_layout`` to
    ``out_layout`` (``Layout``s; ``None`` is the backend's default)."""
    devices: list[Device] = list(sharding._device_assignment)
    n = len(devices)
    spec = None if n == 1 else sharding.to_sharding_spec(len(aval.shape))
    text = identity_module_text(
        aval, name="relayout", num_partitions=n, in_spec=spec, out_spec=spec,
        in_layout="default" if in_layout is None else in_layout.to_string(),
        out_layout="default" if out_layout is None else out_layout.to_string())
    options = BuildOptions(num_partitions=n)
    loaded = compile_module(text, devices, options, name=f"relayout({aval.str_short()})")
    return IdentityProgram("device_put (layout)", loaded, aval, sharding, committed)
