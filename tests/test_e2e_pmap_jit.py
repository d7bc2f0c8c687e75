"""jit and pmap together (the pmap package's tests can't import jit, a higher
layer): jit of pmap, pmap of jit, grad through both, names in the module."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
from lamina_interpreters_pxla import pmap_execution
from lamina_interpreters_pxla.pmap import pmap
from lamina_interpreters_pxla.pmap_config import chunked_shards_scope
from lamina_sharded_jit import jit
from lamina_tracing_core import api, lax

N = 8
pytestmark = pytest.mark.skipif(px.device_count() < N, reason="needs 8 devices")
X = (np.arange(N * 3, dtype=np.float32).reshape(N, 3) - 10.0) / 7.0
Y = np.linspace(0.5, 1.5, N * 3, dtype=np.float32).reshape(N, 3)


@pytest.fixture(params=[True, False], ids=["chunked", "classic"])
def layout(request: Any) -> Any:
    with chunked_shards_scope(request.param):
        yield request.param


def body(x: Any, y: Any) -> Any:
    return lax.sin(x) * y + lax.psum(x * x, "i")


def body_np(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sin(x) * y + (x * x).sum(0)


def loss(x: Any, y: Any) -> Any:
    return pmap(body, axis_name="i")(x, y).sum()


def last_lowering() -> Any:
    """The module of the pmap computation the impl rule ran last."""
    return pmap_execution.recent_executables[-1].lowering


def full(v: float) -> np.ndarray:
    return np.full((N,), v, np.float32)


def f(x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
    return y["hi"] + args[1] + sum(kwargs.values())


ARGS = ({"hi": full(1.0)}, {"hi": full(2.0)}, full(3.0), full(4.0))
KWARGS = {"z": full(5.0), "w": full(6.0)}
KEPT = ("y['hi']", "args[1]", "kwargs['w']", "kwargs['z']")


def arg_infos(text: str) -> list[str]:
    return re.findall(r'jax\.arg_info = "([^"]*)"', text)


def result_infos(text: str) -> list[str]:
    return re.findall(r'jax\.result_info = "([^"]*)"', text)


def test_jit_of_pmap(layout: bool) -> None:
    f = jit(pmap(body, axis_name="i"))
    np.testing.assert_allclose(np.asarray(f(X, Y)), body_np(X, Y), rtol=1e-5)
    text = f.lower(X, Y).as_text()
    assert 'jax.arg_info = "x"' in text and 'jax.arg_info = "y"' in text
    assert 'jax.result_info = "result"' in text


def test_jit_of_pmap_with_collectives_and_out_axes(layout: bool) -> None:

    def f(x: Any) -> Any:
        return lax.psum(x, "i"), lax.all_gather(x, "i", axis=1), lax.axis_index("i")

    total, gathered, index = jit(pmap(f, axis_name="i", out_axes=(None, 0, 0)))(X)
    np.testing.assert_allclose(np.asarray(total), X.sum(0), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(gathered), np.broadcast_to(X.T, (N, 3, N)))
    np.testing.assert_array_equal(np.asarray(index), np.arange(N))


def test_grad_of_jit_of_pmap(layout: bool) -> None:
    g = api.grad(lambda x: jit(pmap(body, axis_name="i"))(x, Y).sum())(X)
    np.testing.assert_allclose(np.asarray(g), np.asarray(api.grad(loss)(X, Y)), rtol=1e-5)


def test_jit_accepts_chunked_pmap_outputs_in_place() -> None:
    with chunked_shards_scope(True):
        out = pmap(lambda x: x * 2)(X)
    again = jit(lambda a: a + 1)(out)
    np.testing.assert_allclose(np.asarray(again), X * 2 + 1)
    assert again.sharding == out.sharding


def test_pmap_of_jit_keeps_the_names(layout: bool) -> None:
    out = pmap(jit(body), axis_name="i")(X, Y)
    np.testing.assert_allclose(np.asarray(out), body_np(X, Y), rtol=1e-5)
    assert last_lowering().arg_names == ("x", "y")


def test_names_after_jit_of_pmap() -> None:
    text = jit(pmap(f)).lower(*ARGS, **KWARGS).as_text()
    names = arg_infos(text)
    # The names survive; whether jit also prunes the arguments only the pmap
    # ignores is jit's choice (it needs a DCE pass through the pmap equation,
    # whose rule is test_dce_of_a_pmap_equation_prunes_unused_inputs).
    assert [n for n in names if n in KEPT] == list(KEPT)
    assert set(names) <= {"x['hi']", "args[0]", *KEPT}
    assert result_infos(text) == ["result"]


