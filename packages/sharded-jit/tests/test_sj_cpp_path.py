"""jaxlib's C++ jit function in front of the Python path: which calls it
serves alone, and the states (staging, disable_jit, x64, deleted or moved
arguments) that must send a call back to Python."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_interpreters_pxla.array import Array, DeletedArrayError
from lamina_linear_util import tree_util
from lamina_sharded_jit import api as sj_api
from lamina_tracing_core import api as tc_api
from lamina_tracing_core import dtypes


@pytest.fixture
def python_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the calls that reach lamina's Python path."""
    count = [0]
    original = sj_api.Jitted._python_call

    def counting(self: Any, args: Any, kwargs: Any) -> Any:
        count[0] += 1
        return original(self, args, kwargs)

    monkeypatch.setattr(sj_api.Jitted, "_python_call", counting)
    yield count


def _arr(*values: float) -> Any:
    return px.device_put(np.asarray(values, np.float32))


def test_repeated_calls_never_enter_python(python_calls: list[int]) -> None:
    f = sj.jit(lambda x, t: {"s": x + t["a"], "p": [x * t["b"]]})
    x, t = _arr(1, 2), {"a": _arr(3, 4), "b": _arr(5, 6)}
    out = f(x, t)
    assert python_calls[0] == 1
    for _ in range(5):
        out = f(x, t)
    assert python_calls[0] == 1
    assert type(out["s"]) is Array and type(out["p"][0]) is Array
    np.testing.assert_allclose(np.asarray(out["p"][0]), [5, 12])
    f(out["s"], {"a": out["s"], "b": out["p"][0]})  # results fed back: same signature
    assert python_calls[0] == 1 and f._cache_size() == 1


@pytest.mark.parametrize("make_out", [
    lambda x: x + 1,
    lambda x: (x + 1,),
    lambda x: {"n": None, "e": (), "b": [x * 2, {"z": x}]},
    lambda x: (),
], ids=["bare", "one-tuple", "nested-with-empties", "no-results"])
def test_cached_results_rebuild_the_callers_tree(python_calls: list[int], make_out: Any) -> None:
    f = sj.jit(make_out)
    x = _arr(1, 2)
    first = f(x)
    again = f(x)
    assert python_calls[0] == 1
    first_leaves, first_tree = tree_util.tree_flatten(first)
    again_leaves, again_tree = tree_util.tree_flatten(again)
    assert again_tree == first_tree
    assert all(type(leaf) is Array for leaf in again_leaves)
    for a, b in zip(first_leaves, again_leaves):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_new_shapes_host_values_and_unused_arguments(python_calls: list[int]) -> None:
    f = sj.jit(lambda x, unused: x * 2)
    np.testing.assert_allclose(np.asarray(f(_arr(1), _arr(7))), [2])
    np.testing.assert_allclose(np.asarray(f(_arr(1, 2), _arr(7))), [2, 4])
    assert python_calls[0] == 2
    f(_arr(3, 4), _arr(8))
    assert python_calls[0] == 2
    # host values always take the Python path (it places them)
    np.testing.assert_allclose(np.asarray(f(np.ones(2, np.float32), 1.0)), [2, 2])
    np.testing.assert_allclose(np.asarray(f(np.ones(2, np.float32), 1.0)), [2, 2])
    assert python_calls[0] == 4


def test_concrete_call_under_a_staging_trace_is_staged() -> None:
    f = sj.jit(lambda x: x + 1)
    x = _arr(1, 2)
    f(x)
    f(x)  # now served by C++
    jaxpr = tc_api.make_jaxpr(lambda: f(x) * 2)()
    assert "jit" in str(jaxpr)
    np.testing.assert_allclose(np.asarray(f(x)), [2, 3])


def test_disable_jit_after_a_fastpath_runs_the_body() -> None:
    seen: list[type] = []

    def body(x: Any) -> Any:
        seen.append(type(x))
        return x + 1

    f = sj.jit(body)
    x = _arr(1)
    f(x)
    f(x)
    seen.clear()
    with sj.disable_jit():
        np.testing.assert_allclose(np.asarray(f(x)), [2])
    assert seen == [Array]
    seen.clear()
    f(x)
    assert seen == []  # cached again
    sj.config.update("disable_jit", True)
    try:
        f(x)
        assert seen == [Array]
    finally:
        sj.config.update("disable_jit", False)


def test_x64_switch_after_a_fastpath() -> None:
    from lamina_tracing_core import lax
    f = sj.jit(lambda x: lax.convert_element_type(x, dtypes.canonicalize_dtype(np.float64)))
    x = _arr(1)
    assert f(x).dtype == np.float32
    assert f(x).dtype == np.float32
    dtypes.enable_x64(True)
    try:
        assert f(x).dtype == np.float64
        assert f(x).dtype == np.float64
    finally:
        dtypes.enable_x64(False)
    assert f(x).dtype == np.float32


def test_deleted_and_donated_arguments() -> None:
    f = sj.jit(lambda x: x + 1)
    x = _arr(1, 2)
    f(x)
    f(x)
    x.delete()
    with pytest.raises(DeletedArrayError, match=r"jit\(<lambda>\): argument x"):
        f(x)
    g = sj.jit(lambda x: x * 2, donate_argnums=0)
    for _ in range(3):
        y = _arr(1)
        g(y)
        assert y.is_deleted()
    with pytest.raises(DeletedArrayError, match=r"donated to jit\(<lambda>\)"):
        g(y)


def test_committed_arguments_on_other_devices() -> None:
    devices = px.devices()
    if len(devices) < 2:
        pytest.skip("needs 2 devices")
    f = sj.jit(lambda x: x + 1)
    on0, on1 = (px.device_put(np.ones(2, np.float32), d) for d in devices[:2])
    assert f(on0).sharding == px.SingleDeviceSharding(devices[0])
    assert f(on1).sharding == px.SingleDeviceSharding(devices[1])
    assert f(on0).sharding == px.SingleDeviceSharding(devices[0])
    assert f(on1).sharding == px.SingleDeviceSharding(devices[1])


def test_the_callable_keeps_the_stages_and_identity() -> None:
    def scale(x: Any) -> Any:
        """Doubles."""
        return x * 2

    f = sj.jit(scale)
    assert f.__name__ == "scale" and f.__doc__ == "Doubles." and f.__wrapped__ is scale
    x = _arr(1, 2)
    assert "stablehlo.multiply" in f.lower(x).as_text()
    assert f.eval_shape(x).shape == (2,)
    f(x)
    assert f._cache_size() == 1
    f.clear_cache()
    assert f._cache_size() == 0
    np.testing.assert_allclose(np.asarray(f(x)), [2, 4])

    class Model:
        @sj.jit
        def apply(self, x: Any) -> Any:
            return x + 1

    with pytest.raises(TypeError, match=r"jit\(apply\) as an abstract array.* at path self\."):
        Model().apply(x)  # bound like a method: self is an argument
