"""Finding the equation that produced a NaN (``debug_nans``/``debug_infs``).

When a jitted program's result holds a NaN (or an Inf with ``debug_infs``),
:func:`explain_bad_result` evaluates its jaxpr again, one equation at a time
on the same arguments, descending into nested ``jit``, ``checkpoint`` and
custom-derivative calls, and stops at the first equation whose result is
bad. Every value carries the set of the function's arguments it was
computed from, so the ``FloatingPointError`` says, besides the primitive,
the user's source line and the name stack
(``jit(loss)/transpose(jvp(loss))/div``), which of the function's arguments
(``params['dense9']['w']``) each operand of that equation depends on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina_interpreters_pxla.float_checks import first_bad, suspended
from lamina_tracing_core.checkpoint import remat_p
from lamina_tracing_core.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal

from lamina_sharded_jit.primitive import pjit_p

__all__ = ["explain_bad_result"]

#: how many argument names an operand's dependency list shows before "and N more"
_SHOWN = 6


class _Found(Exception):
    """The bad equation (raised out of the nested walk)."""

    def __init__(self, eqn: JaxprEqn, path: str, kind: str, operands: list[Any],
                 deps: list[frozenset[int]]):
        super().__init__(eqn.primitive.name)
        self.eqn = eqn
        self.path = path
        self.kind = kind
        self.operands = operands
        self.deps = deps


def _inner(eqn: JaxprEqn) -> tuple[Jaxpr, Sequence[Any], str] | None:
    """The body a call-like equation runs on its operands, with its consts
    and the name it adds to the path; None for other equations."""
    prim, params = eqn.primitive, eqn.params
    body: Any = None
    name = ""
    if prim is pjit_p:
        body, name = params["jaxpr"], f"jit({params['name']})"
    elif prim is remat_p:
        body, name = params["jaxpr"], "checkpoint"
    elif prim is custom_jvp_call_p or prim is custom_vjp_call_p:
        body = params.get("call_jaxpr", params.get("fun_jaxpr"))
        name = prim.name
    if body is None:
        return None
    if isinstance(body, ClosedJaxpr):
        return body.jaxpr, body.consts, name
    return body, (), name


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _walk(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any],
          arg_deps: Sequence[frozenset[int]], path: str) -> tuple[list[Any], list[frozenset[int]]]:
    env: dict[Any, Any] = {}
    deps: dict[Any, frozenset[int]] = {}
    none: frozenset[int] = frozenset()
    for v, c in zip(jaxpr.constvars, consts):
        env[v], deps[v] = c, none
    for v, a, d in zip(jaxpr.invars, args, arg_deps):
        env[v], deps[v] = a, d

    def read(atom: Any) -> tuple[Any, frozenset[int]]:
        if type(atom) is Literal:
            return atom.val, none
        return env[atom], deps[atom]

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        invals = [x for x, _ in ins]
        indeps = [d for _, d in ins]
        eqn_path = _join(path, str(eqn.source_info.name_stack))
        inner = _inner(eqn)
        if inner is not None:
            body, body_consts, name = inner
            outs, out_deps = _walk(body, body_consts, invals, indeps, _join(eqn_path, name))
        else:
            subfuns, params = eqn.primitive.get_bind_params(eqn.params)
            result = eqn.primitive.bind(*subfuns, *invals, **params)
            outs = list(result) if eqn.primitive.multiple_results else [result]
            joint = frozenset().union(*indeps) if indeps else none
            out_deps = [joint] * len(outs)
            bad = first_bad(outs)
            if bad is not None:
                raise _Found(eqn, _join(eqn_path, eqn.primitive.name), bad[1], invals, indeps)
        for v, x, d in zip(eqn.outvars, outs, out_deps):
            env[v], deps[v] = x, d
    results = [read(v) for v in jaxpr.outvars]
    return [x for x, _ in results], [d for _, d in results]


def _names(dep: frozenset[int], arg_names: Sequence[str | None]) -> str:
    names = [arg_names[i] or f"argument {i}" for i in sorted(dep)]
    if not names:
        return "no argument (constants only)"
    shown = ", ".join(names[:_SHOWN])
    return shown if len(names) <= _SHOWN else f"{shown} and {len(names) - _SHOWN} more"


def _aval_text(x: Any) -> str:
    aval = getattr(x, "aval", None)
    return aval.str_short() if aval is not None and hasattr(aval, "str_short") else \
        type(x).__name__


def explain_bad_result(closed: ClosedJaxpr, args: Sequence[Any], fun: str,
                       kind: str) -> FloatingPointError:
    """The error for ``fun`` (``jit(loss)``), whose result held a ``kind``
    ('nan' or 'inf'): names the first equation producing one, or says that
    none does when evaluated equation by equation."""
    dbg = closed.jaxpr.debug_info
    arg_names: Sequence[str | None] = (dbg.arg_names if dbg is not None
                                       else [None] * len(closed.jaxpr.invars))
    arg_deps = [frozenset({i}) for i in range(len(args))]
    try:
        with suspended():
            _walk(closed.jaxpr, closed.consts, args, arg_deps, fun)
    except _Found as found:
        eqn = found.eqn
        lines = [f"invalid value ({found.kind}) encountered in {eqn.primitive.name} at "
                 f"{eqn.source_info}", f"  name stack: {found.path}"]
        for i, (x, dep) in enumerate(zip(found.operands, found.deps)):
            lines.append(f"  operand {i} ({_aval_text(x)}) depends on {_names(dep, arg_names)}")
        return FloatingPointError("\n".join(lines))
    return FloatingPointError(
        f"invalid value ({kind}) encountered in the result of {fun}, but no equation "
        "produces one when it runs equation by equation (XLA's fused program computes "
        "differently); run it under disable_jit() to look further")
