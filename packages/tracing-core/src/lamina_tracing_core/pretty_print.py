"""Readable jaxprs, in JAX's notation, with their names shown.

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

from collections.abc import Callable
from typing import Any

import numpy as np

from lamina_tracing_core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var

#: Per-primitive param printers: ``rule(params) -> dict[str, str | None]``
#: giving the text of some params, or ``None`` for a param not to show (a
#: default); the other params print as usual. Layers register them beside
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
    for k in sorted(params):
        if shown is not None and k in shown:
            text = shown[k]
            if text is None:
                continue  # a default: not shown
        else:
            text = _param_str(params[k], names, indent + 2, settings, indent + 3 + len(k))
        items.append((k, text, _inner_names_comment(params[k], settings)))
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
