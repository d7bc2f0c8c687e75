"""Transfer guards: implicit transfers refused or logged, explicit ones
(``device_put``, ``device_get``) let through, as in JAX 0.10.2 (messages
recorded from JAX: jaxlib's guard makes them in both)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import lamina as lx
import lamina.numpy as jnp
import numpy as np
import pytest
from lamina import config

_H2D = ("Disallowed host-to-device transfer: aval=ShapedArray(float32[3]), "
        "dst_sharding=SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)")


@pytest.fixture(autouse=True)
def _reset_global_levels() -> Iterator[None]:
    yield
    config.update("jax_transfer_guard", None)


def _host() -> np.ndarray:
    return np.ones(3, np.float32)


def test_disallow_refuses_implicit_host_to_device() -> None:
    f = lx.jit(lambda x: x + 1)
    f(_host())  # compiled outside the guard
    with lx.transfer_guard("disallow"):
        with pytest.raises(lx.errors.JaxRuntimeError) as info:
            f(_host())
        assert str(info.value) == "INVALID_ARGUMENT: " + _H2D
        with pytest.raises(lx.errors.JaxRuntimeError, match="host-to-device"):
            f(1.0)
        with pytest.raises(lx.errors.JaxRuntimeError, match="host-to-device"):
            jnp.asarray([1.0, 2.0])
        with pytest.raises(lx.errors.JaxRuntimeError, match="host-to-device"):
            jnp.array(_host())
        # explicit: allowed
        placed = lx.device_put(_host())
        np.testing.assert_array_equal(np.asarray(f(placed)), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(f(_host())), [2.0, 2.0, 2.0])  # restored


def test_disallow_explicit_refuses_device_put_too() -> None:
    with lx.transfer_guard("disallow_explicit"):
        with pytest.raises(lx.errors.JaxRuntimeError, match="Disallowed host-to-device"):
            lx.device_put(_host())
    with lx.transfer_guard_host_to_device("disallow_explicit"):
        with pytest.raises(lx.errors.JaxRuntimeError, match="Disallowed host-to-device"):
            lx.device_put(_host())


def test_device_to_device() -> None:
    x = lx.device_put(_host(), lx.devices()[0])
    with lx.transfer_guard_device_to_device("disallow"):
        moved = lx.device_put(x, lx.devices()[1])  # explicit
        assert moved.devices() == {lx.devices()[1]}
    with lx.transfer_guard_device_to_device("disallow_explicit"):
        with pytest.raises(lx.errors.JaxRuntimeError,
                           match="Disallowed device-to-device transfer"):
            lx.device_put(x, lx.devices()[1])


def test_device_to_host_on_cpu_needs_no_transfer() -> None:
    # as in JAX on CPU: NumPy reads the buffer in place, so nothing is guarded
    y = lx.jit(lambda x: x * 2)(lx.device_put(_host()))
    with lx.transfer_guard("disallow_explicit"):
        np.testing.assert_array_equal(np.asarray(y), [2.0, 2.0, 2.0])
        assert lx.device_get(y).tolist() == [2.0, 2.0, 2.0]


def test_one_direction_leaves_the_others() -> None:
    x = lx.device_put(_host(), lx.devices()[0])
    with lx.transfer_guard_host_to_device("disallow_explicit"):
        assert lx.device_put(x, lx.devices()[1]).devices() == {lx.devices()[1]}
        assert config.read("jax_transfer_guard_host_to_device") == "disallow_explicit"
        assert config.read("jax_transfer_guard_device_to_device") is None


def test_config_sets_the_process_level_and_contexts_override_it() -> None:
    f = lx.jit(lambda x: x + 1)
    f(_host())
    assert config.read("jax_transfer_guard_host_to_device") is None
    config.update("jax_transfer_guard", "disallow")
    assert config.jax_transfer_guard_device_to_host == "disallow"
    assert config.read("jax_transfer_guard") == "disallow"
    with pytest.raises(lx.errors.JaxRuntimeError, match="host-to-device"):
        f(_host())
    with lx.transfer_guard_host_to_device("allow"):
        assert config.read("jax_transfer_guard_host_to_device") == "allow"
        f(_host())
    config.update("jax_transfer_guard_host_to_device", "allow")
    f(_host())
    config.update("jax_transfer_guard", None)
    assert config.read("jax_transfer_guard_device_to_host") is None


def test_levels_are_thread_local() -> None:
    seen: list[object] = []
    with lx.transfer_guard("disallow"):
        worker = threading.Thread(
            target=lambda: seen.append(config.read("jax_transfer_guard_host_to_device")))
        worker.start()
        worker.join()
    assert seen == [None]


def test_bad_levels_raise_jax_message() -> None:
    message = ("new enum value must be None or in ['allow', 'log', 'disallow', "
               "'log_explicit', 'disallow_explicit'], got nope of type <class 'str'>.")
    with pytest.raises(ValueError) as info:
        with lx.transfer_guard("nope"):
            pass
    assert str(info.value) == message
    with pytest.raises(ValueError, match="got 3 of type <class 'int'>"):
        config.update("jax_transfer_guard_host_to_device", 3)
    with pytest.raises(ValueError, match="got bad"):
        with lx.transfer_guard_device_to_device("bad"):
            pass


def test_log_level_logs_and_allows(capfd: pytest.CaptureFixture[str]) -> None:
    f = lx.jit(lambda x: x - 1)
    f(_host())
    capfd.readouterr()
    with lx.transfer_guard("log"):
        np.testing.assert_array_equal(np.asarray(f(_host())), [0.0, 0.0, 0.0])
        lx.device_put(_host())  # explicit: not logged under "log"
    err = capfd.readouterr().err
    assert err.count("host-to-device transfer: aval=ShapedArray(float32[3])") == 1
    with lx.transfer_guard("log_explicit"):
        lx.device_put(_host())
    assert "host-to-device transfer" in capfd.readouterr().err


class _Holder:
    x: object
    me: object


def test_array_garbage_collection_guard_logs_cycle_collected_arrays(
        capfd: pytest.CaptureFixture[str]) -> None:
    # JAX 0.10.2's message (jaxlib's guard makes it for lamina's arrays too)
    message = "`jax.Array` was deleted by the Python garbage collector instead of reference"
    gc.collect()
    capfd.readouterr()
    with lx.array_garbage_collection_guard("log"):
        assert config.read("jax_array_garbage_collection_guard") == "log"
        holder = _Holder()
        holder.me, holder.x = holder, jnp.ones(3) + 1
        del holder
        gc.collect()
    assert message in capfd.readouterr().err
    assert config.read("jax_array_garbage_collection_guard") is None
    holder = _Holder()
    holder.me, holder.x = holder, jnp.ones(3) + 2
    del holder
    gc.collect()  # the default level: nothing said
    assert message not in capfd.readouterr().err
    config.update("jax_array_garbage_collection_guard", "log")
    try:
        assert config.read("jax_array_garbage_collection_guard") == "log"
    finally:
        config.update("jax_array_garbage_collection_guard", None)
    with pytest.raises(ValueError, match=r"in \['allow', 'log', 'fatal'\], got bad"):
        with lx.array_garbage_collection_guard("bad"):
            pass
