"""The cached-call path: donation, deleted arrays, host values, committed
arrays, x64 switches, and agreement with the full path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina_interpreters_pxla as px
import lamina_sharded_jit as sj
from lamina_interpreters_pxla.array import DeletedArrayError
from lamina_tracing_core import dtypes


def test_donated_input_is_deleted_and_later_use_errors() -> None:
    f = sj.jit(lambda a, b: (a + b, b), donate_argnums=0)
    a = px.device_put(np.ones(4, np.float32))
    b = px.device_put(np.ones(4, np.float32))
    out, _ = f(a, b)
    np.testing.assert_allclose(np.asarray(out), 2.0)
    assert a.is_deleted() and not b.is_deleted()
    with pytest.raises(DeletedArrayError, match=r"donated to jit\(<lambda>\)"):
        np.asarray(a)
    with pytest.raises(DeletedArrayError, match=r"jit\(<lambda>\): argument a: Array has been "
                       "deleted"):
        f(a, b)
    c = px.device_put(np.ones(4, np.float32))
    f(c, b)  # the cached path donates too
    assert c.is_deleted()
    by_name = sj.jit(lambda a, b: a * 2, donate_argnames="a")
    d = px.device_put(np.ones(4, np.float32))
    by_name(d, b)
    assert d.is_deleted()


def test_deleted_argument_on_the_cached_path() -> None:
    f = sj.jit(lambda a: a + 1)
    x = px.device_put(np.ones(3, np.float32))
    f(x)
    x.delete()
    with pytest.raises(DeletedArrayError, match="argument a"):
        f(x)


def test_host_values_on_the_cached_path() -> None:
    f = sj.jit(lambda a, s: a * s)
    for i in range(3):
        out = f(np.full(3, i, np.float32), 2.0)
        np.testing.assert_allclose(np.asarray(out), 2.0 * i)
    assert f._cache_size() == 1
    np.testing.assert_allclose(np.asarray(f(np.ones(3, np.float64), 1)), 1.0)


def test_uncommitted_array_on_another_device_is_moved() -> None:
    devices = px.devices()
    if len(devices) < 2:
        pytest.skip("needs 2 devices")
    f = sj.jit(lambda a: a + 1)
    f(px.device_put(np.ones(2, np.float32)))
    with px.backends.default_device_scope(devices[1]):
        moved = px.device_put(np.ones(2, np.float32))
    assert not moved.committed
    out = f(moved)
    np.testing.assert_allclose(np.asarray(out), 2.0)
    committed = px.device_put(np.ones(2, np.float32), devices[1])
    assert f(committed).sharding == px.SingleDeviceSharding(devices[1])


def test_fast_path_agrees_with_full_path_on_pytrees() -> None:
    f = sj.jit(lambda t: {k: v * 2 for k, v in t.items()})
    tree = px.device_put({f"a{i}": np.full(4, i, np.float32) for i in range(10)})
    first = f(tree)
    second = f(tree)
    for k in tree:
        np.testing.assert_allclose(np.asarray(first[k]), np.asarray(second[k]))
    # outputs fed back in take the cached path too
    again = f(second)
    np.testing.assert_allclose(np.asarray(again["a3"]), 12.0)
    assert f._cache_size() == 1


def test_x64_switch_is_part_of_the_signature() -> None:
    f = sj.jit(lambda a: a + 1)
    assert f(1).dtype == np.int32
    dtypes.enable_x64(True)
    try:
        assert f(1).dtype == np.int64
    finally:
        dtypes.enable_x64(False)
    assert f(1).dtype == np.int32


def test_methods_and_kwargs() -> None:
    class Model:
        scale = 3.0

        @sj.jit(static_argnums=0)
        def apply(self, x: Any) -> Any:
            return x * self.scale

    np.testing.assert_allclose(np.asarray(Model().apply(np.ones(2, np.float32))), 3.0)
    with pytest.raises(TypeError, match=r"to jit\(f\) as an abstract array\. The problematic value is of type <class '.*Bad'>.* at path self\."):
        class Bad:
            @sj.jit
            def f(self, x: Any) -> Any:
                return x
        Bad().f(1.0)
    f = sj.jit(lambda x, *, k: x * k)
    np.testing.assert_allclose(np.asarray(f(np.ones(2, np.float32), k=4.0)), 4.0)
    np.testing.assert_allclose(np.asarray(f(np.ones(2, np.float32), k=5.0)), 5.0)
    assert f.__name__ == "<lambda>"
    decorated = sj.jit(static_argnums=1)(lambda x, n: x * n)
    np.testing.assert_allclose(np.asarray(decorated(np.ones(2, np.float32), 3)), 3.0)


def test_device_and_backend_pin_the_computation() -> None:
    devices = px.devices()
    if len(devices) < 4:
        pytest.skip("needs 4 devices")
    out = sj.jit(lambda x: x + 1, device=devices[3])(np.ones(2, np.float32))
    assert out.sharding == px.SingleDeviceSharding(devices[3]) and out.committed
    out = sj.jit(lambda x: x + 1, backend="cpu")(np.ones(2, np.float32))
    assert out.sharding == px.SingleDeviceSharding(devices[0])
    with pytest.raises(ValueError, match="can't specify both a device and a backend"):
        sj.jit(lambda x: x, device=devices[0], backend="cpu")


def test_repeated_calls_under_a_transformation_reuse_inferred_params() -> None:
    from lamina_tracing_core import api, lax
    count = [0]

    def f(x: Any) -> Any:
        count[0] += 1
        return lax.sin(x)

    jf = sj.jit(f)
    g = api.grad(lambda x: jf(x))
    for v in (0.1, 0.2, 0.3):
        np.testing.assert_allclose(float(g(v)), np.cos(v), rtol=1e-6)
    assert count[0] == 1 and len(jf._jitted._calls) == 1


def test_messages_keep_jax_wording_and_add_names() -> None:
    """Code written for JAX matches on these phrases; lamina adds the
    function's name and the argument's path."""
    import warnings

    with pytest.raises(TypeError, match=r"^Error interpreting argument to jit\(<lambda>\) as "
                       r"an abstract array\. The problematic value is of type <class 'str'> "
                       r"\('hello'\) and was passed to the function at path y\['k'\]\."):
        sj.jit(lambda x, y: x)(1.0, {"k": "hello"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sj.jit(lambda x: x.sum(), donate_argnums=0)(px.device_put(np.ones(3, np.float32)))
    messages = [str(w.message) for w in caught]
    assert "Some donated buffers were not usable: float32[3] 'x' (in jit(<lambda>))." \
        in messages, messages


def test_python_int_overflow_names_the_argument() -> None:
    with pytest.raises(OverflowError, match=r"^An overflow was encountered while parsing an "
                       r"argument to a jitted computation, whose argument path is y\[0\] "
                       r"\(jit\(<lambda>\)\): Python int 1099511627776 does not fit in int32"):
        sj.jit(lambda x, y: x)(1, [2**40])
    assert int(sj.jit(lambda x: x)(2**31 - 1)) == 2**31 - 1


def test_out_info_reads_like_a_shape_dtype_struct() -> None:
    traced = sj.jit(lambda x: (x, {"a": x.sum()})).trace(np.ones(3, np.float32))
    first, rest = traced.out_info
    assert (first.shape, first.dtype, first.ndim, first.size, first.weak_type) == \
        ((3,), np.dtype(np.float32), 1, 3, False)
    assert rest["a"].name == "result[1]['a']" and rest["a"].ndim == 0
