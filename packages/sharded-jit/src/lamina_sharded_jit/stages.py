"""jit's ahead-of-time stages: ``Traced`` -> ``Lowered`` -> ``Compiled``.

These extend the runtime's stage classes (shared with ``pmap``) with what
jit adds, following JAX:

- ``args_info`` and ``out_info`` are pytrees in the structure of the
  arguments ``(args, kwargs)`` and of the output, each leaf an ``ArgInfo``
  (type, name such as ``y['hi']``, donation, sharding) or ``OutInfo``;
  ``flat_args_info``/``flat_out_info`` give the flat tuples;
- :meth:`JitTraced.lower` takes ``lowering_platforms`` (any known platform,
  on any host: ``('tpu',)`` or ``('cpu', 'cuda')`` on a CPU machine);
- :class:`JitLowered` has ``as_text(dialect=None, debug_info=False)``,
  ``compiler_ir``, ``compile(compiler_options=None)``, ``cost_analysis`` and
  :meth:`~JitLowered.export`, and carries the function name, the jaxpr and
  the lowering platforms; compiling a module lowered for platforms this host
  does not have is a clear error;
- :class:`JitCompiled` is called with the dynamic arguments in the same
  pytree structure; a different structure or argument type is an error
  naming the argument by path;
- :class:`Wrapped` is what ``jit(f)`` is an instance of (a protocol: anything
  callable with ``trace`` and ``lower``), and ``CompilerOptions`` the type of
  ``compile(compiler_options=...)``, as in ``jax.stages``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lamina_interpreters_pxla.stages import (ArgInfo, Compiled, Lowered, OutInfo, Traced,
                                             module_in_dialect, module_text)
from lamina_linear_util import tree_util as tu
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.numpy.key_arrays import PRNGKeyArray, key_type

from lamina_sharded_jit.arguments import check_arg_types, structure_mismatch_message
from lamina_sharded_jit.execution import (
    CompiledProgram,
    LoweredProgram,
    compile_program,
    lower_program,
    placed_shardings,
)
from lamina_sharded_jit.params import JitInfo, PjitParams
from lamina_sharded_jit.shardings import none_if_unspecified

if TYPE_CHECKING:
    from lamina_sharded_jit.export import Exported

__all__ = ["JitTraced", "JitLowered", "JitCompiled", "make_traced"]


class _ArgsInfoAsPytree:
    """``args_info``/``out_info`` as pytrees, as JAX shows them; the runtime's
    stage classes store flat tuples, kept here as ``flat_args_info``/``flat_out_info``."""

    _in_tree: Any
    _out_tree: Any
    flat_args_info: tuple[ArgInfo, ...]
    flat_out_info: tuple[OutInfo, ...]

    @property
    def args_info(self) -> Any:
        return tu.user_trees.tree_map(_key_info,
                                      tu.tree_unflatten(self._in_tree, self.flat_args_info))

    @args_info.setter
    def args_info(self, value: Sequence[ArgInfo]) -> None:
        self.flat_args_info = tuple(value)

    @property
    def out_info(self) -> Any:
        return tu.user_trees.tree_map(_key_info,
                                      tu.tree_unflatten(self._out_tree, self.flat_out_info))

    @out_info.setter
    def out_info(self, value: Sequence[OutInfo]) -> None:
        self.flat_out_info = tuple(value)


def _key_info(x: Any) -> Any:
    """A key array over its data's ``ArgInfo``/``OutInfo`` as the keys' own
    (typed ``key<fry>[...]``, as JAX shows it); anything else as is."""
    if isinstance(x, PRNGKeyArray):
        info = x.base
        return dataclasses.replace(info, aval=key_type(x.impl, info.aval))
    return x


#: XLA compiler options by name, as ``Lowered.compile`` takes them.
CompilerOptions = dict[str, str | bool]


@runtime_checkable
class Wrapped(Protocol):
    """A function wrapped by ``jit``: callable, and staged ahead of time with
    ``trace(*args, **kwargs)`` and ``lower(*args, **kwargs)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

    def trace(self, *args: Any, **kwargs: Any) -> Traced: ...

    def lower(self, *args: Any, **kwargs: Any) -> Lowered: ...


class JitTraced(_ArgsInfoAsPytree, Traced):
    """``jit(f).trace(*args)``: the jaxpr and what the call looked like."""

    def __init__(self, info: JitInfo, p: PjitParams, placed: tuple[Any, ...], committed: bool):
        self._info = info
        self._p = p
        self._placed = placed
        self._committed = committed
        dbg = p.jaxpr.jaxpr.debug_info
        paths = dbg.result_paths if dbg is not None else (None,) * len(p.jaxpr.out_avals)
        args_info = [ArgInfo(aval, donated, name, none_if_unspecified(s))
                     for aval, donated, name, s in zip(p.in_avals, p.donated_invars,
                                                       p.arg_names, placed)]
        out_info = [OutInfo(aval, path, none_if_unspecified(s))
                    for aval, path, s in zip(p.jaxpr.out_avals, paths, p.out_shardings)]
        super().__init__(p.jaxpr, fun_name=info.fun_name, in_tree=p.in_tree,
                         out_tree=p.out_tree, args_info=args_info, out_info=out_info,
                         lower_fn=self._lower_for)


    @property
    def in_avals(self) -> list[ShapedArray]:
        return [a.aval for a in self.flat_args_info]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [o.aval for o in self.flat_out_info]

    def _lower_for(self, platforms: tuple[str, ...] | None) -> JitLowered:
        p = self._p
        program = lower_program(
            p.jaxpr, in_shardings=self._placed, out_shardings=p.out_shardings,
            donated_invars=p.donated_invars, name=self._info.fun_name,
            keep_unused=self._info.keep_unused,
            compiler_options_kvs=self._info.compiler_options_kvs, platforms=platforms,
            committed=self._committed)
        return JitLowered(program, self)


class JitLowered(_ArgsInfoAsPytree, Lowered):
    """A lowered module of a jitted function (see the module docstring)."""

    def __init__(self, program: LoweredProgram, traced: JitTraced):
        self.program = program
        self._traced = traced
        lowering = program.lowering
        super().__init__(
            lowering, fun_name=program.fun_name, jaxpr=traced._p.jaxpr,
            platforms=program.platforms, in_tree=traced._in_tree, out_tree=traced._out_tree,
            args_info=traced.flat_args_info, out_info=traced.flat_out_info,
            devices=program.devices, in_shardings=list(program.in_shardings),
            out_shardings=list(program.out_shardings))


    @property
    def donate_argnums(self) -> tuple[int, ...]:
        """The positions of the donated parameters, as ``jit`` resolved them
        (``donate_argnames`` included through the signature), as in JAX."""
        return tuple(sorted({i for i in self._traced._info.donate_argnums if i >= 0}))

    @property
    def module_name(self) -> str:
        return str(self.program.lowering.module_name)

    def as_text(self, dialect: str | None = None, *,
                debug_info: bool = False) -> str:
        """The module's text (StableHLO, or HLO for ``dialect='hlo'``);
        ``debug_info=True`` adds the locations (argument names, source lines)."""
        return module_text(self.program.lowering.module, dialect, debug_info=debug_info)

    def compiler_ir(self, dialect: str | None = None) -> Any:
        return module_in_dialect(self.program.lowering.module, dialect)

    def compile(self, compiler_options: dict[str, Any] | None = None
                ) -> JitCompiled:
        """Compiles for this host's devices (an error for a module lowered for
        other platforms). ``compiler_options`` are XLA options by name."""
        program = self.program
        if compiler_options:
            kvs = tuple(sorted({**dict(program.compiler_options_kvs),
                                **compiler_options}.items()))
            program = dataclasses.replace(program, compiler_options_kvs=kvs, compiled=None)
        return JitCompiled(compile_program(program), self._traced)

    def export(self) -> Exported:
        """The serializable ``Exported`` form of this lowering (see
        :mod:`lamina_sharded_jit.export`)."""
        # Imported here: export (serialization formats) is not on the path of a call.
        from lamina_sharded_jit.export import exported_from_lowered

        return exported_from_lowered(self)

    def __repr__(self) -> str:
        return f"Lowered({self.fun_name}, platforms={self.platforms})"


class JitCompiled(_ArgsInfoAsPytree, Compiled):
    """A compiled jitted function, callable with its dynamic arguments."""

    def __init__(self, compiled: CompiledProgram, traced: JitTraced):
        self.program = compiled
        self._traced = traced
        super().__init__(compiled.executable, in_tree=traced._in_tree, out_tree=traced._out_tree,
                         args_info=traced.flat_args_info, fun_name=traced.fun_name)
        self.flat_out_info = traced.flat_out_info

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Compared as users see them: keys match a struct of keys they were lowered for.
        flat, tree = tu.tree_flatten((args, kwargs))
        if tu.user_treedef(tree) != self.in_tree:
            raise TypeError(structure_mismatch_message(self.in_tree, (args, kwargs)))
        self._check_no_tracers(flat)
        check_arg_types(tu.user_trees.tree_leaves(self.args_info),
                        tu.user_trees.tree_leaves((args, kwargs)))
        return tu.tree_unflatten(self._out_tree, self.executable.call(*flat))

    def _check_no_tracers(self, flat: Sequence[Any]) -> None:
        """A compiled program runs only on concrete arguments (JAX's wording,
        which code matches on, with the argument's path and the function)."""
        for info, x in zip(self.flat_args_info, flat):
            if isinstance(x, Tracer):
                raise TypeError(
                    "Cannot apply JAX transformations to a function lowered and compiled for "
                    f"a particular signature. Detected argument of Tracer type {type(x)} at "
                    f"{info.name or 'an argument'} of the compiled {self.fun_name}.")


def make_traced(info: JitInfo, p: PjitParams) -> JitTraced:
    """The ``Traced`` stage of one call's inferred params."""
    if p.consts:
        raise ValueError(f"{info.api_name}({info.fun_name}).trace: the function closes over "
                         "values of an enclosing transformation")
    placed, committed = placed_shardings(p.args_flat, p.in_shardings, p.jaxpr, info.fun_name)
    return JitTraced(info, p, placed, committed)
