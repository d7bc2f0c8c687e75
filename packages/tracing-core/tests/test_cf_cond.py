"""cond and switch: values, errors, autodiff, vmap, DCE and debug info."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import core, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.control_flow import cond, cond_p, switch
from lamina_tracing_core.effects import NamedAxisEffect
from lamina_tracing_core.jaxpr import ClosedJaxpr, validate_jaxpr_debug_info

f32 = np.float32


def _eqns(jaxpr: Any, prim: Any) -> list[Any]:
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    return [e for e in inner.eqns if e.primitive is prim]


def f_cond(x: Any, y: Any) -> Any:
    return cond(x > 0, lambda a, b: lax.sin(a) * b, lambda a, b: a + lax.cos(b), x, y)


# --- values ------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [1.5, -0.5])
def test_cond_matches_python(x: float) -> None:
    out = f_cond(f32(x), f32(2.0))
    want = np.sin(x) * 2.0 if x > 0 else x + np.cos(2.0)
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_cond_pytree_operands_and_outputs() -> None:
    def true_fun(d: Any) -> Any:
        return {"s": d["a"] + d["b"], "p": (d["a"] * 2,)}

    def false_fun(d: Any) -> Any:
        return {"s": d["a"] - d["b"], "p": (d["b"],)}

    ops = {"a": np.arange(3, dtype=f32), "b": np.ones(3, f32)}
    out = cond(True, true_fun, false_fun, ops)
    np.testing.assert_allclose(out["s"], np.arange(3) + 1)
    np.testing.assert_allclose(out["p"][0], np.arange(3) * 2)
    out = cond(False, true_fun, false_fun, ops)
    np.testing.assert_allclose(out["s"], np.arange(3) - 1)


@pytest.mark.parametrize("pred", [0, 3, 0.0, -2.5])
def test_cond_numeric_predicate_compares_with_zero(pred: Any) -> None:
    out = cond(pred, lambda x: x + 1, lambda x: x - 1, f32(1.0))
    assert float(out) == (2.0 if pred != 0 else 0.0)


def test_cond_operand_keyword_and_deprecated_form() -> None:
    assert float(cond(True, lambda x: x * 3, lambda x: x, operand=f32(2.0))) == 6.0
    # cond(pred, true_operand, true_fun, false_operand, false_fun)
    out = cond(False, f32(1.0), lambda x: x + 1, f32(10.0), lambda x: x * 2)
    assert float(out) == 20.0
    out = cond(True, f32(1.0), lambda x: x + 1, f32(10.0), lambda x: x * 2)
    assert float(out) == 2.0


@pytest.mark.parametrize("index,expected", [(-3, 0.0), (0, 0.0), (1, 10.0), (2, 20.0), (9, 20.0)])
def test_switch_clamps_index(index: int, expected: float) -> None:
    branches = [lambda x: x * 0, lambda x: x * 10, lambda x: x * 20]
    assert float(switch(index, branches, f32(1.0))) == expected
    assert float(switch(np.int32(index), branches, f32(1.0))) == expected


def test_switch_single_branch_is_a_call() -> None:
    jaxpr = tc.make_jaxpr(lambda x: switch(0, [lambda y: y + 1], x))(f32(1.0))
    assert not _eqns(jaxpr, cond_p)


# --- errors ----------------------------------------------------------------------------------
def test_branch_type_mismatch_names_the_path() -> None:
    with pytest.raises(TypeError) as info:
        cond(True, lambda x: {"a": x, "b": x}, lambda x: {"a": x, "b": np.zeros(3, f32)},
             f32(1.0))
    msg = str(info.value)
    assert "cond branches must have equal output types" in msg
    assert "true_fun" in msg and "false_fun" in msg
    assert "The output of true_fun at path ['b'] has type float32[] but the corresponding " \
           "output of false_fun has type float32[3], so the shapes do not match" in msg


def test_branch_structure_mismatch() -> None:
    with pytest.raises(TypeError, match="cond branch outputs must have the same pytree "
                                        "structure"):
        cond(True, lambda x: x, lambda x: (x, x), f32(1.0))


def test_switch_error_names_branches() -> None:
    with pytest.raises(TypeError, match="branch 0 has type float32\\[\\] but the corresponding "
                                        "output of branch1 has type float32\\[3\\]"):
        switch(1, [lambda x: x, lambda x: np.zeros(3, f32)], f32(1.0))


def test_predicate_and_callable_errors() -> None:
    with pytest.raises(TypeError, match="Pred must be a scalar"):
        cond(np.array([True, False]), lambda x: x, lambda x: x, f32(1.0))
    with pytest.raises(TypeError, match="true_fun and false_fun arguments should be callable"):
        cond(True, lambda x: x, f32(1.0))
    with pytest.raises(TypeError, match="Index type must be an integer"):
        switch(1.0, [lambda x: x, lambda x: x], f32(1.0))
    with pytest.raises(ValueError, match="Empty branch sequence"):
        switch(0, [], f32(1.0))


# --- staging and debug info ------------------------------------------------------------------
def test_branches_carry_their_own_debug_info() -> None:
    jaxpr = tc.make_jaxpr(f_cond)(f32(1.0), f32(2.0))
    (eqn,) = _eqns(jaxpr, cond_p)
    false_b, true_b = eqn.params["branches"]
    for b in (false_b, true_b):
        dbg = b.jaxpr.debug_info
        assert dbg.traced_for == "cond"
        assert dbg.arg_names == ("a", "b")
        assert dbg.result_paths == ("result",)
    validate_jaxpr_debug_info(jaxpr)


def test_switch_debug_info_and_closed_over_consts() -> None:
    w = np.arange(3, dtype=f32)

    def f(i: Any, x: Any) -> Any:
        return switch(i, [lambda v: v + w, lambda v: v * 2], x)

    jaxpr = tc.make_jaxpr(f)(1, np.ones(3, f32))
    (eqn,) = _eqns(jaxpr, cond_p)
    for b in eqn.params["branches"]:
        assert b.jaxpr.debug_info.traced_for == "switch"
        assert b.jaxpr.debug_info.arg_names == (None, "v")  # the const, then the operand
    np.testing.assert_allclose(f(0, np.ones(3, f32)), 1 + w)


def test_named_axis_effects_propagate_to_the_equation() -> None:
    def f(x: Any) -> Any:
        return cond(x.sum() > 0, lambda v: lax.psum(v, "i"), lambda v: v, x)

    with core.extend_axis_env("i", 4):
        jaxpr = tc.make_jaxpr(f)(np.ones(3, f32))
    (eqn,) = _eqns(jaxpr, cond_p)
    assert NamedAxisEffect("i") in eqn.effects
    assert NamedAxisEffect("i") in jaxpr.jaxpr.effects


# --- autodiff ---------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [0.8, -0.6])
def test_cond_derivatives_match_finite_differences(x: float) -> None:
    T.check_grads(f_cond, (f32(x), f32(1.3)), order=2, modes=("fwd", "rev"))


def test_cond_grad_with_closure_and_integer_operand() -> None:
    def f(x: Any, n: Any) -> Any:
        y = x * 3
        return cond(n > 1, lambda a: lax.sin(a * y), lambda a: a * y, x)

    g = tc.grad(f)(f32(0.5), 2)
    np.testing.assert_allclose(g, np.cos(0.75) * 3.0, rtol=1e-5)
    g = tc.grad(f)(f32(0.5), 0)
    np.testing.assert_allclose(g, 3.0, rtol=1e-6)


def _jvp_f_cond(x: Any, y: Any) -> Any:
    return tc.jvp(f_cond, (x, y), (x, y))


@pytest.mark.parametrize("fn,batched", [(tc.grad(f_cond), False), (_jvp_f_cond, False),
                                        (tc.vmap(tc.grad(f_cond)), True),
                                        (tc.grad(lambda x, y: tc.vmap(f_cond)(x, y).sum()),
                                         True)])
def test_transformed_cond_jaxprs_keep_valid_debug_info(fn: Any, batched: bool) -> None:
    args = (np.array([0.3, -0.2], f32), np.ones(2, f32)) if batched else (f32(0.3), f32(0.4))
    jaxpr = tc.make_jaxpr(fn)(*args)
    validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)
    for eqn in _eqns(jaxpr, cond_p):
        for b in eqn.params["branches"]:
            dbg = b.jaxpr.debug_info
            assert len(dbg.arg_names) == len(b.jaxpr.invars)
            assert len(dbg.result_paths) == len(b.jaxpr.outvars)


def test_grad_cond_jaxpr_names_tangents_and_cotangents() -> None:
    jaxpr = tc.make_jaxpr(tc.grad(f_cond))(f32(0.3), f32(0.4))
    transposed = [b for e in _eqns(jaxpr, cond_p) for b in e.params["branches"]
                  if b.jaxpr.debug_info.func_src_info.startswith("transpose(")]
    assert transposed
    for b in transposed:
        names = b.jaxpr.debug_info.result_paths
        assert all(n is None or n.startswith("cotangent(") for n in names)


# --- vmap ------------------------------------------------------------------------------------
def test_vmap_batched_predicate_is_a_select() -> None:
    xs = np.array([1.0, -2.0, 3.0, -0.5], f32)
    ys = np.array([0.5, 1.5, -1.0, 2.0], f32)
    out = tc.vmap(f_cond)(xs, ys)
    np.testing.assert_allclose(out, [f_cond(x, y) for x, y in zip(xs, ys)], rtol=1e-6)
    jaxpr = tc.make_jaxpr(tc.vmap(f_cond))(xs, ys)
    assert not _eqns(jaxpr, cond_p)
    assert any(e.primitive.name == "select_n" for e in jaxpr.jaxpr.eqns)


def test_vmap_unbatched_predicate_keeps_the_cond() -> None:
    ys = np.array([0.5, 1.5, -1.0], f32)
    out = tc.vmap(f_cond, in_axes=(None, 0))(f32(1.0), ys)
    np.testing.assert_allclose(out, [f_cond(f32(1.0), y) for y in ys], rtol=1e-6)
    jaxpr = tc.make_jaxpr(tc.vmap(f_cond, in_axes=(None, 0)))(f32(1.0), ys)
    assert len(_eqns(jaxpr, cond_p)) == 1


def test_vmap_switch_batched_index() -> None:
    branches = [lambda x: x * 0, lambda x: x + 10, lambda x: lax.sin(x)]
    idx = np.array([0, 1, 2, 7, -1], np.int32)
    xs = np.arange(5, dtype=f32)
    out = tc.vmap(lambda i, x: switch(i, branches, x))(idx, xs)
    want = [branches[min(max(i, 0), 2)](x) for i, x in zip(idx, xs)]
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_grad_of_vmap_with_batched_predicate() -> None:
    xs = np.array([1.0, -2.0, 3.0], f32)
    ys = np.array([0.5, 1.5, -1.0], f32)
    g = tc.grad(lambda a, b: tc.vmap(f_cond)(a, b).sum(), argnums=(0, 1))(xs, ys)
    for i, (x, y) in enumerate(zip(xs, ys)):
        gx, gy = tc.grad(f_cond, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(g[0][i], gx, rtol=1e-5)
        np.testing.assert_allclose(g[1][i], gy, rtol=1e-5)


# --- DCE ------------------------------------------------------------------------------------
def test_dce_prunes_branch_outputs_and_operands() -> None:
    def f(x: Any, y: Any) -> Any:
        return cond(x > 0, lambda a, b: (a * 2, b * 3), lambda a, b: (a + 1, b - 1), x, y)

    jaxpr = tc.make_jaxpr(f)(f32(1.0), f32(2.0)).jaxpr
    new, used = pe.dce_jaxpr(jaxpr, [True, False])
    assert used == [True, False]
    (eqn,) = _eqns(new, cond_p)
    assert len(eqn.outvars) == 1
    assert len(eqn.invars) == 2  # the index and `a`
    for b in eqn.params["branches"]:
        assert b.jaxpr.debug_info.arg_names == ("a",)
        assert b.jaxpr.debug_info.result_paths == ("result[0]",)
    validate_jaxpr_debug_info(new)
    core.check_jaxpr(new)


def test_control_flow_keeps_its_functions_whichever_module_loads_first() -> None:
    # ``cond`` and ``scan`` are both submodules and functions of the package,
    # whose submodules load on first use: the functions stay the attributes.
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import lamina_tracing_core.control_flow as cf\n"
        "assert 'lamina_tracing_core.control_flow.scan' not in sys.modules\n"
        "from lamina_tracing_core.control_flow.cond import cond_p\n"
        "import lamina_tracing_core.control_flow.scan\n"
        "from lamina_tracing_core.control_flow import cond, scan\n"
        "assert callable(cond) and cond is cf.cond and cond.__name__ == 'cond'\n"
        "assert callable(scan) and scan is cf.scan and scan.__name__ == 'scan'\n"
        "assert cf.map is cf.lax_map and cf.loops.while_p is cf.while_p\n"
        "print(sorted(n for n in dir(cf) if not n.startswith('_')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(["common", "cond", "cond_p", "fori_loop", "lax_map", "loops",
                                       "map", "scan", "scan_p", "switch", "while_loop", "while_p"])
