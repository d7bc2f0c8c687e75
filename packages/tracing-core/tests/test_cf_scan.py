"""scan: values against Python loops, errors, autodiff (incl. transpose), vmap,
DCE and the debug info of every transformed body."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import ad, core, lax
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.control_flow import scan, scan_p
from lamina_tracing_core.effects import NamedAxisEffect
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, validate_jaxpr_debug_info

f32 = np.float32


def _scan_eqns(jaxpr: Any) -> list[Any]:
    """All scan equations, at any depth."""
    inner = jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr
    out = []
    for e in inner.eqns:
        if e.primitive is scan_p:
            out.append(e)
        for v in e.params.values():
            for item in (v if isinstance(v, (tuple, list)) else (v,)):
                if isinstance(item, (ClosedJaxpr, Jaxpr)):
                    out += _scan_eqns(item)
    return out


def _check_body_names(jaxpr: Any) -> None:
    validate_jaxpr_debug_info(jaxpr)
    core.check_jaxpr(jaxpr)
    for eqn in _scan_eqns(jaxpr):
        body = eqn.params["jaxpr"].jaxpr
        assert len(body.debug_info.arg_names) == len(body.invars)
        assert len(body.debug_info.result_paths) == len(body.outvars)


def body(carry: Any, xs: Any) -> Any:
    c, s = carry
    new_c = lax.sin(c) * xs["w"] + s
    return (new_c, s * 1.1), {"y": new_c * xs["v"], "c": c}


def python_scan(f: Any, init: Any, xs: Any, length: int | None = None,
                reverse: bool = False) -> Any:
    from lamina_linear_util import tree_util as tu
    leaves, tree = tu.tree_flatten(xs)
    n = length if length is not None else leaves[0].shape[0]
    carry, ys = init, []
    order = range(n - 1, -1, -1) if reverse else range(n)
    for i in order:
        carry, y = f(carry, tu.tree_unflatten(tree, [x[i] for x in leaves]))
        ys.append(y)
    if reverse:
        ys.reverse()
    stacked = tu.tree_map(lambda *v: np.stack([np.asarray(a) for a in v]), *ys) if ys else None
    return carry, stacked


def _xs(n: int = 4) -> dict[str, Any]:
    rng = np.random.RandomState(0)
    return {"w": rng.standard_normal(n).astype(f32), "v": rng.standard_normal(n).astype(f32)}


def _assert_trees_close(a: Any, b: Any) -> None:
    from lamina_linear_util import tree_util as tu
    la, lb = tu.tree_leaves(a), tu.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)


# --- values ------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_python_loop(reverse: bool) -> None:
    init = (f32(0.5), f32(0.2))
    _assert_trees_close(scan(body, init, _xs(), reverse=reverse),
                        python_scan(body, init, _xs(), reverse=reverse))


def test_scan_without_xs_and_with_length() -> None:
    def f(c: Any, _: Any) -> Any:
        return c * 2, c

    carry, ys = scan(f, f32(1.0), None, length=4)
    assert float(carry) == 16.0
    np.testing.assert_allclose(ys, [1, 2, 4, 8])


def test_scan_zero_length_and_weak_init_promotion() -> None:
    carry, ys = scan(lambda c, x: (c + x.sum(), c * x), f32(1), np.zeros((0, 2), f32))
    assert float(carry) == 1.0
    assert np.asarray(ys).shape == (0, 2)
    # a Python-scalar init takes the carry type the body gives it
    carry, _ = scan(lambda c, x: (c + x, x), 0, np.arange(3, dtype=f32))
    assert np.asarray(carry).dtype == f32 and float(carry) == 3.0


def test_scan_unroll_is_recorded() -> None:
    jaxpr = tc.make_jaxpr(lambda x: scan(lambda c, v: (c + v, c), 0.0, x, unroll=True))(
        np.ones(5, f32))
    (eqn,) = _scan_eqns(jaxpr)
    assert eqn.params["unroll"] == 5
    with pytest.raises(ValueError, match="non-negative"):
        scan(lambda c, v: (c, v), 0.0, np.ones(3, f32), unroll=-1)


# --- errors ----------------------------------------------------------------------------------
def test_carry_type_mismatch_names_the_component() -> None:
    with pytest.raises(TypeError) as info:
        scan(lambda carry, x: ((carry[0], np.zeros(3, f32)), x), (f32(1), f32(2)),
             np.arange(3, dtype=f32))
    msg = str(info.value)
    assert msg.startswith("scan body function carry input and carry output must have equal "
                          "types, but they differ:")
    assert ("The input carry component carry[1] has type float32[] but the corresponding "
            "output carry component has type float32[3], so the shapes do not match.") in msg


def test_carry_mismatch_lists_every_component() -> None:
    with pytest.raises(TypeError) as info:
        scan(lambda carry, x: ((np.int32(1), np.zeros(3, f32)), x), (f32(1), f32(2)),
             np.arange(3, dtype=f32))
    msg = str(info.value)
    assert "  * the input carry component carry[0] has type float32[] but the corresponding " \
           "output carry component has type int32[], so the dtypes do not match;" in msg
    assert "carry[1]" in msg


def test_carry_structure_mismatch() -> None:
    with pytest.raises(TypeError, match="must have the same pytree structure") as info:
        scan(lambda c, x: ((c[0], c[1], 3.0), x), (f32(1), f32(2)), np.arange(3, dtype=f32))
    assert "is a tuple of length 2 but the corresponding component of the carry output is " \
           "a tuple of length 3, so the lengths do not match" in str(info.value)


def test_scan_argument_errors() -> None:
    with pytest.raises(TypeError, match="scan body output must be a pair"):
        scan(lambda c, x: c, f32(1), np.arange(3, dtype=f32))
    with pytest.raises(ValueError, match="disagrees with leading axis sizes"):
        scan(lambda c, x: (c, x), f32(1), np.arange(3, dtype=f32), length=4)
    with pytest.raises(ValueError, match="different leading axis sizes: 3, 4"):
        scan(lambda c, x: (c, x), f32(1), (np.arange(3, dtype=f32), np.arange(4, dtype=f32)))
    with pytest.raises(ValueError, match="no values to scan over"):
        scan(lambda c, x: (c, x), f32(1), None)
    with pytest.raises(TypeError, match="f argument should be a callable"):
        scan(1, f32(1), None, length=2)  # type: ignore[arg-type]


# --- staging and debug info ------------------------------------------------------------------
def test_body_debug_info_names_carry_and_xs() -> None:
    jaxpr = tc.make_jaxpr(lambda i, x: scan(body, i, x))((f32(0.5), f32(0.2)), _xs())
    (eqn,) = _scan_eqns(jaxpr)
    dbg = eqn.params["jaxpr"].jaxpr.debug_info
    assert dbg.traced_for == "scan"
    assert dbg.func_src_info.startswith("body at ")
    assert dbg.arg_names == ("carry[0]", "carry[1]", "xs['v']", "xs['w']")
    assert dbg.result_paths == ("result[0][0]", "result[0][1]", "result[1]['c']",
                                "result[1]['y']")
    assert eqn.params["num_carry"] == 2 and eqn.params["num_consts"] == 0
    assert set(eqn.params) == {"jaxpr", "length", "reverse", "num_consts", "num_carry",
                               "unroll"}


def test_closed_over_values_become_consts() -> None:
    w = np.arange(3, dtype=f32)
    jaxpr = tc.make_jaxpr(lambda x: scan(lambda c, v: (c + v * w, c), np.zeros(3, f32), x))(
        np.ones((2, 3), f32))
    (eqn,) = _scan_eqns(jaxpr)
    assert eqn.params["num_consts"] == 1
    assert eqn.params["jaxpr"].jaxpr.debug_info.arg_names == (None, "c", "v")


def test_named_axis_effects_of_the_body() -> None:
    def f(x: Any) -> Any:
        return scan(lambda c, v: (c + lax.psum(v, "i"), c), f32(0), x)

    with core.extend_axis_env("i", 2):
        jaxpr = tc.make_jaxpr(f)(np.ones(3, f32))
    (eqn,) = _scan_eqns(jaxpr)
    assert NamedAxisEffect("i") in eqn.effects
    xs = np.arange(6, dtype=f32).reshape(2, 3)
    out = tc.vmap(f, axis_name="i")(xs)
    want = python_scan(lambda c, v: (c + v, c), f32(0), xs.sum(0))[0]
    np.testing.assert_allclose(out[0], [want, want], rtol=1e-6)


# --- autodiff ---------------------------------------------------------------------------------
def _loss(c0: Any, s0: Any, w: Any, v: Any) -> Any:
    (c, s), ys = scan(body, (c0, s0), {"w": w, "v": v})
    return c * s + ys["y"].sum() + (ys["c"] ** 2).sum()


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_derivatives_match_finite_differences(reverse: bool) -> None:
    xs = _xs(3)

    def f(c0: Any, s0: Any, w: Any, v: Any) -> Any:
        (c, s), ys = scan(body, (c0, s0), {"w": w, "v": v}, reverse=reverse)
        return c * s + ys["y"].sum()

    T.check_grads(f, (f32(0.4), f32(0.3), xs["w"], xs["v"]), order=2, modes=("fwd", "rev"))


def test_grad_through_scan_with_closure_over_traced_value() -> None:
    def f(x: Any, a: Any) -> Any:
        return scan(lambda c, v: (lax.sin(c * a) + v, c * a), x, np.arange(3, dtype=f32))[0]

    T.check_grads(f, (f32(0.4), f32(1.3)), order=1, modes=("fwd", "rev"))


def test_grad_scan_jaxpr_names_and_reverse_scan() -> None:
    jaxpr = tc.make_jaxpr(tc.grad(_loss))(f32(0.4), f32(0.3), _xs()["w"], _xs()["v"])
    _check_body_names(jaxpr)
    eqns = _scan_eqns(jaxpr)
    transposed = [e for e in eqns if e.params["reverse"]]
    assert transposed, "the backward pass is a reversed scan"
    dbg = transposed[0].params["jaxpr"].jaxpr.debug_info
    assert dbg.func_src_info.startswith("transpose(")
    assert all(p is None or p.startswith("cotangent(") for p in dbg.result_paths)


def test_transpose_scan_gives_one_name_per_input() -> None:
    """A linear scan transposed: the transposed body has exactly one name per
    invar (JAX once reported more names than inputs here)."""
    def lin(xs: Any) -> Any:
        return scan(lambda c, x: (c * 2.0 + x, c * 3.0), f32(0), xs)

    xs = np.arange(4, dtype=f32)
    closed = tc.make_jaxpr(lin)(xs)
    validate_jaxpr_debug_info(closed)
    transposed = ad.transpose_jaxpr(closed, [True])
    validate_jaxpr_debug_info(transposed)
    core.check_jaxpr(transposed)
    for eqn in _scan_eqns(transposed):
        b = eqn.params["jaxpr"].jaxpr
        assert len(b.debug_info.arg_names) == len(b.invars)
    # numerically: vjp of the linear scan equals its transpose
    out_ct = (f32(1.0), np.ones(4, f32))
    _, vjp_fn = tc.vjp(lin, xs)
    (g,) = vjp_fn(out_ct)
    want = np.zeros(4)
    for k in range(4):
        e = np.zeros(4, f32)
        e[k] = 1
        c, ys = python_scan(lambda c, x: (c * 2.0 + x, c * 3.0), 0.0, e)
        want[k] = c + ys.sum()
    np.testing.assert_allclose(g, want, rtol=1e-5)


def test_linearize_scan_and_transposed_linear_fn() -> None:
    xs = _xs()
    f = lambda c: _loss(c, f32(0.3), xs["w"], xs["v"])  # noqa: E731
    out, f_lin = tc.linearize(f, f32(0.4))
    np.testing.assert_allclose(out, f(f32(0.4)), rtol=1e-6)
    eps = 1e-3
    fd = (f(f32(0.4 + eps)) - f(f32(0.4 - eps))) / (2 * eps)
    np.testing.assert_allclose(f_lin(f32(1.0)), fd, rtol=2e-2)


# --- vmap ------------------------------------------------------------------------------------
def test_vmap_scan_against_python_loop() -> None:
    rng = np.random.RandomState(1)
    c0 = rng.standard_normal(3).astype(f32)
    w = rng.standard_normal((3, 4)).astype(f32)

    def f(c: Any, ws: Any) -> Any:
        return scan(lambda c, x: (lax.sin(c) + x, c * x), c, ws)

    out = tc.vmap(f)(c0, w)
    for i in range(3):
        _assert_trees_close((out[0][i], out[1][i]), python_scan(
            lambda c, x: (np.sin(c) + x, c * x), c0[i], w[i]))


def test_vmap_batched_carry_from_unbatched_init_and_xs_axis() -> None:
    xs = np.arange(12, dtype=f32).reshape(4, 3)  # batched along axis 1

    def f(x: Any) -> Any:
        return scan(lambda c, v: (c + v, c), f32(0), x)

    out = tc.vmap(f, in_axes=1)(xs)
    for i in range(3):
        _assert_trees_close((out[0][i], out[1][i]), python_scan(lambda c, v: (c + v, c),
                                                                0.0, xs[:, i]))
    _check_body_names(tc.make_jaxpr(tc.vmap(f, in_axes=1))(xs))


def test_vmap_of_grad_of_scan() -> None:
    xs = _xs()
    g = tc.vmap(tc.grad(_loss), in_axes=(0, None, None, None))(
        np.array([0.1, 0.4], f32), f32(0.3), xs["w"], xs["v"])
    for i, c in enumerate([0.1, 0.4]):
        np.testing.assert_allclose(g[i], tc.grad(_loss)(f32(c), f32(0.3), xs["w"], xs["v"]),
                                   rtol=1e-5)


# --- DCE ------------------------------------------------------------------------------------
def test_dce_rule_drops_unused_carry_and_ys() -> None:
    def f(a: Any, b: Any, xs: Any) -> Any:
        return scan(lambda c, x: ((c[0] + x, c[1] * x), (c[0], c[1])), (a, b), xs)

    jaxpr = tc.make_jaxpr(f)(f32(1), f32(2), np.ones(3, f32)).jaxpr
    (eqn,) = _scan_eqns(jaxpr)
    # keep only the first carry output: the second carry is dead
    used, new_eqn = pe.dce_rules[scan_p]([True, False, False, False], eqn)
    assert used == [True, False, True]
    assert new_eqn.params["num_carry"] == 1 and len(new_eqn.invars) == 2
    dbg = new_eqn.params["jaxpr"].jaxpr.debug_info
    assert dbg.arg_names == ("c[0]", "x")
    assert dbg.result_paths == ("result[0][0]",)
    # a carry needed by a used one stays
    used, new_eqn = pe.dce_rules[scan_p]([False, False, False, True], eqn)
    assert used == [False, True, True] and new_eqn.params["num_carry"] == 1


def test_dce_jaxpr_through_scan() -> None:
    def f(a: Any, b: Any) -> Any:
        return scan(lambda c, _: ((c[0] * 2, c[1] + c[0]), c[0]), (a, b), None, length=3)

    jaxpr = tc.make_jaxpr(f)(f32(1), f32(2)).jaxpr
    new, used = pe.dce_jaxpr(jaxpr, [True, False, True])
    assert used == [True, False]
    (eqn,) = _scan_eqns(new)
    assert eqn.params["num_carry"] == 1
    validate_jaxpr_debug_info(new)
    core.check_jaxpr(new)


# --- lax.map ------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 2, 3, 5])
def test_lax_map_against_python(batch_size: int | None) -> None:
    from lamina_tracing_core.control_flow import map as lax_map
    xs = {"a": np.arange(10, dtype=f32).reshape(5, 2), "b": np.linspace(0, 1, 5).astype(f32)}
    out = lax_map(lambda d: lax.sin(d["a"]) * d["b"], xs, batch_size=batch_size)
    want = np.stack([np.sin(xs["a"][i]) * xs["b"][i] for i in range(5)])
    np.testing.assert_allclose(out, want, rtol=1e-5)
    g = tc.grad(lambda v: lax_map(lax.sin, v, batch_size=batch_size).sum())(xs["b"])
    np.testing.assert_allclose(g, np.cos(xs["b"]), rtol=1e-5)
