"""The extension API under JAX's names (lamina.extend, lamina.interpreters,
lamina.custom_batching, the jax._src shims), used the way libraries use them:
each is lamina's own table or object, and a rule registered through it is
the one lamina's transformations run."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import lamina as lx
import lamina.core
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import lax
from lamina._src import dispatch, traceback_util
from lamina._src import dtypes as src_dtypes
from lamina.core import ShapedArray
from lamina.custom_batching import custom_vmap, sequential_vmap
from lamina.extend import core as ext_core
from lamina.extend import linear_util as lu
from lamina.extend import mlir as ext_mlir
from lamina.extend import source_info_util
from lamina.extend.core import primitives as prims
from lamina.interpreters import ad, batching, mlir
from lamina.interpreters import partial_eval as pe
from lamina_tracing_core import primitives as tc_primitives
from lamina_tracing_core.lax.linalg import triangular_solve_p


def _primitive(name: str, **kwargs: Any) -> ext_core.Primitive:
    prim = ext_core.Primitive(name, **kwargs)
    prim.def_abstract_eval(lambda x, **_: ShapedArray(x.shape, x.dtype))
    return prim


def test_tables_are_lamina_own() -> None:
    assert ad.primitive_jvps is tc_primitives.jvp_rules
    assert ad.primitive_transposes is tc_primitives.transpose_rules
    assert batching.primitive_batchers is tc_primitives.batching_rules
    assert ext_mlir.register_lowering is mlir.register_lowering
    assert prims.add_p is lax.add_p and prims.triangular_solve_p is triangular_solve_p
    assert prims.jit_p.name == "jit"
    assert np.ndarray in ext_core.array_types and type(lx.numpy.ones(1)) in ext_core.array_types
    assert ext_mlir.ir.Context is not None


def test_a_primitive_defined_through_jax_names_runs_under_every_transformation() -> None:
    """equinox's pattern: jax.extend.core.Primitive, rules in the interpreters' tables."""
    cube_p = _primitive("cube")
    cube_p.def_impl(lambda x: np.asarray(x) ** 3)
    ad.defjvp(cube_p, lambda g, x: 3 * x * x * g)
    batching.defvectorized(cube_p)
    mlir.register_lowering(cube_p, mlir.lower_fun(lambda x: x * x * x, multiple_results=False))
    x = np.arange(1, 4, dtype=np.float32)
    np.testing.assert_allclose(cube_p.bind(x), x ** 3)
    np.testing.assert_allclose(cube_p.impl(x), x ** 3)
    assert cube_p.abstract_eval(ShapedArray((3,), np.float32))[1] == frozenset()
    np.testing.assert_allclose(lx.jit(lx.vmap(lx.grad(lambda v: cube_p.bind(v))))(x), 3 * x ** 2)


def test_deflinear_and_get_primitive_transpose() -> None:
    double_p = _primitive("double")
    ad.deflinear(double_p, lambda ct: [2 * ct])
    mlir.register_lowering(double_p, lambda ctx, x: [mlir.lower_fun(lambda v: 2 * v, False)(ctx, x)[0]])
    x = np.float32(1.5)
    assert float(lx.grad(lambda v: double_p.bind(v) * v)(x)) == pytest.approx(4 * 1.5)
    assert ad.get_primitive_transpose(double_p) is ad.primitive_transposes[double_p]
    with pytest.raises(LookupError, match="Transpose rule .* for 'cube_less' not implemented"):
        ad.get_primitive_transpose(_primitive("cube_less"))


def test_axis_primitive_batchers_gets_the_axis_size_and_name() -> None:
    seen: list[tuple[int, object]] = []
    count_p = _primitive("count")
    mlir.register_lowering(count_p, lambda ctx, x: [x])

    def rule(axis_size: int, axis_name: object, trace_type: object, args: Any, dims: Any) -> Any:
        seen.append((axis_size, axis_name))
        return count_p.bind(args[0]), dims[0]

    batching.axis_primitive_batchers[count_p] = rule
    assert count_p in batching.fancy_primitive_batchers
    lx.vmap(count_p.bind, axis_name="i")(np.ones((5, 2), np.float32))
    assert seen == [(5, "i")]


def test_trace_to_jaxpr_dynamic_and_dce() -> None:
    def f(x: Any, y: Any) -> list[Any]:
        return [jnp.sin(x) * 2]

    dbg = lu.WrappedFun  # the class libraries annotate with
    fun = lu.wrap_init(f)
    assert isinstance(fun, dbg)
    avals = [ShapedArray((2,), np.float32)] * 2
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(fun, avals)
    assert len(jaxpr.invars) == 2 and out_avals == [avals[0]] and consts == []
    kept, _, _ = pe.trace_to_jaxpr_dynamic(lu.wrap_init(f), avals, keep_inputs=[True, False])
    assert len(kept.invars) == 1
    with pytest.raises(ValueError, match="keep_inputs drops args\\[0\\]"):
        pe.trace_to_jaxpr_dynamic(lu.wrap_init(f), avals, keep_inputs=[False, True])
    pruned, used = pe.dce_jaxpr(jaxpr, False)
    assert pruned.eqns == [] and used == [False, False]
    known = pe.PartialVal.known(np.float32(2))
    unknown = pe.PartialVal.unknown(ShapedArray((), np.float32))
    part, out_pvals, _ = pe.trace_to_jaxpr_nounits(
        lu.wrap_init(lambda a, b: [a * 3, a * b]), [known, unknown])
    assert out_pvals[0].is_known() and float(out_pvals[0].get_known()) == 6.0
    assert not out_pvals[1].is_known() and len(part.eqns) == 1


def test_linear_util_generator_and_plain_transformations() -> None:
    def scale(factor: float, *args: Any) -> Any:
        results = yield args, {}
        yield [factor * r for r in results]

    def plain(inner: Any, store: Any, *args: Any) -> Any:
        out = inner(*args)
        store.store(len(out))
        return out

    wf = lu.transformation(scale, lu.wrap_init(lambda x: [x + 1]), 3.0)
    wf2, count = lu.transformation_with_aux2(plain, wf)
    assert wf2.call_wrapped(1.0) == [6.0] and count() == 1
    _, never = lu.transformation_with_aux(plain, lu.wrap_init(lambda: []))
    assert lu.merge_linear_aux(count, never) == (True, 1)
    assert lu.merge_linear_aux(never, count) == (False, 1)
    with pytest.raises(lu.StoreException):
        lu.merge_linear_aux(never, never)


def test_source_info_util_user_context_and_name_stack() -> None:
    here = source_info_util.current()
    with source_info_util.user_context(here), source_info_util.transform_name_stack("mine"):
        closed = lx.make_jaxpr(lambda x: jnp.sin(x))(np.float32(1))
    eqn, = closed.jaxpr.eqns
    assert eqn.source_info.frame.line == here.frame.line
    assert source_info_util.summarize(here).startswith(here.frame.file_name)
    assert str(source_info_util.new_name_stack("a").extend("b")) == "a/b"


def test_opaque_trace_state_tells_transformations_apart() -> None:
    outer = ext_core.get_opaque_trace_state(convention="flax")
    inner: list[Any] = []
    lx.jit(lambda x: inner.append(ext_core.get_opaque_trace_state("flax")) or x)(1.0)
    assert outer == ext_core.get_opaque_trace_state("flax") and inner[0] != outer


def test_custom_vmap_uses_its_rule_and_sequential_vmap_loops() -> None:
    calls: list[tuple[int, Any]] = []

    @custom_vmap
    def f(x: Any, y: Any) -> Any:
        return x * y

    @f.def_vmap
    def rule(axis_size: int, in_batched: Any, x: Any, y: Any) -> tuple[Any, Any]:
        calls.append((axis_size, in_batched))
        return x * y + 100, True

    xs = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(f(xs, 2.0), xs * 2)
    np.testing.assert_allclose(lx.jit(lx.vmap(f, in_axes=(0, None)))(xs, 2.0), xs * 2 + 100)
    assert calls == [(3, [True, False])]
    np.testing.assert_allclose(lx.grad(lambda v: f(v, 3.0))(1.0), 3.0)
    seq = sequential_vmap(lambda x, y: jnp.sin(x) + y)
    np.testing.assert_allclose(lx.vmap(seq)(xs, xs), np.sin(xs) + xs, rtol=1e-6)
    assert "scan" in str(lx.make_jaxpr(lx.vmap(seq))(xs, xs))
    with pytest.raises(TypeError, match="positional arguments only"):
        f(xs, y=1.0)
    with pytest.raises(AttributeError, match="No batching rule defined for custom_vmap"):
        lx.vmap(custom_vmap(lambda x: x))(xs)


def test_src_shims() -> None:
    traceback_util.register_exclusion(__file__)
    try:
        assert not traceback_util.include_frame(sys._getframe())
    finally:
        traceback_util._exclude_paths.remove(__file__)
    assert traceback_util.include_frame(sys._getframe())
    assert traceback_util.api_boundary(len) is len
    assert dispatch.wait_for_tokens() is None
    assert src_dtypes.supports_inf(np.float32) and not src_dtypes.supports_inf(np.int32)
    assert not src_dtypes.supports_inf(jnp.float8_e4m3fn)

    class Meta(src_dtypes.ExtendedDType):
        type = src_dtypes.extended
        name = "meta"

    assert lx.dtypes.issubdtype(Meta(), src_dtypes.extended)


def test_signatures_follow_jax() -> None:
    assert list(inspect.signature(mlir.register_lowering).parameters) == [
        "prim", "rule", "platform", "inline", "cacheable"]
    assert list(inspect.signature(pe.dce_jaxpr).parameters) == [
        "jaxpr", "used_outputs", "instantiate"]
    assert list(inspect.signature(batching.bdim_at_front).parameters) == [
        "x", "bdim", "size", "mesh_axis"]


def test_one_shape_dtype_struct_class() -> None:
    """equinox checks ``type(jax.eval_shape(f, x)) is jax.ShapeDtypeStruct``."""
    out = lx.eval_shape(lambda x: x * 2, np.ones(3, np.int32))
    assert type(out) is lx.ShapeDtypeStruct and out.shape == (3,)
    _, shape = lx.make_jaxpr(lambda x: x, return_shape=True)(np.float32(1))
    assert type(shape) is lx.ShapeDtypeStruct


def test_ensure_compile_time_eval_computes_constants_under_jit() -> None:
    """equinox's error_if and Embedding read concrete values under jit this way."""
    seen: list[Any] = []

    def f(x: Any) -> Any:
        with lx.ensure_compile_time_eval():
            c = jnp.arange(3.0) * 2
            seen.append(c)
            big = bool(c.sum() > 5)  # a Python bool: no ConcretizationTypeError
        return x + c if big else x

    closed = lx.make_jaxpr(f)(np.ones(3, np.float32))
    assert not isinstance(seen[-1], lx.core.Tracer)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["add"]
    np.testing.assert_allclose(lx.jit(f)(np.ones(3, np.float32)), [1, 3, 5])
    assert ShapedArray((2,), np.int32).to_tangent_aval().dtype == lx.dtypes.float0


def test_pmap_out_axes_may_hold_negative_entries_for_empty_subtrees() -> None:
    """equinox's filter_pmap passes out_axes ``(list(range(-n, n)), None, None)``."""
    if lx.device_count() < 8:
        pytest.skip("needs 8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    f = lx.pmap(lambda x: ([[], [x * 2]], None, None), out_axes=([-1, 0], None, None))
    out = f(np.arange(8.0, dtype=np.float32))
    np.testing.assert_allclose(out[0][1][0], np.arange(8.0) * 2)
    with pytest.raises(ValueError, match="out_axes entries must be non-negative"):
        lx.pmap(lambda x: x, out_axes=-1)(np.arange(8.0, dtype=np.float32))
