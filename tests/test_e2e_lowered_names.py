"""Behaviours 1 and 6 end to end: argument names, result paths and argument
locations reach the StableHLO that XLA compiles, for ``jit`` and ``pmap``, and
survive the transformations applied around and inside a ``jit``.

The expected names are JAX 0.10's; ``test_names_match_the_jax_peer`` repeats
that comparison live (a ``peer`` test: ``hatch run peer:test``).
"""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from lamina import lax
from e2e_helpers import (
    main_signature,
    peer_python,
    run_python,
    sub_jaxprs,
    text_arg_infos,
    text_arg_locs,
    text_result_infos,
)
from lamina_linear_util import api_util
from lamina_tracing_core.jaxpr import ClosedJaxpr, validate_jaxpr_debug_info


def f(x, y, *args, **kwargs):
    return {'a': y['hi'] + args[1] + sum(kwargs.values()), 'b': [y['hi']]}


KEPT = ["y['hi']", "args[1]", "kwargs['w']", "kwargs['z']"]
ALL_SIX = ["x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']", "kwargs['z']"]
RESULTS = ["result['a']", "result['b'][0]"]

ONE = np.ones(8, np.float32)


def _jit_lowered(**jit_kwargs):
    return lx.jit(f, **jit_kwargs).lower({'hi': 1.}, {'hi': 2.}, 3., 4., z=5., w=6.)


def _pmap_lowered():
    return lx.pmap(f).lower({'hi': ONE}, {'hi': 2 * ONE}, 3 * ONE, 4 * ONE, z=5 * ONE,
                            w=6 * ONE)


# --- behaviour 1 for jit ------------------------------------------------------------------------
def test_jit_module_text_names_arguments_and_results():
    text = _jit_lowered().as_text()
    assert text_arg_infos(text) == KEPT
    assert text_result_infos(text) == RESULTS
    assert "module @jit_f" in text


def test_jit_module_debug_text_locates_arguments_by_name():
    text = _jit_lowered().as_text(debug_info=True)
    assert text_arg_locs(text) == KEPT
    # the function's own source location reaches the ops too
    assert __file__.rsplit("/", 1)[-1] in text


def test_jit_compiler_ir_walk_agrees_with_text():
    lowered = _jit_lowered()
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert sig.module_name == "jit_f"
    assert list(sig.arg_infos) == KEPT
    assert list(sig.result_infos) == RESULTS
    assert list(sig.arg_locs) == KEPT
    assert sig.arg_types == ("tensor<f32>",) * 4


def test_jit_keep_unused_keeps_and_names_every_argument():
    sig = main_signature(_jit_lowered(keep_unused=True).compiler_ir("stablehlo"))
    assert list(sig.arg_infos) == ALL_SIX
    assert list(sig.arg_locs) == ALL_SIX


def test_jit_static_varargs_entry_keeps_the_others_numbering():
    sig = main_signature(_jit_lowered(static_argnums=(2,), keep_unused=True)
                         .compiler_ir("stablehlo"))
    assert list(sig.arg_infos) == ["x['hi']", "y['hi']", "args[1]", "kwargs['w']",
                                   "kwargs['z']"]


def test_jit_lowering_record_matches_the_module():
    lowered = _jit_lowered()
    assert tuple(lowered.lowering.arg_names) == tuple(KEPT)
    assert tuple(lowered.lowering.result_names) == tuple(RESULTS)
    value = lx.jit(f)({'hi': 1.}, {'hi': 2.}, 3., 4., z=5., w=6.)
    assert float(value['a']) == 17.0 and float(value['b'][0]) == 2.0


# --- behaviour 1 for pmap -----------------------------------------------------------------------
def test_pmap_module_names_arguments_and_results(devices8):
    lowered = _pmap_lowered()
    text = lowered.as_text()
    # pmap keeps every argument, used or not (jit prunes x['hi'] and args[0])
    assert text_arg_infos(text) == ALL_SIX
    assert text_result_infos(text) == RESULTS
    assert text_arg_locs(lowered.as_text(debug_info=True)) == ALL_SIX
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert list(sig.arg_infos) == ALL_SIX and list(sig.result_infos) == RESULTS
    assert "replicas = 8" in text or "num_partitions = 8" in text


def test_pmap_values(devices8):
    out = lx.pmap(f)({'hi': ONE}, {'hi': 2 * ONE}, 3 * ONE, 4 * ONE, z=5 * ONE, w=6 * ONE)
    np.testing.assert_allclose(np.asarray(out['a']), np.full(8, 17.0))
    np.testing.assert_allclose(np.asarray(out['b'][0]), np.full(8, 2.0))


# --- names after transformations around jit -----------------------------------------------------
def g(x, y):
    return jnp.sum(jnp.sin(x['a']) * y[0])


X = {'a': np.linspace(0.1, 0.9, 3).astype(np.float32)}
Y = [np.linspace(1.0, 2.0, 3).astype(np.float32)]
XB = {'a': np.stack([X['a'], 2 * X['a']])}
YB = [np.stack([Y[0], Y[0]])]

# (case, build, args, arg names, result names, module name): JAX 0.10's names
TRANSFORMED = [
    ("grad", lambda: lx.jit(lx.grad(g)), (X, Y), ["x['a']", "y[0]"], ["result['a']"], "jit_g"),
    ("grad_argnums", lambda: lx.jit(lx.grad(g, argnums=(0, 1))), (X, Y), ["x['a']", "y[0]"],
     ["result[0]['a']", "result[1][0]"], "jit_g"),
    ("value_and_grad", lambda: lx.jit(lx.value_and_grad(g)), (X, Y), ["x['a']", "y[0]"],
     ["result[0]", "result[1]['a']"], "jit_g"),
    ("vmap", lambda: lx.jit(lx.vmap(g)), (XB, YB), ["x['a']", "y[0]"], ["result"], "jit_g"),
    ("jvp", lambda: lx.jit(lambda *a: lx.jvp(g, a, a)), (X, Y), ["a[0]['a']", "a[1][0]"],
     ["result[0]", "result[1]"], "jit__lambda"),
    ("jvp_named", lambda: lx.jit(lambda p, t: lx.jvp(g, p, t)), ((X, Y), (X, Y)),
     ["p[0]['a']", "p[1][0]", "t[0]['a']", "t[1][0]"], ["result[0]", "result[1]"],
     "jit__lambda"),
    ("vjp", lambda: lx.jit(lambda *a: lx.vjp(g, *a)[1](1.0)), (X, Y), ["a[0]['a']", "a[1][0]"],
     ["result[0]['a']", "result[1][0]"], "jit__lambda"),
    ("checkpoint", lambda: lx.jit(lx.checkpoint(g)), (X, Y), ["x['a']", "y[0]"], ["result"],
     "jit_g"),
    ("grad_of_inner_jit", lambda: lx.jit(lx.grad(lx.jit(g))), (X, Y), ["x['a']", "y[0]"],
     ["result['a']"], "jit_g"),
]


@pytest.mark.parametrize("case,build,args,arg_names,result_names,module_name", TRANSFORMED,
                         ids=[t[0] for t in TRANSFORMED])
def test_names_after_transformations_around_jit(case, build, args, arg_names, result_names,
                                                module_name):
    lowered = build().lower(*args)
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert sig.module_name == module_name
    assert list(sig.arg_infos) == arg_names
    assert list(sig.arg_locs) == arg_names
    assert list(sig.result_infos) == result_names
    # never a wrong count: one name per argument and per result of @main
    assert len(sig.arg_infos) == len(sig.arg_types)
    closed = lowered.jaxpr
    assert isinstance(closed, ClosedJaxpr)
    validate_jaxpr_debug_info(closed, recursive=True)


def test_transformed_jit_values_match_eager():
    jitted = lx.jit(lx.grad(g, argnums=(0, 1)))(X, Y)
    eager = lx.grad(g, argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(np.asarray(jitted[0]['a']), np.cos(X['a']) * Y[0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted[1][0]), np.sin(X['a']), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(eager[0]['a']), np.asarray(jitted[0]['a']), rtol=1e-6)


# --- names inside: the inner jit's jaxpr after jvp / vmap / grad (INTERNALS.md) -----------------
def _inner_jit_infos(fun, *args):
    closed = lx.make_jaxpr(fun)(*args)
    validate_jaxpr_debug_info(closed, recursive=True)
    return [j.debug_info for j in sub_jaxprs(closed, "jit")]


def test_jvp_of_inner_jit_names_tangents():
    (dbg,) = _inner_jit_infos(lambda *a: lx.jvp(lx.jit(g), a, a), X, Y)
    assert dbg.arg_names == ("x['a']", "y[0]", "tangent(x['a'])", "tangent(y[0])")
    assert dbg.result_paths == ("result", "tangent(result)")
    assert dbg.func_src_info.startswith("jvp(g) at ")


def test_vmap_of_inner_jit_keeps_names():
    (dbg,) = _inner_jit_infos(lx.vmap(lx.jit(g)), XB, YB)
    assert dbg.arg_names == ("x['a']", "y[0]")
    assert dbg.result_paths == ("result",)
    assert dbg.func_src_info.startswith("vmap(g) at ")


def test_grad_of_inner_jit_names_residuals_and_cotangents():
    known, transposed = _inner_jit_infos(lx.grad(lx.jit(g)), X, Y)
    assert known.func_src_info.startswith("jvp(g) at ")
    assert known.arg_names == ("x['a']", "y[0]")
    assert known.result_paths[0] == "result"
    assert "residual(y[0])" in known.result_paths
    assert transposed.func_src_info.startswith("transpose(jvp(g)) at ")
    assert transposed.arg_names[-1] == "cotangent(result)"
    assert "residual(y[0])" in transposed.arg_names
    assert transposed.result_paths == ("cotangent(x['a'])",)


# --- pmap: final-style, names carried on the WrappedFun ----------------------------------------
def _inner_pmap_infos(fun, *args):
    closed = lx.make_jaxpr(fun)(*args)
    validate_jaxpr_debug_info(closed, recursive=True)
    return [j.debug_info for j in sub_jaxprs(closed, "xla_pmap")]


XP = {'a': np.linspace(0.1, 0.9, 24).astype(np.float32).reshape(8, 3)}
YP = [np.linspace(1.0, 2.0, 24).astype(np.float32).reshape(8, 3)]


def h(x, y):
    return jnp.sin(x['a']) * y[0]


def test_jvp_of_pmap_names_tangents(devices8):
    (dbg,) = _inner_pmap_infos(lambda a, b: lx.jvp(lx.pmap(h), (a, b), (a, b)), XP, YP)
    assert dbg.traced_for == "pmap"
    assert dbg.arg_names == ("x['a']", "y[0]", "tangent(x['a'])", "tangent(y[0])")
    assert dbg.result_paths == ("result", "tangent(result)")
    assert dbg.func_src_info.startswith("jvp(h) at ")


def test_grad_of_pmap_names_cotangents(devices8):
    known, transposed = _inner_pmap_infos(lx.grad(lambda a, b: lx.pmap(h)(a, b).sum()), XP, YP)
    assert known.arg_names == ("x['a']", "y[0]")
    assert transposed.func_src_info.startswith("transpose(jvp(h)) at ")
    assert transposed.arg_names[-1] == "cotangent(result)"
    assert transposed.result_paths == ("cotangent(x['a'])",)
    value = lx.grad(lambda a, b: lx.pmap(h)(a, b).sum())(XP, YP)
    np.testing.assert_allclose(np.asarray(value['a']), np.cos(XP['a']) * YP[0], rtol=1e-6)


def test_grad_of_pmap_names_input_residuals_like_jit(devices8):
    known, transposed = _inner_pmap_infos(lx.grad(lambda a, b: lx.pmap(h)(a, b).sum()), XP, YP)
    assert "residual(y[0])" in known.result_paths
    assert "residual(y[0])" in transposed.arg_names


def test_pmap_of_transformed_function_lowers_with_names(devices8):
    lowered = lx.pmap(lx.grad(lambda a, b: jnp.sum(jnp.sin(a['a']) * b[0]))).lower(XP, YP)
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert list(sig.arg_infos) == ["a['a']", "b[0]"]
    assert list(sig.result_infos) == ["result['a']"]
    lowered = lx.pmap(lambda a, b: lx.jvp(h, (a, b), (a, b))).lower(XP, YP)
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert list(sig.arg_infos) == ["a['a']", "b[0]"]
    assert list(sig.result_infos) == ["result[0]", "result[1]"]


# --- behaviour 6: what export needs -------------------------------------------------------------
def test_lowered_carries_function_name_jaxpr_and_platforms():
    lowered = _jit_lowered()
    assert lowered.fun_name == "f"
    assert lowered.platforms == ("cpu",)
    assert isinstance(lowered.jaxpr, ClosedJaxpr)
    dbg = lowered.jaxpr.jaxpr.debug_info
    assert dbg.traced_for == "jit"
    assert dbg.result_paths == tuple(RESULTS)
    # the jaxpr is the traced one: all six inputs, unpruned, named
    assert dbg.arg_names == tuple(ALL_SIX)
    tpu = lx.jit(f).trace({'hi': 1.}, {'hi': 2.}, 3., 4., z=5., w=6.).lower(
        lowering_platforms=("tpu",))
    assert tpu.platforms == ("tpu",) and tpu.fun_name == "f"


def test_pmap_lowered_carries_function_name_jaxpr_and_platforms(devices8):
    lowered = _pmap_lowered()
    assert lowered.fun_name == "f"
    assert tuple(lowered.platforms) == ("cpu",)
    assert isinstance(lowered.jaxpr, ClosedJaxpr)
    assert isinstance(lowered, lx.stages.Lowered)


# --- the live comparison with JAX ---------------------------------------------------------------
JAX_SCRIPT = r"""
import json, re
import numpy as np
import jax
def f(x, y, *args, **kwargs):
    return {'a': y['hi'] + args[1] + sum(kwargs.values()), 'b': [y['hi']]}
def main_locs(text):
    main = [l for l in text.splitlines() if 'func.func public @main' in l][0]
    return re.findall(r'loc\("((?:[^"\\]|\\.)*)"\)', main.split('->')[0])
o = np.ones(8, np.float32)
jit_text = jax.jit(f).lower({'hi': 1.}, {'hi': 2.}, 3., 4., z=5., w=6.).as_text(debug_info=True)
pmap_text = jax.pmap(f).lower({'hi': o}, {'hi': o}, o, o, z=o, w=o).as_text(debug_info=True)
print(json.dumps({'jit': main_locs(jit_text), 'pmap': main_locs(pmap_text),
                  'results': re.findall(r'result_info = "([^"]*)"', pmap_text)}))
"""


@pytest.mark.peer
def test_names_match_the_jax_peer():
    proc = run_python(peer_python(), JAX_SCRIPT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peer = json.loads(proc.stdout.strip().splitlines()[-1])
    assert peer["jit"] == KEPT
    # JAX 0.10's pmap names its arguments by flat index and prunes the unused
    # ones; lamina's keeps all of them (as the pmap it was started from), by name.
    flat_names = api_util.debug_info("pmap", f, ({'hi': 1.}, {'hi': 2.}, 3., 4.),
                                     {'z': 5., 'w': 6.}).arg_names
    jax_kept = [flat_names[int(n[len("flat_args["):-1])] for n in peer["pmap"]]
    assert jax_kept == KEPT
    assert text_arg_infos(_pmap_lowered().as_text()) == ALL_SIX
    assert peer["results"] == RESULTS


# --- JAX's naming conventions, case by case (expected values read off JAX 0.10) -----------------
P = collections.namedtuple("P", ["u", "v"])


def with_defaults(p, n, scale=2.0, *, w):
    return p.u * scale + p.v * w


def uses_x_and_z(x, y, z):
    return x * z


CONVENTIONS = [
    ("namedtuple_fields_and_keyword_only",
     lambda: lx.jit(with_defaults, static_argnums=(1,)).lower(P(1., 2.), 3, w=4.),
     ["p.u", "p.v", "w"], ["result"]),
    ("positional_passed_by_keyword",
     lambda: lx.jit(with_defaults, static_argnames=("n",)).lower(p=P(1., 2.), n=3, w=4.),
     ["p.u", "p.v", "w"], ["result"]),
    ("default_passed_explicitly_is_an_argument",
     lambda: lx.jit(with_defaults, static_argnums=(1,)).lower(P(1., 2.), 3, 5., w=4.),
     ["p.u", "p.v", "scale", "w"], ["result"]),
    ("static_in_the_middle",
     lambda: lx.jit(uses_x_and_z, static_argnums=(1,)).lower(1., "hi", 3.),
     ["x", "z"], ["result"]),
    ("vmap_with_keyword",
     lambda: lx.jit(lx.vmap(lambda x, *, k: x * k)).lower(ONE, k=ONE), ["x", "k"], ["result"]),
    ("scan_results",
     lambda: lx.jit(lambda xs, c: lax.scan(lambda c, x: (c + x, c * x), c, xs)).lower(ONE, 1.),
     ["xs", "c"], ["result[0]", "result[1]"]),
    ("dict_results_sorted",
     lambda: lx.jit(lambda x: {'z': x, 'a': [x, (x, x)]}).lower(1.),
     ["x"], ["result['a'][0]", "result['a'][1][0]", "result['a'][1][1]", "result['z']"]),
    ("none_results_are_not_outputs",
     lambda: lx.jit(lambda x: (x, None, {'k': x})).lower(1.),
     ["x"], ["result[0]", "result[2]['k']"]),
]


@pytest.mark.parametrize("case,lower,arg_names,result_names", CONVENTIONS,
                         ids=[c[0] for c in CONVENTIONS])
def test_jax_naming_conventions(case, lower, arg_names, result_names):
    lowered = lower()
    text = lowered.as_text(debug_info=True)
    assert text_arg_locs(text) == arg_names
    assert text_arg_infos(text) == arg_names
    assert text_result_infos(text) == result_names


def test_pmap_names_broadcast_and_static_arguments_by_parameter(devices8):
    # a broadcast argument is an argument (kept, though unused); a static one is not
    for build, names in (
            (lambda: lx.pmap(uses_x_and_z, in_axes=(0, None, 0)).lower(ONE, 2., ONE),
             ["x", "y", "z"]),
            (lambda: lx.pmap(uses_x_and_z, static_broadcasted_argnums=(1,)).lower(
                ONE, 2., ONE), ["x", "z"])):
        sig = main_signature(build().compiler_ir("stablehlo"))
        assert list(sig.arg_infos) == names
