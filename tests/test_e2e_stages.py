"""Behaviours 3 and 5: jit's AOT stages. Lowering for platforms this host
does not have (one or several at once), the clear error when compiling such
a module here, and ``jit(f).trace`` inside other transformations."""

from __future__ import annotations

import numpy as np
import pytest

import lamina as lx
import lamina.numpy as jnp
from e2e_helpers import main_signature, text_arg_infos
from lamina.errors import UnexpectedTracerError
from lamina_tracing_core.core import Tracer

X = np.linspace(-1.0, 1.0, 3).astype(np.float32)


def scaled_sine(x):
    return jnp.sin(x) * 2


def _traced():
    return lx.jit(scaled_sine).trace(X)


# --- behaviour 3 --------------------------------------------------------------------------------
def test_plain_lower_targets_the_local_platform():
    lowered = _traced().lower()
    assert lowered.platforms == ("cpu",)
    np.testing.assert_allclose(np.asarray(lowered.compile()(X)), np.sin(X) * 2, rtol=1e-6)


def test_lowering_for_tpu_works_on_a_cpu_host():
    lowered = _traced().lower(lowering_platforms=("tpu",))
    assert lowered.platforms == ("tpu",)
    text = lowered.as_text()
    assert "stablehlo.sine" in text
    assert text_arg_infos(text) == ["x"]
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert sig.arg_types == ("tensor<3xf32>",)  # no platform index for one platform


def test_several_platforms_give_one_module_with_a_platform_index():
    lowered = _traced().lower(lowering_platforms=("cpu", "cuda"))
    assert lowered.platforms == ("cpu", "cuda")
    sig = main_signature(lowered.compiler_ir("stablehlo"))
    assert sig.module_name == "jit_scaled_sine"
    # the first argument selects the platform; the user's argument keeps its name
    assert sig.arg_types == ("tensor<i32>", "tensor<3xf32>")
    assert sig.arg_infos[1] == "x"
    assert sig.arg_locs[0] == "_platform_index"
    assert sig.result_infos == ("result",)
    assert lowered.as_text().count("func.func public @main") == 1


@pytest.mark.parametrize("platforms", [("tpu",), ("cpu", "cuda"), ("cuda",)])
def test_compiling_for_other_platforms_is_a_clear_error(platforms):
    lowered = _traced().lower(lowering_platforms=platforms)
    with pytest.raises(Exception) as info:
        lowered.compile()
    message = str(info.value)
    assert "scaled_sine" in message
    assert str(platforms) in message or all(p in message for p in platforms)
    assert "cpu" in message


def test_an_unknown_platform_is_rejected_by_name():
    with pytest.raises(ValueError, match="foo"):
        _traced().lower(lowering_platforms=("foo",))


def test_a_multi_platform_export_runs_here():
    exported = _traced().lower(lowering_platforms=("tpu", "cpu")).export()
    assert tuple(exported.platforms) == ("tpu", "cpu")
    np.testing.assert_allclose(np.asarray(exported.call(X)), np.sin(X) * 2, rtol=1e-6)


# --- behaviour 5 --------------------------------------------------------------------------------
def test_trace_inside_grad_is_independent_of_the_outer_trace():
    saved = {}

    def body(y):
        saved["traced"] = lx.jit(scaled_sine).trace(y)
        return jnp.sum(y * 3.0)

    np.testing.assert_allclose(np.asarray(lx.grad(body)(X)), np.full(3, 3.0))
    traced = saved["traced"]
    # its jaxpr and avals are plain data: no tracer of grad's trace was captured
    assert not any(isinstance(c, Tracer) for c in traced.jaxpr.consts)
    assert [a.shape for a in traced.in_avals] == [(3,)]
    assert not any(isinstance(a, Tracer) for a in traced.in_avals)
    # and it lowers, compiles and runs after grad has finished
    np.testing.assert_allclose(np.asarray(traced.lower().compile()(X + 1)),
                               np.sin(X + 1) * 2, rtol=1e-6)


def test_trace_inside_vmap_sees_the_unbatched_argument():
    saved = {}

    def body(y):
        saved["traced"] = lx.jit(lambda z: z + 1).trace(y)
        return y

    lx.vmap(body)(np.ones((2, 3), np.float32))
    traced = saved["traced"]
    assert [a.shape for a in traced.in_avals] == [(3,)]
    np.testing.assert_allclose(np.asarray(traced.lower().compile()(X)), X + 1)


def test_trace_closing_over_an_outer_tracer_does_not_capture_it():
    saved = {}

    def body(y):
        try:
            saved["traced"] = lx.jit(lambda z: z * y).trace(X)
        except UnexpectedTracerError as e:  # a clear refusal is allowed
            saved["error"] = e
        return y.sum()

    lx.vmap(body)(np.ones((2, 3), np.float32))
    if "error" in saved:
        assert "vmap" in str(saved["error"]) or "tracer" in str(saved["error"]).lower()
    else:
        traced = saved["traced"]
        assert not any(isinstance(c, Tracer) for c in traced.jaxpr.consts)


def test_make_jaxpr_keeps_closing_over_outer_tracers():
    saved = {}

    def body(y):
        saved["jaxpr"] = lx.make_jaxpr(lambda z: z * y)(X)
        return jnp.sum(y * 2.0)

    np.testing.assert_allclose(np.asarray(lx.grad(body)(X)), np.full(3, 2.0))
    closed = saved["jaxpr"]
    assert len(closed.jaxpr.constvars) == 1
    assert len(closed.jaxpr.invars) == 1
    assert isinstance(closed.consts[0], Tracer)  # JAX's semantics: the outer value, a const
