"""Jaxprs: typed, first-order programs with names on their inputs and outputs.

A ``Jaxpr`` is a list of equations over variables. Each equation applies one
primitive and carries the ``SourceInfo`` of the user line that produced it.
Each jaxpr carries a ``JaxprDebugInfo`` naming its inputs and outputs: the
contract of this layer is that these names have exactly one entry per invar
and per outvar (``None`` where a name truly does not exist), which
``validate_jaxpr_debug_info`` checks.

Printing (``pp_jaxpr``, ``str(jaxpr)``) is JAX's notation, with names shown:

::

    # args: x, y['hi']  results: result
    { lambda ; a:f32[3] b:f32[]. let
        c:f32[3] = mul a b
        d:f32[3] = sin c
      in (d,) }

Layout follows JAX 0.10's: a jaxpr that fits in 80 columns prints on one line
(``{ lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = cos b in (c,) }``),
else one equation per line; an equation's params go on lines of their own
when the equation does not fit; results are comma separated. Variables are
named ``a, b, ..., z, ba, bb, ...`` in order of appearance, shared with nested
jaxprs (so an inner ``a`` is never confused with an outer one). A jaxpr held in
an equation's params prints nested and indented, with its own names comment.
lamina adds the comment line naming the arguments and results from the
jaxpr's ``JaxprDebugInfo`` (omitted when it names nothing). Params a
primitive's printer marks as defaults (``accuracy=None``) are not shown.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.effects import Effects, no_effects
from lamina_tracing_core.source_info import SourceInfo

if TYPE_CHECKING:
    from lamina_linear_util import TracingDebugInfo
    from lamina_linear_util.debug_info import MadeBy

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
                     *, traced_for: str = "jit", made_by: MadeBy = None) -> JaxprDebugInfo:
        """Resolves a linear-util ``TracingDebugInfo`` for a traced jaxpr.

        A record whose counts do not fit is stale: it raises under validation,
        naming ``made_by`` (the transformations that may have changed the
        counts), else keeps the names still certain (``fit_names``)."""
        if dbg is None:
            return JaxprDebugInfo(traced_for, None, (None,) * num_args, (None,) * num_results)
        return JaxprDebugInfo(dbg.traced_for, dbg.func_src_info,
                              tuple(dbg.safe_arg_names(num_args, made_by=made_by)),
                              tuple(dbg.safe_result_paths(num_results, made_by=made_by)))

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


# --- printing --------------------------------------------------------------------------------
#: Per-primitive param printers: ``rule(params) -> dict[str, str | None]``
#: giving the text of some params, or ``None`` for a param not to show (a
#: default); the other params print as usual. A name that is not a param is
#: shown too (JAX's name for what a param holds). Layers register them beside
#: their primitives (see ``hide_default_params``).
param_printers: dict[Any, Callable[[dict[str, Any]], dict[str, str | None]]] = {}

#: The width JAX lays jaxprs out in.
WIDTH = 80


def hide_default_params(**defaults: Any) -> Callable[[dict[str, Any]], dict[str, str | None]]:
    """A param printer hiding each param ``k`` whose value is ``defaults[k]``
    (``param_printers[sin_p] = hide_default_params(accuracy=None)``)."""
    def printer(params: dict[str, Any]) -> dict[str, str | None]:
        return {k: None for k, v in defaults.items() if k in params and params[k] == v}
    return printer


class _Names:
    """Assigns ``a, b, ... z, ba, ...`` to variables in order of appearance."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def __call__(self, v: Var) -> str:
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(id(v))
        if name is None:
            name = _encode(len(self.names))
            self.names[id(v)] = name
        return name


def _encode(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = letters[i % 26]
    i //= 26
    while i:
        out = letters[i % 26] + out
        i //= 26
    return out


def _atom(a: Any, names: _Names) -> str:
    if type(a) is Literal:
        return repr(a)
    return names(a)


def _binder(v: Var, names: _Names, used: set[int] | None = None) -> str:
    if used is not None and id(v) not in used:
        return f"_:{v.aval.str_short()}"  # an output nothing reads
    return f"{names(v)}:{v.aval.str_short()}"


def _param_str(value: Any, names: _Names, indent: int, settings: _Settings,
               column: int) -> str:
    """The text of one param; a jaxpr in it prints starting at ``column``."""
    if isinstance(value, (Jaxpr, ClosedJaxpr)):
        inner = value.jaxpr if isinstance(value, ClosedJaxpr) else value
        return _pp(inner, names, indent, _Settings(settings.source_info, False), column)
    if isinstance(value, (tuple, list)) and any(isinstance(x, (Jaxpr, ClosedJaxpr))
                                                for x in value):
        pad = " " * (indent + 2)
        parts = [_param_str(x, names, indent + 2, settings, indent + 2) for x in value]
        return "(\n" + "\n".join(pad + p for p in parts) + "\n" + " " * indent + ")"
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=8)
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__name__", type(value).__name__)
    return str(value)


class _Settings:
    __slots__ = ("source_info", "names")

    def __init__(self, source_info: bool, names: bool):
        self.source_info = source_info
        self.names = names


def _names_comment(jaxpr: Jaxpr) -> str | None:
    dbg = jaxpr.debug_info
    if dbg is None:
        return None
    if all(n is None for n in dbg.arg_names) and all(p is None for p in dbg.result_paths):
        return None

    def show(items: tuple[str | None, ...]) -> str:
        return ", ".join("_" if n is None else n for n in items) or "()"

    return f"# args: {show(dbg.arg_names)}  results: {show(dbg.result_paths)}"


def _inner_names_comment(value: Any, settings: _Settings) -> str | None:
    if not settings.names or not isinstance(value, (Jaxpr, ClosedJaxpr)):
        return None
    inner = value.jaxpr if isinstance(value, ClosedJaxpr) else value
    return _names_comment(inner)


def _eqn(eqn: JaxprEqn, names: _Names, indent: int, settings: _Settings,
         used: set[int] | None = None) -> str:
    outs = " ".join(_binder(v, names, used) for v in eqn.outvars)
    ins = " ".join(_atom(a, names) for a in eqn.invars)
    params = eqn.params
    text_of = param_printers.get(eqn.primitive)
    shown = text_of(params) if text_of is not None else None
    items: list[tuple[str, str, str | None]] = []
    for k in sorted(params.keys() | (shown.keys() if shown is not None else set())):
        if shown is not None and k in shown:
            text = shown[k]
            if text is None:
                continue  # a default: not shown
        else:
            text = _param_str(params[k], names, indent + 2, settings, indent + 3 + len(k))
        items.append((k, text, _inner_names_comment(params[k], settings) if k in params
                      else None))
    name = eqn.primitive.name
    head = name
    if items:
        head = f"{name}[{' '.join(f'{k}={t}' for k, t, _ in items)}]"
        if "\n" in head or any(c for _, _, c in items) or \
                indent + len(outs) + len(head) + len(ins) + 4 > WIDTH:
            pad = " " * (indent + 2)
            lines = [f"{c}\n{pad}{k}={t}" if c else f"{k}={t}" for k, t, c in items]
            head = f"{name}[\n" + "\n".join(pad + ln for ln in lines) + "\n" + \
                " " * indent + "]"
    line = f"{outs} = {head} {ins}".rstrip()
    if settings.source_info:
        comment = _source_comment(eqn)
        if comment:
            line += f"  # {comment}"
    return line


def _source_comment(eqn: JaxprEqn) -> str:
    """``file.py:3 (f) [jvp(f)]``: the user line and the name stack."""
    info = eqn.source_info
    parts = []
    if info.frame is not None:
        f = info.frame
        parts.append(f"{f.file_name}:{f.line} ({f.function_name})")
    if info.name_stack.stack:
        parts.append(f"[{info.name_stack}]")
    return " ".join(parts)


def _pp(jaxpr: Jaxpr, names: _Names, indent: int, settings: _Settings,
        column: int | None = None) -> str:
    """``jaxpr``'s text; its first line starts at ``column`` (default
    ``indent``), its other lines are indented by ``indent``."""
    pad = " " * indent
    constvars = " ".join(_binder(v, names) for v in jaxpr.constvars)
    invars = " ".join(_binder(v, names) for v in jaxpr.invars)
    head = f"{{ lambda {constvars}; {invars}. let" if constvars else \
        f"{{ lambda ; {invars}. let"
    used = {id(a) for e in jaxpr.eqns for a in e.invars}
    used.update(id(a) for a in jaxpr.outvars)
    eqns = [_eqn(e, names, indent + 4, settings, used) for e in jaxpr.eqns]
    outs = ", ".join(_atom(a, names) for a in jaxpr.outvars)
    tail = f"in ({outs},) }}" if len(jaxpr.outvars) == 1 else f"in ({outs}) }}"
    body = None
    if not eqns:
        body = f"{head}  {tail}"
    elif not settings.source_info and not any("\n" in e for e in eqns):
        one_line = f"{head} {'; '.join(eqns)} {tail}"
        if (indent if column is None else column) + len(one_line) <= WIDTH:
            body = one_line
    if body is None:
        body = "\n".join([head, *(pad + "    " + e for e in eqns), pad + "  " + tail])
    comment = _names_comment(jaxpr) if settings.names else None
    if comment is not None:
        body = comment + "\n" + pad + body
    return body


def pp_jaxpr(jaxpr: Jaxpr | ClosedJaxpr, *, source_info: bool = False,
             names: bool = True) -> str:
    """The text of ``jaxpr`` (see the module docstring). ``source_info`` adds
    each equation's user line and name stack (``# f.py:3 (f) [jvp(f)]``);
    ``names=False`` omits the names comments."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return _pp(inner, _Names(), 0, _Settings(source_info, names))


def pp_eqn(eqn: JaxprEqn) -> str:
    return _eqn(eqn, _Names(), 0, _Settings(False, True))
