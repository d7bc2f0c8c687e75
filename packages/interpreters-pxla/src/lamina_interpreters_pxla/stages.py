"""The ahead-of-time stages: ``Traced`` -> ``Lowered`` -> ``Compiled``.

``jit(f).trace(*args)`` gives a :class:`Traced` (the jaxpr and what the call
looked like), ``.lower(lowering_platforms=...)`` a :class:`Lowered` (the
StableHLO module and what export needs: function name, jaxpr, platforms),
and ``.compile()`` a :class:`Compiled` that can be called. They live here
because ``pmap`` builds them as well as ``jit``; the transformation supplies
the functions that lower (``Traced``) and the device assignment and build
options (``Lowered``).

Every stage keeps the debug info: ``args_info`` names each flat argument
(``y['hi']``), ``out_info`` each result, and errors about calling a
``Compiled`` with the wrong structure name both structures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina_interpreters_pxla._jaxlib import Device, _jax
from lamina_interpreters_pxla.array import Array
from lamina_interpreters_pxla.backends import get_backend
from lamina_interpreters_pxla.executable import BuildOptions, Executable, compile_module
from lamina_linear_util import tree_util
from lamina_mlir_lowering import module_to_bytecode, module_to_text
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray


class StageTrees:
    """``in_tree``/``out_tree`` of a stage: the structures of the arguments
    ``(args, kwargs)`` and of the result as users see them (a key array is a
    leaf, ``*``, as in JAX). The stage keeps the structures transformations
    flatten with (a key array a node over its data) as ``_in_tree`` and
    ``_out_tree``: its flat ``args_info`` and ``out_info`` follow them."""

    _in_tree: Any
    _out_tree: Any

    @property
    def in_tree(self) -> Any:
        return tree_util.user_treedef(self._in_tree)

    @property
    def out_tree(self) -> Any:
        return tree_util.user_treedef(self._out_tree)


def _user_view(tree: Any) -> Any:
    """A tree built in the transformations' structure with each key array's
    data replaced by a per-leaf value (a sharding), as users see it: that
    value in place of the key array."""
    return tree_util.user_trees.tree_map(
        lambda x: x.base if isinstance(x, PRNGKeyArray) else x, tree)


@dataclass(frozen=True)
class ArgInfo:
    """One flat argument of a staged function: its type, name, whether it is
    donated, and its sharding (None when not decided yet)."""

    aval: ShapedArray
    donated: bool = False
    name: str | None = None
    sharding: Any = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.aval.dtype

    def __repr__(self) -> str:
        name = f"{self.name}: " if self.name else ""
        donated = ", donated" if self.donated else ""
        return f"ArgInfo({name}{self.aval.str_short()}{donated})"


@dataclass(frozen=True)
class OutInfo:
    """One flat result: its type, path (``result['a']``) and sharding."""

    aval: ShapedArray
    name: str | None = None
    sharding: Any = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.aval.dtype

    # the rest of ShapeDtypeStruct's reading surface, which JAX's out_info has
    @property
    def weak_type(self) -> bool:
        return self.aval.weak_type

    @property
    def ndim(self) -> int:
        return len(self.aval.shape)

    @property
    def size(self) -> int:
        return self.aval.size


class Traced(StageTrees):
    """A function traced for given argument types (no outer tracers inside).

    ``jaxpr`` is the closed jaxpr with its ``JaxprDebugInfo``; ``in_tree`` is
    the structure of the flat arguments (``(args, kwargs)`` for jit);
    ``lower_fn(platforms)`` produces the ``Lowered`` stage.
    """

    def __init__(self, jaxpr: ClosedJaxpr, *, fun_name: str, in_tree: Any, out_tree: Any,
                 args_info: Sequence[ArgInfo], out_info: Sequence[OutInfo],
                 lower_fn: Callable[[tuple[str, ...] | None], Lowered]):
        self.jaxpr = jaxpr
        self.fun_name = fun_name
        self._in_tree = in_tree
        self._out_tree = out_tree
        self.args_info = tuple(args_info)
        self.out_info = tuple(out_info)
        self._lower_fn = lower_fn

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [a.aval for a in self.args_info]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [o.aval for o in self.out_info]

    def lower(self, *, lowering_platforms: Sequence[str] | None = None) -> Lowered:
        """Lowers for ``lowering_platforms`` (default: the local platform); any
        known platform works on any host (``('tpu',)`` on a CPU machine)."""
        platforms = None if lowering_platforms is None else tuple(lowering_platforms)
        return self._lower_fn(platforms)

    def __repr__(self) -> str:
        return f"Traced({self.fun_name}, {len(self.args_info)} args)"


class Lowered(StageTrees):
    """A lowered StableHLO module plus what compiling and exporting need.

    ``lowering`` is the lowering layer's ``LoweringResult`` (module, names,
    shardings, platforms, kept arguments). ``devices`` and ``options`` say how
    :meth:`compile` builds it (None for a module lowered only for export or
    for another platform); ``in_shardings``/``out_shardings`` are lamina
    shardings, one per flat argument/result.
    """

    def __init__(self, lowering: Any, *, fun_name: str, jaxpr: ClosedJaxpr,
                 platforms: Sequence[str], in_tree: Any, out_tree: Any,
                 args_info: Sequence[ArgInfo], out_info: Sequence[OutInfo],
                 devices: Sequence[Device] | None = None,
                 options: BuildOptions = BuildOptions(),
                 in_shardings: Sequence[Any] | None = None,
                 out_shardings: Sequence[Any] | None = None,
                 compile_fn: Callable[[Lowered], Compiled] | None = None):
        self.lowering = lowering
        self.fun_name = fun_name
        self.jaxpr = jaxpr
        self.platforms = tuple(platforms)
        self._in_tree = in_tree
        self._out_tree = out_tree
        self.args_info = tuple(args_info)
        self.out_info = tuple(out_info)
        self.devices = None if devices is None else list(devices)
        self.options = options
        self.in_shardings = None if in_shardings is None else list(in_shardings)
        self.out_shardings = None if out_shardings is None else list(out_shardings)
        self._compile_fn = compile_fn

    @property
    def module(self) -> Any:
        return self.lowering.module

    def as_text(self, dialect: str = "stablehlo", *, debug_info: bool = False) -> str:
        """The module's text; ``debug_info=True`` adds ``loc(...)`` locations
        (argument names, source lines)."""
        return module_text(self.lowering.module, dialect, debug_info=debug_info)

    def compiler_ir(self, dialect: str = "stablehlo") -> Any:
        """The ``ir.Module`` (``dialect='stablehlo'``) or jaxlib's
        ``XlaComputation`` (``'hlo'``)."""
        return module_in_dialect(self.lowering.module, dialect)

    def cost_analysis(self) -> dict[str, Any]:
        """XLA's cost estimate of the unoptimized module (flops, bytes accessed)."""
        computation = module_in_dialect(self.lowering.module, "hlo")
        client = self.devices[0].client if self.devices else get_backend()
        return dict(_jax.hlo_module_cost_analysis(client, computation.get_hlo_module()))

    def compile(self) -> Compiled:
        """Compiles for ``devices`` (the lowering's own compile function if the
        transformation gave one)."""
        if self._compile_fn is not None:
            return self._compile_fn(self)
        return self._default_compile()

    def _default_compile(self) -> Compiled:
        if not self.devices:
            raise ValueError(f"{self.fun_name} was lowered for {self.platforms} without "
                             "devices; lower it for the local platform to compile it")
        local = self.devices[0].platform
        if local not in self.platforms:
            raise ValueError(f"{self.fun_name} was lowered for {self.platforms}, but the "
                             f"devices are {local} devices")
        loaded = compile_module(self.lowering.module, self.devices, self.options,
                                name=self.lowering.module_name,
                                host_callbacks=self.lowering.host_callbacks)
        in_shardings = self.in_shardings or [a.sharding for a in self.args_info]
        executable = Executable(
            loaded, name=f"{self.fun_name}", in_avals=[a.aval for a in self.args_info],
            out_avals=[o.aval for o in self.out_info], in_shardings=in_shardings,
            out_shardings=self.out_shardings, devices=self.devices, options=self.options,
            arg_names=[a.name for a in self.args_info],
            result_names=[o.name for o in self.out_info],
            donated_invars=[a.donated for a in self.args_info],
            kept_var_idx=self.lowering.kept_var_idx, lowering=self.lowering)
        return Compiled(executable, in_tree=self._in_tree, out_tree=self._out_tree,
                        args_info=self.args_info, fun_name=self.fun_name)

    def __repr__(self) -> str:
        return f"Lowered({self.fun_name}, platforms={self.platforms})"


def module_in_dialect(module: Any, dialect: str | None) -> Any:
    """A lowered ``module`` as ``compiler_ir(dialect)`` gives it: the MLIR
    module for ``'stablehlo'`` (or ``None``), an ``XlaComputation`` for
    ``'hlo'``."""
    if dialect in (None, "stablehlo"):
        return module
    if dialect == "hlo":
        return _jax.mlir.mlir_module_to_xla_computation(
            module_to_bytecode(module), use_tuple_args=False, return_tuple=False)
    raise ValueError(f"unknown dialect {dialect!r}: expected 'stablehlo' or 'hlo'")


def module_text(module: Any, dialect: str | None, *, debug_info: bool = False) -> str:
    """``as_text(dialect)``: the StableHLO text (``debug_info=True`` adds the
    ``loc(...)`` locations: argument names, source lines), or the HLO text."""
    ir = module_in_dialect(module, dialect)
    if dialect == "hlo":
        return str(ir.as_hlo_text())
    return str(module_to_text(module, debug_info=debug_info))


class Compiled(StageTrees):
    """A compiled, callable stage."""

    def __init__(self, executable: Executable, *, in_tree: Any, out_tree: Any,
                 args_info: Sequence[ArgInfo], fun_name: str):
        self.executable = executable
        self._in_tree = in_tree
        self._out_tree = out_tree
        self.args_info = tuple(args_info)
        self.fun_name = fun_name

    def as_text(self) -> str:
        """The optimized HLO XLA compiled."""
        return self.executable.as_text()

    def cost_analysis(self) -> dict[str, Any]:
        return self.executable.cost_analysis()

    def memory_analysis(self) -> Any:
        return self.executable.memory_analysis()

    def runtime_executable(self) -> Any:
        return self.executable.runtime_executable()

    @property
    def input_shardings(self) -> Any:
        """The argument shardings, in the structure of the arguments."""
        return _user_view(tree_util.tree_unflatten(self._in_tree, self.executable.in_shardings))

    @property
    def output_shardings(self) -> Any:
        return _user_view(tree_util.tree_unflatten(self._out_tree,
                                                   self.executable.out_shardings))

    def call_flat(self, flat_args: Sequence[Any]) -> list[Array]:
        return self.executable.call(*flat_args)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        flat, tree = tree_util.tree_flatten((args, kwargs))
        if tree != self._in_tree:
            raise TypeError(
                f"{self.fun_name} was compiled for arguments of structure {self.in_tree}, "
                f"but was called with {tree_util.user_treedef(tree)}")
        return tree_util.tree_unflatten(self._out_tree, self.call_flat(flat))

    def __repr__(self) -> str:
        return f"Compiled({self.fun_name})"
