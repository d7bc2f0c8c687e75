"""Jaxprs: typed, first-order programs with names on their inputs and outputs.

A ``Jaxpr`` is a list of equations over variables. Each equation applies one
primitive and carries the ``SourceInfo`` of the user line that produced it.
Each jaxpr carries a ``JaxprDebugInfo`` naming its inputs and outputs: the
contract of this layer is that these names have exactly one entry per invar
and per outvar (``None`` where a name truly does not exist), which
``validate_jaxpr_debug_info`` checks.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects, no_effects
from lamina_tracing_core.source_info import SourceInfo

if TYPE_CHECKING:
    from lamina_linear_util import TracingDebugInfo

    from lamina_tracing_core.primitives import Primitive

_var_ids = itertools.count()


class Var:
    """A jaxpr variable; identity is the variable (names are given when printing)."""

    __slots__ = ("aval", "id")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.id = next(_var_ids)

    def __repr__(self) -> str:
        return f"Var(id={self.id}){self.aval.str_short()}"


class DropVar(Var):
    """An output nobody reads (printed as ``_``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "_"


class Literal:
    """A constant scalar placed directly in an equation."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        v = self.val
        if isinstance(v, np.ndarray) and v.shape == ():
            v = v.item()
        return f"{v}:{self.aval.str_short()}"


Atom = Var | Literal


class JaxprEqn:
    """``outvars = primitive[params] invars``, with its effects and source."""

    __slots__ = ("invars", "outvars", "primitive", "params", "effects", "source_info")

    def __init__(self, invars: list[Atom], outvars: list[Var], primitive: Primitive,
                 params: dict[str, Any], effects: Effects, source_info: SourceInfo):
        self.invars = invars
        self.outvars = outvars
        self.primitive = primitive
        self.params = params
        self.effects = effects
        self.source_info = source_info

    def replace(self, **changes: Any) -> JaxprEqn:
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return JaxprEqn(**fields)

    def __repr__(self) -> str:
        return f"JaxprEqn({self.outvars} = {self.primitive.name} {self.invars})"


@dataclass(frozen=True)
class JaxprDebugInfo:
    """Names of a jaxpr's inputs and outputs, and what traced it.

    ``arg_names`` has one entry per invar and ``result_paths`` one per outvar;
    an entry is ``None`` only where no name exists (a residual, a constant).
    """

    traced_for: str
    func_src_info: str | None
    arg_names: tuple[str | None, ...]
    result_paths: tuple[str | None, ...]

    @property
    def func_name(self) -> str:
        if not self.func_src_info:
            return "<unknown>"
        return self.func_src_info.split(" at ", 1)[0]

    @staticmethod
    def from_tracing(dbg: TracingDebugInfo | None, num_args: int, num_results: int,
                     *, traced_for: str = "jit") -> JaxprDebugInfo:
        """Resolves a linear-util ``TracingDebugInfo`` for a traced jaxpr."""
        if dbg is None:
            return JaxprDebugInfo(traced_for, None, (None,) * num_args, (None,) * num_results)
        # safe_*: names whose count does not fit (or paths not known yet) are None
        return JaxprDebugInfo(dbg.traced_for, dbg.func_src_info,
                              tuple(dbg.safe_arg_names(num_args)),
                              tuple(dbg.safe_result_paths(num_results)))

    def replace(self, **changes: Any) -> JaxprDebugInfo:
        return replace(self, **changes)

    def with_transform(self, name: str) -> JaxprDebugInfo:
        """Records a transformation: ``f at x.py:1`` becomes ``jvp(f) at x.py:1``."""
        if not self.func_src_info:
            return replace(self, func_src_info=f"{name}(<unknown>)")
        fun, sep, where = self.func_src_info.partition(" at ")
        return replace(self, func_src_info=f"{name}({fun}){sep}{where}")


class DebugInfoError(ValueError):
    """A jaxpr's debug info breaks the contract (wrong counts, bad types)."""


@dataclass
class Jaxpr:
    """A typed program: ``{ lambda constvars ; invars . let eqns in outvars }``."""

    constvars: list[Var]
    invars: list[Var]
    outvars: list[Atom]
    eqns: list[JaxprEqn]
    effects: Effects = no_effects
    debug_info: JaxprDebugInfo | None = None

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def replace(self, **changes: Any) -> Jaxpr:
        return replace(self, **changes)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __str__(self) -> str:
        from lamina_tracing_core.pretty_print import pp_jaxpr
        return pp_jaxpr(self)


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]):
        if len(consts) != len(jaxpr.constvars):
            raise ValueError(f"ClosedJaxpr got {len(consts)} consts for "
                             f"{len(jaxpr.constvars)} constvars")
        self.jaxpr = jaxpr
        self.consts = list(consts)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    @property
    def effects(self) -> Effects:
        return self.jaxpr.effects

    @property
    def eqns(self) -> list[JaxprEqn]:
        return self.jaxpr.eqns

    @property
    def debug_info(self) -> JaxprDebugInfo | None:
        return self.jaxpr.debug_info

    def replace(self, *, jaxpr: Jaxpr | None = None, consts: Sequence[Any] | None = None) -> ClosedJaxpr:
        return ClosedJaxpr(self.jaxpr if jaxpr is None else jaxpr,
                           self.consts if consts is None else consts)

    def __str__(self) -> str:
        return str(self.jaxpr)

    def __repr__(self) -> str:
        return str(self.jaxpr)


def validate_jaxpr_debug_info(jaxpr: Jaxpr | ClosedJaxpr, *, recursive: bool = True,
                              require: bool = True) -> None:
    """Checks the debug-info contract of ``jaxpr`` (and of the jaxprs in its
    equations' params when ``recursive``): one name per invar and per outvar,
    each a ``str`` or ``None``. ``require`` demands that debug info exists."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    dbg = inner.debug_info
    if dbg is None:
        if require:
            raise DebugInfoError("jaxpr has no debug info")
    else:
        _check_names("arg_names", dbg.arg_names, len(inner.invars), dbg)
        _check_names("result_paths", dbg.result_paths, len(inner.outvars), dbg)
    if recursive:
        for eqn in inner.eqns:
            for sub in subjaxprs_of_params(eqn.params):
                validate_jaxpr_debug_info(sub, recursive=True, require=require)


def _check_names(what: str, names: tuple[str | None, ...], expected: int,
                 dbg: JaxprDebugInfo) -> None:
    if len(names) != expected:
        raise DebugInfoError(
            f"debug info of {dbg.func_src_info} ({dbg.traced_for}) has {len(names)} "
            f"{what} for {expected} variables: {names}")
    for n in names:
        if n is not None and not isinstance(n, str):
            raise DebugInfoError(f"{what} entry {n!r} of {dbg.func_src_info} is not a str or None")


def subjaxprs_of_params(params: dict[str, Any]) -> list[Jaxpr]:
    """The jaxprs held in an equation's params (directly or in tuples/lists)."""
    out: list[Jaxpr] = []
    for value in params.values():
        for item in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(item, ClosedJaxpr):
                out.append(item.jaxpr)
            elif isinstance(item, Jaxpr):
                out.append(item)
    return out
