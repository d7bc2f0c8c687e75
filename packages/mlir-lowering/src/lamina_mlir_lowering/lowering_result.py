"""``LoweringResult``: what a lowering put into its module.

Apart from :mod:`~lamina_mlir_lowering.lowering` so that a module restored
from disk (the persistent trace cache) becomes a result without loading the
lowering stack.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from lamina_tracing_core.avals import ShapedArray

from lamina_mlir_lowering.serialization import module_to_bytecode, module_to_text, parse_module
from lamina_mlir_lowering.sharding import ArgSharding, MeshShape

if TYPE_CHECKING:
    from jaxlib.mlir import ir

__all__ = ["LoweringResult", "TOKEN_AVAL"]

#: What an ordered-effects token is outside a module (``main``'s token argument/result).
TOKEN_AVAL = ShapedArray((0,), np.dtype(np.bool_))


@dataclass(frozen=True)
class LoweringResult:
    """What reached the module.

    - ``module``: the verified ``ir.Module`` (``sym_name`` = ``module_name``);
    - ``module_name``: the sanitized module name (``jit_f``, ``jit__lambda``);
    - ``arg_names`` / ``in_avals`` / ``arg_shardings`` / ``donated_args`` /
      ``output_aliases``: one entry per *kept* argument of the jaxpr, in
      order (``kept_var_idx[i]`` is its index among the jaxpr's invars);
      ``output_aliases[i]`` is the result that reuses kept argument ``i``'s
      buffer (``tf.aliasing_output``), None if it does not;
    - ``result_names`` / ``out_avals`` / ``result_shardings``: one per result;
      avals are ``main``'s global types (per-device avals times the manual
      tiling in a manual SPMD module);
    - ``platforms``: the target platforms; with more than one, ``main`` takes
      a leading ``i32`` platform index (``has_platform_index_arg``);
    - ``num_replicas`` / ``num_partitions``: the module attributes;
    - ``sharding_format``: ``'shardy'`` or ``'gspmd'``; ``mesh``: the mesh the
      Shardy attributes refer to (None if no sharding was given);
    - ``host_callbacks``: the Python functions the module's callback custom
      calls run (registered with the client when it is compiled; such a
      module cannot be serialized for later use);
    - ``has_token``: ``main`` takes and returns an ordered-effects token (a
      ``bool[0]`` array) before its other arguments and results, which the
      runtime threads from one call to the next;
    - ``sharding_inspectors``: the functions XLA's partitioner calls with an
      operand's sharding when the module is compiled (kept alive until then);
    - ``arg_memory_kinds`` / ``result_memory_kinds``: the ``mhlo.memory_kind``
      of each kept argument / result (None: none given, the device's default).
    """

    module: ir.Module
    module_name: str
    arg_names: tuple[str | None, ...]
    result_names: tuple[str | None, ...]
    platforms: tuple[str, ...]
    kept_var_idx: tuple[int, ...]
    in_avals: tuple[ShapedArray, ...]
    out_avals: tuple[ShapedArray, ...]
    arg_shardings: tuple[ArgSharding, ...]
    result_shardings: tuple[ArgSharding, ...]
    num_replicas: int
    num_partitions: int
    donated_args: tuple[bool, ...]
    output_aliases: tuple[int | None, ...]
    sharding_format: str
    mesh: MeshShape | None
    host_callbacks: tuple[Any, ...] = ()
    has_token: bool = False
    sharding_inspectors: tuple[Any, ...] = ()
    arg_memory_kinds: tuple[str | None, ...] = ()
    result_memory_kinds: tuple[str | None, ...] = ()

    @property
    def has_platform_index_arg(self) -> bool:
        return len(self.platforms) > 1

    @property
    def buffer_donors(self) -> tuple[bool, ...]:
        """Kept arguments donated without a result of their own type."""
        return tuple(d and a is None for d, a in zip(self.donated_args, self.output_aliases))

    def as_text(self, debug_info: bool = False) -> str:
        return module_to_text(self.module, debug_info=debug_info)

    def as_bytecode(self) -> bytes:
        if "module" not in self.__dict__:  # from_bytecode, not parsed yet
            return cast("bytes", self.__dict__["_bytecode"])
        return module_to_bytecode(self.module)

    @classmethod
    def from_bytecode(cls, bytecode: bytes, **fields: Any) -> LoweringResult:
        """A result whose module is ``bytecode`` (what :meth:`as_bytecode`
        gave), parsed into this thread's context at the first use of
        ``module``. A program restored from the persistent trace cache
        compiles from the bytecode (``as_bytecode``), so unless its text or
        module is asked for it never loads MLIR."""
        result = cls(module=cast("ir.Module", None), **fields)
        object.__delattr__(result, "module")
        object.__setattr__(result, "_bytecode", bytes(bytecode))
        return result

    if not TYPE_CHECKING:  # (type checkers see ``module`` as the field it is)
        def __getattr__(self, name):
            bytecode = self.__dict__.get("_bytecode")
            if name != "module" or bytecode is None:
                raise AttributeError(
                    f"{type(self).__name__!r} object has no attribute {name!r}")
            module = parse_module(bytecode)
            object.__setattr__(self, "module", module)
            return module
