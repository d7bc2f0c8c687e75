"""``lamina.experimental.checkify``: run-time checks whose failures are values.

``checkify(f, errors=user_checks)`` returns ``g`` with ``g(*args) -> (err,
out)``: ``f`` is traced to a jaxpr, which is then evaluated again with an
error state threaded through it (through ``jit``, ``pmap``, ``cond``,
``while_loop``, ``scan``, ``checkpoint`` and custom derivatives): each check that can fail
updates it, the first failure wins. ``err.get()`` is the message of the first
failure (None if none), ``err.throw()`` raises it. ``err`` is a pytree, so
``jit(checkify(f))`` and ``vmap(checkify(f))`` return it (batched: the
message names the first failing element).

The checks (``errors``): ``user_checks`` (``check(pred, msg, *fmt_args)``),
``nan_checks`` (a primitive produced a NaN), ``div_checks`` (integer division
by zero), ``index_checks`` (an index out of bounds in ``dynamic_slice``,
``dynamic_update_slice``, ``gather``), and the unions ``float_checks``,
``automatic_checks``, ``all_checks``. Messages name the primitive, the
user's source line and the name stack (``jit(f)/jvp(g)/log``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_primitive import pmap_p
from lamina_linear_util import tree_util as tu
from lamina_sharded_jit.api import make_jaxpr
from lamina_sharded_jit.primitive import pjit_p
from lamina_tracing_core import numpy as jnp
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.checkpoint import remat_p
from lamina_tracing_core.checks import CheckFailure, check_p, format_message
from lamina_tracing_core.control_flow import cond_p, scan, scan_p, switch, while_loop, while_p
from lamina_tracing_core.custom_derivatives import custom_jvp_call_p, custom_vjp_call_p
from lamina_tracing_core.core import Tracer
from lamina_tracing_core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal
from lamina_tracing_core.lax.elementwise import div_p
from lamina_tracing_core.lax.indexing import (
    dynamic_slice_p,
    dynamic_update_slice_p,
    gather_p,
    scatter_add_p,
    scatter_max_p,
    scatter_min_p,
    scatter_mul_p,
    scatter_p,
    scatter_sub_p,
)
from lamina_tracing_core.source_info import current_source_info

__all__ = [
    "Error", "ErrorCategory", "JaxRuntimeError", "all_checks", "automatic_checks", "check",
    "check_error", "checkify", "div_checks", "float_checks", "index_checks", "nan_checks", "user_checks",
]

#: what a failed check raises (``err.throw()``, or a check outside checkify)
JaxRuntimeError = CheckFailure


class ErrorCategory:
    """One kind of check (``user_checks``, ``nan_checks``, ...)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


_USER, _NAN, _DIV, _INDEX = (ErrorCategory(n) for n in ("user", "nan", "div", "index"))
user_checks: frozenset[ErrorCategory] = frozenset({_USER})
nan_checks: frozenset[ErrorCategory] = frozenset({_NAN})
div_checks: frozenset[ErrorCategory] = frozenset({_DIV})
index_checks: frozenset[ErrorCategory] = frozenset({_INDEX})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


def check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    """Asserts ``pred`` (a bool array: all of it must hold). Under
    ``checkify`` a failure becomes the error value, with ``msg.format(*fmt_args,
    **fmt_kwargs)`` as its message; eagerly it raises at once."""
    if not isinstance(msg, str):
        raise TypeError(f"checkify.check: msg must be a str, got {type(msg).__name__}")
    leaves, tree = tu.tree_flatten((fmt_args, fmt_kwargs))
    check_p.bind(jnp.asarray(pred), *[jnp.asarray(x) for x in leaves], message=msg,
                 fmt_tree=tree, source=current_source_info())


# --- the error state ---------------------------------------------------------------------------
class _Site:
    """One place a check can fail: its message and the avals of the values it
    keeps to format the message with."""

    def __init__(self, code: int, describe: Callable[[Sequence[Any]], str],
                 payload: Sequence[ShapedArray]):
        self.code = code
        self.describe = describe
        self.payload = tuple(payload)
        self.slot = 0  # first index of its payload in the state's payload list


class _Sites:
    """Every site of one checkified function (codes start at 1; 0 = no error)."""

    def __init__(self, errors: frozenset[ErrorCategory]):
        self.errors = errors
        self.by_key: dict[Any, _Site] = {}
        self.sites: list[_Site] = []
        self.payload_avals: list[ShapedArray] = []

    def site(self, key: Any, describe: Callable[[Sequence[Any]], str],
             payload: Sequence[ShapedArray] = ()) -> _Site:
        found = self.by_key.get(key)
        if found is None:
            found = self.by_key[key] = _Site(len(self.sites) + 1, describe, payload)
            found.slot = len(self.payload_avals)
            self.payload_avals.extend(found.payload)
            self.sites.append(found)
        return found

    def register_user_checks(self, jaxpr: Jaxpr) -> None:
        """Allocates the payload of every user check up front: the state is a
        loop carry, so it cannot grow inside a loop body."""
        for eqn in jaxpr.eqns:
            if eqn.primitive is check_p and _USER in self.errors:
                self._user_site(eqn)
            for sub in _subjaxprs(eqn):
                self.register_user_checks(sub)

    def _user_site(self, eqn: JaxprEqn) -> _Site:
        params = eqn.params

        def describe(values: Sequence[Any]) -> str:
            text = format_message(params["message"], params["fmt_tree"], values)
            return f"{text} (check at {params['source']})"

        return self.site(("user", id(eqn)), describe, [v.aval for v in eqn.invars[1:]])


def _subjaxprs(eqn: JaxprEqn) -> list[Jaxpr]:
    out = []
    for value in eqn.params.values():
        items = value if isinstance(value, (tuple, list)) else [value]
        for item in items:
            if isinstance(item, ClosedJaxpr):
                out.append(item.jaxpr)
            elif isinstance(item, Jaxpr):
                out.append(item)
    return out


_State = tuple[Any, Any, tuple[Any, ...]]  # (failed flag, site code, payloads)


def _initial_state(sites: _Sites) -> _State:
    payloads = tuple(jnp.zeros(a.shape, a.dtype) for a in sites.payload_avals)
    return jnp.asarray(False), jnp.asarray(0, np.int32), payloads


def _fail_if(state: _State, bad: Any, site: _Site, values: Sequence[Any] = ()) -> _State:
    """The state after a check at ``site`` that fails where ``bad`` holds."""
    flag, code, payloads = state
    first = jnp.logical_and(bad, jnp.logical_not(flag))
    new_code = jnp.where(first, jnp.asarray(site.code, np.int32), code)
    new_payloads = list(payloads)
    for i, value in enumerate(values):
        slot = site.slot + i
        new_payloads[slot] = jnp.where(first, value, payloads[slot])
    return jnp.logical_or(flag, bad), new_code, tuple(new_payloads)


# --- the automatic checks ----------------------------------------------------------------------
def _where(eqn: JaxprEqn) -> str:
    stack = str(eqn.source_info.name_stack)
    named = f", name stack {stack}/{eqn.primitive.name}" if stack else ""
    return f"at {eqn.source_info}{named}"


def _out_of_bounds(eqn: JaxprEqn, invals: Sequence[Any]) -> Any:
    prim = eqn.primitive
    if prim is dynamic_slice_p or prim is dynamic_update_slice_p:
        operand = invals[0]
        if prim is dynamic_slice_p:
            sizes, starts = eqn.params["slice_sizes"], invals[1:]
        else:
            sizes, starts = eqn.invars[1].aval.shape, invals[2:]
        shape = eqn.invars[0].aval.shape
        bad = [jnp.logical_or(s < 0, s > shape[d] - sizes[d]) for d, s in enumerate(starts)]
        del operand
    else:  # gather or scatter: the index vector is the last axis of the indices
        dnums, shape, indices = eqn.params["dimension_numbers"], eqn.invars[0].aval.shape, invals[1]
        if prim is gather_p:
            sizes, index_map = eqn.params["slice_sizes"], dnums.start_index_map
        else:
            sizes, index_map = _scatter_window_sizes(eqn), dnums.scatter_dims_to_operand_dims
        bad = []
        for k, d in enumerate(index_map):
            idx = indices[..., k]
            bad.append(jnp.any(jnp.logical_or(idx < 0, idx > shape[d] - sizes[d])))
    return jnp.any(jnp.stack([jnp.asarray(b) for b in bad])) if bad else jnp.asarray(False)


def _scatter_window_sizes(eqn: JaxprEqn) -> list[int]:
    """The size of a scatter's update window along each operand dimension:
    1 for inserted and batching dimensions, else the matching window
    dimension of the updates (they come in operand order)."""
    dnums = eqn.params["dimension_numbers"]
    unit = set(dnums.inserted_window_dims) | set(dnums.operand_batching_dims)
    window = iter(eqn.invars[2].aval.shape[d] for d in dnums.update_window_dims)
    return [1 if d in unit else next(window) for d in range(eqn.invars[0].aval.ndim)]


_SCATTERS = (scatter_p, scatter_add_p, scatter_sub_p, scatter_mul_p, scatter_min_p,
             scatter_max_p)
_INDEXED = (dynamic_slice_p, dynamic_update_slice_p, gather_p, *_SCATTERS)


def _fixed(message: str) -> Callable[[Sequence[Any]], str]:
    """The describer of a site whose message keeps no values."""
    def describe(values: Sequence[Any]) -> str:
        return message

    return describe


def _automatic(state: _State, eqn: JaxprEqn, invals: Sequence[Any], outs: Sequence[Any],
               sites: _Sites) -> _State:
    prim, errors = eqn.primitive, sites.errors
    if _NAN in errors:
        floats = [o for o, v in zip(outs, eqn.outvars) if v.aval.dtype.kind in "fc"]
        if floats:
            site = sites.site(("nan", id(eqn)), _fixed(
                f"nan generated by primitive: {prim.name} {_where(eqn)}"))
            bad = jnp.any(jnp.stack([jnp.any(jnp.isnan(o)) for o in floats]))
            state = _fail_if(state, bad, site)
    # JAX checks div (of every dtype: a float 1/0 is reported too), not rem
    if _DIV in errors and prim is div_p:
        site = sites.site(("div", id(eqn)), _fixed(f"division by zero {_where(eqn)}"))
        state = _fail_if(state, jnp.any(invals[1] == 0), site)
    if _INDEX in errors and prim in _INDEXED:
        shape = eqn.invars[0].aval.str_short()
        site = sites.site(("index", id(eqn)), _fixed(
            f"out-of-bounds indexing for array of type {shape} in {prim.name} {_where(eqn)}"))
        state = _fail_if(state, _out_of_bounds(eqn, invals), site)
    return state


# --- the interpreter ---------------------------------------------------------------------------
def _call_body(eqn: JaxprEqn) -> tuple[Jaxpr, Sequence[Any]] | None:
    prim, params = eqn.primitive, eqn.params
    body: Any = None
    if prim is pjit_p or prim is remat_p:
        body = params["jaxpr"]
    elif prim is custom_jvp_call_p or prim is custom_vjp_call_p:
        body = params.get("call_jaxpr", params.get("fun_jaxpr"))
    if body is None:
        return None
    return (body.jaxpr, body.consts) if isinstance(body, ClosedJaxpr) else (body, ())


def _run(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], state: _State,
         sites: _Sites) -> tuple[list[Any], _State]:
    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if type(atom) is Literal else env[atom]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        outs, state = _run_eqn(eqn, invals, state, sites)
        for v, x in zip(eqn.outvars, outs):
            if type(v) is not DropVar:
                env[v] = x
    return [read(v) for v in jaxpr.outvars], state


def _run_eqn(eqn: JaxprEqn, invals: list[Any], state: _State,
             sites: _Sites) -> tuple[list[Any], _State]:
    prim = eqn.primitive
    if prim is check_p:
        if _USER in sites.errors:
            site = sites._user_site(eqn)
            state = _fail_if(state, jnp.logical_not(jnp.all(invals[0])), site, invals[1:])
        return [], state
    body = _call_body(eqn)
    if body is not None:
        return _run(body[0], body[1], invals, state, sites)
    if prim is cond_p:
        return _cond(eqn, invals, state, sites)
    if prim is while_p:
        return _while(eqn, invals, state, sites)
    if prim is scan_p:
        return _scan(eqn, invals, state, sites)
    if prim is pmap_p:
        return _pmap(eqn, invals, state, sites)
    subfuns, params = prim.get_bind_params(eqn.params)
    result = prim.bind(*subfuns, *invals, **params)
    outs = list(result) if prim.multiple_results else [result]
    return outs, _automatic(state, eqn, invals, outs, sites)


def _cond(eqn: JaxprEqn, invals: list[Any], state: _State,
          sites: _Sites) -> tuple[list[Any], _State]:
    index, *operands = invals

    def branch(closed: ClosedJaxpr) -> Callable[..., Any]:
        def run(st: _State, *ops: Any) -> tuple[_State, list[Any]]:
            outs, st = _run(closed.jaxpr, closed.consts, ops, st, sites)
            return st, outs

        return run

    new_state, outs = switch(jnp.asarray(index).astype(np.int32),
                             [branch(b) for b in eqn.params["branches"]], state, *operands)
    return list(outs), new_state


def _while(eqn: JaxprEqn, invals: list[Any], state: _State,
           sites: _Sites) -> tuple[list[Any], _State]:
    p = eqn.params
    cond_jaxpr, body_jaxpr = p["cond_jaxpr"], p["body_jaxpr"]
    cond_consts = invals[:p["cond_nconsts"]]
    body_consts = invals[p["cond_nconsts"]:p["cond_nconsts"] + p["body_nconsts"]]
    init = invals[p["cond_nconsts"] + p["body_nconsts"]:]

    def cond_fun(carry: tuple[_State, list[Any]]) -> Any:
        outs, _ = _run(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cond_consts, *carry[1]], carry[0],
                       sites)
        return outs[0]

    def cond_checks(st: _State, carry: list[Any]) -> _State:
        # the predicate itself cannot return the state, so the checks of each
        # of its evaluations are taken here: once on the initial carry, then
        # on each carry the body produces (the last one included)
        _, st = _run(cond_jaxpr.jaxpr, cond_jaxpr.consts, [*cond_consts, *carry], st, sites)
        return st

    def body_fun(carry: tuple[_State, list[Any]]) -> tuple[_State, list[Any]]:
        outs, st = _run(body_jaxpr.jaxpr, body_jaxpr.consts, [*body_consts, *carry[1]],
                        carry[0], sites)
        return cond_checks(st, outs), outs

    state = cond_checks(state, list(init))
    new_state, outs = while_loop(cond_fun, body_fun, (state, list(init)))
    return list(outs), new_state


def _scan(eqn: JaxprEqn, invals: list[Any], state: _State,
          sites: _Sites) -> tuple[list[Any], _State]:
    p = eqn.params
    closed, n_consts, n_carry = p["jaxpr"], p["num_consts"], p["num_carry"]
    consts, init, xs = invals[:n_consts], invals[n_consts:n_consts + n_carry], \
        invals[n_consts + n_carry:]

    def body(carry: tuple[_State, list[Any]], x: list[Any]) -> Any:
        outs, st = _run(closed.jaxpr, closed.consts, [*consts, *carry[1], *x], carry[0], sites)
        return (st, outs[:n_carry]), outs[n_carry:]

    (new_state, carry), ys = scan(body, (state, list(init)), list(xs), length=p["length"],
                                  reverse=p["reverse"])
    return [*carry, *ys], new_state


def _pmap(eqn: JaxprEqn, invals: list[Any], state: _State,
          sites: _Sites) -> tuple[list[Any], _State]:
    """Each replica starts from ``state`` and returns its own: the state is then
    mapped, as under ``vmap`` (the message names the first failing replica)."""
    p = eqn.params

    def replica(st: _State, *args: Any) -> tuple[list[Any], _State]:
        return _run(p["call_jaxpr"], (), args, st, sites)

    mapped = pmap(replica, axis_name=p["axis_name"], in_axes=(None, *p["in_axes"]),
                  out_axes=(list(p["out_axes"]), 0), devices=p["devices"],
                  backend=p["backend"])
    outs, new_state = mapped(state, *invals)
    return list(outs), new_state


# --- the error value ---------------------------------------------------------------------------
class Error:
    """The outcome of a checkified call: ``get()`` the first failure's
    message (None if every check held), ``throw()`` raise it."""

    def __init__(self, failed: Any, code: Any, payloads: Sequence[Any], sites: _Sites):
        self._failed = failed
        self._code = code
        self._payloads = tuple(payloads)
        self._sites = sites

    def get(self) -> str | None:
        failed = np.asarray(self._failed)
        if not failed.any():
            return None
        where: tuple[int, ...] = ()
        if failed.ndim:
            where = tuple(int(i) for i in np.argwhere(failed)[0])
        code = int(np.asarray(self._code)[where])
        site = self._sites.sites[code - 1]
        # as arrays (not NumPy's): a message that shows a value's repr shows
        # Array(...), as JAX's does
        values = [jnp.asarray(np.asarray(self._payloads[site.slot + i])[where])
                  for i in range(len(site.payload))]
        message = site.describe(values)
        return f"{message} (at mapped index {list(where)})" if where else message

    def get_exception(self) -> CheckFailure | None:
        message = self.get()
        return None if message is None else CheckFailure(message)

    def throw(self) -> None:
        error = self.get_exception()
        if error is not None:
            raise error

    def __str__(self) -> str:
        return f"Error({self.get()})"

    __repr__ = __str__


def check_error(error: Error) -> None:
    """Raises the failure ``error`` holds (``error.throw()``); nothing if every
    check held. ``error`` must be concrete: the value a checkified call
    returned, not one still being traced."""
    if not isinstance(error, Error):
        raise TypeError(f"checkify.check_error: error must be a checkify.Error, "
                        f"got {type(error).__name__}")
    if any(isinstance(leaf, Tracer) for leaf in tu.tree_leaves(error)):
        raise TypeError("checkify.check_error: error is being traced (inside jit, vmap or "
                        "checkify); lamina raises only a concrete error: call it on the "
                        "value the checkified function returned")
    error.throw()


def _split_children(children: tuple[Any, ...]) -> tuple[Any, Any, tuple[Any, ...]]:
    return children[0], children[1], children[2:]


tu.register_pytree_node(
    Error, lambda e: ((e._failed, e._code, *e._payloads), e._sites),
    lambda sites, children: Error(*_split_children(tuple(children)), sites))



def checkify(f: Callable[..., Any], errors: frozenset[ErrorCategory] = user_checks
             ) -> Callable[..., tuple[Error, Any]]:
    """``checkify(f, errors)(*args, **kwargs) -> (err, f(*args, **kwargs))``."""
    if not callable(f):
        raise TypeError(f"checkify: f must be callable, got {type(f).__name__}")
    unknown = [e for e in errors if not isinstance(e, ErrorCategory)]
    if unknown:
        raise TypeError(f"checkify: errors must be a set of checkify error categories "
                        f"(user_checks, nan_checks, ...), got {unknown[0]!r}")

    def checked(*args: Any, **kwargs: Any) -> tuple[Error, Any]:
        closed, out_shape = make_jaxpr(f, return_shape=True)(*args, **kwargs)
        flat_args = tu.tree_leaves((args, kwargs))
        sites = _Sites(frozenset(errors))
        sites.register_user_checks(closed.jaxpr)
        state = _initial_state(sites)
        outs, state = _run(closed.jaxpr, closed.consts, flat_args, state, sites)
        failed, code, payloads = state
        return (Error(failed, code, payloads, sites),
                tu.tree_unflatten(tu.tree_structure(out_shape), outs))

    checked.__name__ = getattr(f, "__name__", "checked")
    return checked
