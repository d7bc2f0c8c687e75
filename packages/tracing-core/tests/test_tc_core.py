"""The tracing machinery: trace stack, bind, make_jaxpr, eval_jaxpr, errors."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import tc_testing as T

import lamina_tracing_core as tc
from lamina_tracing_core import core, effects, lax, primitives
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray
from lamina_tracing_core.errors import (
    ConcretizationTypeError,
    JaxprTypeError,
    TracerArrayConversionError,
    TracerBoolConversionError,
    TracerIntegerConversionError,
    UnboundAxisNameError,
    UnexpectedTracerError,
)
from lamina_tracing_core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from lamina_tracing_core.primitives import MissingRuleError, Primitive

f32 = np.float32


def test_make_jaxpr_names_arguments_and_results() -> None:
    def f(x, y):
        return {"a": T.t_mul(T.t_sin(x), y["hi"]), "b": [x]}

    closed = tc.make_jaxpr(f)(f32(1.0), {"hi": f32(2.0)})
    dbg = closed.jaxpr.debug_info
    assert dbg is not None
    assert dbg.traced_for == "make_jaxpr"
    assert dbg.func_src_info is not None and dbg.func_src_info.startswith("f at ")
    assert dbg.arg_names == ("x", "y['hi']")
    assert dbg.result_paths == ("result['a']", "result['b'][0]")
    tc.validate_jaxpr_debug_info(closed)
    text = str(closed)
    assert "# args: x, y['hi']  results: result['a'], result['b'][0]" in text
    assert "t_sin a" in text and "t_mul" in text


def test_make_jaxpr_varargs_kwargs_and_static_argnums() -> None:
    def f(x, n, *args, **kwargs):
        out = x
        for _ in range(n):
            out = T.t_add(out, args[0])
        return T.t_mul(out, kwargs["w"])

    closed = tc.make_jaxpr(f, static_argnums=(1,))(f32(1.0), 2, f32(3.0), w=f32(4.0))
    dbg = closed.jaxpr.debug_info
    assert dbg is not None
    assert dbg.arg_names == ("x", "args[0]", "kwargs['w']")
    assert len(closed.eqns) == 3


def test_make_jaxpr_return_shape_and_literals() -> None:
    closed, shape = tc.make_jaxpr(lambda x: T.t_mul(x, 2.0), return_shape=True)(
        np.ones(3, f32))
    assert shape.shape == (3,) and shape.dtype == np.float32
    eqn = closed.eqns[0]
    assert isinstance(eqn.invars[1], Literal) and eqn.invars[1].val == 2.0
    assert "2.0:f32[]" in str(closed)


def test_constants_are_hoisted_and_deduplicated() -> None:
    c = np.arange(3, dtype=f32)

    def f(x):
        return T.t_add(T.t_add(x, c), c)

    closed = tc.make_jaxpr(f)(np.ones(3, f32))
    assert len(closed.jaxpr.constvars) == 1
    assert closed.consts[0] is c
    assert str(closed).startswith("# args: x")
    assert "{ lambda a:f32[3]; b:f32[3]. let" in str(closed)


def test_omnistaging_stages_ops_on_constants() -> None:
    def f(x):
        y = T.t_sin(np.ones(3, f32))  # no tracer involved, still staged
        return T.t_add(x, y)

    closed = tc.make_jaxpr(f)(np.ones(3, f32))
    assert [e.primitive.name for e in closed.eqns] == ["t_sin", "t_add"]


def test_equations_carry_user_source_info() -> None:
    def f(x):
        return T.t_sin(x)  # the user line

    closed = tc.make_jaxpr(f)(f32(1.0))
    info = closed.eqns[0].source_info
    assert info.frame is not None
    assert info.frame.file_name.endswith("test_tc_core.py")
    assert info.frame.function_name == "f"


def test_eval_jaxpr_and_jaxpr_as_fun() -> None:
    def f(x, y):
        return T.t_mul(T.t_sin(x), y), T.t_add(x, 1.0)

    x, y = f32(0.5), f32(3.0)
    closed = tc.make_jaxpr(f)(x, y)
    out = core.eval_jaxpr(closed.jaxpr, closed.consts, x, y)
    np.testing.assert_allclose(out[0], np.sin(x) * y, rtol=1e-6)
    np.testing.assert_allclose(core.jaxpr_as_fun(closed)(x, y)[1], x + 1.0)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        core.eval_jaxpr(closed.jaxpr, closed.consts, x)


def test_eval_jaxpr_propagates_source_info_when_restaged() -> None:
    def f(x):
        return T.t_sin(x)

    closed = tc.make_jaxpr(f)(f32(1.0))
    again = tc.make_jaxpr(core.jaxpr_as_fun(closed))(f32(1.0))
    assert again.eqns[0].source_info.frame == closed.eqns[0].source_info.frame


def test_missing_impl_rule_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a runtime's default impl (another package's tests may have set one).
    monkeypatch.setattr(primitives, "default_impl", None)
    p = Primitive("no_impl_here")
    p.def_abstract_eval(lambda a: a)
    with pytest.raises(MissingRuleError, match="no_impl_here has no impl rule"):
        p.bind(f32(1.0))
    closed = tc.make_jaxpr(lambda x: p.bind(x))(f32(1.0))  # staging works
    assert closed.eqns[0].primitive is p


def test_check_jaxpr_accepts_traced_and_rejects_bad() -> None:
    closed = tc.make_jaxpr(lambda x: T.t_mul(T.t_sin(x), x))(f32(1.0))
    core.check_jaxpr(closed)
    a = Var(ShapedArray((), np.float32))
    b = Var(ShapedArray((), np.float32))
    undefined = Var(ShapedArray((), np.float32))
    from lamina_tracing_core.source_info import SourceInfo
    eqn = JaxprEqn([undefined], [b], T.t_sin_p, {}, effects.no_effects, SourceInfo(None))
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        core.check_jaxpr(Jaxpr([], [a], [b], [eqn]))
    bad_out = Var(ShapedArray((3,), np.float32))
    eqn = JaxprEqn([a], [bad_out], T.t_sin_p, {}, effects.no_effects, SourceInfo(None))
    with pytest.raises(JaxprTypeError, match="has type f32\\[3\\]"):
        core.check_jaxpr(Jaxpr([], [a], [bad_out], [eqn]))


def test_check_jaxpr_literals_operands_effects_and_consts() -> None:
    from lamina_tracing_core.source_info import SourceInfo
    f32_aval = ShapedArray((), np.float32)
    a, b = Var(f32_aval), Var(f32_aval)

    def one(invars: list[Any], eqn_effects: Any = effects.no_effects,
            params: dict[str, Any] | None = None, prim: Primitive = T.t_add_p) -> Jaxpr:
        eqn = JaxprEqn(invars, [b], prim, params or {}, eqn_effects, SourceInfo(None))
        return Jaxpr([], [a], [b], [eqn], effects=frozenset(eqn_effects))

    core.check_jaxpr(one([a, Literal(np.float32(2.0), f32_aval)]))
    core.check_jaxpr(one([a, Literal(2.0, f32_aval.update(weak_type=True))]))
    with pytest.raises(JaxprTypeError, match="has a value of dtype int32"):
        core.check_jaxpr(one([a, Literal(np.int32(2), f32_aval)]))
    with pytest.raises(JaxprTypeError, match="is not a variable or a literal"):
        core.check_jaxpr(one([a, "b"]))
    # a collective's named-axis effect must stay on its equation
    with core.extend_axis_env("i", 2):
        good = tc.make_jaxpr(lambda x: lax.psum(x, "i"))(f32(1.0))
    core.check_jaxpr(good)
    stripped = Jaxpr([], good.jaxpr.invars, good.jaxpr.outvars,
                     [good.eqns[0].replace(effects=effects.no_effects)], good.jaxpr.effects)
    with pytest.raises(JaxprTypeError, match="miss the primitive's effects"):
        core.check_jaxpr(stripped)
    closed = tc.make_jaxpr(lambda x: T.t_mul(x, np.ones(3, np.float32)))(np.ones(3, f32))
    assert closed.jaxpr.constvars
    broken = ClosedJaxpr(closed.jaxpr, closed.consts)
    broken.consts = []
    with pytest.raises(JaxprTypeError, match="0 consts for 1 constvars"):
        core.check_jaxpr(broken)


def test_pretty_print_nested_jaxpr_params() -> None:
    inner = tc.make_jaxpr(lambda y: T.t_sin(y))(f32(1.0))
    call_p = Primitive("test_call")
    call_p.multiple_results = True
    call_p.higher_order = True
    call_p.def_abstract_eval(lambda *avals, jaxpr: jaxpr.out_avals)
    closed = tc.make_jaxpr(lambda x: call_p.bind(x, jaxpr=inner))(f32(1.0))
    text = str(closed)
    assert "test_call[\n" in text
    assert "jaxpr={ lambda ; " in text
    assert text.count("# args: y  results: result") == 1
    # variables of the inner jaxpr do not reuse the outer names
    assert re.search(r"lambda ; a:f32\[\]\. let", text)


def test_trace_to_jaxpr_dynamic_with_wrapped_fun() -> None:
    from lamina_linear_util.linear_util import wrap_init
    jaxpr, out_avals, consts = pe.trace_to_jaxpr_dynamic(
        wrap_init(lambda x: [T.t_sin(x)]), [ShapedArray((2,), np.float32)])
    assert out_avals == [ShapedArray((2,), np.float32)]
    assert consts == []
    assert jaxpr.debug_info is not None and jaxpr.debug_info.arg_names == (None,)


# --- errors ---------------------------------------------------------------------------------
def test_bool_conversion_error_names_function_and_argument() -> None:
    def f(x, y):
        if T.t_add(y["a"], 1.0) > 0:  # type: ignore[operator]
            return x
        return x

    with pytest.raises(TracerBoolConversionError) as info:
        tc.make_jaxpr(f)(f32(1.0), {"a": f32(2.0)})
    msg = str(info.value)
    assert isinstance(info.value, ConcretizationTypeError)
    assert "while tracing the function f at " in msg
    assert "for make_jaxpr" in msg
    assert "depends on the value of the argument y['a']" in msg


def test_int_float_index_and_array_conversion_errors() -> None:
    with pytest.raises(ConcretizationTypeError, match="argument x") as info:
        tc.make_jaxpr(lambda x: int(x))(f32(1.0))
    assert "`int` function" in str(info.value)
    with pytest.raises(ConcretizationTypeError, match="`float` function"):
        tc.make_jaxpr(lambda x: float(x))(f32(1.0))
    with pytest.raises(TracerIntegerConversionError, match="argument i"):
        tc.make_jaxpr(lambda i: [1, 2][i])(np.int32(0))
    with pytest.raises(TracerArrayConversionError, match="argument arr"):
        tc.make_jaxpr(lambda arr: np.asarray(arr))(f32(1.0))
    with pytest.raises(ConcretizationTypeError, match="item"):
        tc.make_jaxpr(lambda x: x.item())(f32(1.0))


def test_value_depending_on_two_arguments_names_both() -> None:
    def g(a, b):
        return bool(T.t_add(a, b))

    with pytest.raises(TracerBoolConversionError, match="arguments a and b"):
        tc.make_jaxpr(g)(f32(1.0), f32(2.0))


def test_constant_tracer_error_lists_operations() -> None:
    def g(a):
        return float(T.t_sin(np.ones((), f32)))

    with pytest.raises(ConcretizationTypeError, match="t_sin"):
        tc.make_jaxpr(g)(f32(1.0))


def test_concrete_values_under_eager_jvp() -> None:
    # Under eager jvp the primal is known, so Python control flow works.
    def f(x):
        return T.t_sin(x) if x > 0 else T.t_neg(x)  # type: ignore[operator]

    out, tan = tc.jvp(f, (f32(0.5),), (f32(1.0),))
    np.testing.assert_allclose(tan, np.cos(0.5), rtol=1e-6)
    assert core.concrete_or_error(float, f32(2.0)) == 2.0


def test_concrete_or_error_context_message() -> None:
    def f(x):
        return core.concrete_or_error(int, x, "The size argument must be concrete.")

    with pytest.raises(ConcretizationTypeError, match="The size argument must be concrete"):
        tc.make_jaxpr(f)(np.int32(3))


def test_leaked_tracer_from_make_jaxpr() -> None:
    leaked: list[Any] = []

    def f(x):
        y = T.t_sin(x)
        leaked.append(y)
        return y

    tc.make_jaxpr(f)(f32(1.0))
    with pytest.raises(UnexpectedTracerError) as info:
        T.t_cos(leaked[0])
    msg = str(info.value)
    assert "make_jaxpr" in msg and "the function f at" in msg
    assert re.search(r"created on line .*test_tc_core\.py:\d+ \(f\)", msg)


def test_leaked_tracer_from_jvp_used_in_another_trace() -> None:
    leaked: list[Any] = []

    def f(x):
        leaked.append(x)
        return T.t_sin(x)

    tc.jvp(f, (f32(1.0),), (f32(1.0),))
    with pytest.raises(UnexpectedTracerError, match="JVPTracer.*\\(jvp\\)"):
        tc.make_jaxpr(lambda y: T.t_add(y, leaked[0]))(f32(1.0))


# --- named axes -------------------------------------------------------------------------------
def test_unbound_axis_is_an_error_naming_it() -> None:
    with pytest.raises(UnboundAxisNameError, match="'i'"):
        tc.make_jaxpr(lambda x: lax.psum(x, "i"))(f32(1.0))


def test_axis_env_binds_names_and_effects_propagate() -> None:
    closed = tc.make_jaxpr(lambda x: lax.psum(x, "i"), axis_env=[("i", 4)])(f32(1.0))
    assert effects.NamedAxisEffect("i") in closed.eqns[0].effects
    assert effects.NamedAxisEffect("i") in closed.effects
    with core.extend_axis_env("j", 2):
        assert core.axis_frame("j").size == 2
    with pytest.raises(UnboundAxisNameError):
        core.axis_frame("j")


def test_higher_order_effects_are_the_union_of_inner_jaxprs() -> None:
    inner = tc.make_jaxpr(lambda x: lax.psum(x, "i"), axis_env=[("i", 2)])(f32(1.0))
    call_p = Primitive("test_call_effects")
    call_p.multiple_results = True
    call_p.higher_order = True
    call_p.def_abstract_eval(lambda *avals, jaxpr: jaxpr.out_avals)
    closed = tc.make_jaxpr(lambda x: call_p.bind(x, jaxpr=inner), axis_env=[("i", 2)])(
        f32(1.0))
    assert closed.effects == frozenset({effects.NamedAxisEffect("i")})
    with pytest.raises(UnboundAxisNameError):
        tc.make_jaxpr(lambda x: call_p.bind(x, jaxpr=inner))(f32(1.0))


# --- closing over outer tracers ---------------------------------------------------------------------
def test_make_jaxpr_closes_over_outer_tracers() -> None:
    seen: list[ClosedJaxpr] = []

    def f(x):
        closed = tc.make_jaxpr(lambda y: T.t_mul(x, y))(f32(2.0))
        seen.append(closed)
        return core.eval_jaxpr(closed.jaxpr, closed.consts, f32(2.0))[0]

    out, tan = tc.jvp(f, (f32(3.0),), (f32(1.0),))
    assert float(out) == 6.0 and float(tan) == 2.0
    assert len(seen[0].consts) == 1 and isinstance(seen[0].consts[0], core.Tracer)


def test_config_validate_debug_info_runs_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core.config, "validate_debug_info", True)
    calls: list[Any] = []
    real = core.validate_jaxpr_debug_info
    monkeypatch.setattr(core, "validate_jaxpr_debug_info",
                        lambda j, **kw: (calls.append(j), real(j, **kw)))
    tc.make_jaxpr(tc.grad(lambda x: T.t_sin(x)))(f32(1.0))
    assert calls
