"""Property test (issue 19): random transformation stacks that reach the former
debug-info holes keep every name and every source line.

The stacks mix the wrappers of ``test_e2e_transform_stacks.py`` (jit, grad,
jvp, vjp, vmap, checkpoint, scan, cond) with the situations that used to lose
names or crash:

- ``vjp_pmap_unused``: ``vjp`` of a ``pmap`` whose body ignores one input (its
  cotangent is zero);
- ``pmap_closure``: a ``pmap`` body that closes over the (traced) arguments;
- ``ckpt_dots`` / ``ckpt_everything`` / ``ckpt_nothing``: ``checkpoint`` with a
  policy;
- ``scan_jit_unused``: a ``scan`` body calling a ``jit`` that ignores its first
  argument.

Every wrapper maps the arguments to a scalar, so they compose in any order,
and each has a numpy reference (``test_e2e_transform_stacks.REFERENCE``). The
body and every wrapper are defined in this file, so every op of the lowered
module must carry a location in this file. Checked per example: the value
equals numpy's; ``jit(stack).lower(...)``'s ``@main`` names its arguments
(the survivors of pruning, in order) and its result; every op of
``as_text(debug_info=True)`` refers to a line of this file; and
``validate_debug_info`` (on for all tests, see ``conftest.py``) never fires.
"""

from __future__ import annotations

import functools
import math
import re
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
from lamina_tracing_core.jaxpr import validate_jaxpr_debug_info
from test_e2e_transform_stacks import (REFERENCE, _phi, _realize, _ref_scale, _ref_vjp,
                                       _tree_spec, expected_arg_names)

N_REPLICAS = 8
THIS_FILE = re.escape(__file__.rsplit("/", 1)[-1])


# --- the body and the wrappers -------------------------------------------------------------------
def tree_sum(tree: Any) -> Any:
    total = jnp.float32(0.0)
    for leaf in lx.tree_util.tree_leaves(tree):
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


def _wraps(f):
    return functools.wraps(f)


def w_jit(f):
    return lx.jit(f)


def w_checkpoint(f):
    return lx.checkpoint(f)


def _ckpt(policy):
    def wrap(f):
        return lx.checkpoint(f, policy=policy)
    return wrap


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
        (total, _), _ = lax.scan(step, (jnp.float32(0.0), a), jnp.array([1.0, 0.5], jnp.float32))
        return total
    return g


def w_cond(f):
    @_wraps(f)
    def g(*a):
        return lax.cond(tree_sum(a) > 0, f, lambda *b: -f(*b), *a)
    return g


def w_scan_jit_unused(f):
    inner = lx.jit(lambda unused, *a: f(*a))

    @_wraps(f)
    def g(*a):
        def step(carry, x):
            total, args = carry
            return (total + inner(total * 3.0, *args) * x, args), None
        (total, _), _ = lax.scan(step, (jnp.float32(0.0), a), jnp.array([1.0, 0.5], jnp.float32))
        return total
    return g


def w_vjp_pmap_unused(f):
    def per_replica(args, unused):
        return f(*args)

    @_wraps(f)
    def g(*a):
        stacked = lx.tree_util.tree_map(
            lambda u: jnp.broadcast_to(u, (N_REPLICAS,) + jnp.shape(u)), a)
        unused = jnp.ones((N_REPLICAS,), jnp.float32)
        out, pullback = lx.vjp(lx.pmap(per_replica), stacked, unused)
        ct_args, ct_unused = pullback(jnp.ones_like(out))
        # every replica's gradient is f's: the sum over replicas is N_REPLICAS times it
        return jnp.mean(out) + tree_sum(ct_args) / N_REPLICAS + jnp.sum(ct_unused)
    return g


def w_pmap_closure(f):
    @_wraps(f)
    def g(*a):
        def per_replica(s):
            return f(*a) + 0.0 * s  # closes over the arguments (tracers under a transformation)
        return jnp.mean(lx.pmap(per_replica)(jnp.arange(N_REPLICAS, dtype=jnp.float32)))
    return g


WRAPPERS = {"jit": w_jit, "checkpoint": w_checkpoint, "grad": w_grad, "jvp": w_jvp,
            "vjp": w_vjp, "vmap": w_vmap, "scan": w_scan, "cond": w_cond,
            "ckpt_dots": _ckpt(lx.checkpoint_policies.dots_saveable),
            "ckpt_everything": _ckpt(lx.checkpoint_policies.everything_saveable),
            "ckpt_nothing": _ckpt(lx.checkpoint_policies.nothing_saveable),
            "scan_jit_unused": w_scan_jit_unused,
            "vjp_pmap_unused": w_vjp_pmap_unused, "pmap_closure": w_pmap_closure}
HOLES = ["vjp_pmap_unused", "pmap_closure", "ckpt_dots", "ckpt_everything", "ckpt_nothing",
         "scan_jit_unused"]
PMAPS = {"vjp_pmap_unused", "pmap_closure"}

REFERENCE_HERE = dict(REFERENCE, ckpt_dots=REFERENCE["checkpoint"],
                      ckpt_everything=REFERENCE["checkpoint"],
                      ckpt_nothing=REFERENCE["checkpoint"],
                      scan_jit_unused=_ref_scale(lambda s: 1.5),
                      vjp_pmap_unused=_ref_vjp, pmap_closure=REFERENCE["jit"])


def user_line(loc: str) -> int:
    """The first line of this file a location names (0 when none): a line of
    the body or of a wrapper, never one of the checks below (the line of the
    ``.lower()`` call is what equations re-bound without their source info
    would get)."""
    m = re.search(THIS_FILE + r'":(\d+)', loc)
    return int(m.group(1)) if m else 0


def build(stack: list[str], n_args: int) -> Callable[..., Any]:
    """``stack[0]`` is applied first (innermost)."""
    fun: Callable[..., Any] = BASES[n_args]
    for name in stack:
        fun = WRAPPERS[name](fun)
    return fun


def reference(stack: list[str], args: tuple[Any, ...]) -> float:
    leaves = [np.asarray(leaf, np.float64) for leaf in lx.tree_util.tree_leaves(args)]
    sign = 1.0 if sum(float(leaf.sum()) for leaf in leaves) > 0 else -1.0
    psi = _phi
    for name in stack:
        psi = REFERENCE_HERE[name](psi, sign)
    return float(sum(psi(leaf)[0].sum() for leaf in leaves))


USER_CODE_ENDS = user_line.__code__.co_firstlineno  # the body and the wrappers lie above
BODY_LINE = _body.__code__.co_firstlineno + 1


# --- strategies ------------------------------------------------------------------------------------
@st.composite
def examples(draw: st.DrawFn) -> tuple[list[str], tuple[Any, ...]]:
    others = sorted(set(WRAPPERS) - PMAPS)
    stack = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3))
    # at least one hole; at most one pmap (8 devices: pmaps do not nest)
    hole = draw(st.sampled_from(HOLES))
    stack.insert(draw(st.integers(0, len(stack))), hole)
    specs = draw(st.lists(_tree_spec, min_size=1, max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    return stack, tuple(_realize(s, rng) for s in specs)


# --- reading the module back -----------------------------------------------------------------------
def op_locations(text: str) -> list[tuple[str, str]]:
    """(op, its location with every ``#locN`` reference resolved) for every op."""
    locs = dict(re.findall(r"^(#loc\d+) = loc\((.*)\)$", text, re.M))

    def resolve(body: str, depth: int = 0) -> str:
        if depth > 16:
            return body
        return re.sub(r"#loc\d+", lambda m: resolve(locs.get(m.group(0), ""), depth + 1), body)

    ops = []
    for ln in text.splitlines():
        m = re.match(r'\s*(?:%\S+ = )?"?((?:stablehlo|func|sdy|mhlo)\.\w+)\b.*loc\((#loc\d+|".*")\)$',
                     ln)
        if m and m.group(1) not in ("func.func", "func.return"):
            ops.append((m.group(1), resolve(m.group(2))))
    return ops


def check_stack(stack: list[str], args: tuple[Any, ...]) -> None:
    fun = build(stack, len(args))
    closed = lx.make_jaxpr(fun)(*args)
    validate_jaxpr_debug_info(closed, recursive=True)
    assert list(closed.jaxpr.debug_info.arg_names) == expected_arg_names(args)

    jitted = lx.jit(fun)
    value = float(jitted(*args))
    want = reference(stack, args)
    assert math.isclose(value, want, rel_tol=2e-4, abs_tol=2e-4), (stack, value, want)

    lowered = jitted.lower(*args)
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    names = expected_arg_names(args)
    kept = [n for n in names if n in sig.arg_infos]
    assert list(sig.arg_infos) == kept, (stack, sig.arg_infos)
    assert list(sig.arg_locs) == kept, (stack, sig.arg_locs)
    assert sig.result_infos == ("result",), stack

    ops = op_locations(lowered.as_text(debug_info=True))
    assert ops, stack
    for op, loc in ops:
        assert 0 < user_line(loc) < USER_CODE_ENDS, (stack, op, loc)
        if op in ("stablehlo.sine", "stablehlo.cosine"):  # only the body computes sin
            assert user_line(loc) == BODY_LINE, (stack, op, loc)


# --- the properties ---------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(example=examples())
def test_random_stacks_through_the_former_holes(example, devices8):
    stack, args = example
    total = sum(float(np.sum(leaf)) for leaf in lx.tree_util.tree_leaves(args))
    assume(abs(total) > 0.05)  # keep cond's predicate away from its boundary
    check_stack(stack, args)


ARGS = ({"b": np.array([0.5, -0.25], np.float32), "a": np.float32(0.75)},
        [np.array([[0.1, 0.2], [0.3, -0.4]], np.float32)])


OUTER = ["jit", "grad", "jvp", "vjp", "vmap", "scan", "cond", "checkpoint"]


@pytest.mark.parametrize("outer", [None] + OUTER)
@pytest.mark.parametrize("hole", HOLES)
def test_each_hole_under_each_wrapper(hole, outer, devices8):
    stack = [hole] if outer is None else [hole, outer]
    check_stack(stack, ARGS)


# Lowering a pmap equation under jit batches its body: batching adds equations
# that no body equation wrote (an unbatched result broadcast to the mapped axis)
# and that once took the line of the call that lowers. They take the pmap
# equation's line.
BATCHED_PMAP_STACKS = [["vjp_pmap_unused"], ["pmap_closure", "grad"], ["pmap_closure", "jvp"],
                       ["pmap_closure", "vjp"]]


@pytest.mark.parametrize("stack", BATCHED_PMAP_STACKS, ids="-".join)
def test_batched_pmap_ops_have_user_lines(stack, devices8):
    check_stack(stack, ARGS)


def test_the_line_check_sees_a_foreign_line():
    text = ('%0 = stablehlo.sine %arg0 : tensor<f32> loc(#loc3)\n'
            '#loc1 = loc("/lib/other.py":3:0)\n#loc3 = loc("jit(f)/sin"(#loc1))\n')
    ((op, loc),) = op_locations(text)
    assert op == "stablehlo.sine" and "other.py" in loc
    assert user_line(loc) == 0
    assert user_line(f'"{__file__}":{USER_CODE_ENDS + 5}:3') >= USER_CODE_ENDS
