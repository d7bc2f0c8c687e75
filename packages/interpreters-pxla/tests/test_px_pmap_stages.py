"""pmap's AOT stages and the names in its lowered module: ``jax.arg_info`` /
``jax.result_info`` (and argument locations), every argument kept (pmap's
contract, unlike jit, which prunes unused ones), the same names under jvp, and
Traced -> Lowered -> Compiled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import pmap_execution
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_config import chunked_shards_scope
from lamina_interpreters_pxla.stages import Compiled, Lowered, Traced
from lamina_tracing_core import api, lax
from lamina_tracing_core.api import ShapeDtypeStruct

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N,
                                reason="needs 8 devices: run with XLA_FLAGS="
                                       "--xla_force_host_platform_device_count=8")


def full(v: float) -> np.ndarray:
    return np.full((N,), v, np.float32)


def f(x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
    return y["hi"] + args[1] + sum(kwargs.values())


ARGS = ({"hi": full(1.0)}, {"hi": full(2.0)}, full(3.0), full(4.0))
KWARGS = {"z": full(5.0), "w": full(6.0)}
# The arguments f reads, in flat order (x and args[0] are unused) ...
KEPT = ("y['hi']", "args[1]", "kwargs['w']", "kwargs['z']")
# ... and every argument, which pmap's own module keeps (JAX 0.10's pmap prunes
# to KEPT; the pmap lamina was started from kept them all).
ALL = ("x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']", "kwargs['z']")


def arg_infos(text: str) -> list[str]:
    import re
    return re.findall(r'jax\.arg_info = "([^"]*)"', text)


def result_infos(text: str) -> list[str]:
    import re
    return re.findall(r'jax\.result_info = "([^"]*)"', text)


def test_lowered_module_names_every_argument() -> None:
    lowered = pmap(f).lower(*ARGS, **KWARGS)
    assert isinstance(lowered, Lowered)
    text = lowered.as_text()
    assert arg_infos(text) == list(ALL)
    assert result_infos(text) == ["result"]
    assert lowered.lowering.kept_var_idx == tuple(range(6))
    assert lowered.lowering.module_name == "pmap_f"
    assert "mhlo.num_replicas = 8" in text


def test_argument_names_are_also_locations() -> None:
    text = pmap(f).lower(*ARGS, **KWARGS).as_text(debug_info=True)
    for name in ALL:
        assert f'loc("{name}")' in text


def test_lowered_module_names_pytree_results() -> None:
    def g(x: Any, y: Any) -> Any:
        return {"a": x, "b": [y]}

    text = pmap(g).lower(full(1.0), full(2.0)).as_text()
    assert result_infos(text) == ["result['a']", "result['b'][0]"]
    assert arg_infos(text) == ["x", "y"]


def test_args_info_and_out_info_name_every_flat_value() -> None:
    lowered = pmap(f).lower(*ARGS, **KWARGS)
    names = [a.name for a in lowered.args_info]
    assert names == ["x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']",
                     "kwargs['z']"]
    assert all(a.aval.shape == (N,) for a in lowered.args_info)
    assert [o.name for o in lowered.out_info] == ["result"]
    assert lowered.out_info[0].aval.shape == (N,)


def test_static_broadcasted_arguments_are_not_named() -> None:
    def h(x: Any, n: int, y: Any) -> Any:
        return x * n + y

    text = pmap(h, static_broadcasted_argnums=1).lower(full(1.0), 3, full(2.0)).as_text()
    assert arg_infos(text) == ["x", "y"]


def test_names_after_jvp_of_pmap() -> None:
    mapped = pmap(f)

    def call(*a: Any) -> Any:
        return mapped(*a[:4], z=a[4], w=a[5])

    primals = (*ARGS, KWARGS["z"], KWARGS["w"])
    tangents = tuple(np.ones_like(p) if not isinstance(p, dict) else
                     {"hi": np.ones_like(p["hi"])} for p in primals)
    out, tan = api.jvp(call, primals, tangents)
    np.testing.assert_allclose(np.asarray(out), full(17.0))
    np.testing.assert_allclose(np.asarray(tan), full(4.0))
    lowering = pmap_execution.recent_executables[-1].lowering
    assert lowering.arg_names == ALL + tuple(f"tangent({n})" for n in ALL)
    assert lowering.result_names == ("result", "tangent(result)")


def test_names_after_vmap_of_pmap() -> None:
    mapped = pmap(f)
    batched = tuple({"hi": np.stack([a["hi"]] * 2)} if isinstance(a, dict) else np.stack([a] * 2)
                    for a in ARGS)
    out = api.vmap(lambda *a: mapped(*a, z=KWARGS["z"], w=KWARGS["w"]))(*batched)
    np.testing.assert_allclose(np.asarray(out), np.full((2, N), 17.0))
    assert pmap_execution.recent_executables[-1].lowering.arg_names == ALL


def test_dce_rule_of_a_pmap_equation() -> None:
    from lamina_interpreters_pxla.pmap import pmap_p
    from lamina_tracing_core import partial_eval as pe
    closed = api.make_jaxpr(lambda *a, **k: (pmap(f)(*a, **k), pmap(f)(*a, **k)))(
        *ARGS, **KWARGS)
    eqn = closed.jaxpr.eqns[0]
    assert pe.dce_rules[pmap_p]([False], eqn) == ([False] * 6, None)
    # Inside another program the equation drops the inputs its body ignores.
    used_inputs, new_eqn = pe.dce_rules[pmap_p]([True], eqn)
    # (the rule's convention: one flag per input of the original equation)
    assert used_inputs == [False, True, False, True, True, True]
    assert new_eqn is not None
    assert new_eqn.invars == [v for v, u in zip(eqn.invars, used_inputs) if u]
    assert new_eqn.params["call_jaxpr"].debug_info.arg_names == KEPT
    assert new_eqn.params["in_axes"] == (0, 0, 0, 0)
    assert new_eqn.params["donated_invars"] == (False,) * 4


def test_dce_of_a_jaxpr_with_pmap_equations_keeps_it_valid() -> None:
    from lamina_tracing_core import core
    from lamina_tracing_core import partial_eval as pe

    def g(*a: Any, **k: Any) -> Any:
        first = pmap(lambda x, y: (x * 2, y * 3))(a[2], a[3])
        return first[1], pmap(f)(*a, **k)

    closed = api.make_jaxpr(g)(*ARGS, **KWARGS)
    jaxpr, used = pe.dce_jaxpr(closed.jaxpr, [False, True])
    core.check_jaxpr(jaxpr)
    out, = api.eval_jaxpr(jaxpr, closed.consts, *[
        full(v) for v, u in zip((1.0, 2.0, 3.0, 4.0, 6.0, 5.0), used) if u])
    np.testing.assert_allclose(np.asarray(out), full(17.0))


def test_nested_pmap_ignoring_some_inputs() -> None:
    xs = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    inner = pmap(lambda a, b, c: c * 2, axis_name="j")
    out = pmap(lambda v: inner(v + 1, v * 3, v - 1), axis_name="i")(xs)
    np.testing.assert_allclose(np.asarray(out), (xs - 1) * 2)


def test_trace_stage() -> None:
    traced = pmap(f).trace(*ARGS, **KWARGS)
    assert isinstance(traced, Traced)
    dbg = traced.jaxpr.jaxpr.debug_info
    assert dbg is not None and dbg.traced_for == "pmap"
    assert dbg.arg_names == ("x['hi']", "y['hi']", "args[0]", "args[1]", "kwargs['w']",
                             "kwargs['z']")
    assert dbg.result_paths == ("result",)
    assert [a.aval.shape for a in traced.args_info] == [(N,)] * 6
    lowered = traced.lower()
    assert arg_infos(lowered.as_text()) == list(ALL)


def test_trace_with_shape_dtype_structs() -> None:
    spec = ShapeDtypeStruct((N, 3), np.float32)
    lowered = pmap(lambda a, b: a * b).trace(spec, spec).lower()
    assert arg_infos(lowered.as_text()) == ["a", "b"]


@pytest.mark.parametrize("chunked", [True, False])
def test_compile_and_call(chunked: bool) -> None:
    with chunked_shards_scope(chunked):
        compiled = pmap(lambda x, y: lax.psum(x * y, "i"), axis_name="i").lower(
            np.ones((N, 3), np.float32), np.ones((N, 3), np.float32)).compile()
        assert isinstance(compiled, Compiled)
        x = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
        out = compiled(x, x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to((x * x).sum(0), x.shape))
    assert "all-reduce" in compiled.as_text()


def test_compiled_rejects_other_types_naming_the_argument() -> None:
    compiled = pmap(lambda x: x * 2).lower(np.ones((N, 3), np.float32)).compile()
    with pytest.raises(ValueError, match=r"argument 'x' has type f32\[8,4\] but the program "
                                         r"expects f32\[8,3\]"):
        compiled(np.ones((N, 4), np.float32))


def test_lowering_for_another_platform_on_this_host() -> None:
    lowered = pmap(lambda x: x * 2).trace(np.ones((N, 3), np.float32)).lower(
        lowering_platforms=("tpu",))
    assert lowered.platforms == ("tpu",)
    assert arg_infos(lowered.as_text()) == ["x"]
    with pytest.raises(ValueError, match="can be exported but not compiled here"):
        lowered.compile()


def test_lowering_more_replicas_than_devices_for_export() -> None:
    lowered = pmap(lambda x: x + 1).trace(np.ones((16, 2), np.float32)).lower(
        lowering_platforms=("cpu",))
    assert "mhlo.num_replicas = 16" in lowered.as_text()
    with pytest.raises(ValueError, match="requires 16 logical devices"):
        pmap(lambda x: x + 1).lower(np.ones((16, 2), np.float32))
