"""``no_tracing``: inside ``with lamina.no_tracing(True):`` a jit call whose
trace is cached runs, and one that would trace raises JAX's RuntimeError
(text recorded from JAX 0.10.2)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import lamina as lx
import lamina.numpy as jnp
import pytest


@pytest.fixture(autouse=True)
def _restore_setting() -> Iterator[None]:
    yield
    lx.config.update("jax_no_tracing", False)


def _double(x: float) -> float:
    return x * 2


LINE = _double.__code__.co_firstlineno


def test_cache_hits_run_and_misses_raise_naming_the_function() -> None:
    f = lx.jit(_double)
    assert f(1.0) == 2.0
    with lx.no_tracing(True):
        assert lx.config.jax_no_tracing is True
        assert lx.no_tracing.value is True
        assert f(2.0) == 4.0
        with pytest.raises(RuntimeError, match=re.escape(
                f"re-tracing function _double at {__file__}:{LINE} for `jit`, but "
                "'no_tracing' is set")):
            f(jnp.ones(3))  # another shape: a cache miss
    assert lx.config.jax_no_tracing is False
    assert f(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_a_new_function_raises_and_the_flag_defaults_to_true() -> None:
    with lx.no_tracing():
        with pytest.raises(RuntimeError, match=r"re-tracing function <lambda> at .*"
                                               r"test_config_no_tracing.py:\d+ for `jit`, but "
                                               r"'no_tracing' is set"):
            lx.jit(lambda x: x + 1)(1.0)
    assert lx.jit(lambda x: x + 1)(1.0) == 2.0


def test_config_update_sets_it_for_the_process() -> None:
    lx.config.update("jax_no_tracing", True)
    with pytest.raises(RuntimeError, match="'no_tracing' is set"):
        lx.jit(lambda x: x - 1)(1.0)
    lx.config.update("jax_no_tracing", False)
    assert lx.jit(lambda x: x - 1)(1.0) == 0.0
