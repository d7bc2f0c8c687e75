"""Exporting a jitted function: StableHLO bytecode plus its calling convention.

``export(jit(f))(*args)`` (or ``jit(f).lower(*args).export()``) gives an
:class:`Exported`: the module's StableHLO bytecode and what calling it needs
— the function's name, the input and output pytree structures, the avals of
the flat arguments and results with their names, which arguments the module
kept, their shardings (HLO sharding strings over ``nr_devices`` devices), the
donated arguments and the platforms the module was lowered for.
``Exported.serialize()`` writes it all to bytes and :func:`deserialize` reads
it back; ``Exported.call(*args)`` (or calling it) compiles the module for the
local platform, which must be one of its platforms, and runs it.

Serialized form: ``b"LAMINA-EXPORT\\x00"``, a format version byte, the
length of a JSON header (8 bytes, little endian), the header, then the module
bytecode. Pytree structures are stored with jaxlib's
``PyTreeDef.serialize_using_proto`` (built-in containers only, as JAX).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lamina_interpreters_pxla._jaxlib import xc
from lamina_interpreters_pxla.backends import local_devices
from lamina_interpreters_pxla.executable import BuildOptions, Executable, compile_module
from lamina_interpreters_pxla.sharding import GSPMDSharding, single_device_sharding
from lamina_interpreters_pxla.stages import ArgInfo
from lamina_linear_util import tree_util as tu
from lamina_mlir_lowering import module_to_bytecode, module_to_text, parse_module
from lamina_tracing_core import dtypes
from lamina_tracing_core.avals import ShapedArray

from lamina_sharded_jit.arguments import check_arg_types, structure_mismatch_message
from lamina_sharded_jit.shardings import is_unspecified

__all__ = ["Exported", "export", "deserialize", "serialize", "exported_from_lowered"]

_MAGIC = b"LAMINA-EXPORT\x00"
_VERSION = 1


@dataclass(frozen=True)
class Exported:
    """A lowered function with its calling convention (see the module docstring).

    ``in_avals``/``arg_names``/``in_shardings_hlo``/``donated`` have one entry
    per flat argument; ``module_kept_var_idx`` says which reach the module
    (the others were unused and pruned). ``out_*`` have one per result.
    """

    fun_name: str
    in_tree: Any
    out_tree: Any
    in_avals: tuple[ShapedArray, ...]
    out_avals: tuple[ShapedArray, ...]
    arg_names: tuple[str | None, ...]
    result_names: tuple[str | None, ...]
    in_shardings_hlo: tuple[str | None, ...]
    out_shardings_hlo: tuple[str | None, ...]
    donated: tuple[bool, ...]
    module_kept_var_idx: tuple[int, ...]
    nr_devices: int
    platforms: tuple[str, ...]
    mlir_module_serialized: bytes
    _compiled: dict[str, Executable] = field(default_factory=dict, compare=False, repr=False)

    def mlir_module(self) -> str:
        """The module's StableHLO text."""
        return str(module_to_text(parse_module(self.mlir_module_serialized)))

    def serialize(self) -> bytes:
        return serialize(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call(*args, **kwargs)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the exported function here (compiled once per platform)."""
        flat, tree = tu.tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"exported {self.fun_name}: "
                            + structure_mismatch_message(tu.user_treedef(self.in_tree),
                                                         (args, kwargs)))
        check_arg_types([ArgInfo(a, d, n) for a, d, n in
                          zip(self.in_avals, self.donated, self.arg_names)], flat)
        executable = self._executable()
        kept = [flat[i] for i in self.module_kept_var_idx]
        if len(self.platforms) > 1:
            index = np.int32(self.platforms.index(_local_platform()))
            kept = [index, *kept]
        return tu.tree_unflatten(self.out_tree, executable.call(*kept))

    def _executable(self) -> Executable:
        platform = _local_platform()
        hit = self._compiled.get(platform)
        if hit is not None:
            return hit
        if platform not in self.platforms:
            raise ValueError(f"The exported function {self.fun_name!r} was lowered for "
                             f"platforms {self.platforms} but it is used on {platform!r}")
        devices = local_devices()
        if self.nr_devices > len(devices):
            raise ValueError(f"The exported function {self.fun_name!r} needs "
                             f"{self.nr_devices} devices, but only {len(devices)} are available")
        devices = devices[:self.nr_devices]
        options = BuildOptions(num_partitions=self.nr_devices)
        loaded = compile_module(self.mlir_module_serialized, devices, options,
                                name=f"exported {self.fun_name}")
        kept = self.module_kept_var_idx
        in_avals = [self.in_avals[i] for i in kept]
        names = [self.arg_names[i] for i in kept]
        shardings = [_sharding(self.in_shardings_hlo[i], devices) for i in kept]
        donated = [self.donated[i] for i in kept]
        if len(self.platforms) > 1:
            in_avals = [ShapedArray((), np.int32), *in_avals]
            names = ["_platform_index", *names]
            shardings = [_sharding(None, devices), *shardings]
            donated = [False, *donated]
        executable = Executable(
            loaded, name=f"exported {self.fun_name}", in_avals=in_avals,
            out_avals=self.out_avals, in_shardings=shardings,
            out_shardings=[_sharding(s, devices) for s in self.out_shardings_hlo]
            if any(s is not None for s in self.out_shardings_hlo) else None,
            devices=devices, options=options, arg_names=names,
            result_names=self.result_names, donated_invars=donated)
        self._compiled[platform] = executable
        return executable


def _local_platform() -> str:
    return str(local_devices()[0].platform)


def _sharding(hlo: str | None, devices: Sequence[Any]) -> Any:
    if len(devices) == 1:
        return single_device_sharding(devices[0])
    if hlo is None:
        return GSPMDSharding.get_replicated(list(devices))
    return GSPMDSharding(list(devices), xc.HloSharding.from_string(hlo))


def _hlo_str(spec: Any) -> str | None:
    if is_unspecified(spec):
        return None
    return str(spec.to_hlo_sharding_str())


def exported_from_lowered(lowered: Any) -> Exported:
    """The ``Exported`` of a ``JitLowered`` stage."""
    program = lowered.program
    lowering = program.lowering
    if lowering.host_callbacks:
        # the module names its Python functions by index into this process's list
        names = ", ".join(sorted({h.callback.where() for h in lowering.host_callbacks}))
        raise ValueError(f"cannot export jit({program.fun_name}): it calls back into Python "
                         f"({names}), and a serialized module cannot carry Python functions; "
                         "move the callbacks out of the exported function")
    kept = tuple(lowering.kept_var_idx)
    n = len(program.in_avals)
    in_sh: list[str | None] = [None] * n
    for pos, spec in zip(kept, lowering.arg_shardings):
        in_sh[pos] = _hlo_str(spec)
    flat_args = lowered.flat_args_info
    return Exported(
        fun_name=program.fun_name, in_tree=lowered._in_tree, out_tree=lowered._out_tree,
        in_avals=tuple(a.aval for a in flat_args), out_avals=tuple(lowering.out_avals),
        arg_names=tuple(a.name for a in flat_args), result_names=tuple(lowering.result_names),
        in_shardings_hlo=tuple(in_sh),
        out_shardings_hlo=tuple(_hlo_str(s) for s in lowering.result_shardings),
        donated=tuple(a.donated for a in flat_args), module_kept_var_idx=kept,
        nr_devices=len(program.devices), platforms=tuple(program.platforms),
        mlir_module_serialized=module_to_bytecode(lowering.module))


def export(fun: Any, *, platforms: Sequence[str] | None = None) -> Callable[..., Exported]:
    """``export(jit(f), platforms=...)(*args)``: trace, lower (for ``platforms``,
    default this host's) and export ``f`` for these argument types."""
    if not hasattr(fun, "trace"):
        raise TypeError(f"export: expected a function wrapped by jit, got {fun!r}")

    def do_export(*args: Any, **kwargs: Any) -> Exported:
        traced = fun.trace(*args, **kwargs)
        lowered = traced.lower(lowering_platforms=None if platforms is None
                               else tuple(platforms))
        return exported_from_lowered(lowered)

    return do_export


# --- serialization ---------------------------------------------------------------------
def _aval_json(a: ShapedArray) -> list[Any]:
    return [list(a.shape), a.dtype.name, a.weak_type]


def _aval_from_json(v: list[Any]) -> ShapedArray:
    dtype = dtypes.bfloat16 if v[1] == "bfloat16" else np.dtype(v[1])
    return ShapedArray(tuple(v[0]), dtype, bool(v[2]))


def _tree_bytes(tree: Any, what: str) -> str:
    try:
        return base64.b64encode(tree.serialize_using_proto()).decode("ascii")
    except Exception as e:
        raise ValueError(f"serialize: the {what} structure {tree} cannot be serialized (only "
                         f"built-in containers can): {e}") from e


def serialize(exp: Exported) -> bytes:
    """The bytes of ``exp`` (see the module docstring)."""
    header = {
        "fun_name": exp.fun_name,
        "in_tree": _tree_bytes(exp.in_tree, "input"),
        "out_tree": _tree_bytes(exp.out_tree, "output"),
        "in_avals": [_aval_json(a) for a in exp.in_avals],
        "out_avals": [_aval_json(a) for a in exp.out_avals],
        "arg_names": list(exp.arg_names), "result_names": list(exp.result_names),
        "in_shardings": list(exp.in_shardings_hlo),
        "out_shardings": list(exp.out_shardings_hlo),
        "donated": list(exp.donated), "kept": list(exp.module_kept_var_idx),
        "nr_devices": exp.nr_devices, "platforms": list(exp.platforms),
    }
    head = json.dumps(header).encode("utf-8")
    return (_MAGIC + bytes([_VERSION]) + struct.pack("<Q", len(head)) + head
            + exp.mlir_module_serialized)


def deserialize(blob: bytes | bytearray) -> Exported:
    """An ``Exported`` from :func:`serialize`'s bytes (a clear error for
    anything else)."""
    data = bytes(blob)
    if not data.startswith(_MAGIC):
        raise ValueError("deserialize: not a lamina exported function (bad magic bytes)")
    pos = len(_MAGIC)
    version = data[pos]
    if version != _VERSION:
        raise ValueError(f"deserialize: format version {version} is not supported (this lamina "
                         f"reads version {_VERSION})")
    (n,) = struct.unpack("<Q", data[pos + 1:pos + 9])
    header = json.loads(data[pos + 9:pos + 9 + n].decode("utf-8"))
    module = data[pos + 9 + n:]
    registry = tu.registry
    return Exported(
        fun_name=header["fun_name"],
        in_tree=tu.PyTreeDef.deserialize_using_proto(registry,
                                                     base64.b64decode(header["in_tree"])),
        out_tree=tu.PyTreeDef.deserialize_using_proto(registry,
                                                      base64.b64decode(header["out_tree"])),
        in_avals=tuple(_aval_from_json(v) for v in header["in_avals"]),
        out_avals=tuple(_aval_from_json(v) for v in header["out_avals"]),
        arg_names=tuple(header["arg_names"]), result_names=tuple(header["result_names"]),
        in_shardings_hlo=tuple(header["in_shardings"]),
        out_shardings_hlo=tuple(header["out_shardings"]), donated=tuple(header["donated"]),
        module_kept_var_idx=tuple(header["kept"]), nr_devices=int(header["nr_devices"]),
        platforms=tuple(header["platforms"]), mlir_module_serialized=module)

