"""``no_execution``: inside ``with lamina.no_execution(True):`` running a
compiled program (jit, eager operations, pmap) raises JAX's RuntimeError,
while tracing, lowering and compiling still work. Texts recorded from JAX
0.10.2."""

from __future__ import annotations

from collections.abc import Iterator

import lamina as lx
import lamina.numpy as jnp
import pytest


@pytest.fixture(autouse=True)
def _restore_setting() -> Iterator[None]:
    yield
    lx.config.update("jax_no_execution", False)


def _double(x: float) -> float:
    return x * 2


def _refused(name: str) -> str:
    return (f"JAX tried to execute function {name}, but the no_execution config option is "
            "set").replace("(", r"\(").replace(")", r"\)")


def test_cached_and_new_jit_calls_are_refused() -> None:
    f = lx.jit(_double)
    assert f(1.0) == 2.0  # cached in C++ and in Python before the block
    f(1.0)
    with lx.no_execution(True):
        assert lx.config.jax_no_execution is True
        assert lx.no_execution.value is True
        with pytest.raises(RuntimeError, match=_refused("jit(_double)")):
            f(2.0)
        with pytest.raises(RuntimeError, match=_refused("jit(<lambda>)")):
            lx.jit(lambda x: x + 1)(1.0)
    assert lx.config.jax_no_execution is False
    assert f(3.0) == 6.0


def test_eager_operations_are_refused() -> None:
    x = jnp.ones(3)
    with lx.no_execution():
        with pytest.raises(RuntimeError, match=_refused("jit(sin)")):
            jnp.sin(x)
        with pytest.raises(RuntimeError, match=_refused("jit(broadcast_in_dim)")):
            jnp.ones(3)
    assert jnp.sin(jnp.zeros(2)).tolist() == [0.0, 0.0]


def test_tracing_lowering_and_compiling_still_work() -> None:
    f = lx.jit(_double)
    lx.config.update("jax_no_execution", True)
    assert lx.eval_shape(f, 1.0).shape == ()
    assert "mul" in str(lx.make_jaxpr(f)(1.0))
    compiled = f.lower(1.0).compile()
    with pytest.raises(RuntimeError, match=_refused("jit(_double)")):
        compiled(1.0)
    lx.config.update("jax_no_execution", False)
    assert compiled(1.0) == 2.0


def test_pmap_is_refused() -> None:
    f = lx.pmap(lambda x: x + 1)
    assert f(jnp.ones((1,))).tolist() == [2.0]
    with lx.no_execution(True):
        with pytest.raises(RuntimeError, match="but the no_execution config option is set"):
            f(jnp.ones((1,)))
