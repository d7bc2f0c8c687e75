"""``checking_leaks`` / ``jax_check_tracer_leaks``: a tracer of a jit,
make_jaxpr or vmap trace still reachable when that trace ends is JAX
0.10.2's ``Exception('Leaked trace ...')`` naming what holds it; grad and jvp
do not check (as in JAX); a tracer that is only used inside is no leak."""

import lamina as lx
import lamina.numpy as jnp
import pytest

leaked: list = []


def _leaky(x):
    leaked.append(x)
    return x * 2


@pytest.fixture(autouse=True)
def _forget():
    yield
    leaked.clear()


@pytest.mark.parametrize("run, trace_name, tracer", [
    (lambda f: lx.jit(f)(1.0), "DynamicJaxprTrace", "DynamicJaxprTracer(f32[])"),
    (lambda f: lx.make_jaxpr(f)(1.0), "DynamicJaxprTrace", "DynamicJaxprTracer(f32[])"),
    (lambda f: lx.vmap(f)(jnp.ones(2)), "BatchTrace", "BatchTracer(f32[])"),
])
def test_a_leaked_tracer_is_an_error_naming_its_holder(run, trace_name, tracer):
    with lx.checking_leaks():
        with pytest.raises(Exception, match=f"Leaked trace {trace_name}") as info:
            run(_leaky)
    text = str(info.value)
    assert text.startswith(f"Leaked trace {trace_name}. Leaked tracer(s):\n\n{tracer}\n")
    assert "The error occurred while tracing the function _leaky at" in text
    assert "is referred to by <list " in text and f"{__name__}.leaked" in text


@pytest.mark.parametrize("run", [lambda f: lx.grad(f)(1.0),
                                 lambda f: lx.jvp(f, (1.0,), (1.0,))])
def test_autodiff_traces_are_not_checked(run):
    with lx.checking_leaks():
        run(_leaky)


def test_the_setting_scopes_and_config_name():
    assert not lx.check_tracer_leaks.value and not lx.config.read("jax_check_tracer_leaks")
    with lx.checking_leaks():
        assert lx.check_tracer_leaks.value
        # nothing kept: no error, results as usual
        assert float(lx.jit(lambda x: jnp.sin(x) * 2)(0.0)) == 0.0
        assert lx.vmap(lambda x: x + 1)(jnp.ones(3)).tolist() == [2.0] * 3
    assert not lx.check_tracer_leaks.value
    lx.config.update("jax_check_tracer_leaks", True)
    try:
        with pytest.raises(Exception, match="Leaked trace DynamicJaxprTrace"):
            lx.jit(_leaky)(2.0)
    finally:
        lx.config.update("jax_check_tracer_leaks", False)
    leaked.clear()
    assert float(lx.jit(_leaky)(3.0)) == 6.0  # unchecked again
