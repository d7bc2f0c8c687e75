"""Shared machinery of the control-flow primitives (cond, while, scan).

Control flow is *initial style*: the user's branch/body functions are traced to
closed jaxprs right away and the jaxprs travel in the equation's params. This
module holds what the primitives share:

- ``trace_body``: traces a Python function on flat avals to a ``ClosedJaxpr``
  whose leading invars are the values it closes over (JAX's "consts", passed
  as leading operands of the equation, so that transformations see them);
  the jaxpr's debug info names its arguments after the user function's
  parameters (``carry[0]``, ``xs``) and its results (``result[0][1]``).
- jaxpr surgery that keeps the debug-info contract (one name per invar and per
  outvar): ``permute_invars``, ``permute_outvars``, ``move_invars_to_back``,
  ``add_unused_invars``, ``merge_consts``, ``retrace`` (builds a new jaxpr by evaluating a
  Python function with an explicit ``JaxprDebugInfo``).
- type checks with JAX-like messages naming the mismatching component
  (``carry_type_error``, ``branch_output_error``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from lamina_linear_util import api_util
from lamina_linear_util import tree_util as tu
from lamina_linear_util.debug_info import TracingDebugInfo
from lamina_linear_util.linear_util import wrap_init
from lamina_tracing_core import core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.array_methods import ArrayMethods
from lamina_tracing_core.base_primitives import convert_element_type_p
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.effects import Effects, union
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprDebugInfo, Var

__all__ = [
    "BodyTrace", "add_unused_invars", "aval_mismatch_extra", "body_debug_info",
    "branch_output_error", "carry_type_error", "eval_closed", "joined_effects",
    "long_type_str", "merge_consts", "move_invars_to_back", "permute_invars",
    "permute_outvars", "retrace", "split_list", "structure_differences", "trace_body",
    "typematch", "wrap_src",
]


# --- small utilities -------------------------------------------------------------------
def split_list(xs: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    """``xs`` cut into consecutive pieces of ``sizes``, plus the rest."""
    out: list[list[Any]] = []
    start = 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


def long_type_str(aval: ShapedArray) -> str:
    """``float32[3,4]``: the type as JAX's control-flow errors print it."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]{aval.vma_str()}"


def typematch(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shapes, dtypes and varying manual axes (weak types are
    compatible, as in JAX)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.vma == b.vma


def aval_mismatch_extra(a: ShapedArray, b: ShapedArray) -> str:
    """``", so the shapes do not match"`` and the like."""
    problems = []
    if a.dtype != b.dtype:
        problems.append("the dtypes do not match")
    if a.shape != b.shape:
        problems.append("the shapes do not match")
    if a.vma != b.vma:
        fewer = (a.vma | b.vma) - (a.vma & b.vma)
        axes = tuple(sorted(fewer, key=str))
        problems.append(f"the manual axis types do not match (`lax.pcast(..., {axes}, "
                        f"to='varying')` on the value that does not vary over them may fix "
                        f"it)")
    if not problems:
        return ""
    if len(problems) == 1:
        return ", so " + problems[0]
    return ", so " + ", ".join(problems[:-1]) + ", and " + problems[-1]


def wrap_src(src: str | None, transform: str) -> str:
    """``f at x.py:3`` -> ``jvp(f) at x.py:3``."""
    if not src:
        return f"{transform}(<unknown>)"
    fun, sep, where = src.partition(" at ")
    return f"{transform}({fun}){sep}{where}"


def joined_effects(jaxprs: Sequence[ClosedJaxpr | Jaxpr]) -> Effects:
    """The union of the jaxprs' effects (named axes used by the bodies)."""
    return union(j.effects for j in jaxprs)


def _capitalize(s: str) -> str:
    return s[:1].upper() + s[1:]


def _enumerate_differences(diffs: Sequence[str], sep: str = ";\n") -> str:
    if len(diffs) == 1:
        return f"{_capitalize(diffs[0])}.\n"
    return "".join(f"  * {d}{sep}" for d in diffs[:-1]) + f"  * {diffs[-1]}.\n"


# --- tracing bodies -----------------------------------------------------------------------
class BodyTrace:
    """A traced body: ``jaxpr`` takes ``[*consts, *args]`` (the consts' names
    are ``None``), ``consts`` are the values it closes over (may be tracers of
    enclosing transformations), ``out_tree`` the structure of its output."""

    __slots__ = ("jaxpr", "consts", "out_tree", "in_avals", "out_avals")

    def __init__(self, jaxpr: ClosedJaxpr, consts: list[Any], out_tree: Any,
                 in_avals: list[ShapedArray], out_avals: list[ShapedArray]):
        self.jaxpr = jaxpr
        self.consts = consts
        self.out_tree = out_tree
        self.in_avals = in_avals
        self.out_avals = out_avals

    @property
    def num_consts(self) -> int:
        return len(self.consts)


def body_debug_info(traced_for: str, fun: Callable[..., Any],
                    args: Sequence[Any]) -> TracingDebugInfo:
    """The debug info of a body called as ``fun(*args)`` (names from its
    parameters, e.g. ``carry[0]`` and ``xs`` for a scan body)."""
    return api_util.debug_info(traced_for, fun, tuple(args), {})


def trace_body(fun: Callable[..., Any], in_tree: Any, in_avals: Sequence[ShapedArray],
               debug_info: TracingDebugInfo) -> BodyTrace:
    """Traces ``fun(*unflatten(in_tree, args))`` to a closed jaxpr (see
    ``BodyTrace``). ``in_tree`` is the structure of the positional args tuple."""
    wrapped = wrap_init(fun, debug_info=debug_info)
    wrapped, _ = api_util.result_paths(wrapped)
    flat, out_tree_thunk = api_util.flatten_fun_nokwargs(wrapped, in_tree)
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(flat, list(in_avals))
    jaxpr = pe.convert_constvars_jaxpr(jaxpr)
    core.maybe_validate(jaxpr)
    return BodyTrace(ClosedJaxpr(jaxpr, ()), list(consts), out_tree_thunk(), list(in_avals),
                     list(out_avals))


def retrace(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
            debug_info: JaxprDebugInfo) -> ClosedJaxpr:
    """A new closed jaxpr computing flat ``fun`` on ``in_avals``, named by
    ``debug_info`` (which must have one name per input and per output).
    ``fun`` may close over jaxprs and constants, never over tracers."""
    jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(wrap_init(fun), list(in_avals),
                                                 debug_info=debug_info)
    out = ClosedJaxpr(jaxpr, consts)
    core.maybe_validate(out)
    return out


def as_array(value: Any, aval: ShapedArray) -> Any:
    """An output of an eager control-flow impl as an array of type ``aval``:
    host values (Python scalars, NumPy data an identity branch hands back) are
    placed, as a compiled program's results would be (and JAX's are)."""
    if isinstance(value, ArrayMethods):
        return value
    return convert_element_type_p.bind(value, new_dtype=aval.dtype, weak_type=aval.weak_type,
                                       sharding=None)


def keep_passed_through_carries(outs: Sequence[Any], carry: Sequence[Any], body: ClosedJaxpr,
                                num_consts: int) -> list[Any]:
    """The results of an eager loop, each carry its body passes through
    unchanged being the value given (a Python scalar stays one), as JAX's
    loops return them."""
    invars, outvars = body.jaxpr.invars, body.jaxpr.outvars
    kept = list(outs)
    for i, value in enumerate(carry):
        if outvars[i] is invars[num_consts + i]:
            kept[i] = value
    return kept


def eval_closed(jaxpr: ClosedJaxpr, *args: Any) -> list[Any]:
    """Evaluates ``jaxpr`` on ``args`` under the current transformations."""
    return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


# --- jaxpr surgery that keeps the names ------------------------------------------------------
def _dbg(jaxpr: Jaxpr) -> JaxprDebugInfo:
    dbg = jaxpr.debug_info
    if dbg is None:
        return JaxprDebugInfo("control_flow", None, (None,) * len(jaxpr.invars),
                              (None,) * len(jaxpr.outvars))
    return dbg


def permute_invars(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    """The jaxpr whose invar ``i`` is the old invar ``order[i]`` (a permutation)."""
    jaxpr = closed.jaxpr
    assert sorted(order) == list(range(len(jaxpr.invars))), order
    dbg = _dbg(jaxpr)
    new = jaxpr.replace(invars=[jaxpr.invars[i] for i in order],
                        debug_info=dbg.replace(arg_names=tuple(dbg.arg_names[i] for i in order)))
    return ClosedJaxpr(new, closed.consts)


def permute_outvars(closed: ClosedJaxpr, order: Sequence[int]) -> ClosedJaxpr:
    """The jaxpr whose outvar ``i`` is the old outvar ``order[i]`` (a permutation)."""
    jaxpr = closed.jaxpr
    assert sorted(order) == list(range(len(jaxpr.outvars))), order
    dbg = _dbg(jaxpr)
    new = jaxpr.replace(outvars=[jaxpr.outvars[i] for i in order],
                        debug_info=dbg.replace(
                            result_paths=tuple(dbg.result_paths[i] for i in order)))
    return ClosedJaxpr(new, closed.consts)


def add_unused_invars(closed: ClosedJaxpr, position: int, avals: Sequence[ShapedArray],
                      names: Sequence[str | None] | None = None) -> ClosedJaxpr:
    """The jaxpr with new, unused invars of ``avals`` inserted at ``position``."""
    jaxpr = closed.jaxpr
    dbg = _dbg(jaxpr)
    new_vars = [Var(a) for a in avals]
    new_names = tuple(names) if names is not None else (None,) * len(avals)
    invars = list(jaxpr.invars)
    arg_names = list(dbg.arg_names)
    invars[position:position] = new_vars
    arg_names[position:position] = new_names
    new = jaxpr.replace(invars=invars, debug_info=dbg.replace(arg_names=tuple(arg_names)))
    return ClosedJaxpr(new, closed.consts)


def move_invars_to_back(closed: ClosedJaxpr, to_move: Sequence[bool]) -> ClosedJaxpr:
    """The jaxpr with the invars flagged in ``to_move`` moved (in order) last."""
    stay = [i for i, m in enumerate(to_move) if not m]
    moved = [i for i, m in enumerate(to_move) if m]
    return permute_invars(closed, stay + moved)


def merge_consts(bodies: Sequence[BodyTrace]) -> tuple[list[ClosedJaxpr], list[Any]]:
    """Gives all bodies the same leading const invars (the union of their
    consts, deduplicated by identity): a body ignores the consts of others."""
    all_consts: list[Any] = []
    index: dict[int, int] = {}
    for body in bodies:
        for c in body.consts:
            if id(c) not in index:
                index[id(c)] = len(all_consts)
                all_consts.append(c)
    const_avals = [get_aval(c) for c in all_consts]
    out = []
    for body in bodies:
        jaxpr = body.jaxpr.jaxpr
        own = body.num_consts
        const_vars: list[Var] = [Var(a) for a in const_avals]
        for var, c in zip(jaxpr.invars[:own], body.consts):
            const_vars[index[id(c)]] = var
        dbg = _dbg(jaxpr)
        new = jaxpr.replace(
            invars=const_vars + list(jaxpr.invars[own:]),
            debug_info=dbg.replace(arg_names=(None,) * len(const_vars)
                                   + tuple(dbg.arg_names[own:])))
        out.append(ClosedJaxpr(new, body.jaxpr.consts))
    return out, all_consts


# --- structural and type errors -------------------------------------------------------------
def _describe(x: Any) -> str:
    if isinstance(x, (tuple, list)) and not hasattr(type(x), "_fields"):
        return f"a {type(x).__name__} of length {len(x)}"
    if tu.treedef_is_strict_leaf(tu.tree_structure(x)):
        return "a pytree leaf"
    return f"a {type(x)}"


def structure_differences(tree1: Any, tree2: Any, path: tuple[Any, ...] = ()
                          ) -> list[tuple[tuple[Any, ...], str, str, str]]:
    """``(key_path, thing1, thing2, explanation)`` for each place where the
    structures of two pytrees (leaves of any type) differ."""
    leaf1 = tu.treedef_is_strict_leaf(tu.tree_structure(tree1))
    leaf2 = tu.treedef_is_strict_leaf(tu.tree_structure(tree2))
    if leaf1 and leaf2:
        return []
    if type(tree1) is not type(tree2) or leaf1 or leaf2:
        return [(path, _describe(tree1), _describe(tree2), "their Python types differ")]
    if isinstance(tree1, (list, tuple)) and len(tree1) != len(tree2):
        return [(path, _describe(tree1), _describe(tree2), "the lengths do not match")]
    if isinstance(tree1, dict) and set(tree1) != set(tree2):
        diff = " ".join(repr(k) for k in sorted(set(tree1) ^ set(tree2), key=repr))
        return [(path, f"a dict with keys {sorted(tree1, key=repr)}",
                 f"a dict with keys {sorted(tree2, key=repr)}",
                 f"the dictionary keys do not match (symmetric difference: {{{diff}}})")]
    children1, meta1 = tu.flatten_one_level(tree1)
    children2, meta2 = tu.flatten_one_level(tree2)
    if len(children1) != len(children2):
        return [(path, f"a {type(tree1)} with {len(children1)} children",
                 f"a {type(tree2)} with {len(children2)} children",
                 "the numbers of children do not match")]
    if not _same_meta(meta1, meta2):
        return [(path, f"a {type(tree1)} with pytree metadata {meta1}",
                 f"a {type(tree2)} with pytree metadata {meta2}",
                 "the pytree node metadata does not match")]
    keyed = tu.tree_flatten_with_path(tree1, is_leaf=lambda x: x is not tree1)[0]
    out = []
    for (key_path, _), c1, c2 in zip(keyed, children1, children2):
        out += structure_differences(c1, c2, path + tuple(key_path))
    return out


def _same_meta(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def _first_param_name(fun: Callable[..., Any]) -> str | None:
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters)
    return params[0] if params else None


def carry_type_error(api: str, body_fun: Callable[..., Any], in_tree: Any,
                     in_avals: Sequence[ShapedArray], out_tree: Any,
                     out_avals: Sequence[ShapedArray]) -> TypeError | None:
    """The error for a body whose carry output differs from its carry input
    (structure or types), naming the components; ``None`` when they agree.
    ``api`` is e.g. ``"scan body"`` or ``"while_loop body"``."""
    carry_name = _first_param_name(body_fun)
    src = api_util.fun_sourceinfo(body_fun)
    which = f"\n\nThe {api} function is {src}." if src else ""

    def component(path: Sequence[Any]) -> str:
        key = tu.keystr(tuple(path))
        if carry_name:
            return (f"the input carry component {carry_name}{key}" if path
                    else f"the input carry {carry_name}")
        return f"the input carry at path {key}" if path else "the input carry"

    if in_tree != out_tree:
        in_carry = tu.tree_unflatten(in_tree, list(in_avals))
        out_carry = tu.tree_unflatten(out_tree, list(out_avals))
        diffs = [f"{component(p)} is {t1} but the corresponding component of the carry "
                 f"output is {t2}, so {why}"
                 for p, t1, t2, why in structure_differences(in_carry, out_carry)]
        if not diffs:
            diffs = [f"the input tree structure is {in_tree} but the output tree structure "
                     f"is {out_tree}"]
        return TypeError(
            f"{api} function carry input and carry output must have the same pytree "
            f"structure, but they differ:\n\n{_enumerate_differences(diffs)}\n"
            "Revise the function so that the carry output has the same pytree structure "
            f"as the carry input.{which}")
    if all(typematch(a, b) for a, b in zip(in_avals, out_avals)):
        return None
    paths = [p for p, _ in tu.tree_flatten_with_path(
        tu.tree_unflatten(in_tree, list(range(len(in_avals)))))[0]]
    diffs = [f"{component(p)} has type {long_type_str(a)} but the corresponding output "
             f"carry component has type {long_type_str(b)}{aval_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, in_avals, out_avals) if not typematch(a, b)]
    return TypeError(
        f"{api} function carry input and carry output must have equal types, but they "
        f"differ:\n\n{_enumerate_differences(diffs)}\n"
        "Revise the function so that all output types match the corresponding input "
        f"types.{which}")


def branch_output_error(api: str, name1: str, name2: str, fun1: Callable[..., Any],
                        fun2: Callable[..., Any], tree1: Any, avals1: Sequence[ShapedArray],
                        tree2: Any, avals2: Sequence[ShapedArray]) -> TypeError | None:
    """The error for two branches with different output structures or types
    (``true_fun`` vs ``false_fun``, ``branch 0`` vs ``branch1``); ``None``
    when they agree."""
    info1 = api_util.fun_sourceinfo(fun1)
    info2 = api_util.fun_sourceinfo(fun2)
    header = f"{name1} is {info1}\n{name2} is {info2}\n\n"
    pairs = tu.tree_flatten_with_path(tu.tree_unflatten(tree1, list(range(len(avals1)))))[0]
    paths = [p for p, _ in pairs]

    def where(path: Sequence[Any]) -> str:
        return f" at path {tu.keystr(tuple(path))}" if path else ""

    if tree1 != tree2:
        out1 = tu.tree_unflatten(tree1, list(avals1))
        out2 = tu.tree_unflatten(tree2, list(avals2))
        diffs = [f"{name1} output{where(p)} is {t1} but {name2} output{where(p)} is {t2}, "
                 f"so {why}" for p, t1, t2, why in structure_differences(out1, out2)]
        if not diffs:
            diffs = [f"{name1} output structure is {tree1} but {name2} output structure "
                     f"is {tree2}"]
        return TypeError(
            f"{api} branch outputs must have the same pytree structure, but they differ:"
            f"\n\n{header}{_enumerate_differences(diffs)}\n"
            f"Revise {name1} and/or {name2} so that they have the same pytree structure.")
    if all(typematch(a, b) for a, b in zip(avals1, avals2)):
        return None
    diffs = [f"the output of {name1}{where(p)} has type {long_type_str(a)} but the "
             f"corresponding output of {name2} has type {long_type_str(b)}"
             f"{aval_mismatch_extra(a, b)}"
             for p, a, b in zip(paths, avals1, avals2) if not typematch(a, b)]
    listed = _enumerate_differences(diffs)
    return TypeError(
        f"{api} branches must have equal output types but they differ.\n\n{header}"
        f"{listed}\n"
        f"Revise {name1} and/or {name2} so that all output types match.")
