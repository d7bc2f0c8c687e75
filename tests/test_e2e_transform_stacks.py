"""Property test: random stacks (depth <= 4) of jit / grad / jvp / vjp / vmap /
checkpoint / scan / cond over random pytrees of float32 arguments.

Every stack wraps one fixed, elementwise, scalar-output body
``B(args) = sum over all elements u of phi(u)`` with
``phi(u) = u sin(u) + u**2 / 2``. Each wrapper again maps the same arguments
to a scalar, so wrappers compose in any order. Because the body is a sum of
one function of each element, every wrapper turns the per-element function
``psi`` into another one, which numpy can evaluate from ``psi``'s derivatives:

- ``grad`` (summed over all gradient leaves): ``psi -> psi'``
- ``jvp`` with tangents ``args / 2`` (primal + tangent): ``psi + u psi' / 2``
- ``vjp`` with cotangent 1 (primal + summed cotangents): ``psi + psi'``
- ``vmap`` over ``[args, args / 2]`` (summed): ``psi(u) + psi(u / 2)``
- ``scan`` over ``[1, 1/2]`` accumulating ``F(args) * x``: ``1.5 psi``
- ``cond(sum(args) > 0, F, -F)``: ``s psi`` with ``s`` the sign of the sum
  of the top-level arguments (halving keeps it; differentiation sees a
  constant)
- ``jit`` and ``checkpoint``: unchanged.

Checked for each example: the jaxpr from ``lx.make_jaxpr`` passes
``validate_jaxpr_debug_info(recursive=True)``; its argument names equal
``api_util.debug_info('make_jaxpr', ...)``'s and the names spelled out here
from the parameter names and key paths; the jitted value equals numpy's.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lamina as lx
import lamina.numpy as jnp
from e2e_helpers import main_signature
from lamina import lax
from lamina_linear_util import api_util
from lamina_linear_util.tree_util import keystr, tree_flatten_with_path
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info

SHAPES = [(), (2,), (3,), (2, 2)]
MAX_DERIVATIVE = 6  # a stack of depth 4 needs at most 4 derivatives


# --- the body and the wrappers (lamina side) ----------------------------------------------------
def _leaves(tree: Any) -> list[Any]:
    return lx.tree_util.tree_leaves(tree)


def tree_sum(tree: Any) -> Any:
    total = jnp.float32(0.0)
    for leaf in _leaves(tree):
        total = total + jnp.sum(leaf)
    return total


def _body(*args: Any) -> Any:
    return tree_sum(lx.tree_util.tree_map(lambda u: u * jnp.sin(u) + 0.5 * u * u, args))


def base1(x):
    return _body(x)


def base2(x, y):
    return _body(x, y)


def base3(x, y, *rest):
    return _body(x, y, *rest)


BASES = {1: base1, 2: base2, 3: base3}
PARAM_NAMES = {1: ["x"], 2: ["x", "y"], 3: ["x", "y", "rest[0]"]}


def _wraps(fun: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return functools.wraps(fun)


def w_jit(f):
    return lx.jit(f)


def w_checkpoint(f):
    return lx.checkpoint(f)


def w_grad(f):
    @_wraps(f)
    def g(*a):
        return tree_sum(lx.grad(f, argnums=tuple(range(len(a))))(*a))
    return g


def w_jvp(f):
    @_wraps(f)
    def g(*a):
        tangents = lx.tree_util.tree_map(lambda u: u * 0.5, a)
        primal, tangent = lx.jvp(f, a, tangents)
        return primal + tangent
    return g


def w_vjp(f):
    @_wraps(f)
    def g(*a):
        out, pullback = lx.vjp(f, *a)
        return out + tree_sum(pullback(jnp.ones_like(out)))
    return g


def w_vmap(f):
    @_wraps(f)
    def g(*a):
        stacked = lx.tree_util.tree_map(lambda u: jnp.stack([u, u * 0.5]), a)
        return jnp.sum(lx.vmap(f)(*stacked))
    return g


def w_scan(f):
    @_wraps(f)
    def g(*a):
        def step(carry, x):
            total, args = carry
            return (total + f(*args) * x, args), None
        (total, _), _ = lax.scan(step, (jnp.float32(0.0), a),
                                 jnp.array([1.0, 0.5], jnp.float32))
        return total
    return g


def w_cond(f):
    @_wraps(f)
    def g(*a):
        return lax.cond(tree_sum(a) > 0, f, lambda *b: -f(*b), *a)
    return g


WRAPPERS = {"jit": w_jit, "checkpoint": w_checkpoint, "grad": w_grad, "jvp": w_jvp,
            "vjp": w_vjp, "vmap": w_vmap, "scan": w_scan, "cond": w_cond}


def build(stack: list[str], n_args: int) -> Callable[..., Any]:
    """``stack[0]`` is applied first (innermost)."""
    fun: Callable[..., Any] = BASES[n_args]
    for name in stack:
        fun = WRAPPERS[name](fun)
    return fun


# --- the numpy reference ------------------------------------------------------------------------
Derivs = Callable[[np.ndarray], list[np.ndarray]]  # u -> [psi(u), psi'(u), ...]


def _phi(u: np.ndarray) -> list[np.ndarray]:
    out = []
    for n in range(MAX_DERIVATIVE + 1):
        d = u * np.sin(u + n * math.pi / 2)
        if n:
            d = d + n * np.sin(u + (n - 1) * math.pi / 2)
        d = d + {0: 0.5 * u * u, 1: u, 2: np.ones_like(u)}.get(n, 0.0)
        out.append(d)
    return out


def _ref_grad(psi: Derivs, sign: float) -> Derivs:
    return lambda u: psi(u)[1:]


def _ref_jvp(psi: Derivs, sign: float) -> Derivs:
    def new(u):
        d = psi(u)
        return [d[n] + 0.5 * (u * d[n + 1] + n * d[n]) for n in range(len(d) - 1)]
    return new


def _ref_vjp(psi: Derivs, sign: float) -> Derivs:
    def new(u):
        d = psi(u)
        return [d[n] + d[n + 1] for n in range(len(d) - 1)]
    return new


def _ref_vmap(psi: Derivs, sign: float) -> Derivs:
    def new(u):
        d, h = psi(u), psi(0.5 * u)
        return [d[n] + 0.5 ** n * h[n] for n in range(len(d))]
    return new


def _ref_scale(factor_of_sign: Callable[[float], float]) -> Callable[[Derivs, float], Derivs]:
    def make(psi: Derivs, sign: float) -> Derivs:
        factor = factor_of_sign(sign)
        return lambda u: [factor * d for d in psi(u)]
    return make


REFERENCE = {"jit": _ref_scale(lambda s: 1.0), "checkpoint": _ref_scale(lambda s: 1.0),
             "grad": _ref_grad, "jvp": _ref_jvp, "vjp": _ref_vjp, "vmap": _ref_vmap,
             "scan": _ref_scale(lambda s: 1.5), "cond": _ref_scale(lambda s: s)}


def reference_value(stack: list[str], args: tuple[Any, ...]) -> float:
    leaves = [np.asarray(leaf, np.float64) for leaf in _leaves(args)]
    sign = 1.0 if sum(float(leaf.sum()) for leaf in leaves) > 0 else -1.0
    psi: Derivs = _phi
    for name in stack:
        psi = REFERENCE[name](psi, sign)
    return float(sum(psi(leaf)[0].sum() for leaf in leaves))


# --- strategies ---------------------------------------------------------------------------------
def _realize(spec: Any, rng: np.random.Generator) -> Any:
    kind, payload = spec
    if kind == "leaf":
        return rng.uniform(-1.0, 1.0, size=payload).astype(np.float32)
    if kind == "dict":
        return {k: _realize(v, rng) for k, v in payload}
    if kind == "list":
        return [_realize(v, rng) for v in payload]
    return tuple(_realize(v, rng) for v in payload)


_leaf_spec = st.sampled_from(SHAPES).map(lambda s: ("leaf", s))
_tree_spec = st.recursive(
    _leaf_spec,
    lambda kids: st.one_of(
        st.lists(st.tuples(st.sampled_from("abc"), kids), min_size=1, max_size=2,
                 unique_by=lambda kv: kv[0]).map(lambda kvs: ("dict", tuple(kvs))),
        st.lists(kids, min_size=1, max_size=2).map(lambda vs: ("list", tuple(vs))),
        st.lists(kids, min_size=1, max_size=2).map(lambda vs: ("tuple", tuple(vs)))),
    max_leaves=3)


@st.composite
def examples(draw: st.DrawFn) -> tuple[list[str], tuple[Any, ...]]:
    stack = draw(st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=2, max_size=4))
    specs = draw(st.lists(_tree_spec, min_size=1, max_size=3))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    return stack, tuple(_realize(s, rng) for s in specs)


def expected_arg_names(args: tuple[Any, ...]) -> list[str]:
    names = []
    for param, arg in zip(PARAM_NAMES[len(args)], args):
        pairs, _ = tree_flatten_with_path(arg)
        names.extend(param + keystr(path) for path, _ in pairs)
    return names


# --- the property -------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(examples())
def test_random_transformation_stacks(example):
    stack, args = example
    total = sum(float(np.sum(leaf)) for leaf in _leaves(args))
    assume(abs(total) > 0.05)  # keep cond's predicate away from its boundary
    fun = build(stack, len(args))

    closed = lx.make_jaxpr(fun)(*args)
    validate_jaxpr_debug_info(closed, recursive=True)
    dbg = closed.jaxpr.debug_info
    assert dbg.traced_for == "jit"  # as in JAX 0.10: make_jaxpr traces through jit
    want = api_util.debug_info("jit", fun, args, {}).arg_names
    assert dbg.arg_names == tuple(want)
    assert list(dbg.arg_names) == expected_arg_names(args), stack
    assert dbg.result_paths == ("result",)
    assert dbg.func_src_info.startswith(BASES[len(args)].__name__ + " at ")

    _check_value_and_module(stack, fun, args)


def _check_value_and_module(stack: list[str], fun: Callable[..., Any],
                            args: tuple[Any, ...]) -> None:
    jitted = lx.jit(fun)
    value = float(jitted(*args))
    expected = reference_value(stack, args)
    assert math.isclose(value, expected, rel_tol=2e-4, abs_tol=2e-4), (stack, value, expected)
    sig = main_signature(jitted.lower(*args).compiler_ir("stablehlo"))
    names = expected_arg_names(args)
    kept = [n for n in names if n in sig.arg_infos]
    assert list(sig.arg_infos) == kept  # the module's arguments: named, in order, none stale
    assert list(sig.arg_locs) == kept
    assert sig.result_infos == ("result",)


SINGLE_ARGS = ({'b': np.array([0.5, -0.25], np.float32), 'a': np.float32(0.75)},
               [np.array([[0.1, 0.2], [0.3, -0.4]], np.float32)])


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_each_wrapper_alone(name):
    fun = build([name], 2)
    closed = lx.make_jaxpr(fun)(*SINGLE_ARGS)
    validate_jaxpr_debug_info(closed, recursive=True)
    assert closed.jaxpr.debug_info.arg_names == ("x['a']", "x['b']", "y[0]")
    _check_value_and_module([name], fun, SINGLE_ARGS)


def test_reference_matches_a_hand_derivation():
    # grad of the body: phi'(u) = sin u + u cos u + u, summed
    u = np.array([0.3, -0.7], np.float32)
    want = float(np.sum(np.sin(u) + u * np.cos(u) + u))
    assert math.isclose(reference_value(["grad"], (u,)), want, rel_tol=1e-6)
    assert math.isclose(float(lx.jit(build(["grad"], 1))(u)), want, rel_tol=1e-5)
