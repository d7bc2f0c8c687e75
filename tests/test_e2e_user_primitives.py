"""User-defined primitives: the worked examples of docs/extending.md, run as
written, under every transformation, with their names and source lines
flowing through their equations into the lowered module.

The examples are the doc's own ``python`` blocks, executed in one namespace
(so the doc cannot drift from what is tested): ``softclip`` (written in terms
of other ops, lowered with ``lower_fun``), ``lower_solve`` (a jaxlib LAPACK
custom call on CPU, StableHLO elsewhere) and ``audited`` (an effect that keeps
it alive through dead-code elimination).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import lax
from lamina.extend import source_info_util
from lamina_tracing_core import source_info as _si
from lamina_tracing_core.effects import has_side_effects

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """The namespace the doc's examples define (each block run in order; the
    blocks assert their own results)."""
    text = DOC.read_text()
    namespace: dict[str, Any] = {"__name__": "extending_doc"}
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start(1))
        code = "\n" * line + match.group(1)  # keep the doc's line numbers
        exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the doc's own code
    return namespace


def _spd_lower(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.RandomState(seed)
    return (np.tril(rng.rand(n, n)) + n * np.eye(n)).astype(np.float32)


# --- softclip: jit, grad, vmap, pmap, scan, checkpoint ------------------------------------------
def _softclip_ref(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.abs(x))


def test_softclip_under_jit_grad_vmap(doc: dict[str, Any]) -> None:
    softclip = doc["softclip"]
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(lx.jit(softclip)(x), _softclip_ref(x), rtol=1e-6)
    np.testing.assert_allclose(lx.grad(lambda v: softclip(v).sum())(x),
                               1 / (1 + np.abs(x)) ** 2, rtol=1e-6)
    np.testing.assert_allclose(lx.jit(lx.vmap(lx.grad(lambda v: softclip(v).sum())))(x),
                               1 / (1 + np.abs(x)) ** 2, rtol=1e-6)
    np.testing.assert_allclose(lx.vmap(softclip, in_axes=1, out_axes=1)(x), _softclip_ref(x),
                               rtol=1e-6)
    with pytest.raises(TypeError, match="softclip: x must be a floating array"):
        softclip(np.arange(3))


def test_softclip_under_pmap_scan_checkpoint(doc: dict[str, Any], devices8: list) -> None:  # type: ignore[type-arg]
    softclip = doc["softclip"]
    x = np.linspace(-1, 3, 8 * 3, dtype=np.float32).reshape(8, 3)
    np.testing.assert_allclose(lx.pmap(softclip)(x), _softclip_ref(x), rtol=1e-6)

    def body(carry: Any, row: Any) -> tuple[Any, Any]:
        return carry + softclip(row).sum(), softclip(row)

    total, rows = lax.scan(body, np.float32(0), x)
    np.testing.assert_allclose(rows, _softclip_ref(x), rtol=1e-6)
    np.testing.assert_allclose(total, _softclip_ref(x).sum(), rtol=1e-5)
    grad_scan = lx.grad(lambda v: lax.scan(body, np.float32(0), v)[0])(x)
    grad_remat = lx.grad(lambda v: lx.checkpoint(lambda w: softclip(w).sum())(v))(x)
    np.testing.assert_allclose(grad_scan, 1 / (1 + np.abs(x)) ** 2, rtol=1e-6)
    np.testing.assert_allclose(grad_remat, 1 / (1 + np.abs(x)) ** 2, rtol=1e-6)


def test_softclip_names_and_lines_reach_the_jaxpr_and_the_module(doc: dict[str, Any]) -> None:
    softclip = doc["softclip"]

    def model(weights: Any, inputs: Any) -> Any:
        return softclip(inputs @ weights).sum()  # the line the equation records

    line = model.__code__.co_firstlineno + 1
    w, x = np.ones((3, 2), np.float32), np.ones((4, 3), np.float32)

    def softclip_lines() -> list[tuple[str, int]]:
        closed = lx.make_jaxpr(lx.grad(model))(w, x)
        assert closed.jaxpr.debug_info.arg_names == ("weights", "inputs")
        return [(Path(e.source_info.frame.file_name).name, e.source_info.frame.line)
                for e in closed.jaxpr.eqns if e.primitive.name == "softclip"]

    # The innermost user frame is the wrapper's bind, in the doc; a library
    # excludes its own files so that its callers' lines are recorded instead.
    bind_line = doc["softclip"].__code__.co_firstlineno + 2
    assert softclip_lines() == [("extending.md", bind_line)]
    source_info_util.register_exclusion(str(DOC))
    try:
        assert softclip_lines() == [(Path(__file__).name, line)]
        text = lx.jit(model).lower(w, x).as_text(debug_info=True)
    finally:
        _si._internal_dirs.remove(str(DOC))
        _si._internal_file_cache.clear()
    assert 'jax.arg_info = "weights"' in text and 'jax.arg_info = "inputs"' in text
    assert "jit(model)/softclip/" in text  # the lower_fun ops are named under the equation
    assert f'{Path(__file__).name}":{line}:' in text


# --- lower_solve: the custom call --------------------------------------------------------------
def test_lower_solve_is_a_lapack_custom_call_on_cpu(doc: dict[str, Any]) -> None:
    lower_solve = doc["lower_solve"]
    l, b = _spd_lower(4), np.ones((4, 2), np.float32)
    text = lx.jit(lower_solve).lower(l, b).as_text()
    assert "lapack_strsm_ffi" in text and "triangular_solve" not in text
    both = lx.jit(lower_solve).trace(l, b).lower(lowering_platforms=("cpu", "cuda")).as_text()
    assert "lapack_strsm_ffi" in both and "stablehlo.triangular_solve" in both
    np.testing.assert_allclose(lx.jit(lower_solve)(l, b), np.linalg.solve(l, b), rtol=1e-5)
    np.testing.assert_allclose(lower_solve(l, b, transpose=True), np.linalg.solve(l.T, b),
                               rtol=1e-5)


def test_lower_solve_derivatives_and_batching(doc: dict[str, Any]) -> None:
    lower_solve = doc["lower_solve"]
    l, b = _spd_lower(3, seed=1), np.arange(6, dtype=np.float32).reshape(3, 2)
    # reverse mode in both arguments: d/dl goes through the JVP, d/db through the transpose
    gl, gb = lx.jit(lx.grad(lambda l, b: lower_solve(l, b).sum(), argnums=(0, 1)))(l, b)
    x = np.linalg.solve(l, b)
    lam = np.linalg.solve(l.T, np.ones_like(b))
    np.testing.assert_allclose(gb, lam, rtol=1e-5)
    np.testing.assert_allclose(gl, np.tril(-lam @ x.T), rtol=1e-4, atol=1e-5)
    # forward mode, against a finite difference
    dl = np.tril(np.ones_like(l)) * 1e-2
    _, tangent = lx.jvp(lambda l: lower_solve(l, b), (l,), (dl,))
    fd = (np.linalg.solve(l.astype(np.float64) + dl, b) - np.linalg.solve(l - dl, b)) / 2
    np.testing.assert_allclose(tangent, fd, rtol=1e-3, atol=1e-5)
    # vmap over b only and over both, eager and jitted
    bs = np.stack([b, 2 * b, 3 * b])
    np.testing.assert_allclose(lx.vmap(lower_solve, in_axes=(None, 0))(l, bs),
                               np.stack([x, 2 * x, 3 * x]), rtol=1e-5)
    ls = np.stack([l, 2 * l])
    out = lx.jit(lx.vmap(lower_solve, in_axes=(0, 2), out_axes=1))(ls, bs[:2].transpose(1, 2, 0))
    np.testing.assert_allclose(out, np.stack([x, x]).transpose(1, 0, 2), rtol=1e-5)
    with pytest.raises(TypeError, match="does not fit l"):
        lower_solve(l, np.ones((4, 2), np.float32))


def test_lower_solve_in_scan_and_pmap(doc: dict[str, Any], devices8: list) -> None:  # type: ignore[type-arg]
    lower_solve = doc["lower_solve"]
    l = _spd_lower(3, seed=2)
    bs = np.random.RandomState(3).rand(8, 3, 1).astype(np.float32)
    want = np.stack([np.linalg.solve(l, b) for b in bs])
    np.testing.assert_allclose(lx.pmap(lower_solve, in_axes=(None, 0))(l, bs), want, rtol=1e-5)
    _, outs = lax.scan(lambda c, b: (c, lower_solve(l, b)), 0.0, bs)
    np.testing.assert_allclose(outs, want, rtol=1e-5)


# --- effects and DCE ---------------------------------------------------------------------------
def test_effects_keep_an_unused_equation_and_plain_ones_are_pruned(doc: dict[str, Any]) -> None:
    audited_p, softclip = doc["audited_p"], doc["softclip"]
    pe = doc["pe"]

    def f(x: Any) -> Any:
        audited_p.bind(x)
        softclip(x)  # unused and effect-free: pruned by DCE
        return x * 2

    closed = lx.make_jaxpr(f)(np.float32(1))
    names = [e.primitive.name for e in closed.jaxpr.eqns]
    assert "audited" in names and doc["AUDIT"] in closed.jaxpr.effects
    pruned, used = pe.dce_jaxpr(closed.jaxpr, [True])
    kept = [e.primitive.name for e in pruned.eqns]
    assert "audited" in kept and "softclip" not in kept
    assert any(has_side_effects(e.effects) for e in pruned.eqns)
    assert float(lx.jit(f)(np.float32(3))) == 6.0


def test_a_dce_rule_prunes_outputs_of_a_multiple_result_primitive() -> None:
    from lamina.extend.core import Primitive  # noqa: PLC0415 - a primitive of this test only
    from lamina.interpreters import partial_eval as pe  # noqa: PLC0415 - the table under test
    from lamina_mlir_lowering import lower_fun, register_lowering  # noqa: PLC0415

    pair_p = Primitive("sin_and_cos", multiple_results=True)
    pair_p.def_abstract_eval(lambda x: [x, x])
    register_lowering(pair_p, lower_fun(lambda x: [jnp.sin(x), jnp.cos(x)]))
    seen: list[list[bool]] = []

    def dce(used_outputs: list[bool], eqn: Any) -> tuple[list[bool], Any]:
        seen.append(list(used_outputs))
        if not any(used_outputs):
            return [False], None
        return [True], eqn

    pe.dce_rules[pair_p] = dce
    closed = lx.make_jaxpr(lambda x: pair_p.bind(x)[1])(np.float32(0.5))
    pruned, _ = pe.dce_jaxpr(closed.jaxpr, [True])
    assert [e.primitive for e in pruned.eqns] == [pair_p] and seen[-1] == [False, True]
    dropped, used_inputs = pe.dce_jaxpr(closed.jaxpr, [False])
    assert dropped.eqns == [] and used_inputs == [False]
    np.testing.assert_allclose(lx.jit(lambda x: pair_p.bind(x)[1])(np.float32(0.5)),
                               np.cos(np.float32(0.5)), rtol=1e-6)
