"""Dead-code elimination through higher-order primitives, the unused arguments
jit prunes from its module, and the source lines ``checkpoint`` keeps.

- DCE: every DCE rule reports one flag per operand of the equation it was
  given (``partial_eval.dce_jaxpr`` marks those operands as needed), so a jit,
  cond, scan, checkpoint or pmap equation that drops operands leaves a valid
  jaxpr (a scan body calling a jit with an unused argument used to crash
  ``grad``).
- Pruning: ``jit``'s ``@main`` keeps only the arguments some result needs,
  looking through nested jits, checkpoints, control flow and pmaps, and the
  survivors keep their names. The expected lists are JAX 0.10's (repeated live
  by ``test_pruning_matches_the_jax_peer``). ``pmap``'s own module keeps every
  argument.
- checkpoint: the equations it re-binds (with and without a policy) keep the
  user's line and name stack.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import lax
from e2e_helpers import peer_python, run_python, text_arg_infos, walk_eqns
from lamina_tracing_core import core
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.checkpoint import remat_p


# --- DCE through higher-order equations --------------------------------------------------------
@lx.jit
def ignores_first(unused, a):
    return jnp.sin(a) * 2.0


def scan_loss(x):
    def body(c, xi):
        return c + ignores_first(c * 3.0, xi * c), xi
    return lax.scan(body, 1.0, x)[0]


def scan_loss_reference(x):
    def body(c, xi):
        return c + jnp.sin(xi * c) * 2.0, xi
    return lax.scan(body, 1.0, x)[0]


X3 = np.arange(3.0, dtype=np.float32)
# JAX 0.10.2: jax.grad(scan_loss)(jnp.arange(3.))
JAX_SCAN_GRAD = [14.280685, 3.708483, 3.2622688]


@pytest.mark.parametrize("wrap", [lambda g: g, lx.jit], ids=["eager", "jit"])
def test_grad_of_scan_calling_a_jit_with_an_unused_argument(wrap):
    got = wrap(lx.grad(scan_loss))(X3)
    np.testing.assert_allclose(np.asarray(got), JAX_SCAN_GRAD, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got), np.asarray(lx.grad(scan_loss_reference)(X3)),
                               rtol=1e-6)


def _cond_loss(x, y):
    return lax.cond(x[0] > 0, lambda a, b: ignores_first(b, a), lambda a, b: a * 3.0, x, y).sum()


def _checkpoint_loss(x, y):
    return lx.checkpoint(lambda u, a: jnp.sin(a) * 2.0)(y, x).sum()


def _scan_checkpoint_loss(x, y):
    def body(c, xi):
        return c + lx.checkpoint(lambda u, a: jnp.sin(a))(c * y[0], xi * c), None
    return lax.scan(body, 1.0, x)[0]


@pytest.mark.parametrize("loss", [_cond_loss, _checkpoint_loss, _scan_checkpoint_loss],
                         ids=["cond", "checkpoint", "scan_checkpoint"])
def test_grad_through_equations_that_drop_operands(loss):
    x, y = np.array([0.5, 1.5, 2.0], np.float32), np.array([2.0, 1.0, 3.0], np.float32)
    eager = lx.grad(loss, argnums=(0, 1))(x, y)
    jitted = lx.jit(lx.grad(loss, argnums=(0, 1)))(x, y)
    for a, b in zip(eager, jitted):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)
    if loss is not _scan_checkpoint_loss:
        np.testing.assert_allclose(np.asarray(eager[0]), 2.0 * np.cos(x), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(eager[1]), np.zeros(3), atol=0)


def test_dce_of_a_jit_equation_that_drops_its_first_operand():
    closed = lx.make_jaxpr(lambda u, a: ignores_first(u * 2.0, a) + 1.0)(1.0, 2.0)
    jaxpr, used = pe.dce_jaxpr(closed.jaxpr, [True])
    core.check_jaxpr(jaxpr)
    assert used == [False, True]
    call, = [e for e in jaxpr.eqns if e.primitive.name == "jit"]
    assert len(call.invars) == 1 and call.params["jaxpr"].jaxpr.debug_info.arg_names == ("a",)
    assert [e.primitive.name for e in jaxpr.eqns] == ["jit", "add"]  # the u * 2.0 went too
    out, = core.eval_jaxpr(jaxpr, closed.consts, 2.0)
    np.testing.assert_allclose(np.asarray(out), np.sin(2.0) * 2.0 + 1.0, rtol=1e-6)


def test_a_dce_rule_that_breaks_the_protocol_is_named(monkeypatch):
    closed = lx.make_jaxpr(lambda u, a: lx.checkpoint(lambda p, q: q * 2.0)(u, a))(1.0, 2.0)

    def bad_rule(used_outputs, eqn):
        # keeps only the second operand, but reports the flags of the new equation
        return [True], eqn.replace(invars=eqn.invars[1:])

    monkeypatch.setitem(pe.dce_rules, remat_p, bad_rule)
    with pytest.raises(AssertionError, match=r"DCE rule of 'checkpoint' returned 1 input flags"):
        pe.dce_jaxpr(closed.jaxpr, [True])


# --- which arguments jit's module keeps ------------------------------------------------------
# Each program is written once and run with lamina here and with JAX by the
# peer test; ``lower()`` returns a ``Lowered``.
PROGRAMS = r'''
o = lambda v, n=2: np.full((n,), v, np.float32)

def inner_jit():
    g = lx.jit(lambda a, b, c: a * c)
    return lx.jit(lambda x, y, z: g(x, y, z)).lower(o(1.), o(2.), o(3.))

def pytree_inner_jit():
    g = lx.jit(lambda d: d['a'] * 2.)
    return lx.jit(lambda d, e: g(d) + e).lower({'a': o(1.), 'b': o(2.)}, o(3.))

def vmap_inner_jit():
    g = lx.jit(lambda a, b: a + 1.)
    return lx.jit(lx.vmap(lambda x, y: g(x, y))).lower(o(1.), o(2.))

def grad_unused():
    def f(x, y, z): return jnp.sum(jnp.sin(x) * y)
    return lx.jit(lx.grad(f)).lower(o(1.), o(2.), o(3.))

def grad_argnums_unused():
    def f(x, y, z): return jnp.sum(jnp.sin(x) * 2.0)
    return lx.jit(lx.grad(f, argnums=(0, 1))).lower(o(1.), o(2.), o(3.))

def checkpoint_unused():
    def f(x, y): return jnp.sin(x)
    return lx.jit(lambda x, y: lx.checkpoint(f)(x, y)).lower(o(1.), o(2.))

def grad_checkpoint_unused():
    def f(x, y, z): return jnp.sum(jnp.sin(x) * y)
    return lx.jit(lx.grad(lx.checkpoint(f))).lower(o(1.), o(2.), o(3.))

def cond_unused():
    def f(p, x, y): return lax.cond(p > 0, lambda a, b: a, lambda a, b: a * 2., x, y)
    return lx.jit(f).lower(1.0, o(1.), o(2.))

def scan_jit_unused():
    g = lx.jit(lambda unused, a: jnp.sin(a) * 2.0)
    def body(c, x): return c + g(c * 3.0, x * c), x
    def f(x, w): return lax.scan(body, 1.0, x)[0]
    return lx.jit(lx.grad(f)).lower(o(1., 3), o(2.))

def pmap_inside_jit():
    def f(x, y, *args, **kwargs): return y['hi'] + args[1] + sum(kwargs.values())
    def g(x, y, *args, **kwargs): return lx.pmap(f)(x, y, *args, **kwargs)
    return lx.jit(g).lower({'hi': o(1.)}, {'hi': o(2.)}, o(3.), o(4.), z=o(5.), w=o(6.))

NAMES = ['inner_jit', 'pytree_inner_jit', 'vmap_inner_jit', 'grad_unused',
         'grad_argnums_unused', 'checkpoint_unused', 'grad_checkpoint_unused', 'cond_unused',
         'scan_jit_unused', 'pmap_inside_jit']
'''

# What JAX 0.10.2 keeps in @main (argument locations of as_text(debug_info=True)).
EXPECTED_KEPT = {
    "inner_jit": ["x", "z"],
    "pytree_inner_jit": ["d['a']", "e"],
    "vmap_inner_jit": ["x"],
    "grad_unused": ["x", "y"],
    "grad_argnums_unused": ["x"],
    "checkpoint_unused": ["x"],
    "grad_checkpoint_unused": ["x", "y"],
    "cond_unused": ["p", "x"],
    "scan_jit_unused": ["x"],
    "pmap_inside_jit": ["y['hi']", "args[1]", "kwargs['w']", "kwargs['z']"],
}


def _lamina_programs():
    env = {"lx": lx, "jnp": jnp, "lax": lax, "np": np}
    exec(PROGRAMS, env)
    return env


@pytest.mark.parametrize("name", list(EXPECTED_KEPT))
def test_jit_prunes_arguments_unused_behind_inner_calls(name, devices8):
    lowered = _lamina_programs()[name]()
    assert text_arg_infos(lowered.as_text()) == EXPECTED_KEPT[name]


def test_pruned_program_runs_with_every_argument(devices8):
    g = lx.jit(lambda a, b, c: a * c)
    f = lx.jit(lambda x, y, z: g(x, y, z) + 1.0)
    x, y, z = (np.full((2,), v, np.float32) for v in (1.0, 2.0, 3.0))
    assert text_arg_infos(f.lower(x, y, z).as_text()) == ["x", "z"]
    np.testing.assert_allclose(np.asarray(f(x, y, z)), x * z + 1.0)


def test_keep_unused_keeps_what_nested_calls_ignore(devices8):
    g = lx.jit(lambda a, b, c: a * c)
    f = lx.jit(lambda x, y, z: g(x, y, z), keep_unused=True)
    o = np.ones(2, np.float32)
    assert text_arg_infos(f.lower(o, o, o).as_text()) == ["x", "y", "z"]


def test_an_inner_keep_unused_keeps_its_arguments(devices8):
    # lamina honours the inner jit's keep_unused=True (JAX 0.10 prunes y here)
    g = lx.jit(lambda a, b, c: a * c, keep_unused=True)
    o = np.ones(2, np.float32)
    text = lx.jit(lambda x, y, z: g(x, y, z)).lower(o, o, o).as_text()
    assert text_arg_infos(text) == ["x", "y", "z"]


def _pmap_f(x, y, *args, **kwargs):
    return y['hi'] + args[1] + sum(kwargs.values())


ALL_SIX = ["x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']", "kwargs['z']"]


def test_pmap_keeps_every_argument_in_its_module(devices8):
    o = np.ones(8, np.float32)
    lowered = lx.pmap(_pmap_f).lower({'hi': o}, {'hi': 2 * o}, 3 * o, 4 * o, z=5 * o, w=6 * o)
    assert text_arg_infos(lowered.as_text()) == ALL_SIX
    out = lx.pmap(_pmap_f)({'hi': o}, {'hi': 2 * o}, 3 * o, 4 * o, z=5 * o, w=6 * o)
    np.testing.assert_allclose(np.asarray(out), np.full(8, 17.0))


PEER_SCRIPT = r'''
import json, re
import numpy as np
import jax as lx, jax.numpy as jnp
from jax import lax
env = {"lx": lx, "jnp": jnp, "lax": lax, "np": np}
exec(PROGRAMS, env)
out = {}
for name in env["NAMES"]:
    text = env[name]().as_text(debug_info=True)
    main = [l for l in text.splitlines() if "func.func public @main" in l][0]
    out[name] = re.findall(r'loc\("((?:[^"\\]|\\.)*)"\)', main.split(") -> ")[0])
print(json.dumps(out))
'''


@pytest.mark.peer
def test_pruning_matches_the_jax_peer():
    proc = run_python(peer_python(), f"PROGRAMS = {PROGRAMS!r}\n" + PEER_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == EXPECTED_KEPT


# --- checkpoint keeps each equation's line and name stack --------------------------------------
def body_lines(fun):
    """The lines of ``fun``'s body (not its ``def`` line)."""
    first = fun.__code__.co_firstlineno
    return set(range(first + 1, first + 1 + 4))


def ckpt_body(x, y):
    with lx.named_scope("inside"):
        a = jnp.sin(x)
        b = a * y
    return jnp.sum(jnp.cos(b))


POLICIES = [None, lx.checkpoint_policies.dots_saveable,
            lx.checkpoint_policies.everything_saveable]


@pytest.mark.parametrize("policy", POLICIES, ids=["no_policy", "dots", "everything"])
def test_checkpoint_equations_keep_their_source_lines(policy):
    x = np.linspace(0.1, 0.9, 3).astype(np.float32)
    closed = lx.make_jaxpr(lx.grad(lx.checkpoint(ckpt_body, policy=policy)))(x, x)
    lines = body_lines(ckpt_body)
    bodies = [sub for eqn, _ in walk_eqns(closed) if eqn.primitive is remat_p
              for sub in [eqn.params["jaxpr"]]]
    assert bodies
    for body in bodies:
        for eqn in body.eqns:
            assert eqn.source_info.frame is not None, eqn
            assert eqn.source_info.frame.line in lines, (eqn, eqn.source_info)


def _op_lines(text):
    """(op name, the lines of this file its location names) for every op."""
    locs = dict(re.findall(r'^(#loc\d+) = loc\((.*)\)$', text, re.M))

    def lines(ref, depth=0):
        body = locs.get(ref, ref)
        found = {int(m) for m in re.findall(r'test_e2e_pruning_and_dce\.py":(\d+)', body)}
        for r in re.findall(r'#loc\d+', body):
            if depth < 12:
                found |= lines(r, depth + 1)
        return found

    ops = []
    for ln in text.splitlines():
        m = re.match(r'\s*(?:%\S+ = )?"?(stablehlo\.\w+)\b.*loc\((#loc\d+)\)$', ln)
        if m:
            ops.append((m.group(1), lines(m.group(2)), locs.get(m.group(2), "")))
    return ops


@pytest.mark.parametrize("policy", POLICIES, ids=["no_policy", "dots", "everything"])
def test_jit_grad_checkpoint_ops_have_the_users_lines(policy):
    x = np.linspace(0.1, 0.9, 3).astype(np.float32)
    text = lx.jit(lx.grad(lx.checkpoint(ckpt_body, policy=policy))).lower(x, x).as_text(
        debug_info=True)
    lines = body_lines(ckpt_body)
    ops = [(op, ls) for op, ls, _ in _op_lines(text)
           if op not in ("stablehlo.constant", "stablehlo.optimization_barrier")]
    assert len(ops) >= 5
    for op, ls in ops:
        assert ls & lines, (op, ls)
    # the named scope inside the checkpointed function survives the recomputation
    # (a forward equation recomputed in the backward pass is under transpose(...))
    assert re.search(r"/(transpose\()?inside\)?/sin\"", text)
    assert re.search(r"/(transpose\()?inside\)?/mul\"", text)
