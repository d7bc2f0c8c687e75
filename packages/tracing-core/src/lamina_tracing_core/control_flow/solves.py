"""``custom_linear_solve`` (the ``custom_linear_solve`` primitive) and
``custom_root``: solvers whose derivatives come from implicit
differentiation, never from differentiating the solver's iterations.

``linear_solve_p`` holds four closed jaxprs, ``jaxprs = (matvec, vecmat,
solve, transpose_solve)`` (``vecmat`` and ``transpose_solve`` may be None),
each taking ``[*its consts, *vector]``; the operands are the four groups of
consts (``const_lengths`` says how many each) followed by the flat
right-hand side ``b``. Its outputs are ``solve``'s: the flat solution, then
the flat auxiliary outputs under ``has_aux``.

Rules: abstract evaluation and effects (``solve``'s), eager evaluation and
lowering (``solve`` inlined), JVP (``x_dot = solve(b_dot - matvec_dot(x))``,
only ``matvec``'s consts are differentiated), transpose (linear in ``b``:
the cotangent of ``b`` is ``transpose_solve`` of the output cotangent, with
the roles of the four jaxprs swapped) and batching (every jaxpr batched, the
right-hand side and solution batched at 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from lamina_linear_util import tree_util as tu
from lamina_tracing_core import ad, api, batching
from lamina_tracing_core.ad_util import Zero, instantiate_zeros, tangent_aval
from lamina_tracing_core.avals import ShapedArray, get_aval
from lamina_tracing_core.control_flow.common import (
    BodyTrace,
    as_array,
    body_debug_info,
    eval_closed,
    joined_effects,
    long_type_str,
    trace_body,
    typematch,
)
from lamina_tracing_core.custom_derivatives import custom_jvp
from lamina_tracing_core.effects import Effects
from lamina_tracing_core.jaxpr import ClosedJaxpr
from lamina_tracing_core.lax import elementwise
from lamina_tracing_core.primitives import Primitive

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p"]

linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)
linear_solve_p.higher_order = True


class _SolveTuple(NamedTuple):
    """One entry per role, in the order of the operands."""
    matvec: Any
    vecmat: Any
    solve: Any
    transpose_solve: Any

    def transposed(self) -> _SolveTuple:
        return _SolveTuple(self.vecmat, self.matvec, self.transpose_solve, self.solve)


# --- tracing the user's functions ---------------------------------------------------------------
def _trace_vector_fn(api_name: str, role: str, fun: Callable[..., Any], tree: Any,
                     avals: Sequence[ShapedArray], example: Any, has_aux: bool = False
                     ) -> BodyTrace:
    """Traces ``fun(vector)`` and checks it returns a vector of the same
    structure and types (plus, under ``has_aux``, anything as a second
    element)."""
    body = trace_body(fun, tu.tree_structure((example,)), avals,
                      body_debug_info(api_name, fun, (example,)))
    out_tree, out_avals = body.out_tree, body.out_avals
    if has_aux:
        children = tu.treedef_children(out_tree)
        if len(children) != 2:
            raise TypeError(f"{api_name}: with has_aux=True, {role} must return a pair "
                            f"(solution, aux), got output structure {out_tree}")
        out_tree = children[0]
        out_avals = out_avals[:len(out_avals) - children[1].num_leaves]
    if out_tree != tree or not all(map(typematch, out_avals, avals)):
        raise TypeError(
            f"{api_name}: {role} must return the structure and types of its vector argument, "
            f"{tree} with {[long_type_str(a) for a in avals]}; got {out_tree} with "
            f"{[long_type_str(a) for a in out_avals]}")
    return body


def _transpose_of(matvec: BodyTrace) -> Callable[..., Any]:
    """The transpose ``vecmat`` of the traced linear ``matvec`` (its consts
    fixed), as a function of the flat cotangent."""
    consts = list(matvec.consts)
    avals = matvec.in_avals

    def vecmat(*cts: Any) -> list[Any]:
        primals = [*consts, *(ad.UndefinedPrimal(a) for a in avals)]
        out = ad.backward_pass(matvec.jaxpr.jaxpr, matvec.jaxpr.consts, primals, list(cts))
        return [instantiate_zeros(c) for c in out[len(consts):]]

    return vecmat


def custom_linear_solve(matvec: Callable[[Any], Any], b: Any,
                        solve: Callable[[Callable[[Any], Any], Any], Any],
                        transpose_solve: Callable[[Callable[[Any], Any], Any], Any] | None = None,
                        symmetric: bool = False, has_aux: bool = False) -> Any:
    """Solves ``matvec(x) = b`` for ``x`` with ``solve(matvec, b)``, with
    derivatives by implicit differentiation: the solver itself is never
    differentiated, so it may be iterative (``while_loop``) or not
    differentiable at all.

    ``matvec`` is linear; ``b`` and ``x`` are pytrees of one structure.
    Forward mode needs ``solve`` only; reverse mode also needs
    ``transpose_solve(vecmat, b)``, which solves the transposed system
    (``vecmat`` is the transpose of ``matvec``), or ``symmetric=True``,
    which uses ``solve`` for it. With ``has_aux``, both solvers return
    ``(x, aux)`` and ``aux`` (not differentiated) is returned too."""
    b_flat, tree = tu.tree_flatten(b)
    avals = [get_aval(x) for x in b_flat]
    api_name = "custom_linear_solve"
    matvec_body = _trace_vector_fn(api_name, "matvec", matvec, tree, avals, b)
    solve_body = _trace_vector_fn(api_name, "solve", lambda x: solve(matvec, x), tree,
                                     avals, b, has_aux)
    vecmat_body = tsolve_body = None
    if transpose_solve is not None or symmetric:
        if symmetric:
            vecmat = matvec
        else:
            vecmat_flat = _transpose_of(matvec_body)

            def vecmat(x: Any) -> Any:
                return tu.tree_unflatten(tree, vecmat_flat(*tu.tree_leaves(x)))

        vecmat_body = _trace_vector_fn(api_name, "vecmat", vecmat, tree, avals, b)
        t_solve = solve if transpose_solve is None else transpose_solve
        tsolve_body = _trace_vector_fn(api_name, "transpose_solve",
                                          lambda x: t_solve(vecmat, x), tree, avals, b,
                                          has_aux)
    bodies = _SolveTuple(matvec_body, vecmat_body, solve_body, tsolve_body)
    consts = [list(body.consts) if body is not None else [] for body in bodies]
    jaxprs = _SolveTuple(*(body.jaxpr if body is not None else None for body in bodies))
    out = linear_solve_p.bind(*(c for group in consts for c in group), *b_flat,
                              const_lengths=_SolveTuple(*(len(g) for g in consts)),
                              jaxprs=jaxprs)
    x = tu.tree_unflatten(tree, out[:len(b_flat)])
    if not has_aux:
        return x
    aux_tree = tu.treedef_children(solve_body.out_tree)[1]
    return x, tu.tree_unflatten(aux_tree, out[len(b_flat):])


def _split(args: Sequence[Any], const_lengths: _SolveTuple) -> tuple[_SolveTuple, list[Any]]:
    groups, start = [], 0
    for n in const_lengths:
        groups.append(list(args[start:start + n]))
        start += n
    return _SolveTuple(*groups), list(args[start:])


# --- rules -----------------------------------------------------------------------------------------
def _abstract_eval(*avals: ShapedArray, const_lengths: _SolveTuple,
                   jaxprs: _SolveTuple) -> list[ShapedArray]:
    return list(jaxprs.solve.out_avals)


def _effects(*, const_lengths: _SolveTuple, jaxprs: _SolveTuple) -> Effects:
    return joined_effects([j for j in jaxprs if j is not None])


linear_solve_p.def_abstract_eval(_abstract_eval)
linear_solve_p.def_effects(_effects)


def _impl(*args: Any, const_lengths: _SolveTuple, jaxprs: _SolveTuple) -> list[Any]:
    consts, b = _split(args, const_lengths)
    outs = eval_closed(jaxprs.solve, *consts.solve, *b)
    return [as_array(o, a) for o, a in zip(outs, jaxprs.solve.out_avals)]


linear_solve_p.def_impl(_impl)


def _jvp(primals: Sequence[Any], tangents: Sequence[Any], *, const_lengths: _SolveTuple,
         jaxprs: _SolveTuple) -> tuple[list[Any], list[Any]]:
    consts, b = _split(primals, const_lengths)
    const_dots, b_dots = _split(tangents, const_lengths)
    out = linear_solve_p.bind(*primals, const_lengths=const_lengths, jaxprs=jaxprs)
    x, aux = out[:len(b)], out[len(b):]
    matvec_nz = [type(t) is not Zero for t in const_dots.matvec]
    if any(matvec_nz):
        # d/dt matvec_t(x) at fixed x: the JVP of matvec in its consts only.
        jvp_jaxpr, out_nz = ad.jvp_jaxpr(jaxprs.matvec, [*matvec_nz, *([False] * len(b))], True)
        nz_dots = [t for t in const_dots.matvec if type(t) is not Zero]
        res = eval_closed(jvp_jaxpr, *consts.matvec, *x, *nz_dots)
        matvec_dot = res[len(b):]
        rhs = [elementwise.neg(m) if type(bd) is Zero else elementwise.sub(bd, m)
               for bd, m in zip(b_dots, matvec_dot)]
    else:
        rhs = list(b_dots)
    if all(type(r) is Zero for r in rhs):
        x_dot: list[Any] = [Zero(tangent_aval(get_aval(v))) for v in x]
    else:
        rhs = [instantiate_zeros(r) for r in rhs]
        x_dot = linear_solve_p.bind(*(c for g in consts for c in g), *rhs,
                                    const_lengths=const_lengths, jaxprs=jaxprs)[:len(b)]
    aux_dot = [Zero(tangent_aval(get_aval(a))) for a in aux]
    return list(out), [*x_dot, *aux_dot]


ad.primitive_jvps[linear_solve_p] = _jvp


def _transpose(cts: Sequence[Any], *args: Any, const_lengths: _SolveTuple,
               jaxprs: _SolveTuple) -> list[Any]:
    consts, b = _split(args, const_lengths)
    if any(ad.is_undefined_primal(c) for g in consts for c in g):
        raise ValueError("custom_linear_solve is linear only in its right-hand side 'b'; it "
                         "cannot be transposed with respect to the constants of its functions")
    if jaxprs.transpose_solve is None:
        raise TypeError("transpose_solve required for backwards mode automatic "
                        "differentiation of custom_linear_solve")
    n_b = len(b)
    cts_x = [instantiate_zeros(c) for c in cts[:n_b]]
    flipped = consts.transposed()
    out = linear_solve_p.bind(*(c for g in flipped for c in g), *cts_x,
                              const_lengths=const_lengths.transposed(),
                              jaxprs=jaxprs.transposed())
    return [None] * sum(const_lengths) + list(out[:n_b])


ad.primitive_transposes[linear_solve_p] = _transpose


def _batch(axis_data: batching.AxisData, args: Sequence[Any], dims: Sequence[int | None], *,
           const_lengths: _SolveTuple, jaxprs: _SolveTuple
           ) -> tuple[list[Any], list[int | None]]:
    size = axis_data.size
    n_consts = sum(const_lengths)
    const_bat = [d is not None for d in dims[:n_consts]]
    args = [batching.moveaxis(x, d, 0) if d is not None else x for x, d in zip(args, dims)]
    consts = list(args[:n_consts])
    b = [batching.bdim_at_front(x, d, size) if d is None else x
         for x, d in zip(args[n_consts:], dims[n_consts:])]
    bat_groups, _ = _split(const_bat, const_lengths)
    new_jaxprs: list[ClosedJaxpr | None] = []
    for jaxpr, bat in zip(jaxprs, bat_groups):
        if jaxpr is None:
            new_jaxprs.append(None)
            continue
        in_bat = [*bat, *([True] * len(b))]
        new_jaxprs.append(batching.batch_jaxpr(jaxpr, axis_data, in_bat, True)[0])
    out = linear_solve_p.bind(*consts, *b, const_lengths=const_lengths,
                              jaxprs=_SolveTuple(*new_jaxprs))
    return list(out), [0] * len(out)


batching.fancy_primitive_batchers[linear_solve_p] = _batch


# --- custom_root --------------------------------------------------------------------------------------
def custom_root(f: Callable[[Any], Any], initial_guess: Any,
                solve: Callable[[Callable[[Any], Any], Any], Any],
                tangent_solve: Callable[[Callable[[Any], Any], Any], Any],
                has_aux: bool = False) -> Any:
    """The root ``x`` of ``f(x) = 0`` found by ``solve(f, initial_guess)``,
    differentiated implicitly: the tangent of the root is
    ``-tangent_solve(g, f_dot(x))`` with ``g`` the linearization of ``f`` at
    ``x`` and ``f_dot`` ``f``'s tangent through what it closes over; the
    solver's iterations are never differentiated. ``tangent_solve(g, y)``
    solves ``g(x) = y`` (for a scalar, ``lambda g, y: y / g(1.0)``). With
    ``has_aux``, ``solve`` returns ``(x, aux)`` and so does this."""
    guess_flat, tree = tu.tree_flatten(initial_guess)
    avals = [get_aval(x) for x in guess_flat]
    api_name = "custom_root"
    f_body = _trace_vector_fn(api_name, "f", f, tree, avals, initial_guess)
    solve_body = _trace_vector_fn(api_name, "solve", lambda x: solve(f, x), tree, avals,
                                     initial_guess, has_aux)

    def linearize_and_solve(x: Any, b: Any) -> Any:
        _, f_lin = api.linearize(f, x)
        return tangent_solve(f_lin, b)

    pair = (initial_guess, initial_guess)
    ls_body = trace_body(linearize_and_solve, tu.tree_structure(pair), [*avals, *avals],
                         body_debug_info(api_name, linearize_and_solve, pair))
    n = len(guess_flat)
    f_jaxpr, solve_jaxpr, ls_jaxpr = f_body.jaxpr, solve_body.jaxpr, ls_body.jaxpr
    n_f, n_s = len(f_body.consts), len(solve_body.consts)

    @custom_jvp
    def root(*args: Any) -> Any:
        s_consts = args[n_f:n_f + n_s]
        return eval_closed(solve_jaxpr, *s_consts, *args[-n:])

    @root.defjvp
    def root_jvp(primals: Any, tangents: Any) -> Any:
        f_consts, ls_consts = primals[:n_f], primals[n_f + n_s:-n]
        sol = root(*primals)
        solution, aux = sol[:n], sol[n:]

        def f_at_solution(*consts: Any) -> Any:
            return eval_closed(f_jaxpr, *consts, *solution)

        _, rhs = api.jvp(f_at_solution, tuple(f_consts), tuple(tangents[:n_f]))
        neg_dot = eval_closed(ls_jaxpr, *ls_consts, *solution, *rhs)
        sol_dot = [elementwise.neg(v) for v in neg_dot]
        aux_dot = [instantiate_zeros(Zero(tangent_aval(get_aval(a)))) for a in aux]
        return list(sol), [*sol_dot, *aux_dot]

    out = root(*f_body.consts, *solve_body.consts, *ls_body.consts, *guess_flat)
    x = tu.tree_unflatten(tree, out[:n])
    if not has_aux:
        return x
    return x, tu.tree_unflatten(tu.treedef_children(solve_body.out_tree)[1], out[n:])
