"""Names reach the lowered module: arguments, results, locations, module and
private-function names, through grad, vmap and jvp around a jit."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

import lamina_sharded_jit as sj
from lamina_tracing_core import api, lax, validate_jaxpr_debug_info
from lamina_tracing_core.control_flow import scan


def f(x: Any, y: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"a": y["hi"] + args[1] + sum(kwargs.values()), "b": [y["hi"]]}


ARGS = ({"hi": 1.0}, {"hi": 2.0}, 3.0, 4.0)
KWARGS = {"z": 5.0, "w": 6.0}


def _arg_infos(text: str) -> list[str]:
    return re.findall(r'jax\.arg_info = "([^"]*)"', text)


def test_lowered_module_names_kept_arguments_and_results() -> None:
    text = sj.jit(f).lower(*ARGS, **KWARGS).as_text()
    # the unused x and args[0] are pruned; kwargs come sorted by name
    assert _arg_infos(text) == ["y['hi']", "args[1]", "kwargs['w']", "kwargs['z']"]
    assert re.findall(r'jax\.result_info = "([^"]*)"', text) == ["result['a']",
                                                                 "result['b'][0]"]
    assert "module @jit_f " in text


def test_debug_info_text_has_argument_locations_and_source_lines() -> None:
    text = sj.jit(f).lower(*ARGS, **KWARGS).as_text(debug_info=True)
    for name in ("y['hi']", "args[1]", "kwargs['z']", "kwargs['w']"):
        assert f'loc("{name}")' in text
    assert 'loc("x")' not in text and 'loc("args[0]")' not in text
    assert re.search(r'loc\("[^"]*test_sj_debug_info\.py":\d+', text)
    assert "jit(f)/add" in text


def test_keep_unused_keeps_every_argument() -> None:
    text = sj.jit(f, keep_unused=True).lower(*ARGS, **KWARGS).as_text()
    assert _arg_infos(text) == ["x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']",
                                "kwargs['z']"]


def test_module_names() -> None:
    assert "module @jit__lambda " in sj.jit(lambda x: x + 1).lower(1.0).as_text()

    def inner(x: Any) -> Any:
        return lax.sin(x) * 2.0

    jinner = sj.jit(inner)

    def outer(x: Any) -> Any:
        return jinner(x) + jinner(x + 1.0)

    text = sj.jit(outer).lower(1.0).as_text()
    assert "module @jit_outer " in text
    # one private function for the inner jit, called twice
    assert text.count("func.func private @inner(") == 1
    assert text.count("call @inner(") == 2
    lam = sj.jit(lambda x: sj.jit(lambda y: y * 2)(x)).lower(1.0).as_text()
    assert "func.func private @_lambda(" in lam


def test_inline_lowers_the_body_in_place() -> None:
    jinner = sj.jit(lambda y: y * 2, inline=True)
    text = sj.jit(lambda x: jinner(x) + 1).lower(1.0).as_text()
    assert "func.func private" not in text and "call @" not in text


def test_inline_jit_is_its_body_when_staged() -> None:
    """As in JAX: staged into a jaxpr, ``inline=True`` leaves the body's
    equations (with their own source lines), under grad too; a jit with
    shardings keeps its equation."""
    jinner = sj.jit(lambda y: lax.sin(y) * 2, inline=True)
    jaxpr = api.make_jaxpr(lambda x: jinner(x) + 1)(1.0)
    assert [e.primitive.name for e in jaxpr.jaxpr.eqns] == ["sin", "mul", "add"]
    assert "test_sj_debug_info.py" in str(jaxpr.jaxpr.eqns[0].source_info)
    grad_jaxpr = api.make_jaxpr(api.grad(lambda x: jinner(x) + 1))(1.0)
    assert "jit" not in {e.primitive.name for e in grad_jaxpr.jaxpr.eqns}
    np.testing.assert_allclose(api.grad(lambda x: jinner(x))(0.5), 2 * np.cos(0.5), rtol=1e-6)
    plain = sj.jit(lambda y: y * 2)
    assert "jit" in [e.primitive.name
                     for e in api.make_jaxpr(lambda x: plain(x) + 1)(1.0).jaxpr.eqns]
    donating = sj.jit(lambda y: y * 2, inline=True, donate_argnums=0)
    assert "jit" in [e.primitive.name
                     for e in api.make_jaxpr(lambda x: donating(x) + 1)(1.0).jaxpr.eqns]


def test_names_after_grad_vmap_and_jvp_around_a_jit() -> None:
    def g(x: Any, y: Any) -> Any:
        return lax.sin(x) * y["hi"]

    jg = sj.jit(g)
    grad_text = sj.jit(api.grad(lambda x, y: jg(x, y))).lower(1.0, {"hi": 2.0}).as_text()
    assert _arg_infos(grad_text) == ["x", "y['hi']"]
    assert 'jax.result_info = "result"' in grad_text
    x3 = np.ones(3, np.float32)
    vmap_text = sj.jit(api.vmap(g)).lower(x3, {"hi": x3}).as_text()
    assert _arg_infos(vmap_text) == ["x", "y['hi']"]

    def with_jvp(x: Any, t: Any) -> Any:
        return api.jvp(lambda a: jg(a, {"hi": 2.0}), (x,), (t,))

    jvp_text = sj.jit(with_jvp).lower(1.0, 1.0).as_text(debug_info=True)
    assert _arg_infos(jvp_text) == ["x", "t"]
    # the inner jit's private function names its primal and tangent inputs
    private = re.search(r"func\.func private @g\((.*?)\) ->", jvp_text)
    assert private is not None
    assert re.findall(r'loc\("([^"]*)"\)', private.group(1)) == ["x", "y['hi']", "tangent(x)"]


def _pjit_eqns(jaxpr: Any) -> list[Any]:
    return [e for e in jaxpr.jaxpr.eqns if e.primitive is sj.pjit_p]


def test_transformations_update_debug_info() -> None:
    def g(x: Any, y: Any) -> Any:
        return {"out": lax.sin(x) * y}

    jg = sj.jit(g)
    jvp_jaxpr = api.make_jaxpr(lambda x, t: api.jvp(lambda a: jg(a, 2.0)["out"], (x,), (t,)))(
        1.0, 1.0)
    validate_jaxpr_debug_info(jvp_jaxpr)
    inner = _pjit_eqns(jvp_jaxpr)[0].params["jaxpr"].jaxpr.debug_info
    assert inner.arg_names == ("x", "y", "tangent(x)")
    assert inner.result_paths == ("result['out']", "tangent(result['out'])")
    assert inner.func_src_info.startswith("jvp(g)")

    grad_jaxpr = api.make_jaxpr(api.grad(lambda x: jg(x, 2.0)["out"]))(1.0)
    validate_jaxpr_debug_info(grad_jaxpr)
    eqns = _pjit_eqns(grad_jaxpr)
    assert len(eqns) == 2  # the known (primal) part and the transposed linear part
    transposed = eqns[1].params["jaxpr"].jaxpr.debug_info
    assert transposed.result_paths == ("cotangent(x)",)
    assert transposed.func_src_info.startswith("transpose(jvp(g))")

    vmap_jaxpr = api.make_jaxpr(api.vmap(lambda x: jg(x, 2.0)))(np.ones(3, np.float32))
    validate_jaxpr_debug_info(vmap_jaxpr)
    vdbg = _pjit_eqns(vmap_jaxpr)[0].params["jaxpr"].jaxpr.debug_info
    assert vdbg.arg_names == ("x", "y") and vdbg.func_src_info.startswith("vmap(g)")


def test_jit_of_scan_and_scan_of_jit_keep_names() -> None:
    body = sj.jit(lambda c, x: (c + x, c * x))

    def run(xs: Any) -> Any:
        return scan(body, 0.0, xs)

    jaxpr = api.make_jaxpr(sj.jit(run))(np.arange(4.0, dtype=np.float32))
    validate_jaxpr_debug_info(jaxpr)
    out = sj.jit(run)(np.arange(4.0, dtype=np.float32))
    np.testing.assert_allclose(np.asarray(out[0]), 6.0)
    np.testing.assert_allclose(np.asarray(out[1]), [0.0, 0.0, 2.0, 9.0])
