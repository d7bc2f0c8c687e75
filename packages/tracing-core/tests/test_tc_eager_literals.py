"""eval_jaxpr's typed literals, literalable array types, the eager input
check, memoized abstract evaluation and weak-typed scalar operands."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_tracing_core as tc
from lamina_tracing_core import api, core, lax, primitives
from lamina_tracing_core import partial_eval as pe
from lamina_tracing_core.avals import ShapedArray, aval_handlers
from lamina_tracing_core.jaxpr import Literal
from lamina_tracing_core.primitives import Primitive

f32 = np.float32


# --- eval_jaxpr keeps the literals' dtypes ------------------------------------------------------
def test_eval_jaxpr_returns_typed_literals() -> None:
    closed = tc.make_jaxpr(lambda x: (x, f32(2.0), np.float64(3.0), 4.0, 5))(f32(1.0))
    outs = core.eval_jaxpr(closed.jaxpr, closed.consts, f32(1.0))
    strong32, from64, weak_float, weak_int = outs[1:]
    assert isinstance(strong32, np.ndarray) and strong32.shape == ()
    assert strong32.dtype == np.float32 and float(strong32) == 2.0
    # a float64 numpy scalar is a float32 literal when x64 is off: its value too
    assert isinstance(from64, np.ndarray) and from64.dtype == np.float32
    assert type(weak_float) is float and type(weak_int) is int  # weakly typed literals
    assert tc.make_jaxpr(lambda x: x)(f32(1.0)).jaxpr.eqns == []


def test_literals_feed_equations_with_their_dtype() -> None:
    closed = tc.make_jaxpr(lambda x: lax.add(x, np.float64(2.0)))(f32(1.0))
    lit = closed.eqns[0].invars[1]
    assert isinstance(lit, Literal) and lit.aval.dtype == np.float32
    value = core.literal_value(lit)
    assert value.dtype == np.float32
    [out] = core.eval_jaxpr(closed.jaxpr, closed.consts, f32(1.0))
    assert np.asarray(out).dtype == np.float32 and float(out) == 3.0


# --- literalable types --------------------------------------------------------------------------
class _Boxed:
    """A minimal array type of another layer (as the runtime's Array)."""

    def __init__(self, value: Any):
        self.value = np.asarray(value, f32)
        self.shape = self.value.shape
        self.dtype = self.value.dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
        return self.value if dtype is None else self.value.astype(dtype)


def test_registered_array_type_scalars_become_literals() -> None:
    aval_handlers[_Boxed] = lambda b: ShapedArray(b.shape, b.dtype)
    pe.register_literalable_type(_Boxed)
    assert _Boxed in pe.literalable_types
    scalar, vector = _Boxed(3.0), _Boxed([1.0, 2.0])
    closed = tc.make_jaxpr(lambda x: (lax.mul(x, scalar), lax.add(x, vector)))(
        np.ones(2, f32))
    assert isinstance(closed.eqns[0].invars[1], Literal)  # a 0-d value: a literal
    assert len(closed.consts) == 1 and closed.consts[0] is vector  # else a constant
    with pytest.raises(TypeError, match="expected a type"):
        pe.register_literalable_type("Boxed")  # type: ignore[arg-type]


# --- eager evaluation checks inputs first -------------------------------------------------------
def test_eager_top_k_checks_k_against_the_axis() -> None:
    with pytest.raises(ValueError, match="k argument to top_k must be no larger than size"):
        lax.top_k(np.arange(3, dtype=f32), 10)


def _counting_primitive(name: str) -> tuple[Primitive, dict[str, int]]:
    calls = {"abstract": 0, "impl": 0}
    prim = Primitive(name)

    def abstract(x: ShapedArray) -> ShapedArray:
        calls["abstract"] += 1
        if x.dtype != np.float32:
            raise TypeError(f"{name} takes float32, got {x.dtype}")
        return x

    def impl(x: Any) -> Any:
        calls["impl"] += 1
        return np.asarray(x)

    prim.def_abstract_eval(abstract)
    prim.def_impl(impl)
    return prim, calls


def test_eager_impls_see_only_checked_inputs() -> None:
    prim, calls = _counting_primitive("t_checked")
    with pytest.raises(TypeError, match="t_checked takes float32"):
        prim.bind(np.arange(3))
    assert calls["impl"] == 0  # the impl never saw the bad input
    prim.bind(np.ones(3, f32))
    assert calls == {"abstract": 2, "impl": 1}


def test_eager_memoizes_checks_of_cacheable_primitives() -> None:
    prim, calls = _counting_primitive("t_cached")
    core.cacheable_abstract_evals.add(prim)
    for _ in range(3):
        prim.bind(np.ones(3, f32))
    assert calls == {"abstract": 1, "impl": 3}
    with pytest.raises(TypeError):  # errors are never memoized
        prim.bind(np.arange(3))
    with pytest.raises(TypeError):
        prim.bind(np.arange(3))
    assert calls["abstract"] == 3


def test_impls_that_check_inputs_themselves_are_not_prechecked() -> None:
    prim, calls = _counting_primitive("t_self_checking")
    core.impls_checking_inputs.add(prim)
    prim.bind(np.arange(3))  # the impl is trusted to check (the runtime's dispatch does)
    assert calls == {"abstract": 0, "impl": 1}


@pytest.fixture
def default_impl_restored() -> Any:
    saved = primitives.default_impl, primitives.default_impl_checks_inputs
    yield
    primitives.set_default_impl(saved[0], checks_inputs=saved[1])


def _abstract_only_primitive(name: str, calls: dict[str, int]) -> Primitive:
    prim = Primitive(name)

    def abstract(x: ShapedArray, **params: Any) -> ShapedArray:
        calls["abstract"] += 1
        if x.dtype != np.float32:
            raise TypeError(f"{name} takes float32, got {x.dtype}")
        return x

    prim.def_abstract_eval(abstract)
    return prim


def test_the_default_impl_runs_primitives_without_an_impl_rule(
        default_impl_restored: None) -> None:
    calls = {"abstract": 0, "default": 0}
    prim = _abstract_only_primitive("t_defaulted", calls)

    def default(p: Primitive, *args: Any, **params: Any) -> Any:
        calls["default"] += 1
        assert p is prim and params == {"scale": 2}
        return np.asarray(args[0]) * params["scale"]

    primitives.set_default_impl(default)
    out = prim.bind(np.ones(3, f32), scale=2)
    np.testing.assert_array_equal(out, np.full(3, 2, f32))
    assert calls == {"abstract": 1, "default": 1}
    with pytest.raises(TypeError, match="t_defaulted takes float32"):
        prim.bind(np.arange(3), scale=2)  # checked before the default impl runs
    assert calls["default"] == 1
    # a primitive's own impl rule wins over the default
    prim.def_impl(lambda x, scale: np.asarray(x))
    np.testing.assert_array_equal(prim.bind(np.ones(3, f32), scale=2), np.ones(3, f32))
    assert calls["default"] == 1


def test_a_default_impl_checking_inputs_is_not_prechecked(default_impl_restored: None) -> None:
    calls = {"abstract": 0}
    prim = _abstract_only_primitive("t_default_checks", calls)
    primitives.set_default_impl(lambda p, x: np.asarray(x), checks_inputs=True)
    prim.bind(np.arange(3))  # trusted to check, as the runtime's compiling dispatch does
    assert calls == {"abstract": 0}


def test_without_a_default_impl_eager_binding_says_what_to_import(
        default_impl_restored: None) -> None:
    prim = _abstract_only_primitive("t_no_impl", {"abstract": 0})
    primitives.set_default_impl(None)
    with pytest.raises(primitives.MissingRuleError, match="t_no_impl has no impl rule"):
        prim.bind(np.ones(3, f32))


def test_eager_rejects_non_arrays_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=r"sin: argument 0 \(str\) is not a valid lamina array"):
        lax.sin("x")  # type: ignore[arg-type]


def test_abstract_eval_cached_matches_the_rule() -> None:
    a, b = ShapedArray((2, 3), f32), ShapedArray((3, 4), f32)
    params = dict(dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                  preferred_element_type=None, out_sharding=None)
    first = core.abstract_eval_cached(lax.dot_general_p, (a, b), params)
    assert first == ShapedArray((2, 4), f32)
    assert core.abstract_eval_cached(lax.dot_general_p, (a, b), params) is first
    with pytest.raises(TypeError, match="contracting dimensions to have the same shape"):
        core.abstract_eval_cached(lax.dot_general_p, (a, a), params)
    # unhashable params are evaluated without the memo
    listy = dict(params, dimension_numbers=[[[1], [0]], [[], []]])
    assert primitives.abstract_eval(lax.dot_general_p, [a, b], listy)[0].shape == (2, 4)
    assert core.abstract_eval_cached(lax.dot_general_p, (a, b), listy).shape == (2, 4)


def test_weak_scalar_operands_stage_no_conversion() -> None:
    # as JAX: only the weak type differs, so no convert_element_type
    closed = tc.make_jaxpr(lambda x, y: lax.mul(x, y))(np.ones(3, f32), 2.0)
    assert [e.primitive.name for e in closed.eqns] == ["mul"]
    closed = tc.make_jaxpr(lambda x: x * 2.0 + 1)(np.ones(3, f32))
    assert [e.primitive.name for e in closed.eqns] == ["mul", "add"]
    assert all(isinstance(e.invars[1], Literal) for e in closed.eqns)
    out = api.make_jaxpr(lambda x, y: lax.add(x, y))(2.0, 3.0).out_avals[0]
    assert out.weak_type and out.dtype == np.float32
